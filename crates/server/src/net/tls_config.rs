//! Building the TLS server context (a `rustls::ServerConfig`) from the
//! `tls-*` directives, and keeping the one new connections use
//! (`TlsContext`): built at start-up when a TLS listener exists, rebuilt
//! by CONFIG SET of any `tls-*` directive (a failure leaves the old one).
//! It owns no socket; `net::tls` runs the connections.
//!
//! Redis 7.0 (`tls.c`, OpenSSL) is the spec for the directives. What each
//! maps to in rustls (docs/design.md, "TLS"):
//! - `tls-cert-file` / `tls-key-file` / `tls-key-file-pass`: the server's
//!   chain and key (PKCS#1, PKCS#8 or SEC1 PEM; an encrypted PKCS#8 key is
//!   decrypted with the pass phrase through the `pkcs8` crate).
//! - `tls-ca-cert-file` / `tls-ca-cert-dir`: the roots client certificates
//!   are checked against; `tls-auth-clients` yes / optional / no.
//! - `tls-protocols`: TLSv1.2 and/or TLSv1.3 (rustls has nothing older).
//! - `tls-ciphersuites` (TLS 1.3 names) and `tls-ciphers` (OpenSSL TLS 1.2
//!   names): filters on the aws-lc-rs provider's suites.
//! - `tls-prefer-server-ciphers`: rustls's `ignore_client_order`.
//! - `tls-session-caching` / `-cache-size` / `-cache-timeout`: a stateful
//!   session cache (`SessionCache`): TLS 1.2 session ids and TLS 1.3
//!   tickets both name an entry in it, so the timeout bounds both.
use crate::config::{Config, TlsAuthClients};
use parking_lot::{Mutex, RwLock};
use rustls::crypto::CryptoProvider;
use rustls::server::{StoresServerSessions, WebPkiClientVerifier};
use rustls::{RootCertStore, ServerConfig, SupportedCipherSuite};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The context new TLS connections are made from; `None` while no TLS
/// listener is configured.
#[derive(Default)]
pub struct TlsContext {
    current: RwLock<Option<Arc<ServerConfig>>>,
}

impl TlsContext {
    /// The context for a connection accepted now.
    pub fn get(&self) -> Option<Arc<ServerConfig>> {
        self.current.read().clone()
    }

    /// Makes `config` the context for connections accepted from now on;
    /// those already open keep theirs.
    pub fn set(&self, config: ServerConfig) {
        *self.current.write() = Some(Arc::new(config));
    }

    /// Builds a context from `cfg` and makes it the current one; on error
    /// the current one stays.
    pub fn reload(&self, cfg: &Config) -> Result<(), String> {
        self.set(build(cfg)?);
        Ok(())
    }
}

/// True when some port speaks TLS, so the `tls-*` files must be valid.
pub fn wanted(cfg: &Config) -> bool {
    cfg.tls_port != 0 || (cfg.memcached_tls && cfg.memcached_port != 0)
}

/// The names `tls-ciphersuites` accepts (OpenSSL's TLS 1.3 names) and
/// `tls-ciphers` accepts (OpenSSL's TLS 1.2 names), each with the rustls
/// suite it selects.
const TLS13_NAMES: &[(&str, &str)] = &[
    ("TLS_AES_128_GCM_SHA256", "TLS13_AES_128_GCM_SHA256"),
    ("TLS_AES_256_GCM_SHA384", "TLS13_AES_256_GCM_SHA384"),
    (
        "TLS_CHACHA20_POLY1305_SHA256",
        "TLS13_CHACHA20_POLY1305_SHA256",
    ),
];
const TLS12_NAMES: &[(&str, &str)] = &[
    (
        "ECDHE-ECDSA-AES128-GCM-SHA256",
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
    ),
    (
        "ECDHE-ECDSA-AES256-GCM-SHA384",
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    ),
    (
        "ECDHE-ECDSA-CHACHA20-POLY1305",
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
    ),
    (
        "ECDHE-RSA-AES128-GCM-SHA256",
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    ),
    (
        "ECDHE-RSA-AES256-GCM-SHA384",
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    ),
    (
        "ECDHE-RSA-CHACHA20-POLY1305",
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
    ),
];
/// OpenSSL keywords for "everything": all the TLS 1.2 suites rustls has.
const ALL_KEYWORDS: &[&str] = &[
    "DEFAULT", "ALL", "HIGH", "ECDHE", "EECDH", "AESGCM", "kEECDH",
];

