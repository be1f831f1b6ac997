//! Is the lane port free?

use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::Duration;

/// True when nothing listens on `host:port`: a bind of every address `host` resolves to
/// succeeds (SO_REUSEADDR, so connections in TIME_WAIT don't count). For an address that is not
/// local (the bind says "cannot assign"), a refused connection counts as free.
pub fn port_free(host: &str, port: u16) -> bool {
    let addrs: Vec<SocketAddr> = match (host, port).to_socket_addrs() {
        Ok(a) => a.collect(),
        Err(_) => return false,
    };
    if addrs.is_empty() {
        return false;
    }
    addrs.iter().all(|addr| match TcpListener::bind(addr) {
        Ok(_) => true,
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => false,
        Err(_) => TcpStream::connect_timeout(addr, Duration::from_millis(300)).is_err(),
    })
}

/// Polls [`port_free`] every 50 ms until it is free (true) or `timeout` passes (false).
pub async fn wait_port_free(host: &str, port: u16, timeout: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if port_free(host, port) {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listener_makes_port_busy() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        assert!(!port_free("127.0.0.1", port));
        drop(l);
        assert!(port_free("127.0.0.1", port));
    }
}
