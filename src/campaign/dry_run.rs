//! The dry run: a [`Plan`] as the text `bakeoff run FILE --dry-run` prints (identity, lane,
//! workload, gates, then per phase and arm the exact commands and the numbered steps with their
//! evidence files, then the policy).

use super::command::Mask;
use super::plan::{Phase, Plan, PlanStep, StepKind};
use super::spec::{Arm, Campaign, Promotion};
use std::fmt::Write as _;

/// One lane's settings: its address and timings, then its GPUs.
fn render_lane(o: &mut String, label: &str, l: &super::spec::Lane) {
    let _ = writeln!(
        o,
        "{label} {} (health {}, ready within {} s, stop grace {} s)",
        l.base_url(),
        l.health_path,
        l.ready_timeout_s,
        l.stop_grace_s
    );
    if l.gpus.is_empty() {
        let _ = writeln!(
            o,
            "  gpus       none: the idle baseline and memory-reserve steps are left out"
        );
    } else {
        let _ = writeln!(
            o,
            "  gpus       {}; keep {} MiB free after an arm is ready; idle baseline at most {} MiB used",
            l.gpus.join(", "),
            l.memory_reserve_mib,
            l.idle_baseline_max_mib
        );
    }
    if let Some(p) = l.price() {
        let _ = writeln!(
            o,
            "  price      {} {} per hour (cost per million output tokens = price / measured output throughput)",
            p.cost_per_hour, p.currency
        );
    }
}

impl Plan {
    /// `[[lanes]]`: every lane with its settings, its incumbent and the arms scheduled on it, in
    /// the order they run there.
    fn render_lanes(&self, o: &mut String) {
        let c = &self.campaign;
        let lanes = c.lanes();
        let _ = writeln!(
            o,
            "lanes        {} lane(s); each runs its arms one at a time, the lanes side by side (longest arm first, to the least-loaded lane; a speculative arm beside its control; an incumbent on its own lane)",
            lanes.len()
        );
        if let Some(req) = c.slurm_request() {
            let _ = writeln!(
                o,
                "slurm        the lanes slurm-1.. come from Slurm when the run starts, not now: bakeoff asks `{}`, waits for it to run (then `scontrol show hostnames` of its NodeList: one lane per node), and cancels it on every path out (end, error, signal; after a crash `bakeoff recover`)",
                req.join(" ")
            );
        }
        for (l, q) in lanes.iter().zip(&self.schedule.lanes) {
            render_lane(o, &format!("lane {:<7}", l.id), &l.lane);
            let granted = c.fleet.iter().any(|e| e.id == l.id && e.granted.is_some());
            if granted && l.lane.slurm_node.is_none() {
                let _ = writeln!(
                    o,
                    "  slurm      a node Slurm grants at run time: every arm's job pinned there (--nodelist), the address above replaced by its NodeAddr{}",
                    l.lane.slurm_gres.as_deref().map(|g| format!("; an arm that asks no GPUs gets --gres={g}")).unwrap_or_default()
                );
            }
            if let Some(node) = &l.lane.slurm_node {
                let _ = writeln!(
                    o,
                    "  slurm      node {node}: every arm's job pinned there (--nodelist={node}); the address above is replaced by the node's NodeAddr when the run starts"
                );
            }
            let _ = writeln!(
                o,
                "  incumbent  {}",
                l.incumbent.as_deref().map_or(
                    "none (a qualification lane: nothing to stop or restore)".to_string(),
                    |i| format!("{i} (stopped first, restored exactly afterwards)")
                )
            );
            let _ = writeln!(
                o,
                "  schedule   {} arm(s), {} steps expected",
                q.arms.len(),
                q.steps()
            );
            let control = match c.control_arm() {
                Ok(a) if q.arms.iter().any(|x| x.arm == a.id) => {
                    format!("{}'s own warm c1 timing serves (card-to-card spread)", a.id)
                }
                Ok(a) => format!(
                    "first, {} = {}'s recipe, cold and warm c1 timing only (card-to-card spread)",
                    super::lane_plan::control_copy_id(&a.id),
                    a.id
                ),
                Err(why) => format!("none: {why}; the spread between lanes is not measured"),
            };
            let _ = writeln!(o, "  control    {control}");
            for (n, a) in q.arms.iter().enumerate() {
                let _ = writeln!(
                    o,
                    "    {}. {} ({} steps): {}",
                    n + 1,
                    a.arm,
                    a.steps,
                    a.why.words()
                );
            }
            if !l.lane.env.is_empty() {
                let env: Vec<String> = l.lane.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
                let _ = writeln!(o, "  env        {} (every arm on this lane)", env.join(" "));
            }
        }
    }
}

