//! The replica side of replication (issue 24 item 3): REPLICAOF's state,
//! the link thread that keeps this server a copy of its master, and what
//! being a replica changes for everyone else (`replica-read-only`,
//! `replica-serve-stale-data`, ROLE and INFO replication's replica fields).
//!
//! The link (Redis 7.0 replication.c `connectWithMaster`,
//! `syncWithMaster`, `readSyncBulkPayload`) runs on a thread of its own,
//! never on a worker, whose socket blocks with `repl-timeout` deadlines:
//! PING, AUTH [masteruser] masterauth, REPLCONF listening-port /
//! ip-address / capa eof capa psync2, then `PSYNC <replid> <offset+1>`
//! with this server's own ID and offset (Redis caches itself as the master
//! to continue from: after a promotion and a demotion the new master may
//! know that history). `+FULLRESYNC <id> <offset>`: the RDB image
//! (`$EOF:<mark>` or `$<len>`) goes to a temporary file in `dir`, the
//! keyspace is emptied and loaded from it with the RDB reader (clients
//! get -LOADING meanwhile, as in Redis), and the stream's history restarts
//! at the master's ID and offset. `+CONTINUE [<id>]`: the data stays.
//!
//! The stream is then applied as Redis applies its master client's: each
//! command through `exec::dispatch::invoke` with its reply dropped and no
//! admission check (the master's writes pass READONLY, OOM and MISCONF),
//! MULTI ... EXEC queued and run as one transaction, `REPLCONF GETACK`
//! answered with `REPLCONF ACK <offset>`, an ACK every second. The
//! applied commands' bytes go verbatim into this server's own stream
//! (`Replication::feed_from_master`, once per read), so its offset is its
//! master's and its own replicas and a later PSYNC continue from it; the
//! engine records nothing for the stream while this server is a replica
//! (`set_replica_mode`), so no write is replicated twice. A transaction's
//! bytes are fed at its EXEC, as Redis advances `reploff` only then.
//!
//! The link's state is process-wide (one server per process), in this
//! module's statics rather than `Shared`, so a server that never runs
//! REPLICAOF pays one relaxed load per refused-or-not write check.
use super::tls_link::MasterSocket;
use crate::client::{Client, ClientInfo};
use crate::exec::dispatch;
use crate::exec::table::{flags, Command};
use crate::log;
use crate::resp::ctx::Args;
use crate::shared::Shared;
use cairn_engine::{CmdState, Cx};
use cairn_protocol::resp::{parse_request, ArgList, Limits, Parsed};
use parking_lot::Mutex;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `-READONLY` (Redis `shared.roslaveerr`).
pub const READONLY: &str = "READONLY You can't write against a read only replica.";
/// `-MASTERDOWN` (Redis `shared.masterdownerr`).
pub const MASTERDOWN: &str =
    "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.";

/// Where the link is, as ROLE names it (replication.c `roleCommand`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum LinkState {
    /// Waiting to (re)connect.
    Connect,
    Connecting,
    /// PING .. PSYNC.
    Handshake,
    /// Receiving the RDB image.
    Sync,
    Connected,
}

impl LinkState {
    fn name(self) -> &'static str {
        match self {
            LinkState::Connect => "connect",
            LinkState::Connecting => "connecting",
            LinkState::Handshake => "handshake",
            LinkState::Sync => "sync",
            LinkState::Connected => "connected",
        }
    }
}

struct Link {
    /// The master REPLICAOF named (None: this server is a master).
    master: Option<(String, u16)>,
    /// Bumped by every REPLICAOF: a link thread whose number is no longer
    /// this one stops.
    generation: u64,
    state: LinkState,
    /// The last byte received from the master.
    last_io: Option<Instant>,
    /// Since when the link is down (INFO `master_link_down_since_seconds`).
    down_since: Option<Instant>,
    /// The RDB transfer: its size (-1: `$EOF:` framing) and bytes so far.
    sync_total: i64,
    sync_read: u64,
}

static LINK: Mutex<Link> = parking_lot::const_mutex(Link {
    master: None,
    generation: 0,
    state: LinkState::Connect,
    last_io: None,
    down_since: None,
    sync_total: 0,
    sync_read: 0,
});

/// `Link::generation`, readable without the lock: the link checks it
/// before every command it applies. Written under `LINK`.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// Held while the link applies a command, which checks the generation
/// first: REPLICAOF takes it after moving the generation, so once it
/// answers no command of the old master runs. It waits at most
/// `APPLY_WAIT`: inside EXEC (Sentinel's `MULTI; SLAVEOF; ...; EXEC`) it
/// holds every shard, which the command it waits for may need.
static APPLY: Mutex<()> = parking_lot::const_mutex(());
const APPLY_WAIT: Duration = Duration::from_millis(500);
/// Holds off the link's applying (`restart::hold`: a snapshot's cut on a
/// replica, so its offset counts exactly the commands its data holds).
pub(super) fn hold_apply() -> Option<parking_lot::MutexGuard<'static, ()>> {
    APPLY.try_lock_for(APPLY_WAIT)
}

/// The link is up (`master_link_status:up`).
static LINK_UP: AtomicBool = AtomicBool::new(false);
/// Bytes read from the master's stream (`slave_read_repl_offset`): the
/// applied offset plus what is read and not yet applied.
static READ_OFFSET: AtomicU64 = AtomicU64::new(0);