/// `tls-protocols`: the versions it names (none: both), or why not.
pub fn parse_protocols(text: &str) -> Result<(bool, bool), String> {
    let (mut v12, mut v13) = (false, false);
    for p in text.split_ascii_whitespace() {
        if p.eq_ignore_ascii_case("TLSv1.2") {
            v12 = true;
        } else if p.eq_ignore_ascii_case("TLSv1.3") {
            v13 = true;
        } else if p.eq_ignore_ascii_case("TLSv1") || p.eq_ignore_ascii_case("TLSv1.1") {
            return Err(format!(
                "{p} is not supported (rustls implements only TLSv1.2 and TLSv1.3)"
            ));
        } else {
            return Err(format!("Invalid tls-protocols specified: {p}"));
        }
    }
    if !v12 && !v13 {
        return Ok((true, true));
    }
    Ok((v12, v13))
}

/// `tls-ciphersuites`: colon-separated TLS 1.3 names; the rustls suite
/// names chosen (empty: all).
pub fn parse_ciphersuites(text: &str) -> Result<Vec<&'static str>, String> {
    let mut out = Vec::new();
    for name in text.split(':').map(str::trim).filter(|s| !s.is_empty()) {
        match TLS13_NAMES
            .iter()
            .find(|(o, _)| o.eq_ignore_ascii_case(name))
        {
            Some((_, r)) => out.push(*r),
            None => {
                return Err(format!(
                    "unsupported TLS 1.3 ciphersuite '{name}' (rustls offers {})",
                    names(TLS13_NAMES)
                ))
            }
        }
    }
    Ok(out)
}

/// `tls-ciphers`: an OpenSSL cipher list for TLS 1.2, of the names rustls
/// has, `!name`/`-name` to take one out, and the keywords that mean all of
/// them (`DEFAULT`, `HIGH`...); `@STRENGTH`-style directives and `+name`
/// reordering are accepted and ignored. The rustls suite names chosen
/// (empty: all).
pub fn parse_ciphers(text: &str) -> Result<Vec<&'static str>, String> {
    let all = || TLS12_NAMES.iter().map(|(_, r)| *r);
    let mut out: Vec<&'static str> = Vec::new();
    let mut any = false;
    for item in text
        .split([':', ',', ' '])
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        any = true;
        if item.starts_with('@') || item.starts_with('+') {
            continue;
        }
        let (remove, name) = match item.strip_prefix(['!', '-']) {
            Some(n) => (true, n),
            None => (false, item),
        };
        let chosen: Vec<&'static str> = if ALL_KEYWORDS.iter().any(|k| k.eq_ignore_ascii_case(name))
        {
            all().collect()
        } else if let Some((_, r)) = TLS12_NAMES
            .iter()
            .find(|(o, _)| o.eq_ignore_ascii_case(name))
        {
            vec![*r]
        } else if remove {
            // `!aNULL`, `!MD5` and the like exclude what rustls never has.
            Vec::new()
        } else {
            return Err(format!(
                "unsupported TLS 1.2 cipher '{name}' (rustls offers {})",
                names(TLS12_NAMES)
            ));
        };
        for r in chosen {
            if remove {
                out.retain(|x| *x != r);
            } else if !out.contains(&r) {
                out.push(r);
            }
        }
    }
    if any && out.is_empty() {
        return Err("no TLS 1.2 cipher left in tls-ciphers".into());
    }
    Ok(out)
}

fn names(table: &[(&str, &str)]) -> String {
    table.iter().map(|(o, _)| *o).collect::<Vec<_>>().join(", ")
}

/// The aws-lc-rs provider (docs/design.md, "TLS": its RSA handshakes
/// cost ~60% of ring's) with only the suites the directives allow.
fn provider(cfg: &Config) -> Result<CryptoProvider, String> {
    let mut p = rustls::crypto::aws_lc_rs::default_provider();
    let tls13 = parse_ciphersuites(&cfg.tls_ciphersuites)?;
    let tls12 = parse_ciphers(&cfg.tls_ciphers)?;
    p.cipher_suites.retain(|s| {
        let name = s.suite().as_str().unwrap_or("");
        match s {
            SupportedCipherSuite::Tls13(_) => tls13.is_empty() || tls13.contains(&name),
            SupportedCipherSuite::Tls12(_) => tls12.is_empty() || tls12.contains(&name),
        }
    });
    Ok(p)
}

