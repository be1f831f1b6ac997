//! Cache reuse by design: conversations resend their history and shared prefixes repeat, so an
//! engine with a prefix cache serves part of those prompts from it. Each arm's cached share is
//! stated per step and per turn; a win that coincides with a higher cached share than the arm it
//! beat is a limitation, with what the uncached first turns showed; medians over multi-turn
//! steps say which turns they cover; `ttft_first_turn` ranks on the first turns alone.

use super::metric::{descriptor, first_turn_ttft, warm_reuse as warm};
use crate::evidence::result::{ArmResult, CacheUse, CampaignResult};
use crate::evidence::RankingMetric;

/// A cached share this much (absolute) above the beaten arm's is said to carry the win.
pub const NOTABLE_GAP: f64 = 0.05;

/// Which turns the warm medians cover, as the reason appends it after the request count:
/// " (turns 1–3 of 3-turn conversations)"; empty when the warm run had no turns.
pub fn turns_covered(arm: &ArmResult) -> String {
    match warm(arm).map(|s| s.last_turn()) {
        Some(1) => " (first turns only)".into(),
        Some(k) if k > 1 => format!(" (turns 1–{k} pooled: later turns resend the history)"),
        _ => String::new(),
    }
}

/// Whether the workload reuses earlier tokens by design (conversations, shared prefixes).
pub fn by_design(result: &CampaignResult) -> bool {
    let kind = result
        .workload
        .source
        .as_ref()
        .and_then(|s| s["kind"].as_str())
        .unwrap_or("");
    matches!(kind, "conversation" | "shared-prefix")
        || result
            .arms
            .iter()
            .any(|a| a.reuse.iter().any(|s| !s.turns.is_empty()))
}

fn share_text(c: &CacheUse) -> String {
    match c.share() {
        Some(s) => format!("{:.1} %", s * 100.0),
        None => "not reported".into(),
    }
}

/// One arm's cached share per step, and per turn where the step had turns: "a: warm 61.2 %
/// (turn 1 0.0 %, turn 2 74.4 %, turn 3 80.1 %), C2 58.0 % (…)".
pub fn arm_shares(arm: &ArmResult) -> Option<String> {
    let steps: Vec<String> = arm
        .reuse
        .iter()
        .filter(|s| s.cache.requests > 0)
        .map(|s| {
            let turns: Vec<String> = s
                .turns
                .iter()
                .map(|t| format!("turn {} {}", t.turn, share_text(&t.cache)))
                .collect();
            if turns.is_empty() {
                format!("{} {}", s.step, share_text(&s.cache))
            } else {
                format!("{} {} ({})", s.step, share_text(&s.cache), turns.join(", "))
            }
        })
        .collect();
    (!steps.is_empty()).then(|| format!("{}: {}", arm.id, steps.join(", ")))
}

/// The limitations of a workload that reuses tokens by design (none otherwise): each arm's
/// cached share per step and turn, and a win over `beaten` (decided by `decided`) that coincides
/// with a higher share.
pub fn limitations(
    result: &CampaignResult,
    winner: Option<&str>,
    beaten: Option<&str>,
    decided: Option<RankingMetric>,
) -> Vec<String> {
    let mut out = Vec::new();
    if !by_design(result) {
        return out;
    }
    let shares: Vec<String> = result.arms.iter().filter_map(arm_shares).collect();
    out.push(format!(
        "The workload reuses earlier tokens by design (conversation turns resend their history, shared prefixes repeat), so engines with a prefix cache serve part of those prompts from it. Cached share of timed prompt tokens per step and turn: {}.",
        if shares.is_empty() {
            "not measured".to_string()
        } else {
            shares.join("; ")
        }
    ));
    let (Some(w), Some(b), Some(m)) = (
        winner.and_then(|w| result.arm(w)),
        beaten.and_then(|b| result.arm(b)),
        decided,
    ) else {
        return out;
    };
    out.extend(coincides(w, b, m));
    out
}

/// "reuse's TTFT lead over plain rests on 80.0 % of its timed prompt tokens served from cache
/// (plain: 0.0 %); on uncached first turns plain was faster (…)": the winner `w` beat `b` on
/// `m` with a cached share [`NOTABLE_GAP`] or more above `b`'s.
pub fn coincides(w: &ArmResult, b: &ArmResult, m: RankingMetric) -> Option<String> {
    let share = |a: &ArmResult| {
        a.prompt_cache
            .and_then(|c| c.share())
            .or_else(|| warm(a).and_then(|s| s.cache.share()))
    };
    let (ws, bs) = (share(w)?, share(b).unwrap_or(0.0));
    if ws < bs + NOTABLE_GAP {
        return None;
    }
    let first = match (first_turn_ttft(w), first_turn_ttft(b)) {
        (Some(x), Some(y)) => {
            let (fast, a, c) = if y.p50 < x.p50 {
                (b.id.as_str(), y.p50, x.p50)
            } else {
                (w.id.as_str(), x.p50, y.p50)
            };
            let too = if fast == w.id { " too" } else { "" };
            format!(
                "; on uncached first turns {fast} was faster{too} (warm TTFT p50 {a:.1} ms against {c:.1} ms; rank with \"ttft_first_turn\" to decide on them)"
            )
        }
        _ => String::new(),
    };
    Some(format!(
        "{}'s {} lead over {} rests on {:.1} % of its timed prompt tokens served from cache ({}: {:.1} %){first}.",
        w.id,
        descriptor(m).short,
        b.id,
        ws * 100.0,
        b.id,
        bs * 100.0
    ))
}
