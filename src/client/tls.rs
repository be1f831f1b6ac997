//! TLS for `https://` endpoints (rustls with the `ring` provider), keeping per-read receive
//! stamps.
//!
//! The ciphertext is read from the TCP socket exactly as a plain connection's bytes are
//! ([`crate::netstamp::read`]: one `recvmsg` with the kernel's `SO_TIMESTAMPNS` stamp), handed to
//! rustls (`read_tls`, `process_new_packets`), and the plaintext that one TCP read completes
//! carries that read's stamp. A record split across reads is complete, and so stamped, at the
//! read that brought its last byte: when the client could first have seen it.
//!
//! Trust: the system's CA store (`rustls-native-certs`: `SSL_CERT_FILE`/`SSL_CERT_DIR`, else the
//! distribution's bundle), or only the CAs of a given PEM file, or, only when asked, none at all
//! (`insecure`: the handshake's signatures are still checked, the certificate is not).

use super::trace::{ErrorClass, RequestError};
use super::Target;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, ClientConnection, DigitallySignedStruct, RootCertStore};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// How an https endpoint's certificate is checked.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub enum Trust {
    /// The system's CA store.
    #[default]
    System,
    /// Only the CA certificates of this PEM file.
    CaFile(PathBuf),
    /// No certificate check (asked for explicitly; recorded as a limitation).
    Insecure,
}

impl Trust {
    /// From the user's two settings (`--ca-file`, `--insecure`; `ca_file`, `insecure`).
    pub fn from_settings(ca_file: Option<&Path>, insecure: bool) -> Trust {
        match (ca_file, insecure) {
            (_, true) => Trust::Insecure,
            (Some(p), false) => Trust::CaFile(p.to_path_buf()),
            (None, false) => Trust::System,
        }
    }

    /// In words, for evidence and messages.
    pub fn describe(&self) -> String {
        match self {
            Trust::System => "the system CA store".into(),
            Trust::CaFile(p) => format!("the CA file {}", p.display()),
            Trust::Insecure => "no certificate verification (insecure)".into(),
        }
    }

    /// A JSON record for evidence: `{"verify": "system" | "ca-file" | "insecure", ...}`.
    pub fn record(&self) -> serde_json::Value {
        match self {
            Trust::System => serde_json::json!({"verify": "system"}),
            Trust::CaFile(p) => {
                serde_json::json!({"verify": "ca-file", "ca_file": p.display().to_string()})
            }
            Trust::Insecure => serde_json::json!({"verify": "insecure"}),
        }
    }
}

/// The limitation every output states when certificates were not verified.
pub fn insecure_note(url: &str) -> String {
    format!(
        "{url} was measured with TLS certificate verification off (insecure): the server's identity was not checked, so the numbers may come from a different server than the one named"
    )
}

/// Client configurations, built once per trust setting (loading a CA store costs milliseconds;
/// one shared configuration also lets connections resume TLS sessions, as real clients do).
static CONFIGS: Mutex<Vec<(Trust, Arc<ClientConfig>)>> = Mutex::new(Vec::new());

/// The client configuration for `trust`; an error names the file or store and the fix.
pub fn config(trust: &Trust) -> Result<Arc<ClientConfig>, String> {
    let mut cache = CONFIGS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, c)) = cache.iter().find(|(t, _)| t == trust) {
        return Ok(c.clone());
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS setup failed: {e}"))?;
    let mut config = match trust {
        Trust::Insecure => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerify(provider)))
            .with_no_client_auth(),
        Trust::System => builder
            .with_root_certificates(system_roots()?)
            .with_no_client_auth(),
        Trust::CaFile(p) => builder
            .with_root_certificates(file_roots(p)?)
            .with_no_client_auth(),
    };
    // This client speaks HTTP/1.1 only: a gateway must not pick h2.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let config = Arc::new(config);
    cache.push((trust.clone(), config.clone()));
    Ok(config)
}

