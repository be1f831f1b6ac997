//! Output length honored: with `ignore_eos` every timed request asks for exactly `max_tokens`
//! completion tokens, and E2E and throughput are only comparable between arms that gave them. An
//! arm some of whose responses stopped short has those figures flagged; beyond [`SHORT_LIMIT`] of
//! its requests it fails `compatibility` with the counts. Reasoning tokens are stated apart from
//! the visible ones, and an arm whose visible output was empty because reasoning took the whole
//! budget is named.

use super::requests::percent;
use crate::evidence::result::{ArmResult, OutputLength, TimingRecord};

/// The largest share of an arm's checked requests that may stop short before the arm fails
/// `compatibility` (a client-side cut or a rare early stop stays a flag, not a failure).
pub const SHORT_LIMIT: f64 = 0.05;

/// The arm's timed steps that checked the output length, each with its name in the verdict.
fn checked(arm: &ArmResult) -> Vec<(String, &TimingRecord, OutputLength)> {
    // The closed-loop steps the availability rule names, then the open-loop rates by key.
    let mut named = super::requests::timed(arm);
    named.extend(arm.rates.iter().map(|(k, t)| (k.clone(), t)));
    named
        .into_iter()
        .filter_map(|(n, t)| t.output_length.map(|o| (n, t, o)))
        .collect()
}

/// The arm's checked requests summed: (short, checked, the token counts asked, fewest given).
struct Totals {
    short: u64,
    requests: u64,
    asked: Vec<u64>,
    min: Option<u64>,
    steps: Vec<String>,
    worst: Option<String>,
}

fn totals(arm: &ArmResult) -> Option<Totals> {
    let steps = checked(arm);
    if steps.is_empty() {
        return None;
    }
    let mut t = Totals {
        short: 0,
        requests: 0,
        asked: Vec::new(),
        min: None,
        steps: Vec::new(),
        worst: None,
    };
    let mut worst = 0;
    for (name, rec, o) in &steps {
        t.requests += o.requests;
        if o.short == 0 {
            continue;
        }
        t.short += o.short;
        if !t.asked.contains(&o.asked) {
            t.asked.push(o.asked);
        }
        if let Some(m) = o.min_tokens {
            t.min = Some(t.min.map_or(m, |x: u64| x.min(m)));
        }
        t.steps
            .push(format!("{} of {} at {name}", o.short, o.requests));
        if o.short > worst {
            worst = o.short;
            t.worst = Some(rec.evidence.clone());
        }
    }
    Some(t)
}

fn shortfall(t: &Totals) -> String {
    let asked: Vec<String> = t.asked.iter().map(|a| a.to_string()).collect();
    format!(
        "{} of {} requests stopped short of the {} completion tokens asked (ignore_eos; fewest {}: {})",
        t.short,
        t.requests,
        asked.join("/"),
        t.min.map(|m| m.to_string()).unwrap_or_else(|| "?".into()),
        t.steps.join(", ")
    )
}

/// The detail and evidence file of a `compatibility` failure when more than [`SHORT_LIMIT`] of
/// the checked requests stopped short.
pub fn failure(arm: &ArmResult) -> Option<(String, Option<String>)> {
    let t = totals(arm)?;
    if t.requests == 0 || (t.short as f64 / t.requests as f64) <= SHORT_LIMIT {
        return None;
    }
    Some((
        format!(
            "output length not honored: {}; beyond the {} limit, its E2E and throughput are not comparable",
            shortfall(&t),
            percent(SHORT_LIMIT)
        ),
        t.worst,
    ))
}

/// The flag on an arm's decision when some responses stopped short (within the limit or not).
pub fn flag(arm: &ArmResult) -> Option<String> {
    let t = totals(arm)?;
    (t.short > 0).then(|| format!("E2E and throughput flagged: {}", shortfall(&t)))
}

/// Limitations: reasoning tokens apart from visible ones, and arms whose visible output was
/// empty because reasoning took the budget.
pub fn limitations(arms: &[ArmResult]) -> Vec<String> {
    let mut out = Vec::new();
    for a in arms {
        let steps = checked(a);
        let completion: u64 = steps.iter().map(|(_, _, o)| o.completion_tokens).sum();
        let reasoning: u64 = steps.iter().map(|(_, _, o)| o.reasoning_tokens).sum();
        let empty: u64 = steps.iter().map(|(_, _, o)| o.empty_visible).sum();
        let requests: u64 = steps.iter().map(|(_, _, o)| o.requests).sum();
        if reasoning > 0 {
            out.push(format!(
                "{} spent {reasoning} of its {completion} timed completion tokens reasoning ({} visible): its decode and throughput count both.",
                a.id,
                completion - reasoning.min(completion)
            ));
        }
        if empty > 0 {
            out.push(format!(
                "{}: {empty} of {requests} timed responses showed no visible output: reasoning spent the whole token budget.",
                a.id
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(ev: &str, conc: u64, o: OutputLength) -> TimingRecord {
        TimingRecord {
            evidence: ev.into(),
            concurrency: conc,
            output_length: Some(o),
            ..Default::default()
        }
    }

    fn arm(short_warm: u64, short_c4: u64) -> ArmResult {
        let o = |short: u64, n: u64| OutputLength {
            asked: 64,
            requests: n,
            short,
            min_tokens: Some(if short > 0 { 20 } else { 64 }),
            completion_tokens: 64 * n - 44 * short,
            ..Default::default()
        };
        ArmResult {
            id: "a".into(),
            warm: Some(rec("a-warm.json", 1, o(short_warm, 20))),
            concurrency: [("4".to_string(), rec("a-c4.json", 4, o(short_c4, 20)))].into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_few_short_responses_are_flagged_many_fail_compatibility() {
        assert_eq!(flag(&arm(0, 0)), None);
        assert_eq!(failure(&arm(0, 0)), None);
        let one = arm(0, 1);
        assert_eq!(
            flag(&one).as_deref(),
            Some("E2E and throughput flagged: 1 of 40 requests stopped short of the 64 completion tokens asked (ignore_eos; fewest 20: 1 of 20 at C4)")
        );
        assert_eq!(failure(&one), None, "1 of 40 is within 5%");
        let (detail, evidence) = failure(&arm(2, 3)).expect("5 of 40 is over 5%");
        assert_eq!(evidence.as_deref(), Some("a-c4.json"));
        assert!(
            detail.contains("5 of 40 requests stopped short"),
            "{detail}"
        );
    }

    #[test]
    fn reasoning_is_stated_apart_and_an_empty_visible_output_is_named() {
        let mut a = arm(0, 0);
        let w = a.warm.as_mut().unwrap().output_length.as_mut().unwrap();
        w.reasoning_tokens = 300;
        w.empty_visible = 2;
        let l = limitations(&[a]);
        assert_eq!(l.len(), 2, "{l:?}");
        assert!(
            l[0].starts_with(
                "a spent 300 of its 2560 timed completion tokens reasoning (2260 visible)"
            ),
            "{l:?}"
        );
        assert!(
            l[1].starts_with("a: 2 of 40 timed responses showed no visible output"),
            "{l:?}"
        );
    }
}
