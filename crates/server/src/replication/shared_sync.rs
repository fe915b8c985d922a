//! Full resynchronisations that share one image, as Redis 7.0 shares one
//! fork: a replica that needs a full sync joins a *group*, and each group
//! makes one cut (`snap::begin`, fork-less) for all its replicas.
//!
//! - **Diskless** (`repl-diskless-sync yes` and the replica said `capa
//!   eof`): the group waits `repl-diskless-sync-delay` seconds from its
//!   first replica, or until `repl-diskless-sync-max-replicas` replicas
//!   wait (Redis's `replicationStartPendingFork`), then closes, makes the
//!   cut and streams the one image to every socket at once; a replica
//!   asking later waits for the next group, as Redis's do for the next
//!   fork. The slowest replica sets the pace, as Redis's pipe to its
//!   replicas is read only when all of them took the last block.
//! - **Disk**: the cut is made at once and written to a file in `dir`; a
//!   disk replica that asks while the file is written joins it (Redis's
//!   "a BGSAVE for replication is in progress, attach to it"): the cut
//!   kept a reader of the stream at its offset (the *pin*), so the new
//!   replica's reader starts at that same byte, and `+FULLRESYNC` names
//!   the cut's ID and offset. Once the file is whole every replica's own
//!   link thread sends it (`$<len>`) in parallel; the file goes when the
//!   last is done. The pin goes as the file is complete, so it holds the
//!   buffer's blocks from the cut only while a save runs.
//!
//! The group's first replica's link thread is the *leader*: it waits, cuts
//! and writes; the others wait for their share (`Ticket`). INFO stats
//! `repl_full_sync_images` counts the images (Redis's `total_forks` for a
//! fork-based server), `sync_full` the replicas served.
use super::link::{Replica, ReplicaConf, Request, SEND_BULK};
use super::tls_link::LinkSocket;
use crate::log;
use crate::shared::Shared;
use cairn_engine::Cx;
use cairn_persist::snapshot as snap;
use parking_lot::{Condvar, Mutex};
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Images made for full syncs since start (INFO stats
/// `repl_full_sync_images`): one per cut, however many replicas share it.
pub static IMAGES: AtomicU64 = AtomicU64::new(0);

/// The groups still taking replicas, of every server in the process (a
/// group names its server).
static OPEN: Mutex<Vec<Arc<Group>>> = Mutex::new(Vec::new());

/// What a full sync sent, for the link's stream to go on from.
pub struct Synced {
    /// The replica's reader of the buffer, from the byte after the cut.
    pub reader: usize,
    /// The `kick` generation at the cut.
    pub generation: u64,
    /// The image went `$EOF:`-framed (the stream then waits for an ACK).
    pub eof: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Diskless,
    Disk,
}

/// A replica in a group: where to write, and its answer once done.
struct Member {
    replica: Arc<Replica>,
    /// PSYNC (not SYNC): `+FULLRESYNC` goes first.
    psync: bool,
    out: LinkSocket,
    ticket: Arc<Ticket>,
}

/// One replica's share of a group's work, filled by the leader.
#[derive(Default)]
struct Ticket {
    done: Mutex<Option<io::Result<Share>>>,
    ready: Condvar,
}

/// What the leader did for one replica.
enum Share {
    /// The image is on the replica's socket (diskless).
    Sent { reader: usize, generation: u64 },
    /// `+FULLRESYNC` is sent; the replica's thread sends the file.
    File {
        reader: usize,
        generation: u64,
        file: Arc<TempFile>,
    },
}

impl Ticket {
    fn give(&self, share: io::Result<Share>) {
        *self.done.lock() = Some(share);
        self.ready.notify_all();
    }

    fn wait(&self) -> io::Result<Share> {
        let mut d = self.done.lock();
        loop {
            if let Some(r) = d.take() {
                return r;
            }
            self.ready.wait(&mut d);
        }
    }
}

/// A group: its replicas until the cut, then (disk) the cut's point for
/// replicas that join while the file is written.
struct Group {
    /// The server it belongs to (`Arc::as_ptr` of its `Shared`).
    server: usize,
    mode: Mode,
    /// When its first replica asked (the delay counts from there).
    since: Instant,
    state: Mutex<GroupState>,
    changed: Condvar,
}

#[derive(Default)]
struct GroupState {
    members: Vec<Member>,
    /// Set at the cut: (pin reader, generation, replid, offset).
    cut: Option<(usize, u64, String, u64)>,
}

/// A temporary RDB file in `dir`, removed with its last user.
struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A full sync for `replica`: joins (or starts) a group, and returns once
/// the image is on its socket (or, in disk mode, the file sent).
pub fn full_sync(
    shared: &Arc<Shared>,
    replica: &Arc<Replica>,
    conf: &ReplicaConf,
    req: &Request,
    out: &mut LinkSocket,
) -> io::Result<Synced> {
    super::create_backlog(shared, &Cx::DETACHED, None);
    let mode = if conf.capa_eof && shared.config.read().repl_diskless_sync {
        Mode::Diskless
    } else {
        Mode::Disk
    };
    let ticket = Arc::new(Ticket::default());
    let member = Member {
        replica: replica.clone(),
        psync: matches!(req, Request::Psync { .. }),
        out: out.try_clone()?,
        ticket: ticket.clone(),
    };
    let who = format!("{}:{}", replica.ip, replica.port);
    log::notice(&format!(
        "Full resync requested by replica {who}; starting a fork-less RDB transfer ({})",
        if mode == Mode::Diskless {
            "diskless"
        } else {
            "disk"
        }
    ));
    if let Some(group) = join(shared, mode, member) {
        lead(shared, &group);
    }
    match ticket.wait()? {
        Share::Sent { reader, generation } => Ok(Synced {
            reader,
            generation,
            eof: true,
        }),
        Share::File {
            reader,
            generation,
            file,
        } => {
            let sent = send_file(&file, out);
            drop(file);
            if let Err(e) = sent {
                shared.replication.detach(reader);
                return Err(e);
            }
            Ok(Synced {
                reader,
                generation,
                eof: false,
            })
        }
    }
}

fn server_id(shared: &Arc<Shared>) -> usize {
    Arc::as_ptr(shared) as usize
}

/// Adds `member` to an open group of its mode; returns the group when it
/// is a new one, which this thread then leads.
fn join(shared: &Arc<Shared>, mode: Mode, member: Member) -> Option<Arc<Group>> {
    let server = server_id(shared);
    let mut open = OPEN.lock();
    if let Some(g) = open.iter().find(|g| g.server == server && g.mode == mode) {
        let mut st = g.state.lock();
        match &st.cut {
            None => {
                st.members.push(member);
                g.changed.notify_all();
                return None;
            }
            // A disk save running: the replica starts at the cut's byte.
            Some((_, generation, replid, offset)) => {
                let r = &shared.replication;
                let reader = (r.generation() == *generation)
                    .then(|| r.attach(offset + 1))
                    .flatten();
                if let Some(reader) = reader {
                    let share = fullresync(shared, &member, reader, replid, *offset)
                        .map(|()| (reader, *generation));
                    if share.is_err() {
                        r.detach(reader);
                    }
                    // Redis's line when a replica attaches to a save.
                    log::notice("Waiting for end of BGSAVE for SYNC");
                    match share {
                        Ok(_) => st.members.push(member),
                        Err(e) => member.ticket.give(Err(e)),
                    }
                    return None;
                }
                // The IDs moved since that cut: it cannot serve; a new
                // group takes this replica.
            }
        }
    }
    let group = Arc::new(Group {
        server,
        mode,
        since: Instant::now(),
        state: Mutex::new(GroupState {
            members: vec![member],
            cut: None,
        }),
        changed: Condvar::new(),
    });
    open.retain(|g| !(g.server == server && g.mode == mode));
    open.push(group.clone());
    Some(group)
}

/// The group stops taking replicas.
fn close(group: &Arc<Group>) {
    OPEN.lock().retain(|g| !Arc::ptr_eq(g, group));
}

/// The leader's work: wait (diskless), cut, write, hand out the shares.
fn lead(shared: &Arc<Shared>, group: &Arc<Group>) {
    if group.mode == Mode::Diskless {
        let (delay, max) = {
            let c = shared.config.read();
            (
                Duration::from_secs(u64::from(c.repl_diskless_sync_delay)),
                c.repl_diskless_sync_max_replicas as usize,
            )
        };
        let mut st = group.state.lock();
        loop {
            if max > 0 && st.members.len() >= max {
                break;
            }
            let left = delay.saturating_sub(group.since.elapsed());
            if left.is_zero() {
                break;
            }
            group.changed.wait_for(&mut st, left);
        }
        drop(st);
        // Later replicas wait for the next image, as Redis's do.
        close(group);
    }
    let result = cut_and_write(shared, group);
    close(group);
    let mut st = group.state.lock();
    if let Some((pin, ..)) = st.cut.take() {
        shared.replication.detach(pin);
    }
    let members = std::mem::take(&mut st.members);
    drop(st);
    match result {
        Ok(shares) => {
            for (m, share) in members.into_iter().zip(shares) {
                m.ticket.give(share);
            }
        }
        Err(e) => {
            for m in members {
                m.ticket.give(Err(io::Error::new(e.kind(), e.to_string())));
            }
        }
    }
}

/// Makes the group's cut and writes its image: to every member's socket
/// (diskless) or to a file (disk). One share per member, in order, for
/// the members at the end (disk members may join during the write).
fn cut_and_write(shared: &Arc<Shared>, group: &Arc<Group>) -> io::Result<Vec<io::Result<Share>>> {
    let r = &shared.replication;
    let mut opts = crate::snapshots::options(shared);
    opts.format = snap::Format::Rdb;
    opts.used_mem = crate::memory::used_fast();
    let timeout = Duration::from_secs(u64::from(shared.config.read().repl_timeout.max(1)));
    let started = Instant::now();
    // One cut at a time in the engine: a running BGSAVE or journal
    // rewrite finishes first.
    let (cut, pin) = loop {
        let (mut pin, mut repl) = (None, None);
        match snap::begin(&shared.engine, &Cx::DETACHED, &opts, || {
            pin = r.attach_at_cut();
            // `repl-stream-db` tells the replica where the stream goes on.
            repl = super::restart::at_cut(shared);
        }) {
            Ok(mut cut) => {
                cut.set_repl(repl);
                break (cut, pin);
            }
            Err(snap::SaveError::InProgress) if started.elapsed() < timeout => {
                let st = group.state.lock();
                if st
                    .members
                    .iter()
                    .all(|m| m.replica.info.killed.load(Ordering::Relaxed))
                {
                    return Err(io::Error::other("killed"));
                }
                drop(st);
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => return Err(io::Error::other(e.to_string())),
        }
    };
    let Some((pin, generation, replid, offset)) = pin else {
        cut.abandon(&shared.engine);
        return Err(io::Error::other("no backlog at the cut"));
    };
    IMAGES.fetch_add(1, Ordering::Relaxed);
    // Every member so far starts at the cut; the pin keeps that byte in
    // the buffer for disk replicas that join during the write.
    let mut readers = Vec::new();
    {
        let mut st = group.state.lock();
        for m in &st.members {
            let reader = r.attach(offset + 1);
            let share = match reader {
                Some(id) => fullresync(shared, m, id, &replid, offset).map(|()| id),
                None => Err(io::Error::other("the backlog lost the cut's offset")),
            };
            if let (Err(_), Some(id)) = (&share, reader) {
                r.detach(id);
            }
            readers.push(share);
        }
        st.cut = Some((pin, generation, replid.clone(), offset));
    }
    log::notice(&format!(
        "Starting a fork-less RDB image for SYNC with target: {} ({} replicas)",
        if group.mode == Mode::Diskless {
            "replicas sockets"
        } else {
            "disk"
        },
        readers.len()
    ));
    match group.mode {
        Mode::Diskless => {
            let st = group.state.lock();
            let outs: Vec<Option<LinkSocket>> = st
                .members
                .iter()
                .zip(&readers)
                .map(|(m, r)| r.as_ref().ok().and_then(|_| m.out.try_clone().ok()))
                .collect();
            drop(st);
            let failed = stream_image(shared, cut, outs);
            let mut shares = Vec::new();
            for (share, fail) in readers.into_iter().zip(failed) {
                shares.push(match (share, fail) {
                    (Ok(id), None) => Ok(Share::Sent {
                        reader: id,
                        generation,
                    }),
                    (Ok(id), Some(e)) => {
                        r.detach(id);
                        Err(e)
                    }
                    (Err(e), _) => Err(e),
                });
            }
            Ok(shares)
        }
        Mode::Disk => {
            let file = write_file(shared, cut);
            // No replica joins from here on; those that joined during the
            // write had their readers attached then (`join`).
            close(group);
            let st = group.state.lock();
            let mut all: Vec<io::Result<usize>> = readers;
            for m in st.members.iter().skip(all.len()) {
                all.push(
                    m.replica
                        .reader()
                        .ok_or_else(|| io::Error::other("no reader")),
                );
            }
            drop(st);
            Ok(all
                .into_iter()
                .map(|share| match (share, &file) {
                    (Ok(id), Ok(f)) => Ok(Share::File {
                        reader: id,
                        generation,
                        file: f.clone(),
                    }),
                    (Ok(id), Err(e)) => {
                        r.detach(id);
                        Err(io::Error::new(e.kind(), e.to_string()))
                    }
                    (Err(e), _) => Err(e),
                })
                .collect())
        }
    }
}

/// A member's reader is attached at the cut: `+FULLRESYNC` (for PSYNC),
/// counted in `sync_full`, and INFO shows it receiving.
fn fullresync(
    shared: &Shared,
    m: &Member,
    reader: usize,
    replid: &str,
    offset: u64,
) -> io::Result<()> {
    m.replica.set_reader(reader);
    shared.replication.sync_full.fetch_add(1, Ordering::Relaxed);
    m.replica.set_state(SEND_BULK);
    if m.psync {
        m.out
            .try_clone()?
            .write_all(format!("+FULLRESYNC {replid} {offset}\r\n").as_bytes())?;
    }
    Ok(())
}

/// Streams one image to every socket in `outs` (`$EOF:<mark>`, the RDB,
/// the mark); a socket that fails drops out and the others go on. Returns
/// each one's failure (None: sent; a `None` socket counts as failed).
fn stream_image(
    shared: &Shared,
    cut: snap::Cut,
    outs: Vec<Option<LinkSocket>>,
) -> Vec<Option<io::Error>> {
    let mark = eof_mark();
    let fan = Fan {
        outs: outs
            .into_iter()
            .map(|o| match o {
                Some(s) => Ok(s),
                None => Err(io::Error::other("not attached")),
            })
            .collect(),
    };
    let fan = Arc::new(Mutex::new(fan));
    fan.lock()
        .write_all(format!("$EOF:{mark}\r\n").as_bytes())
        .ok();
    let sink = BufWriter::with_capacity(64 * 1024, FanRef(fan.clone()));
    let written = snap::write_to(
        &shared.engine,
        cut,
        Box::new(sink),
        &PathBuf::from("replica sockets"),
    );
    let mut fan = fan.lock();
    match written {
        Ok(_) => {
            let _ = fan.write_all(mark.as_bytes());
        }
        Err(e) => {
            let e = e.to_string();
            for o in fan.outs.iter_mut() {
                if o.is_ok() {
                    *o = Err(io::Error::other(e.clone()));
                }
            }
        }
    }
    std::mem::take(&mut fan.outs)
        .into_iter()
        .map(|o| o.err())
        .collect()
}

/// The replicas' sockets as one writer: each write goes to every socket
/// still up; it fails only when none is.
struct Fan {
    outs: Vec<io::Result<LinkSocket>>,
}

impl Write for Fan {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        for o in self.outs.iter_mut() {
            if let Ok(s) = o {
                if let Err(e) = s.write_all(buf) {
                    let _ = s.shutdown(std::net::Shutdown::Both);
                    *o = Err(e);
                }
            }
        }
        if self.outs.iter().any(|o| o.is_ok()) {
            Ok(buf.len())
        } else {
            Err(io::Error::other("every replica of the transfer is gone"))
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// `Fan` behind the `Send + 'static` box the snapshot writer takes.
struct FanRef(Arc<Mutex<Fan>>);

impl Write for FanRef {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The image written to `dir/temp-repl-<pid>-<n>.rdb` for the disk
/// framing, as Redis's disk-based sync sends its BGSAVE file.
fn write_file(shared: &Shared, cut: snap::Cut) -> io::Result<Arc<TempFile>> {
    let dir = PathBuf::from(&shared.config.read().dir);
    let tmp = TempFile(dir.join(format!(
        "temp-repl-{}-{}.rdb",
        std::process::id(),
        rand::random::<u32>()
    )));
    let file = std::fs::File::create(&tmp.0)?;
    snap::write_to(&shared.engine, cut, Box::new(BufWriter::new(file)), &tmp.0)
        .map_err(|e| io::Error::other(e.to_string()))?;
    Ok(Arc::new(tmp))
}

/// `$<len>\r\n` and the file.
fn send_file(file: &TempFile, out: &mut LinkSocket) -> io::Result<()> {
    let mut f = std::fs::File::open(&file.0)?;
    let len = f.metadata()?.len();
    out.write_all(format!("${len}\r\n").as_bytes())?;
    io::copy(&mut f, out)?;
    Ok(())
}

/// 40 random hex characters (Redis's `getRandomHexChars` for the mark).
fn eof_mark() -> String {
    (0..40)
        .map(|_| char::from_digit(rand::random_range(0..16u32), 16).unwrap_or('0'))
        .collect()
}
