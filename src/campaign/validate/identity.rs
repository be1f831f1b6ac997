//! `[campaign]` and one lane's settings (`[lane]`, or each `[[lanes]]` table: lanes.rs).

use super::common::{is_id, limits, p, within};
use crate::campaign::diag::{FieldPath, Reporter};
use crate::campaign::paths::resolve;
use crate::campaign::spec::{Campaign, Lane};
use std::collections::HashSet;
use std::path::Path;

pub(super) fn identity(c: &mut Campaign, dir: &Path, r: &mut Reporter) {
    let id = c.campaign.id.clone();
    if !is_id(&id) {
        r.error(
            &p("campaign.id"),
            format!("`{id}` is not a valid campaign id (it names the bundle and containers)"),
            "use lowercase letters, digits and `-`, e.g. \"2026-11-30-quant-bakeoff\"",
        );
    }
    if c.campaign.hardware.trim().is_empty() {
        r.error(
            &p("campaign.hardware"),
            "empty hardware description",
            "describe the hardware (\"1x RTX 5090, 32 GiB\") or write \"auto\" to detect it",
        );
    }
    if c.campaign.topology.trim().is_empty() {
        r.error(
            &p("campaign.topology"),
            "empty topology label",
            "say how arms are isolated, e.g. \"isolated direct managed recipe lane\"",
        );
    }
    c.campaign.output = if c.campaign.output.as_os_str().is_empty() {
        resolve(dir, &Path::new("runs").join(&id))
    } else {
        resolve(dir, &c.campaign.output)
    };
}

/// The checks of one lane's settings: `[lane]` (`at` = `lane`) or a `[[lanes]]` table (`at` =
/// `lanes[i]`).
pub(super) fn lane_settings(l: &Lane, at: &FieldPath, r: &mut Reporter) {
    if l.host.is_empty()
        || l.host.contains("://")
        || l.host.contains('/')
        || l.host.contains(char::is_whitespace)
    {
        r.error(
            &at.key("host"),
            format!("`{}` is not a host name or address", l.host),
            "give the host only, e.g. \"127.0.0.1\" (no scheme, port or path)",
        );
    }
    if l.port == 0 {
        r.error(
            &at.key("port"),
            "port 0 is not a port",
            "give a port number from 1 to 65535",
        );
    }
    let mut seen = HashSet::new();
    for (i, g) in l.gpus.iter().enumerate() {
        if !(g.starts_with("GPU-") || g.starts_with("MIG-")) || g.contains(char::is_whitespace) {
            r.error(
                &at.key("gpus").index(i),
                format!("`{g}` is not a GPU UUID"),
                "list the UUIDs `nvidia-smi -L` prints (\"GPU-…\" or \"MIG-…\"), not indexes",
            );
        }
        if !seen.insert(g) {
            r.error(
                &at.key("gpus").index(i),
                format!("`{g}` is listed twice"),
                "list each GPU once",
            );
        }
    }
    if !l.health_path.starts_with('/') {
        r.error(
            &at.key("health_path"),
            format!("`{}` is not a path", l.health_path),
            "give a path starting with `/`, e.g. \"/health\"",
        );
    }
    if l.ready_timeout_s == 0 {
        r.error(
            &at.key("ready_timeout_s"),
            "must be positive",
            "give the seconds an arm may take to become ready, e.g. 600",
        );
    }
    let secs = [
        ("ready_timeout_s", l.ready_timeout_s, 1),
        ("stop_grace_s", l.stop_grace_s, 0),
    ];
    for (f, v, lo) in secs {
        if v > limits::SECONDS {
            within(r, &at.key(f), v, lo, limits::SECONDS, "seconds");
        }
    }
    within(
        r,
        &at.key("memory_reserve_mib"),
        l.memory_reserve_mib,
        0,
        limits::MIB,
        "MiB",
    );
    super::price::lane_price(l, at, r);
    within(
        r,
        &at.key("idle_baseline_max_mib"),
        l.idle_baseline_max_mib,
        0,
        limits::MIB,
        "MiB",
    );
}
