//! A replica's link on the master: what REPLCONF told of it, and the two
//! threads that serve it once PSYNC or SYNC handed its socket over
//! (`Client::handoff`). The sender answers the PSYNC (`+CONTINUE` from the
//! backlog, or `+FULLRESYNC` and the RDB image of a fork-less cut), then
//! writes the stream as the buffer receives it; the ack reader reads
//! `REPLCONF ACK <offset>` from the same socket for WAIT, INFO and
//! `min-replicas-*`, and closes a replica silent for `repl-timeout`.
//!
//! A worker never writes to a replica: a full sync of a large dataset or a
//! slow replica holds only its own threads (blocking sockets with the
//! `repl-timeout` deadline), as `net/migrate.rs` holds MIGRATE's socket.
//! Redis keeps replicas in its event loop; it has one thread to protect,
//! Cairn has workers that must not wait on one replica. The socket is
//! plain TCP or the TLS session of the TLS port (`tls_link::LinkSocket`);
//! full syncs go through `shared_sync`, which shares images between
//! replicas.
use super::tls_link::LinkSocket;
use crate::client::{ClientInfo, Handoff};
use crate::log;
use crate::shared::Shared;
use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What REPLCONF told of the replica (Redis's `slave_listening_port`,
/// `slave_addr`, `slave_capa`, `CLIENT_REPL_RDBONLY`).
#[derive(Clone, Debug, Default)]
pub struct ReplicaConf {
    pub port: i64,
    pub ip: Option<String>,
    /// `capa eof`: the replica reads a diskless `$EOF:` transfer.
    pub capa_eof: bool,
    /// `capa psync2`: `+CONTINUE` names the replication ID.
    pub capa_psync2: bool,
    /// `rdb-only 1`: the link ends after the RDB image.
    pub rdb_only: bool,
}

/// How the replica asked to sync.
#[derive(Clone, Debug)]
pub enum Request {
    /// `PSYNC <replid> <offset>` (`?` and -1 for a first sync).
    Psync { replid: String, offset: i64 },
    /// `SYNC`: always full, no `+FULLRESYNC` line.
    Sync,
}

/// Redis's `replstate` names, as INFO shows them.
const WAIT_BGSAVE: u8 = 0;
pub(super) const SEND_BULK: u8 = 1;
const ONLINE: u8 = 2;

/// An attached replica, as INFO, ROLE, WAIT and `min-replicas-*` see it.
pub struct Replica {
    pub info: Arc<ClientInfo>,
    /// The address INFO and ROLE name: `ip-address`, else the peer's.
    pub ip: String,
    pub port: i64,
    state: AtomicU8,
    ack_offset: AtomicU64,
    /// Unix ms of the last ACK (of the link's start before any).
    ack_ms: AtomicU64,
    /// The link is over (either thread saw it end).
    gone: AtomicBool,
    /// An ACK arrived (the stream after a diskless image waits for it).
    acked: AtomicBool,
    /// Its reader of the buffer once attached (`usize::MAX` before), for
    /// `outlimit`.
    reader: AtomicUsize,
}

impl Replica {
    /// Its reader of the buffer, once attached.
    pub fn reader(&self) -> Option<usize> {
        Some(self.reader.load(Ordering::Relaxed)).filter(|&r| r != usize::MAX)
    }

    pub(super) fn set_reader(&self, reader: usize) {
        self.reader.store(reader, Ordering::Relaxed);
    }

    pub(super) fn set_state(&self, state: u8) {
        self.state.store(state, Ordering::Relaxed);
    }

    pub fn online(&self) -> bool {
        self.state.load(Ordering::Relaxed) == ONLINE
    }

    pub fn state_name(&self) -> &'static str {
        match self.state.load(Ordering::Relaxed) {
            WAIT_BGSAVE => "wait_bgsave",
            SEND_BULK => "send_bulk",
            _ => "online",
        }
    }

    pub fn ack_offset(&self) -> u64 {
        self.ack_offset.load(Ordering::Relaxed)
    }

    pub fn ack_ms(&self) -> u64 {
        self.ack_ms.load(Ordering::Relaxed)
    }

    /// Seconds since the last ACK (INFO's `lag=`).
    pub fn lag_secs(&self) -> u64 {
        cairn_engine::clock::now_ms().saturating_sub(self.ack_ms()) / 1000
    }
}

/// What PSYNC/SYNC leave in `Client::handoff`: the link's threads start
/// when the worker gives the socket over.
pub fn handoff(
    shared: &Shared,
    info: Arc<ClientInfo>,
    conf: ReplicaConf,
    req: Request,
) -> Option<Handoff> {
    let shared = shared.journal.server.get().and_then(|w| w.upgrade())?;
    Some(Box::new(move |transport, _unread: Vec<u8>| {
        // A replica sends nothing between PSYNC and its first ACK, which
        // comes after the image: nothing read past PSYNC is lost.
        let stream = match LinkSocket::from_transport(transport) {
            Ok(s) => s,
            Err(e) => {
                log::warning(&format!("Cannot serve a replica's link: {e}"));
                shared.clients.lock().remove(&info.id);
                return;
            }
        };
        let spawned = std::thread::Builder::new()
            .name("cairn-replica".into())
            .spawn(move || run(shared, info, conf, req, stream));
        if let Err(e) = spawned {
            log::warning(&format!("Cannot start a replica's link thread: {e}"));
        }
    }))
}