fn system_roots() -> Result<RootCertStore, String> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = RootCertStore::empty();
    let (added, _bad) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        let why = found
            .errors
            .first()
            .map(|e| format!(" ({e})"))
            .unwrap_or_default();
        return Err(format!(
            "no CA certificates found in the system store{why}; install the ca-certificates package, set SSL_CERT_FILE, or give the endpoint's CA with --ca-file (campaign: ca_file)"
        ));
    }
    Ok(roots)
}

/// Loads the CA certificates of a PEM file (checked before any request by the CLI and the
/// campaign validation).
pub fn file_roots(path: &Path) -> Result<RootCertStore, String> {
    use rustls::pki_types::pem::PemObject;
    let bytes = std::fs::read(path)
        .map_err(|e| format!("cannot read the CA file {}: {e}", path.display()))?;
    let mut roots = RootCertStore::empty();
    let mut count = 0;
    for cert in CertificateDer::pem_slice_iter(&bytes) {
        let cert = cert.map_err(|e| {
            format!(
                "the CA file {} is not valid PEM ({e}); give the CA certificate(s) in PEM form (-----BEGIN CERTIFICATE-----)",
                path.display()
            )
        })?;
        roots.add(cert).map_err(|e| {
            format!(
                "the CA file {} holds a certificate that cannot be a trust anchor: {e}",
                path.display()
            )
        })?;
        count += 1;
    }
    if count == 0 {
        return Err(format!(
            "the CA file {} holds no certificate (expected PEM blocks -----BEGIN CERTIFICATE-----)",
            path.display()
        ));
    }
    Ok(roots)
}

