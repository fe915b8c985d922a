//! The command table: one entry per command and subcommand, built at start
//! from each family's list of handlers plus the metadata Redis publishes
//! for that command (arity, flags, key positions; see `meta`).
//!
//! Each family file exports `COMMANDS: &[Def]`; this module assembles them
//! into one table. That keeps a family's handlers and its registration in
//! one file, while lookup, arity and flag checks happen in one place. A
//! handler with no metadata, or a duplicate name, fails the build's tests
//! and the server's start-up, never silently.
use crate::exec::meta::{self, CommandMeta};
use crate::resp::ctx::{CmdResult, Ctx};
use hashbrown::HashMap;

pub type Handler = fn(&mut Ctx<'_>) -> CmdResult;

/// A family's registration of one command (or a container of subcommands).
pub struct Def {
    pub name: &'static str,
    pub handler: Option<Handler>,
    pub subs: &'static [Def],
}

impl Def {
    pub const fn new(name: &'static str, handler: Handler) -> Def {
        Def {
            name,
            handler: Some(handler),
            subs: &[],
        }
    }

    /// A command such as CLIENT whose first argument picks a subcommand.
    pub const fn container(name: &'static str, subs: &'static [Def]) -> Def {
        Def {
            name,
            handler: None,
            subs,
        }
    }
}

/// Command flags the server acts on (a subset of Redis's).
pub mod flags {
    pub const WRITE: u32 = 1 << 0;
    pub const READONLY: u32 = 1 << 1;
    pub const DENYOOM: u32 = 1 << 2;
    pub const ADMIN: u32 = 1 << 3;
    pub const NOSCRIPT: u32 = 1 << 4;
    pub const LOADING: u32 = 1 << 5;
    pub const STALE: u32 = 1 << 6;
    pub const SKIP_MONITOR: u32 = 1 << 7;
    pub const SKIP_SLOWLOG: u32 = 1 << 8;
    pub const FAST: u32 = 1 << 9;
    pub const NO_AUTH: u32 = 1 << 10;
    pub const PUBSUB: u32 = 1 << 11;
    pub const BLOCKING: u32 = 1 << 12;
    pub const NO_MULTI: u32 = 1 << 13;
    pub const ALLOW_BUSY: u32 = 1 << 14;
    pub const MAY_REPLICATE: u32 = 1 << 15;

    pub fn parse(names: &[&str]) -> u32 {
        names.iter().fold(0, |acc, n| {
            acc | match *n {
                "write" => WRITE,
                "readonly" => READONLY,
                "denyoom" => DENYOOM,
                "admin" => ADMIN,
                "noscript" => NOSCRIPT,
                "loading" => LOADING,
                "stale" => STALE,
                "skip_monitor" => SKIP_MONITOR,
                "skip_slowlog" => SKIP_SLOWLOG,
                "fast" => FAST,
                "no_auth" => NO_AUTH,
                "pubsub" => PUBSUB,
                "blocking" => BLOCKING,
                "no_multi" => NO_MULTI,
                "allow_busy" => ALLOW_BUSY,
                "may_replicate" => MAY_REPLICATE,
                _ => 0,
            }
        })
    }
}

/// One runnable command or subcommand.
pub struct Command {
    /// Lower case; `parent|sub` for subcommands, as Redis 7 names them.
    pub name: &'static str,
    /// Index in `CommandTable::all` (and in per-command statistics).
    pub id: usize,
    pub handler: Option<Handler>,
    pub arity: i32,
    pub flags: u32,
    pub meta: &'static CommandMeta,
    /// Subcommand name (lower case) to index in `all`.
    pub subs: HashMap<&'static str, usize>,
    /// For a subcommand, the parent's index.
    pub parent: Option<usize>,
    /// Where its keys are (`exec::keys`).
    pub key_specs: Vec<crate::exec::keys::KeySpec>,
    /// Its keys and their ACL rights as numbers, from `key_specs`.
    pub key_plan: crate::exec::keys::KeyPlan,
    /// Which arguments ACL checks as channels.
    pub channels: crate::auth::acl::Channels,
}

impl Command {
    pub fn has(&self, flag: u32) -> bool {
        self.flags & flag != 0
    }

    /// True if `argc` arguments satisfy the arity (negative: at least).
    pub fn arity_ok(&self, argc: usize) -> bool {
        let a = self.arity;
        (a >= 0 && argc == a as usize) || (a < 0 && argc >= (-a) as usize)
    }
}

/// All commands, found by name without allocating.
pub struct CommandTable {
    all: Vec<Command>,
    top: HashMap<&'static str, usize>,
}

/// Longest command name we look up; anything longer is unknown.
const MAX_NAME: usize = 64;

impl CommandTable {
    pub fn build(families: &[&'static [Def]]) -> Result<CommandTable, String> {
        let mut t = CommandTable {
            all: Vec::new(),
            top: HashMap::new(),
        };
        for defs in families {
            for d in defs.iter() {
                let id = t.add(d, d.name, None)?;
                if t.top.insert(d.name, id).is_some() {
                    return Err(format!("command '{}' registered twice", d.name));
                }
                for s in d.subs {
                    let full: &'static str =
                        Box::leak(format!("{}|{}", d.name, s.name).into_boxed_str());
                    let sid = t.add(s, full, Some(id))?;
                    if t.all[id].subs.insert(s.name, sid).is_some() {
                        return Err(format!("subcommand '{full}' registered twice"));
                    }
                }
            }
        }
        Ok(t)
    }

    fn add(&mut self, d: &Def, full: &'static str, parent: Option<usize>) -> Result<usize, String> {
        let m = meta::lookup(full).ok_or_else(|| format!("no metadata for command '{full}'"))?;
        if d.handler.is_none() && d.subs.is_empty() {
            return Err(format!(
                "command '{full}' has neither handler nor subcommands"
            ));
        }
        let id = self.all.len();
        let key_specs = crate::exec::keys::key_specs(m);
        self.all.push(Command {
            name: full,
            id,
            handler: d.handler,
            arity: m.arity,
            flags: flags::parse(m.flags) | hidden_flags(m.name),
            meta: m,
            subs: HashMap::new(),
            parent,
            key_plan: crate::exec::keys::KeyPlan::of(full, &key_specs),
            key_specs,
            channels: crate::auth::acl::Channels::of(full),
        });
        Ok(id)
    }

    pub fn all(&self) -> &[Command] {
        &self.all
    }

    pub fn get(&self, id: usize) -> &Command {
        &self.all[id]
    }

    /// The top-level command named `name` (any case).
    pub fn lookup(&self, name: &[u8]) -> Option<&Command> {
        let mut buf = [0u8; MAX_NAME];
        let lower = lower_into(name, &mut buf)?;
        self.top.get(lower).map(|&i| &self.all[i])
    }

    /// The subcommand `sub` (any case) of `parent`.
    pub fn lookup_sub(&self, parent: &Command, sub: &[u8]) -> Option<&Command> {
        let mut buf = [0u8; MAX_NAME];
        let lower = lower_into(sub, &mut buf)?;
        parent.subs.get(lower).map(|&i| &self.all[i])
    }

    /// Top-level commands, for COMMAND and COMMAND COUNT.
    pub fn top_level(&self) -> impl Iterator<Item = &Command> {
        self.all.iter().filter(|c| c.parent.is_none())
    }
}

/// Flags Redis 7.0 gives commands without showing them in COMMAND INFO
/// (the metadata's source): `may-replicate` on the commands whose JSON
/// carries MAY_REPLICATE, which CLIENT PAUSE WRITE holds and read-only
/// scripts refuse. EVAL, EVALSHA and FCALL carry it too, but a script's
/// declared flags replace it (`crate::script::may_write`).
fn hidden_flags(name: &str) -> u32 {
    match name {
        "pfcount" | "publish" | "spublish" => flags::MAY_REPLICATE,
        _ => 0,
    }
}

fn lower_into<'b>(name: &[u8], buf: &'b mut [u8; MAX_NAME]) -> Option<&'b str> {
    if name.len() > MAX_NAME {
        return None;
    }
    let out = &mut buf[..name.len()];
    for (o, c) in out.iter_mut().zip(name) {
        *o = c.to_ascii_lowercase();
    }
    std::str::from_utf8(out).ok()
}