fn run(
    shared: Arc<Shared>,
    info: Arc<ClientInfo>,
    conf: ReplicaConf,
    req: Request,
    stream: LinkSocket,
) {
    let ip = conf
        .ip
        .clone()
        .unwrap_or_else(|| info.addr.ip().to_string());
    let replica = Arc::new(Replica {
        info: info.clone(),
        ip,
        port: conf.port,
        state: AtomicU8::new(WAIT_BGSAVE),
        ack_offset: AtomicU64::new(0),
        ack_ms: AtomicU64::new(cairn_engine::clock::now_ms()),
        gone: AtomicBool::new(false),
        acked: AtomicBool::new(false),
        reader: AtomicUsize::new(usize::MAX),
    });
    let r = &shared.replication;
    r.replicas.lock().push(replica.clone());
    let mut reader = None;
    let result = serve(&shared, &replica, &conf, &req, &stream, &mut reader);
    replica.gone.store(true, Ordering::Relaxed);
    let _ = stream.shutdown(Shutdown::Both);
    if let Some(id) = reader {
        r.detach(id);
    }
    r.replicas.lock().retain(|x| !Arc::ptr_eq(x, &replica));
    shared.clients.lock().remove(&info.id);
    let who = format!("{}:{}", replica.ip, replica.port);
    match result {
        Ok(()) => log::notice(&format!("Connection with replica {who} lost.")),
        Err(e) => log::warning(&format!("Connection with replica {who} lost: {e}")),
    }
}

/// The link from the PSYNC answer to its end.
fn serve(
    shared: &Arc<Shared>,
    replica: &Arc<Replica>,
    conf: &ReplicaConf,
    req: &Request,
    stream: &LinkSocket,
    reader: &mut Option<usize>,
) -> io::Result<()> {
    let r = &shared.replication;
    let timeout = Duration::from_secs(u64::from(shared.config.read().repl_timeout.max(1)));
    let _ = stream.set_nodelay(true);
    let mut out = stream.try_clone()?;
    out.set_write_timeout(Some(timeout))?;
    let who = format!("{}:{}", replica.ip, replica.port);

    // Redis's masterTryPartialResynchronization.
    let partial = match req {
        Request::Psync { replid, offset } if replid != "?" && *offset >= 0 => {
            let got = r.try_continue(replid, *offset as u64);
            if got.is_none() {
                r.sync_partial_err.fetch_add(1, Ordering::Relaxed);
                log::notice(&format!(
                    "Partial resynchronization not accepted for replica {who}: full sync"
                ));
            }
            got.map(|(reader, gen, id)| (reader, gen, id, *offset as u64))
        }
        _ => None,
    };
    // After a diskless image the stream waits for the replica's first ACK
    // (Redis 7.0's `repl_start_cmd_stream_on_ack`): a replica reading an
    // `$EOF:` transfer looks for the mark at the end of what it read, so
    // stream bytes in the same read would hide it.
    let mut wait_ack = false;
    let gen = match partial {
        Some((id, gen, replid, from)) => {
            *reader = Some(id);
            replica.reader.store(id, Ordering::Relaxed);
            r.sync_partial_ok.fetch_add(1, Ordering::Relaxed);
            let line = if conf.capa_psync2 {
                format!("+CONTINUE {replid}\r\n")
            } else {
                "+CONTINUE\r\n".to_string()
            };
            out.write_all(line.as_bytes())?;
            log::notice(&format!(
                "Partial resynchronization request from {who} accepted. Sending {} bytes of backlog starting from offset {from}.",
                r.offset() + 1 - from
            ));
            gen
        }
        None => {
            let synced = super::shared_sync::full_sync(shared, replica, conf, req, &mut out)?;
            *reader = Some(synced.reader);
            wait_ack = synced.eof;
            if conf.rdb_only {
                return Ok(());
            }
            synced.generation
        }
    };
    replica
        .ack_ms
        .store(cairn_engine::clock::now_ms(), Ordering::Relaxed);
    replica.state.store(ONLINE, Ordering::Relaxed);
    log::notice(&format!("Synchronization with replica {who} succeeded"));

    let acks = stream.try_clone()?;
    let (s2, rep2) = (shared.clone(), replica.clone());
    std::thread::Builder::new()
        .name("cairn-replica-ack".into())
        .spawn(move || read_acks(&s2, &rep2, acks))?;

    let id = reader.expect("set above");
    let mut buf = Vec::with_capacity(64 * 1024);
    loop {
        if replica.gone.load(Ordering::Relaxed) || replica.info.killed.load(Ordering::Relaxed) {
            return Ok(());
        }
        if wait_ack {
            if !replica.acked.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
            wait_ack = false;
        }
        buf.clear();
        let Some(n) = r.take_wait(id, gen, 256 * 1024, &mut buf, Duration::from_millis(100)) else {
            // The IDs moved or the backlog went: the replica reconnects.
            return Ok(());
        };
        if n > 0 {
            out.write_all(&buf)?;
        }
    }
}

