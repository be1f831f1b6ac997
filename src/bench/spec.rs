//! What one bench run measures, as typed values (no command-line types): the endpoint, the
//! workload, the load shape, the SLO limits and where per-request lines go. `cli/bench.rs`
//! builds it from the flags; tests and other callers build it directly (`BenchSpec::new`).

use crate::client::Target;
use crate::metrics::slo::SloLimit;
use crate::workload::dataset::Format;
use crate::workload::synthetic::Dist;
use crate::workload::Endpoint;
use serde::Serialize;
use serde_json::{Map, Value};
use std::path::PathBuf;

/// Open-loop arrival process.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum ArrivalKind {
    #[default]
    Constant,
    Poisson,
    /// A replayed trace's own arrival times (`bench::trace`; `--trace`).
    Trace,
}

/// Everything one bench run needs.
#[derive(Debug, Clone)]
pub struct BenchSpec {
    /// The endpoint, with its TLS settings already checked.
    pub target: Target,
    /// Model to request (None: the first one `/v1/models` lists).
    pub model: Option<String>,
    pub endpoint: Endpoint,
    /// Prompt tokens of the matched prompt (with a shared prefix: prefix included).
    pub prompt_tokens: u64,
    /// A literal prompt instead of a sized one.
    pub prompt: Option<String>,
    pub tokenizer: Option<PathBuf>,
    /// No per-request nonce: requests may share a prefix in the engine's cache.
    pub allow_prefix_cache: bool,
    pub max_tokens: u64,
    pub temperature: f64,
    /// Fixes the sampling seed, the Poisson arrivals and the nonce numbers (None: seed 0 and
    /// random nonce numbers).
    pub seed: Option<u64>,
    pub ignore_eos: bool,
    pub api_key: Option<String>,
    /// The variable the key came from (recorded; the key never is).
    pub api_key_env: Option<String>,
    /// Merged into every request body.
    pub extra_body: Option<Map<String, Value>>,
    /// Per-request limit and longest silence, seconds.
    pub timeout: f64,
    pub stall_timeout: f64,
    pub shape: LoadShape,
    /// Checked at every level (empty: no SLO verdict, no goodput).
    pub slo: Vec<SloLimit>,
    pub source: SourceSpec,
    pub conv: ConvSpec,
    /// One line per request written here (appended across levels).
    pub requests_jsonl: Option<PathBuf>,
    /// Keep each successful measured request's send time and metrics (`BenchReport::points`).
    pub keep_points: bool,
    /// How errors name the workload's settings (flags or campaign fields).
    pub labels: Labels,
    /// Replay a request trace at its arrival times instead of the load shape's levels.
    pub trace: Option<super::trace::TraceSpec>,
}

impl BenchSpec {
    /// The defaults of `bakeoff bench URL` with no other flag: a 128-token matched chat
    /// prompt, 128 max tokens, 32 requests at concurrency 1.
    pub fn new(target: Target) -> BenchSpec {
        BenchSpec {
            target,
            model: None,
            endpoint: Endpoint::Chat,
            prompt_tokens: 128,
            prompt: None,
            tokenizer: None,
            allow_prefix_cache: false,
            max_tokens: 128,
            temperature: 0.0,
            seed: None,
            ignore_eos: false,
            api_key: None,
            api_key_env: None,
            extra_body: None,
            timeout: 600.0,
            stall_timeout: 60.0,
            shape: LoadShape::default(),
            slo: Vec::new(),
            source: SourceSpec::default(),
            conv: ConvSpec::default(),
            requests_jsonl: None,
            keep_points: false,
            labels: Labels::FLAGS,
            trace: None,
        }
    }

    /// Measured requests per level: the count given, else 32 unless a duration bounds it.
    pub fn requests(&self) -> Option<u64> {
        match (self.shape.requests, self.shape.duration) {
            (None, None) => Some(32),
            (r, _) => r,
        }
    }
}

/// The load shape: which levels run and how requests start.
#[derive(Debug, Clone, Default)]
pub struct LoadShape {
    /// Closed loop at each of these (empty with no rate: concurrency 1).
    pub concurrency: Vec<usize>,
    /// Open loop at each of these requests/s.
    pub rate: Vec<f64>,
    pub arrival: ArrivalKind,
    /// Open loop: at most this many in flight.
    pub max_concurrency: Option<usize>,
    pub requests: Option<u64>,
    /// Stop starting requests after this many seconds of the measured phase.
    pub duration: Option<f64>,
    /// Warm-up by count, and by time (seconds).
    pub warmup: u64,
    pub warmup_duration: Option<f64>,
    /// Raise the level until an SLO breaks (`bench::sweep`).
    pub find_saturation: bool,
    pub max_steps: Option<usize>,
    pub max_level: Option<f64>,
    pub max_failure_share: Option<f64>,
}

/// One level of a run: a closed loop at `concurrency`, or an open loop at `rate` (with its cap).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Level {
    pub concurrency: usize,
    pub rate: Option<f64>,
    pub max_in_flight: Option<usize>,
}

/// A dataset file as the source of prompts.
#[derive(Debug, Clone)]
pub struct DatasetSpec {
    pub path: PathBuf,
    /// None: detected from the content.
    pub format: Option<Format>,
    pub sample: Option<usize>,
    pub min_prompt_tokens: Option<u64>,
    pub max_prompt_tokens: Option<u64>,
    pub max_output_tokens: Option<u64>,
}

/// Where prompts come from besides the matched prompt: a dataset or synthetic lengths.
#[derive(Debug, Clone, Default)]
pub struct SourceSpec {
    pub dataset: Option<DatasetSpec>,
    pub input_tokens: Option<Dist>,
    pub output_tokens: Option<Dist>,
}

impl SourceSpec {
    /// Whether a dataset or synthetic source replaces the single prompt.
    pub fn active(&self) -> bool {
        self.dataset.is_some() || self.input_tokens.is_some() || self.output_tokens.is_some()
    }
}

/// Multi-turn conversations and shared-prefix groups.
#[derive(Debug, Clone)]
pub struct ConvSpec {
    pub multi_turn: Option<u32>,
    /// Pause between a reply and the next turn, milliseconds.
    pub think_time_ms: f64,
    pub shared_prefix_tokens: Option<u64>,
    pub prefix_groups: u32,
    /// Draw each request's group at random (seeded) instead of i mod groups.
    pub prefix_random: bool,
}

impl Default for ConvSpec {
    fn default() -> ConvSpec {
        ConvSpec {
            multi_turn: None,
            think_time_ms: 0.0,
            shared_prefix_tokens: None,
            prefix_groups: 1,
            prefix_random: false,
        }
    }
}

impl ConvSpec {
    /// Any structured workload asked for.
    pub fn active(&self) -> bool {
        self.multi_turn.is_some() || self.shared_prefix_tokens.is_some()
    }
}

/// The names errors and notes give the workload's settings: bench's flags, or a campaign's
/// fields, so a message names what the user wrote.
#[derive(Debug, Clone, Copy)]
pub struct Labels {
    pub dataset: &'static str,
    pub synthetic: &'static str,
    pub multi_turn: &'static str,
    pub shared_prefix: &'static str,
    pub seed: &'static str,
}

impl Labels {
    /// `bakeoff bench`'s flags.
    pub const FLAGS: Labels = Labels {
        dataset: "--dataset",
        synthetic: "synthetic lengths",
        multi_turn: "--multi-turn",
        shared_prefix: "--shared-prefix-tokens",
        seed: "--seed",
    };
}
