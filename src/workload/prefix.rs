//! The shared prefix of a shared-prefix workload (`bench --shared-prefix-tokens`, a campaign's
//! `[workload.shared_prefix]`): one matched prompt sized so that its content (a group nonce line
//! and filler, plus the newline that ends it) is exactly the prefix's tokens, and the texts of
//! the groups' prefixes.

use super::filler::{nonce_base_from_seed, nonce_number};
use super::prompt::{self, MatchedPrompt, PromptSpec};

/// A sized shared prefix.
#[derive(Debug, Clone)]
pub struct PrefixPrompt {
    pub prompt: MatchedPrompt,
    /// Prefix tokens (content, the ending newline included).
    pub tokens: u64,
    /// Where the groups' nonce numbers start (apart from the requests' own numbers).
    pub base: u64,
}

/// Sizes a prefix of `tokens` for requests whose own part is `rest` (sized first: its measured
/// template overhead is what the prefix's sizing target adds). `nonce_base`: the run's request
/// nonce base (the groups' numbers are drawn apart from it). Errors name no flag: the caller
/// says which setting asked for the prefix.
pub async fn size(
    tokens: u64,
    spec: &PromptSpec<'_>,
    rest: &MatchedPrompt,
    nonce_base: u64,
) -> Result<PrefixPrompt, String> {
    let content = tokens as i64 - 1;
    let target = content + rest.template_overhead;
    if target < 1 {
        return Err("too small for this endpoint's template; use a larger value".into());
    }
    let m = prompt::build(&PromptSpec {
        tokens: target as u64,
        nonce: true,
        ..spec.clone()
    })
    .await
    .map_err(|e| format!("sizing the shared prefix: {e}"))?;
    if m.template_overhead != rest.template_overhead {
        return Err(format!(
            "the endpoint's template overhead differed between the two sizings ({} and {} tokens); the prefix can't be sized exactly",
            rest.template_overhead, m.template_overhead
        ));
    }
    Ok(PrefixPrompt {
        prompt: m,
        tokens,
        base: nonce_base_from_seed(nonce_base ^ 0x7072_6566_6978),
    })
}

impl PrefixPrompt {
    /// The prefix texts of `groups` groups, set `set` (each set of groups gets fresh nonce
    /// numbers, so one set never meets another's prefixes in a cache). Each ends with a newline.
    pub fn texts(&self, groups: u32, set: u64) -> Vec<String> {
        (0..groups as u64)
            .map(|g| {
                let n = nonce_number(self.base, set.wrapping_mul(groups as u64) + g);
                let mut s = self.prompt.text(n);
                s.push('\n');
                s
            })
            .collect()
    }
}
