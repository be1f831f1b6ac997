//! `campaign-result.json`: the orchestrator's record of what ran, in plain data.
//!
//! The orchestrator writes it (and rewrites it after every step, so an interrupted campaign still
//! has one); the verdict (`decide`, `decision-summary.json`, the reports) is derived from it and
//! the manifest alone, never from anything held in memory. Every number here is copied from a
//! step's own evidence file, which `evidence` names so a reader can re-check it.

use super::types::{FailureClass, GateName, GateStatus, Policy, RankingMetric, RestorationStatus};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const RESULT_FILE: &str = super::bundle::RESULT;
pub const SCHEMA: &str = "bakeoff.campaign-result/v1";

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct CampaignResult {
    pub schema: String,
    pub bakeoff_version: String,
    pub campaign_id: String,
    /// Wall-clock labels (UTC) of the start and of the last update.
    pub started_at: String,
    pub updated_at: String,
    /// True only when every planned arm reached an end state and the incumbent was restored.
    pub complete: bool,
    /// Why the campaign is incomplete (interrupted, restoration failed, ...), when it is.
    pub incomplete_reason: Option<String>,
    pub identity: Identity,
    pub workload: WorkloadRecord,
    /// `online-direct` (client to engine) or `routed` (client to a gateway).
    pub measurement_path: String,
    pub idle_baseline: Option<GateRecord>,
    pub arms: Vec<ArmResult>,
    pub restoration: Option<Restoration>,
    /// Limitations observed while running (telemetry gaps, skipped steps), in words.
    pub notes: Vec<String>,
    /// The campaign's policy as the run used it (after load filled its defaults), so the verdict
    /// reads it from here. Absent in bundles written before it was recorded: `bakeoff report`
    /// then falls back to the bundle's `campaign.toml` (src/report/mod.rs
    /// `legacy_policy_from_campaign_copy`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<Policy>,
    /// The lanes of a multi-lane campaign (docs/fleet.md): each lane's folder, address, incumbent
    /// and arms in the order they ran there. Empty (and not written) for a one-lane campaign.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lanes: Vec<LaneRun>,
    /// A multi-lane campaign's card-to-card spread, measured by a control on every lane
    /// (`lane-spread.json`, docs/fleet.md); the verdict ties arms of different lanes within it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lane_spread: Option<LaneSpread>,
    /// Arms moved off a drained lane (docs/fleet.md "A lane that dies"), in the order they
    /// were moved. Empty (and not written) when no lane was drained.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub moves: Vec<ArmMove>,
    /// A `[fleet.slurm]` campaign: the allocation its lanes came from (the nodes Slurm granted,
    /// each lane's node), as `slurm-allocation.json` records it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm_allocation: Option<super::allocation::SlurmAllocation>,
    /// A multi-lane campaign's schedule as it ran, one per invocation: when each lane's runs
    /// started and ended, and how long no lane was running one (docs/fleet.md "Schedule timing").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub schedule_timing: Vec<ScheduleTiming>,
}

/// One invocation of a multi-lane run: the lanes' runs on one clock, from the moment the run
/// began taking its lanes to the moment the merged result was ready to be sealed.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ScheduleTiming {
    pub invocation: u32,
    pub wall_ms: f64,
    /// Time at least one lane was running (the union of `runs`).
    pub busy_ms: f64,
    /// `wall_ms - busy_ms`: taking the lanes before, the merge after, any gap between.
    pub no_lane_busy_ms: f64,
    /// `no_lane_busy_ms / wall_ms`.
    pub no_lane_busy_fraction: f64,
    /// Each run of the invocation (a lane's own, a moved one), in start order.
    pub runs: Vec<RunSpan>,
}

/// When one lane's run started and ended, in ms since its invocation began.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct RunSpan {
    pub lane: String,
    /// Its folder in the bundle (`lanes/<id>`, `lanes/<id>.moved-<n>`).
    pub folder: String,
    pub start_ms: f64,
    pub end_ms: f64,
}

