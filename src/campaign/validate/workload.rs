//! `[workload]`, and the long-context targets the retrieval gate uses.

use super::common::{limits, no_repeats, p, token_label, within};
use crate::campaign::diag::Reporter;
use crate::campaign::spec::{Arm, Campaign};
use std::collections::HashSet;

pub(super) fn workload(c: &mut Campaign, r: &mut Reporter) {
    let w = &mut c.workload;
    if w.ranking_priority.is_empty() {
        r.error(
            &p("workload.ranking_priority"),
            "empty ranking priority",
            "list what matters most first, e.g. [\"ttft\", \"decode_tokens_per_second\"]",
        );
    }
    no_repeats(
        r,
        "workload.ranking_priority",
        &w.ranking_priority,
        |m| m.as_str(),
        "list each metric once",
    );
    if w.conversation.is_none()
        && w.ranking_priority
            .contains(&crate::evidence::RankingMetric::TtftFirstTurn)
    {
        r.error(
            &p("workload.ranking_priority"),
            "`ttft_first_turn` ranks by the TTFT of conversations' first turns, but the workload has no conversations",
            "add [workload.conversation] with turns = N, or rank by \"ttft\"",
        );
    }
    within(
        r,
        &p("workload.matched_prompt_tokens"),
        w.matched_prompt_tokens.into(),
        1,
        limits::TOKENS,
        "tokens of the matched prompt",
    );
    within(
        r,
        &p("workload.max_tokens"),
        w.max_tokens.into(),
        1,
        limits::MAX_TOKENS,
        "tokens per completion",
    );
    within(
        r,
        &p("workload.warm_repetitions"),
        w.warm_repetitions.into(),
        1,
        limits::WARM_REPETITIONS,
        "warm requests per arm",
    );
    if w.concurrency.is_empty() {
        r.error(
            &p("workload.concurrency"),
            "no concurrency levels",
            "list at least [1]",
        );
    }
    if w.concurrency.len() as u64 > limits::CONCURRENCY_LEVELS {
        r.error(
            &p("workload.concurrency"),
            format!(
                "{} levels is outside the range 1..={} (levels per campaign)",
                w.concurrency.len(),
                limits::CONCURRENCY_LEVELS
            ),
            format!("list at most {} levels", limits::CONCURRENCY_LEVELS),
        );
    }
    let mut seen = HashSet::new();
    for (i, n) in w.concurrency.iter().enumerate() {
        if *n == 0 || u64::from(*n) > limits::CONCURRENCY {
            within(
                r,
                &p("workload.concurrency").index(i),
                (*n).into(),
                1,
                limits::CONCURRENCY,
                "requests in flight at once",
            );
        } else if !seen.insert(*n) {
            r.error(
                &p("workload.concurrency").index(i),
                format!("level {n} is listed twice"),
                "list each level once",
            );
        }
    }
    slo(w, r);
    for (name, tokens) in &w.long_context_targets {
        if *tokens == 0 {
            r.error(
                &p("workload.long_context_targets").key(name),
                "a long-context target of 0 tokens",
                "give the prompt tokens retrieval is tested at, e.g. 24000",
            );
        } else {
            within(
                r,
                &p("workload.long_context_targets").key(name),
                *tokens,
                1,
                limits::TOKENS,
                "prompt tokens",
            );
        }
    }
    if w.prompt_label.is_empty() {
        w.prompt_label = token_label(w.matched_prompt_tokens.into());
    } else if !w
        .prompt_label
        .chars()
        .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '.')
    {
        r.error(
            &p("workload.prompt_label"),
            format!("`{}` cannot go into a file name", w.prompt_label),
            "use lowercase letters, digits and `.`, e.g. \"4k\"",
        );
    }
    let s = &w.sampling;
    if !(s.temperature.is_finite() && (0.0..=2.0).contains(&s.temperature)) {
        r.error(
            &p("workload.sampling.temperature"),
            format!("temperature {} is out of range", s.temperature),
            "give a temperature from 0 to 2",
        );
    }
    if let Some(tp) = s.top_p {
        if !(tp.is_finite() && tp > 0.0 && tp <= 1.0) {
            r.error(
                &p("workload.sampling.top_p"),
                format!("top_p {tp} is out of range"),
                "give a top_p above 0 and at most 1, or leave it out",
            );
        }
    }
}

