//! `promotion-summary.md`: the promotion in one page (decision, why, the transaction's steps,
//! each bake interval against its limits).

use super::record::Record;
use std::fmt::Write as _;

pub fn markdown(r: &Record) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "# Promotion of `{}` on lane {}\n", r.arm, r.lane);
    let _ = writeln!(
        o,
        "- decision: **{}**",
        r.decision.as_deref().unwrap_or(r.phase.as_str())
    );
    let _ = writeln!(o, "- why: {}", r.why);
    let _ = writeln!(o, "- authority: {}", r.authorization);
    let _ = writeln!(
        o,
        "- campaign `{}`, bundle {} (root digest {})",
        r.campaign_id,
        r.campaign_bundle.display(),
        r.campaign_root_digest
    );
    let _ = writeln!(o, "- incumbent (the way back): `{}`", r.incumbent);
    if let Some(l) = &r.lanes {
        let _ = writeln!(o, "- lanes: `{}` {}", r.arm, l.words);
    }
    let _ = writeln!(
        o,
        "- started {}, ended {}",
        r.started_at,
        r.ended_at.as_deref().unwrap_or("(not ended)")
    );
    if !r.restart.is_empty() {
        let _ = writeln!(
            o,
            "\n**CRITICAL: the rollback failed.** Start the incumbent by hand:\n"
        );
        for c in &r.restart {
            let _ = writeln!(o, "    {c}");
        }
    }
    let _ = writeln!(
        o,
        "\n## Transaction\n\n| step | status | at | detail |\n|---|---|---|---|"
    );
    for s in &r.steps {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} |",
            s.name,
            s.status,
            s.at,
            s.detail.replace('|', "\\|")
        );
    }
    let _ = writeln!(
        o,
        "\n## Bake intervals\n\n| # | ok | failed | TTFT p95 ms | decode tok/s p50 | outcome | detail |\n|---|---|---|---|---|---|---|"
    );
    let f = |v: Option<f64>| v.map(|x| format!("{x:.1}")).unwrap_or_else(|| "–".into());
    for i in &r.intervals {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} | {} |",
            i.index,
            i.requests_ok,
            i.requests_failed,
            f(i.ttft_p95_ms),
            f(i.decode_tok_s_p50),
            i.outcome,
            i.detail.replace('|', "\\|")
        );
    }
    if r.intervals.is_empty() {
        let _ = writeln!(o, "\n(no interval ran)");
    }
    for n in &r.notes {
        let _ = writeln!(o, "\n- note: {n}");
    }
    o
}
