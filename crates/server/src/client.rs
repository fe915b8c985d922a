//! Per-connection state: what a command handler may read and change
//! (`Client`), and the part other threads may see (`ClientInfo`, for CLIENT
//! LIST, CLIENT KILL and INFO clients); the client's description (its
//! CLIENT LIST line, also written to the log when the server closes it),
//! and ending its transaction and WATCHes. Shared by every protocol's
//! session; the worker reads it to decide when a connection may move,
//! time out or be woken.
use crate::shared::Shared;
use cairn_engine::{Cx, WatchFlag};
use cairn_protocol::resp::ArgList;
use cairn_protocol::resp::Protocol;
use parking_lot::Mutex;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::atomic::{
    AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};
use std::sync::Arc;
use std::time::Instant;

/// CLIENT REPLY's modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplyMode {
    On,
    Off,
    /// Drop the reply of the next command only.
    Skip,
}

/// What other threads can see of a connection. Fields are atomics or short
/// locks because the owning worker updates them while others read.
pub struct ClientInfo {
    pub id: u64,
    pub addr: SocketAddr,
    pub laddr: SocketAddr,
    pub fd: i32,
    /// The worker serving the connection; changes when `balance` moves it
    /// (only the new owner stores it, before it serves the connection).
    worker: AtomicUsize,
    pub created: Instant,
    pub name: Mutex<Option<Vec<u8>>>,
    pub db: AtomicU32,
    /// Index in the command table of the last command run (usize::MAX: none).
    pub last_cmd: AtomicUsize,
    /// Milliseconds since `created` at the last interaction.
    pub last_active_ms: AtomicU64,
    pub resp: AtomicU32,
    /// Set by CLIENT KILL from any thread; the owner closes the connection.
    pub killed: AtomicBool,
    pub monitor: AtomicBool,
    pub no_evict: AtomicBool,
    /// Channels, patterns and shard channels subscribed to (CLIENT LIST
    /// `sub=`/`psub=`/`ssub=`; any of them non-zero is flag `P`).
    pub sub: AtomicUsize,
    pub psub: AtomicUsize,
    pub ssub: AtomicUsize,
    pub qbuf: AtomicUsize,
    pub qbuf_free: AtomicUsize,
    pub obl: AtomicUsize,
    pub omem: AtomicUsize,
    /// Waiting in a blocking command (CLIENT LIST flag `b`).
    pub blocked: AtomicBool,
    /// CLIENT UNBLOCK's request from another thread: 0 none, 1 as if timed
    /// out, 2 with an error. The owning worker acts on it.
    pub unblock_req: AtomicU8,
    /// Commands queued since MULTI, or -1 outside MULTI (CLIENT LIST).
    pub multi: AtomicI64,
    /// Set when a WATCHed key changes (CLIENT LIST flag `d`, EXEC fails).
    pub dirty_cas: WatchFlag,
    /// Keys WATCHed (CLIENT LIST `watch=` in later Redis; kept for INFO).
    pub watching: AtomicUsize,
    /// The ACL user's name (CLIENT LIST `user=`, CLIENT KILL USER, ACL
    /// DELUSER closing its connections).
    pub user: Mutex<Vec<u8>>,
    /// Client-side caching's mode bits (`crate::tracking::mode`), set by
    /// the owner; other threads deliver by them and set BROKEN_REDIR.
    pub tracking: AtomicU8,
    /// CLIENT TRACKING's REDIRECT id (0: none).
    pub redir: AtomicU64,
    /// Invalidation messages other threads addressed to this connection,
    /// written by its worker (`crate::tracking`).
    pub inbox: Mutex<Vec<u8>>,
    /// `inbox` is not empty: a look without its lock.
    pub inbox_pending: AtomicBool,
    /// A replica attached to this master (PSYNC/SYNC ran): CLIENT LIST
    /// flag `S`, type `replica`. Its link is `replication::link`'s.
    pub replica: AtomicBool,
    /// This server's master link, as the replica side applies it
    /// (`replication::replica`): CLIENT LIST flag `M`, type `master`.
    pub master: AtomicBool,
}