fn list<T, F: Fn(&T) -> String>(items: &[T], f: F) -> String {
    if items.is_empty() {
        "none".into()
    } else {
        items.iter().map(f).collect::<Vec<_>>().join(", ")
    }
}

impl Plan {
    /// The human-readable dry run: identity, lane, workload, gates, then per phase and arm the
    /// exact commands and the numbered steps with their evidence files, then the policy. A
    /// `from_env` value appears only as `NAME=<from $NAME, masked>`; `mask` scrubs any secret
    /// value that would still appear.
    pub fn render(&self, mask: &Mask) -> String {
        let c = &self.campaign;
        let mut o = String::new();
        let id = &c.campaign;
        let _ = writeln!(
            o,
            "bakeoff dry run of campaign {} (nothing is started and no request is sent)",
            id.id
        );
        let _ = writeln!(
            o,
            "  file       {} (sha256 {})",
            c.source.path.display(),
            c.source.sha256
        );
        if let Some(d) = &id.description {
            let _ = writeln!(o, "  about      {}", d.replace('\n', " "));
        }
        let hw = if id.hardware_is_auto() {
            "auto (detected at run time)".to_string()
        } else {
            id.hardware.clone()
        };
        let _ = writeln!(o, "  hardware   {hw}");
        let _ = writeln!(o, "  topology   {}", id.topology);
        let _ = writeln!(o, "  output     {}", id.output.display());
        if c.fleet.is_empty() {
            render_lane(&mut o, "lane        ", &c.lane);
        } else {
            self.render_lanes(&mut o);
        }
        let w = &c.workload;
        let _ = writeln!(
            o,
            "workload     matched prompt {} tokens (label {}), max_tokens {}, {} API, prefix cache {}",
            w.matched_prompt_tokens,
            w.prompt_label,
            w.max_tokens,
            match w.api {
                super::spec::ApiKind::Chat => "chat",
                super::spec::ApiKind::Completions => "completions",
            },
            cache_words(w)
        );
        let _ = writeln!(
            o,
            "  runs       1 cold request, {} warm repetitions at c1; concurrency levels {}",
            w.warm_repetitions,
            list(&w.concurrency, |n| n.to_string())
        );
        if let Some(ol) = &w.open_loop {
            let _ = writeln!(
                o,
                "  open loop  {} at rate{} {} req/s ({} arrivals), {}, {} measured request(s) per rate, {}",
                if ol.rates.len() > 1 { "a rate sweep" } else { "one step" },
                if ol.rates.len() > 1 { "s" } else { "" },
                list(&ol.rates, |r| r.to_string()),
                ol.arrival.as_str(),
                ol.max_concurrency
                    .map_or("no concurrency cap".to_string(), |c| format!("at most {c} in flight")),
                ol.requests,
                super::plan::warmup_words(ol.warmup, ol.warmup_secs),
            );
        }
        if let Some(k) = super::capacity::CapacityStep::of(w) {
            let _ = writeln!(o, "  capacity   {}", k.describe());
        }
        let s = &w.sampling;
        let _ = writeln!(
            o,
            "  sampling   temperature {}, top_p {}, seed {}, ignore_eos {}",
            s.temperature,
            s.top_p.map_or("unset".to_string(), |t| t.to_string()),
            s.seed,
            s.ignore_eos
        );
        if let Some(src) = &self.request.source {
            let _ = writeln!(o, "  source     {}", source_line(src));
        }
        if !w.long_context_targets.is_empty() {
            let t: Vec<(&String, &u64)> = w.long_context_targets.iter().collect();
            let _ = writeln!(
                o,
                "  long ctx   {}",
                list(&t, |(k, v)| format!("{k} = {v} tokens"))
            );
        }
        let _ = writeln!(
            o,
            "  ranking    {}",
            w.ranking_priority
                .iter()
                .map(|m| m.as_str())
                .collect::<Vec<_>>()
                .join(" > ")
        );
        if w.ranking_priority.iter().any(|m| {
            matches!(
                m,
                crate::evidence::RankingMetric::Concurrency
                    | crate::evidence::RankingMetric::Goodput
            )
        }) {
            let _ = writeln!(
                o,
                "  level      {}",
                match w.concurrency_priority_level {
                    Some(n) => format!("concurrency and goodput compared at c{n}"),
                    None => format!(
                        "concurrency compared at the highest level above 1 each arm ran, goodput at c{} (concurrency_priority_level names a level)",
                        w.priority_level()
                    ),
                }
            );
        }
        for e in &w.slo {
            let _ = writeln!(
                o,
                "  slo        {} at {} (broken: the arm is ineligible, slo-violated)",
                e.limit,
                e.concurrency
                    .map(|n| format!("c{n}"))
                    .unwrap_or_else(|| "every level".into())
            );
        }
        let g = &c.gates;
        let _ = writeln!(
            o,
            "gates        preflight: {}",
            list(&g.preflight, |x| x.as_str().to_string())
        );
        if let Some(t) = &g.tools {
            let _ = writeln!(
                o,
                "  tools      {} requests per variant ({}), suite {}",
                t.batch,
                list(&t.variants, |v| v.as_str().to_string()),
                t.suite
                    .as_ref()
                    .map_or("built-in".to_string(), |p| p.display().to_string())
            );
        }
        if let Some(r) = &g.retrieval {
            let _ = writeln!(
                o,
                "  retrieval  {} needle(s) at depths {}, answer max_tokens {}",
                r.needles,
                list(&r.depths, |d| d.to_string()),
                r.max_tokens
            );
        }
        if let Some(q) = &g.quality {
            let _ = writeln!(
                o,
                "  quality    {} repetition(s), suite {}",
                q.repetitions,
                q.suite
                    .as_ref()
                    .map_or("built-in".to_string(), |p| p.display().to_string())
            );
        }
        for s in &self.suites {
            let _ = writeln!(
                o,
                "  suite      {} {}: {} case(s), sha256 {}",
                s.gate, s.path, s.cases, s.sha256
            );
        }

        let _ = writeln!(
            o,
            "\nplan: {} arms, {} steps",
            c.arms.len(),
            self.steps.len()
        );
        let width = self
            .steps
            .iter()
            .map(|s| s.evidence.len())
            .max()
            .unwrap_or(0);
        let mut current: Option<(Phase, Option<&str>)> = None;
        for step in &self.steps {
            let key = (
                step.phase,
                if step.phase == Phase::Arm {
                    step.arm.as_deref()
                } else {
                    None
                },
            );
            if current != Some(key) {
                current = Some(key);
                match step.phase {
                    Phase::Setup => {
                        let _ = writeln!(o, "\nsetup");
                    }
                    Phase::Restoration => {
                        let _ = writeln!(o, "\nrestoration of incumbent {}", c.incumbent().id);
                    }
                    Phase::Arm => {
                        if let Some(arm) = step.arm.as_deref().and_then(|a| c.arm(a)) {
                            render_arm_header(&mut o, c, arm, mask);
                        }
                    }
                }
            }
            let _ = writeln!(
                o,
                "  {:>3}. {:<21} {:<width$} {}",
                step.number,
                step.kind.name(),
                step.evidence,
                describe(c, step)
            );
        }

        let p = &c.policy;
        let _ = writeln!(o, "\npolicy");
        let _ = writeln!(
            o,
            "  promotion        {}",
            match p.promotion {
                Promotion::Manual => "manual (the verdict recommends; a person promotes)",
                Promotion::Auto => "auto (an eligible winner may be promoted without a person)",
            }
        );
        let _ = writeln!(
            o,
            "  required gates   {}",
            list(&p.required_gates, |g| g.as_str().to_string())
        );
        let _ = writeln!(
            o,
            "  required labels  {}",
            list(&p.required_evidence_labels, |l| l.clone())
        );
        let tol: Vec<String> = p
            .tie_tolerance
            .iter()
            .map(|(m, t)| format!("{} {}%", m.as_str(), t * 100.0))
            .collect();
        let _ = writeln!(o, "  tie tolerance    {}", list(&tol, |s| s.clone()));
        let _ = writeln!(
            o,
            "  failed requests  {}",
            if p.max_failed_fraction == 0.0 {
                "none allowed (timed steps and gates)".to_string()
            } else {
                format!(
                    "at most {}% of an arm's requests (timed steps and gates)",
                    p.max_failed_fraction * 100.0
                )
            }
        );
        if p.quality_risks.is_empty() {
            let _ = writeln!(o, "  quality risks    none");
        } else {
            let _ = writeln!(o, "  quality risks    engine log lines containing:");
            for q in &p.quality_risks {
                let _ = writeln!(o, "    {:?} → limitation: {}", q.pattern, q.limitation);
            }
        }
        mask.scrub(&o)
    }
}

