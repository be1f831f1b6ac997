//! The words of the verdict, built from data: the reason, the per-arm decision text and the
//! limitations.

use super::eligibility::{ArmExt, Eligibility};
use super::metric::{
    descriptor, interval_text, measure, measure_at, overlap_text, priority_record, words_at,
    DECODE, TTFT,
};
use super::policy::{restored, PolicyOutcome};
use super::rank::{self, Pick};
use super::{ArmVerdict, FailureItem};
use crate::evidence::result::{ArmResult, ArmStatus, CampaignResult};
use crate::evidence::{GateName, GateStatus, Policy, RankingMetric, RestorationStatus};
use std::collections::BTreeMap;

/// A number the way the reports print it (defined with the metrics: the capacity words share it).
pub use super::metric::num;

fn ordinal(i: usize) -> &'static str {
    ["first", "second", "third", "fourth", "fifth", "sixth"]
        .get(i)
        .copied()
        .unwrap_or("next")
}

fn label(r: &CampaignResult, id: &str) -> String {
    r.arm(id)
        .map(|a| a.label_or_id())
        .unwrap_or_else(|| id.to_string())
}

/// The metric's words, with the level the `concurrency` and `goodput` priorities compare when
/// the campaign names it.
fn describe(r: &CampaignResult, m: RankingMetric) -> String {
    words_at(m, r.workload.concurrency_priority_level)
}

fn short(m: RankingMetric) -> &'static str {
    descriptor(m).short
}

fn unit(m: RankingMetric) -> &'static str {
    descriptor(m).unit
}

fn value_text(arm: &ArmResult, m: RankingMetric, level: Option<u64>) -> String {
    if m == RankingMetric::Capacity {
        return super::capacity::text(arm);
    }
    if let Some(t) = super::energy::text_of(arm, m, level) {
        return t;
    }
    let over = over_requests(arm, m, level);
    match measure_at(arm, m, level) {
        Some(v) => match v.stat {
            Some(s) => format!(
                "{} {}, {}{over}",
                num(v.value),
                unit(m),
                interval_text(&s, unit(m), num)
            ),
            None => format!("{} {}{over}", num(v.value), unit(m)),
        },
        None => "not measured".into(),
    }
}

/// How many requests a measured figure was computed over: ", over 5 requests" (", over 8 of 10
/// requests at C2, 2 failed"); empty for figures not measured per request (usable context).
pub fn over_requests(arm: &ArmResult, m: RankingMetric, level: Option<u64>) -> String {
    let (t, n, at) = match m {
        RankingMetric::Ttft | RankingMetric::DecodeTokensPerSecond | RankingMetric::E2e => {
            let Some(t) = arm.warm.as_ref() else {
                return String::new();
            };
            let n = descriptor(m).stat(t).map(|s| s.n).unwrap_or(t.requests_ok);
            (t, n, super::reuse::turns_covered(arm))
        }
        RankingMetric::Concurrency | RankingMetric::Goodput => {
            let Some((k, t)) = priority_record(arm, m, level) else {
                return String::new();
            };
            if let (RankingMetric::Goodput, Some(g)) = (m, t.goodput) {
                return format!(
                    ", {} of {} successful requests within every limit at C{k}",
                    g.requests_meeting, g.requests_ok
                );
            }
            (t, t.requests_ok, format!(" at C{k}"))
        }
        _ => return String::new(),
    };
    let sent = t.requests_ok + t.requests_failed;
    if t.requests_failed > 0 {
        format!(
            ", over {n} of {sent} requests{at}, {} failed",
            t.requests_failed
        )
    } else if n == sent {
        format!(", over {n} requests{at}")
    } else {
        format!(", over {n} of {sent} requests{at}")
    }
}

