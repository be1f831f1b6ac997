//! Where a lane's client ran and what lay between it and the engine (docs/fleet.md "Where the
//! client runs"), as `campaign-result.json` records it per lane (`lanes[].client`); measured by
//! `lane::client_path`.

use serde::{Deserialize, Serialize};

/// A lane's client placement, as recorded in `campaign-result.json` (`lanes[].client`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ClientPath {
    /// The host the load client ran on: bakeoff's own, or (mode `node`) the lane's Slurm node.
    pub host: String,
    /// `same-host` (the lane's address is one of this host's), `network`, or `node`: each timed
    /// step's client ran on the lane's node as a job step beside the arm (each step file's
    /// `client` says where it ran: node, Slurm job and step, address).
    pub mode: String,
    /// Over the network: the TCP round trip to the lane's address (connect time), ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_ms: Option<Rtt>,
    /// Over the network, when no round trip could be timed: why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_error: Option<String>,
}

/// Round-trip figures over `n` timed connects, ms.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Rtt {
    pub n: usize,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

pub const SAME_HOST: &str = "same-host";
pub const NETWORK: &str = "network";
pub const NODE: &str = "node";

impl ClientPath {
    /// The lane's figures in words, for the bundle's notes: None on the same host or the node.
    pub fn note(&self, lane: &str, address: &str) -> Option<String> {
        if self.mode != NETWORK {
            return None;
        }
        let rtt = match (&self.rtt_ms, &self.rtt_error) {
            (Some(r), _) => format!(
                "TCP round trip p50 {:.3} ms, p99 {:.3} ms over {} connects",
                r.p50, r.p99, r.n
            ),
            (None, Some(e)) => format!("round trip not measured: {e}"),
            (None, None) => "round trip not measured".into(),
        };
        Some(format!(
            "Lane {lane} ({address}) was measured from {} over the network ({rtt}): its TTFT and E2E figures include the round trip, and the host's CPU drove every lane's load.",
            self.host
        ))
    }
}
