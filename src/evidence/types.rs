//! The domain values the evidence records and the verdict compare: failure classes, gate names
//! and statuses, restoration status, ranking metrics, tool variants and the campaign's policy.
//! Each is defined once here, serialized exactly as the strings the bundles have always held, so
//! existing `campaign-result.json` files and `tests/data/*` fixtures still read; a typo in a
//! comparison no longer compiles, and an unknown value in a file is a parse error naming the
//! known ones.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// A string that names no value of a string enum.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} \"{value}\" (known: {known})")]
pub struct UnknownValue {
    pub what: &'static str,
    pub value: String,
    pub known: String,
}

/// Defines a string-valued enum once: the serde names (plus accepted aliases), `ALL`, `as_str`,
/// `Display` and `FromStr` all come from the one list, so they cannot drift apart.
macro_rules! str_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident ($what:literal) {
            $( $(#[$vmeta:meta])* $var:ident = $s:literal $(| $alias:literal)* ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub enum $name {
            $( $(#[$vmeta])* #[serde(rename = $s $(, alias = $alias)*)] $var ),+
        }

        impl $name {
            pub const ALL: [$name; [$(stringify!($var)),+].len()] = [$($name::$var),+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$var => $s),+
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = UnknownValue;

            fn from_str(s: &str) -> Result<Self, UnknownValue> {
                match s {
                    $($s $(| $alias)* => Ok($name::$var),)+
                    _ => Err(UnknownValue {
                        what: $what,
                        value: s.to_string(),
                        known: [$($s),+].join(", "),
                    }),
                }
            }
        }
    };
}

str_enum! {
    /// Why an arm cannot win (`Failure.class` in `campaign-result.json`, `failures[].class` in
    /// `decision-summary.json`). docs/verdict.md lists which step yields which class.
    pub enum FailureClass ("failure class") {
        /// A launch or readiness failure (src/lane/mod.rs `LaunchFailure`), or a matched prompt
        /// the endpoint cannot serve.
        Compatibility = "compatibility",
        /// Out of GPU memory or the memory reserve not met.
        Capacity = "capacity",
        /// The arm's process died, a GPU probe failed or a step panicked.
        Crash = "crash",
        Preflight = "preflight",
        ToolSchema = "tool-schema",
        Quality = "quality",
        Retrieval = "retrieval",
        /// Speculative decoding regressed against its matched control.
        WorkloadRegression = "workload-regression",
        /// A service-level objective of the campaign (`[[workload.slo]]`) was broken at a
        /// concurrency level the arm measured: the limit, the level and the observed value.
        SloViolated = "slo-violated",
        Restoration = "restoration",
        /// Requests failed (HTTP errors, connection errors, timeouts, a context-overflow 400)
        /// beyond the policy's `max_failed_fraction` in the arm's timed steps and gates, or a
        /// gate whose failures were all request errors rather than wrong answers.
        Availability = "availability",
        Interrupted = "interrupted",
        /// The step ran but its evidence could not be written (disk full, I/O error, permission):
        /// not done, the campaign incomplete; the step runs again on resume.
        EvidenceUnwritable = "evidence-unwritable",
        /// The arm ran without failing but recorded no warm timing (the verdict's own class).
        Incomplete = "incomplete",
        /// A launch or readiness failure recorded without its class (results written by hand or
        /// by older tools: `launch`, `ready`, `startup`, `load`); the verdict makes it
        /// `compatibility`, or `capacity` when its detail says it ran out of memory.
        Launch = "launch" | "ready" | "startup" | "load",
    }
}

str_enum! {
    /// A gate, as `policy.required_gates` lists it and as `GateRecord.name` records it.
    pub enum GateName ("gate") {
        Smoke = "smoke",
        Json = "json",
        Streaming = "streaming",
        Tools = "tools",
        Retrieval = "retrieval",
        Quality = "quality",
        /// The idle GPU baseline (lanes with GPUs).
        IdleBaseline = "idle-baseline" | "idle-gpu-baseline",
        /// The memory-reserve check after each arm is ready (lanes with GPUs).
        MemoryReserve = "memory-reserve",
        /// Exact incumbent restoration (identity + restoration preflight).
        Restoration = "restoration",
        /// The preflight gates run again on the restored incumbent (`Restoration.preflight`).
        RestorationPreflight = "restoration-preflight" | "preflight",
    }
}

impl GateName {
    /// The failure class a failed gate gives its arm.
    pub fn failure_class(self) -> FailureClass {
        match self {
            GateName::Tools => FailureClass::ToolSchema,
            GateName::Retrieval => FailureClass::Retrieval,
            GateName::Quality => FailureClass::Quality,
            GateName::Smoke
            | GateName::Json
            | GateName::Streaming
            | GateName::RestorationPreflight => FailureClass::Preflight,
            GateName::IdleBaseline | GateName::MemoryReserve => FailureClass::Capacity,
            GateName::Restoration => FailureClass::Restoration,
        }
    }
}

str_enum! {
    /// `GateRecord.status`.
    pub enum GateStatus ("gate status") {
        Passed = "passed",
        Failed = "failed",
        Skipped = "skipped",
        /// No GPU on this host (GPU checks): recorded as such, never faked.
        NotApplicable = "not-applicable",
    }
}

impl GateStatus {
    /// Passed or failed: the gate ran to a verdict.
    pub fn ran(self) -> bool {
        matches!(self, GateStatus::Passed | GateStatus::Failed)
    }

    pub fn from_passed(passed: bool) -> GateStatus {
        if passed {
            GateStatus::Passed
        } else {
            GateStatus::Failed
        }
    }
}

str_enum! {
    /// `Restoration.status`: the incumbent put back and proven, or not (the default: a
    /// restoration starts as not attempted). `unproven`: its checks passed, but their evidence
    /// could not be written (a full disk), so the bundle cannot show it: never `passed`.
    #[derive(Default)]
    pub enum RestorationStatus ("restoration status") {
        Passed = "passed",
        Unproven = "unproven",
        Failed = "failed",
        #[default]
        NotAttempted = "not-attempted",
    }
}

impl RestorationStatus {
    pub fn from_passed(passed: bool) -> RestorationStatus {
        if passed {
            RestorationStatus::Passed
        } else {
            RestorationStatus::Failed
        }
    }
}

str_enum! {
    /// What the ranking puts first (`workload.ranking_priority`). What each means, its unit and
    /// direction: `crate::decide::metric`.
    pub enum RankingMetric ("ranking metric") {
        Ttft = "ttft",
        DecodeTokensPerSecond = "decode_tokens_per_second",
        UsableContextAndKv = "usable_context_and_kv",
        Concurrency = "concurrency",
        E2e = "e2e",
        /// Requests per second meeting every SLO limit at the priority level (`[[workload.slo]]`).
        Goodput = "goodput",
        /// The highest request rate every capacity SLO held at (`[workload.capacity]`).
        Capacity = "capacity",
        /// Warm median TTFT of the conversations' first turns, whose prompts no earlier request
        /// shared (`[workload.conversation]`).
        TtftFirstTurn = "ttft_first_turn",
        /// GPU energy per million output tokens at the priority level (lane `gpus` sampled).
        EnergyPerMtok = "energy_per_mtok",
        /// The lane's price per million output tokens at the priority level (`cost_per_hour`).
        CostPerMtok = "cost_per_mtok",
    }
}

str_enum! {
    /// A tool-calling variant of the tools gate (src/gates/tools.rs).
    pub enum ToolVariant ("tool variant") {
        /// Non-streaming request, the answer must be a valid tool call.
        Plain = "plain",
        /// Streaming request, tool-call deltas reassembled.
        Streaming = "streaming",
        /// The tool result sent back; the answer must use it.
        RoundTrip = "round-trip",
    }
}

impl ToolVariant {
    /// Parses a variant name; the error names the known ones.
    pub fn parse(s: &str) -> Result<ToolVariant, String> {
        s.parse().map_err(|e: UnknownValue| e.to_string())
    }
}

/// Whether a winner may be promoted without a person.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Promotion {
    #[default]
    Manual,
    Auto,
}

/// The campaign's `[policy]`: read from the campaign file (src/campaign/spec.rs re-exports it)
/// and recorded in `campaign-result.json` as the run used it, so the verdict needs nothing else.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    #[serde(default)]
    pub promotion: Promotion,
    /// Gates an arm must pass to be eligible. Default: every gate the campaign runs (filled by
    /// load; `restoration` is always included).
    #[serde(default)]
    pub required_gates: Vec<GateName>,
    /// Evidence labels the verdict must be able to claim before promotion (e.g. `functional`,
    /// `matched-performance`, `bounded-quality`, `exact-restoration`).
    #[serde(default)]
    pub required_evidence_labels: Vec<String>,
    /// Ranking metric → relative difference (0.05 = 5%) under which two arms tie on it and the
    /// next metric decides.
    #[serde(default)]
    pub tie_tolerance: BTreeMap<RankingMetric, f64>,
    /// Engine log lines matching these turn into limitations in the verdict.
    #[serde(default)]
    pub quality_risks: Vec<QualityRisk>,
    /// The availability requirement: the largest fraction of an arm's requests (timed steps and
    /// gates together) that may fail before the arm is ineligible (`availability`). Default 0:
    /// no failed request is allowed. Absent in bundles written before it existed (read as 0).
    #[serde(default)]
    pub max_failed_fraction: f64,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            promotion: Promotion::Manual,
            required_gates: Vec::new(),
            required_evidence_labels: Vec::new(),
            tie_tolerance: BTreeMap::new(),
            quality_risks: Vec::new(),
            max_failed_fraction: 0.0,
        }
    }
}