impl ClientInfo {
    pub fn new(id: u64, addr: SocketAddr, laddr: SocketAddr, fd: i32, worker: usize) -> Self {
        ClientInfo {
            id,
            addr,
            laddr,
            fd,
            worker: AtomicUsize::new(worker),
            created: Instant::now(),
            name: Mutex::new(None),
            db: AtomicU32::new(0),
            last_cmd: AtomicUsize::new(usize::MAX),
            last_active_ms: AtomicU64::new(0),
            resp: AtomicU32::new(2),
            killed: AtomicBool::new(false),
            monitor: AtomicBool::new(false),
            no_evict: AtomicBool::new(false),
            sub: AtomicUsize::new(0),
            psub: AtomicUsize::new(0),
            ssub: AtomicUsize::new(0),
            qbuf: AtomicUsize::new(0),
            qbuf_free: AtomicUsize::new(0),
            obl: AtomicUsize::new(0),
            omem: AtomicUsize::new(0),
            blocked: AtomicBool::new(false),
            unblock_req: AtomicU8::new(0),
            multi: AtomicI64::new(-1),
            dirty_cas: Arc::new(AtomicBool::new(false)),
            watching: AtomicUsize::new(0),
            user: Mutex::new(b"default".to_vec()),
            tracking: AtomicU8::new(0),
            redir: AtomicU64::new(0),
            inbox: Mutex::new(Vec::new()),
            inbox_pending: AtomicBool::new(false),
            replica: AtomicBool::new(false),
            master: AtomicBool::new(false),
        }
    }

    /// The worker serving this client now.
    pub fn worker(&self) -> usize {
        self.worker.load(Ordering::Relaxed)
    }

    pub fn set_worker(&self, w: usize) {
        self.worker.store(w, Ordering::Relaxed);
    }

    pub fn idle_secs(&self) -> u64 {
        let now = self.created.elapsed().as_millis() as u64;
        now.saturating_sub(self.last_active_ms.load(Ordering::Relaxed)) / 1000
    }

    /// Records activity at `now` (the worker's time for this loop turn).
    pub fn mark_active(&self, now: Instant) {
        self.last_active_ms.store(
            now.saturating_duration_since(self.created).as_millis() as u64,
            Ordering::Relaxed,
        );
    }
}

/// A connection's own state, touched only by the worker that owns it.
pub struct Client {
    pub id: u64,
    pub db: usize,
    pub proto: Protocol,
    pub authenticated: bool,
    /// The ACL user whose rules apply; None for the server's own clients
    /// (journal replay), which may run anything, as Redis's user-less
    /// clients. Refreshed from the registry when its generation moves.
    pub user: Option<Arc<crate::auth::acl::User>>,
    /// The registry generation `user` was read at.
    pub user_gen: u64,
    /// The top-level command running (the EVAL of a script's calls), as
    /// the ACL log's client line names it.
    pub running: &'static str,
    pub reply_mode: ReplyMode,
    /// Close once the replies so far are written (QUIT, CLIENT KILL self,
    /// protocol error).
    pub close_after_reply: bool,
    /// Argument positions of the running command that MONITOR and SLOWLOG
    /// must show as `(redacted)` (passwords in AUTH, HELLO, CONFIG SET);
    /// handlers set bits, the dispatcher clears them per command.
    pub redact: u64,
    pub info: Arc<ClientInfo>,
    /// Pub/Sub subscriptions of this connection.
    pub subs: crate::pubsub::ClientSubs,
    /// Set by `Ctx::block` during a run: the command found nothing and
    /// waits on these keys. The dispatcher turns it into `Outcome::Blocked`.
    pub wants_block: Option<BlockOn>,
    /// The wait the request at the head of the connection is in, if any.
    pub blocked: Option<BlockOn>,
    /// Why a blocked command runs again without a ready key.
    pub unblock: Option<Unblock>,
    /// A read of the disk tier the request at the head waits for
    /// (`crate::tier_io`).
    pub tier: crate::tier_io::Parking,
    /// True while EXEC runs this client's queued commands: blocking
    /// commands answer at once as if timed out.
    pub in_exec: bool,
    /// A script is running its commands through this client: MONITOR
    /// shows them as "lua", the slow log leaves them out.
    pub in_script: bool,
    /// Inside MULTI: the commands queued so far.
    pub multi: Option<MultiState>,
    /// Keys this client WATCHes, as (db, key, whether the key existed when
    /// the watch began).
    pub watched: Vec<(usize, Box<[u8]>, bool)>,
    /// Large values referenced by the replies in the output buffer
    /// (`crate::outref`): handlers add them, the worker writes them.
    pub out_refs: crate::outref::OutRefs,
    /// Pushes this client's own running command addressed to it (its
    /// subscriptions' confirmations, a PUBLISH or keyspace event it is
    /// subscribed to), placed around the reply when the command ends.
    pub pushes: crate::pubsub::SelfPushes,
    /// End of what this client's commands appended to the journal since
    /// the worker last looked (0: nothing): under `appendfsync always` its
    /// replies wait until the journal is synced that far.
    pub journal_end: u64,
    /// The replication stream's end after this client's last command that
    /// fed it (Redis's `c->woff`): what WAIT waits for.
    pub woff: u64,
    /// Client-side caching: BCAST prefixes and CLIENT CACHING's answer.
    pub tracking: crate::tracking::ClientTracking,
    /// What REPLCONF told of the replica on this connection.
    pub replconf: Option<Box<crate::replication::link::ReplicaConf>>,
    /// Set by PSYNC/SYNC with `close_after_reply`: once the replies are
    /// written the worker gives the socket (blocking again) and the bytes
    /// it read past the request to this, instead of closing it. The
    /// client stays registered (CLIENT LIST); the receiver unregisters it.
    pub handoff: Option<Handoff>,
    /// SCRIPT DEBUG SYNC or YES is on: the next EVAL runs as a debugging
    /// session.
    pub script_debug: bool,
    /// SCRIPT DEBUG YES: the session runs on its own thread against a
    /// private copy of the dataset (`crate::script::debug::fork`).
    pub script_debug_fork: bool,
    /// Set by an EVAL under SCRIPT DEBUG YES with `close_after_reply`: once
    /// the replies are written the worker gives the whole connection (its
    /// transport, plain or TLS, with the bytes read past the request) as a
    /// `DebugLink`, and the client itself, to this instead of closing it.
    /// The client leaves the registry, as Redis's parent frees it.
    pub take_transport: Option<TransportHandoff>,
    /// The connection's blocking link, lent by the connection layer while
    /// this client's requests run, only when `script_debug` is on.
    pub link: LinkSlot,
    /// Blocked clients this client's command woke and must wait for, and
    /// the waits of others this client was woken to serve
    /// (`crate::served`).
    pub served: crate::served::ServeWait,
}