/// A `rustls::ServerConfig` for the directives in `cfg`, or the reason
/// it cannot be made (the file and what is wrong with it).
pub fn build(cfg: &Config) -> Result<ServerConfig, String> {
    if cfg.tls_cert_file.is_empty() {
        return Err("No tls-cert-file configured".into());
    }
    if cfg.tls_key_file.is_empty() {
        return Err("No tls-key-file configured".into());
    }
    let certs = load_certs(&cfg.tls_cert_file)?;
    if certs.is_empty() {
        return Err(format!(
            "Failed to load certificate: {}: no certificate in the file",
            cfg.tls_cert_file
        ));
    }
    let key = load_key(&cfg.tls_key_file, &cfg.tls_key_file_pass)?;
    let provider = Arc::new(provider(cfg)?);
    let (v12, v13) = parse_protocols(&cfg.tls_protocols)?;
    let mut versions = Vec::new();
    if v12 {
        versions.push(&rustls::version::TLS12);
    }
    if v13 {
        versions.push(&rustls::version::TLS13);
    }
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| format!("tls-protocols / tls-ciphers: {e}"))?;
    let builder = match cfg.tls_auth_clients {
        TlsAuthClients::No => builder.with_no_client_auth(),
        auth => {
            let roots = load_roots(cfg)?;
            let b = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let b = if auth == TlsAuthClients::Optional {
                b.allow_unauthenticated()
            } else {
                b
            };
            builder.with_client_cert_verifier(
                b.build()
                    .map_err(|e| format!("Failed to set up client verification: {e}"))?,
            )
        }
    };
    let mut sc = builder.with_single_cert(certs, key).map_err(|e| {
        format!(
            "Failed to use {} with {}: {e}",
            cfg.tls_cert_file, cfg.tls_key_file
        )
    })?;
    sc.ignore_client_order = cfg.tls_prefer_server_ciphers;
    if cfg.tls_session_caching && cfg.tls_session_cache_size > 0 {
        sc.session_storage = Arc::new(SessionCache::new(
            cfg.tls_session_cache_size as usize,
            Duration::from_secs(u64::from(cfg.tls_session_cache_timeout)),
        ));
    } else {
        sc.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
        sc.send_tls13_tickets = 0;
    }
    Ok(sc)
}

/// What the client context of a replication link is made of
/// (`replication::tls_link::client_config` assembles it): Redis 7.0's
/// rule for the certificate a replica presents, `tls-client-cert-file`
/// and `-key-file` (`-key-file-pass`) when a client certificate is set,
/// else the server's own; the roots the master is checked against; and
/// the same provider and versions as the server side.
pub struct ClientParts {
    pub provider: Arc<CryptoProvider>,
    pub versions: Vec<&'static rustls::SupportedProtocolVersion>,
    pub roots: RootCertStore,
    pub certs: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
    /// The certificate's file, for messages.
    pub cert_file: String,
}

pub fn client_parts(cfg: &Config) -> Result<ClientParts, String> {
    let (cert_file, key_file, pass) = if cfg.tls_client_cert_file.is_empty() {
        (
            &cfg.tls_cert_file,
            &cfg.tls_key_file,
            &cfg.tls_key_file_pass,
        )
    } else {
        (
            &cfg.tls_client_cert_file,
            &cfg.tls_client_key_file,
            &cfg.tls_client_key_file_pass,
        )
    };
    if cert_file.is_empty() {
        return Err("No tls-cert-file configured".into());
    }
    if key_file.is_empty() {
        return Err("No tls-key-file configured".into());
    }
    let certs = load_certs(cert_file)?;
    if certs.is_empty() {
        return Err(format!(
            "Failed to load certificate: {cert_file}: no certificate in the file"
        ));
    }
    let key = load_key(key_file, pass)?;
    if cfg.tls_ca_cert_file.is_empty() && cfg.tls_ca_cert_dir.is_empty() {
        return Err("Either tls-ca-cert-file or tls-ca-cert-dir must be specified".into());
    }
    let roots = load_roots(cfg)?;
    let (v12, v13) = parse_protocols(&cfg.tls_protocols)?;
    let mut versions = Vec::new();
    if v12 {
        versions.push(&rustls::version::TLS12);
    }
    if v13 {
        versions.push(&rustls::version::TLS13);
    }
    Ok(ClientParts {
        provider: Arc::new(provider(cfg)?),
        versions,
        roots,
        certs,
        key,
        cert_file: cert_file.clone(),
    })
}

fn read_file(path: &str, what: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("Failed to load {what} {path}: {e}"))
}

fn load_certs(path: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let bytes = read_file(path, "certificate")?;
    rustls_pemfile::certs(&mut bytes.as_slice())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("Failed to load certificate: {path}: {e}"))
}

