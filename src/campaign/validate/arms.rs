//! `[[arms]]`: each arm on its own, then the rules across arms (one incumbent, controls, names).

use super::common::{is_env_name, is_id, p};
use super::recipes::{argv_checks, env_checks};
use crate::campaign::diag::{FieldPath, Reporter};
use crate::campaign::paths::resolve;
use crate::campaign::spec::{Arm, Campaign, EndpointRecipe, Lane, ProcessRecipe, Role};
use std::collections::{HashMap, HashSet};
use std::path::Path;

/// Arm ids that would collide with campaign-level evidence files (`restoration-preflight.json`).
const RESERVED_IDS: &[&str] = &["restoration"];

pub(super) fn arm(c: &mut Campaign, i: usize, dir: &Path, r: &mut Reporter) {
    let at = p("arms").index(i);
    let a = &mut c.arms[i];
    if !is_id(&a.id) {
        r.error(
            &at.key("id"),
            format!(
                "`{}` is not a valid arm id (it starts the arm's evidence file names)",
                a.id
            ),
            "use lowercase letters, digits and `-`, e.g. \"vllm-nvfp4-mtp3\"",
        );
    } else if RESERVED_IDS.contains(&a.id.as_str()) {
        r.error(
            &at.key("id"),
            format!("`{}` is reserved (campaign-level evidence uses it)", a.id),
            "choose another id",
        );
    }
    if a.label.trim().is_empty() {
        a.label = a.id.clone();
    }
    for (field, v) in [("engine", &a.engine), ("model", &a.model)] {
        if v.trim().is_empty() {
            r.error(
                &at.key(field),
                format!("empty {field}"),
                format!("describe the arm's {field}"),
            );
        }
    }
    if let Some(t) = &mut a.tokenizer {
        *t = resolve(dir, t);
        if !t.is_file() {
            r.error(
                &at.key("tokenizer"),
                format!("tokenizer {} does not exist", t.display()),
                "give the model's tokenizer.json relative to the campaign file's directory, or leave it out",
            );
        }
    }
    if let Some(k) = &a.api_key_env {
        if !is_env_name(k) {
            r.error(
                &at.key("api_key_env"),
                format!("`{k}` is not an environment variable name"),
                "give the NAME of the variable that holds the key, never the key",
            );
        }
    }
    let tables = a.recipe_tables();
    match tables.len() {
        0 => {
            r.error(
                &at,
                format!("arm `{}` has no recipe", a.id),
                "add exactly one of [arms.process], [arms.container], [arms.endpoint], [arms.reference], [arms.slurm]",
            );
            return;
        }
        1 => {}
        _ => {
            r.error(
                &at.key(tables[1]),
                format!(
                    "arm `{}` has more than one recipe ({})",
                    a.id,
                    tables.join(", ")
                ),
                "keep exactly one recipe table per arm",
            );
            return;
        }
    }
    recipe(c, i, &at, dir, r);
    served(c, i, &at, r);
}

/// The arm's one recipe table: its kind's checks and defaults.
fn recipe(c: &mut Campaign, i: usize, at: &FieldPath, dir: &Path, r: &mut Reporter) {
    let lane = c.lane.clone();
    let ids = (c.campaign.id.clone(), c.arms[i].id.clone());
    let a = &mut c.arms[i];
    if let Some(pr) = &mut a.process {
        process(pr, &at.key("process"), dir, r);
    }
    if let Some(ct) = &mut a.container {
        let ids = (ids.0.as_str(), ids.1.as_str());
        super::container::container(ct, &at.key("container"), &lane, dir, ids, r);
    }
    if let Some(sr) = &mut a.slurm {
        let ids = (ids.0.as_str(), ids.1.as_str());
        super::slurm::slurm(sr, &at.key("slurm"), dir, ids, r);
    }
    if let Some(e) = &mut a.endpoint {
        endpoint(e, &at.key("endpoint"), &lane, dir, r);
    }
    if a.reference.is_none() {
        served_declared(a, at, r);
    }
    reference(a, at, dir, r);
}

/// `[arms.process]`: argv and env, `cwd` (default the campaign file's directory), a relative
/// program path made absolute.
fn process(pr: &mut ProcessRecipe, rp: &FieldPath, dir: &Path, r: &mut Reporter) {
    argv_checks(r, &rp.key("argv"), &pr.argv, true);
    env_checks(r, &rp.key("env"), &pr.env);
    pr.cwd = if pr.cwd.as_os_str().is_empty() {
        dir.to_path_buf()
    } else {
        resolve(dir, &pr.cwd)
    };
    if !pr.cwd.is_dir() {
        r.error(
            &rp.key("cwd"),
            format!("cwd {} is not a directory", pr.cwd.display()),
            "give a directory relative to the campaign file's directory (or absolute)",
        );
    }
    if let Some(a0) = pr.argv.first_mut() {
        let prog = Path::new(a0.as_str());
        if prog.is_relative() && a0.contains('/') {
            *a0 = resolve(&pr.cwd, prog).display().to_string();
        }
    }
}