/// What the winner passed, in words: "smoke, json, streaming, tools 60/60, 24400-token
/// actual-prompt retrieval and C2".
pub fn passed_summary(arm: &ArmResult) -> String {
    let mut parts: Vec<String> = Vec::new();
    for g in arm.gates.iter().filter(|g| g.status == GateStatus::Passed) {
        if g.name == GateName::Retrieval {
            continue;
        }
        // Preflight gates are one request each: their 1/1 says nothing.
        let counted = !matches!(
            g.name,
            GateName::Smoke | GateName::Json | GateName::Streaming
        );
        match (g.passed, g.total) {
            (Some(p), Some(t)) if counted => parts.push(format!("{} {p}/{t}", g.name)),
            _ => parts.push(g.name.to_string()),
        }
    }
    if let Some(l) = arm.long_context.as_ref().filter(|l| l.passed) {
        let t = l
            .actual_prompt_tokens
            .iter()
            .max()
            .copied()
            .unwrap_or(l.target_tokens);
        parts.push(format!("{t}-token actual-prompt retrieval"));
    } else if arm
        .gates
        .iter()
        .any(|g| g.name == GateName::Retrieval && g.status == GateStatus::Passed)
    {
        parts.push("retrieval".into());
    }
    let mut levels: Vec<u64> = arm
        .concurrency
        .keys()
        .filter_map(|k| k.parse().ok())
        .collect();
    levels.sort();
    for c in levels {
        parts.push(format!("C{c}"));
    }
    match parts.len() {
        0 => "no recorded gates".into(),
        1 => parts[0].clone(),
        n => format!("{} and {}", parts[..n - 1].join(", "), parts[n - 1]),
    }
}

