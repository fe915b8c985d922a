//! TLS on Cairn's ports (issue 23, item 2): certificates made by the tests
//! themselves (`rcgen`: a CA, a server and a client certificate), a rustls
//! client, and the real clients users have: `redis-cli --tls`,
//! `redis-benchmark --tls` (Debian's redis-tools is built with TLS) and
//! redis-py with `ssl=True` and a client certificate (the venv of
//! `scripts/install_test_clients.sh`, or `CAIRN_CLIENTS_VENV`).
//!
//! Covered: `tls-auth-clients` yes / no / optional, `tls-protocols`,
//! reloading certificates by CONFIG SET, plaintext refused on the TLS port
//! without harm to others, a stalled handshake not stalling others, a
//! 100 MB value in and out, pipelining, encrypted keys, the memcached
//! port over TLS (`memcached-tls`), a TLS-only server (`port 0`), and
//! refusals at accept time (protected mode answered after the handshake,
//! maxclients closed before it, as Redis 7.0).
mod support;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::Server;

/// A CA and the certificates it signed, as PEM files in a directory of
/// their own.
struct Pki {
    dir: PathBuf,
}

impl Pki {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
    fn p(&self, name: &str) -> String {
        self.path(name).to_string_lossy().into_owned()
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn ca_params(name: &str) -> CertificateParams {
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name.push(DnType::CommonName, name);
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    p
}

/// `ca.pem`, `server.pem`/`server.key` (for localhost, 127.0.0.1 and the
/// private network's 10.77.0.1) and `client.pem`/`client.key`, all under
/// a CA named `name`.
fn make_pki(name: &str) -> Pki {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "cairn-tls-{}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed),
        name
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let ca_key = KeyPair::generate().unwrap();
    let ca = ca_params(name).self_signed(&ca_key).unwrap();
    let names = vec!["localhost".into(), "127.0.0.1".into(), "10.77.0.1".into()];
    let mut sp = CertificateParams::new(names).unwrap();
    sp.distinguished_name
        .push(DnType::CommonName, "cairn server");
    sp.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let server_key = KeyPair::generate().unwrap();
    let server = sp.signed_by(&server_key, &ca, &ca_key).unwrap();
    let mut cp = CertificateParams::new(Vec::<String>::new()).unwrap();
    cp.distinguished_name
        .push(DnType::CommonName, "cairn client");
    cp.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let client_key = KeyPair::generate().unwrap();
    let client = cp.signed_by(&client_key, &ca, &ca_key).unwrap();
    std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
    std::fs::write(dir.join("server.pem"), server.pem()).unwrap();
    std::fs::write(dir.join("server.key"), server_key.serialize_pem()).unwrap();
    std::fs::write(dir.join("client.pem"), client.pem()).unwrap();
    std::fs::write(dir.join("client.key"), client_key.serialize_pem()).unwrap();
    Pki { dir }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap()
}

/// Cairn with a TLS port (returned) using `pki`'s server certificate,
/// plus `extra` directives, and a plain port (`server.port`): chosen here,
/// since `port 0` beside a TLS port means no plain port, as in Redis.
fn start_tls(pki: &Pki, extra: &[&str]) -> (Server, u16) {
    let tls_port = free_port().to_string();
    let plain_port = free_port().to_string();
    let mut args = vec![
        "--port",
        &plain_port,
        "--tls-port",
        &tls_port,
        "--tls-cert-file",
    ];
    let (cert, key, ca) = (pki.p("server.pem"), pki.p("server.key"), pki.p("ca.pem"));
    args.extend([
        cert.as_str(),
        "--tls-key-file",
        &key,
        "--tls-ca-cert-file",
        &ca,
    ]);
    args.extend(extra);
    let server = support::start_cairn(&args);
    (server, tls_port.parse().unwrap())
}

fn load_certs(path: &Path) -> Vec<CertificateDer<'static>> {
    let pem = std::fs::read(path).unwrap();
    rustls_pemfile::certs(&mut pem.as_slice())
        .collect::<Result<_, _>>()
        .unwrap()
}

fn load_key(path: &Path) -> PrivateKeyDer<'static> {
    let pem = std::fs::read(path).unwrap();
    rustls_pemfile::private_key(&mut pem.as_slice())
        .unwrap()
        .unwrap()
}

