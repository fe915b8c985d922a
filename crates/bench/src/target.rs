//! Targets (`--target NAME=URL`) and connections to them.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::time::Duration;

use crate::memcache::McConn;
use crate::resp::RespConn;
use crate::wire::{OpError, TlsClient};

/// The wire protocol a target speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    Redis,
    Memcached,
}

/// A server to measure.
#[derive(Debug, Clone)]
pub struct Target {
    pub name: String,
    pub url: String,
    pub protocol: Protocol,
    pub host: String,
    pub port: u16,
    pub addr: SocketAddr,
    /// RESP only: `AUTH` with these (user may be empty), then `SELECT db`.
    pub user: Option<String>,
    pub password: Option<String>,
    pub db: Option<u32>,
    /// `rediss://`: speak TLS (the client context is set by `with_tls`).
    pub tls: Option<TlsClient>,
    /// Asked for by the URL's scheme; `tls` is filled in from the flags.
    pub wants_tls: bool,
    /// The server's process on this machine, for CPU and RSS figures.
    pub pid: Option<u32>,
    /// How `pid` was found: "flag" (`--pid`) or "port".
    pub pid_source: Option<&'static str>,
}

/// Parses `NAME=URL` where URL is `redis://[[user]:password@]host[:port][/db]`,
/// the same with `rediss://` (TLS), or `memcached://host[:port]`.
pub fn parse_target(spec: &str) -> Result<Target, String> {
    let (name, url) = spec
        .split_once('=')
        .ok_or_else(|| format!("--target {spec:?}: expected NAME=URL"))?;
    let name = name.trim();
    if name.is_empty() || name.contains(char::is_whitespace) {
        return Err(format!(
            "--target {spec:?}: NAME must be non-empty, without spaces"
        ));
    }
    let (scheme, rest) = url.split_once("://").ok_or_else(|| {
        format!("--target {spec:?}: URL must start with redis:// or memcached://")
    })?;
    let (protocol, default_port) = match scheme {
        "redis" | "rediss" => (Protocol::Redis, 6379),
        "memcached" | "memcache" => (Protocol::Memcached, 11211),
        "mongodb" => {
            return Err(format!(
                "--target {spec:?}: mongodb:// is not supported yet"
            ))
        }
        _ => return Err(format!("--target {spec:?}: unknown scheme {scheme:?}")),
    };
    let (auth, hostpart) = match rest.rsplit_once('@') {
        Some((a, h)) => (Some(a), h),
        None => (None, rest),
    };
    let (hostport, path) = match hostpart.split_once('/') {
        Some((h, p)) => (h, p),
        None => (hostpart, ""),
    };
    let (host, port) =
        split_host_port(hostport, default_port).map_err(|e| format!("--target {spec:?}: {e}"))?;
    let db = if path.is_empty() {
        None
    } else if protocol == Protocol::Redis {
        Some(
            path.parse::<u32>()
                .map_err(|_| format!("--target {spec:?}: database {path:?} is not a number"))?,
        )
    } else {
        return Err(format!("--target {spec:?}: memcached URLs take no path"));
    };
    let (user, password) = match auth {
        None => (None, None),
        Some(_) if protocol == Protocol::Memcached => {
            return Err(format!(
                "--target {spec:?}: memcached text protocol has no authentication"
            ))
        }
        Some(a) => match a.split_once(':') {
            Some((u, p)) => ((!u.is_empty()).then(|| u.to_string()), Some(p.to_string())),
            None => (None, Some(a.to_string())),
        },
    };
    let addr = (host.as_str(), port)
        .to_socket_addrs()
        .map_err(|e| format!("--target {spec:?}: cannot resolve {host}: {e}"))?
        .next()
        .ok_or_else(|| format!("--target {spec:?}: {host} has no address"))?;
    Ok(Target {
        name: name.to_string(),
        url: url.to_string(),
        protocol,
        host,
        port,
        addr,
        user,
        password,
        db,
        tls: None,
        wants_tls: scheme == "rediss",
        pid: None,
        pid_source: None,
    })
}