/// The private key in `path`: PKCS#1, PKCS#8 or SEC1 PEM, or PKCS#8
/// encrypted with `pass` (PBES2, as `openssl pkcs8 -topk8` writes). Keys
/// in OpenSSL's legacy encrypted PEM (`Proc-Type: 4,ENCRYPTED`) are refused
/// with the conversion to use: rustls cannot read them and no maintained
/// crate decrypts them.
fn load_key(path: &str, pass: &str) -> Result<PrivateKeyDer<'static>, String> {
    let bytes = read_file(path, "private key")?;
    let text = String::from_utf8_lossy(&bytes);
    if text.contains("Proc-Type: 4,ENCRYPTED") {
        return Err(format!(
            "Failed to load private key: {path}: legacy OpenSSL-encrypted PEM keys are not supported; convert with `openssl pkcs8 -topk8 -v2 aes-256-cbc -in OLD -out NEW`"
        ));
    }
    if let Some(start) = text.find("-----BEGIN ENCRYPTED PRIVATE KEY-----") {
        if pass.is_empty() {
            return Err(format!(
                "Failed to load private key: {path}: the key is encrypted and tls-key-file-pass is not set"
            ));
        }
        let end_tag = "-----END ENCRYPTED PRIVATE KEY-----";
        let end = text[start..]
            .find(end_tag)
            .map(|e| start + e + end_tag.len())
            .ok_or_else(|| format!("Failed to load private key: {path}: unterminated PEM"))?;
        let (_, doc) = pkcs8::Document::from_pem(&text[start..end])
            .map_err(|e| format!("Failed to load private key: {path}: {e}"))?;
        let info = pkcs8::EncryptedPrivateKeyInfo::try_from(doc.as_bytes())
            .map_err(|e| format!("Failed to load private key: {path}: {e}"))?;
        let plain = info.decrypt(pass).map_err(|e| {
            format!(
                "Failed to load private key: {path}: cannot decrypt with tls-key-file-pass: {e}"
            )
        })?;
        return Ok(PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
            plain.as_bytes().to_vec(),
        )));
    }
    match rustls_pemfile::private_key(&mut bytes.as_slice()) {
        Ok(Some(k)) => Ok(k),
        Ok(None) => Err(format!(
            "Failed to load private key: {path}: no PKCS#1, PKCS#8 or SEC1 PEM key in the file"
        )),
        Err(e) => Err(format!("Failed to load private key: {path}: {e}")),
    }
}

/// The trusted roots for client certificates: every certificate in
/// `tls-ca-cert-file` and in each file of `tls-ca-cert-dir` (OpenSSL looks
/// files there up by subject hash; reading them all trusts the same set).
fn load_roots(cfg: &Config) -> Result<RootCertStore, String> {
    if cfg.tls_ca_cert_file.is_empty() && cfg.tls_ca_cert_dir.is_empty() {
        return Err(
            "Either tls-ca-cert-file or tls-ca-cert-dir must be specified when tls-auth-clients is yes or optional"
                .into(),
        );
    }
    let mut roots = RootCertStore::empty();
    let mut add = |path: &str, strict: bool| -> Result<(), String> {
        let certs = match load_certs(path) {
            Ok(c) => c,
            Err(e) if strict => return Err(e),
            Err(_) => return Ok(()),
        };
        for c in certs {
            roots
                .add(c)
                .map_err(|e| format!("Failed to configure CA certificate(s) {path}: {e}"))?;
        }
        Ok(())
    };
    if !cfg.tls_ca_cert_file.is_empty() {
        add(&cfg.tls_ca_cert_file, true)?;
    }
    if !cfg.tls_ca_cert_dir.is_empty() {
        let dir = std::fs::read_dir(&cfg.tls_ca_cert_dir).map_err(|e| {
            format!(
                "Failed to configure CA certificate(s) directory {}: {e}",
                cfg.tls_ca_cert_dir
            )
        })?;
        for entry in dir.flatten() {
            if entry
                .file_type()
                .is_ok_and(|t| t.is_file() || t.is_symlink())
            {
                add(&entry.path().to_string_lossy(), false)?;
            }
        }
    }
    if roots.is_empty() {
        return Err("Failed to configure CA certificate(s): no certificate found".into());
    }
    Ok(roots)
}

/// TLS sessions that can be resumed: at most `size` (the oldest goes
/// first, as OpenSSL's cache), each for `timeout` after it was made
/// (`tls-session-cache-timeout`, SSL_CTX_set_timeout in Redis). rustls's
/// own memory cache has no expiry, hence this one.
struct SessionCache {
    size: usize,
    timeout: Duration,
    inner: Mutex<Sessions>,
}