fn render_arm_header(o: &mut String, c: &Campaign, arm: &Arm, mask: &Mask) {
    let _ = writeln!(
        o,
        "\narm {} ({}, {}){}",
        arm.id,
        arm.role.as_str(),
        arm.kind().as_str(),
        if arm.label != arm.id {
            format!(": {}", arm.label)
        } else {
            String::new()
        }
    );
    let quant = arm
        .quantization
        .as_deref()
        .map(|q| format!(", {q}"))
        .unwrap_or_default();
    let _ = writeln!(
        o,
        "       engine {}; model {}{quant}",
        arm.engine, arm.model
    );
    let mut serves = format!(
        "       serves `{}`, context {} tokens",
        arm.served_model, arm.served_context
    );
    if let Some((name, tokens)) = c.long_context_target(arm) {
        let _ = write!(serves, "; long-context profile {name} ({tokens} tokens)");
    }
    let _ = writeln!(o, "{serves}");
    if let Some(s) = &arm.speculative {
        let mut t = format!("       speculative {}", s.method);
        if let Some(d) = &s.draft_model {
            let _ = write!(t, ", draft {d}");
        }
        if let Some(k) = s.draft_tokens {
            let _ = write!(t, ", {k} draft tokens");
        }
        let _ = writeln!(o, "{t}; matched control {}", s.control);
    }
    if let Some(k) = &arm.api_key_env {
        let _ = writeln!(o, "       api key from ${k} (masked)");
    }
    let _ = writeln!(
        o,
        "       recipe sha256 {}; argv/env sha256 {}",
        c.recipe_hash(arm),
        c.argv_env_hash(arm)
    );
    // The kind's own lines: its commands (start, stop) or its address.
    let show = |cmd: &crate::campaign::CommandLine| mask.scrub(&cmd.shown());
    for line in arm.recipe().describe(c.launch_command(arm).as_ref(), &show) {
        let _ = writeln!(o, "{line}");
    }
}