/// A TLS client context trusting `cacert` (PEM), presenting `cert`/`key`
/// if given (servers with `tls-auth-clients yes` need one), without
/// session resumption.
pub fn tls_client(
    cacert: &std::path::Path,
    cert: Option<&std::path::Path>,
    key: Option<&std::path::Path>,
) -> Result<std::sync::Arc<rustls::ClientConfig>, String> {
    let read = |p: &std::path::Path| std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()));
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls_pemfile::certs(&mut read(cacert)?.as_slice()) {
        let c = c.map_err(|e| format!("{}: {e}", cacert.display()))?;
        roots
            .add(c)
            .map_err(|e| format!("{}: {e}", cacert.display()))?;
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let b = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots);
    let mut config = match (cert, key) {
        (Some(c), Some(k)) => {
            let chain = rustls_pemfile::certs(&mut read(c)?.as_slice())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("{}: {e}", c.display()))?;
            let key = rustls_pemfile::private_key(&mut read(k)?.as_slice())
                .map_err(|e| format!("{}: {e}", k.display()))?
                .ok_or_else(|| format!("{}: no private key", k.display()))?;
            b.with_client_auth_cert(chain, key)
                .map_err(|e| format!("--cert/--key: {e}"))?
        }
        (None, None) => b.with_no_client_auth(),
        _ => return Err("--cert and --key go together".into()),
    };
    // Every connection makes a full handshake, so `conn-rate` measures
    // what a new client costs, not a resumption.
    config.resumption = rustls::client::Resumption::disabled();
    Ok(std::sync::Arc::new(config))
}

fn split_host_port(s: &str, default_port: u16) -> Result<(String, u16), String> {
    if let Some(rest) = s.strip_prefix('[') {
        // [v6]:port
        let (h, after) = rest.split_once(']').ok_or("unterminated [ in host")?;
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse().map_err(|_| format!("bad port {p:?}"))?,
            None if after.is_empty() => default_port,
            None => return Err(format!("unexpected {after:?} after host")),
        };
        return Ok((h.to_string(), port));
    }
    match s.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') => {
            let port = p.parse().map_err(|_| format!("bad port {p:?}"))?;
            Ok((
                if h.is_empty() {
                    "127.0.0.1".into()
                } else {
                    h.to_string()
                },
                port,
            ))
        }
        _ if s.is_empty() => Ok(("127.0.0.1".into(), default_port)),
        _ => Ok((s.to_string(), default_port)),
    }
}

impl Target {
    /// Gives a `rediss://` target its TLS context; the certificate must
    /// name the URL's host.
    pub fn with_tls(
        &mut self,
        config: &std::sync::Arc<rustls::ClientConfig>,
    ) -> Result<(), String> {
        let name = rustls::pki_types::ServerName::try_from(self.host.clone())
            .map_err(|e| format!("{}: {e}", self.host))?;
        self.tls = Some(TlsClient {
            config: config.clone(),
            server_name: name,
        });
        Ok(())
    }

    /// True when the target's address is on this machine.
    pub fn is_local(&self) -> bool {
        crate::sys::is_local_ip(self.addr.ip())
    }

    pub fn ip(&self) -> IpAddr {
        self.addr.ip()
    }
}

/// A connection to a target.
pub enum Conn {
    Resp(RespConn),
    Mc(McConn),
}

impl Conn {
    /// Connects (and for RESP authenticates and selects the database).
    pub fn open(t: &Target, timeout: Duration) -> Result<Conn, OpError> {
        match t.protocol {
            Protocol::Redis => {
                let mut c = RespConn::connect(&t.addr, timeout, t.tls.as_ref())?;
                if let Some(p) = &t.password {
                    match &t.user {
                        Some(u) => c.cmd(&[b"AUTH", u.as_bytes(), p.as_bytes()]),
                        None => c.cmd(&[b"AUTH", p.as_bytes()]),
                    }
                    c.send()?;
                    c.read_ok()?;
                }
                if let Some(db) = t.db {
                    c.cmd(&[b"SELECT", db.to_string().as_bytes()]);
                    c.send()?;
                    c.read_ok()?;
                }
                Ok(Conn::Resp(c))
            }
            Protocol::Memcached => Ok(Conn::Mc(McConn::connect(&t.addr, timeout)?)),
        }
    }

    /// Removes every key (FLUSHALL / flush_all).
    pub fn flush_all(&mut self) -> Result<(), OpError> {
        match self {
            Conn::Resp(c) => {
                c.cmd(&[b"FLUSHALL"]);
                c.send()?;
                c.read_ok()
            }
            Conn::Mc(c) => {
                let r = c.simple(b"flush_all")?;
                if r == "OK" {
                    Ok(())
                } else {
                    Err(OpError::Protocol(format!("flush_all answered {r:?}")))
                }
            }
        }
    }

