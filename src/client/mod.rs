//! OpenAI-compatible HTTP client: the measurement hot path.
//!
//! HTTP/1.1 is written by hand over a `TcpStream` (with `httparse` for the response head) so that
//! every `read()` is timestamped the moment its bytes arrive, before any parsing, and so that the
//! per-chunk CPU cost stays a few microseconds. `https://` endpoints go through rustls
//! ([`tls`]), which decrypts what each stamped TCP read brought, so stamps stay per read.

mod conn;
pub mod control;
mod fastchunk;
mod pacer;
pub use pacer::SendThread;
mod reader;
mod response;
mod sse;
pub mod tls;
pub mod trace;

pub use conn::{Conn, StreamOpts};
pub use reader::Reader;
pub use tls::Trust;
pub use trace::{ErrorClass, Event, Output, Place, RequestError, ToolCall, Trace, Usage};

use std::fmt;

/// Where requests go: host, port and an optional path prefix (e.g. a gateway mount point).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub host: String,
    pub port: u16,
    /// Path prefix without trailing slash; "" for a server mounted at the root.
    pub prefix: String,
    /// `None` for `http://`; how the certificate is checked for `https://`.
    pub tls: Option<Trust>,
}

impl Target {
    /// Parses `http[s]://host[:port][/prefix]`. A trailing `/v1` is dropped so users may paste
    /// either the server root or the OpenAI base URL. An `https://` target checks certificates
    /// against the system CA store until [`Target::with_trust`] says otherwise.
    pub fn parse(url: &str) -> Result<Target, String> {
        let (rest, tls, default_port) = if let Some(r) = url.strip_prefix("http://") {
            (r, None, 80)
        } else if let Some(r) = url.strip_prefix("https://") {
            (r, Some(Trust::System), 443)
        } else {
            return Err(format!(
                "{url}: expected a URL like http://127.0.0.1:8000 or https://gateway.example (scheme http:// or https://)"
            ));
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        if authority.is_empty() {
            return Err(format!("{url}: the URL has no host"));
        }
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(']') || h.starts_with('[') => {
                let port = p
                    .parse::<u16>()
                    .map_err(|_| format!("{url}: port '{p}' is not a number from 1 to 65535"))?;
                (h.to_string(), port)
            }
            _ => (authority.to_string(), default_port),
        };
        let mut prefix = path.trim_end_matches('/').to_string();
        if prefix.ends_with("/v1") {
            prefix.truncate(prefix.len() - 3);
        }
        Ok(Target {
            host,
            port,
            prefix,
            tls,
        })
    }

    /// The same target with certificates checked as `trust` says (no effect on `http://`).
    pub fn with_trust(mut self, trust: Trust) -> Target {
        if self.tls.is_some() {
            self.tls = Some(trust);
        }
        self
    }

    /// `http` or `https`.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() {
            "https"
        } else {
            "http"
        }
    }

    /// The `host:port` string used for connecting and the Host header.
    pub fn authority(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// The Host header: the authority, without the port for https on 443 (as browsers and
    /// gateways write it; plain http keeps its `host:port` form unchanged).
    pub fn host_header(&self) -> String {
        if self.tls.is_some() && self.port == 443 {
            self.host.clone()
        } else {
            self.authority()
        }
    }

    pub fn path(&self, p: &str) -> String {
        format!("{}{}", self.prefix, p)
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}://{}:{}{}",
            self.scheme(),
            self.host,
            self.port,
            self.prefix
        )
    }
}

/// Builds the bytes of one POST request with a JSON body. Built once per request, before its
/// clock starts.
pub fn post_request_bytes(
    target: &Target,
    path: &str,
    body: &[u8],
    api_key: Option<&str>,
    stream: bool,
) -> Vec<u8> {
    let mut r = Vec::with_capacity(body.len() + 256);
    r.extend_from_slice(b"POST ");
    r.extend_from_slice(target.path(path).as_bytes());
    r.extend_from_slice(b" HTTP/1.1\r\nHost: ");
    r.extend_from_slice(target.host_header().as_bytes());
    r.extend_from_slice(b"\r\nUser-Agent: bakeoff/");
    r.extend_from_slice(crate::VERSION.as_bytes());
    r.extend_from_slice(b"\r\nContent-Type: application/json\r\n");
    if stream {
        r.extend_from_slice(b"Accept: text/event-stream\r\n");
    } else {
        r.extend_from_slice(b"Accept: application/json\r\n");
    }
    if let Some(k) = api_key {
        r.extend_from_slice(b"Authorization: Bearer ");
        r.extend_from_slice(k.as_bytes());
        r.extend_from_slice(b"\r\n");
    }
    r.extend_from_slice(b"Content-Length: ");
    r.extend_from_slice(body.len().to_string().as_bytes());
    r.extend_from_slice(b"\r\n\r\n");
    r.extend_from_slice(body);
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_urls() {
        let t = Target::parse("http://127.0.0.1:8080").unwrap();
        assert_eq!(
            (t.host.as_str(), t.port, t.prefix.as_str()),
            ("127.0.0.1", 8080, "")
        );
        let t = Target::parse("http://localhost:9000/v1/").unwrap();
        assert_eq!((t.port, t.prefix.as_str()), (9000, ""));
        let t = Target::parse("http://gw/openai/v1").unwrap();
        assert_eq!(
            (t.host.as_str(), t.port, t.prefix.as_str()),
            ("gw", 80, "/openai")
        );
        assert_eq!(t.path("/v1/models"), "/openai/v1/models");
        assert!(Target::parse("127.0.0.1:80")
            .unwrap_err()
            .contains("http://"));
        let t = Target::parse("https://gw.example/openai/v1").unwrap();
        assert_eq!(
            (t.host.as_str(), t.port, t.prefix.as_str()),
            ("gw.example", 443, "/openai")
        );
        assert_eq!(t.tls, Some(Trust::System));
        assert_eq!(t.host_header(), "gw.example");
        assert_eq!(
            Target::parse("https://gw:8443").unwrap().host_header(),
            "gw:8443"
        );
        assert_eq!(Target::parse("http://gw").unwrap().host_header(), "gw:80");
        assert_eq!(t.to_string(), "https://gw.example:443/openai");
        let t = t.with_trust(Trust::Insecure);
        assert_eq!(t.tls, Some(Trust::Insecure));
        let plain = Target::parse("http://h:1")
            .unwrap()
            .with_trust(Trust::Insecure);
        assert_eq!(plain.tls, None, "trust settings never turn http into https");
        assert!(Target::parse("ftp://x").unwrap_err().contains("https://"));
        assert!(Target::parse("http://h:99999")
            .unwrap_err()
            .contains("port"));
    }
}
