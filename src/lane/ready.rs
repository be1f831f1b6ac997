//! Readiness: poll health and `/v1/models` while watching for the arm to exit.

use super::{
    logs, Cause, ExitInfo, LaneSpec, LaunchFailure, ReadyFacts, Running, StopFacts, LOG_TAIL_LINES,
};
use crate::client::control::{excerpt, get_json};
use crate::client::Target;
use crate::clock::mono_ns;
use std::time::Duration;

/// Pause between two health probes.
const POLL: Duration = Duration::from_millis(100);
/// Longest wait for one probe request.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// Most SIGTERM grace given to an arm killed at its ready timeout.
const TIMEOUT_KILL_GRACE: Duration = Duration::from_secs(5);

enum Outcome {
    Exited(ExitInfo),
    Timeout,
    Probe(Result<ReadyFacts, String>),
    Slept,
}

pub(super) async fn wait_ready(
    running: &mut Running,
    lane: &LaneSpec,
) -> Result<ReadyFacts, LaunchFailure> {
    // Where the arm serves may be known only once it runs (a Slurm job: on its node).
    match running.wait_placed(lane).await {
        super::slurm::Start::Running => {}
        super::slurm::Start::Exited(e) => return Err(exited(running, lane, e).await),
        super::slurm::Start::Failed(f) => return Err(*f),
    }
    let target = running.target.clone();
    let health = lane.health_path.clone();
    let deadline_ns = running
        .started_ns
        .saturating_add(lane.ready_timeout.as_nanos() as u64);
    let deadline =
        tokio::time::Instant::now() + Duration::from_nanos(deadline_ns.saturating_sub(mono_ns()));
    let mut polls = 0u32;
    let mut last = String::from("no probe was answered");
    let outcome = {
        // One exit watch for the whole wait, never restarted per poll: a slow probe of the
        // process or container state (a busy docker daemon) still sees the exit.
        let mut exit = std::pin::pin!(running.wait_exit());
        loop {
            polls += 1;
            let left = Duration::from_nanos(deadline_ns.saturating_sub(mono_ns()));
            let per_request = left.clamp(Duration::from_millis(50), PROBE_TIMEOUT);
            let outcome = tokio::select! {
                biased;
                e = &mut exit => Outcome::Exited(e),
                _ = tokio::time::sleep_until(deadline) => Outcome::Timeout,
                r = probe(&target, &health, per_request) => Outcome::Probe(r),
            };
            let outcome = match outcome {
                Outcome::Probe(Err(note)) => {
                    last = note;
                    tokio::select! {
                        biased;
                        e = &mut exit => Outcome::Exited(e),
                        _ = tokio::time::sleep_until(deadline) => Outcome::Timeout,
                        _ = tokio::time::sleep(POLL) => Outcome::Slept,
                    }
                }
                o => o,
            };
            match outcome {
                Outcome::Slept | Outcome::Probe(Err(_)) => continue,
                o => break o,
            }
        }
    };
    match outcome {
        Outcome::Probe(Ok(mut facts)) => {
            facts.ready_ms = running.elapsed_ms();
            facts.polls = polls;
            Ok(facts)
        }
        Outcome::Exited(exit) => Err(exited(running, lane, exit).await),
        Outcome::Timeout => Err(timed_out(running, lane, &last).await),
        Outcome::Slept | Outcome::Probe(Err(_)) => unreachable!("the loop goes on for these"),
    }
}

/// See `lane::wait_answers`.
pub(super) async fn wait_answers(
    target: &Target,
    health: &str,
    within: Duration,
) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match probe(
            target,
            health,
            left.clamp(Duration::from_millis(50), PROBE_TIMEOUT),
        )
        .await
        {
            Ok(_) => return Ok(()),
            Err(note) if left.is_zero() => return Err(note),
            Err(_) => tokio::time::sleep(POLL.min(left)).await,
        }
    }
}

