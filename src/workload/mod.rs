//! Workloads: what is sent to an endpoint. Today: prompts sized to an exact token count of the
//! endpoint's own tokenizer (`prompt`), built from deterministic filler text (`filler`), and the
//! request bodies that carry them (`request`).

pub mod backend;
pub mod conversation;
pub mod dataset;
pub mod filler;
pub mod items;
pub mod prefix;
pub mod prompt;
pub mod request;
pub mod streamed;
pub mod synthetic;
pub mod trace;

use serde::Serialize;

/// Which OpenAI-compatible API a workload is sent to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Endpoint {
    /// `/v1/chat/completions`: the content is wrapped in the model's chat template.
    Chat,
    /// `/v1/completions`: the prompt is sent raw (only a BOS token, if any, is added).
    Completions,
}

impl Endpoint {
    pub fn path(&self) -> &'static str {
        match self {
            Endpoint::Chat => "/v1/chat/completions",
            Endpoint::Completions => "/v1/completions",
        }
    }

    pub fn as_str(&self) -> &'static str {
        match self {
            Endpoint::Chat => "chat",
            Endpoint::Completions => "completions",
        }
    }
}
