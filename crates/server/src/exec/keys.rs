//! Where a command's keys are among its arguments, read from the key specs
//! Redis publishes for it (COMMAND INFO's eighth field). COMMAND GETKEYS
//! answers from them, and a script finds the shards each `redis.call`
//! needs before running it (`crate::script`). Parsed once per command when
//! the table is built (`key_specs`).
use crate::exec::meta::{CommandMeta, M};

/// One key spec, read from the command's COMMAND INFO entry.
#[derive(Debug, Default)]
pub struct KeySpec {
    pub not_key: bool,
    begin: Begin,
    find: Find,
}

#[derive(Debug, Default)]
enum Begin {
    Index(i64),
    Keyword {
        keyword: &'static str,
        startfrom: i64,
    },
    #[default]
    Unknown,
}

#[derive(Debug, Default)]
enum Find {
    Range {
        lastkey: i64,
        keystep: i64,
        limit: i64,
    },
    Keynum {
        keynumidx: i64,
        firstkey: i64,
        keystep: i64,
    },
    #[default]
    Unknown,
}

/// The value under bulk-string key `key` in a metadata map.
fn map_get(m: &'static M, key: &str) -> Option<&'static M> {
    match m {
        M::Map(pairs) => pairs
            .iter()
            .find(|(k, _)| matches!(k, M::Bulk(s) if *s == key))
            .map(|(_, v)| v),
        _ => None,
    }
}

fn map_int(m: &'static M, key: &str) -> i64 {
    match map_get(m, key) {
        Some(M::Int(i)) => *i,
        _ => 0,
    }
}

fn map_str(m: &'static M, key: &str) -> &'static str {
    match map_get(m, key) {
        Some(M::Bulk(s) | M::Simple(s)) => s,
        _ => "",
    }
}

/// The key specs of a command (element 8 of its COMMAND INFO entry).
pub fn key_specs(meta: &CommandMeta) -> Vec<KeySpec> {
    let M::Arr(fields) = &meta.info else {
        return Vec::new();
    };
    let Some(M::Set(specs) | M::Arr(specs)) = fields.get(8) else {
        return Vec::new();
    };
    specs
        .iter()
        .map(|spec| {
            let not_key = matches!(map_get(spec, "flags"),
                Some(M::Set(f)) if f.iter().any(|x| matches!(x, M::Simple("not_key"))));
            let begin = match map_get(spec, "begin_search") {
                Some(bs) => {
                    let s = map_get(bs, "spec").unwrap_or(&M::Null);
                    match map_str(bs, "type") {
                        "index" => Begin::Index(map_int(s, "index")),
                        "keyword" => Begin::Keyword {
                            keyword: map_str(s, "keyword"),
                            startfrom: map_int(s, "startfrom"),
                        },
                        _ => Begin::Unknown,
                    }
                }
                None => Begin::Unknown,
            };
            let find = match map_get(spec, "find_keys") {
                Some(fk) => {
                    let s = map_get(fk, "spec").unwrap_or(&M::Null);
                    match map_str(fk, "type") {
                        "range" => Find::Range {
                            lastkey: map_int(s, "lastkey"),
                            keystep: map_int(s, "keystep"),
                            limit: map_int(s, "limit"),
                        },
                        "keynum" => Find::Keynum {
                            keynumidx: map_int(s, "keynumidx"),
                            firstkey: map_int(s, "firstkey"),
                            keystep: map_int(s, "keystep"),
                        },
                        _ => Find::Unknown,
                    }
                }
                None => Find::Unknown,
            };
            KeySpec {
                not_key,
                begin,
                find,
            }
        })
        .collect()
}

/// Positions of the keys in `argv` (argv[0] is the command name), or None
/// when a spec does not fit the arguments (db.c `getKeysUsingKeySpecs`).
pub fn keys_from_specs(specs: &[KeySpec], argv: &[&[u8]]) -> Option<Vec<usize>> {
    let argc = argv.len() as i64;
    let mut keys = Vec::new();
    for spec in specs.iter().filter(|s| !s.not_key) {
        let first = match spec.begin {
            Begin::Index(pos) => pos,
            Begin::Keyword { keyword, startfrom } => {
                // Search forwards from `startfrom`, or backwards from the
                // end when it is negative, for the keyword; keys follow it.
                let (start, end) = if startfrom > 0 {
                    (startfrom, argc - 1)
                } else {
                    (argc + startfrom, 0)
                };
                let mut found = 0;
                let mut i = start;
                while i != end {
                    if i >= argc || i < 1 {
                        break;
                    }
                    if argv[i as usize].eq_ignore_ascii_case(keyword.as_bytes()) {
                        found = i + 1;
                        break;
                    }
                    i += if start <= end { 1 } else { -1 };
                }
                if found == 0 {
                    continue;
                }
                found
            }
            Begin::Unknown => return None,
        };
        let (first, last, step) = match spec.find {
            Find::Range {
                lastkey,
                keystep,
                limit,
            } => {
                let last = if lastkey >= 0 {
                    first + lastkey
                } else if limit == 0 {
                    argc + lastkey
                } else {
                    first + ((argc - first) / limit + lastkey)
                };
                (first, last, keystep)
            }
            Find::Keynum {
                keynumidx,
                firstkey,
                keystep,
            } => {
                let idx = first + keynumidx;
                if keynumidx >= argc || idx >= argc || idx < 0 {
                    return None;
                }
                let n =
                    cairn_engine::util::num::parse_i64(argv[idx as usize]).filter(|&n| n >= 0)?;
                let first = first + firstkey;
                (first, first + n - 1, keystep)
            }
            Find::Unknown => return None,
        };
        if last >= argc || last < first || first >= argc {
            return None;
        }
        // `last < argc` was checked, so every position is an argument.
        keys.extend(
            (first..=last)
                .step_by(step.max(1) as usize)
                .map(|i| i as usize),
        );
    }
    Some(keys)
}