impl ScheduleTiming {
    /// The timing of `runs` within `wall_ms`: the busy time is their union (lanes overlap).
    pub fn of(invocation: u32, wall_ms: f64, mut runs: Vec<RunSpan>) -> ScheduleTiming {
        runs.sort_by(|a, b| a.start_ms.total_cmp(&b.start_ms));
        let mut busy = 0.0;
        let mut open: Option<(f64, f64)> = None;
        for r in &runs {
            match open {
                Some((s, e)) if r.start_ms <= e => open = Some((s, e.max(r.end_ms))),
                Some((s, e)) => {
                    busy += e - s;
                    open = Some((r.start_ms, r.end_ms));
                }
                None => open = Some((r.start_ms, r.end_ms)),
            }
        }
        if let Some((s, e)) = open {
            busy += e - s;
        }
        let idle = (wall_ms - busy).max(0.0);
        ScheduleTiming {
            invocation,
            wall_ms,
            busy_ms: busy,
            no_lane_busy_ms: idle,
            no_lane_busy_fraction: if wall_ms > 0.0 { idle / wall_ms } else { 0.0 },
            runs,
        }
    }
}

/// An arm moved off a lane that died during the run, to be run from the start on a live lane.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ArmMove {
    pub arm: String,
    /// The drained lane.
    pub from: String,
    /// The lane it ran on instead; None: no live lane was left (the run is incomplete).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// The folder it ran in on that lane (`lanes/<lane>.moved-<n>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub folder: Option<String>,
    /// Why the lane was drained, in the words of whoever said it (Slurm's state and reason).
    pub cause: String,
    /// The drained lane's folder: the arm's partial evidence there is kept and not counted.
    pub left_in: String,
}

/// `lane-spread.json`: a multi-lane campaign's card-to-card spread (computed in
/// `evidence::lane_spread`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct LaneSpread {
    pub schema: String,
    /// The arm whose recipe is the control (`[fleet] control`, default the incumbent).
    pub control: String,
    /// One per lane whose control finished its warm step, in lane order.
    pub lanes: Vec<LaneControl>,
    /// Per metric: the spread over those lanes (absent for a metric fewer than 2 lanes measured).
    pub spread: BTreeMap<RankingMetric, MetricSpread>,
    /// Lanes whose control differs from the others beyond its own interval, in words.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outliers: Vec<String>,
    /// Lanes with no control figures, and why (the control failed there, …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
}

/// One lane's control figures.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct LaneControl {
    pub lane: String,
    /// The arm record they come from: the control arm itself on its own lane (its measurement
    /// serves), else its copy `<control>.control`.
    pub arm: String,
    /// The warm c1 timing file (bundle-relative).
    pub evidence: String,
    pub ttft_ms: Option<Stat>,
    pub decode_tok_s: Option<Stat>,
    pub e2e_ms: Option<Stat>,
}

/// The spread of one metric across lanes.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct MetricSpread {
    /// `(max − min) / min` of the lanes' medians, a fraction.
    pub spread: f64,
    /// How many lanes' medians it spans.
    pub lanes: usize,
    /// The lanes with the lowest and the highest median.
    pub lowest: String,
    pub highest: String,
}

