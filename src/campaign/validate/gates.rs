//! `[gates]`.

use super::common::{limits, no_repeats, p, within};
use crate::campaign::diag::{FieldPath, Reporter};
use crate::campaign::paths::resolve;
use crate::campaign::spec::Campaign;
use std::path::{Path, PathBuf};

pub(super) fn suite(
    r: &mut Reporter,
    path: &FieldPath,
    dir: &Path,
    suite: &mut Option<PathBuf>,
    quality: bool,
) {
    if let Some(s) = suite {
        *s = resolve(dir, s);
        if !s.is_file() {
            r.error(
                path,
                format!("suite file {} does not exist", s.display()),
                "give a path relative to the campaign file's directory, or leave `suite` out for the built-in suite",
            );
            return;
        }
        // The suite is checked now, not when its gate runs half way through the campaign.
        let loaded = if quality {
            crate::gates::builtin::load_quality(Some(s)).err()
        } else {
            crate::gates::builtin::load_tools(Some(s)).err()
        };
        if let Some(mut e) = loaded {
            let fix = e.fix.take().map(String::from).unwrap_or_else(|| {
                "fix the suite file (docs/suites.md), or leave `suite` out for the built-in suite"
                    .to_string()
            });
            r.error(path, format!("the suite is refused: {e}"), fix);
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
        within(
            r,
            &p("gates.tools.batch"),
            t.batch.into(),
            1,
            limits::TOOLS_BATCH,
            "requests per variant",
        );
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
        suite(r, &p("gates.tools.suite"), dir, &mut t.suite, false);
    }
    if let Some(q) = &mut g.quality {
        within(
            r,
            &p("gates.quality.repetitions"),
            q.repetitions.into(),
            1,
            limits::QUALITY_REPETITIONS,
            "attempts per item",
        );
        if let Some(h) = q.reasoning_headroom {
            within(
                r,
                &p("gates.quality.reasoning_headroom"),
                h,
                0,
                limits::REASONING_HEADROOM,
                "tokens",
            );
        }
        suite(r, &p("gates.quality.suite"), dir, &mut q.suite, true);
    }
    if let Some(rt) = &mut g.retrieval {
        if !(1..=12).contains(&rt.needles) {
            r.error(
                &p("gates.retrieval.needles"),
                format!("{} needles", rt.needles),
                "plant 1 to 12 needles",
            );
        }
        within(
            r,
            &p("gates.retrieval.max_tokens"),
            rt.max_tokens.into(),
            1,
            limits::MAX_TOKENS,
            "tokens of the retrieval answer",
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