fn describe(c: &Campaign, step: &PlanStep) -> String {
    let arm = step.arm.as_deref().unwrap_or("");
    match &step.kind {
        StepKind::StopIncumbent => format!("stop incumbent {arm} to free the lane"),
        StepKind::GpuIdleBaseline { max_used_mib } => {
            format!("lane GPUs with nothing running; fail above {max_used_mib} MiB used")
        }
        StepKind::Launch => "start the recipe".into(),
        StepKind::Ready {
            served_model,
            served_context,
            timeout_s,
        } => {
            let managed = c.arm(arm).is_some_and(|a| a.kind().managed());
            format!(
                "health 200 and /v1/models lists `{served_model}` (context {served_context}) within {timeout_s} s{}",
                if managed { "; fail fast on exit" } else { "" }
            )
        }
        StepKind::MemoryReserve { reserve_mib } => format!("at least {reserve_mib} MiB GPU memory free"),
        StepKind::Preflight { gates } => list(gates, |g| g.as_str().to_string()),
        StepKind::Timing {
            state,
            prompt_tokens,
            max_tokens,
            concurrency,
            requests,
            ignore_eos,
            slo,
            first_item,
            open_loop,
        } => format!(
            "{} {requests} request(s) {}, {}{}{}",
            state.as_str(),
            match open_loop {
                Some(o) => o.describe(),
                None => format!("at c{concurrency}"),
            },
            match first_item {
                Some(f) => format!(
                    "work items {f}..{} (max tokens per item, else {max_tokens})",
                    f + u64::from(*requests)
                ),
                None if replayed(c) => format!(
                    "the dataset's conversation turns (max tokens per turn, else {max_tokens})"
                ),
                None => format!("{prompt_tokens} prompt + {max_tokens} max tokens"),
            },
            if *ignore_eos { ", ignore_eos" } else { "" },
            if slo.is_empty() {
                String::new()
            } else {
                format!("; SLO {} (and goodput)", list(slo, |l| l.to_string()))
            }
        ),
        StepKind::Capacity(k) => k.describe(),
        StepKind::Trace(t) => t.describe(),
        StepKind::LongContextTiming {
            prompt_tokens,
            max_tokens,
            requests,
        } => format!(
            "{requests} request(s) at c1, {prompt_tokens} prompt + {max_tokens} max tokens, ignore_eos (decode speed at long context)"
        ),
        StepKind::Retrieval {
            profile,
            target_tokens,
            needles,
            depths,
            ..
        } => format!(
            "{profile}: {target_tokens}-token prompt, {needles} needle(s) at depths {}",
            list(depths, |d| d.to_string())
        ),
        StepKind::Tools { batch, variants, .. } => format!(
            "{batch} per variant: {}",
            list(variants, |v| v.as_str().to_string())
        ),
        StepKind::Quality { repetitions, .. } => format!("{repetitions} repetition(s)"),
        StepKind::Stop => {
            if c.lane.gpus.is_empty() {
                "stop; lane port released".into()
            } else {
                "stop; lane port and GPU memory released".into()
            }
        }
        StepKind::RestoreIncumbent => format!("start {arm} again from the same recipe; wait until ready"),
        StepKind::RestorationIdentity {
            served_model,
            served_context,
            ..
        } => format!(
            "same recipe hash, argv/env hash, served model `{served_model}` and context {served_context}"
        ),
        StepKind::RestorationPreflight { gates } => list(gates, |g| g.as_str().to_string()),
    }
}