/// One sentence: who won, on which priority, by how much, and what it passed.
pub fn reason(
    r: &CampaignResult,
    prios: &[RankingMetric],
    tol: &BTreeMap<RankingMetric, f64>,
    pick: Option<&Pick>,
    elig: &Eligibility,
) -> String {
    let lvl = r.workload.concurrency_priority_level;
    let Some(p) = pick else {
        // Sorted by name, as the reason has always listed them.
        let mut classes: Vec<&str> = elig.failures.iter().map(|f| f.class.as_str()).collect();
        classes.sort();
        classes.dedup();
        return format!(
            "No arm is eligible: {} failure(s) ({}) left no measured arm that passed every required gate.",
            elig.failures.len(),
            if classes.is_empty() { "none recorded".to_string() } else { classes.join(", ") }
        );
    };
    let Some(w) = r.arm(&p.arm) else {
        return String::new();
    };
    let passing = passed_summary(w);
    let Some(i) = p.decided_by else {
        if elig.eligible.len() == 1 {
            return format!(
                "{} is the only eligible arm ({} {}), passing {passing}.",
                w.label_or_id(),
                describe(r, prios[0]),
                value_text(w, prios[0], lvl)
            );
        }
        let within = p.tied_with.iter().find_map(|(i, set)| {
            let t = tol.get(&prios[*i]).copied().unwrap_or(0.0);
            rank::spread_words(r, prios[*i], &p.arm, set, t).map(|w| format!("; {}", w.0))
        });
        return format!(
            "{} tied with {} on every priority ({}{}) and is listed first for its {} ({}), passing {passing}.",
            w.label_or_id(),
            p.tied_with
                .values()
                .next_back()
                .into_iter()
                .flatten()
                .filter(|x| **x != p.arm)
                .map(|x| label(r, x))
                .collect::<Vec<_>>()
                .join(", "),
            prios.iter().map(|m| m.as_str()).collect::<Vec<_>>().join(" > "),
            within.unwrap_or_default(),
            describe(r, prios[0]),
            value_text(w, prios[0], lvl)
        );
    };
    let m = prios[i];
    let next = p
        .runner_up
        .as_ref()
        .and_then(|id| r.arm(id))
        .and_then(|a| Some((a, measure_at(a, m, lvl)?)))
        .map(|(a, v)| match m {
            // The loser's bracket and what broke it, or what its figure rests on.
            RankingMetric::Capacity | RankingMetric::EnergyPerMtok | RankingMetric::CostPerMtok => {
                format!("; next best {}: {}", a.label_or_id(), value_text(a, m, lvl))
            }
            _ => format!(
                "; next best {} at {} {}",
                a.label_or_id(),
                num(v.value),
                unit(m)
            ),
        })
        .unwrap_or_default();
    let won = format!(
        "{} priority, {} ({}{next})",
        ordinal(i),
        describe(r, m),
        value_text(w, m, lvl)
    );
    if i == 0 {
        return format!(
            "{} won the operator-declared {won}, while passing {passing}.",
            w.label_or_id()
        );
    }
    let ties: Vec<String> = (0..i)
        .map(|j| {
            if !p.tied_with.contains_key(&j) {
                let (n, m) = (ordinal(j), describe(r, prios[j]));
                return format!("nobody (no arm was measured on the {n} priority, {m})");
            }
            let names: Vec<String> = p
                .tied_with
                .get(&j)
                .map(|v| {
                    v.iter()
                        .filter(|x| **x != p.arm)
                        .map(|x| label(r, x))
                        .collect()
                })
                .unwrap_or_default();
            let t = tol.get(&prios[j]).copied().unwrap_or(0.0);
            // The intervals the tie rule compared, named for what they are (a range below the
            // sample size a 95 % interval needs).
            let stats: Vec<_> = p
                .tied_with
                .get(&j)
                .into_iter()
                .flatten()
                .filter_map(|x| measure_at(r.arm(x)?, prios[j], lvl)?.stat)
                .collect();
            let how = match (stats.is_empty(), t > 0.0) {
                (false, true) => {
                    // "ranges overlap: n=3, no 95 % interval possible" → "ranges overlap or
                    // within the declared 5.0% tolerance; n=3, no 95 % interval possible"
                    let o = overlap_text(&stats);
                    let (what, note) = match o.split_once(": ") {
                        Some((w, n)) => (w.to_string(), format!("; {n}")),
                        None => (o, String::new()),
                    };
                    format!(
                        "{what} or within the declared {}% tolerance{note}",
                        num(t * 100.0)
                    )
                }
                (false, false) => overlap_text(&stats),
                (true, true) => format!("within the declared {}% tolerance", num(t * 100.0)),
                (true, false) => "equal".into(),
            };
            let set = p.tied_with.get(&j).cloned().unwrap_or_default();
            let how = rank::with_spread(how, r, prios[j], &p.arm, &set, t);
            format!(
                "{} on the {} priority, {} ({how})",
                names.join(" and "),
                ordinal(j),
                describe(r, prios[j])
            )
        })
        .collect();
    format!(
        "{} tied with {}, so the {won} decided, while passing {passing}.",
        w.label_or_id(),
        ties.join("; ")
    )
}

fn max_served(r: &CampaignResult) -> u64 {
    r.arms
        .iter()
        .filter(|a| a.status != ArmStatus::Pending)
        .map(|a| a.served_context)
        .max()
        .unwrap_or(0)
}

/// The best measured arm (eligible or not) on a metric, when its lead is real by the ranking's
/// own tie rule: it ties with no other measured arm (intervals overlap, or within the declared
/// tolerance). None when the best ties with another: no arm is "the X winner" then.
fn best_measured(
    r: &CampaignResult,
    m: RankingMetric,
    tol: &BTreeMap<RankingMetric, f64>,
) -> Option<String> {
    let vals: Vec<(String, rank::Measure)> = r
        .arms
        .iter()
        .filter_map(|a| {
            Some((
                a.id.clone(),
                measure_at(a, m, r.workload.concurrency_priority_level)?,
            ))
        })
        .collect();
    let (id, best) = vals.iter().cloned().reduce(|x, y| {
        if rank::better(m, y.1.value, x.1.value) {
            y
        } else {
            x
        }
    })?;
    let t = tol.get(&m).copied().unwrap_or(0.0);
    let cross = super::spread::Cross::of(r);
    vals.iter()
        .all(|(x, v)| {
            *x == id || !(rank::ties(best, *v, t) || cross.within(m, &id, x, best.value, v.value))
        })
        .then_some(id)
}

