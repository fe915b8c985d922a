//! ACL rights on the memcached port (issue 23): each memcached request is
//! checked as the Redis command that does the same to the keyspace, with
//! the same keys, against the connection's user (`crate::auth`). So one
//! set of rules covers both ports: a user may `get` a key on the memcached
//! port exactly when it may run GET on that key, and `~`, `%R~`, `%W~`,
//! `+@read`, `-flushall` and the rest mean what they mean for RESP. The
//! table is in docs/design.md ("memcached and ACL").
//!
//! Not here: logging in (`admin::authenticate`), and the unrestricted
//! user's fast path (`auth::restricted`, one flag test per request).
use super::Ctx;
use crate::auth::{self, acl, Context, Reason};
use cairn_protocol::memcache::{MetaCmd, Request, StoreMode};

/// One Redis command line a request is checked as: the command (with its
/// subcommand) and the arguments its key specs look at. Values and
/// numbers that no key spec reads are left empty.
type Check<'a> = Vec<&'a [u8]>;

/// The Redis commands `req` is checked as, and the memcached command's
/// name for the ACL log's client line. Empty: nothing to check (version,
/// quit, mn, and lines the parser already answers with an error).
fn as_redis<'r>(req: &'r Request) -> (&'static str, Vec<Check<'r>>) {
    const E: &[u8] = b"";
    let key_of = |cmd: &'static [u8], key: &'r [u8]| vec![cmd, key, E];
    match req {
        Request::Get { touch, keys, cas } => {
            let (name, cmd): (_, &[u8]) = match (touch.is_some(), cas) {
                (false, false) => ("get", b"get"),
                (false, true) => ("gets", b"get"),
                // gat changes the TTL as it reads: GETEX.
                (true, false) => ("gat", b"getex"),
                (true, true) => ("gats", b"getex"),
            };
            (name, (*keys).map(|k| vec![cmd, k]).collect())
        }
        Request::Store(s) => {
            let (name, check) = match s.mode {
                StoreMode::Set => ("set", vec![b"set" as &[u8], s.key, E]),
                StoreMode::Cas => ("cas", vec![b"set" as &[u8], s.key, E]),
                StoreMode::Add => ("add", vec![b"set" as &[u8], s.key, E, b"NX"]),
                StoreMode::Replace => ("replace", vec![b"set" as &[u8], s.key, E, b"XX"]),
                StoreMode::Append => ("append", key_of(b"append", s.key)),
                StoreMode::Prepend => ("prepend", key_of(b"append", s.key)),
            };
            (name, vec![check])
        }
        // Refused before its data: a storage command all the same (a
        // refused set also deletes the key).
        Request::Refused { key, .. } => ("set", vec![key_of(b"set", key.as_bytes())]),
        Request::Delete { key, .. } => ("delete", vec![vec![b"del" as &[u8], key]]),
        Request::Arith {
            incr: true, key, ..
        } => ("incr", vec![key_of(b"incrby", key)]),
        Request::Arith { key, .. } => ("decr", vec![key_of(b"decrby", key)]),
        Request::Touch { key, .. } => ("touch", vec![key_of(b"expire", key)]),
        Request::FlushAll { .. } => ("flush_all", vec![vec![b"flushall" as &[u8]]]),
        Request::Verbosity { .. } => (
            "verbosity",
            vec![vec![b"config" as &[u8], b"set", b"loglevel", E]],
        ),
        Request::Stats { args } => match { *args }.next() {
            Some(b"reset") => ("stats", vec![vec![b"config" as &[u8], b"resetstat"]]),
            _ => ("stats", vec![vec![b"info" as &[u8]]]),
        },
        // me shows what mg's flags can show: it needs what mg needs.
        Request::MetaDebug { key } => ("me", vec![vec![b"get" as &[u8], key.as_bytes()]]),
        Request::Meta(m) => {
            let key = m.key.as_bytes();
            let f = &m.flags;
            match m.cmd {
                MetaCmd::Get => {
                    let mut checks = Vec::new();
                    if f.ttl.is_some() || f.vivify.is_some() {
                        checks.push(vec![b"getex" as &[u8], key]);
                    } else {
                        checks.push(vec![b"get" as &[u8], key]);
                    }
                    // N creates the item on a miss, as SET would.
                    if f.vivify.is_some() {
                        checks.push(key_of(b"set", key));
                    }
                    ("mg", checks)
                }
                MetaCmd::Set => {
                    let check = match f.mode {
                        Some(b'E' | b'e') => vec![b"set" as &[u8], key, E, b"NX"],
                        Some(b'R' | b'r') => vec![b"set" as &[u8], key, E, b"XX"],
                        Some(b'A' | b'a' | b'P' | b'p') => key_of(b"append", key),
                        _ => key_of(b"set", key),
                    };
                    ("ms", vec![check])
                }
                MetaCmd::Delete => ("md", vec![vec![b"del" as &[u8], key]]),
                MetaCmd::Arith => {
                    let cmd: &[u8] = match f.mode {
                        Some(b'D' | b'd' | b'-') => b"decrby",
                        _ => b"incrby",
                    };
                    ("ma", vec![key_of(cmd, key)])
                }
            }
        }
        Request::Version | Request::Quit | Request::MetaNoop | Request::Error { .. } => {
            ("", Vec::new())
        }
    }
}