fn levels_text(levels: &[u32]) -> String {
    levels
        .iter()
        .map(|n| n.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// `[[workload.slo]]`, `concurrency_priority_level`, and the `goodput` priority's need of SLOs.
fn slo(w: &crate::campaign::spec::Workload, r: &mut Reporter) {
    use crate::evidence::RankingMetric;
    use crate::metrics::slo::SloLimit;
    let levels = &w.concurrency;
    let mut seen: Vec<(Option<u32>, SloLimit)> = Vec::new();
    for (i, e) in w.slo.iter().enumerate() {
        let at = p("workload.slo").index(i);
        match SloLimit::parse_list(&e.limit) {
            Err(msg) => r.error(
                &at.key("limit"),
                format!("SLO limit {msg}"),
                "give limit = \"ttft_p95=500ms\" (a comma list is allowed)",
            ),
            Ok(list) => {
                for l in list {
                    if seen.iter().any(|(c, o)| {
                        *c == e.concurrency && o.metric == l.metric && o.stat == l.stat
                    }) {
                        r.error(
                            &at.key("limit"),
                            format!(
                                "{} {} is limited twice at {}",
                                l.metric.name(),
                                l.stat.name(),
                                e.concurrency
                                    .map(|c| format!("concurrency {c}"))
                                    .unwrap_or_else(|| "every level".into())
                            ),
                            "give each metric and statistic one limit per level",
                        );
                    }
                    seen.push((e.concurrency, l));
                }
            }
        }
        if let Some(c) = e.concurrency {
            if !levels.contains(&c) {
                r.error(
                    &at.key("concurrency"),
                    format!(
                        "level {c} is not measured (workload.concurrency lists {})",
                        levels_text(levels)
                    ),
                    format!(
                        "use one of {}, add {c} to workload.concurrency, or leave concurrency out to apply the limit at every level",
                        levels_text(levels)
                    ),
                );
            }
        }
    }
    if let Some(c) = w.concurrency_priority_level {
        if !levels.contains(&c) {
            r.error(
                &p("workload.concurrency_priority_level"),
                format!(
                    "level {c} is not measured (workload.concurrency lists {})",
                    levels_text(levels)
                ),
                format!(
                    "use one of {}, or add {c} to workload.concurrency",
                    levels_text(levels)
                ),
            );
        } else if !w.ranking_priority.iter().any(|m| {
            matches!(
                m,
                RankingMetric::Concurrency
                    | RankingMetric::Goodput
                    | RankingMetric::EnergyPerMtok
                    | RankingMetric::CostPerMtok
            )
        }) {
            r.warn(
                &p("workload.concurrency_priority_level"),
                "no ranking priority reads it (it names the level of `concurrency`, `goodput`, `energy_per_mtok` and `cost_per_mtok`)",
                "add \"concurrency\" or \"goodput\" to workload.ranking_priority, or remove it",
            );
        }
    }
    if w.ranking_priority.contains(&RankingMetric::Goodput) {
        let level = w.priority_level();
        if w.slo.is_empty() {
            r.error(
                &p("workload.ranking_priority"),
                "`goodput` ranks by requests per second meeting the SLOs, but no SLO is declared",
                "add [[workload.slo]] entries, e.g. limit = \"ttft_p95=500ms\", or remove \"goodput\"",
            );
        } else if levels.contains(&level) && w.slo_at(level).is_empty() {
            r.error(
                &p("workload.ranking_priority"),
                format!("`goodput` is compared at level {level}, where no SLO applies"),
                format!(
                    "add an SLO at concurrency {level} (or one without concurrency), or set concurrency_priority_level to a level with SLOs"
                ),
            );
        }
    }
}

pub(super) fn long_context(c: &mut Campaign, r: &mut Reporter) {
    let targets = c.workload.long_context_targets.clone();
    let Some(rg) = c.gates.retrieval.clone() else {
        if !targets.is_empty() {
            r.error(
                &p("workload.long_context_targets"),
                "long-context targets are given but retrieval does not run",
                "add a [gates.retrieval] table, or remove the targets",
            );
        }
        return;
    };
    if targets.is_empty() {
        r.error(
            &p("gates.retrieval"),
            "retrieval runs but workload.long_context_targets is empty",
            "add targets per long-context profile, e.g. long_context_targets = { full = 24000 }",
        );
        return;
    }
    let choices = targets
        .keys()
        .map(|k| format!("\"{k}\""))
        .collect::<Vec<_>>()
        .join(", ");
    let only = (targets.len() == 1)
        .then(|| targets.keys().next().cloned())
        .flatten();
    for i in 0..c.arms.len() {
        let at = p("arms").index(i);
        let a: &mut Arm = &mut c.arms[i];
        if a.long_context_profile.is_none() {
            a.long_context_profile = only.clone();
        }
        let Some(name) = a.long_context_profile.clone() else {
            r.error(
                &at,
                format!("arm `{}` has no long_context_profile", a.id),
                format!("add long_context_profile = one of {choices}"),
            );
            continue;
        };
        let Some(&tokens) = targets.get(&name) else {
            r.error(
                &at.key("long_context_profile"),
                format!("`{name}` is not a key of workload.long_context_targets"),
                format!("use one of {choices}"),
            );
            continue;
        };
        let need = tokens + u64::from(rg.max_tokens);
        if a.served_context > 0 && need > a.served_context {
            let field = if r.index.contains(&at.key("long_context_profile")) {
                at.key("long_context_profile")
            } else {
                at.key("served_context")
            };
            r.error(
                &field,
                format!(
                    "long-context target `{name}` ({tokens} tokens) + the answer ({} tokens) exceeds arm `{}`'s served_context of {}",
                    rg.max_tokens, a.id, a.served_context
                ),
                "give this arm a smaller (bounded) long-context profile, or lower the target",
            );
        }
    }
}

/// Warns when the warm repetitions are too few for a 95 % interval of a median while the
/// ranking's tie rule compares such intervals (TTFT, decode, E2E): the tie rule then compares the
/// ranges `[min, max]`, and the verdict says so.
pub(super) fn interval_support(c: &Campaign, r: &mut Reporter) {
    use crate::evidence::result::MIN_N_FOR_95;
    use crate::evidence::RankingMetric;
    let n = c.workload.warm_repetitions as usize;
    if n == 0 || n >= MIN_N_FOR_95 {
        return;
    }
    let medians: Vec<&str> = c
        .workload
        .ranking_priority
        .iter()
        .filter(|m| {
            matches!(
                m,
                RankingMetric::Ttft
                    | RankingMetric::DecodeTokensPerSecond
                    | RankingMetric::E2e
                    | RankingMetric::TtftFirstTurn
            )
        })
        .map(|m| m.as_str())
        .collect();
    if medians.is_empty() {
        return;
    }
    // The range [min, max] of n samples misses the median only when all fall on one side.
    let cover = if n == 1 {
        0.0
    } else {
        (1.0 - 2.0 * 0.5f64.powi(n as i32)) * 100.0
    };
    r.warn(
        &p("workload.warm_repetitions"),
        format!(
            "{n} warm repetition{} cannot support a 95 % interval of a median (it needs {MIN_N_FOR_95}; the range of {n} covers the median {cover:.2} %), so the tie rule on {} will compare ranges [min, max] and the verdict will say so",
            if n == 1 { "" } else { "s" },
            medians.join(", ")
        ),
        format!("set warm_repetitions = {MIN_N_FOR_95} or more for a 95 % order-statistic interval"),
    );
}