/// The arms a decision text singles out, found once for all arms.
struct Standouts<'a> {
    winner: Option<&'a String>,
    /// The deciding metric, or why none decided: "TTFT winner", "the only eligible arm", ….
    lead: String,
    ttft_best: Option<String>,
    decode_best: Option<String>,
    /// The best-ranked eligible arm below the full context (not a control).
    bounded_best: Option<String>,
    /// The best balanced full-context fallback.
    fallback: Option<String>,
    /// Control arm → the speculative arms it controls.
    controls: BTreeMap<String, Vec<String>>,
    /// The largest served context.
    full: u64,
}

impl Standouts<'_> {
    /// A control is named as one whatever else it is.
    fn is_control(&self, a: &ArmResult) -> bool {
        a.role == "control" || self.controls.contains_key(&a.id)
    }
}

/// Best balanced full-context fallback: eligible, full context, not the winner nor the
/// incumbent nor a control, with the best product of TTFT and decode relative to the best
/// measured.
fn balanced_fallback(r: &CampaignResult, ranking: &[String], st: &Standouts) -> Option<String> {
    let best_value = |m: RankingMetric| {
        r.arms
            .iter()
            .filter_map(|a| measure(a, m).map(|x| x.value))
            .reduce(|x, y| if rank::better(m, y, x) { y } else { x })
    };
    let (bt, bd) = (
        best_value(RankingMetric::Ttft),
        best_value(RankingMetric::DecodeTokensPerSecond),
    );
    ranking
        .iter()
        .filter(|id| Some(*id) != st.winner)
        .filter_map(|id| r.arm(id))
        .filter(|a| a.served_context == st.full && a.role != "incumbent" && !st.is_control(a))
        .filter_map(|a| {
            let t = measure(a, RankingMetric::Ttft)?.value;
            let d = measure(a, RankingMetric::DecodeTokensPerSecond)?.value;
            Some((a.id.clone(), (bt? / t) * (d / bd?)))
        })
        .reduce(|x, y| if y.1 > x.1 { y } else { x })
        .map(|(id, _)| id)
}

fn standouts<'a>(
    r: &CampaignResult,
    prios: &[RankingMetric],
    tol: &BTreeMap<RankingMetric, f64>,
    ranking: &'a [String],
    decided_by: Option<usize>,
) -> Standouts<'a> {
    let controls: BTreeMap<String, Vec<String>> =
        r.arms.iter().fold(BTreeMap::new(), |mut m, a| {
            if let Some(s) = &a.speculative {
                m.entry(s.control.clone()).or_default().push(a.id.clone());
            }
            m
        });
    let lead = match decided_by {
        Some(i) => format!("{} winner", short(prios[i])),
        None if ranking.len() == 1 => "the only eligible arm".to_string(),
        None => "tied on every priority, listed first".to_string(),
    };
    let mut st = Standouts {
        winner: ranking.first(),
        lead,
        ttft_best: best_measured(r, RankingMetric::Ttft, tol),
        decode_best: best_measured(r, RankingMetric::DecodeTokensPerSecond, tol),
        bounded_best: None,
        fallback: None,
        controls,
        full: max_served(r),
    };
    st.bounded_best = ranking
        .iter()
        .find(|id| {
            r.arm(id)
                .is_some_and(|a| a.served_context < st.full && !st.is_control(a))
        })
        .cloned();
    st.fallback = balanced_fallback(r, ranking, &st);
    st
}

/// The winner's text: what it won on, and whether it stays, or is promoted.
fn winner_text(a: &ArmResult, st: &Standouts, pol: &PolicyOutcome) -> (String, &'static str) {
    let lead = &st.lead;
    if a.role == "incumbent" {
        (format!("{lead}; the incumbent stays current"), "current")
    } else if pol.authorized {
        (
            format!("{lead} and preferred measured challenger; promotion authorized"),
            "challenger",
        )
    } else {
        (
            format!("{lead} and preferred measured challenger; no promotion"),
            "challenger",
        )
    }
}