/// `[[policy.quality_risks]]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QualityRisk {
    /// A plain substring (case-sensitive) of an engine log line.
    pub pattern: String,
    /// The limitation the verdict states when a line matches.
    pub limitation: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn serializes_as_the_strings_bundles_hold() {
        for c in FailureClass::ALL {
            assert_eq!(json!(c), json!(c.as_str()));
            let back: FailureClass = serde_json::from_value(json!(c.as_str())).unwrap();
            assert_eq!(back, c);
            assert_eq!(c.as_str().parse::<FailureClass>().unwrap(), c);
        }
        for g in GateName::ALL {
            assert_eq!(json!(g), json!(g.as_str()));
            assert_eq!(g.to_string(), g.as_str());
        }
        assert_eq!(
            json!(RankingMetric::DecodeTokensPerSecond),
            json!("decode_tokens_per_second")
        );
        assert_eq!(json!(ToolVariant::RoundTrip), json!("round-trip"));
        assert_eq!(json!(GateStatus::NotApplicable), json!("not-applicable"));
        assert_eq!(
            json!(RestorationStatus::NotAttempted),
            json!("not-attempted")
        );
    }

    #[test]
    fn older_names_still_read() {
        let g: GateName = serde_json::from_value(json!("idle-gpu-baseline")).unwrap();
        assert_eq!(g, GateName::IdleBaseline);
        let g: GateName = serde_json::from_value(json!("preflight")).unwrap();
        assert_eq!(g, GateName::RestorationPreflight);
        assert_eq!(
            "ready".parse::<FailureClass>().unwrap(),
            FailureClass::Launch
        );
    }

    #[test]
    fn unknown_values_are_errors_naming_the_known_ones() {
        let e = "speed".parse::<RankingMetric>().unwrap_err().to_string();
        assert!(e.contains("unknown ranking metric \"speed\""), "{e}");
        assert!(e.contains("decode_tokens_per_second"), "{e}");
        assert!(serde_json::from_value::<GateName>(json!("vibes")).is_err());
        assert_eq!(
            ToolVariant::parse("x").unwrap_err(),
            "unknown tool variant \"x\" (known: plain, streaming, round-trip)"
        );
    }
}
