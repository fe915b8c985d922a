//! Accepting connections: one thread per bound address, blocking in
//! `accept`, handing each socket to an active worker round-robin with the
//! front end (protocol) of its port. It enforces `maxclients` and protected
//! mode before a worker ever sees the socket; the front end words the
//! refusal (Redis's error, memcached's).
use crate::log;
use crate::net::session::{FrontEnd, Refusal};
use crate::shared::{Msg, Shared};
use std::io::Write;
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Binds every address in `bind` on `port` (0: an ephemeral port, the same
/// one for every address). An address prefixed with `-` may fail to bind,
/// as in Redis.
pub fn bind_all(bind: &[String], port: u16, backlog: i32) -> Result<Vec<TcpListener>, String> {
    let mut out = Vec::new();
    let mut port = port;
    for spec in bind {
        let (optional, host) = match spec.strip_prefix('-') {
            Some(h) => (true, h),
            None => (false, spec.as_str()),
        };
        let host = if host == "*" { "0.0.0.0" } else { host };
        let ip: std::net::IpAddr = match host.parse() {
            Ok(ip) => ip,
            Err(_) if optional => continue,
            Err(_) => return Err(format!("Invalid bind address '{host}'")),
        };
        match bind_one(SocketAddr::new(ip, port), backlog) {
            Ok(l) => {
                if port == 0 {
                    port = l.local_addr().map(|a| a.port()).unwrap_or(0);
                }
                out.push(l);
            }
            Err(e) if optional => log::notice(&format!("Skipping optional bind {spec}: {e}")),
            Err(e) => {
                return Err(format!(
                    "Failed listening on port {port} (tcp) addr={host}: {e}"
                ))
            }
        }
    }
    if out.is_empty() {
        return Err("No address to listen on".into());
    }
    Ok(out)
}

fn bind_one(addr: SocketAddr, backlog: i32) -> std::io::Result<TcpListener> {
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    s.set_reuse_address(true)?;
    if addr.is_ipv6() {
        s.set_only_v6(true)?;
    }
    s.bind(&addr.into())?;
    s.listen(backlog)?;
    Ok(s.into())
}

/// Accepts forever on `l`, spreading connections over the workers; each
/// gets a session of `front`'s protocol, over TLS with the current context
/// (`Shared::tls`, which CONFIG SET may replace) if `tls`.
pub fn accept_loop(l: TcpListener, shared: Arc<Shared>, front: &'static FrontEnd, tls: bool) {
    let mut next = 0usize;
    let mut last_warning: Option<std::time::Instant> = None;
    loop {
        crate::memory::register_thread();
        let (mut stream, addr) = match l.accept() {
            Ok(x) => x,
            Err(e) => {
                // EMFILE and friends: back off briefly instead of spinning,
                // and say so once a second at most, not at every retry.
                if last_warning.is_none_or(|t| t.elapsed() >= std::time::Duration::from_secs(1)) {
                    log::warning(&format!("Accepting client connection: {e}"));
                    last_warning = Some(std::time::Instant::now());
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
                continue;
            }
        };
        shared.total_connections.fetch_add(1, Ordering::Relaxed);
        let tls_config = if tls {
            match shared.tls.get() {
                Some(c) => Some(c),
                // Not reachable: a TLS port is bound only with a context.
                None => continue,
            }
        } else {
            None
        };
        let max = shared.hot.maxclients.load(Ordering::Relaxed);
        if shared.connected.fetch_add(1, Ordering::Relaxed) >= max {
            shared.connected.fetch_sub(1, Ordering::Relaxed);
            shared.rejected_connections.fetch_add(1, Ordering::Relaxed);
            // Redis 7.0 (`acceptCommonHandler`) refuses before any
            // handshake, so a TLS client is closed unanswered: no TLS
            // work is done for a client beyond `maxclients`, and there is
            // no way to word a refusal without that work.
            if !tls {
                let _ = stream.write_all(&(front.refusal)(Refusal::MaxClients));
            }
            continue;
        }
        let mut refuse = None;
        if denied_by_protected_mode(&shared, &addr) {
            shared.rejected_connections.fetch_add(1, Ordering::Relaxed);
            if !tls {
                shared.connected.fetch_sub(1, Ordering::Relaxed);
                let _ = stream.write_all(&(front.refusal)(Refusal::ProtectedMode));
                continue;
            }
            // Redis checks protected mode once the handshake is done
            // (`clientAcceptHandler`) and writes -DENIED over TLS: a
            // worker finishes the handshake, answers and closes. The
            // connection counts against maxclients meanwhile, as the
            // client Redis has made for it does.
            refuse = Some(Refusal::ProtectedMode);
        }
        let workers = shared.workers();
        // Only the workers `balance` keeps active take new clients.
        let active = shared.balance.active().clamp(1, workers.len());
        let mut w = next % active;
        next = next.wrapping_add(1);
        // A worker stuck in a long script cannot serve a new client: give
        // it to another, which can answer BUSY and take SCRIPT KILL.
        if shared.scripts.worker_busy(w) {
            if let Some(free) = (0..workers.len()).find(|&o| !shared.scripts.worker_busy(o)) {
                w = free;
            }
        }
        workers[w].send(Msg::NewConn(stream, addr, front, tls_config, refuse));
    }
}

/// Protected mode refuses non-loopback clients while no password is set
/// (Redis 7.0 networking.c `clientAcceptHandler`); with Cairn's
/// loopback-only default bind it only matters once someone binds a public
/// address.
fn denied_by_protected_mode(shared: &Shared, addr: &SocketAddr) -> bool {
    if addr.ip().is_loopback() || shared.hot.requirepass.load(Ordering::Relaxed) {
        return false;
    }
    shared.config.read().protected_mode
}

/// Why protected mode refused a connection, with its line end; each front
/// end puts its error prefix in front (RESP `-`, memcached `SERVER_ERROR `).
/// Redis 7.0's text word for word, "Redis" and its typo included: tools and
/// people search for it, and the issue asks for Redis's `-DENIED` reply.
pub const PROTECTED_MODE_ERROR: &str = "DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Setup a an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.\r\n";