/// A failed arm's text: why it cannot win (named as the best on a metric when it was).
fn rejected_text(
    r: &CampaignResult,
    a: &ArmResult,
    f: &FailureItem,
    st: &Standouts,
) -> (String, &'static str) {
    let best_on = if st.decode_best.as_deref() == Some(&a.id) {
        Some(DECODE.short)
    } else if st.ttft_best.as_deref() == Some(&a.id) {
        Some(TTFT.short)
    } else {
        None
    };
    let lab = if a.role == "incumbent" && !restored(r) {
        "rollback"
    } else {
        "rejected"
    };
    match best_on {
        Some(w) => (
            format!(
                "{w} winner but rejected as a general-purpose winner after {} failure",
                f.class
            ),
            lab,
        ),
        None => (format!("rejected: {} ({})", f.class, f.detail), lab),
    }
}

/// The best bounded-context arm's text: its context, tools score and free GPU memory.
fn bounded_best_text(a: &ArmResult, ranked: &str) -> String {
    let mut s = format!("best bounded-context arm ({} tokens)", a.served_context);
    if let Some(g) = a
        .gates
        .iter()
        .find(|g| g.name == GateName::Tools && g.status == GateStatus::Passed)
    {
        if let (Some(p), Some(t)) = (g.passed, g.total) {
            s.push_str(&format!("; tools {p}/{t}"));
        }
    }
    if let Some(f) = a.gpu_free_after_start_mib {
        s.push_str(&format!("; {f} MiB GPU memory free"));
    }
    format!("{s}; {ranked}")
}

/// An arm's decision text and label, first rule that applies (README "Verdict rules").
fn arm_text(
    r: &CampaignResult,
    a: &ArmResult,
    st: &Standouts,
    failure: Option<&FailureItem>,
    pol: &PolicyOutcome,
    ranked: &str,
) -> (String, &'static str) {
    if Some(&a.id) == st.winner {
        winner_text(a, st, pol)
    } else if let Some(f) = failure {
        rejected_text(r, a, f, st)
    } else if matches!(a.status, ArmStatus::Pending | ArmStatus::Interrupted) {
        (
            format!(
                "not tested ({})",
                serde_json::to_value(a.status)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_default()
            ),
            "no-promotion",
        )
    } else if a.role == "incumbent" {
        if restored(r) {
            (format!("restored incumbent; {ranked}"), "current")
        } else {
            ("incumbent; restoration not proven".to_string(), "rollback")
        }
    } else if st.is_control(a) {
        let of = st
            .controls
            .get(&a.id)
            .map(|specs| {
                let names: Vec<String> = specs.iter().map(|x| label(r, x)).collect();
                format!("matched no-speculation control of {}", names.join(", "))
            })
            .unwrap_or_else(|| "control arm".to_string());
        (format!("{of}; {ranked}"), "no-promotion")
    } else if st.decode_best.as_deref() == Some(&a.id) {
        (format!("{} winner; {ranked}", DECODE.short), "no-promotion")
    } else if st.bounded_best.as_deref() == Some(&a.id) {
        (bounded_best_text(a, ranked), "no-promotion")
    } else if st.fallback.as_deref() == Some(&a.id) {
        (
            format!("best full-context balanced fallback; {ranked}"),
            "no-promotion",
        )
    } else if a.served_context < st.full {
        (
            format!(
                "bounded-context arm ({} tokens); {ranked}",
                a.served_context
            ),
            "no-promotion",
        )
    } else {
        (format!("eligible; {ranked}"), "no-promotion")
    }
}

