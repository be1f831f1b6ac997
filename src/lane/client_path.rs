//! Where a lane's client ran and what lay between it and the engine (docs/fleet.md "Where the
//! client runs"): the load client runs in the bakeoff process, so a lane on another host is
//! measured over the network, and every TTFT and E2E figure there includes the round trip. The
//! bundle records it per lane, with the round trip measured, so the figures say what they rest on.

pub use crate::evidence::client_path::{ClientPath, Rtt, NETWORK, NODE, SAME_HOST};
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs, UdpSocket};
use std::time::{Duration, Instant};

/// Connects timed per lane (each costs one round trip; a few milliseconds in all).
pub const PROBES: usize = 20;
/// Longest wait for one connect.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// Where `host:port` is measured from (`me`: this host's name): over the network the round trip
/// timed by `PROBES` TCP connects (a refused connect is a round trip too: the RST comes back from
/// the lane's host, so a lane with nothing serving yet is timed the same).
pub fn measure(me: &str, host: &str, port: u16) -> ClientPath {
    let me = me.to_string();
    let addr = match (host, port).to_socket_addrs().map(|mut a| a.next()) {
        Ok(Some(a)) => a,
        Ok(None) | Err(_) => {
            return ClientPath {
                host: me,
                mode: NETWORK.into(),
                rtt_error: Some(format!("{host} does not resolve")),
                ..Default::default()
            }
        }
    };
    if is_local(addr.ip()) {
        return ClientPath {
            host: me,
            mode: SAME_HOST.into(),
            ..Default::default()
        };
    }
    let (rtt_ms, rtt_error) = match time_connects(addr, PROBES) {
        Ok(r) => (Some(r), None),
        Err(e) => (None, Some(e)),
    };
    ClientPath {
        host: me,
        mode: NETWORK.into(),
        rtt_ms,
        rtt_error,
    }
}

/// Loopback, or an address of one of this host's interfaces (only those can be bound).
fn is_local(ip: IpAddr) -> bool {
    ip.is_loopback() || ip.is_unspecified() || UdpSocket::bind(SocketAddr::new(ip, 0)).is_ok()
}

fn time_connects(addr: SocketAddr, n: usize) -> Result<Rtt, String> {
    let mut ms = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {}
            Err(e) => return Err(format!("connect to {addr}: {e}")),
        }
        ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    Ok(summarize(ms))
}

fn summarize(mut ms: Vec<f64>) -> Rtt {
    ms.sort_by(f64::total_cmp);
    let at = |q: f64| ms[((ms.len() - 1) as f64 * q).round() as usize];
    Rtt {
        n: ms.len(),
        p50: at(0.5),
        p99: at(0.99),
        max: ms[ms.len() - 1],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_the_same_host_and_says_nothing() {
        let p = measure("ctl", "127.0.0.1", 1);
        assert_eq!(p.mode, SAME_HOST);
        assert!(p.rtt_ms.is_none() && p.rtt_error.is_none());
        assert!(p.note("g0", "127.0.0.1:1").is_none());
        assert!(is_local("::1".parse().unwrap()));
    }

    #[test]
    fn an_address_of_no_local_interface_is_over_the_network() {
        // TEST-NET-1 (RFC 5737) is on no interface here.
        assert!(!is_local("192.0.2.1".parse().unwrap()));
    }

    #[test]
    fn the_round_trip_is_timed_against_a_refusing_port_and_said_in_the_note() {
        // A port nothing listens on refuses at once: each connect is one timed round trip.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let r = time_connects(SocketAddr::from(([127, 0, 0, 1], port)), 5).unwrap();
        assert_eq!(r.n, 5);
        assert!(r.p50 > 0.0 && r.p50 <= r.p99 && r.p99 <= r.max, "{r:?}");
        let p = ClientPath {
            host: "ctl".into(),
            mode: NETWORK.into(),
            rtt_ms: Some(Rtt {
                n: 20,
                p50: 0.0512,
                p99: 0.11,
                max: 0.2,
            }),
            rtt_error: None,
        };
        assert_eq!(
            p.note("n2", "10.9.0.3:8000").unwrap(),
            "Lane n2 (10.9.0.3:8000) was measured from ctl over the network (TCP round trip p50 0.051 ms, p99 0.110 ms over 20 connects): its TTFT and E2E figures include the round trip, and the host's CPU drove every lane's load."
        );
    }

    #[test]
    fn percentiles_of_the_connects() {
        let r = summarize((1..=100).map(f64::from).collect());
        assert_eq!((r.n, r.p50, r.p99, r.max), (100, 51.0, 99.0, 100.0));
    }
}
