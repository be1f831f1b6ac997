//! Prefix-cache disclosure: when the campaign let identical prompts hit the engines' prefix
//! caches, each arm's measured cached-token share is stated, and a win by an arm that served a
//! notable share of its prompt tokens from cache is a limitation (an uncached workload would not
//! see that TTFT).

use crate::evidence::result::CampaignResult;

/// Above this share of cached prompt tokens, a win is said to rest on the cache.
pub const NOTABLE_SHARE: f64 = 0.05;

/// The limitations about prefix caching (none when the campaign defeated the caches).
pub fn limitations(result: &CampaignResult, winner: Option<&str>) -> Vec<String> {
    let mut out = Vec::new();
    match result.workload.allow_prefix_cache {
        Some(false) => return out,
        None => {
            if result.arms.iter().any(|a| {
                a.prompt_cache
                    .and_then(|c| c.share())
                    .is_some_and(|s| s > 0.0)
            }) {
                out.push("The bundle does not record whether prefix caching was allowed, yet some arms served prompt tokens from cache (see below).".into());
            } else {
                return out;
            }
        }
        Some(true) => {}
    }
    let shares: Vec<String> = result
        .arms
        .iter()
        .filter_map(|a| {
            let c = a.prompt_cache?;
            Some(match c.share() {
                Some(s) => format!(
                    "{} {:.1} % ({} of {} prompt tokens over {} requests)",
                    a.id,
                    s * 100.0,
                    c.cached_tokens,
                    c.prompt_tokens,
                    c.requests_reporting
                ),
                None => format!("{} not reported by the endpoint", a.id),
            })
        })
        .collect();
    out.push(format!(
        "Prefix caching was allowed (allow_prefix_cache = true): identical prompts could be served from the engines' caches. Cached share of timed prompt tokens: {}.",
        if shares.is_empty() {
            "not measured".to_string()
        } else {
            shares.join("; ")
        }
    ));
    if let Some(w) = winner.and_then(|w| result.arm(w)) {
        match w.prompt_cache.and_then(|c| c.share()) {
            Some(s) if s >= NOTABLE_SHARE => out.push(format!(
                "The win of {} rests on cached tokens: it served {:.1} % of its timed prompt tokens from its prefix cache, so its TTFT is not what a workload of distinct prompts would see. Re-run with allow_prefix_cache = false to rank uncached serving.",
                w.id,
                s * 100.0
            )),
            None => out.push(format!(
                "The winner {} did not report cached tokens, so whether its win rests on its prefix cache is unknown.",
                w.id
            )),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::result::{ArmResult, CacheUse};

    fn result(allow: Option<bool>, cached: u64) -> CampaignResult {
        let mut r = CampaignResult::new("c");
        r.workload.allow_prefix_cache = allow;
        r.arms.push(ArmResult {
            id: "a".into(),
            prompt_cache: Some(CacheUse {
                requests: 10,
                requests_reporting: 10,
                prompt_tokens: 6000,
                cached_tokens: cached,
            }),
            ..Default::default()
        });
        r
    }

    #[test]
    fn a_cached_win_is_a_limitation_and_an_uncached_campaign_says_nothing() {
        let l = limitations(&result(Some(true), 5920), Some("a"));
        assert_eq!(l.len(), 2, "{l:?}");
        assert!(l[0].contains("a 98.7 % (5920 of 6000"), "{l:?}");
        assert!(
            l[1].starts_with("The win of a rests on cached tokens"),
            "{l:?}"
        );
        let l = limitations(&result(Some(true), 0), Some("a"));
        assert_eq!(l.len(), 1, "{l:?}");
        assert!(limitations(&result(Some(false), 0), Some("a")).is_empty());
        assert!(limitations(&result(None, 0), Some("a")).is_empty());
    }
}