/// One lane of a multi-lane campaign, as it ran.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct LaneRun {
    pub id: String,
    /// `host:port`.
    pub address: String,
    /// The incumbent arm serving it (stopped, measured and restored there); None: a
    /// qualification lane.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incumbent: Option<String>,
    /// The lane's folder in the bundle (`lanes/<id>`): its own run's result, checkpoint, launch
    /// journal and evidence; every evidence name of its arms starts with it.
    pub folder: String,
    /// Its arms, in the order they ran.
    pub arms: Vec<String>,
    pub complete: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incomplete_reason: Option<String>,
    /// The lane died during the run and was drained: why (its unfinished arms moved, `moves`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drained: Option<String>,
    /// This record is a run of arms moved here from drained lane `moved_from` (in its own
    /// folder, `lanes/<id>.moved-<n>`), not the lane's own run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moved_from: Option<String>,
    /// Where its load client ran and, over the network, the round trip to the lane (absent in
    /// bundles made before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<super::client_path::ClientPath>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Identity {
    /// Measured device(s), e.g. "single NVIDIA H200, 143771 MiB", or "CPU only: 2 x AMD EPYC".
    pub hardware: String,
    pub topology: String,
    /// Label of the incumbent arm (what served before and was restored after).
    pub incumbent: String,
    pub incumbent_arm: String,
    pub host: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct WorkloadRecord {
    /// Operator-declared order, e.g. ["ttft", "decode_tokens_per_second", ...].
    pub ranking_priority: Vec<RankingMetric>,
    /// Target of the matched prompt.
    pub matched_prompt_tokens: u64,
    /// What the endpoints reported for it (one value per arm that ran; all equal when matched).
    pub matched_prompt_tokens_reported: BTreeMap<String, u64>,
    pub max_tokens: u64,
    pub warm_repetitions_per_arm: u64,
    pub concurrency: Vec<u64>,
    /// Long-context targets per profile (tokens).
    pub long_context_targets: BTreeMap<String, u64>,
    pub sampling: serde_json::Value,
    /// Tolerances the campaign declares for ranking ties, per metric (fractional).
    pub tie_tolerance: BTreeMap<RankingMetric, f64>,
    /// `allow_prefix_cache`: whether identical prompts could hit the engines' prefix caches
    /// (false: a nonce defeats them). None in bundles written before it was recorded.
    #[serde(default)]
    pub allow_prefix_cache: Option<bool>,
    /// The OpenAI API of the timed requests (`chat` or `completions`); empty when not recorded.
    #[serde(default)]
    pub api: String,
    /// Shape label of the matched prompt in file names (`256`, `4k`, ...); empty when not recorded.
    #[serde(default)]
    pub prompt_label: String,
    /// The campaign's SLO gates (`[[workload.slo]]`); empty when it declares none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slo: Vec<SloGate>,
    /// The concurrency level the `concurrency` and `goodput` priorities compare
    /// (`concurrency_priority_level`); None: the highest level each arm ran (older campaigns).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency_priority_level: Option<u64>,
    /// The workload source beside the matched prompt (`[workload.dataset]`, `.synthetic`,
    /// `.conversation`, `.shared_prefix`: the plan's record, with a dataset's SHA-256); None:
    /// the matched prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<serde_json::Value>,
    /// Per arm, the work items it sized, in order (dataset: item index and id; synthetic: the
    /// drawn lengths): every arm must send the same ones.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub work_items: BTreeMap<String, Vec<serde_json::Value>>,
}

/// One SLO gate as the run used it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct SloGate {
    /// The limit as written, e.g. `ttft_p95=500ms`.
    pub limit: String,
    /// The level it applies to; None: every measured level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u64>,
}

/// One SLO limit checked against a timed step's distribution (`metrics::slo::check`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct SloCheckRecord {
    /// The limit in words, e.g. `ttft p95 <= 500 ms`.
    pub limit: String,
    /// The step's value of the statistic; None when the step has no sample of the metric.
    pub observed_ms: Option<f64>,
    pub met: bool,
}

/// Goodput of a timed step: successful requests whose own latencies met every SLO limit of the
/// level, and that count per second of the step's window (`metrics::slo::goodput`).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct GoodputRecord {
    pub requests_meeting: u64,
    pub requests_ok: u64,
    pub goodput_req_s: Option<f64>,
}

/// One arm's trace replay: what was replayed (the same on every arm), its timing figures over the
/// measured requests, and how closely the trace's schedule was kept.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct TraceReplayRecord {
    /// The figures of the measured requests (`concurrency` is the cap, 0: none).
    pub timing: TimingRecord,
    pub file: String,
    pub sha256: String,
    pub replayed: u64,
    pub warmup: u64,
    pub speedup: f64,
    /// The trace's mean arrival rate over the replayed schedule, requests/s.
    pub mean_rate_per_s: f64,
    pub prompt_tokens: u64,
    /// Prompt tokens the trace shares with an earlier request by its `hash_ids`.
    pub shared_tokens: u64,
    /// Actual send minus the trace's intended send, ms (a request held by the cap counts here,
    /// never in its TTFT).
    pub arrival_error_ms: Option<ArrivalErrorRecord>,
}