/// A client trusting `pki`'s CA, with its client certificate if `cert`,
/// speaking only `versions` (all when empty).
fn client_config(
    pki: &Pki,
    cert: bool,
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    for c in load_certs(&pki.path("ca.pem")) {
        roots.add(c).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let versions = if versions.is_empty() {
        rustls::ALL_VERSIONS
    } else {
        versions
    };
    let b = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .unwrap()
        .with_root_certificates(roots);
    let c = if cert {
        b.with_client_auth_cert(
            load_certs(&pki.path("client.pem")),
            load_key(&pki.path("client.key")),
        )
        .unwrap()
    } else {
        b.with_no_client_auth()
    };
    Arc::new(c)
}

type Tls = BufReader<StreamOwned<ClientConnection, TcpStream>>;

/// Connects and finishes the handshake (a TLS 1.3 server's verdict on a
/// client certificate only shows on the first read, so this sends a PING
/// and reads its answer).
fn connect(port: u16, cfg: &Arc<ClientConfig>) -> io::Result<Tls> {
    let sock = TcpStream::connect(("127.0.0.1", port))?;
    sock.set_read_timeout(Some(Duration::from_secs(10)))?;
    sock.set_write_timeout(Some(Duration::from_secs(10)))?;
    let name = ServerName::try_from("localhost").unwrap();
    let conn = ClientConnection::new(cfg.clone(), name).map_err(io::Error::other)?;
    let mut s = BufReader::new(StreamOwned::new(conn, sock));
    send(&mut s, &["PING"])?;
    let r = reply(&mut s)?;
    if r != "+PONG" {
        return Err(io::Error::other(format!("PING answered {r}")));
    }
    Ok(s)
}

fn send(s: &mut Tls, args: &[&str]) -> io::Result<()> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
    s.get_mut().write_all(&out)?;
    s.get_mut().flush()
}