/// Per-arm decision text and label (rules in README "Verdict rules").
pub fn arm_decisions(
    r: &CampaignResult,
    prios: &[RankingMetric],
    tol: &BTreeMap<RankingMetric, f64>,
    ranking: &[String],
    decided_by: Option<usize>,
    elig: &Eligibility,
    pol: &PolicyOutcome,
) -> Vec<ArmVerdict> {
    let n = ranking.len();
    let st = standouts(r, prios, tol, ranking, decided_by);
    let place = |id: &str| ranking.iter().position(|x| x == id).map(|p| p + 1);
    r.arms
        .iter()
        .map(|a| {
            let rk = place(&a.id);
            let ranked = rk
                .map(|k| format!("ranked {k} of {n} eligible"))
                .unwrap_or_default();
            let failure = elig.failures.iter().find(|f| f.arm == a.id);
            let (mut text, lab) = arm_text(r, a, &st, failure, pol, &ranked);
            // A capacity ranking states each arm's bracket and what broke it.
            if prios.contains(&RankingMetric::Capacity) && a.capacity.is_some() {
                text = format!("{text}; capacity: {}", super::capacity::text(a));
            }
            ArmVerdict {
                id: a.id.clone(),
                label: a.label_or_id(),
                role: a.role.clone(),
                eligible: rk.is_some(),
                rank: rk,
                decision_label: lab.to_string(),
                decision: text,
            }
        })
        .collect()
}

/// Limitations derived from the evidence.
pub fn limitations(r: &CampaignResult, policy: &Policy, elig: &Eligibility) -> Vec<String> {
    let mut out = Vec::new();
    let ran: Vec<&ArmResult> = r
        .arms
        .iter()
        .filter(|a| !matches!(a.status, ArmStatus::Pending | ArmStatus::Interrupted))
        .collect();
    // Bounded context.
    let full = max_served(r);
    let full_target = r
        .arms
        .iter()
        .filter(|a| a.served_context == full)
        .filter_map(|a| a.long_context.as_ref().map(|l| l.target_tokens))
        .max();
    let mut bounded: BTreeMap<(u64, String), Vec<String>> = BTreeMap::new();
    for a in ran
        .iter()
        .filter(|a| a.served_context < full && a.served_context > 0)
    {
        bounded
            .entry((
                a.served_context,
                a.long_context_profile.clone().unwrap_or_default(),
            ))
            .or_default()
            .push(a.label_or_id());
    }
    for ((ctx, profile), names) in bounded {
        let target = r.workload.long_context_targets.get(&profile);
        out.push(format!(
            "{} {} measured at a bounded {ctx}-token context{} rather than the full {full}-token one{}.",
            names.join(", "),
            if names.len() == 1 { "was" } else { "were" },
            target.map(|t| format!(" (long-context profile `{profile}`, {t}-token retrieval)")).unwrap_or_default(),
            full_target.map(|t| format!(" ({t}-token retrieval)")).unwrap_or_default()
        ));
    }
    // Quality risks from engine logs.
    for a in &r.arms {
        for line in &a.quality_risk_lines {
            let risks: Vec<_> = policy
                .quality_risks
                .iter()
                .filter(|q| line.contains(&q.pattern))
                .collect();
            if risks.is_empty() {
                out.push(format!(
                    "{}'s engine log flagged a quality risk: \"{}\".",
                    a.label_or_id(),
                    line.trim()
                ));
            }
            for q in risks {
                out.push(format!(
                    "{}: {} (engine log: \"{}\")",
                    a.label_or_id(),
                    q.limitation.trim(),
                    line.trim()
                ));
            }
        }
    }
    // Gates that ran on only some arms.
    let mut names: Vec<GateName> = Vec::new();
    for a in &ran {
        for g in &a.gates {
            if !names.contains(&g.name) {
                names.push(g.name);
            }
        }
    }
    for name in names {
        let without: Vec<String> = ran
            .iter()
            .filter(|a| !a.gates.iter().any(|g| g.name == name && g.status.ran()))
            .map(|a| a.label_or_id())
            .collect();
        if !without.is_empty() {
            out.push(format!(
                "The {name} gate ran on {} of {} arms that started; not on {}.",
                ran.len() - without.len(),
                ran.len(),
                without.join(", ")
            ));
        }
    }
    // Restoration.
    match &r.restoration {
        None => {
            out.push("The incumbent's restoration was not recorded, so it is not proven.".into())
        }
        Some(x) if x.status != RestorationStatus::Passed => out.push(format!(
            "The incumbent's restoration {}: {}.",
            x.status,
            x.detail.trim_end_matches('.')
        )),
        _ => {}
    }
    for id in &elig.untested {
        out.push(format!(
            "{} was not tested: the campaign stopped before it finished.",
            label(r, id)
        ));
    }
    // Matched prompt agreement.
    let mut reported: Vec<u64> = r
        .workload
        .matched_prompt_tokens_reported
        .values()
        .copied()
        .collect();
    reported.sort();
    reported.dedup();
    if reported.len() > 1 {
        out.push(format!(
            "The endpoints reported different matched prompt sizes ({}); arms are not strictly matched.",
            reported.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", ")
        ));
    }
    // Telemetry.
    let gpu = ran
        .iter()
        .filter(|a| a.gpu_peak_used_mib.is_some() || a.gpu_free_after_start_mib.is_some())
        .count();
    if gpu == 0 && !ran.is_empty() {
        out.push(
            "GPU memory was not measured on any arm (no GPU in the lane or no telemetry).".into(),
        );
    } else if gpu < ran.len() {
        out.push(format!(
            "GPU memory was measured on {gpu} of {} arms that started.",
            ran.len()
        ));
    }
    out.extend(intervals_limitation(&ran));
    out.extend(elig.notes.iter().cloned());
    out.extend(r.notes.iter().cloned());
    out
}