async fn exited(running: &mut Running, lane: &LaneSpec, exit: ExitInfo) -> LaunchFailure {
    let elapsed_ms = running.elapsed_ms();
    // Kill leftovers of the group / fetch the container's logs and remove it.
    let cleanup = super::stop_inner(running, Duration::from_secs(1)).await;
    let text = match &running.log_path {
        Some(p) => logs::read_since(p, running.log_offset, logs::SCAN_BYTES),
        None => String::new(),
    };
    let oom_line = logs::oom_line(&text).map(|l| running.masker.mask(&l));
    let log_tail = running.log_tail(LOG_TAIL_LINES);
    let cause = if oom_line.is_some() || exit.oom_killed {
        Cause::OutOfMemory
    } else {
        Cause::Exited
    };
    let last = log_tail
        .iter()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(|l| l.trim());
    let why = match (&oom_line, logs::last_error_line(&log_tail), last) {
        (Some(l), _, _) => format!("out of memory: «{l}»"),
        (None, _, _) if exit.oom_killed => "the kernel OOM killer stopped it".to_string(),
        (None, Some(e), Some(l)) if e != l => {
            format!("its last log line that reads as an error: «{e}» (the last line: «{l}»)")
        }
        (None, _, Some(l)) => format!("its last log line: «{l}»"),
        (None, _, None) => "it wrote nothing to its log".to_string(),
    };
    let mut message = format!(
        "the {} arm exited {:.2} s after launch, before it was ready on {} ({exit}); {why}",
        running.kind(),
        elapsed_ms / 1e3,
        endpoint(lane, &running.target),
    );
    if let Some(job) = running.slurm_job() {
        // The scheduler's own account: state, reason, exit code, node.
        message.push_str(&format!("; Slurm: {}", job.describe()));
    }
    LaunchFailure {
        class: LaunchFailure::CLASS,
        cause,
        message: running.masker.mask(&message),
        log_tail,
        elapsed_ms,
        exit: Some(exit),
        oom_line,
        cleanup: Some(cleanup),
    }
}

async fn timed_out(running: &mut Running, lane: &LaneSpec, last: &str) -> LaunchFailure {
    let elapsed_ms = running.elapsed_ms();
    let (cleanup, killed): (Option<StopFacts>, String) = if !running.managed() {
        (None, String::new())
    } else {
        let c = super::stop_inner(running, lane.stop_grace.min(TIMEOUT_KILL_GRACE)).await;
        let what = running.stopped_words(&c);
        (Some(c), format!("; {what}"))
    };
    let text = match &running.log_path {
        Some(p) => logs::read_since(p, running.log_offset, logs::SCAN_BYTES),
        None => String::new(),
    };
    let oom_line = logs::oom_line(&text).map(|l| running.masker.mask(&l));
    let message = format!(
        "the {} arm was not ready on {} within its {:.1} s ready timeout (last probe: {last}){killed}",
        running.kind(),
        endpoint(lane, &running.target),
        lane.ready_timeout.as_secs_f64(),
    );
    LaunchFailure {
        class: LaunchFailure::CLASS,
        cause: Cause::Timeout,
        message: running.masker.mask(&message),
        log_tail: running.log_tail(LOG_TAIL_LINES),
        elapsed_ms,
        exit: running.exit.clone(),
        oom_line,
        cleanup,
    }
}

fn endpoint(lane: &LaneSpec, target: &Target) -> String {
    format!("{target}{}", lane.health_path)
}

