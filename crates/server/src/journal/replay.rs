//! Start-up: loads the journal directory — the base snapshot if there is
//! one, then each journal file in the manifest's order — by running every
//! record through the ordinary command table (Redis's `loadAppendOnlyFiles`
//! with a fake client). A torn tail of the last file is dropped with a
//! warning when `aof-load-truncated` allows (Redis's default); any other
//! damage stops start-up with the file, the offset and the reason.
use super::Paths;
use crate::client::{Client, ClientInfo};
use crate::exec::dispatch;
use crate::log;
use crate::resp::ctx::Args;
use crate::shared::Shared;
use cairn_engine::record::{Record, Tag};
use cairn_engine::value::StrValue;
use cairn_engine::{Expiry, Value};
use cairn_persist::journal::frame::{self, End};
use cairn_persist::journal::Manifest;
use cairn_protocol::resp::{parse_request, ArgList, Limits, Parsed};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Replays records against the server, as a client that never blocks
/// (blocking commands run in their non-blocking form, as inside EXEC).
pub struct Replayer<'s> {
    shared: &'s Shared,
    client: Client,
    out: Vec<u8>,
    /// Commands that answered an error on replay (divergence: logged).
    pub errors: u64,
    pub commands: u64,
}

impl<'s> Replayer<'s> {
    pub fn new(shared: &'s Shared) -> Replayer<'s> {
        let addr = std::net::SocketAddr::from(([0, 0, 0, 0], 0));
        let info = Arc::new(ClientInfo::new(0, addr, addr, -1, 0));
        // No user: the journal's own commands may run anything.
        let mut client = Client::new(info, true, None);
        client.in_exec = true;
        Replayer {
            shared,
            client,
            out: Vec::new(),
            errors: 0,
            commands: 0,
        }
    }

    /// Applies one frame's records, in order.
    pub fn apply(&mut self, recs: &[Record<'_>]) -> Result<(), String> {
        for r in recs {
            if r.db >= self.shared.engine.databases() {
                return Err(format!(
                    "record for database {} but only {} are configured",
                    r.db,
                    self.shared.engine.databases()
                ));
            }
            match r.tag {
                Tag::Command => self.command(r)?,
                Tag::Wire => self.wire(r)?,
                Tag::Item => self.item(r)?,
            }
        }
        Ok(())
    }

    fn command(&mut self, r: &Record<'_>) -> Result<(), String> {
        let list = ArgList::from_args(r.args.iter().copied());
        self.run(r.db, Args::new(&[], &list))
    }

    /// A request recorded as the client sent it: parsed as the worker
    /// parsed it, with no size limit (the limits in force when it was
    /// accepted may have been lowered since) and no big-argument buffers.
    fn wire(&mut self, r: &Record<'_>) -> Result<(), String> {
        let [bytes] = r.args[..] else {
            return Err("a wire record holds one request".into());
        };
        let limits = Limits {
            max_bulk_len: usize::MAX,
            unauthenticated: false,
            big_arg: usize::MAX,
            ..Limits::default()
        };
        let mut list = ArgList::new();
        match parse_request(bytes, &limits, &mut list) {
            Ok(Parsed::Complete { consumed }) if consumed == bytes.len() && !list.is_empty() => {
                self.run(r.db, Args::new(bytes, &list))
            }
            Ok(_) => Err("a wire record is not exactly one request".into()),
            Err(e) => Err(format!("a wire record does not parse: {e:?}")),
        }
    }

    fn run(&mut self, db: usize, args: Args<'_>) -> Result<(), String> {
        let cmd = dispatch::resolve(self.shared, &args)
            .map_err(|e| format!("unknown command in the journal: {}", e.message()))?;
        if !cmd.arity_ok(args.len()) {
            return Err(format!("wrong number of arguments for '{}'", cmd.name));
        }
        self.client.db = db;
        self.out.clear();
        let stats = &self.shared.worker_stats[0];
        let state = cairn_engine::CmdState::new();
        dispatch::invoke(
            self.shared,
            &mut self.client,
            cmd,
            args,
            &mut self.out,
            stats,
            &cairn_engine::Cx::command(db, None, 0, &state),
        );
        crate::keyevents::after_command(self.shared, &state, None);
        self.commands += 1;
        if self.out.first() == Some(&b'-') {
            self.errors += 1;
            if self.errors <= 10 {
                let line = String::from_utf8_lossy(&self.out);
                log::warning(&format!(
                    "Journal replay: '{}' answered {}",
                    cmd.name,
                    line.trim_end()
                ));
            }
        }
        Ok(())
    }

    /// A memcached item's state: key, value, client flags, expire time.
    fn item(&mut self, r: &Record<'_>) -> Result<(), String> {
        let [key, data, flags, at] = r.args[..] else {
            return Err("an item record needs 4 fields".into());
        };
        let flags: [u8; 4] = flags.try_into().map_err(|_| "bad item flags")?;
        let at: [u8; 8] = at.try_into().map_err(|_| "bad item expire time")?;
        let at = u64::from_le_bytes(at);
        let e = &self.shared.engine;
        let k = e.key(key);
        // Loading: the journal is off, so nothing is recorded.
        let mut g = e.lock(&cairn_engine::Cx::DETACHED, &k);
        let v = StrValue::mc(data.into(), u32::from_le_bytes(flags));
        let expiry = if at == 0 {
            Expiry::Clear
        } else {
            Expiry::At(at)
        };
        drop(g.set(r.db, &k, Value::Str(v), expiry));
        self.commands += 1;
        Ok(())
    }
}

/// Loads the base (if any) and every journal file of `m`. Returns where
/// the good data of the last journal file ends (its torn tail, if any, is
/// cut off there by the caller).
pub fn load(
    shared: &Shared,
    paths: &Paths,
    m: &Manifest,
    load_truncated: bool,
) -> Result<u64, String> {
    let started = Instant::now();
    if let Some((name, _)) = &m.base {
        let path = paths.dir.join(name);
        log::notice(&format!("Loading the journal's base {}", path.display()));
        shared.engine.set_loading(true);
        let r = super::rewrite::load_base(shared, &path);
        shared.engine.set_loading(false);
        let keys = r.map_err(|e| format!("Fatal error loading the journal's base: {e}"))?;
        log::notice(&format!("Journal base loaded: {keys} keys"));
    }
    shared.engine.set_loading(true);
    let r = load_files(shared, paths, m, load_truncated);
    shared.engine.set_loading(false);
    let (last_end, rep_commands, rep_errors) = r?;
    log::notice(&format!(
        "DB loaded from the journal: {rep_commands} commands, {:.3} seconds",
        started.elapsed().as_secs_f64()
    ));
    if rep_errors > 0 {
        log::warning(&format!(
            "Journal replay: {rep_errors} commands answered an error (the data may differ from before)"
        ));
    }
    Ok(last_end)
}

fn load_files(
    shared: &Shared,
    paths: &Paths,
    m: &Manifest,
    load_truncated: bool,
) -> Result<(u64, u64, u64), String> {
    let mut rep = Replayer::new(shared);
    let mut last_end = 0;
    for (i, (name, _)) in m.incr.iter().enumerate() {
        let is_last = i + 1 == m.incr.len();
        let path = paths.dir.join(name);
        let file = match frame::Reader::open(&path) {
            Ok(f) => f,
            // The newest file may not exist yet: a crash between writing
            // the manifest and creating it is harmless.
            Err(e) if is_last && e.is_not_found() => {
                log::warning(&format!(
                    "Journal file {} is missing; starting it anew",
                    path.display()
                ));
                return Ok((0, rep.commands, rep.errors));
            }
            Err(e) => return Err(format!("Can't load the journal: {e}")),
        };
        let len = file.len_bytes();
        let mut next_log = Instant::now() + Duration::from_secs(1);
        let summary = file
            .read(|off, recs| {
                rep.apply(recs)?;
                if Instant::now() >= next_log {
                    next_log = Instant::now() + Duration::from_secs(1);
                    log::notice(&format!(
                        "Loading {}: {} of {} MB",
                        name,
                        off >> 20,
                        len >> 20
                    ));
                }
                Ok(())
            })
            .map_err(|e| format!("Can't load the journal: {e}"))?;
        match &summary.end {
            End::Clean => {}
            End::Torn { good_end, reason } if is_last && load_truncated => {
                log::warning(&format!(
                    "!!! Warning: short read while loading the journal file {}: {reason}; \
                     dropping the torn last batch at offset {good_end} ({} bytes) !!!",
                    path.display(),
                    len - good_end
                ));
            }
            end => {
                // "PATH at offset N: reason".
                let e = summary.error(&path).expect("the end is not clean");
                let advice = if let End::Torn { .. } = end {
                    format!(
                        "The file ends in the middle of a batch{}; run 'cairn check-journal \
                         --fix {}' to cut it there",
                        if is_last {
                            " and aof-load-truncated is no"
                        } else {
                            " but it is not the last file"
                        },
                        path.display()
                    )
                } else {
                    format!("Run 'cairn check-journal {}' for details", path.display())
                };
                return Err(format!("Bad journal file {e}. {advice}"));
            }
        }
        last_end = summary.good_end;
    }
    Ok((last_end, rep.commands, rep.errors))
}