/// A limitation when warm medians rest on too few requests for a 95 % interval (the tie rule
/// then compares ranges), or carry bootstrap intervals of unknown coverage (older bundles).
fn intervals_limitation(ran: &[&ArmResult]) -> Vec<String> {
    use super::metric::{interval_kind, pct, IntervalKind, WARM_STATS};
    let mut ranges: BTreeMap<u64, (f64, Vec<String>)> = BTreeMap::new();
    let mut boot: Vec<String> = Vec::new();
    for a in ran {
        let Some(w) = a.warm.as_ref() else { continue };
        for d in WARM_STATS {
            let Some(s) = d.stat(w) else { continue };
            match interval_kind(&s) {
                IntervalKind::Range(c) => {
                    let e = ranges.entry(s.n).or_insert((c, Vec::new()));
                    if !e.1.contains(&a.label_or_id()) {
                        e.1.push(a.label_or_id());
                    }
                }
                IntervalKind::Bootstrap if !boot.contains(&a.label_or_id()) => {
                    boot.push(a.label_or_id())
                }
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    let measured = ran.iter().filter(|a| a.warm.is_some()).count();
    let every = ranges.len() == 1 && boot.is_empty();
    for (n, (c, names)) in ranges {
        let who = if every && names.len() == measured && measured > 1 {
            "Every measured arm".to_string()
        } else {
            // Labels may hold commas ("reference MTP, 3 drafts").
            names.join("; ")
        };
        out.push(format!(
            "{who} {} warm medians over {n} request{}: no 95 % interval of a median is possible below {} requests, so {} intervals are the ranges [min, max] (covering the median {} %), and ties were judged on those ranges.",
            if names.len() == 1 || who == "Every measured arm" { "has" } else { "have" },
            if n == 1 { "" } else { "s" },
            crate::metrics::stats::MIN_N_FOR_95,
            if names.len() == 1 && who != "Every measured arm" { "its" } else { "their" },
            pct(c)
        ));
    }
    if !boot.is_empty() {
        out.push(format!(
            "{}: the intervals of the medians are percentile bootstraps recorded by an older bakeoff; their coverage was not recorded.",
            boot.join(", ")
        ));
    }
    out
}