/// Whether the timed requests replay a dataset's conversations.
fn replayed(c: &Campaign) -> bool {
    c.workload.conversation.is_some() && c.workload.dataset.is_some()
}

/// The dry-run line of a workload source.
pub fn source_line(src: &crate::campaign::WorkSource) -> String {
    use crate::campaign::WorkSource;
    let opt = |v: Option<u64>| v.map_or("-".to_string(), |x| x.to_string());
    match src {
        WorkSource::Dataset(d) => format!(
            "dataset {} ({} items, sha256 {}), format {:?}, {}, prompt tokens {}..{}, max output {}, output lengths from {}",
            d.path.display(),
            d.items_in_file,
            d.sha256,
            d.format,
            match d.sample {
                Some(n) => format!("sample {n} (seed {})", d.seed),
                None => "every item in file order".into(),
            },
            opt(d.min_prompt_tokens),
            opt(d.max_prompt_tokens),
            opt(d.max_output_tokens),
            match d.output_tokens {
                crate::campaign::OutputTokens::Dataset => "the dataset",
                crate::campaign::OutputTokens::MaxTokens => "max_tokens",
            }
        ),
        WorkSource::Synthetic {
            input_tokens,
            output_tokens,
            seed,
            pool,
        } => format!(
            "synthetic lengths: input {}, output {}, seed {seed}, {pool} draws per arm",
            input_tokens.map_or("matched_prompt_tokens".to_string(), |d| format!("{d:?}")),
            output_tokens.map_or("max_tokens".to_string(), |d| format!("{d:?}"))
        ),
        WorkSource::Conversation {
            turns,
            think_time_ms,
            dataset,
            shared_prefix,
        } => format!(
            "multi-turn conversations of {turns} turns (history resent, think time {think_time_ms} ms), {}{}",
            match dataset {
                Some(d) => format!(
                    "replayed from dataset {} ({} items, sha256 {}), {}",
                    d.path.display(),
                    d.items_in_file,
                    d.sha256,
                    match d.sample {
                        Some(n) => format!("sample {n} (seed {})", d.seed),
                        None => "every conversation in file order".into(),
                    }
                ),
                None => "each user turn a matched prompt".into(),
            },
            match shared_prefix {
                Some(p) => format!(
                    "; each conversation starts with a shared prefix: {} group(s) of {} tokens, {:?} order",
                    p.groups, p.tokens, p.order
                ),
                None => String::new(),
            }
        ),
        WorkSource::SharedPrefix {
            tokens,
            groups,
            order,
            ..
        } => format!("shared prefix: {groups} group(s) of {tokens} tokens, {order:?} order, within each matched prompt"),
    }
}

/// The prefix cache as the workload uses it: a nonce defeats it only where no reuse is meant
/// (conversation turns resend their history, shared prefixes repeat, by design).
fn cache_words(w: &super::spec::Workload) -> &'static str {
    match (w.allow_prefix_cache, w.conversation.is_some(), w.shared_prefix.is_some()) {
        (true, _, _) => "allowed",
        (false, true, _) => "defeated by a nonce at each conversation's first turn only: later turns resend the history, which the cache is meant to serve (cached share reported per turn)",
        (false, false, true) => "defeated by a nonce after each shared prefix only: the prefix is meant to be served from the cache (cached share reported per group)",
        (false, false, false) => "defeated by a nonce",
    }
}