/// `[arms.endpoint]`: the URL (default the lane's address) and its TLS settings.
fn endpoint(e: &mut EndpointRecipe, at: &FieldPath, lane: &Lane, dir: &Path, r: &mut Reporter) {
    if e.url.is_empty() {
        e.url = lane.base_url();
    } else if let Err(problem) = crate::client::Target::parse(&e.url) {
        r.error(
            &at.key("url"),
            problem,
            "give the server root, e.g. \"http://10.0.0.5:8000\" or \"https://gateway.example/openai\"",
        );
    }
    endpoint_tls(r, at, e, dir);
}

/// `[arms.reference]`: the profile loads; served_model and served_context default to it.
fn reference(a: &mut Arm, at: &FieldPath, dir: &Path, r: &mut Reporter) {
    let Some(rf) = &mut a.reference else {
        return;
    };
    rf.profile = resolve(dir, &rf.profile);
    match crate::refengine::profile::Profile::load(&rf.profile) {
        Err(e) => {
            r.error(
                &at.key("reference").key("profile"),
                format!("cannot use the profile: {}", e.to_string().replace('\n', " ")),
                "give a reference-engine profile relative to the campaign file's directory (docs/reference-engine.md)",
            );
        }
        Ok(prof) => {
            if a.served_model.is_empty() {
                a.served_model = prof.model.clone();
            } else if a.served_model != prof.model {
                r.error(
                    &at.key("served_model"),
                    format!(
                        "served_model `{}` differs from the profile's model `{}`",
                        a.served_model, prof.model
                    ),
                    "leave served_model out for a reference arm, or make them match",
                );
            }
            if a.served_context == 0 {
                a.served_context = prof.context_tokens;
            } else if a.served_context > prof.context_tokens {
                r.error(
                    &at.key("served_context"),
                    format!(
                        "served_context {} exceeds the profile's context_tokens {}",
                        a.served_context, prof.context_tokens
                    ),
                    "leave served_context out for a reference arm, or lower it",
                );
            }
        }
    }
}

/// Every arm but a reference one declares what it serves.
fn served_declared(a: &Arm, at: &FieldPath, r: &mut Reporter) {
    if a.served_model.trim().is_empty() {
        r.error(
            &at.key("served_model"),
            format!("arm `{}` has no served_model", a.id),
            "add served_model = \"…\": the model id /v1/models must list (llama.cpp: the -a alias; vLLM: --served-model-name)",
        );
    }
    if a.served_context == 0 {
        r.error(
            &at.key("served_context"),
            format!("arm `{}` has no served_context", a.id),
            "add served_context = N: the longest prompt + completion one request may use (llama.cpp: -c divided by -np)",
        );
    }
}

/// The served context fits the matched prompt and max_tokens; the speculative method is named.
fn served(c: &Campaign, i: usize, at: &FieldPath, r: &mut Reporter) {
    let need = u64::from(c.workload.matched_prompt_tokens) + u64::from(c.workload.max_tokens);
    let a = &c.arms[i];
    if a.served_context > u64::from(u32::MAX) {
        r.error(
            &at.key("served_context"),
            format!(
                "{} is outside the range 1..={} (tokens)",
                a.served_context,
                u32::MAX
            ),
            format!("give a value from 1 to {}", u32::MAX),
        );
    }
    if a.served_context > 0 && need > a.served_context {
        r.error(
            &at.key("served_context"),
            format!(
                "the matched prompt ({}) + max_tokens ({}) = {need} tokens do not fit arm `{}`'s served context of {}",
                c.workload.matched_prompt_tokens, c.workload.max_tokens, a.id, a.served_context
            ),
            "raise served_context or lower workload.matched_prompt_tokens / workload.max_tokens",
        );
    }
    if let Some(s) = &a.speculative {
        if s.method.trim().is_empty() {
            r.error(
                &at.key("speculative").key("method"),
                "empty speculative method",
                "name it, e.g. \"mtp\", \"eagle3\", \"draft-model\"",
            );
        }
    }
}

