//! The verdict's documents, derived from an evidence bundle alone:
//! `decision-summary.json` (schema `anvil-serving.benchmark-decision-summary/v1`),
//! `publication-summary.md` and `report.html` (self-contained: the vendored Chart.js and the
//! charts' data inline, see `charts.rs`).
//!
//! [`render_all`] first verifies the bundle (every file against its sealed manifest) and
//! cross-checks the deciding figures of `campaign-result.json` against the per-step evidence
//! files they name (`evidence::crosscheck`); it refuses a bundle that fails either, unless forced
//! ([`render_all_forced`]: the step files' figures win and every problem is a limitation). It then
//! reads the policy (older bundles: the bundle's `campaign.toml` copy), decides, writes the three
//! files atomically and rewrites the manifest so `bakeoff verify` still passes.

pub mod bench;
pub mod chartkit;
pub mod charts;
pub mod compare;
pub mod csv;
pub mod energy;
pub mod html;
pub mod lane_timeline;
pub mod lanes;
pub mod markdown;
pub mod rates;
pub mod series;
pub mod summary;
pub mod timeline;

use crate::decide::{self, Verdict};
use crate::evidence::bundle;
use crate::evidence::manifest::{self, Manifest, MANIFEST};
use crate::evidence::result::{CampaignResult, RESULT_FILE};
use crate::evidence::{GateName, Policy};
use std::path::Path;

pub const SUMMARY_FILE: &str = bundle::DECISION_SUMMARY;
pub const PUBLICATION_FILE: &str = bundle::PUBLICATION_SUMMARY;
pub const HTML_FILE: &str = bundle::REPORT_HTML;
pub const CSV_FILE: &str = bundle::STATS_CSV;
/// The bundle's copy of the campaign file.
pub const CAMPAIGN_COPY: &str = bundle::CAMPAIGN_COPY;

/// Everything the renderers read, loaded from a bundle.
pub struct Bundle {
    pub result: CampaignResult,
    pub policy: Policy,
    /// The manifest as it was before rendering (empty when the bundle has none yet).
    pub manifest: Manifest,
    /// Per-step timing series read from the timing evidence files (distributions, timeline, GPU).
    pub series: series::Series,
    /// Problems met while loading (policy fallback), shown as limitations.
    pub notes: Vec<String>,
    /// What the history store said about the run (`history-context.json`, written by `bakeoff
    /// run --history`): its lines are limitations, its trend page is linked.
    pub history: Option<crate::evidence::history::HistoryContext>,
}

/// Reads `campaign-result.json` from a bundle.
pub fn read_result(dir: &Path) -> anyhow::Result<CampaignResult> {
    let p = dir.join(RESULT_FILE);
    let bytes = std::fs::read(&p).map_err(|e| {
        anyhow::anyhow!(
            "cannot read {}: {e}; is {} a campaign bundle (written by `bakeoff run`)?",
            p.display(),
            dir.display()
        )
    })?;
    serde_json::from_slice(&bytes)
        .map_err(|e| anyhow::anyhow!("{} is not a campaign result: {e}", p.display()))
}

/// The policy the verdict applies: the one `campaign-result.json` records; for bundles written
/// before the result recorded it, [`legacy_policy_from_campaign_copy`]. The notes say what was
/// assumed.
pub fn read_policy(dir: &Path, result: &CampaignResult) -> (Policy, Vec<String>) {
    match &result.policy {
        Some(p) => (p.clone(), Vec::new()),
        None => legacy_policy_from_campaign_copy(dir, result),
    }
}