/// Percentiles of a trace replay's arrival error, ms.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct ArrivalErrorRecord {
    pub n: u64,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

/// An arm's capacity under SLOs (`[workload.capacity]`, its `<arm>-capacity.json`): the
/// highest probed rate that held, the lowest that broke and what broke it, or the rate at which
/// the client was the limit (then nothing above the held rate is the arm's figure).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct CapacityRecord {
    pub evidence: String,
    /// Requests per second of the highest probe at which every SLO held and failures stayed
    /// under the share; None when none did.
    pub held_rate_per_s: Option<f64>,
    /// The lowest probed rate that broke; None when none did.
    pub broken_rate_per_s: Option<f64>,
    /// What broke it: the SLO checks in words, or the failed share.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broken_by: Option<String>,
    /// The client's own overload signals fired at this rate (the capacity is client-bound).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_bound_rate_per_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_bound_because: Option<String>,
    pub stopped_because: String,
    /// Every probe, in the order run.
    pub probes: Vec<CapacityProbeRecord>,
}

/// One capacity probe: its rate, what it achieved and how it was judged.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct CapacityProbeRecord {
    pub rate_per_s: f64,
    /// `held`, `broken` or `client-bound`.
    pub outcome: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub because: Option<String>,
    pub requests_ok: u64,
    pub requests_failed: u64,
    pub achieved_rate_per_s: Option<f64>,
    pub goodput: Option<GoodputRecord>,
    pub slo: Vec<SloCheckRecord>,
    /// Completion tokens of the probe's successful requests (the mean output length the cost at
    /// the capacity rate rests on); None when a request reported no usage, and in results written
    /// before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// The GPU energy over the probe's window (`evidence::energy`, as a timed step's), recomputed
    /// from the probe's entry in the step file by `verify`. Absent in results written before it
    /// was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy: Option<super::energy::StepEnergy>,
}

/// How much of an arm's timed prompt tokens its engine served from its prefix cache, summed over
/// its timing step files' requests (`usage.prompt_tokens_details.cached_tokens`). Derived from
/// the step files when the bundle is read, never trusted from a summary.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct CacheUse {
    /// Successful timed requests counted, and how many of them reported `cached_tokens`.
    pub requests: u64,
    pub requests_reporting: u64,
    pub prompt_tokens: u64,
    pub cached_tokens: u64,
}

impl CacheUse {
    /// cached / prompt tokens, over the requests that reported both.
    pub fn share(&self) -> Option<f64> {
        (self.requests_reporting > 0 && self.prompt_tokens > 0)
            .then(|| self.cached_tokens as f64 / self.prompt_tokens as f64)
    }
}

/// One timed step's cache use (`evidence::reuse`), and its per-turn rows when its requests were conversation turns.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepReuse {
    /// The step as the verdict names it: `cold`, `warm`, `C4`, `long-context timing`, or an
    /// open-loop rate's key (`r4`).
    pub step: String,
    pub evidence: String,
    pub cache: CacheUse,
    /// Per conversation turn (1-based, ascending); empty for requests without a turn.
    pub turns: Vec<TurnReuse>,
}

/// One conversation turn's successful requests in a step.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TurnReuse {
    pub turn: u64,
    pub cache: CacheUse,
    /// TTFT of each successful request of this turn, ms, in request order.
    pub ttft_ms: Vec<f64>,
}

impl StepReuse {
    /// The turn's row, when the step had requests of that turn.
    pub fn turn(&self, k: u64) -> Option<&TurnReuse> {
        self.turns.iter().find(|t| t.turn == k)
    }

