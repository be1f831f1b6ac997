//! Capacity under SLOs as a ranking figure: the bracket [held, broken) an arm's true capacity
//! lies in, and its words for the reason, the arm decisions and the reports. A rate at which the
//! client was the limit is never the arm's figure: the bracket is then open above the held rate,
//! and the words say the client bound it.

pub use super::metric::capacity_measure as measure;
use super::metric::num;
use crate::evidence::result::{ArmResult, CapacityRecord};

/// The capacity in words: "held 4.5 req/s, broke at 6 req/s (ttft p95 <= 100 ms: 231.2 ms)";
/// "held 12 req/s; client-bound above it: …, not the arm's capacity"; "not measured".
pub fn text(arm: &ArmResult) -> String {
    match arm.capacity.as_ref() {
        None => "not measured".into(),
        Some(c) => record_text(c),
    }
}

/// [`text`] of a record.
pub fn record_text(c: &CapacityRecord) -> String {
    let held = match c.held_rate_per_s {
        Some(h) => format!("held {} req/s", num(h)),
        None => "no probed rate held".into(),
    };
    if let Some(r) = c.client_bound_rate_per_s {
        return format!(
            "{held}; client-bound at {} req/s (the client, not the arm, was the limit: {}), so the capacity above {} req/s is not the arm's and was not measured",
            num(r),
            c.client_bound_because.as_deref().unwrap_or("its overload signals fired"),
            num(c.held_rate_per_s.unwrap_or(0.0))
        );
    }
    match (c.broken_rate_per_s, &c.broken_by) {
        (Some(b), why) => format!(
            "{held}, broke at {} req/s ({})",
            num(b),
            why.as_deref().unwrap_or("a limit broke")
        ),
        (None, _) => format!("{held}, nothing broke: {}", c.stopped_because),
    }
}

/// A speculative arm's capacity against its matched control's: a regression when its whole
/// bracket lies below the control's (it broke at or below a rate the control held). A bracket the
/// client bound is not the arm's and proves nothing either way.
pub fn regression(arm: &ArmResult, ctl: &ArmResult, method: &str) -> Option<String> {
    let (s, c) = (arm.capacity.as_ref()?, ctl.capacity.as_ref()?);
    if s.client_bound_rate_per_s.is_some() {
        return None;
    }
    let (broke, held) = (s.broken_rate_per_s?, c.held_rate_per_s?);
    (broke <= held).then(|| {
        format!(
            "capacity fell below its control's: without speculation ({}) {}; with {method} {}",
            ctl.id,
            record_text(c),
            record_text(s)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decide::rank::ties;

    fn arm(held: Option<f64>, broken: Option<f64>, client: Option<f64>) -> ArmResult {
        ArmResult {
            id: "a".into(),
            capacity: Some(CapacityRecord {
                held_rate_per_s: held,
                broken_rate_per_s: broken,
                broken_by: broken.map(|_| "ttft p95 <= 100 ms: 230 ms".into()),
                client_bound_rate_per_s: client,
                client_bound_because: client.map(|_| "the open loop sent requests late".into()),
                stopped_because: "held up to max_rate 24 req/s".into(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn capacity_ties_by_overlapping_brackets_and_a_client_bound_figure_is_not_the_arms() {
        let m = |h, b, c| measure(&arm(h, b, c)).unwrap();
        // [4.5, 6) against [12, inf): apart. [4, 8) against [6, 12): overlap. [4, 8) against
        // [8, 16): held where the other broke, apart.
        assert!(!ties(
            m(Some(4.5), Some(6.0), None),
            m(Some(12.0), None, None),
            0.0
        ));
        assert!(ties(
            m(Some(4.0), Some(8.0), None),
            m(Some(6.0), Some(12.0), None),
            0.0
        ));
        assert!(!ties(
            m(Some(4.0), Some(8.0), None),
            m(Some(8.0), Some(16.0), None),
            0.0
        ));
        let a = arm(Some(4.5), Some(6.0), None);
        assert_eq!(
            text(&a),
            "held 4.5 req/s, broke at 6.0 req/s (ttft p95 <= 100 ms: 230 ms)"
        );
        // Client-bound: the held rate stands, nothing above it is the arm's.
        let c = arm(Some(12.0), None, Some(24.0));
        assert_eq!(measure(&c).unwrap().ci95, Some([12.0, f64::INFINITY]));
        let t = text(&c);
        assert!(
            t.starts_with("held 12.0 req/s; client-bound at 24.0 req/s"),
            "{t}"
        );
        assert!(t.contains("not the arm's"), "{t}");
        assert_eq!(measure(&arm(None, None, Some(2.0))), None);
        let none = arm(None, Some(2.0), None);
        assert_eq!(measure(&none).unwrap().value, 0.0);
        assert!(text(&none).starts_with("no probed rate held, broke at 2.0 req/s"));
        assert_eq!(text(&ArmResult::default()), "not measured");
    }

    #[test]
    fn a_speculative_bracket_wholly_below_its_controls_is_a_regression() {
        let spec = arm(Some(2.0), Some(4.0), None);
        let ctl = arm(Some(4.0), Some(8.0), None);
        let d = regression(&spec, &ctl, "EAGLE").expect("broke at 4, the control held 4");
        assert!(
            d.starts_with("capacity fell below its control's: without speculation (a) held 4.0 req/s, broke at 8.0 req/s")
                && d.contains("; with EAGLE held 2.0 req/s, broke at 4.0 req/s"),
            "{d}"
        );
        // Overlapping brackets: no regression; a client-bound spec arm proves nothing.
        assert_eq!(
            regression(&arm(Some(3.0), Some(6.0), None), &ctl, "EAGLE"),
            None
        );
        assert_eq!(
            regression(&arm(Some(2.0), None, Some(3.0)), &ctl, "EAGLE"),
            None
        );
        assert_eq!(
            regression(&ctl, &spec, "EAGLE"),
            None,
            "faster than its control"
        );
    }
}