/// OLD BUNDLES ONLY (no `policy` in `campaign-result.json`): the policy of the bundle's
/// `campaign.toml` copy, its `[policy]` table read as the evidence type; required gates then
/// default to the gates the run marked required.
pub fn legacy_policy_from_campaign_copy(
    dir: &Path,
    result: &CampaignResult,
) -> (Policy, Vec<String>) {
    let p = dir.join(CAMPAIGN_COPY);
    let mut notes = Vec::new();
    let mut policy = match std::fs::read_to_string(&p) {
        Err(_) => {
            notes.push(format!(
                "The bundle has no {CAMPAIGN_COPY}; the verdict used the default policy (manual promotion) and the gates the run marked required."
            ));
            Policy::default()
        }
        // Only the `[policy]` table: loading takes nothing else into the policy, and the copy's
        // relative paths (profiles, suites) may not resolve from the bundle.
        Ok(text) => policy_table(&text).unwrap_or_else(|e| {
            notes.push(format!(
                "The [policy] table of the bundle's {CAMPAIGN_COPY} could not be read ({e}); the default policy (manual promotion) was used."
            ));
            Policy::default()
        }),
    };
    if policy.required_gates.is_empty() {
        let mut g: Vec<GateName> = Vec::new();
        for rec in result
            .arms
            .iter()
            .flat_map(|a| a.gates.iter())
            .filter(|g| g.required)
        {
            if !g.contains(&rec.name) {
                g.push(rec.name);
            }
        }
        if !g.contains(&GateName::Restoration) {
            g.push(GateName::Restoration);
        }
        policy.required_gates = g;
    }
    (policy, notes)
}

fn policy_table(text: &str) -> anyhow::Result<Policy> {
    let v: toml::Value = toml::from_str(text)?;
    match v.get("policy") {
        None => Ok(Policy::default()),
        Some(t) => Ok(t.clone().try_into()?),
    }
}

/// Loads a verified bundle for rendering (see [`load_checked`]; refuses on any problem).
pub fn load(dir: &Path) -> anyhow::Result<Bundle> {
    load_checked(dir, false)
}

/// Loads a bundle for rendering: verifies it against its manifest and cross-checks the deciding
/// figures of `campaign-result.json` against the step files. Any problem refuses, naming what
/// failed, unless `force`: then the step files' figures win and every problem becomes a
/// limitation of the verdict.
pub fn load_checked(dir: &Path, force: bool) -> anyhow::Result<Bundle> {
    let mut result = read_result(dir)?;
    let mut notes = Vec::new();
    let problems = if dir.join(MANIFEST).exists() {
        manifest::verify(dir, None)?.1
    } else {
        vec![manifest::Problem::Missing {
            path: MANIFEST.to_string(),
        }]
    };
    if !problems.is_empty() {
        let list = problems
            .iter()
            .map(|p| p.to_string())
            .collect::<Vec<_>>()
            .join("; ");
        if !force {
            anyhow::bail!(
                "{} does not verify ({list}); its verdict would rest on files nobody can vouch for. Run `bakeoff verify {}` for the list, or pass --force to render anyway (the problems are then written into the documents as limitations)",
                dir.display(),
                dir.display()
            );
        }
        notes.push(format!(
            "Rendered with --force from a bundle that does not verify: {list}."
        ));
    }
    let mismatches = crate::evidence::crosscheck::check(dir, &mut result, force);
    if !mismatches.is_empty() {
        let list = mismatches
            .iter()
            .map(|m| m.to_string())
            .collect::<Vec<_>>()
            .join("; ");
        if !force {
            anyhow::bail!(
                "{} disagrees with the step files it was copied from ({list}); the verdict is derived from the step files only. Pass --force to render from the step files' figures (the mismatch is then a limitation)",
                dir.join(RESULT_FILE).display()
            );
        }
        notes.push(format!(
            "Rendered with --force: {RESULT_FILE} disagreed with its step files ({list}); the verdict uses the step files' figures."
        ));
    }
    for a in result.arms.iter_mut() {
        a.prompt_cache = crate::evidence::crosscheck::cache_use(dir, a);
        a.reuse = crate::evidence::reuse::steps(dir, a);
    }
    let (policy, policy_notes) = read_policy(dir, &result);
    notes.extend(policy_notes);
    let manifest = match std::fs::read(dir.join(MANIFEST)) {
        Ok(b) => serde_json::from_slice(&b).map_err(|e| {
            anyhow::anyhow!(
                "{} is not a valid manifest: {e}",
                dir.join(MANIFEST).display()
            )
        })?,
        Err(_) => Manifest {
            schema: manifest::SCHEMA.into(),
            bakeoff_version: crate::VERSION.into(),
            files: Vec::new(),
            root_sha256: None,
            validity: Default::default(),
        },
    };
    let series = series::read(dir, &result);
    let history = match crate::evidence::history::read(dir) {
        Ok(h) => h,
        Err(e) if force => {
            notes.push(format!("Rendered with --force: {e:#}."));
            None
        }
        Err(e) => return Err(e),
    };
    Ok(Bundle {
        result,
        policy,
        manifest,
        series,
        notes,
        history,
    })
}

