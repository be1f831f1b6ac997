//! `[gates]`.

use super::common::{no_repeats, p, positive};
use crate::campaign::diag::{FieldPath, Reporter};
use crate::campaign::paths::resolve;
use crate::campaign::spec::Campaign;
use std::path::{Path, PathBuf};

pub(super) fn suite(r: &mut Reporter, path: &FieldPath, dir: &Path, suite: &mut Option<PathBuf>) {
    if let Some(s) = suite {
        *s = resolve(dir, s);
        if !s.is_file() {
            r.error(
                path,
                format!("suite file {} does not exist", s.display()),
                "give a path relative to the campaign file's directory, or leave `suite` out for the built-in suite",
            );
        }
    }
}

pub(super) fn gates(c: &mut Campaign, dir: &Path, r: &mut Reporter) {
    let g = &mut c.gates;
    no_repeats(
        r,
        "gates.preflight",
        &g.preflight,
        |x| x.as_str(),
        "list each gate once",
    );
    if let Some(t) = &mut g.tools {
        positive(r, "gates.tools.batch", t.batch.into(), "the tools batch");
        if t.variants.is_empty() {
            r.error(
                &p("gates.tools.variants"),
                "no variants",
                "list at least one of \"plain\", \"streaming\", \"round-trip\"",
            );
        }
        no_repeats(
            r,
            "gates.tools.variants",
            &t.variants,
            |v| v.as_str(),
            "list each variant once",
        );
        suite(r, &p("gates.tools.suite"), dir, &mut t.suite);
    }
    if let Some(q) = &mut g.quality {
        positive(
            r,
            "gates.quality.repetitions",
            q.repetitions.into(),
            "quality repetitions",
        );
        suite(r, &p("gates.quality.suite"), dir, &mut q.suite);
    }
    if let Some(rt) = &mut g.retrieval {
        if !(1..=12).contains(&rt.needles) {
            r.error(
                &p("gates.retrieval.needles"),
                format!("{} needles", rt.needles),
                "plant 1 to 12 needles",
            );
        }
        positive(
            r,
            "gates.retrieval.max_tokens",
            rt.max_tokens.into(),
            "the retrieval answer's max_tokens",
        );
        if rt.depths.is_empty() {
            let n = rt.needles.max(1);
            rt.depths = (0..n)
                .map(|i| f64::from(i + 1) / f64::from(n + 1))
                .collect();
        } else if rt.depths.len() != rt.needles as usize {
            r.error(
                &p("gates.retrieval.depths"),
                format!("{} depths for {} needles", rt.depths.len(), rt.needles),
                "give one depth per needle, or leave depths out to spread the needles evenly",
            );
        }
        for (i, d) in rt.depths.iter().enumerate() {
            if !(d.is_finite() && (0.0..=1.0).contains(d)) {
                r.error(
                    &p("gates.retrieval.depths").index(i),
                    format!("depth {d} is outside 0..1"),
                    "give depths as fractions of the prompt, 0 = start, 1 = end",
                );
            }
        }
    }
}