/// Why an ordinary client's `cmd` may not run on a replica (Redis 7.0
/// `processCommand`): a write with `replica-read-only` on, or, with
/// `replica-serve-stale-data` off and the link down, anything not flagged
/// `stale`. None on a master (one relaxed load).
#[inline]
pub fn refusal(shared: &Shared, cmd: &Command) -> Option<&'static str> {
    if !shared.replication.replica_mode() {
        return None;
    }
    let cfg = shared.config.read();
    if cmd.has(flags::WRITE) && cfg.replica_read_only {
        return Some(READONLY);
    }
    if !cfg.replica_serve_stale_data && !LINK_UP.load(Ordering::Relaxed) && !cmd.has(flags::STALE) {
        return Some(MASTERDOWN);
    }
    None
}

/// Writes are refused here (`replica-read-only` on a replica): for the
/// front ends and scripts that do not go through `refusal` (memcached,
/// `redis.call`). One relaxed load on a master.
#[inline]
pub fn read_only(shared: &Shared) -> bool {
    shared.replication.replica_mode() && shared.config.read().replica_read_only
}

/// A script that may write, refused on a read-only replica before it runs
/// (Redis 7.0 `scriptPrepareForRun`; EVAL without flags is checked at
/// each write instead).
pub const SCRIPT_READONLY: &str = "READONLY Can not run script with write flag on readonly replica";

/// The master REPLICAOF named, if any.
pub fn master() -> Option<(String, u16)> {
    LINK.lock().master.clone()
}

/// REPLICAOF host port: forget the old link, connect to this master.
/// `cx` and `caller` are the asking command's and worker's (None off a
/// worker).
pub fn set_master(shared: &Shared, cx: &Cx, caller: Option<usize>, host: &str, port: u16) {
    let generation = {
        let mut l = LINK.lock();
        l.master = Some((host.to_string(), port));
        l.generation += 1;
        GENERATION.store(l.generation, Ordering::SeqCst);
        l.state = LinkState::Connect;
        l.down_since = Some(Instant::now());
        l.last_io = Some(Instant::now());
        l.sync_total = 0;
        l.sync_read = 0;
        l.generation
    };
    LINK_UP.store(false, Ordering::SeqCst);
    let was_replica = shared.replication.replica_mode();
    // The old link's command in progress finishes; it runs no other.
    drop(APPLY.try_lock_for(APPLY_WAIT));
    if !was_replica {
        log::notice("Before turning into a replica, using my own master parameters to synthesize a cached master: I may be able to synchronize with the new master with just a partial transfer.");
    }
    // Also when already a replica: a new master's data differs, and
    // replicas of this server must resync (Redis `disconnectSlaves`).
    super::set_replica_mode(shared, cx, caller, true);
    // The thread outlives the command: it holds the server by the handle
    // the journal's writer uses.
    let Some(s) = shared.journal.server.get().and_then(|w| w.upgrade()) else {
        log::warning("Can't start the replication link: the server is shutting down");
        return;
    };
    let (host, port) = (host.to_string(), port);
    let spawned = std::thread::Builder::new()
        .name("cairn-replica".into())
        .spawn(move || {
            crate::memory::register_thread();
            run(&s, generation, &host, port)
        });
    if let Err(e) = spawned {
        log::warning(&format!("Can't start the replication link thread: {e}"));
    }
}

/// REPLICAOF NO ONE: the link stops and this server is a master with the
/// data it has (Redis `replicationUnsetMaster`; the ID shift is
/// `set_replica_mode`'s).
pub fn unset_master(shared: &Shared, cx: &Cx, caller: Option<usize>) {
    {
        let mut l = LINK.lock();
        l.master = None;
        l.generation += 1;
        GENERATION.store(l.generation, Ordering::SeqCst);
        l.state = LinkState::Connect;
    }
    LINK_UP.store(false, Ordering::SeqCst);
    drop(APPLY.try_lock_for(APPLY_WAIT));
    super::set_replica_mode(shared, cx, caller, false);
}

/// The `replicaof` directive at start-up, once the data is loaded.
pub fn start_at_boot(shared: &Shared) {
    let spec = shared.config.read().replicaof.clone();
    let mut words = spec.split_whitespace();
    let (Some(host), Some(port)) = (words.next(), words.next()) else {
        return;
    };
    match port.parse::<u16>() {
        Ok(port) => set_master(shared, &Cx::DETACHED, None, host, port),
        Err(_) => log::warning(&format!("Invalid replicaof master port '{port}'")),
    }
}

fn current(generation: u64) -> bool {
    GENERATION.load(Ordering::SeqCst) == generation
}

fn set_state(generation: u64, state: LinkState) {
    let mut l = LINK.lock();
    if l.generation == generation {
        l.state = state;
    }
}