/// Decides a loaded bundle (the loading notes become limitations).
pub fn verdict(b: &Bundle) -> Verdict {
    let mut v = decide::decide(&b.result, &b.policy);
    v.limitations.extend(b.notes.iter().cloned());
    // The history informs the limitations only: the ranking above was decided without it.
    if let Some(h) = &b.history {
        v.limitations.extend(h.lines.iter().cloned());
    }
    v
}

/// Re-renders `decision-summary.json`, `publication-summary.md` and `report.html` from the
/// bundle's evidence and rewrites its manifest. The orchestrator calls this at the end of a run;
/// `bakeoff report DIR` calls it on an existing bundle.
pub fn render_all(bundle: &Path) -> anyhow::Result<Verdict> {
    render(bundle, false)
}

/// [`render_all`] on a bundle that may not verify or whose summary disagrees with its step files:
/// the step files' figures decide and every problem is a limitation (`bakeoff report --force`).
pub fn render_all_forced(bundle: &Path) -> anyhow::Result<Verdict> {
    render(bundle, true)
}

fn render(bundle: &Path, force: bool) -> anyhow::Result<Verdict> {
    let b = load_checked(bundle, force)?;
    let v = verdict(&b);
    let doc = summary::build(&v, &b.result, &b.manifest);
    let md = markdown::render(&v, &b.result, &doc);
    let mut page = html::render(&v, &b.result, &b.series, &doc);
    let per_lane = lanes::section(bundle, &b.result);
    if let Some(i) = page
        .find("<h2>Failures</h2>")
        .filter(|_| !per_lane.is_empty())
    {
        page.insert_str(i, &per_lane);
    }
    if let Some(h) = &b.history {
        page = with_history(page, bundle, h);
    }
    let table = csv::campaign(bundle, &b.result);
    crate::evidence::write_atomic(
        &bundle.join(SUMMARY_FILE),
        &serde_json::to_vec_pretty(&doc.to_json())?,
    )?;
    crate::evidence::write_atomic(&bundle.join(PUBLICATION_FILE), md.as_bytes())?;
    crate::evidence::write_atomic(&bundle.join(HTML_FILE), page.as_bytes())?;
    crate::evidence::write_atomic(&bundle.join(CSV_FILE), table.as_bytes())?;
    manifest::write(bundle)?;
    Ok(v)
}

/// `report.html` with what the history said beside the verdict: the link to the run's trend
/// page in the bundle (relative: it works wherever the bundle folder is opened) and the
/// informational lines (figures within their history's spread), placed before the limitations
/// (where the lines beyond it are).
fn with_history(
    page: String,
    bundle: &Path,
    h: &crate::evidence::history::HistoryContext,
) -> String {
    let mut p = String::new();
    if let Some(trend) = h.trend.as_deref() {
        // A plain file name in the bundle only: the file is evidence, not a pointer elsewhere.
        let plain = !trend.contains('/') && trend != "." && trend != "..";
        let there = plain && bundle.join(trend).is_file();
        p += &if there {
            format!(
                "<p id=\"history-trend\">History: this run beside its earlier runs on this GPU and lane: <a href=\"{0}\">{0}</a>.</p>",
                chartkit::esc(trend)
            )
        } else {
            format!(
                "<p id=\"history-trend\">History: the trend page {} is missing from this bundle.</p>",
                chartkit::esc(trend)
            )
        };
    }
    if !h.informational.is_empty() {
        p += "<ul id=\"history-within\">";
        for l in &h.informational {
            p += &format!("<li>{}</li>", chartkit::esc(l));
        }
        p += "</ul>";
    }
    if p.is_empty() {
        return page;
    }
    for at in ["<h2>Limitations</h2>", "</body>"] {
        if let Some(i) = page.find(at) {
            let mut out = page;
            out.insert_str(i, &p);
            return out;
        }
    }
    page + &p
}