/// One probe: health must answer 200, then `/v1/models` must list at least one model.
async fn probe(target: &Target, health: &str, timeout: Duration) -> Result<ReadyFacts, String> {
    match get_json(target, health, None, timeout).await {
        Ok((200, _)) => {}
        Ok((s, v)) => return Err(format!("{health} answered HTTP {s}: {}", excerpt(&v))),
        // A 200 with a body that is not JSON (some engines answer plain text) is healthy.
        Err(e) if e.status == Some(200) => {}
        Err(e) => return Err(format!("{health}: {}", e.message)),
    }
    let (status, v) = get_json(target, "/v1/models", None, timeout)
        .await
        .map_err(|e| format!("/v1/models: {}", e.message))?;
    if status != 200 {
        let hint = if status == 401 || status == 403 {
            " (the engine wants an API key; the lane's readiness check sends none)"
        } else {
            ""
        };
        return Err(format!(
            "/v1/models answered HTTP {status}{hint}: {}",
            excerpt(&v)
        ));
    }
    let mut facts = models_facts(&v)?;
    if facts.context_tokens.is_none() {
        // llama.cpp: the served (per-slot) context is in /props.
        if let Ok((200, p)) = get_json(target, "/props", None, timeout).await {
            if let Some(n) = p
                .pointer("/default_generation_settings/n_ctx")
                .and_then(|n| n.as_u64())
            {
                facts.context_tokens = Some(n);
                facts.context_source = Some("/props default_generation_settings.n_ctx".into());
            }
        }
    }
    Ok(facts)
}

/// Served model ids and context from a `/v1/models` body (pure).
pub(super) fn models_facts(v: &serde_json::Value) -> Result<ReadyFacts, String> {
    let data = v
        .get("data")
        .and_then(|d| d.as_array())
        .cloned()
        .unwrap_or_default();
    let model_ids: Vec<String> = data
        .iter()
        .filter_map(|m| m.get("id").and_then(|i| i.as_str()).map(str::to_string))
        .collect();
    if model_ids.is_empty() {
        return Err(format!("/v1/models lists no model yet: {}", excerpt(v)));
    }
    let first = &data[0];
    let (context_tokens, context_source) =
        if let Some(n) = first.get("max_model_len").and_then(|n| n.as_u64()) {
            (Some(n), Some("max_model_len".to_string()))
        } else if let Some(n) = first.pointer("/meta/n_ctx").and_then(|n| n.as_u64()) {
            (Some(n), Some("meta.n_ctx".to_string()))
        } else {
            (None, None)
        };
    Ok(ReadyFacts {
        ready_ms: 0.0,
        polls: 0,
        model_ids,
        context_tokens,
        context_source,
        n_ctx_train: first.pointer("/meta/n_ctx_train").and_then(|n| n.as_u64()),
        models: v.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn vllm_models() {
        let f = models_facts(&json!({"object":"list","data":[
            {"id":"Qwen/Qwen3-8B","object":"model","max_model_len":32768},
            {"id":"lora-a","object":"model","max_model_len":32768}]}))
        .unwrap();
        assert_eq!(f.model_ids, vec!["Qwen/Qwen3-8B", "lora-a"]);
        assert_eq!(f.context_tokens, Some(32768));
        assert_eq!(f.context_source.as_deref(), Some("max_model_len"));
    }

    #[test]
    fn llamacpp_models() {
        let f = models_facts(&json!({"models":[{"name":"m"}],"object":"list","data":[
            {"id":"smollm2","object":"model","owned_by":"llamacpp",
             "meta":{"n_ctx_train":8192,"n_vocab":49152}}]}))
        .unwrap();
        assert_eq!(f.model_ids, vec!["smollm2"]);
        assert_eq!(f.context_tokens, None);
        assert_eq!(f.n_ctx_train, Some(8192));
        let f = models_facts(&json!({"data":[{"id":"x","meta":{"n_ctx":4096}}]})).unwrap();
        assert_eq!(f.context_tokens, Some(4096));
        assert_eq!(f.context_source.as_deref(), Some("meta.n_ctx"));
    }

    #[test]
    fn empty_models_is_not_ready() {
        assert!(models_facts(&json!({"data":[]})).is_err());
        assert!(models_facts(&json!(null)).is_err());
    }
}