/// A connection as a SCRIPT DEBUG session uses it (Redis makes the socket
/// blocking and calls `connRead`/`connWrite` from the Lua hook): raw bytes
/// in and out, over the connection's own transport, plain or TLS. The
/// connection layer implements it and knows nothing of what the bytes say.
pub trait DebugLink {
    /// Reads what the client sent into `buf`, waiting at most `wait`:
    /// Ok(None) if nothing came, Ok(Some(0)) once the client closed.
    fn read(&mut self, buf: &mut [u8], wait: std::time::Duration)
        -> std::io::Result<Option<usize>>;
    /// Writes all of `bytes`, waiting for the socket as long as Redis's
    /// 5 s send timeout.
    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()>;
}

/// Where the connection layer lends its `DebugLink` for the length of one
/// `Session::process` call.
#[derive(Default)]
pub struct LinkSlot(Option<std::ptr::NonNull<dyn DebugLink + 'static>>);

// SAFETY: the pointer is set and cleared by the worker thread that owns
// the connection, around one call on that thread (`lend`); it is never
// set while a connection moves between workers.
unsafe impl Send for LinkSlot {}

impl LinkSlot {
    /// Lends `link` until `clear`.
    ///
    /// # Safety
    /// `clear` must be called before `link` is moved or dropped, and
    /// nothing else may use `link` meanwhile.
    pub unsafe fn lend(&mut self, link: &mut dyn DebugLink) {
        let p: std::ptr::NonNull<dyn DebugLink + '_> = std::ptr::NonNull::from(link);
        self.0 = Some(std::mem::transmute::<
            std::ptr::NonNull<dyn DebugLink + '_>,
            std::ptr::NonNull<dyn DebugLink + 'static>,
        >(p));
    }

    pub fn clear(&mut self) {
        self.0 = None;
    }

    /// The lent link, if any, for the length of `f`.
    pub fn with<R>(&mut self, f: impl FnOnce(Option<&mut dyn DebugLink>) -> R) -> R {
        match self.0.take() {
            Some(mut p) => {
                // SAFETY: `lend`'s contract: valid until `clear`, which the
                // lender calls only after the request that runs `f` ended.
                let r = f(Some(unsafe { p.as_mut() }));
                self.0 = Some(p);
                r
            }
            None => f(None),
        }
    }
}

/// What takes over a connection's socket (`Client::handoff`).
pub type Handoff = Box<dyn FnOnce(crate::net::transport::Transport, Vec<u8>) + Send>;

/// What takes over a connection whole (`Client::take_transport`).
pub type TransportHandoff = Box<dyn FnOnce(Box<dyn DebugLink + Send>, Box<Client>) + Send>;

/// A transaction being queued.
#[derive(Default)]
pub struct MultiState {
    /// Each queued command: its table id and its arguments.
    pub queued: Vec<(usize, ArgList)>,
    /// A command was refused while queueing: EXEC answers EXECABORT.
    pub aborted: bool,
    /// Some queued command may grow memory (EXEC is refused under OOM).
    pub denyoom: bool,
}

/// The keys a blocked command waits on, and until when.
#[derive(Clone, Debug)]
pub struct BlockOn {
    pub db: usize,
    pub keys: Vec<Box<[u8]>>,
    /// Unix ms at which the wait ends; 0 waits forever.
    pub deadline_ms: u64,
    /// XREAD's IDs as resolved when it first ran (`$` is the last ID at
    /// that moment, not at each retry); empty for other commands.
    pub stream_ids: Vec<cairn_engine::value::stream::StreamId>,
}

/// How a blocked command ends without data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unblock {
    /// Its time ran out, or CLIENT UNBLOCK ... TIMEOUT.
    Timeout,
    /// CLIENT UNBLOCK ... ERROR.
    Error,
}

