//! What proves that a running container is a recipe's, beyond "something answers on the lane
//! port": `docker inspect NAME` read back: the container of the recipe's name runs, was created
//! from the recipe's image reference, carries the recipe's labels (bakeoff's ownership labels
//! among them), and its image is the recipe's digest (`docker image inspect`'s `RepoDigests`).
//! The parsing and the comparison are pure; [`prove`] runs the two commands.

use serde_json::{json, Value};
use std::path::Path;

/// What the recipe says the container must be.
pub struct Expected<'a> {
    pub name: &'a str,
    /// `repository[:tag]@sha256:<hex>`.
    pub image: &'a str,
    pub labels: &'a [(String, String)],
}

/// What `docker inspect NAME` said of the container.
#[derive(Debug, Clone, PartialEq)]
pub struct Seen {
    pub name: String,
    pub running: bool,
    /// `.Config.Image`: the reference it was created from.
    pub config_image: String,
    /// `.Image`: the local image id (`sha256:…`).
    pub image_id: String,
    pub labels: serde_json::Map<String, Value>,
}

/// `docker inspect --type container NAME` (a JSON array of one object).
pub fn inspect_argv(docker: &Path, name: &str) -> Vec<String> {
    vec![
        docker.display().to_string(),
        "inspect".into(),
        "--type".into(),
        "container".into(),
        name.into(),
    ]
}

/// `docker image inspect --format '{{json .RepoDigests}}' ID`.
pub fn repo_digests_argv(docker: &Path, image_id: &str) -> Vec<String> {
    vec![
        docker.display().to_string(),
        "image".into(),
        "inspect".into(),
        "--format".into(),
        "{{json .RepoDigests}}".into(),
        image_id.into(),
    ]
}