/// Reads the replica's `REPLCONF ACK <offset> [FACK <offset>]` (and the
/// newlines a loading replica sends) until the link ends or the replica is
/// silent for `repl-timeout`.
fn read_acks(shared: &Shared, replica: &Replica, mut sock: LinkSocket) {
    let timeout = Duration::from_secs(u64::from(shared.config.read().repl_timeout.max(1)));
    // Wake every second to notice a link the sender closed.
    let _ = sock.set_read_timeout(Some(Duration::from_secs(1)));
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let mut last = Instant::now();
    loop {
        if replica.gone.load(Ordering::Relaxed) || replica.info.killed.load(Ordering::Relaxed) {
            break;
        }
        match sock.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                last = Instant::now();
                buf.extend_from_slice(&chunk[..n]);
                while let Some((args, used)) = parse_command(&buf) {
                    buf.drain(..used);
                    on_command(shared, replica, &args);
                }
                if buf.len() > 64 * 1024 {
                    log::warning("Protocol error from a replica: closing its link");
                    break;
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                if last.elapsed() >= timeout {
                    log::warning(&format!(
                        "Disconnecting timedout replica (streaming sync): {}:{}",
                        replica.ip, replica.port
                    ));
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    replica.gone.store(true, Ordering::Relaxed);
    let _ = sock.shutdown(Shutdown::Both);
}

fn on_command(shared: &Shared, replica: &Replica, args: &[Vec<u8>]) {
    let is = |i: usize, s: &str| {
        args.get(i)
            .is_some_and(|a| a.eq_ignore_ascii_case(s.as_bytes()))
    };
    if is(0, "replconf") && is(1, "ack") {
        let Some(off) = args
            .get(2)
            .and_then(|a| std::str::from_utf8(a).ok())
            .and_then(|a| a.parse::<u64>().ok())
        else {
            return;
        };
        if off > replica.ack_offset() {
            replica.ack_offset.store(off, Ordering::Relaxed);
        }
        replica
            .ack_ms
            .store(cairn_engine::clock::now_ms(), Ordering::Relaxed);
        replica.acked.store(true, Ordering::Release);
        shared.replication.wake_waiters(shared, off);
    }
}

/// One command from `buf`: a RESP multibulk, or an inline line (a bare
/// newline is an empty one); None until it is whole.
fn parse_command(buf: &[u8]) -> Option<(Vec<Vec<u8>>, usize)> {
    let line_end = |from: usize| {
        buf[from..]
            .windows(2)
            .position(|w| w == b"\r\n")
            .map(|p| from + p)
    };
    if buf.first() != Some(&b'*') {
        let nl = buf.iter().position(|&b| b == b'\n')?;
        let line = String::from_utf8_lossy(&buf[..nl]);
        let args = line
            .split_ascii_whitespace()
            .map(|a| a.as_bytes().to_vec())
            .collect();
        return Some((args, nl + 1));
    }
    let end = line_end(0)?;
    let n: usize = std::str::from_utf8(&buf[1..end]).ok()?.parse().ok()?;
    let mut pos = end + 2;
    let mut args = Vec::with_capacity(n);
    for _ in 0..n {
        if buf.get(pos) != Some(&b'$') {
            return None;
        }
        let end = line_end(pos)?;
        let len: usize = std::str::from_utf8(&buf[pos + 1..end]).ok()?.parse().ok()?;
        let start = end + 2;
        if buf.len() < start + len + 2 {
            return None;
        }
        args.push(buf[start..start + len].to_vec());
        pos = start + len + 2;
    }
    Some((args, pos))
}

/// Once a second: a PING into the stream every `repl-ping-replica-period`
/// seconds while replicas are attached (Redis's `replicationCron`), so
/// replicas see a live master and their offsets keep moving.
pub fn cron(shared: &Shared) {
    static LOOPS: AtomicU64 = AtomicU64::new(0);
    let loops = LOOPS.fetch_add(1, Ordering::Relaxed) + 1;
    let period = u64::from(shared.config.read().repl_ping_replica_period.max(1));
    let r = &shared.replication;
    // Not while a FAILOVER waits for a replica to reach our offset.
    if loops.is_multiple_of(period) && !r.replicas.lock().is_empty() && !super::failover::waiting()
    {
        r.feed_raw(b"*1\r\n$4\r\nPING\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::parse_command;

    #[test]
    fn acks_parse_whole_or_not_at_all() {
        let ack = b"*3\r\n$8\r\nREPLCONF\r\n$3\r\nACK\r\n$3\r\n123\r\n";
        for cut in 0..ack.len() {
            assert!(parse_command(&ack[..cut]).is_none());
        }
        let (args, used) = parse_command(ack).unwrap();
        assert_eq!(used, ack.len());
        assert_eq!(
            args,
            vec![b"REPLCONF".to_vec(), b"ACK".to_vec(), b"123".to_vec()]
        );
        let (args, used) = parse_command(b"\nrest").unwrap();
        assert!(args.is_empty());
        assert_eq!(used, 1);
    }
}