impl Client {
    pub fn new(
        info: Arc<ClientInfo>,
        authenticated: bool,
        user: Option<Arc<crate::auth::acl::User>>,
    ) -> Client {
        Client {
            id: info.id,
            db: 0,
            proto: Protocol::Resp2,
            authenticated,
            user,
            user_gen: 0,
            running: "NULL",
            reply_mode: ReplyMode::On,
            close_after_reply: false,
            redact: 0,
            info,
            subs: Default::default(),
            wants_block: None,
            blocked: None,
            unblock: None,
            tier: Default::default(),
            in_exec: false,
            in_script: false,
            multi: None,
            watched: Vec::new(),
            out_refs: Default::default(),
            pushes: Default::default(),
            journal_end: 0,
            woff: 0,
            tracking: Default::default(),
            replconf: None,
            handoff: None,
            script_debug: false,
            script_debug_fork: false,
            take_transport: None,
            link: LinkSlot::default(),
            served: Default::default(),
        }
    }

    /// Notes the journal end of a command this client ran (0: none).
    pub fn note_journal_end(&mut self, end: u64) {
        self.journal_end = self.journal_end.max(end);
    }

    /// Takes the journal end noted since the last call (0: none).
    pub fn take_journal_end(&mut self) -> u64 {
        std::mem::take(&mut self.journal_end)
    }

    /// Hides argument `i` of the running command from MONITOR and SLOWLOG
    /// (Redis's `redactClientCommandArgument`).
    pub fn redact_arg(&mut self, i: usize) {
        if i < 64 {
            self.redact |= 1 << i;
        }
    }

    pub fn set_db(&mut self, db: usize) {
        self.db = db;
        self.info.db.store(db as u32, Ordering::Relaxed);
    }
}

/// Ends a transaction without running it (DISCARD, a refused EXEC, RESET).
pub fn discard_transaction(shared: &Shared, cx: &Cx, client: &mut Client) {
    client.multi = None;
    client.info.multi.store(-1, Ordering::Relaxed);
    unwatch_all(shared, cx, client);
}

/// Drops every WATCH of `client` and clears its dirty flag. Also run when
/// the connection closes, so no shard keeps a dead client's flag. `cx`:
/// the command that asks (EXEC's, with its hold), or `Cx::DETACHED`
/// outside any command.
pub fn unwatch_all(shared: &Shared, cx: &Cx, client: &mut Client) {
    let e = &shared.engine;
    for (db, key, _) in client.watched.drain(..) {
        let k = e.key(&key);
        e.lock(cx, &k).unwatch(db, &k, &client.info.dirty_cas);
    }
    client.info.dirty_cas.store(false, Ordering::Relaxed);
    client.info.watching.store(0, Ordering::Relaxed);
}

/// True while the client is subscribed to anything (CLIENT LIST flag `P`).
pub fn is_subscriber(c: &ClientInfo) -> bool {
    c.sub.load(Ordering::Relaxed) + c.psub.load(Ordering::Relaxed) + c.ssub.load(Ordering::Relaxed)
        > 0
}