#[derive(Default)]
struct Sessions {
    map: HashMap<Vec<u8>, (Instant, Vec<u8>)>,
    order: VecDeque<Vec<u8>>,
}

impl SessionCache {
    fn new(size: usize, timeout: Duration) -> SessionCache {
        SessionCache {
            size,
            timeout,
            inner: Mutex::new(Sessions::default()),
        }
    }
}

impl std::fmt::Debug for SessionCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionCache")
            .field("size", &self.size)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl StoresServerSessions for SessionCache {
    fn put(&self, key: Vec<u8>, value: Vec<u8>) -> bool {
        let mut s = self.inner.lock();
        if s.map.insert(key.clone(), (Instant::now(), value)).is_none() {
            s.order.push_back(key);
        }
        while s.map.len() > self.size {
            match s.order.pop_front() {
                Some(old) => {
                    s.map.remove(&old);
                }
                None => break,
            }
        }
        // Keys taken or expired leave stale names in `order`; drop them
        // once they are the bulk, so it stays bounded.
        if s.order.len() > 2 * self.size.max(16) {
            let Sessions { map, order } = &mut *s;
            order.retain(|k| map.contains_key(k));
        }
        true
    }

    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        let mut s = self.inner.lock();
        match s.map.get(key) {
            Some((at, v)) if at.elapsed() <= self.timeout => Some(v.clone()),
            Some(_) => {
                s.map.remove(key);
                None
            }
            None => None,
        }
    }

    fn take(&self, key: &[u8]) -> Option<Vec<u8>> {
        let (at, v) = self.inner.lock().map.remove(key)?;
        (at.elapsed() <= self.timeout).then_some(v)
    }

    fn can_cache(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocols() {
        assert_eq!(parse_protocols(""), Ok((true, true)));
        assert_eq!(parse_protocols("TLSv1.2"), Ok((true, false)));
        assert_eq!(parse_protocols("tlsv1.3"), Ok((false, true)));
        assert_eq!(parse_protocols("TLSv1.2 TLSv1.3"), Ok((true, true)));
        assert!(parse_protocols("TLSv1.1 TLSv1.2")
            .unwrap_err()
            .contains("rustls implements only"));
        assert!(parse_protocols("SSLv3").is_err());
    }

    #[test]
    fn ciphers() {
        assert_eq!(parse_ciphers(""), Ok(vec![]));
        assert_eq!(
            parse_ciphers("ECDHE-RSA-AES128-GCM-SHA256"),
            Ok(vec!["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"])
        );
        let all = parse_ciphers("DEFAULT:!aNULL:!ECDHE-RSA-CHACHA20-POLY1305").unwrap();
        assert_eq!(all.len(), TLS12_NAMES.len() - 1);
        assert!(parse_ciphers("AES128-SHA")
            .unwrap_err()
            .contains("unsupported TLS 1.2 cipher 'AES128-SHA'"));
        assert!(parse_ciphers("!DEFAULT").is_err());
        assert_eq!(
            parse_ciphersuites("TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"),
            Ok(vec![
                "TLS13_AES_256_GCM_SHA384",
                "TLS13_CHACHA20_POLY1305_SHA256"
            ])
        );
        assert!(parse_ciphersuites("TLS_AES_128_CCM_SHA256").is_err());
        // Every rustls name in the tables is one the server's provider has.
        let p = rustls::crypto::aws_lc_rs::default_provider();
        let have: Vec<&str> = p
            .cipher_suites
            .iter()
            .filter_map(|s| s.suite().as_str())
            .collect();
        for (_, r) in TLS12_NAMES.iter().chain(TLS13_NAMES) {
            assert!(have.contains(r), "{r} not in {have:?}");
        }
    }

    #[test]
    fn session_cache_expires_and_evicts() {
        let c = SessionCache::new(2, Duration::from_millis(50));
        c.put(b"a".to_vec(), b"1".to_vec());
        c.put(b"b".to_vec(), b"2".to_vec());
        c.put(b"c".to_vec(), b"3".to_vec());
        assert_eq!(c.get(b"a"), None);
        assert_eq!(c.get(b"b"), Some(b"2".to_vec()));
        assert_eq!(c.take(b"c"), Some(b"3".to_vec()));
        assert_eq!(c.get(b"c"), None);
        std::thread::sleep(Duration::from_millis(80));
        assert_eq!(c.get(b"b"), None);
    }
}