    /// The highest turn the step's requests reached (0 without turns).
    pub fn last_turn(&self) -> u64 {
        self.turns.last().map_or(0, |t| t.turn)
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum ArmStatus {
    /// Not started yet (or skipped because the campaign was interrupted).
    #[default]
    Pending,
    /// Every planned step ran (gates may still have failed: see `failure`).
    Completed,
    /// A step could not run (launch, ready, crash); later steps were skipped.
    Failed,
    /// Stopped by an interrupt before its steps finished.
    Interrupted,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ArmResult {
    pub id: String,
    /// Human label, e.g. "Gittensor RTX5090 NVFP4 target-only".
    pub label: String,
    /// incumbent | candidate | control
    pub role: String,
    pub engine: String,
    pub model: String,
    pub quantization: Option<String>,
    /// Served (configured) context, tokens.
    pub served_context: u64,
    /// Context the endpoint itself reported when ready, tokens.
    pub reported_context: Option<u64>,
    pub speculative: Option<SpecRecord>,
    pub long_context_profile: Option<String>,
    pub status: ArmStatus,
    /// Why this arm cannot win, when it can't (launch failure, required gate failed, ...).
    pub failure: Option<Failure>,
    /// Cold run (first timed request after start): never merged with warm samples.
    pub cold: Option<TimingRecord>,
    /// Warm repetitions at concurrency 1.
    pub warm: Option<TimingRecord>,
    /// Concurrency levels above 1, keyed by level ("2", "4", ...).
    pub concurrency: BTreeMap<String, TimingRecord>,
    /// Open-loop steps (`[workload.open_loop]`), keyed by rate and cap ("r4", "r2.5-cap8").
    /// Absent in results without them. Recorded and reported; the ranking does not read them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub rates: BTreeMap<String, TimingRecord>,
    /// Capacity under SLOs (`[workload.capacity]`); absent without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<CapacityRecord>,
    /// The trace replay (`[workload.trace]`); absent without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceReplayRecord>,
    /// Long-context retrieval request(s): actual prompt tokens and decode at that length.
    pub long_context: Option<LongContextRecord>,
    pub gates: Vec<GateRecord>,
    /// Engine log lines matching the campaign's declared quality-risk patterns.
    pub quality_risk_lines: Vec<String>,
    /// GPU memory free after the arm started (MiB, the lane's GPUs), when measured.
    pub gpu_free_after_start_mib: Option<u64>,
    pub gpu_peak_used_mib: Option<u64>,
    /// Evidence files this arm wrote.
    pub evidence: Vec<String>,
    /// The price of the lane it ran on (`cost_per_hour`, `currency`); absent without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price: Option<super::energy::Price>,
    /// Prefix-cache use measured in the arm's timing step files (filled when a bundle is read;
    /// see [`CacheUse`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_cache: Option<CacheUse>,
    /// Cache use per timed step and conversation turn, with each turn's TTFTs (filled when a
    /// bundle is read, `evidence::reuse`; never written).
    #[serde(skip)]
    pub reuse: Vec<StepReuse>,
}

impl ArmResult {
    /// The arm's closed-loop timed steps, each with its name in the verdict: `cold`, `warm`,
    /// `C<k>` per concurrency level, `long-context timing` (the availability count, the
    /// output-length check and the cache-reuse reading walk these).
    pub fn closed_loop_steps(&self) -> Vec<(String, &TimingRecord)> {
        let mut v: Vec<(String, &TimingRecord)> = Vec::new();
        v.extend(self.cold.iter().map(|t| ("cold".to_string(), t)));
        v.extend(self.warm.iter().map(|t| ("warm".to_string(), t)));
        v.extend(
            self.concurrency
                .values()
                .map(|t| (format!("C{}", t.concurrency), t)),
        );
        v.extend(
            self.long_context
                .iter()
                .filter_map(|l| l.timing.as_ref())
                .map(|t| ("long-context timing".to_string(), t)),
        );
        v
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct SpecRecord {
    pub method: String,
    /// Arm id of the matched no-speculation control.
    pub control: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Failure {
    pub class: FailureClass,
    pub detail: String,
    pub evidence: Option<String>,
}

/// Summary statistics of one timed step, copied from its evidence file.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct TimingRecord {
    pub evidence: String,
    pub concurrency: u64,
    pub requests_ok: u64,
    pub requests_failed: u64,
    /// Failed requests by error class (`http-status`, `connect`, `timeout`, ...), as the step
    /// file's `stats.failures_by_class` counts them. Absent in results written before it existed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub failures_by_class: BTreeMap<String, u64>,
    pub ttft_ms: Option<Stat>,
    pub decode_tok_s: Option<Stat>,
    pub e2e_ms: Option<Stat>,
    pub itl_ms: Option<Stat>,
    pub aggregate_output_tok_s: Option<f64>,
    /// usage.prompt_tokens the endpoint reported (all requests of the step agree when matched).
    pub prompt_tokens_reported: Option<u64>,
    /// The SLO limits that apply at this level, checked (absent without SLOs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slo: Vec<SloCheckRecord>,
    /// Goodput under those limits (absent without SLOs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodput: Option<GoodputRecord>,
    /// Open-loop steps: the rate asked for (requests/s), the arrival process (`constant`,
    /// `poisson`) and the cap on requests in flight; `concurrency` is then the cap (0: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_per_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrival: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<u64>,
    /// Open-loop steps: successful measured requests per second over the measured window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub achieved_rate_per_s: Option<f64>,
    /// With `ignore_eos`: how many successful requests got fewer completion tokens than asked
    /// (absent without `ignore_eos`, and in results written before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_length: Option<OutputLength>,
    /// The GPU energy over the step's window (`evidence::energy`), recomputed from the step file
    /// by `verify`. Absent in results written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy: Option<super::energy::StepEnergy>,
}

/// A step whose requests each asked for exactly `asked` completion tokens (`ignore_eos`): what
/// the engine gave. E2E and throughput rest on it: a response that stopped short is faster than
/// the one asked for.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct OutputLength {
    pub asked: u64,
    /// Successful requests whose usage reported completion tokens.
    pub requests: u64,
    /// Of those, the ones with fewer than `asked`.
    pub short: u64,
    /// The fewest completion tokens of any of them.
    pub min_tokens: Option<u64>,
    /// Successful requests without usage (their length could not be checked).
    pub unreported: u64,
    /// Completion tokens summed, and the part the endpoint reported as reasoning.
    pub completion_tokens: u64,
    pub reasoning_tokens: u64,
    /// Requests that spent tokens reasoning and showed no visible content at all.
    pub empty_visible: u64,
}

/// p50 with the interval of the median (and p95, for the reports).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct Stat {
    pub p50: f64,
    /// The interval of the median (named for the 95 % it aims at): a confidence interval of
    /// 95 % or more only when `ci_coverage` says so; below 6 samples the range `[min, max]`.
    pub ci95: [f64; 2],
    pub p95: f64,
    pub n: u64,
    /// How `ci95` was formed. None in results written before it was recorded (their intervals
    /// were percentile bootstraps).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci_method: Option<CiMethod>,
    /// The interval's exact coverage of the median (0.96875 for 6 samples, 0.9375 for the range
    /// of 5). None in results written before it was recorded: unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci_coverage: Option<f64>,
}

/// The smallest sample whose order-statistic interval of the median reaches 95 % coverage: below
/// it the interval is the range `[min, max]`, which covers the median `1 − 2·½ⁿ` (93.75 % at 5).
/// `metrics::stats` computes the intervals; validation warns from this.
pub const MIN_N_FOR_95: usize = 6;

/// How the interval of a median was formed (`metrics::stats`).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum CiMethod {
    /// Order statistics with exact coverage of 95 % or more (6 samples or more).
    OrderStatistic,
    /// The range `[min, max]` of fewer than 6 samples: no 95 % interval is possible.
    Range,
    /// A percentile bootstrap (`bootstrap-1000`), as older step files record it.
    #[serde(rename = "bootstrap-1000")]
    Bootstrap,
}

impl CiMethod {
    /// The method a step file names (`median_ci_method`); None for one this build doesn't know.
    pub fn parse(s: &str) -> Option<CiMethod> {
        serde_json::from_value(serde_json::Value::String(s.to_string())).ok()
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct LongContextRecord {
    pub evidence: String,
    pub target_tokens: u64,
    /// usage.prompt_tokens of each retrieval request.
    pub actual_prompt_tokens: Vec<u64>,
    pub passed: bool,
    pub decode_tok_s: Option<f64>,
    pub e2e_ms: Option<f64>,
    /// The long-context timing step's requests (absent when it did not run, and in results
    /// written before they were recorded): they count toward the availability requirement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timing: Option<TimingRecord>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct GateRecord {
    pub name: GateName,
    pub status: GateStatus,
    pub passed: Option<u64>,
    pub total: Option<u64>,
    pub detail: String,
    /// Required by the campaign's policy (a failed required gate makes the arm ineligible).
    pub required: bool,
    pub evidence: Option<String>,
    /// Requests the gate sent and how many of them failed as requests (HTTP error status,
    /// connection error, timeout, broken stream): not wrong answers. Absent for gates that send
    /// no request and in results written before they were recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<RequestCounts>,
}

/// Requests sent by a gate and those that failed as requests, with their error classes.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct RequestCounts {
    pub sent: u64,
    pub failed: u64,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub failures_by_class: BTreeMap<String, u64>,
    /// Every failed observation of the gate failed on a request error (none on a wrong answer).
    #[serde(default)]
    pub failures_are_request_errors: bool,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Restoration {
    pub status: RestorationStatus,
    pub recipe_hash_expected: String,
    pub recipe_hash_actual: String,
    pub argv_env_hash_expected: String,
    pub argv_env_hash_actual: String,
    pub served_model_expected: String,
    pub served_model_actual: Option<String>,
    pub context_expected: u64,
    pub context_actual: Option<u64>,
    pub preflight: Option<GateRecord>,
    pub detail: String,
    pub evidence: Option<String>,
}

impl CampaignResult {
    pub fn new(campaign_id: &str) -> CampaignResult {
        CampaignResult {
            schema: SCHEMA.to_string(),
            bakeoff_version: crate::VERSION.to_string(),
            campaign_id: campaign_id.to_string(),
            measurement_path: "online-direct".to_string(),
            ..Default::default()
        }
    }

    pub fn arm(&self, id: &str) -> Option<&ArmResult> {
        self.arms.iter().find(|a| a.id == id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(lane: &str, start_ms: f64, end_ms: f64) -> RunSpan {
        RunSpan {
            lane: lane.into(),
            folder: format!("lanes/{lane}"),
            start_ms,
            end_ms,
        }
    }

    #[test]
    fn schedule_timing_counts_overlapping_lanes_once() {
        // g0 0.2–6 s, g1 1–4 s then moved g1 7–9 s: busy 5.8 + 2 = 7.8 s of 10 s; idle the
        // 0.2 s before, 6–7 s between and 9–10 s after.
        let t = ScheduleTiming::of(
            1,
            10_000.0,
            vec![
                span("g1", 7_000.0, 9_000.0),
                span("g0", 200.0, 6_000.0),
                span("g1", 1_000.0, 4_000.0),
            ],
        );
        assert_eq!(t.busy_ms, 7_800.0);
        assert_eq!(t.no_lane_busy_ms, 2_200.0);
        assert!((t.no_lane_busy_fraction - 0.22).abs() < 1e-12);
        assert_eq!(t.runs[0].lane, "g0");
        assert_eq!(t.runs[2].start_ms, 7_000.0);
        let none = ScheduleTiming::of(2, 0.0, Vec::new());
        assert_eq!((none.busy_ms, none.no_lane_busy_fraction), (0.0, 0.0));
    }

    #[test]
    fn round_trips_through_json() {
        let mut r = CampaignResult::new("c1");
        r.arms.push(ArmResult {
            id: "a".into(),
            status: ArmStatus::Completed,
            warm: Some(TimingRecord {
                evidence: "a-timing-256-c1-warm.json".into(),
                ttft_ms: Some(Stat {
                    p50: 50.0,
                    ci95: [49.9, 50.1],
                    p95: 51.0,
                    n: 5,
                    ci_method: Some(CiMethod::Range),
                    ci_coverage: Some(0.9375),
                }),
                ..Default::default()
            }),
            ..Default::default()
        });
        let s = serde_json::to_string(&r).unwrap();
        assert!(s.contains("\"status\":\"completed\""));
        let back: CampaignResult = serde_json::from_str(&s).unwrap();
        assert_eq!(back, r);
    }
}
