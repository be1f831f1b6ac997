//! The request source of a timed load: one shared body (`workload::request`), the prompt of each
//! request inserted per request. `bakeoff bench`, campaign timing and the selftest all use it.

use super::{Prepared, Source};
use crate::client::{post_request_bytes, Target};
use crate::workload::filler::nonce_number;
use crate::workload::items::WorkSet;
use crate::workload::prompt::MatchedPrompt;
use crate::workload::request::insert_input;
use crate::workload::Endpoint;
use serde_json::{Map, Value};
use std::sync::Arc;

impl Prepared {
    /// The keep-alive POST of a JSON request body to the endpoint's path.
    pub fn post(
        target: &Target,
        endpoint: Endpoint,
        api_key: Option<&str>,
        body: &Map<String, Value>,
        prompt_tokens: Option<u64>,
    ) -> Prepared {
        let bytes = serde_json::to_vec(body).expect("JSON body");
        Prepared {
            bytes: post_request_bytes(target, endpoint.path(), &bytes, api_key, true),
            prompt_tokens,
        }
    }
}

/// The prompt of each request of a load.
pub enum PromptText {
    /// A matched prompt: every index has the target's token count (the nonce line varies).
    Matched(Arc<MatchedPrompt>),
    /// A literal text; with `nonce`, a line `[bakeoff NNNNNNN]` (the request number) goes first so
    /// prefix caches can't serve one request from another.
    Literal { text: String, nonce: bool },
    /// A work set (dataset or synthetic lengths): load request `k` sends item `k mod n`, with its
    /// own expected prompt tokens and `max_tokens`.
    Work(Arc<WorkSet>),
}

impl PromptText {
    /// The text of request `index` and its expected prompt tokens (a work set: the text of its
    /// first item, a `messages` list as JSON; `RequestSource` sends each request's own item).
    pub fn text(&self, index: u64) -> (String, Option<u64>) {
        match self {
            PromptText::Matched(m) => (m.text(index), Some(m.target_tokens)),
            PromptText::Work(w) => {
                let mut b = Map::new();
                let e = w.fill(&mut b, crate::workload::Endpoint::Completions, 0, index);
                let text = match b.get("prompt") {
                    Some(Value::String(s)) => s.clone(),
                    _ => b.get("messages").map(|m| m.to_string()).unwrap_or_default(),
                };
                (text, e)
            }
            PromptText::Literal { text, nonce } => {
                if *nonce {
                    (format!("[bakeoff {index:07}]\n{text}"), None)
                } else {
                    (text.clone(), None)
                }
            }
        }
    }

    /// The prompt tokens every request should report (matched prompts only).
    pub fn expected_tokens(&self) -> Option<u64> {
        match self {
            PromptText::Matched(m) => Some(m.target_tokens),
            PromptText::Literal { .. } | PromptText::Work(_) => None,
        }
    }
}

/// The user turns of a multi-turn load, or the per-request part of a shared-prefix one.
impl crate::workload::conversation::UserTurns for PromptText {
    fn turn(&self, number: u64) -> (String, Option<u64>) {
        self.text(number)
    }
}

/// The request source of a load: one shared body, the prompt of request `offset + index`
/// inserted per request, sent as an HTTP/1.1 keep-alive POST.
pub struct RequestSource {
    pub target: Target,
    pub endpoint: Endpoint,
    pub base: Map<String, Value>,
    pub prompt: PromptText,
    pub api_key: Option<String>,
    /// Added to the load's request index (distinct indices keep prefix caches cold across loads).
    pub offset: u64,
    /// Where this run's request numbers start (`workload::filler::random_nonce_base`, or from
    /// `--seed`): the nonce of request `i` is `nonce_number(nonce_base, offset + i)`, so runs
    /// against one server don't repeat each other's prompts.
    pub nonce_base: u64,
}

impl Source for RequestSource {
    fn prepare(&self, index: u64) -> Prepared {
        let number = nonce_number(self.nonce_base, self.offset + index);
        let mut body = self.base.clone();
        let tokens = match &self.prompt {
            PromptText::Work(w) => w.fill(&mut body, self.endpoint, self.offset + index, number),
            p => {
                let (text, tokens) = p.text(number);
                insert_input(&mut body, self.endpoint, text);
                tokens
            }
        };
        Prepared::post(
            &self.target,
            self.endpoint,
            self.api_key.as_deref(),
            &body,
            tokens,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_prompts_carry_the_nonce_line_when_asked() {
        let p = PromptText::Literal {
            text: "hi".into(),
            nonce: true,
        };
        assert_eq!(p.text(7), ("[bakeoff 0000007]\nhi".to_string(), None));
        let q = PromptText::Literal {
            text: "hi".into(),
            nonce: false,
        };
        assert_eq!(q.text(7).0, "hi");
    }

    #[test]
    fn the_nonce_base_moves_every_request_number() {
        let src = |nonce_base| RequestSource {
            target: Target::parse("http://127.0.0.1:9").unwrap(),
            endpoint: crate::workload::Endpoint::Completions,
            base: Map::new(),
            prompt: PromptText::Literal {
                text: "hi".into(),
                nonce: true,
            },
            api_key: None,
            offset: 10,
            nonce_base,
        };
        let body = |s: &RequestSource, i| String::from_utf8(s.prepare(i).bytes).unwrap();
        assert!(body(&src(0), 2).contains("[bakeoff 0000012]"));
        assert!(body(&src(5_000_000), 2).contains("[bakeoff 5000012]"));
        // Wraps below the sizing requests' reserved numbers.
        assert!(body(&src(97_999_990), 2).contains("[bakeoff 0000002]"));
    }
}