/// One reply, in a flat text form: `+OK`, `-ERR ...`, `:1`, `$value`
/// (`$-1` for null), arrays as `[a,b]`.
fn reply(s: &mut Tls) -> io::Result<String> {
    let mut line = String::new();
    if s.read_line(&mut line)? == 0 {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    let line = line.trim_end().to_string();
    let (kind, rest) = line.split_at(1);
    match kind {
        "$" => {
            let n: i64 = rest.parse().unwrap();
            if n < 0 {
                return Ok("$-1".into());
            }
            let mut buf = vec![0; n as usize + 2];
            s.read_exact(&mut buf)?;
            buf.truncate(n as usize);
            Ok(format!("${}", String::from_utf8_lossy(&buf)))
        }
        "*" => {
            let n: i64 = rest.parse().unwrap();
            let items: Vec<String> = (0..n.max(0)).map(|_| reply(s)).collect::<io::Result<_>>()?;
            Ok(format!("[{}]", items.join(",")))
        }
        _ => Ok(line),
    }
}

fn cmd(s: &mut Tls, args: &[&str]) -> String {
    send(s, args).unwrap();
    reply(s).unwrap()
}

#[test]
fn client_auth_yes_optional_no() {
    let pki = make_pki("auth");
    let with = client_config(&pki, true, &[]);
    let without = client_config(&pki, false, &[]);

    // Default `tls-auth-clients yes`: no certificate, no connection.
    let (server, port) = start_tls(&pki, &[]);
    let mut c = connect(port, &with).unwrap();
    assert_eq!(cmd(&mut c, &["SET", "k", "v"]), "+OK");
    assert_eq!(cmd(&mut c, &["GET", "k"]), "$v");
    assert!(connect(port, &without).is_err());
    // The plain port is still there, and sees the same data.
    let mut plain = server.conn();
    assert_eq!(plain.cmd(&["GET", "k"]), b"$1\r\nv\r\n");
    // A failed handshake closed only its own connection.
    assert_eq!(cmd(&mut c, &["GET", "k"]), "$v");
    drop(server);

    let (server, port) = start_tls(&pki, &["--tls-auth-clients", "optional"]);
    assert!(connect(port, &with).is_ok());
    assert!(connect(port, &without).is_ok());
    drop(server);

    let (_server, port) = start_tls(&pki, &["--tls-auth-clients", "no"]);
    assert!(connect(port, &without).is_ok());
    // No certificate is asked for; rustls then sends none.
    assert!(connect(port, &with).is_ok());
}

#[test]
fn protocols_limit_versions() {
    let pki = make_pki("proto");
    let v12 = client_config(&pki, true, &[&rustls::version::TLS12]);
    let v13 = client_config(&pki, true, &[&rustls::version::TLS13]);
    let (server, port) = start_tls(&pki, &["--tls-protocols", "TLSv1.2"]);
    assert!(connect(port, &v12).is_ok());
    assert!(connect(port, &v13).is_err());
    let mut plain = server.conn();
    assert_eq!(
        plain.cmd(&["CONFIG", "SET", "tls-protocols", "TLSv1.3"]),
        b"+OK\r\n"
    );
    assert!(connect(port, &v13).is_ok());
    assert!(connect(port, &v12).is_err());
    let e = String::from_utf8(plain.cmd(&["CONFIG", "SET", "tls-protocols", "TLSv1.1"])).unwrap();
    assert!(e.contains("TLSv1.1 is not supported"), "{e}");
    let e = String::from_utf8(plain.cmd(&["CONFIG", "SET", "tls-ciphers", "AES128-SHA"])).unwrap();
    assert!(e.contains("unsupported TLS 1.2 cipher 'AES128-SHA'"), "{e}");
    assert_eq!(
        plain.cmd(&["CONFIG", "GET", "tls-protocols"]),
        b"*2\r\n$13\r\ntls-protocols\r\n$7\r\nTLSv1.3\r\n"
    );
    // A TLS 1.2 cipher list naming one suite: only a client offering it
    // gets in over TLS 1.2.
    assert_eq!(
        plain.cmd(&[
            "CONFIG",
            "SET",
            "tls-protocols",
            "TLSv1.2",
            "tls-ciphers",
            "ECDHE-ECDSA-CHACHA20-POLY1305"
        ]),
        b"+OK\r\n"
    );
    let c = connect(port, &v12).unwrap();
    let suite = c.get_ref().conn.negotiated_cipher_suite().unwrap();
    assert_eq!(
        suite.suite(),
        rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
    );
}

#[test]
fn old_protocols_refused_at_startup() {
    let pki = make_pki("old");
    let text = start_fails(&[
        "--tls-port",
        &free_port().to_string(),
        "--tls-cert-file",
        &pki.p("server.pem"),
        "--tls-key-file",
        &pki.p("server.key"),
        "--tls-ca-cert-file",
        &pki.p("ca.pem"),
        "--tls-protocols",
        "TLSv1.1",
    ]);
    assert!(text.contains("TLSv1.1 is not supported"), "{text}");
    // Without a key file there is no TLS port, and it says why.
    let text = start_fails(&["--tls-port", &free_port().to_string()]);
    assert!(text.contains("No tls-cert-file configured"), "{text}");
}

/// Starts cairn expecting it to refuse to start; returns what it printed.
fn start_fails(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["--port", "0", "--bind", "127.0.0.1"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success(), "cairn {args:?} started");
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

#[test]
fn encrypted_keys() {
    let pki = make_pki("enc");
    let tls_port = free_port().to_string();
    let enc = pki.p("server.enc.key");
    let Ok(st) = Command::new("openssl")
        .args([
            "pkcs8",
            "-topk8",
            "-v2",
            "aes-256-cbc",
            "-in",
            &pki.p("server.key"),
        ])
        .args(["-out", &enc, "-passout", "pass:s3cret"])
        .status()
    else {
        eprintln!("openssl not installed; skipping");
        return;
    };
    assert!(st.success());
    let base = |key: &str, pass: Option<&str>| {
        let mut a = vec![
            "--tls-port".to_string(),
            tls_port.clone(),
            "--tls-cert-file".into(),
            pki.p("server.pem"),
            "--tls-key-file".into(),
            key.to_string(),
            "--tls-ca-cert-file".into(),
            pki.p("ca.pem"),
        ];
        if let Some(p) = pass {
            a.extend(["--tls-key-file-pass".to_string(), p.to_string()]);
        }
        a
    };
    let no_pass = base(&enc, None);
    let text = start_fails(&no_pass.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(text.contains("tls-key-file-pass is not set"), "{text}");
    let wrong = base(&enc, Some("nope"));
    let text = start_fails(&wrong.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(text.contains("cannot decrypt"), "{text}");
    // OpenSSL's legacy encrypted PEM: refused with the conversion to use.
    let legacy = pki.p("server.legacy.key");
    let st = Command::new("openssl")
        .args([
            "ec",
            "-aes256",
            "-in",
            &pki.p("server.key"),
            "-out",
            &legacy,
        ])
        .args(["-passout", "pass:s3cret"])
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    let legacy_args = base(&legacy, Some("s3cret"));
    let text = start_fails(&legacy_args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(text.contains("openssl pkcs8 -topk8"), "{text}");

    let good = base(&enc, Some("s3cret"));
    let _server = support::start_cairn(&good.iter().map(String::as_str).collect::<Vec<_>>());
    let mut c = connect(tls_port.parse().unwrap(), &client_config(&pki, true, &[])).unwrap();
    assert_eq!(cmd(&mut c, &["ECHO", "x"]), "$x");
}

#[test]
fn config_set_reloads_certificates() {
    let old = make_pki("old-ca");
    let new = make_pki("new-ca");
    let (server, port) = start_tls(&old, &[]);
    let old_client = client_config(&old, true, &[]);
    let new_client = client_config(&new, true, &[]);
    let mut kept = connect(port, &old_client).unwrap();
    assert!(connect(port, &new_client).is_err());

    let mut plain = server.conn();
    // A file that cannot be read: an error, and the old context stays.
    let r =
        String::from_utf8(plain.cmd(&["CONFIG", "SET", "tls-cert-file", "/nonexistent/cert.pem"]))
            .unwrap();
    assert_eq!(
        r,
        "-ERR CONFIG SET failed (possibly related to argument 'tls-cert-file') - Unable to update TLS configuration. Check server logs.\r\n"
    );
    assert!(server.log().contains("/nonexistent/cert.pem"));
    assert!(connect(port, &old_client).is_ok());
    assert_eq!(
        plain.cmd(&["CONFIG", "GET", "tls-cert-file"]),
        format!(
            "*2\r\n$13\r\ntls-cert-file\r\n${}\r\n{}\r\n",
            old.p("server.pem").len(),
            old.p("server.pem")
        )
        .into_bytes()
    );

    let (cert, key, ca) = (new.p("server.pem"), new.p("server.key"), new.p("ca.pem"));
    let r = plain.cmd(&[
        "CONFIG",
        "SET",
        "tls-cert-file",
        &cert,
        "tls-key-file",
        &key,
        "tls-ca-cert-file",
        &ca,
    ]);
    assert_eq!(r, b"+OK\r\n");
    let mut c = connect(port, &new_client).unwrap();
    assert_eq!(cmd(&mut c, &["SET", "a", "1"]), "+OK");
    assert!(connect(port, &old_client).is_err());
    // A connection made before the reload goes on with its session.
    assert_eq!(cmd(&mut kept, &["GET", "a"]), "$1");
}

#[test]
fn plaintext_on_tls_port_is_refused() {
    let pki = make_pki("plain");
    let (server, port) = start_tls(&pki, &[]);
    let cfg = client_config(&pki, true, &[]);
    let mut good = connect(port, &cfg).unwrap();
    let mut raw = TcpStream::connect(("127.0.0.1", port)).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    raw.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
    // Answered with a TLS alert record (content type 21) at most, then closed.
    let mut got = Vec::new();
    let _ = raw.read_to_end(&mut got);
    assert!(got.is_empty() || got[0] == 21, "{got:?}");
    assert_eq!(cmd(&mut good, &["PING"]), "+PONG");
    assert_eq!(server.conn().cmd(&["PING"]), b"+PONG\r\n");
}

#[test]
fn stalled_handshake_does_not_stall_others() {
    let pki = make_pki("stall");
    // One worker: the stalled client and the others share it.
    let (_server, port) = start_tls(&pki, &["--server-threads", "1", "--timeout", "2"]);
    let cfg = client_config(&pki, true, &[]);
    // A TLS record header announcing a ClientHello that never comes.
    let mut stalled = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stalled.write_all(&[22, 3, 1, 0x02, 0x00, 1, 0, 1]).unwrap();
    let mut silent = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let t = Instant::now();
    for _ in 0..20 {
        let mut c = connect(port, &cfg).unwrap();
        assert_eq!(cmd(&mut c, &["PING"]), "+PONG");
    }
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    // Both count against `timeout` as any idle client does.
    silent
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stalled
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut buf = [0u8; 64];
    assert_eq!(silent.read(&mut buf).unwrap_or(0), 0);
    assert_eq!(stalled.read(&mut buf).unwrap_or(0), 0);
}

#[test]
fn large_value_and_pipeline() {
    let pki = make_pki("large");
    let (_server, port) = start_tls(&pki, &[]);
    let cfg = client_config(&pki, true, &[]);
    let mut c = connect(port, &cfg).unwrap();
    c.get_ref()
        .sock
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    c.get_ref()
        .sock
        .set_write_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let n = 100 * 1024 * 1024;
    let value: Vec<u8> = (0..n).map(|i| b'a' + (i % 26) as u8).collect();
    let mut req = format!("*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n${n}\r\n").into_bytes();
    req.extend_from_slice(&value);
    req.extend_from_slice(b"\r\n");
    c.get_mut().write_all(&req).unwrap();
    drop(req);
    assert_eq!(reply(&mut c).unwrap(), "+OK");
    send(&mut c, &["GET", "big"]).unwrap();
    let mut line = String::new();
    c.read_line(&mut line).unwrap();
    assert_eq!(line, format!("${n}\r\n"));
    let mut got = vec![0u8; n + 2];
    c.read_exact(&mut got).unwrap();
    assert!(got[..n] == value[..], "the value came back changed");
    assert_eq!(&got[n..], b"\r\n");

    // 10,000 requests in one write; replies in order.
    let mut batch = Vec::new();
    for i in 0..10_000 {
        let (k, v) = (format!("k{i}"), format!("v{i}"));
        batch.extend_from_slice(
            format!(
                "*3\r\n$3\r\nSET\r\n${}\r\n{k}\r\n${}\r\n{v}\r\n",
                k.len(),
                v.len()
            )
            .as_bytes(),
        );
        batch.extend_from_slice(format!("*2\r\n$3\r\nGET\r\n${}\r\n{k}\r\n", k.len()).as_bytes());
    }
    c.get_mut().write_all(&batch).unwrap();
    for i in 0..10_000 {
        assert_eq!(reply(&mut c).unwrap(), "+OK");
        assert_eq!(reply(&mut c).unwrap(), format!("$v{i}"));
    }
}

#[test]
fn memcached_port_over_tls() {
    let pki = make_pki("mc");
    let mc_port = free_port().to_string();
    let (_server, _) = start_tls(
        &pki,
        &["--memcached-port", &mc_port, "--memcached-tls", "yes"],
    );
    let cfg = client_config(&pki, true, &[]);
    let sock = TcpStream::connect(("127.0.0.1", mc_port.parse::<u16>().unwrap())).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let conn = ClientConnection::new(cfg, ServerName::try_from("localhost").unwrap()).unwrap();
    let mut s = BufReader::new(StreamOwned::new(conn, sock));
    s.get_mut()
        .write_all(b"set k 5 0 3\r\nabc\r\nget k\r\n")
        .unwrap();
    let mut text = String::new();
    while !text.ends_with("END\r\n") {
        let mut line = String::new();
        assert!(s.read_line(&mut line).unwrap() > 0, "closed after {text:?}");
        text.push_str(&line);
    }
    assert_eq!(text, "STORED\r\nVALUE k 5 3\r\nabc\r\nEND\r\n");
    // Plaintext memcached on that port gets nothing but a TLS alert.
    let mut raw = TcpStream::connect(("127.0.0.1", mc_port.parse::<u16>().unwrap())).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    raw.write_all(b"version\r\n").unwrap();
    let mut got = Vec::new();
    let _ = raw.read_to_end(&mut got);
    assert!(got.is_empty() || got[0] == 21, "{got:?}");
}

fn tool(name: &str) -> bool {
    let found = Command::new(name)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    if !found {
        assert!(std::env::var_os("CI").is_none(), "{name} is not installed");
        eprintln!("{name} is not installed; skipping");
    }
    found
}

#[test]
fn redis_cli_and_redis_benchmark() {
    if !tool("redis-cli") || !tool("redis-benchmark") {
        return;
    }
    let pki = make_pki("cli");
    let (_server, port) = start_tls(&pki, &[]);
    let tls_args = |cmd: &mut Command| {
        cmd.args(["--tls", "--cacert", &pki.p("ca.pem")])
            .args([
                "--cert",
                &pki.p("client.pem"),
                "--key",
                &pki.p("client.key"),
            ])
            .args(["-h", "127.0.0.1", "-p", &port.to_string()]);
    };
    let mut cli = Command::new("redis-cli");
    tls_args(&mut cli);
    let out = cli.args(["SET", "greeting", "hello"]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "OK\n", "{out:?}");
    let mut cli = Command::new("redis-cli");
    tls_args(&mut cli);
    let out = cli.args(["GET", "greeting"]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hello\n");

    let mut bench = Command::new("redis-benchmark");
    tls_args(&mut bench);
    let out = bench
        .args(["-c", "10", "-n", "2000", "-t", "set,get", "-P", "4", "-q"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{out:?}");
    assert!(text.contains("SET:") && text.contains("GET:"), "{text}");
    assert!(!text.to_lowercase().contains("error"), "{text}");
}

#[test]
fn redis_py_with_client_certificate() {
    let venv = std::env::var_os("CAIRN_CLIENTS_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/clients-venv"));
    let py = venv.join("bin/python");
    let ok = Command::new(&py)
        .args(["-c", "import redis"])
        .stdin(Stdio::null())
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "redis-py venv missing at {}",
            venv.display()
        );
        eprintln!("redis-py venv missing at {}; skipping", venv.display());
        return;
    }
    let pki = make_pki("py");
    let (_server, port) = start_tls(&pki, &[]);
    let script = format!(
        r#"
import redis
r = redis.Redis(host="localhost", port={port}, ssl=True, ssl_ca_certs="{ca}",
                ssl_certfile="{cert}", ssl_keyfile="{key}")
assert r.set("k", "v")
assert r.get("k") == b"v"
p = r.pipeline(transaction=True)
for i in range(100):
    p.incr("n")
assert p.execute()[-1] == 100
print("ok")
"#,
        ca = pki.p("ca.pem"),
        cert = pki.p("client.pem"),
        key = pki.p("client.key"),
    );
    let out = Command::new(&py).args(["-c", &script]).output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "ok\n",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `host:port` of every listening TCP socket of process `pid` (from
/// /proc: its socket inodes, looked up in /proc/net/tcp and tcp6).
fn listening_ports(pid: u32) -> Vec<u16> {
    let mut inodes = Vec::new();
    for fd in std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
    {
        if let Ok(target) = std::fs::read_link(fd.path()) {
            let t = target.to_string_lossy().into_owned();
            if let Some(n) = t.strip_prefix("socket:[").and_then(|r| r.strip_suffix(']')) {
                inodes.push(n.to_string());
            }
        }
    }
    let mut ports = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = std::fs::read_to_string(table).unwrap_or_default();
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            // local_address is HEXIP:HEXPORT; state 0A is LISTEN.
            if f.len() > 9 && f[3] == "0A" && inodes.iter().any(|i| i == f[9]) {
                let port = f[1].rsplit(':').next().unwrap();
                ports.push(u16::from_str_radix(port, 16).unwrap());
            }
        }
    }
    ports
}

#[test]
fn port_zero_beside_a_tls_port_means_tls_only() {
    // Redis's `port 0`: no plain TCP listener. The server listens on its
    // TLS port alone, serves TLS clients there, and INFO says tcp_port:0.
    let pki = make_pki("only");
    let tls_port = free_port();
    let p = tls_port.to_string();
    let (cert, key, ca) = (pki.p("server.pem"), pki.p("server.key"), pki.p("ca.pem"));
    // The harness passes `--port 0`.
    let server = support::start_cairn(&[
        "--tls-port",
        &p,
        "--tls-cert-file",
        &cert,
        "--tls-key-file",
        &key,
        "--tls-ca-cert-file",
        &ca,
    ]);
    assert_eq!(server.port, tls_port, "the only ready line is the TLS one");
    assert!(!server.log().contains("Ready to accept connections tcp"));
    assert_eq!(listening_ports(server.pid()), vec![tls_port]);
    let mut c = connect(tls_port, &client_config(&pki, true, &[])).unwrap();
    let info = cmd(&mut c, &["INFO", "server"]);
    assert!(info.contains("\r\ntcp_port:0\r\n"), "{info}");
    if tool("redis-cli") {
        let out = Command::new("redis-cli")
            .args(["--tls", "--cacert", &ca])
            .args([
                "--cert",
                &pki.p("client.pem"),
                "--key",
                &pki.p("client.key"),
            ])
            .args(["-h", "127.0.0.1", "-p", &p, "PING"])
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "PONG\n", "{out:?}");
    }
    // Without a TLS port, `--port 0` stays an ephemeral plain port (every
    // other test's harness relies on it).
    let plain = support::start_cairn(&[]);
    assert_ne!(plain.port, 0);
    assert_eq!(listening_ports(plain.pid()), vec![plain.port]);
}

#[test]
fn maxclients_on_the_tls_port_closes_before_the_handshake() {
    // Redis 7.0 refuses in acceptCommonHandler, before any handshake
    // ("for TLS connections, no handshake was done yet so nothing is
    // written and the connection will just drop"), and so does Cairn.
    let pki = make_pki("max");
    let (server, port) = start_tls(&pki, &["--maxclients", "1"]);
    let cfg = client_config(&pki, true, &[]);
    let mut first = connect(port, &cfg).unwrap();
    assert_eq!(cmd(&mut first, &["PING"]), "+PONG");
    let refused = connect(port, &cfg).map(|_| ());
    assert!(refused.is_err(), "a client past maxclients was served");
    // Plain clients past the limit are told why.
    let mut plain = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    plain
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut got = Vec::new();
    let _ = plain.read_to_end(&mut got);
    assert_eq!(got, b"-ERR max number of clients reached\r\n");
    assert_eq!(cmd(&mut first, &["PING"]), "+PONG");
    let stats = cmd(&mut first, &["INFO", "stats"]);
    assert!(stats.contains("\r\nrejected_connections:2\r\n"), "{stats}");
}

#[test]
fn protected_mode_answers_over_tls_after_the_handshake() {
    // Redis 7.0 checks protected mode once the handshake is done
    // (clientAcceptHandler) and writes -DENIED over TLS. In a private
    // network namespace, so that a non-loopback address exists; the
    // server listens on TLS only (`port 0`).
    if !tool("redis-cli") {
        return;
    }
    let pki = make_pki("denied");
    let tls = format!(
        "--tls --cacert {} --cert {} --key {}",
        pki.p("ca.pem"),
        pki.p("client.pem"),
        pki.p("client.key")
    );
    let script = format!(
        r#"
"$CAIRN" --port 0 --tls-port 6391 --bind "10.77.0.1 127.0.0.1" --save '' \
  --tls-cert-file {cert} --tls-key-file {key} --tls-ca-cert-file {ca} >/dev/null 2>&1 &
pid=$!
trap 'kill $pid' EXIT
for i in $(seq 100); do redis-cli {tls} -p 6391 ping >/dev/null 2>&1 && break; sleep 0.1; done
echo "remote: $(redis-cli {tls} -h 10.77.0.1 -p 6391 ping 2>&1)"
echo "local: $(redis-cli {tls} -h 127.0.0.1 -p 6391 ping 2>&1)"
echo "plain: $(redis-cli -h 127.0.0.1 -p 6379 ping 2>&1)"
echo "listening: $(ss -Hltn | awk '{{print $4}}' | sort | tr '\n' ' ')"
"#,
        cert = pki.p("server.pem"),
        key = pki.p("server.key"),
        ca = pki.p("ca.pem"),
    );
    let out = Command::new("timeout")
        .args(["60", "unshare", "-n", "sh", "-c"])
        .arg(format!(
            "ip link set lo up && ip addr add 10.77.0.1/32 dev lo || exit 90\n{script}"
        ))
        .env("CAIRN", env!("CARGO_BIN_EXE_cairn"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "namespace script failed ({}): {text}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let line = |name: &str| -> String {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}: ")))
            .unwrap_or_else(|| panic!("no {name} in {text}"))
            .to_string()
    };
    let remote = line("remote");
    assert!(
        remote.starts_with("DENIED Redis is running in protected mode"),
        "{remote}"
    );
    assert_eq!(line("local"), "PONG");
    // No plain listener: nothing but the TLS port listens.
    assert!(line("plain").contains("Connection refused"), "{text}");
    assert_eq!(line("listening"), "10.77.0.1:6391 127.0.0.1:6391 ");
}

/// SCRIPT DEBUG YES over TLS (branch ldbyes): the session's thread takes
/// the TLS connection whole; its write is not seen by another client, and
/// the connection ends after the reply.
#[test]
fn script_debug_yes_session_over_tls() {
    let pki = make_pki("ldb");
    let (_server, port) = start_tls(&pki, &[]);
    let cfg = client_config(&pki, true, &[]);
    let mut c = connect(port, &cfg).unwrap();
    let mut o = connect(port, &cfg).unwrap();
    assert_eq!(cmd(&mut c, &["SCRIPT", "DEBUG", "YES"]), "+OK");
    let script = "redis.call('set','tk','1')\nreturn redis.call('get','tk')";
    assert_eq!(
        cmd(&mut c, &["EVAL", script, "0"]),
        "[+* Stopped at 1, stop reason = step over,+-> 1   redis.call('set','tk','1')]"
    );
    assert_eq!(cmd(&mut o, &["SET", "tk", "real"]), "+OK");
    assert!(cmd(&mut c, &["s"]).contains("<redis> set tk 1"));
    assert_eq!(cmd(&mut o, &["GET", "tk"]), "$real");
    send(&mut c, &["c"]).unwrap();
    assert_eq!(reply(&mut c).unwrap(), "[+<endsession>]");
    assert_eq!(reply(&mut c).unwrap(), "$1");
    assert!(reply(&mut c).is_err());
    assert_eq!(cmd(&mut o, &["GET", "tk"]), "$real");
}