/// May the connection's user run `req`? On a refusal the denial is in the
/// ACL log (context `toplevel`; the object is the Redis command to allow,
/// or the key) and false is returned: the caller answers
/// `errors::NOPERM`. A request is checked whole before any of it runs,
/// so a multi-key get with one forbidden key reads none.
pub fn allowed(cx: &Ctx, req: &Request) -> bool {
    let Some(user) = cx.client.user.as_ref() else {
        return true;
    };
    let (name, checks) = as_redis(req);
    for argv in &checks {
        let cmd = auth::lookup_command(cx.shared, argv)
            .expect("every command a memcached request maps to is in the table");
        let keys = auth::key_rights(cmd, argv);
        let denied = match user.check(cmd, argv, &keys) {
            Ok(()) => continue,
            Err(d) => d,
        };
        let (reason, object) = match denied {
            acl::Denied::Command => (Reason::Command, cmd.name.as_bytes()),
            acl::Denied::Key(i) => (Reason::Key, argv[i]),
            // No memcached command names a channel.
            acl::Denied::Channel(i) => (Reason::Channel, argv[i]),
        };
        auth::log_denial(
            cx.shared,
            &*cx.client,
            name,
            reason,
            Context::TopLevel,
            object,
            None,
        );
        return false;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::as_redis;
    use cairn_protocol::memcache::{Decoded, Decoder, Limits};

    /// The Redis command lines a memcached request line is checked as.
    fn checks(line: &[u8]) -> (String, Vec<String>) {
        let mut d = Decoder::default();
        let Decoded::Request { req, .. } = d.decode_with(line, &Limits::default(), None) else {
            panic!("{:?} is not one request", String::from_utf8_lossy(line));
        };
        let (name, checks) = as_redis(&req);
        let lines = checks
            .iter()
            .map(|argv| {
                argv.iter()
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect::<Vec<_>>()
                    .join(" ")
                    .trim_end()
                    .to_string()
            })
            .collect();
        (name.to_string(), lines)
    }

    #[test]
    fn requests_map_to_redis_commands() {
        let cases: &[(&[u8], &str, &[&str])] = &[
            (b"get a b\r\n", "get", &["get a", "get b"]),
            (b"gets a\r\n", "gets", &["get a"]),
            (b"gat 10 a b\r\n", "gat", &["getex a", "getex b"]),
            (b"gats 10 a\r\n", "gats", &["getex a"]),
            (b"set k 0 0 1\r\nx\r\n", "set", &["set k"]),
            (b"cas k 0 0 1 5\r\nx\r\n", "cas", &["set k"]),
            (b"add k 0 0 1\r\nx\r\n", "add", &["set k  NX"]),
            (b"replace k 0 0 1\r\nx\r\n", "replace", &["set k  XX"]),
            (b"append k 0 0 1\r\nx\r\n", "append", &["append k"]),
            (b"prepend k 0 0 1\r\nx\r\n", "prepend", &["append k"]),
            (b"delete k\r\n", "delete", &["del k"]),
            (b"incr k 1\r\n", "incr", &["incrby k"]),
            (b"decr k 1\r\n", "decr", &["decrby k"]),
            (b"touch k 10\r\n", "touch", &["expire k"]),
            (b"flush_all\r\n", "flush_all", &["flushall"]),
            (b"verbosity 1\r\n", "verbosity", &["config set loglevel"]),
            (b"stats\r\n", "stats", &["info"]),
            (b"stats reset\r\n", "stats", &["config resetstat"]),
            (b"version\r\n", "", &[]),
            (b"mn\r\n", "", &[]),
            (b"me k\r\n", "me", &["get k"]),
            (b"mg k v\r\n", "mg", &["get k"]),
            (b"mg k T10 v\r\n", "mg", &["getex k"]),
            (b"mg k N10 v\r\n", "mg", &["getex k", "set k"]),
            (b"ms k 1\r\nx\r\n", "ms", &["set k"]),
            (b"ms k 1 ME\r\nx\r\n", "ms", &["set k  NX"]),
            (b"ms k 1 MR\r\nx\r\n", "ms", &["set k  XX"]),
            (b"ms k 1 MP\r\nx\r\n", "ms", &["append k"]),
            (b"md k\r\n", "md", &["del k"]),
            (b"ma k\r\n", "ma", &["incrby k"]),
            (b"ma k MD\r\n", "ma", &["decrby k"]),
        ];
        for (line, name, want) in cases {
            let (got_name, got) = checks(line);
            assert_eq!(got_name, *name, "{}", String::from_utf8_lossy(line));
            assert_eq!(got, *want, "{}", String::from_utf8_lossy(line));
        }
    }
}