/// Redis's `catClientInfoString` for a client seen from another thread
/// (no trailing newline), for log lines such as the output-buffer-limit
/// disconnection.
pub fn describe(shared: &Shared, c: &ClientInfo) -> String {
    let mut out = Vec::new();
    client_line(&mut out, shared, c, None);
    if out.last() == Some(&b'\n') {
        out.pop();
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The client whose command is writing the line, with that command:
/// `qbuf` and `argv-mem` are the running request's, as its front end
/// measures them.
pub struct Running<'a> {
    pub client: &'a Client,
    pub qbuf: usize,
    pub argv_mem: usize,
    pub cmd: &'static str,
}

pub fn client_line(out: &mut Vec<u8>, shared: &Shared, c: &ClientInfo, me: Option<Running>) {
    let is_me = me.is_some();
    let mut flags = String::new();
    if c.monitor.load(Ordering::Relaxed) {
        flags.push('O');
    } else if c.replica.load(Ordering::Relaxed) {
        flags.push('S');
    } else if c.master.load(Ordering::Relaxed) {
        flags.push('M');
    }
    if is_subscriber(c) {
        flags.push('P');
    }
    if c.multi.load(Ordering::Relaxed) >= 0 {
        flags.push('x');
    }
    if c.blocked.load(Ordering::Relaxed) {
        flags.push('b');
    }
    let tracking = c.tracking.load(Ordering::Relaxed);
    if tracking & crate::tracking::mode::ON != 0 {
        flags.push('t');
    }
    if tracking & crate::tracking::mode::BROKEN_REDIR != 0 {
        flags.push('R');
    }
    if tracking & crate::tracking::mode::BCAST != 0 {
        flags.push('B');
    }
    if c.dirty_cas.load(Ordering::Relaxed) {
        flags.push('d');
    }
    if me.as_ref().is_some_and(|m| m.client.close_after_reply) {
        flags.push('c');
    }
    if c.no_evict.load(Ordering::Relaxed) {
        flags.push('e');
    }
    if flags.is_empty() {
        flags.push('N');
    }
    let (qbuf, argv_mem, cmd) = if let Some(m) = &me {
        (m.qbuf, m.argv_mem, m.cmd)
    } else {
        let last = c.last_cmd.load(Ordering::Relaxed);
        let cmd = if last < shared.table.all().len() {
            shared.table.get(last).name
        } else {
            "NULL"
        };
        (c.qbuf.load(Ordering::Relaxed), 0, cmd)
    };
    let qbuf_free = c.qbuf_free.load(Ordering::Relaxed);
    let rbs = c.omem.load(Ordering::Relaxed);
    let obl = c.obl.load(Ordering::Relaxed);
    let tot_mem = qbuf
        + qbuf_free
        + argv_mem
        + rbs
        + std::mem::size_of::<ClientInfo>()
        + std::mem::size_of::<Client>();
    let events = if obl > 0 { "rw" } else { "r" };
    let idle = if is_me { 0 } else { c.idle_secs() };
    let _ = write!(
        out,
        "id={} addr={} laddr={} fd={} name=",
        c.id, c.addr, c.laddr, c.fd
    );
    if let Some(n) = c.name.lock().as_deref() {
        out.extend_from_slice(n);
    }
    let _ = writeln!(
        out,
        " age={} idle={} flags={} db={} sub={} psub={} ssub={} multi={} qbuf={} qbuf-free={} \
         argv-mem={} multi-mem=0 rbs={} rbp={} obl={} oll=0 omem={} tot-mem={} events={} \
         cmd={} user={} redir={} resp={}",
        c.created.elapsed().as_secs(),
        idle,
        flags,
        c.db.load(Ordering::Relaxed),
        c.sub.load(Ordering::Relaxed),
        c.psub.load(Ordering::Relaxed),
        c.ssub.load(Ordering::Relaxed),
        c.multi.load(Ordering::Relaxed),
        qbuf,
        qbuf_free,
        argv_mem,
        rbs,
        rbs,
        obl,
        rbs,
        tot_mem,
        events,
        cmd,
        String::from_utf8_lossy(&c.user.lock()),
        if tracking & crate::tracking::mode::ON != 0 {
            c.redir.load(Ordering::Relaxed) as i64
        } else {
            -1
        },
        c.resp.load(Ordering::Relaxed),
    );
}