/// Accepts any certificate, still checking that the server holds the key it presented.
#[derive(Debug)]
struct NoVerify(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// The TLS state of one connection.
pub struct Tls {
    conn: ClientConnection,
    /// Ciphertext read from the socket, not yet handed to rustls.
    cipher: Vec<u8>,
    /// Ciphertext rustls produced while reading (alerts, key updates), sent with the next write.
    out: Vec<u8>,
    /// The peer's close_notify was seen: the next read is the end of the stream.
    closed: bool,
}

const CIPHER_CHUNK: usize = 16 * 1024;

impl Tls {
    /// Runs the handshake on a connected socket. An error says what was wrong (the certificate,
    /// a server that does not speak TLS) and what to do.
    pub async fn handshake(
        stream: &mut TcpStream,
        target: &Target,
        trust: &Trust,
    ) -> Result<Tls, RequestError> {
        Tls::handshake_or(stream, target, trust)
            .await
            .map_err(|f| RequestError::new(ErrorClass::Connect, f.message))
    }

    async fn handshake_or(
        stream: &mut TcpStream,
        target: &Target,
        trust: &Trust,
    ) -> Result<Tls, HandshakeFailure> {
        let who = target.authority();
        let config = config(trust).map_err(HandshakeFailure::permanent)?;
        let host = target.host.trim_start_matches('[').trim_end_matches(']');
        let name = ServerName::try_from(host.to_string()).map_err(|e| {
            HandshakeFailure::permanent(format!(
                "https://{who}: '{host}' is not a valid TLS server name ({e})"
            ))
        })?;
        let conn = ClientConnection::new(config, name)
            .map_err(|e| HandshakeFailure::permanent(format!("TLS setup failed: {e}")))?;
        let mut tls = Tls {
            conn,
            cipher: Vec::with_capacity(CIPHER_CHUNK),
            out: Vec::new(),
            closed: false,
        };
        while tls.conn.is_handshaking() {
            if tls.conn.wants_write() {
                tls.flush(stream).await.map_err(|e| {
                    HandshakeFailure::transient(format!(
                        "TLS handshake with {who}: send failed: {e}"
                    ))
                })?;
                continue;
            }
            let (n, _) = crate::netstamp::read(stream, &mut tls.cipher)
                .await
                .map_err(|e| {
                    HandshakeFailure::transient(format!(
                        "TLS handshake with {who}: read failed: {e}"
                    ))
                })?;
            if n == 0 {
                return Err(HandshakeFailure::transient(format!(
                    "TLS handshake with {who}: the server closed the connection; is it serving https on this port (plain http needs an http:// URL)?"
                )));
            }
            tls.feed(&mut Vec::new()).map_err(|e| match e {
                Feed::Tls(e) => HandshakeFailure::permanent(handshake_error(&e, target, trust)),
                Feed::Io(e) => {
                    HandshakeFailure::transient(format!("TLS handshake with {who}: {e}"))
                }
            })?;
        }
        // The client's last handshake flight goes out now (it would go with the request anyway).
        if tls.conn.wants_write() {
            tls.flush(stream).await.map_err(|e| {
                HandshakeFailure::transient(format!("TLS handshake with {who}: send failed: {e}"))
            })?;
        }
        Ok(tls)
    }

    /// Encrypts and sends `data` (and anything rustls had queued).
    pub async fn write_all(&mut self, stream: &mut TcpStream, data: &[u8]) -> io::Result<()> {
        self.conn.writer().write_all(data)?;
        self.flush(stream).await
    }

    async fn flush(&mut self, stream: &mut TcpStream) -> io::Result<()> {
        while self.conn.wants_write() {
            self.conn.write_tls(&mut self.out)?;
        }
        if !self.out.is_empty() {
            let r = stream.write_all(&self.out).await;
            self.out.clear();
            r?;
        }
        Ok(())
    }

    /// Reads until plaintext (or the end of the stream) is available and appends it to `buf`.
    /// Returns the plaintext byte count (0 at the end) and the kernel's receive stamp of the TCP
    /// read that completed it. Cancel-safe: bytes are consumed only in synchronous steps.
    pub async fn read(
        &mut self,
        stream: &TcpStream,
        buf: &mut Vec<u8>,
    ) -> io::Result<(usize, u64)> {
        if self.closed {
            return Ok((0, crate::clock::mono_ns()));
        }
        loop {
            if self.cipher.capacity() - self.cipher.len() < CIPHER_CHUNK / 2 {
                self.cipher.reserve(CIPHER_CHUNK);
            }
            let (n, t) = crate::netstamp::read(stream, &mut self.cipher).await?;
            let before = buf.len();
            match self.feed(buf) {
                Ok(()) => {}
                Err(Feed::Io(e)) => return Err(e),
                Err(Feed::Tls(e)) => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("TLS: {e}"),
                    ))
                }
            }
            if n == 0 {
                // End of the TCP stream (with or without the peer's close_notify: the HTTP
                // framing decides whether the response was complete).
                let _ = self.conn.read_tls(&mut io::empty());
                self.closed = true;
            }
            let got = buf.len() - before;
            if got > 0 || self.closed {
                return Ok((got, t));
            }
        }
    }

    /// Hands the buffered ciphertext to rustls and appends the plaintext it yields to `plain`.
    fn feed(&mut self, plain: &mut Vec<u8>) -> Result<(), Feed> {
        let mut off = 0;
        while off < self.cipher.len() {
            let n = self
                .conn
                .read_tls(&mut &self.cipher[off..])
                .map_err(Feed::Io)?;
            off += n;
            let state = self.conn.process_new_packets().map_err(|e| {
                // The alert rustls queued for the peer goes out with the next write, if any.
                let _ = self.conn.write_tls(&mut self.out);
                Feed::Tls(e)
            })?;
            let avail = state.plaintext_bytes_to_read();
            if avail > 0 {
                let at = plain.len();
                plain.resize(at + avail, 0);
                self.conn
                    .reader()
                    .read_exact(&mut plain[at..])
                    .map_err(Feed::Io)?;
            }
            if state.peer_has_closed() {
                self.closed = true;
            }
            if self.conn.wants_write() && !self.conn.is_handshaking() {
                let _ = self.conn.write_tls(&mut self.out);
            }
            if n == 0 {
                break;
            }
        }
        self.cipher.drain(..off);
        Ok(())
    }
}

