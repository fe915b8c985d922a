//! Command metadata: what `COMMAND`, `COMMAND INFO` and `COMMAND DOCS` reply.
//!
//! Clients read this at connect time (redis-cli 7 builds its hints from
//! `COMMAND DOCS`), so Cairn's answers must be byte-identical to Redis 7.0's
//! for every command Cairn implements. Rather than transcribing Redis's
//! metadata by hand, the table lives in `meta_data.rs` (next to this file),
//! which `tools/gen_command_meta.py` generates by asking a real Redis 7.0
//! server `COMMAND INFO` / `COMMAND DOCS` over RESP3 and writing each reply
//! out as an [`M`] tree. RESP3 keeps every distinction Redis makes (sets vs
//! arrays, maps, status vs bulk strings), so [`render`] can reproduce the
//! exact bytes Redis sends in either protocol. To add a command or move to a
//! new Redis version, edit the list in the generator and rerun it; do not
//! edit `meta_data.rs`.

use cairn_protocol::resp::ReplyWriter;

#[path = "meta_data.rs"]
#[rustfmt::skip]
mod meta_data;

/// The Redis version string the metadata was generated from.
pub use meta_data::REDIS_VERSION;

/// A reply tree, rendered in RESP2 or RESP3 exactly as Redis renders it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum M {
    /// Bulk string (`$`).
    Bulk(&'static str),
    /// Status string (`+`).
    Simple(&'static str),
    /// Integer (`:`).
    Int(i64),
    /// Null (`_` in RESP3, `$-1` in RESP2).
    Null,
    /// Array (`*`).
    Arr(&'static [M]),
    /// Set (`~` in RESP3, an array in RESP2).
    Set(&'static [M]),
    /// Map (`%` in RESP3, a flat array of 2n elements in RESP2).
    Map(&'static [(M, M)]),
}

/// One command's (or subcommand's) metadata, as Redis 7.0 reports it.
#[derive(Debug)]
pub struct CommandMeta {
    /// Lower case; `"client|list"` for subcommands.
    pub name: &'static str,
    pub arity: i32,
    /// Command flags, e.g. `["write", "denyoom"]`.
    pub flags: &'static [&'static str],
    /// Legacy key positions. Nothing reads them yet (GETKEYS uses the key
    /// specs); they are the cheap way for MULTI/EXEC to find the keys to
    /// lock, and the tests check them against the `info` tree.
    #[allow(dead_code)]
    pub first_key: i32,
    #[allow(dead_code)]
    pub last_key: i32,
    #[allow(dead_code)]
    pub step: i32,
    /// ACL categories, e.g. `["@write", "@string", "@slow"]`.
    pub acl_categories: &'static [&'static str],
    /// The full `COMMAND INFO` entry for this command (one element of the
    /// array Redis returns). For container commands the subcommand list holds
    /// only the subcommands Cairn implements.
    pub info: M,
    /// The value part of the `COMMAND DOCS` map for this command (the key is
    /// `name`).
    pub docs: M,
}

/// Looks a command up by name: lower case, `"parent|sub"` for subcommands.
pub fn lookup(name: &str) -> Option<&'static CommandMeta> {
    meta_data::COMMANDS
        .binary_search_by(|c| c.name.cmp(name))
        .ok()
        .map(|i| &meta_data::COMMANDS[i])
}

/// Every command and subcommand of the Redis the metadata came from, with
/// its docs group, sorted by name: the README's list of what Cairn lacks.
#[cfg(test)]
pub fn redis_commands() -> &'static [(&'static str, &'static str)] {
    meta_data::REDIS_COMMANDS
}

/// Every command and subcommand, sorted by name.
#[cfg(test)]
pub fn all() -> &'static [CommandMeta] {
    meta_data::COMMANDS
}

/// Writes `m` in the writer's protocol, byte for byte as Redis would.
pub fn render(m: &M, w: &mut ReplyWriter<'_>) {
    match *m {
        M::Bulk(s) => w.bulk(s.as_bytes()),
        M::Simple(s) => w.simple(s),
        M::Int(i) => w.int(i),
        M::Null => w.null(),
        M::Arr(items) => {
            w.array(items.len());
            for item in items {
                render(item, w);
            }
        }
        M::Set(items) => {
            w.set(items.len());
            for item in items {
                render(item, w);
            }
        }
        M::Map(pairs) => {
            w.map(pairs.len());
            for (k, v) in pairs {
                render(k, w);
                render(v, w);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_sorted_and_unique() {
        for pair in all().windows(2) {
            assert!(
                pair[0].name < pair[1].name,
                "{} >= {}",
                pair[0].name,
                pair[1].name
            );
        }
    }

    #[test]
    fn lookup_finds_commands_and_subcommands() {
        assert_eq!(lookup("get").map(|c| c.arity), Some(2));
        assert_eq!(lookup("client|list").map(|c| c.name), Some("client|list"));
        assert!(lookup("GET").is_none());
        assert!(lookup("nosuchcommand").is_none());
        for c in all() {
            assert!(std::ptr::eq(lookup(c.name).unwrap(), c));
        }
    }

    #[test]
    fn fields_agree_with_info() {
        for c in all() {
            let M::Arr(info) = c.info else {
                panic!("{}: info is not an array", c.name)
            };
            assert_eq!(info[0], M::Bulk(c.name));
            assert_eq!(info[1], M::Int(c.arity.into()));
            assert_eq!(info[3], M::Int(c.first_key.into()));
            assert_eq!(info[4], M::Int(c.last_key.into()));
            assert_eq!(info[5], M::Int(c.step.into()));
            for (idx, strs) in [(2, c.flags), (6, c.acl_categories)] {
                let M::Set(set) = info[idx] else {
                    panic!("{}: not a set", c.name)
                };
                let names: Vec<M> = strs.iter().map(|s| M::Simple(s)).collect();
                assert_eq!(set, &names[..]);
            }
        }
    }
}
