//! `[arms.container]`: a container's recipe (image pinned by digest, the docker options bakeoff
//! sets itself refused, GPUs of the lane, volumes, labels, its name).

use super::recipes::{argv_checks, env_checks, pinned};
use crate::campaign::diag::{FieldPath, Reporter};
use crate::campaign::paths::resolve;
use crate::campaign::spec::{ContainerRecipe, Lane};
use std::path::Path;

/// Checks `ct` (at `rp`) and fills its defaults: the lane's GPUs, the lane port inside, the name
/// `bakeoff-<campaign id>-<arm id>` (`ids`), volume host paths made absolute.
pub(super) fn container(
    ct: &mut ContainerRecipe,
    rp: &FieldPath,
    lane: &Lane,
    dir: &Path,
    ids: (&str, &str),
    r: &mut Reporter,
) {
    let (campaign_id, arm_id) = ids;
    if !pinned(&ct.image) {
        r.error(
            &rp.key("image"),
            format!("image `{}` is not pinned by digest", ct.image),
            "use repository@sha256:<64 hex digits> (docker buildx imagetools inspect IMAGE shows the digest)",
        );
    }
    if ct.docker.trim().is_empty() {
        r.error(
            &rp.key("docker"),
            "empty docker CLI",
            "leave it out for \"docker\"",
        );
    }
    argv_checks(r, &rp.key("args"), &ct.args, false);
    argv_checks(r, &rp.key("run_args"), &ct.run_args, false);
    for (j, ra) in ct.run_args.iter().enumerate() {
        let opt = ra.split('=').next().unwrap_or("");
        if matches!(
            opt,
            "--name"
                | "--gpus"
                | "-p"
                | "--publish"
                | "-d"
                | "--detach"
                | "--rm"
                | "-e"
                | "--env"
                | "-v"
                | "--volume"
                | "--label"
                | "-l"
        ) {
            r.error(
                &rp.key("run_args").index(j),
                format!("`{opt}` is set by bakeoff from the recipe"),
                "use the recipe's fields instead (name, gpus, container_port, env, volumes, labels)",
            );
        }
    }
    env_checks(r, &rp.key("env"), &ct.env);
    if ct.gpus.is_empty() {
        ct.gpus = lane.gpus.clone();
    } else {
        for (j, g) in ct.gpus.iter().enumerate() {
            if !lane.gpus.contains(g) {
                r.error(
                    &rp.key("gpus").index(j),
                    format!("GPU `{g}` is not one of the lane's GPUs"),
                    "list it in lane.gpus, or use only the lane's GPUs (leave gpus out for all of them)",
                );
            }
        }
    }
    if ct.container_port == 0 {
        ct.container_port = lane.port;
    }
    for (j, v) in ct.volumes.iter_mut().enumerate() {
        v.host = resolve(dir, &v.host);
        if !v.container.starts_with('/') || v.container.contains(':') {
            r.error(
                &rp.key("volumes").index(j).key("container"),
                format!("`{}` is not an absolute container path", v.container),
                "give an absolute path without `:`, e.g. \"/models\"",
            );
        }
    }
    for k in ct.labels.keys() {
        if k.is_empty()
            || k.contains('=')
            || k.contains(char::is_whitespace)
            || k.starts_with("bakeoff.")
        {
            r.error(
                &rp.key("labels").key(k),
                format!("label key `{k}` is not allowed"),
                "use a key without `=` or spaces; `bakeoff.*` labels are set by bakeoff",
            );
        }
    }
    if ct.name.is_empty() {
        ct.name = format!("bakeoff-{campaign_id}-{arm_id}");
    } else if !ct
        .name
        .chars()
        .next()
        .is_some_and(|ch| ch.is_ascii_alphanumeric())
        || !ct
            .name
            .chars()
            .all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '_' | '.' | '-'))
    {
        r.error(
            &rp.key("name"),
            format!("`{}` is not a valid container name", ct.name),
            "use letters, digits, `_`, `.` and `-`, starting with a letter or digit",
        );
    }
}