    /// The server's version: `redis_version` from INFO server, or
    /// memcached's `version`.
    pub fn server_version(&mut self) -> Result<String, OpError> {
        match self {
            Conn::Resp(_) => {
                let info = self.info("server")?;
                Ok(info_field(&info, "redis_version")
                    .map(|v| format!("redis {v}"))
                    .unwrap_or_else(|| "unknown RESP server".into()))
            }
            Conn::Mc(c) => {
                let v = c.simple(b"version")?;
                Ok(v.strip_prefix("VERSION ")
                    .map(|v| format!("memcached {v}"))
                    .unwrap_or(v))
            }
        }
    }

    /// RESP `INFO <section>` as text.
    pub fn info(&mut self, section: &str) -> Result<String, OpError> {
        match self {
            Conn::Resp(c) => {
                c.cmd(&[b"INFO", section.as_bytes()]);
                c.send()?;
                let mut v = Vec::new();
                c.read_bulk_into(&mut v)?;
                Ok(String::from_utf8_lossy(&v).into_owned())
            }
            Conn::Mc(_) => Err(OpError::Protocol("INFO on a memcached target".into())),
        }
    }

    /// RESP `DBSIZE`.
    pub fn dbsize(&mut self) -> Result<u64, OpError> {
        match self {
            Conn::Resp(c) => {
                c.cmd(&[b"DBSIZE"]);
                c.send()?;
                Ok(c.read_int()?.max(0) as u64)
            }
            Conn::Mc(c) => Ok(stat_u64(&c.stats()?, "curr_items").unwrap_or(0)),
        }
    }

    /// Deletes keys (best effort, used to clean up between steps).
    pub fn delete(&mut self, keys: &[&[u8]]) -> Result<(), OpError> {
        match self {
            Conn::Resp(c) => {
                for chunk in keys.chunks(512) {
                    c.arr(chunk.len() + 1);
                    c.bulk(b"DEL");
                    for k in chunk {
                        c.bulk(k);
                    }
                    c.send()?;
                    c.read_int()?;
                }
                Ok(())
            }
            Conn::Mc(c) => {
                for k in keys {
                    c.delete(k)?;
                }
                Ok(())
            }
        }
    }
}

/// A field of an INFO reply (`name:value` lines).
pub fn info_field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k == name).then(|| v.trim())
    })
}

/// A numeric memcached stat.
pub fn stat_u64(stats: &[(String, String)], name: &str) -> Option<u64> {
    stats
        .iter()
        .find(|(k, _)| k == name)
        .and_then(|(_, v)| v.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_targets() {
        let t = parse_target("cairn=redis://127.0.0.1:6380").unwrap();
        assert_eq!(
            (t.name.as_str(), t.protocol, t.port),
            ("cairn", Protocol::Redis, 6380)
        );
        let t = parse_target("r=redis://:secret@localhost/2").unwrap();
        assert_eq!(t.password.as_deref(), Some("secret"));
        assert_eq!(t.user, None);
        assert_eq!(t.db, Some(2));
        assert_eq!(t.port, 6379);
        let t = parse_target("m=memcached://127.0.0.1").unwrap();
        assert_eq!((t.protocol, t.port), (Protocol::Memcached, 11211));
        let t = parse_target("v6=redis://[::1]:7000").unwrap();
        assert_eq!((t.host.as_str(), t.port), ("::1", 7000));
        assert!(parse_target("noequals").is_err());
        assert!(parse_target("x=http://h:1").is_err());
        let t = parse_target("s=rediss://127.0.0.1:6380").unwrap();
        assert!(t.wants_tls && t.tls.is_none() && t.protocol == Protocol::Redis);
        assert!(parse_target("x=redis://h:notaport").is_err());
        assert!(parse_target("=redis://h:1").is_err());
        assert!(parse_target("m=memcached://u:p@h:1").is_err());
    }

    #[test]
    fn info_fields() {
        let info = "# Memory\r\nused_memory:1234\r\nused_memory_human:1.2K\r\n";
        assert_eq!(info_field(info, "used_memory"), Some("1234"));
        assert_eq!(info_field(info, "nope"), None);
    }
}