pub(super) fn across_arms(c: &mut Campaign, r: &mut Reporter) {
    let at = |i: usize| p("arms").index(i);
    if c.arms.is_empty() {
        r.error(
            &p("arms"),
            "no arms",
            "add at least one [[arms]] table (and one of them the incumbent)",
        );
        return;
    }
    let mut first: HashMap<&str, usize> = HashMap::new();
    for (i, a) in c.arms.iter().enumerate() {
        if let Some(&j) = first.get(a.id.as_str()) {
            r.error(
                &at(i).key("id"),
                format!(
                    "duplicate arm id `{}` (also arms[{j}] on line {})",
                    a.id,
                    r.index.line(&at(j).key("id"))
                ),
                "give every arm a unique id (ids name the evidence files)",
            );
        } else {
            first.insert(&a.id, i);
        }
    }
    let incumbents: Vec<usize> = (0..c.arms.len())
        .filter(|&i| c.arms[i].role == Role::Incumbent)
        .collect();
    match incumbents.as_slice() {
        [] => r.error(
            &p("arms"),
            "no incumbent",
            "give exactly one arm role = \"incumbent\" (what serves today: stopped first, restored last)",
        ),
        [_] => {}
        [i0, rest @ ..] => {
            for &i in rest {
                r.error(
                    &at(i).key("role"),
                    format!(
                        "a second incumbent (`{}`; the first is `{}` on line {})",
                        c.arms[i].id,
                        c.arms[*i0].id,
                        r.index.line(&at(*i0).key("role"))
                    ),
                    "exactly one arm is the incumbent: make the others \"candidate\"",
                );
            }
        }
    }
    // Speculative arms and their matched controls.
    let mut controlled: HashSet<&str> = HashSet::new();
    for (i, a) in c.arms.iter().enumerate() {
        let Some(s) = &a.speculative else { continue };
        let cp = at(i).key("speculative").key("control");
        controlled.insert(s.control.as_str());
        if s.control == a.id {
            r.error(
                &cp,
                format!("arm `{}` names itself as its control", a.id),
                "name the matched arm without speculation",
            );
            continue;
        }
        let Some(ctl) = c.arms.iter().find(|x| x.id == s.control) else {
            r.error(
                &cp,
                format!("control `{}` is not an arm of this campaign", s.control),
                "add the matched no-speculation arm (role = \"control\") or correct the id",
            );
            continue;
        };
        if ctl.speculative.is_some() {
            r.error(
                &cp,
                format!("control `{}` uses speculative decoding itself", ctl.id),
                "a control runs the same model without speculation: remove its [arms.speculative]",
            );
        }
        if ctl.model != a.model
            || ctl.quantization != a.quantization
            || ctl.served_context != a.served_context
        {
            r.error(
                &cp,
                format!(
                    "control `{}` is not matched: model, quantization and served_context must equal arm `{}`'s",
                    ctl.id, a.id
                ),
                "make the control serve the same model, quantization and context, without speculation",
            );
        }
    }
    for (i, a) in c.arms.iter().enumerate() {
        if a.role == Role::Control && !controlled.contains(a.id.as_str()) {
            r.error(
                &at(i).key("role"),
                format!("no speculative arm names `{}` as its control", a.id),
                format!("set speculative.control = \"{}\" on the speculative arm, or make this arm a candidate", a.id),
            );
        }
    }
    // An endpoint incumbent cannot be stopped to free the lane.
    let inc = c.arms.iter().find(|a| a.role == Role::Incumbent);
    if let Some((idx, inc)) =
        inc.map(|a| (c.arms.iter().position(|x| x.id == a.id).unwrap_or(0), a))
    {
        if let Some(e) = &inc.endpoint {
            let loopback = |h: &str| {
                matches!(
                    h.trim_matches(|ch| ch == '[' || ch == ']'),
                    "127.0.0.1" | "localhost" | "::1" | "0.0.0.0"
                )
            };
            let on_lane = crate::client::Target::parse(&e.url).is_ok_and(|t| {
                t.port == c.lane.port
                    && (t.host == c.lane.host || (loopback(&t.host) && loopback(&c.lane.host)))
            });
            let managed = c
                .arms
                .iter()
                .any(|a| a.recipe_tables().len() == 1 && a.kind().managed());
            if on_lane && managed {
                r.error(
                    &at(idx).key("endpoint"),
                    format!("the incumbent `{}` is an already-running endpoint on the lane port, which bakeoff cannot stop to free the lane", inc.id),
                    "give the incumbent a process, container or slurm recipe, or move it off the lane port",
                );
            }
        }
    }
}

/// `ca_file` / `insecure` of an endpoint recipe: https only, not both, and a CA file that loads.
fn endpoint_tls(
    r: &mut Reporter,
    at: &crate::campaign::diag::FieldPath,
    e: &mut crate::campaign::spec::EndpointRecipe,
    dir: &Path,
) {
    if let Some(p) = &mut e.ca_file {
        *p = resolve(dir, p);
    }
    let https = e.url.starts_with("https://");
    if !https && (e.ca_file.is_some() || e.insecure) {
        let field = if e.insecure { "insecure" } else { "ca_file" };
        r.error(
            &at.key(field),
            format!(
                "`{field}` applies to https:// URLs only; the endpoint is {}",
                e.url
            ),
            "drop it, or give the endpoint's https:// URL",
        );
        return;
    }
    if e.ca_file.is_some() && e.insecure {
        r.error(
            &at.key("insecure"),
            "`insecure = true` and `ca_file` contradict each other",
            "keep ca_file to verify against that CA, or drop it to skip verification",
        );
        return;
    }
    if let Some(p) = &e.ca_file {
        if let Err(problem) = crate::client::tls::file_roots(p) {
            r.error(
                &at.key("ca_file"),
                problem,
                "give a PEM file with the CA certificate(s) that signed the endpoint's certificate, relative to the campaign file's directory",
            );
        }
    }
}