/// The link thread: connects, syncs and applies until REPLICAOF moves the
/// generation; a lost link is retried every second with PSYNC.
fn run(shared: &Arc<Shared>, generation: u64, host: &str, port: u16) {
    log::notice(&format!("Connecting to MASTER {host}:{port}"));
    // One master client across reconnections: after +CONTINUE the stream
    // goes on in the database it last selected (Redis keeps its cached
    // master's).
    let mut applier = Applier::new(shared);
    applier.client.set_db(super::restart::stream_db());
    while current(generation) {
        set_state(generation, LinkState::Connecting);
        match sync_and_apply(shared, &mut applier, generation, host, port) {
            Ok(()) => {}
            Err(e) => log::warning(&format!("Replication link with {host}:{port}: {e}")),
        }
        {
            let mut l = LINK.lock();
            if l.generation != generation {
                return;
            }
            if LINK_UP.swap(false, Ordering::SeqCst) {
                l.down_since = Some(Instant::now());
            }
            l.state = LinkState::Connect;
        }
        for _ in 0..10 {
            if !current(generation) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// The master connection: a buffered reader and the same socket to write
/// (plain, or TLS with `tls-replication`).
struct Conn {
    r: BufReader<MasterSocket>,
    w: MasterSocket,
}

impl Conn {
    fn send(&mut self, args: &[&[u8]]) -> io::Result<()> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
        self.w.write_all(&out)
    }

    /// One reply line without its CRLF.
    fn line(&mut self) -> io::Result<String> {
        let mut buf = Vec::new();
        let n = self.r.read_until(b'\n', &mut buf)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the master closed the connection",
            ));
        }
        while matches!(buf.last(), Some(b'\n' | b'\r')) {
            buf.pop();
        }
        Ok(String::from_utf8_lossy(&buf).into_owned())
    }

    /// Sends a handshake command and reads its one-line reply.
    fn ask(&mut self, args: &[&[u8]]) -> io::Result<String> {
        self.send(args)?;
        self.line()
    }
}

fn err(msg: impl Into<String>) -> io::Error {
    io::Error::other(msg.into())
}