enum Feed {
    Io(io::Error),
    Tls(rustls::Error),
}

/// Why a handshake failed, and whether trying again could help.
struct HandshakeFailure {
    /// The certificate or the TLS conversation itself: the same every time.
    permanent: bool,
    message: String,
}

impl HandshakeFailure {
    fn permanent(message: String) -> HandshakeFailure {
        HandshakeFailure {
            permanent: true,
            message,
        }
    }

    fn transient(message: String) -> HandshakeFailure {
        HandshakeFailure {
            permanent: false,
            message,
        }
    }
}

/// One connection and handshake to an https target, for a caller that polls it (readiness):
/// `Err` only for a failure no retry can fix (the certificate does not verify, the server does
/// not speak TLS), so it can fail at once instead of at its timeout. A server that cannot be
/// reached (yet), and any `http://` target, is `Ok`.
pub async fn check_handshake(target: &Target, timeout: std::time::Duration) -> Result<(), String> {
    let Some(trust) = &target.tls else {
        return Ok(());
    };
    let attempt = async {
        let Ok(mut stream) = TcpStream::connect(target.authority()).await else {
            return Ok(());
        };
        match Tls::handshake_or(&mut stream, target, trust).await {
            Err(f) if f.permanent => Err(f.message),
            _ => Ok(()),
        }
    };
    tokio::time::timeout(timeout, attempt)
        .await
        .unwrap_or(Ok(()))
}

/// A handshake failure in words, with the fix.
fn handshake_error(e: &rustls::Error, target: &Target, trust: &Trust) -> String {
    use rustls::{CertificateError, Error};
    let who = format!("https://{}", target.authority());
    let fix = "give the CA that signed the server's certificate with --ca-file PATH (campaign: ca_file = \"PATH\" in [arms.endpoint]), or skip verification with --insecure (campaign: insecure = true; recorded as a limitation)";
    match e {
        Error::InvalidCertificate(c) => {
            let what = match c {
                CertificateError::UnknownIssuer => format!(
                    "its issuer is not in {} (unknown issuer; a self-signed or private-CA certificate?)",
                    trust.describe()
                ),
                CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                    "it has expired".to_string()
                }
                CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                    "it is not valid yet (check the clock)".to_string()
                }
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                    let names = match c {
                        CertificateError::NotValidForNameContext { presented, .. } => {
                            let names: Vec<String> = presented
                                .iter()
                                .map(|n| n.replace("DnsName(", "").replace("IpAddress(", "").replace(['(', ')', '"'], ""))
                                .collect();
                            format!(" (it names {})", names.join(", "))
                        }
                        _ => String::new(),
                    };
                    return format!(
                        "TLS handshake with {who} failed: the server's certificate is not valid for the name '{}'{names}; connect by a name the certificate lists, or skip verification with --insecure (campaign: insecure = true; recorded as a limitation)",
                        target.host
                    );
                }
                CertificateError::Revoked => "it has been revoked".to_string(),
                other => format!("{other:?}"),
            };
            format!("TLS handshake with {who} failed: the server's certificate is not trusted: {what}; {fix}")
        }
        Error::InvalidMessage(_) | Error::InappropriateHandshakeMessage { .. } | Error::InappropriateMessage { .. } => format!(
            "TLS handshake with {who} failed ({e}): the server did not answer TLS; if it serves plain http, use an http:// URL"
        ),
        Error::AlertReceived(a) => format!(
            "TLS handshake with {who} failed: the server refused it (alert {a:?}); check that it serves https with a TLS 1.2 or 1.3 certificate for '{}'",
            target.host
        ),
        other => format!("TLS handshake with {who} failed: {other}"),
    }
}