/// Reads what [`inspect_argv`] printed.
pub fn parse_container(out: &str) -> Result<Seen, String> {
    let v: Value = serde_json::from_str(out.trim())
        .map_err(|e| format!("unreadable docker inspect output ({e})"))?;
    let c = v
        .as_array()
        .and_then(|a| a.first())
        .ok_or("docker inspect printed no container")?;
    let s = |p: &str| {
        c.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    Ok(Seen {
        name: s("/Name").trim_start_matches('/').to_string(),
        running: c.pointer("/State/Running").and_then(Value::as_bool) == Some(true),
        config_image: s("/Config/Image"),
        image_id: s("/Image"),
        labels: c
            .pointer("/Config/Labels")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default(),
    })
}

/// Reads what [`repo_digests_argv`] printed (`null` when the image has none: built here, never
/// pushed or pulled).
pub fn parse_repo_digests(out: &str) -> Vec<String> {
    serde_json::from_str::<Option<Vec<String>>>(out.trim())
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// `repository@sha256:<hex>` of a reference `repository[:tag]@sha256:<hex>` (the form
/// `RepoDigests` lists); None when it pins no digest.
pub fn pinned(image: &str) -> Option<String> {
    let (name, digest) = image.split_once('@')?;
    // A tag is the part after the last ':' that comes after the last '/' (a registry port
    // comes before it).
    let slash = name.rfind('/').map_or(0, |i| i + 1);
    let repo = match name[slash..].rfind(':') {
        Some(i) => &name[..slash + i],
        None => name,
    };
    Some(format!("{repo}@{digest}"))
}

/// Everything in which `seen` (and its image's `digests`) is not `want`; empty: it is.
pub fn compare(seen: &Seen, digests: &[String], want: &Expected) -> Vec<String> {
    let mut bad = Vec::new();
    if seen.name != want.name {
        bad.push(format!(
            "container name `{}`, not `{}`",
            seen.name, want.name
        ));
    }
    if !seen.running {
        bad.push(format!("container `{}` is not running", want.name));
    }
    if seen.config_image != want.image {
        bad.push(format!(
            "created from image `{}`, not the recipe's `{}`",
            seen.config_image, want.image
        ));
    }
    match pinned(want.image) {
        Some(p) if !digests.contains(&p) => bad.push(format!(
            "its image {} is not the recipe's digest {p} (the image's digests: {})",
            seen.image_id,
            if digests.is_empty() {
                "none".to_string()
            } else {
                digests.join(", ")
            }
        )),
        Some(_) => {}
        None => bad.push(format!(
            "the recipe's image `{}` pins no digest, so what runs cannot be proven",
            want.image
        )),
    }
    for (k, v) in want.labels {
        match seen.labels.get(k).and_then(Value::as_str) {
            Some(got) if got == v => {}
            Some(got) => bad.push(format!("label {k}={got}, not {v}")),
            None => bad.push(format!("no label {k} (the recipe's is {k}={v})")),
        }
    }
    bad
}

/// Asks the daemon and compares. Ok: what was seen (for the evidence); Err: every difference in
/// one line, or why the daemon could not be asked.
pub fn prove(docker: &Path, want: &Expected) -> Result<Value, String> {
    let run = |argv: Vec<String>| -> Result<String, String> {
        let o = std::process::Command::new(&argv[0])
            .args(&argv[1..])
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| format!("cannot run `{}`: {e}", argv[0]))?;
        if o.status.success() {
            Ok(String::from_utf8_lossy(&o.stdout).into_owned())
        } else {
            Err(format!(
                "`{}` failed: {}",
                argv[1..].join(" "),
                String::from_utf8_lossy(&o.stderr).trim()
            ))
        }
    };
    let seen = parse_container(&run(inspect_argv(docker, want.name))?)?;
    let digests = parse_repo_digests(&run(repo_digests_argv(docker, &seen.image_id))?);
    let bad = compare(&seen, &digests, want);
    let facts = json!({"name": seen.name, "running": seen.running, "image": seen.config_image,
        "image_id": seen.image_id, "repo_digests": digests, "labels": seen.labels});
    if bad.is_empty() {
        Ok(facts)
    } else {
        Err(format!("container `{}`: {}", want.name, bad.join("; ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IMAGE: &str = "127.0.0.1:5000/bakeoff-ref:v1@sha256:abc123";

    fn inspect(name: &str, image: &str, running: bool, arm: &str) -> String {
        json!([{
            "Name": format!("/{name}"),
            "Image": "sha256:feed",
            "State": {"Running": running, "ExitCode": 0},
            "Config": {"Image": image, "Labels": {"bakeoff.campaign": "c1", "bakeoff.arm": arm, "team": "x"}},
        }])
        .to_string()
    }

    fn labels(arm: &str) -> Vec<(String, String)> {
        vec![
            ("bakeoff.campaign".into(), "c1".into()),
            ("bakeoff.arm".into(), arm.into()),
        ]
    }

    #[test]
    fn a_registry_port_is_not_a_tag_and_a_tag_is_dropped_for_the_digest() {
        assert_eq!(
            pinned(IMAGE).as_deref(),
            Some("127.0.0.1:5000/bakeoff-ref@sha256:abc123")
        );
        assert_eq!(
            pinned("127.0.0.1:5000/ref@sha256:abc").as_deref(),
            Some("127.0.0.1:5000/ref@sha256:abc")
        );
        assert_eq!(pinned("vllm/vllm:latest"), None);
    }

    #[test]
    fn the_recipes_container_is_proven_and_every_difference_is_named() {
        let want_labels = labels("win");
        let want = Expected {
            name: "bakeoff-c1-win",
            image: IMAGE,
            labels: &want_labels,
        };
        let digests = parse_repo_digests("[\"127.0.0.1:5000/bakeoff-ref@sha256:abc123\"]\n");
        let seen = parse_container(&inspect("bakeoff-c1-win", IMAGE, true, "win")).unwrap();
        assert_eq!(seen.image_id, "sha256:feed");
        assert!(compare(&seen, &digests, &want).is_empty());

        // Another arm's container from another image, stopped, on a digest nobody pinned.
        let other = "127.0.0.1:5000/bakeoff-ref@sha256:0ther";
        let seen = parse_container(&inspect("bakeoff-c1-slow", other, false, "slow")).unwrap();
        let bad = compare(
            &seen,
            &parse_repo_digests("[\"127.0.0.1:5000/bakeoff-ref@sha256:0ther\"]"),
            &want,
        );
        let all = bad.join("\n");
        for w in [
            "container name `bakeoff-c1-slow`, not `bakeoff-c1-win`",
            "is not running",
            "created from image `127.0.0.1:5000/bakeoff-ref@sha256:0ther`",
            "is not the recipe's digest 127.0.0.1:5000/bakeoff-ref@sha256:abc123",
            "label bakeoff.arm=slow, not win",
        ] {
            assert!(all.contains(w), "{w} not in {all}");
        }
        // An image retagged locally (no digest from a registry): the digest cannot be proven.
        let seen = parse_container(&inspect("bakeoff-c1-win", IMAGE, true, "win")).unwrap();
        let bad = compare(&seen, &parse_repo_digests("null"), &want);
        assert_eq!(bad.len(), 1, "{bad:?}");
        assert!(bad[0].contains("the image's digests: none"), "{bad:?}");
        // What docker prints for a missing container, or garbage.
        assert!(parse_container("[]").is_err());
        assert!(parse_container("Error: No such object").is_err());
    }
}