fn connect(shared: &Shared, host: &str, port: u16, timeout: Duration) -> io::Result<Conn> {
    // Built for each attempt, so CONFIG SET of a tls-* file applies to the
    // next one.
    let tls = {
        let c = shared.config.read();
        c.tls_replication
            .then(|| super::tls_link::client_config(&c))
    };
    let tls = match tls {
        Some(Ok(config)) => Some(Arc::new(config)),
        Some(Err(e)) => return Err(err(format!("Failed to configure TLS for replication: {e}"))),
        None => None,
    };
    let addrs: Vec<_> = (host, port).to_socket_addrs()?.collect();
    let mut last = err("the master's address did not resolve");
    for a in addrs {
        match TcpStream::connect_timeout(&a, timeout) {
            Ok(s) => {
                s.set_nodelay(true)?;
                s.set_read_timeout(Some(timeout))?;
                s.set_write_timeout(Some(timeout))?;
                let s = match &tls {
                    Some(config) => super::tls_link::connect_master(config.clone(), s, host)?,
                    None => MasterSocket::Plain(s),
                };
                let w = s.try_clone()?;
                return Ok(Conn {
                    r: BufReader::with_capacity(1 << 16, s),
                    w,
                });
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// One connection's life: handshake, full or partial sync, then the
/// stream until the link fails (Err) or REPLICAOF changes (Ok).
fn sync_and_apply(
    shared: &Shared,
    applier: &mut Applier<'_>,
    generation: u64,
    host: &str,
    port: u16,
) -> io::Result<()> {
    let (timeout, auth, user, announce_ip, announce_port) = {
        let c = shared.config.read();
        (
            Duration::from_secs(u64::from(c.repl_timeout)),
            c.masterauth.clone(),
            c.masteruser.clone(),
            c.replica_announce_ip.clone(),
            c.replica_announce_port,
        )
    };
    let mut conn = connect(shared, host, port, timeout)?;
    log::notice("MASTER <-> REPLICA sync started");
    set_state(generation, LinkState::Handshake);
    // A master that wants a password first answers PING with NOAUTH;
    // that is fine, AUTH follows (Redis accepts those three errors).
    let pong = conn.ask(&[b"PING"])?;
    if pong.starts_with('-')
        && !pong.starts_with("-NOAUTH")
        && !pong.starts_with("-NOPERM")
        && !pong.starts_with("-ERR operation not permitted")
    {
        return Err(err(format!("Error reply to PING from master: '{pong}'")));
    }
    if !auth.is_empty() {
        let reply = if user.is_empty() {
            conn.ask(&[b"AUTH", auth.as_bytes()])?
        } else {
            conn.ask(&[b"AUTH", user.as_bytes(), auth.as_bytes()])?
        };
        if reply.starts_with('-') {
            return Err(err(format!("Unable to AUTH to MASTER: {reply}")));
        }
    }
    // Redis announces its TLS port when it replicates over TLS.
    let tls_port = {
        let c = shared.config.read();
        if c.tls_replication {
            c.tls_port
        } else {
            0
        }
    };
    let own_port = match (announce_port, tls_port) {
        (0, 0) => shared.tcp_port.load(Ordering::Relaxed),
        (0, p) | (p, _) => p,
    };
    // Errors to REPLCONF are not fatal (an old master), as in Redis.
    let reply = conn.ask(&[
        b"REPLCONF",
        b"listening-port",
        own_port.to_string().as_bytes(),
    ])?;
    if reply.starts_with('-') {
        log::notice(&format!(
            "(Non critical) Master does not understand REPLCONF listening-port: {reply}"
        ));
    }
    if !announce_ip.is_empty() {
        let reply = conn.ask(&[b"REPLCONF", b"ip-address", announce_ip.as_bytes()])?;
        if reply.starts_with('-') {
            log::notice(&format!(
                "(Non critical) Master does not understand REPLCONF ip-address: {reply}"
            ));
        }
    }
    let reply = conn.ask(&[b"REPLCONF", b"capa", b"eof", b"capa", b"psync2"])?;
    if reply.starts_with('-') {
        log::notice(&format!(
            "(Non critical) Master does not understand REPLCONF capa: {reply}"
        ));
    }
    let (replid, offset) = shared.replication.id_and_offset();
    let from = (offset + 1).to_string();
    log::notice(&format!(
        "Trying a partial resynchronization (request {replid}:{from})."
    ));
    // A master handing over (FAILOVER) asks its target to promote itself.
    if super::failover::in_progress() {
        conn.send(&[b"PSYNC", replid.as_bytes(), from.as_bytes(), b"FAILOVER"])?;
    } else {
        conn.send(&[b"PSYNC", replid.as_bytes(), from.as_bytes()])?;
    }
    let reply = loop {
        // The master may send newlines to keep the link alive first.
        let line = conn.line()?;
        if !line.is_empty() {
            break line;
        }
    };
    // A FAILOVER ends when the target accepts, and is aborted when it
    // refuses (not when it says "try later": the link retries).
    if reply.starts_with("+FULLRESYNC") || reply.starts_with("+CONTINUE") {
        super::failover::psync_answered(shared, true);
    } else if !reply.starts_with("-NOMASTERLINK") && !reply.starts_with("-LOADING") {
        super::failover::psync_answered(shared, false);
    }
    let mut words = reply.split(' ');
    match words.next() {
        Some("+FULLRESYNC") => {
            let (Some(id), Some(off)) = (words.next(), words.next()) else {
                return Err(err(format!("Bad +FULLRESYNC reply: {reply}")));
            };
            let off: u64 = off
                .parse()
                .map_err(|_| err(format!("Bad +FULLRESYNC offset: {reply}")))?;
            log::notice(&format!("Full resync from master: {id}:{off}"));
            set_state(generation, LinkState::Sync);
            let db = full_sync(shared, generation, &mut conn, id, off)?;
            applier.client.set_db(db);
            super::restart::note_stream_db(db);
        }
        Some("+CONTINUE") => {
            if let Some(id) = words.next().filter(|id| id.len() == 40) {
                shared.replication.continue_from_master(id);
            }
            log::notice(
                "Successful partial resynchronization with master. MASTER <-> REPLICA sync: Master accepted a Partial Resynchronization.",
            );
        }
        _ => {
            return Err(err(format!(
                "Unexpected reply to PSYNC from master: {reply}"
            )))
        }
    }
    {
        let mut l = LINK.lock();
        if l.generation != generation {
            return Ok(());
        }
        l.state = LinkState::Connected;
        l.last_io = Some(Instant::now());
    }
    LINK_UP.store(true, Ordering::SeqCst);
    READ_OFFSET.store(shared.replication.offset(), Ordering::Relaxed);
    send_ack(shared, &mut conn)?;
    // The master client of this connection, in CLIENT LIST (flag M) until
    // the link ends; CLIENT KILL TYPE master shuts its socket down, and the
    // link reconnects with PSYNC. A transaction cut by a lost link was not
    // applied nor counted: the master sends it again from its start.
    let info = register_master(shared, &conn, applier.client.db);
    applier.client = master_client(info.clone(), applier.client.db);
    applier.pending.clear();
    let result = apply_stream(shared, applier, generation, &mut conn);
    // Out of the registry before the socket closes (CLIENT KILL shuts
    // down the fd of registered clients only).
    shared.clients.lock().remove(&info.id);
    drop(conn);
    result
}

/// Reads the RDB image into a temporary file, then empties the keyspace
/// and loads it; the stream's history restarts at the master's ID and
/// offset. Returns the database the stream continues in.
fn full_sync(
    shared: &Shared,
    generation: u64,
    conn: &mut Conn,
    replid: &str,
    offset: u64,
) -> io::Result<usize> {
    let header = loop {
        // Newlines keep the link alive while the master prepares.
        let line = conn.line()?;
        if line.starts_with('-') {
            return Err(err(format!(
                "MASTER aborted replication with an error: {line}"
            )));
        }
        if !line.is_empty() {
            break line;
        }
    };
    let Some(size) = header.strip_prefix('$') else {
        return Err(err(format!(
            "Bad protocol from MASTER, the first byte is not '$': {header}"
        )));
    };
    let tmp = std::path::PathBuf::from(format!(
        "temp-{}.{}.rdb",
        std::process::id(),
        cairn_engine::clock::now_ms()
    ));
    let to_parser = super::diskless_load::begin(shared, replid, size);
    let mut loading = false;
    let mut first_bytes = || {
        if to_parser {
            super::diskless_load::start(shared);
            loading = true;
        }
    };
    let result = receive(conn, generation, size, &tmp, &mut first_bytes).and_then(|()| {
        if !current(generation) {
            return Err(err("REPLICAOF changed during the transfer"));
        }
        let db = stream_db(shared, &tmp);
        load(shared, &tmp).map(|()| db)
    });
    let _ = std::fs::remove_file(&tmp);
    if loading && result.is_err() {
        // The old data is still there (flushed only at the load).
        shared.snapshots.loading.store(false, Ordering::Relaxed);
    }
    let db = result?;
    shared.replication.adopt_master(shared, replid, offset);
    log::notice("MASTER <-> REPLICA sync: Finished with success");
    Ok(db)
}

/// The image's `repl-stream-db` aux field: the database the master's
/// stream has selected at the cut, which its next commands assume (a
/// master with a backlog sends no SELECT to a new replica). 0 without it.
fn stream_db(shared: &Shared, path: &std::path::Path) -> usize {
    use cairn_persist::rdb::file::{Item, Reader};
    let Ok(file) = std::fs::File::open(path) else {
        return 0;
    };
    let Ok(mut r) = Reader::new(io::BufReader::new(file), path) else {
        return 0;
    };
    let limits = cairn_persist::snapshot::format::BuildLimits::of(&shared.engine);
    // Aux fields come first; the first other item ends the search.
    while let Ok(Some(Item::Aux { key, value })) = r.next(&limits) {
        if key == b"repl-stream-db" {
            return std::str::from_utf8(&value)
                .ok()
                .and_then(|v| v.parse::<usize>().ok())
                .filter(|&db| db < shared.engine.databases())
                .unwrap_or(0);
        }
    }
    0
}

/// Copies the RDB payload to `tmp`: `$<len>` bytes, or up to the 40-byte
/// mark of `$EOF:<mark>` (nothing after it is consumed: what follows is
/// the stream). `first_bytes` runs once the payload's first bytes are in.
fn receive(
    conn: &mut Conn,
    generation: u64,
    size: &str,
    tmp: &std::path::Path,
    first_bytes: &mut dyn FnMut(),
) -> io::Result<()> {
    let mut file = io::BufWriter::new(std::fs::File::create(tmp)?);
    let mark = size.strip_prefix("EOF:").map(|m| m.as_bytes().to_vec());
    let total: Option<u64> = match &mark {
        Some(m) if m.len() == 40 => None,
        Some(_) => return Err(err(format!("Bad $EOF mark from MASTER: {size}"))),
        None => Some(
            size.parse()
                .map_err(|_| err(format!("Bad RDB length from MASTER: {size}")))?,
        ),
    };
    {
        let mut l = LINK.lock();
        l.sync_total = total.map_or(-1, |t| t as i64);
        l.sync_read = 0;
    }
    let mut done = 0u64;
    // The last 39 bytes written, to find a mark that straddles two reads.
    let mut tail: Vec<u8> = Vec::with_capacity(80);
    loop {
        if let Some(t) = total {
            if done == t {
                break;
            }
        }
        let buf = conn.r.fill_buf()?;
        if buf.is_empty() {
            return Err(err("the master closed the connection during the transfer"));
        }
        if done == 0 {
            first_bytes();
        }
        let mut take = buf.len();
        if let Some(t) = total {
            take = take.min((t - done) as usize);
        }
        let mut finished = false;
        if let Some(m) = &mark {
            if let Some(end) = mark_end(&tail, buf, m) {
                take = end;
                finished = true;
            }
            keep_tail(&mut tail, &buf[..take]);
        }
        file.write_all(&buf[..take])?;
        conn.r.consume(take);
        done += take as u64;
        {
            let mut l = LINK.lock();
            if l.generation != generation {
                return Err(err("REPLICAOF changed during the transfer"));
            }
            l.sync_read = done;
            l.last_io = Some(Instant::now());
        }
        if finished {
            break;
        }
    }
    let mut file = file.into_inner().map_err(|e| e.into_error())?;
    if mark.is_some() {
        // The mark is not part of the image.
        let len = file.metadata()?.len();
        file.set_len(len - 40)?;
    }
    file.flush()?;
    Ok(())
}

/// Where in `buf` the 40-byte `mark` ends, if it does: across the
/// boundary (begun in `tail`, the last bytes of earlier reads) or inside
/// `buf`. Linear in the read (memchr's memmem); it was a per-byte window
/// compare, ~20 ns a byte: 20 s of a replica's CPU for a 1 GB image.
fn mark_end(tail: &[u8], buf: &[u8], mark: &[u8]) -> Option<usize> {
    let mut edge = tail.to_vec();
    edge.extend_from_slice(&buf[..buf.len().min(mark.len() - 1)]);
    memchr::memmem::find(&edge, mark)
        .map(|p| p + mark.len() - tail.len())
        .or_else(|| memchr::memmem::find(buf, mark).map(|p| p + mark.len()))
}

/// Keeps the last 39 bytes of what was written (`tail` then `written`).
fn keep_tail(tail: &mut Vec<u8>, written: &[u8]) {
    const KEEP: usize = 39;
    if written.len() >= KEEP {
        tail.clear();
        tail.extend_from_slice(&written[written.len() - KEEP..]);
    } else {
        tail.extend_from_slice(written);
        let extra = tail.len().saturating_sub(KEEP);
        tail.drain(..extra);
    }
}

/// Empties the keyspace and loads the master's image (clients get
/// -LOADING until it is in). Keys already past their expire time are kept:
/// the master's DEL for them follows in the stream, as Redis replicas
/// load them.
fn load(shared: &Shared, path: &std::path::Path) -> io::Result<()> {
    use cairn_persist::snapshot as snap;
    let st = &shared.snapshots;
    st.loading.store(true, Ordering::Relaxed);
    log::notice("MASTER <-> REPLICA sync: Flushing old data");
    drop(shared.engine.flush(&Cx::DETACHED, None));
    log::notice("MASTER <-> REPLICA sync: Loading DB in memory");
    let opts = snap::LoadOptions {
        thread_start: Some(crate::memory::register_thread),
        keep_expired: true,
        ..Default::default()
    };
    let result = snap::load(&shared.engine, path, &opts, &mut |_| {})
        .map_err(|e| e.to_string())
        .and_then(|stats| crate::script::functions::load_codes(shared, &stats.functions));
    st.loading.store(false, Ordering::Relaxed);
    if result.is_ok() && shared.journal.enabled() {
        // The journal holds the old data: a compaction makes the loaded
        // keys its base (Redis restarts its AOF after a full sync). A
        // compaction already running cut before the load, so one more is
        // scheduled behind it (the rewrite thread looks ten times a
        // second).
        if crate::journal::rewrite::request(shared, false).is_err() {
            shared
                .journal
                .rewrite
                .scheduled
                .store(true, Ordering::Relaxed);
        }
    }
    result.map_err(|e| {
        err(format!(
            "Failed trying to load the MASTER synchronization DB from disk: {e}"
        ))
    })
}

fn send_ack(shared: &Shared, conn: &mut Conn) -> io::Result<()> {
    let offset = shared.replication.offset().to_string();
    conn.send(&[b"REPLCONF", b"ACK", offset.as_bytes()])
}

/// The master's client: runs the stream's commands with replies dropped.
///
/// Per command it parses (zero-copy, the clients' parser), finds the
/// command (the last one found is remembered: a stream is mostly runs of
/// one command), runs it and notes its bytes; the bytes join this server's
/// own stream once per read (`flush`), not once per command, so the stream
/// lock and the wake-up of this server's own replicas are paid per read.
/// The offset a snapshot cut, an ACK or INFO sees is always a whole
/// number of applied commands: `flush` runs before the link lets go of
/// `APPLY` and before every ACK.
struct Applier<'s> {
    shared: &'s Shared,
    client: Client,
    out: Vec<u8>,
    /// Applied commands' bytes not yet in this server's stream.
    ready: Vec<u8>,
    /// A transaction's bytes, from its MULTI: they join `ready` at its
    /// EXEC, as Redis advances `reploff` only then.
    pending: Vec<u8>,
    /// The name the last command was found by (as sent) and what it found
    /// (only commands without subcommands).
    last_name: Vec<u8>,
    last_cmd: Option<&'s Command>,
}

impl<'s> Applier<'s> {
    fn new(shared: &'s Shared) -> Applier<'s> {
        let addr = std::net::SocketAddr::from(([0, 0, 0, 0], 0));
        let info = Arc::new(ClientInfo::new(0, addr, addr, -1, 0));
        Applier {
            shared,
            client: master_client(info, 0),
            out: Vec::new(),
            ready: Vec::new(),
            pending: Vec::new(),
            last_name: Vec::new(),
            last_cmd: None,
        }
    }

    /// The command `args` names, checked for arity; Err after logging why
    /// not (the command is skipped, its bytes still count).
    fn resolve(&mut self, args: &Args<'_>) -> Result<&'s Command, ()> {
        let name = args.get(0);
        let cmd = match self.last_cmd {
            Some(c) if self.last_name == name => c,
            _ => match dispatch::resolve(self.shared, args) {
                Ok(c) => {
                    if c.subs.is_empty() {
                        self.last_name.clear();
                        self.last_name.extend_from_slice(name);
                        self.last_cmd = Some(c);
                    }
                    c
                }
                Err(e) => {
                    log::warning(&format!("From the master: {}", e.message()));
                    return Err(());
                }
            },
        };
        if !cmd.arity_ok(args.len()) {
            log::warning(&format!(
                "Wrong number of arguments for '{}' from the master",
                cmd.name
            ));
            return Err(());
        }
        Ok(cmd)
    }

    /// Applies one command of the stream. `raw` is its bytes; returns true
    /// if the master asked for an ACK (REPLCONF GETACK).
    fn apply(&mut self, raw: &[u8], list: &ArgList) -> bool {
        let args = Args::new(raw, list);
        let name = args.get(0);
        // Neither is ever the remembered command (`resolve`).
        if name.eq_ignore_ascii_case(b"replconf") {
            let getack = args.len() >= 2 && args.get(1).eq_ignore_ascii_case(b"getack");
            self.feed(raw);
            return getack;
        }
        if name.eq_ignore_ascii_case(b"ping") {
            // Nothing to run: it only keeps the link alive (and counts in
            // the offset).
            self.feed(raw);
            return false;
        }
        let Ok(cmd) = self.resolve(&args) else {
            self.feed(raw);
            return false;
        };
        if self.client.multi.is_some() && !matches!(cmd.name, "exec" | "discard" | "multi") {
            if let Some(m) = &mut self.client.multi {
                m.queued
                    .push((cmd.id, ArgList::from_args(args.iter_from(0))));
            }
            self.pending.extend_from_slice(raw);
            return false;
        }
        self.invoke(cmd, args);
        self.feed(raw);
        false
    }

    fn invoke(&mut self, cmd: &Command, args: Args<'_>) {
        self.out.clear();
        let db = self.client.db;
        let state = CmdState::new();
        state.set_from_master();
        dispatch::invoke(
            self.shared,
            &mut self.client,
            cmd,
            args,
            &mut self.out,
            self.shared.replication.master_stats(self.shared),
            &Cx::command(db, None, 0, &state),
        );
        crate::keyevents::after_command(self.shared, &state, None);
        super::restart::note_stream_db(self.client.db);
        // EXEC turns it off at its end.
        self.client.in_exec = true;
        if self.out.first() == Some(&b'-') {
            log::warning(&format!(
                "The master's '{}' failed here: {}",
                cmd.name,
                String::from_utf8_lossy(&self.out).trim_end()
            ));
        }
    }

    /// Notes an applied command's bytes for this server's stream; inside a
    /// transaction they wait for its end.
    fn feed(&mut self, raw: &[u8]) {
        if self.client.multi.is_some() {
            self.pending.extend_from_slice(raw);
            return;
        }
        if !self.pending.is_empty() {
            self.ready.append(&mut self.pending);
        }
        self.ready.extend_from_slice(raw);
    }

    /// The applied commands' bytes join this server's stream (its offset,
    /// backlog and replicas).
    fn flush(&mut self) {
        if !self.ready.is_empty() {
            self.shared.replication.feed_from_master(&self.ready);
            self.ready.clear();
        }
    }
}

/// The registry entry of a new master link (its fd is the socket's, so
/// CLIENT KILL can shut it down).
fn register_master(shared: &Shared, conn: &Conn, db: usize) -> Arc<ClientInfo> {
    use std::os::fd::AsRawFd;
    let s = conn.r.get_ref();
    let unspecified = std::net::SocketAddr::from(([0, 0, 0, 0], 0));
    let id = shared.next_client_id.fetch_add(1, Ordering::Relaxed);
    let info = Arc::new(ClientInfo::new(
        id,
        s.peer_addr().unwrap_or(unspecified),
        s.local_addr().unwrap_or(unspecified),
        s.as_raw_fd(),
        0,
    ));
    info.master.store(true, Ordering::Relaxed);
    info.db.store(db as u32, Ordering::Relaxed);
    shared.clients.lock().insert(id, info.clone());
    info
}

/// The master's client: authenticated with every right, in database `db`.
fn master_client(info: Arc<ClientInfo>, db: usize) -> Client {
    let mut client = Client::new(info, true, None);
    client.set_db(db);
    // Blocking commands run in their non-blocking form (a master sends
    // none, but a replica must never wait).
    client.in_exec = true;
    client
}

/// Reads and applies the master's stream until the link fails or
/// REPLICAOF changes; ACKs every second and on GETACK.
///
/// The bytes are read straight into one buffer (`buf[start..end]` not yet
/// applied), which moves its tail to the front only when the room after it
/// runs short, and grows only for a command larger than itself. A command
/// split across reads is parsed on from where the parser stopped
/// (`ArgList`'s partial state), not from its start again.
fn apply_stream(
    shared: &Shared,
    applier: &mut Applier<'_>,
    generation: u64,
    conn: &mut Conn,
) -> io::Result<()> {
    const READ: usize = 1 << 16;
    let timeout = Duration::from_secs(u64::from(shared.config.read().repl_timeout));
    conn.r
        .get_ref()
        .set_read_timeout(Some(Duration::from_millis(100)))?;
    let limits = Limits {
        max_bulk_len: usize::MAX,
        unauthenticated: false,
        big_arg: usize::MAX,
        ..Limits::default()
    };
    // Bytes read before this call sit in the reader's buffer.
    let mut buf: Vec<u8> = conn.r.buffer().to_vec();
    let (mut start, mut end) = (0, buf.len());
    conn.r.consume(end);
    READ_OFFSET.fetch_add(end as u64, Ordering::Relaxed);
    buf.resize(end.max(2 * READ), 0);
    let mut last_ack = Instant::now();
    let mut last_io = Instant::now();
    let mut list = ArgList::new();
    loop {
        // Apply every whole command read.
        let mut ack = false;
        let stop = {
            let _apply = APPLY.lock();
            let mut stop = None;
            while start < end {
                if !current(generation) {
                    stop = Some(Ok(()));
                    break;
                }
                match parse_request(&buf[start..end], &limits, &mut list) {
                    Ok(Parsed::Complete { consumed }) => {
                        let raw = &buf[start..start + consumed];
                        if list.is_empty() {
                            // A bare newline: counts in the offset only.
                            applier.feed(raw);
                        } else if applier.apply(raw, &list) {
                            ack = true;
                        }
                        start += consumed;
                        if ack {
                            break;
                        }
                    }
                    Ok(_) => break,
                    Err(e) => {
                        stop = Some(Err(err(format!("Protocol error from the master: {e:?}"))));
                        break;
                    }
                }
            }
            applier.flush();
            stop
        };
        if let Some(result) = stop {
            return result;
        }
        if ack || last_ack.elapsed() >= Duration::from_secs(1) {
            send_ack(shared, conn)?;
            last_ack = Instant::now();
            if ack && start < end {
                continue;
            }
        }
        if start == end {
            (start, end) = (0, 0);
        } else if buf.len() - end < READ / 4 {
            // Short of room: the unfinished command goes to the front, and
            // one that still leaves too little doubles the buffer.
            if start > 0 {
                buf.copy_within(start..end, 0);
                (start, end) = (0, end - start);
            }
            if buf.len() - end < READ / 4 {
                buf.resize(buf.len() * 2, 0);
            }
        }
        match conn.r.get_mut().read(&mut buf[end..]) {
            Ok(0) => return Err(err("Connection with master lost.")),
            Ok(n) => {
                end += n;
                READ_OFFSET.fetch_add(n as u64, Ordering::Relaxed);
                last_io = Instant::now();
                LINK.lock().last_io = Some(last_io);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                if last_io.elapsed() > timeout {
                    return Err(err("MASTER timeout: no data nor PING received..."));
                }
                if !current(generation) {
                    return Ok(());
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// ROLE on a replica: ["slave", host, port, state, offset].
pub fn role(shared: &Shared, w: &mut cairn_protocol::resp::ReplyWriter<'_>) -> bool {
    let l = LINK.lock();
    let Some((host, port)) = &l.master else {
        return false;
    };
    w.array(5);
    w.bulk(b"slave");
    w.bulk(host.as_bytes());
    w.int(i64::from(*port));
    w.bulk(l.state.name().as_bytes());
    let offset = if l.state == LinkState::Connected {
        shared.replication.offset() as i64
    } else {
        -1
    };
    w.int(offset);
    true
}

/// INFO replication's replica fields, from `role` to `replica_announced`
/// (replication.c `genRedisInfoString`); None on a master.
pub fn info_fields(shared: &Shared) -> Option<Vec<(&'static str, String)>> {
    let l = LINK.lock();
    let (host, port) = l.master.clone()?;
    let up = LINK_UP.load(Ordering::Relaxed);
    let syncing = l.state == LinkState::Sync;
    let applied = shared.replication.offset();
    let read = READ_OFFSET.load(Ordering::Relaxed).max(applied);
    let cfg = shared.config.read();
    let mut f: Vec<(&'static str, String)> = vec![
        ("role", "slave".into()),
        ("master_host", host),
        ("master_port", port.to_string()),
        ("master_link_status", if up { "up" } else { "down" }.into()),
        (
            "master_last_io_seconds_ago",
            if up {
                secs_since(l.last_io).to_string()
            } else {
                "-1".into()
            },
        ),
        ("master_sync_in_progress", u8::from(syncing).to_string()),
        ("slave_read_repl_offset", read.to_string()),
        ("slave_repl_offset", applied.to_string()),
    ];
    if syncing {
        let left = if l.sync_total < 0 {
            0
        } else {
            (l.sync_total as u64).saturating_sub(l.sync_read) as i64
        };
        let perc = if l.sync_total > 0 {
            l.sync_read as f64 * 100.0 / l.sync_total as f64
        } else {
            0.0
        };
        f.push(("master_sync_total_bytes", l.sync_total.to_string()));
        f.push(("master_sync_read_bytes", l.sync_read.to_string()));
        f.push(("master_sync_left_bytes", left.to_string()));
        f.push(("master_sync_perc", format!("{perc:.2}")));
        f.push((
            "master_sync_last_io_seconds_ago",
            secs_since(l.last_io).to_string(),
        ));
    }
    if !up {
        f.push((
            "master_link_down_since_seconds",
            secs_since(l.down_since).to_string(),
        ));
    }
    f.push(("slave_priority", cfg.replica_priority.to_string()));
    f.push((
        "slave_read_only",
        u8::from(cfg.replica_read_only).to_string(),
    ));
    f.push((
        "replica_announced",
        u8::from(cfg.replica_announced).to_string(),
    ));
    Some(f)
}

fn secs_since(t: Option<Instant>) -> u64 {
    t.map_or(0, |t| t.elapsed().as_secs())
}

#[cfg(test)]
mod tests {
    use super::{keep_tail, mark_end};
    use proptest::prelude::*;

    proptest! {
        /// Fed in reads of any sizes, the mark is found exactly where it
        /// first ends in the whole payload (bytes that look like its start
        /// included), and nothing after it is taken.
        #[test]
        fn the_mark_is_found_across_any_reads(
            body in proptest::collection::vec(prop_oneof![Just(b'a'), Just(b'b'), any::<u8>()], 0..300),
            after in proptest::collection::vec(any::<u8>(), 0..60),
            cuts in proptest::collection::vec(1usize..90, 1..40),
        ) {
            let mark = b"abababababababababababababababababababab".to_vec();
            let mut payload = body.clone();
            payload.extend_from_slice(&mark);
            payload.extend_from_slice(&after);
            let want = payload.windows(40).position(|w| w == mark.as_slice()).unwrap() + 40;
            let (mut tail, mut done, mut got) = (Vec::new(), 0usize, None);
            let mut cut = cuts.iter().cycle();
            while done < payload.len() && got.is_none() {
                let n = (*cut.next().unwrap()).min(payload.len() - done);
                let buf = &payload[done..done + n];
                let mut take = buf.len();
                if let Some(end) = mark_end(&tail, buf, &mark) {
                    take = end;
                    got = Some(done + end);
                }
                keep_tail(&mut tail, &buf[..take]);
                done += take;
            }
            prop_assert_eq!(got, Some(want));
        }
    }
}
