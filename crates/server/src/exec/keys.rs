//! Where a command's keys are among its arguments, read from the key specs
//! Redis publishes for it (COMMAND INFO's eighth field). COMMAND GETKEYS
//! and GETKEYSANDFLAGS answer from them ([`command_keys`], Redis 7.0 db.c
//! `getKeysFromCommandWithSpecs`, including the per-command callbacks it
//! falls back on), and a script finds the shards each `redis.call` needs
//! before running it (`crate::script`). Parsed once per command when the
//! table is built (`key_specs`).
use crate::exec::meta::{CommandMeta, M};

/// One key spec, read from the command's COMMAND INFO entry.
#[derive(Debug, Default)]
pub struct KeySpec {
    pub not_key: bool,
    /// The spec lists only some of the keys (SORT's BY/GET patterns):
    /// Redis then asks the command's callback instead.
    incomplete: bool,
    /// The keys' flags depend on the arguments (SET with GET).
    variable_flags: bool,
    /// The spec's flags as COMMAND INFO renders them (a set of statuses in
    /// Redis's order), which GETKEYSANDFLAGS repeats for each key.
    flags: &'static [M],
    /// The ACL rights the flags ask for (`acl_rights`), resolved once.
    rights: u8,
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
            let flags = match map_get(spec, "flags") {
                Some(M::Set(f)) => *f,
                _ => &[],
            };
            let has = |name: &str| {
                flags
                    .iter()
                    .any(|x| matches!(x, M::Simple(f) if *f == name))
            };
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
                not_key: has("not_key"),
                incomplete: has("incomplete"),
                variable_flags: has("variable_flags"),
                flags,
                rights: KeyFlags::Spec(flags).acl_rights(),
                begin,
                find,
            }
        })
        .collect()
}

/// What one spec finds in an argument vector.
enum Found {
    /// Positions `first..=last`, every `step`-th.
    Range(usize, usize, usize),
    /// The spec's keyword is absent: the spec names no keys here.
    Absent,
    /// The spec does not fit the arguments (a bad key count, a range past
    /// the end).
    Invalid,
}

/// Applies one spec to `argv` (argv[0] is the command name), as Redis
/// 7.0's `getKeysUsingKeySpecs` does for one spec.
fn find<A: Argv + ?Sized>(spec: &KeySpec, argv: &A) -> Found {
    let argc = argv.argc() as i64;
    let first = match spec.begin {
        Begin::Index(pos) => pos,
        Begin::Keyword { keyword, startfrom } => {
            // Search forwards from `startfrom`, or backwards from the end
            // when it is negative; keys follow the keyword. As in Redis
            // the search stops short of its end index (the last argument
            // forwards, argument 1 backwards): a keyword there has no key
            // after it, or is the command's own first argument.
            let (start, end) = if startfrom > 0 {
                (startfrom, argc - 1)
            } else {
                (argc + startfrom, 1)
            };
            let mut found = 0;
            let mut i = start;
            while i != end {
                if i >= argc || i < 1 {
                    break;
                }
                if argv
                    .arg(i as usize)
                    .eq_ignore_ascii_case(keyword.as_bytes())
                {
                    found = i + 1;
                    break;
                }
                i += if start <= end { 1 } else { -1 };
            }
            if found == 0 {
                return Found::Absent;
            }
            found
        }
        Begin::Unknown => return Found::Invalid,
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
                return Found::Invalid;
            }
            let Some(n) =
                cairn_engine::util::num::parse_i64(argv.arg(idx as usize)).filter(|&n| n >= 0)
            else {
                return Found::Invalid;
            };
            let first = first + firstkey;
            (first, first.saturating_add(n) - 1, keystep)
        }
        Find::Unknown => return Found::Invalid,
    };
    if last >= argc || last < first || first >= argc || first < 0 {
        return Found::Invalid;
    }
    Found::Range(first as usize, last as usize, step.max(1) as usize)
}

/// Positions of the keys in `argv` (argv[0] is the command name), or None
/// when a spec does not fit the arguments. Incomplete specs count with the
/// keys they do name; a script treats None as "any key".
pub fn keys_from_specs(specs: &[KeySpec], argv: &[&[u8]]) -> Option<Vec<usize>> {
    let mut keys = Vec::new();
    for spec in specs.iter().filter(|s| !s.not_key) {
        match find(spec, argv) {
            Found::Range(first, last, step) => keys.extend((first..=last).step_by(step)),
            Found::Absent => {}
            Found::Invalid => return None,
        }
    }
    Some(keys)
}

/// Positions named by `not_key` specs (sharded Pub/Sub channels), which
/// cluster mode's slot check counts as keys, as Redis's `getNodeByQuery`
/// does (its specs search includes them).
pub fn not_key_positions(specs: &[KeySpec], argv: &[&[u8]]) -> Vec<usize> {
    let mut out = Vec::new();
    for spec in specs.iter().filter(|s| s.not_key) {
        if let Found::Range(first, last, step) = find(spec, argv) {
            out.extend((first..=last).step_by(step));
        }
    }
    out
}

/// Key flags as Redis's `addReplyFlagsForKeyArgs` names them, in its order.
#[derive(Clone, Copy, Debug)]
pub enum KeyFlags {
    /// A spec's own flags, already a set of statuses.
    Spec(&'static [M]),
    /// Flags a callback gives (empty for the callbacks of commands whose
    /// specs are complete, as in Redis).
    Names(&'static [&'static str]),
}

impl KeyFlags {
    pub fn render(&self, w: &mut cairn_protocol::resp::ReplyWriter<'_>) {
        match *self {
            KeyFlags::Spec(set) => crate::exec::meta::render(&M::Set(set), w),
            KeyFlags::Names(names) => {
                w.set(names.len());
                for n in names {
                    w.simple(n);
                }
            }
        }
    }
}

impl KeyFlags {
    /// The rights ACL needs on the key (`ACLSelectorCheckKey`): read for
    /// `access`, write for `insert`, `delete` or `update`.
    pub fn acl_rights(&self) -> u8 {
        let mut rights = 0;
        let mut note = |f: &str| match f {
            "access" => rights |= crate::auth::acl::READ,
            "insert" | "delete" | "update" => rights |= crate::auth::acl::WRITE,
            _ => {}
        };
        match *self {
            KeyFlags::Spec(set) => set.iter().for_each(|m| {
                if let M::Simple(f) = m {
                    note(f)
                }
            }),
            KeyFlags::Names(names) => names.iter().for_each(|f| note(f)),
        }
        rights
    }
}

const NO_FLAGS: KeyFlags = KeyFlags::Names(&[]);

/// True if the command has keys at all (db.c `doesCommandHaveKeys`): a
/// spec that is not `not_key`, or a getkeys callback.
pub fn has_keys(name: &str, specs: &[KeySpec]) -> bool {
    specs.iter().any(|s| !s.not_key) || callback(name).is_some()
}

/// The keys of a full command and their flags, as COMMAND GETKEYSANDFLAGS
/// lists them (db.c `getKeysFromCommandWithSpecs`): the specs when they are
/// complete, have fixed flags and fit the arguments; otherwise the
/// command's callback; otherwise none.
pub fn command_keys(name: &str, specs: &[KeySpec], argv: &[&[u8]]) -> Vec<(usize, KeyFlags)> {
    let has_spec = specs.iter().any(|s| !s.not_key);
    let var_flags = specs.iter().any(|s| s.variable_flags);
    if has_spec && !var_flags {
        if let Some(keys) = keys_using_specs(specs, argv) {
            return keys;
        }
    }
    match callback(name) {
        Some(cb) => cb(argv),
        None => Vec::new(),
    }
}

/// All specs' keys, or None when one does not fit or is incomplete.
fn keys_using_specs(specs: &[KeySpec], argv: &[&[u8]]) -> Option<Vec<(usize, KeyFlags)>> {
    let mut keys = Vec::new();
    for spec in specs.iter().filter(|s| !s.not_key) {
        match find(spec, argv) {
            Found::Range(first, last, step) => keys.extend(
                (first..=last)
                    .step_by(step)
                    .map(|i| (i, KeyFlags::Spec(spec.flags))),
            ),
            Found::Absent => continue,
            Found::Invalid => return None,
        }
        if spec.incomplete {
            return None;
        }
    }
    Some(keys)
}

type Callback = fn(&[&[u8]]) -> Vec<(usize, KeyFlags)>;

/// A command's arguments, read by index: the check of a restricted ACL
/// user reads only the ones it needs from the request itself (gathering
/// every argument into a slice first cost ~70 instructions a SET).
pub trait Argv {
    fn argc(&self) -> usize;
    /// Argument `i`; panics if `i >= argc()`.
    fn arg(&self, i: usize) -> &[u8];
}

impl Argv for [&[u8]] {
    #[inline]
    fn argc(&self) -> usize {
        self.len()
    }
    #[inline]
    fn arg(&self, i: usize) -> &[u8] {
        self[i]
    }
}

impl Argv for Vec<&[u8]> {
    #[inline]
    fn argc(&self) -> usize {
        self.len()
    }
    #[inline]
    fn arg(&self, i: usize) -> &[u8] {
        self[i]
    }
}

impl Argv for crate::resp::ctx::Args<'_> {
    #[inline]
    fn argc(&self) -> usize {
        self.len()
    }
    #[inline(always)]
    fn arg(&self, i: usize) -> &[u8] {
        self.get(i)
    }
}

/// Key positions with the ACL rights each needs; read as a slice. One key
/// (most commands) is held inline: a SmallVec's push, capacity test and
/// drop cost ~60 instructions a SET (callgrind).
pub enum KeyRights {
    One([(usize, u8); 1]),
    Many(Vec<(usize, u8)>),
}

impl KeyRights {
    fn none() -> KeyRights {
        KeyRights::Many(Vec::new())
    }

    #[inline]
    fn one(pos: usize, rights: u8) -> KeyRights {
        KeyRights::One([(pos, rights)])
    }
}

impl std::ops::Deref for KeyRights {
    type Target = [(usize, u8)];

    #[inline]
    fn deref(&self) -> &[(usize, u8)] {
        match self {
            KeyRights::One(k) => k,
            KeyRights::Many(v) => v,
        }
    }
}

/// How to find a command's keys and their ACL rights, resolved from its
/// key specs when the table is built, so a restricted user's check of a
/// one-key command is an index and a rights mask: no `Vec`, no flag names
/// compared as strings, no spec walked twice (`command_keys` on a SET cost
/// ~120 instructions and `acl_rights` ~60, callgrind). Every plan gives
/// what [`command_keys`] and [`KeyFlags::acl_rights`] give
/// (`tests::plans_agree_with_command_keys`).
#[derive(Clone, Copy, Debug)]
pub enum KeyPlan {
    /// No key spec and no callback.
    None,
    /// One complete spec, `index pos` and `range 0`, with fixed flags
    /// (GET, INCR, HSET, ...): the key at `pos`, or when the request is
    /// too short for it, the callback if any.
    One {
        pos: usize,
        rights: u8,
        fallback: Option<Callback>,
    },
    /// SET (`setGetKeys`): key 1 written, and read too with GET.
    Set,
    /// Complete specs with fixed flags: walked with each spec's rights,
    /// the callback when one does not fit or is incomplete.
    Specs { fallback: Option<Callback> },
    /// Variable flags or no specs: the callback.
    Callback(Callback),
}

impl KeyPlan {
    /// The plan for the command `name` with `specs`, as [`command_keys`]
    /// would decide for any argument list.
    pub fn of(name: &str, specs: &[KeySpec]) -> KeyPlan {
        let cb = callback(name);
        let mut keyed = specs.iter().filter(|s| !s.not_key);
        let has_spec = specs.iter().any(|s| !s.not_key);
        let var_flags = specs.iter().any(|s| s.variable_flags);
        if name == "set" && var_flags && cb.is_some() {
            return KeyPlan::Set;
        }
        if !has_spec || var_flags {
            return cb.map_or(KeyPlan::None, KeyPlan::Callback);
        }
        if let (Some(spec), None) = (keyed.next(), keyed.next()) {
            if let (Begin::Index(pos @ 1..), Find::Range { lastkey: 0, .. }, false) =
                (&spec.begin, &spec.find, spec.incomplete)
            {
                return KeyPlan::One {
                    pos: *pos as usize,
                    rights: spec.rights,
                    fallback: cb,
                };
            }
        }
        KeyPlan::Specs { fallback: cb }
    }
}

impl KeyPlan {
    /// The key of a one-key plan (`One`, `Set`) when the request has it:
    /// the common case, checked without building a list (returning even
    /// a `KeyRights` and reading it back cost ~30 instructions a SET).
    #[inline]
    pub fn single<A: Argv + ?Sized>(&self, argv: &A) -> Option<(usize, u8)> {
        let argc = argv.argc();
        match *self {
            KeyPlan::One { pos, rights, .. } if pos < argc => Some((pos, rights)),
            KeyPlan::Set if argc > 1 => {
                let get = (3..argc).any(|i| argv.arg(i).eq_ignore_ascii_case(b"get"));
                let rights = if get {
                    crate::auth::acl::READ | crate::auth::acl::WRITE
                } else {
                    crate::auth::acl::WRITE
                };
                Some((1, rights))
            }
            _ => None,
        }
    }

    /// Passes each key of `argv` with its rights to `ok`, in the order
    /// [`acl_key_rights`] lists them, without building the list: Some(true)
    /// if `ok` accepted every key (or there are none), Some(false) at the
    /// first it refused, None when only the callback knows the keys (a
    /// `Callback` plan, or a spec that does not fit or is incomplete; some
    /// keys may have been passed by then). A restricted user's multi-key
    /// command (MSET) is checked this way: the `Vec` and the selector loop
    /// per key cost ~150 instructions a key (callgrind).
    #[inline]
    pub fn each_key<A: Argv + ?Sized>(
        &self,
        specs: &[KeySpec],
        argv: &A,
        mut ok: impl FnMut(usize, u8) -> bool,
    ) -> Option<bool> {
        if let Some((pos, rights)) = self.single(argv) {
            return Some(ok(pos, rights));
        }
        match *self {
            KeyPlan::None => Some(true),
            KeyPlan::One { .. } | KeyPlan::Set | KeyPlan::Callback(_) => None,
            KeyPlan::Specs { .. } => {
                for spec in specs.iter().filter(|s| !s.not_key) {
                    match find(spec, argv) {
                        Found::Range(..) if spec.incomplete => return None,
                        Found::Range(first, last, step) => {
                            for i in (first..=last).step_by(step) {
                                if !ok(i, spec.rights) {
                                    return Some(false);
                                }
                            }
                        }
                        Found::Absent => {}
                        Found::Invalid => return None,
                    }
                }
                Some(true)
            }
        }
    }
}

/// The keys of a `Specs` plan made of one complete spec `index first`,
/// `range lastkey < 0 keystep step limit 0` (MSET, DEL, MGET, EXISTS,
/// BLPOP...): arguments `first, first + step, ...` up to `argc - back`,
/// each needing `rights`. A restricted user's table holds it so the
/// check walks the keys in a counted loop: the spec walk
/// ([`KeyPlan::each_key`]: `find`, a `StepBy` over a `RangeInclusive`, a
/// closure call per key) cost ~43 instructions a key of a 10-key MSET
/// besides the key test itself (callgrind, session 18).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stride {
    pub first: u8,
    /// `-lastkey`: the last key is at most `argc - back`.
    pub back: u8,
    pub step: u8,
    pub rights: u8,
}

impl Stride {
    /// Passes each key position of `argc` arguments to `ok` as
    /// [`KeyPlan::each_key`] would: Some(true) if `ok` accepted them all,
    /// Some(false) at the first refused, None when the spec does not fit
    /// (fewer than `first + back` arguments: `find`'s Invalid, for which
    /// the callback, if any, decides).
    #[inline(always)]
    pub fn each_key(self, argc: usize, mut ok: impl FnMut(usize) -> bool) -> Option<bool> {
        let (first, back, step) = (
            usize::from(self.first),
            usize::from(self.back),
            usize::from(self.step),
        );
        let last = argc.checked_sub(back).filter(|&l| l >= first)?;
        let mut i = first;
        while i <= last {
            if !ok(i) {
                return Some(false);
            }
            i += step;
        }
        Some(true)
    }
}

impl KeyPlan {
    /// The plan as a [`Stride`], when it is one spec of that shape.
    pub fn stride(&self, specs: &[KeySpec]) -> Option<Stride> {
        if !matches!(self, KeyPlan::Specs { .. }) {
            return None;
        }
        let mut keyed = specs.iter().filter(|s| !s.not_key);
        let (Some(spec), None) = (keyed.next(), keyed.next()) else {
            return None;
        };
        match (&spec.begin, &spec.find, spec.incomplete) {
            (
                &Begin::Index(first @ 1..),
                &Find::Range {
                    lastkey: lastkey @ ..=-1,
                    keystep,
                    limit: 0,
                },
                false,
            ) => Some(Stride {
                first: u8::try_from(first).ok()?,
                back: u8::try_from(-lastkey).ok()?,
                step: u8::try_from(keystep.max(1)).ok()?,
                rights: spec.rights,
            }),
            _ => None,
        }
    }
}

/// The key arguments of `argv` with the ACL rights each needs
/// (`ACLSelectorCheckCmd`'s keys): what [`command_keys`] finds, each
/// key's flags as [`KeyFlags::acl_rights`] reads them.
#[inline]
pub fn acl_key_rights<A: Argv + ?Sized>(plan: &KeyPlan, specs: &[KeySpec], argv: &A) -> KeyRights {
    if let Some((pos, rights)) = plan.single(argv) {
        return KeyRights::one(pos, rights);
    }
    match *plan {
        KeyPlan::None => KeyRights::none(),
        KeyPlan::One { fallback, .. } => callback_rights(fallback, argv),
        KeyPlan::Set => callback_rights(Some(set_keys), argv),
        KeyPlan::Callback(cb) => callback_rights(Some(cb), argv),
        KeyPlan::Specs { fallback } => {
            let mut out = Vec::new();
            let walked = plan.each_key(specs, argv, |i, rights| {
                out.push((i, rights));
                true
            });
            match walked {
                Some(_) => KeyRights::Many(out),
                None => callback_rights(fallback, argv),
            }
        }
    }
}

/// A callback's keys with their rights; no keys without a callback.
fn callback_rights<A: Argv + ?Sized>(cb: Option<Callback>, argv: &A) -> KeyRights {
    let Some(cb) = cb else {
        return KeyRights::none();
    };
    let args: smallvec::SmallVec<[&[u8]; 8]> = (0..argv.argc()).map(|i| argv.arg(i)).collect();
    KeyRights::Many(
        cb(&args)
            .into_iter()
            .map(|(i, f)| (i, f.acl_rights()))
            .collect(),
    )
}

/// The getkeys callback Redis 7.0 declares for a command (its
/// `get_keys_function`), used when the specs cannot answer.
fn callback(name: &str) -> Option<Callback> {
    Some(match name {
        "sort" => sort_keys,
        "sort_ro" => |_| vec![(1, KeyFlags::Names(&["RO", "access"]))],
        "migrate" => migrate_keys,
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro" | "blmpop"
        | "bzmpop" => |argv| numkeys_keys(0, 2, 3, argv),
        "zunionstore" | "zinterstore" | "zdiffstore" => |argv| numkeys_keys(1, 2, 3, argv),
        "zunion" | "zinter" | "zdiff" | "zintercard" | "sintercard" | "lmpop" | "zmpop" => {
            |argv| numkeys_keys(0, 1, 2, argv)
        }
        "georadius" | "georadiusbymember" => georadius_keys,
        "xread" | "xreadgroup" => xread_keys,
        "set" => set_keys,
        "bitfield" => bitfield_keys,
        _ => return None,
    })
}

/// C's `atoi` (as glibc: `(int)strtol`): leading blanks, a sign, digits,
/// and whatever follows ignored.
pub fn atoi(s: &[u8]) -> i32 {
    let mut i = s
        .iter()
        .position(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r'))
        .unwrap_or(s.len());
    let neg = match s.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let mut n: i64 = 0;
    for &b in s[i..].iter().take_while(|b| b.is_ascii_digit()) {
        n = n.saturating_mul(10).saturating_add((b - b'0') as i64);
    }
    (if neg { n.saturating_neg() } else { n }) as i32
}

/// db.c `genericGetKeys`: `numkeys` at `count_at`, keys from `first_at`,
/// the destination (if any) at `store_at`, listed last.
fn numkeys_keys(
    store_at: usize,
    count_at: usize,
    first_at: usize,
    argv: &[&[u8]],
) -> Vec<(usize, KeyFlags)> {
    let num = atoi(argv[count_at]);
    if num < 1 || num as i64 > (argv.len() as i64 - first_at as i64) {
        return Vec::new();
    }
    let mut keys: Vec<(usize, KeyFlags)> = (0..num as usize)
        .map(|i| (first_at + i, NO_FLAGS))
        .collect();
    if store_at != 0 {
        keys.push((store_at, NO_FLAGS));
    }
    keys
}

/// db.c `sortGetKeys`: the sorted key, and the last STORE's key, skipping
/// the arguments of LIMIT, GET and BY.
fn sort_keys(argv: &[&[u8]]) -> Vec<(usize, KeyFlags)> {
    let mut keys = vec![(1, KeyFlags::Names(&["RO", "access"]))];
    let mut store = None;
    let mut i = 2;
    while i < argv.len() {
        let a = argv[i];
        if a.eq_ignore_ascii_case(b"limit") {
            i += 2;
        } else if a.eq_ignore_ascii_case(b"get") || a.eq_ignore_ascii_case(b"by") {
            i += 1;
        } else if a.eq_ignore_ascii_case(b"store") && i + 1 < argv.len() {
            store = Some(i + 1);
        }
        i += 1;
    }
    if let Some(at) = store {
        keys.push((at, KeyFlags::Names(&["OW", "update"])));
    }
    keys
}

/// db.c `migrateGetKeys`: argument 3, or with an empty key there, what
/// follows a KEYS option.
fn migrate_keys(argv: &[&[u8]]) -> Vec<(usize, KeyFlags)> {
    let (mut first, mut num) = (3, 1);
    if argv.len() > 6 {
        if let Some(i) =
            (6..argv.len()).find(|&i| argv[i].eq_ignore_ascii_case(b"keys") && argv[3].is_empty())
        {
            first = i + 1;
            num = argv.len() - first;
        }
    }
    (first..first + num)
        .map(|i| (i, KeyFlags::Names(&["RW", "access", "delete"])))
        .collect()
}

/// db.c `georadiusGetKeys`: the key, and the last STORE or STOREDIST key.
fn georadius_keys(argv: &[&[u8]]) -> Vec<(usize, KeyFlags)> {
    let mut stored = None;
    let mut i = 5;
    while i < argv.len() {
        let a = argv[i];
        if (a.eq_ignore_ascii_case(b"store") || a.eq_ignore_ascii_case(b"storedist"))
            && i + 1 < argv.len()
        {
            stored = Some(i + 1);
            i += 1;
        }
        i += 1;
    }
    let mut keys = vec![(1, NO_FLAGS)];
    keys.extend(stored.map(|at| (at, NO_FLAGS)));
    keys
}

/// db.c `xreadGetKeys`: the first half of what follows STREAMS, found by
/// skipping the options before it.
fn xread_keys(argv: &[&[u8]]) -> Vec<(usize, KeyFlags)> {
    let mut streams = None;
    let mut i = 1;
    while i < argv.len() {
        let a = argv[i];
        if a.eq_ignore_ascii_case(b"block") || a.eq_ignore_ascii_case(b"count") {
            i += 1;
        } else if a.eq_ignore_ascii_case(b"group") {
            i += 2;
        } else if a.eq_ignore_ascii_case(b"noack") {
        } else if a.eq_ignore_ascii_case(b"streams") {
            streams = Some(i);
            break;
        } else {
            break;
        }
        i += 1;
    }
    let Some(at) = streams else {
        return Vec::new();
    };
    let num = argv.len() - at - 1;
    if num == 0 || !num.is_multiple_of(2) {
        return Vec::new();
    }
    (at + 1..at + 1 + num / 2).map(|i| (i, NO_FLAGS)).collect()
}

/// db.c `setGetKeys`: with GET the key is read too.
fn set_keys(argv: &[&[u8]]) -> Vec<(usize, KeyFlags)> {
    let get = argv.iter().skip(3).any(|a| a.eq_ignore_ascii_case(b"get"));
    let flags: &'static [&'static str] = if get {
        &["RW", "access", "update"]
    } else {
        &["OW", "update"]
    };
    vec![(1, KeyFlags::Names(flags))]
}

/// db.c `bitfieldGetKeys`: read-only when every operation is a GET (or
/// OVERFLOW) with its arguments; a SET, an INCRBY or anything it cannot
/// parse makes the key written.
fn bitfield_keys(argv: &[&[u8]]) -> Vec<(usize, KeyFlags)> {
    let mut readonly = true;
    let mut i = 2;
    while i < argv.len() {
        let rem = argv.len() - i - 1;
        let a = argv[i];
        if a.eq_ignore_ascii_case(b"get") && rem >= 2 {
            i += 2;
        } else if a.eq_ignore_ascii_case(b"overflow") && rem >= 1 {
            i += 1;
        } else {
            // SET/INCRBY with their arguments, or a syntax error: Redis
            // assumes a write either way.
            readonly = false;
            break;
        }
        i += 1;
    }
    let flags: &'static [&'static str] = if readonly {
        &["RO", "access"]
    } else {
        &["RW", "access", "update"]
    };
    vec![(1, KeyFlags::Names(flags))]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::acl::{READ, WRITE};
    use proptest::prelude::*;

    /// Arguments the key finders look at: numbers for key counts, the
    /// options the callbacks skip or stop at, plus every keyword a spec
    /// searches for (added per table in `pool`).
    const TOKENS: &[&str] = &[
        "k",
        "",
        "0",
        "1",
        "2",
        "3",
        "-1",
        "x",
        "get",
        "GET",
        "set",
        "incrby",
        "overflow",
        "store",
        "storedist",
        "limit",
        "by",
        "keys",
        "streams",
        "block",
        "count",
        "group",
        "noack",
        "withscores",
    ];

    fn pool(t: &crate::exec::table::CommandTable) -> Vec<&'static str> {
        let mut p: Vec<&'static str> = TOKENS.to_vec();
        for c in t.all() {
            for s in &c.key_specs {
                if let Begin::Keyword { keyword, .. } = s.begin {
                    if !p.contains(&keyword) {
                        p.push(keyword);
                    }
                }
            }
        }
        p
    }

    /// The generic path: the keys GETKEYSANDFLAGS lists, flags read by name.
    fn generic(c: &crate::exec::table::Command, argv: &[&[u8]]) -> Vec<(usize, u8)> {
        command_keys(c.name, &c.key_specs, argv)
            .into_iter()
            .map(|(i, f)| (i, f.acl_rights()))
            .collect()
    }

    fn argv_for<'a>(c: &'a crate::exec::table::Command, rest: &[&'a str]) -> Vec<&'a [u8]> {
        let mut argv: Vec<&[u8]> = c.name.split('|').map(str::as_bytes).collect();
        argv.extend(rest.iter().map(|s| s.as_bytes()));
        argv
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Every command's plan finds what the generic path finds, with
        /// the same rights, on any argument list its arity allows.
        #[test]
        fn plans_agree_with_command_keys(picks in prop::collection::vec(any::<prop::sample::Index>(), 0..12)) {
            let t = crate::server::command_table().expect("command table");
            let pool = pool(&t);
            let rest: Vec<&str> = picks.iter().map(|i| *i.get(&pool)).collect();
            for c in t.all() {
                for n in 0..=rest.len() {
                    let argv = argv_for(c, &rest[..n]);
                    if !c.arity_ok(argv.len()) {
                        continue;
                    }
                    let planned: Vec<(usize, u8)> =
                        acl_key_rights(&c.key_plan, &c.key_specs, argv.as_slice()).to_vec();
                    prop_assert_eq!(&planned, &generic(c, &argv), "{} {:?}", c.name, rest[..n].to_vec());
                }
            }
        }

        /// A plan's [`Stride`] walks the keys its spec walk passes, in
        /// order, with the same rights, and gives up where it does
        /// (including requests too short for the arity, which the ACL
        /// check never sees but the walk must not misread).
        #[test]
        fn strides_walk_as_the_spec_walk(picks in prop::collection::vec(any::<prop::sample::Index>(), 0..12)) {
            let t = crate::server::command_table().expect("command table");
            let pool = pool(&t);
            let rest: Vec<&str> = picks.iter().map(|i| *i.get(&pool)).collect();
            for c in t.all() {
                let Some(stride) = c.key_plan.stride(&c.key_specs) else {
                    continue;
                };
                for n in 0..=rest.len() {
                    let argv = argv_for(c, &rest[..n]);
                    let mut walked = Vec::new();
                    let spec = c.key_plan.each_key(&c.key_specs, argv.as_slice(), |i, r| {
                        walked.push((i, r));
                        true
                    });
                    let mut strode = Vec::new();
                    let by_stride = stride.each_key(argv.len(), |i| {
                        strode.push((i, stride.rights));
                        true
                    });
                    prop_assert_eq!(by_stride, spec, "{} {:?}", c.name, rest[..n].to_vec());
                    if spec.is_some() {
                        prop_assert_eq!(&strode, &walked, "{} {:?}", c.name, rest[..n].to_vec());
                    }
                    // A refusal stops both at the same key.
                    if let Some(&(stop, _)) = walked.get(walked.len() / 2) {
                        let a = c.key_plan.each_key(&c.key_specs, argv.as_slice(), |i, _| i != stop);
                        let b = stride.each_key(argv.len(), |i| i != stop);
                        prop_assert_eq!(a, b, "{} {:?}", c.name, rest[..n].to_vec());
                    }
                }
            }
        }
    }

    #[test]
    fn common_commands_get_numeric_plans() {
        let t = crate::server::command_table().expect("command table");
        let plan = |name: &str| {
            t.all()
                .iter()
                .find(|c| c.name == name)
                .map(|c| c.key_plan)
                .expect(name)
        };
        for (name, want) in [
            ("get", READ),
            ("incr", READ | WRITE),
            ("lpush", WRITE),
            ("hset", WRITE),
            ("sadd", WRITE),
            ("zadd", WRITE),
            ("rpop", READ | WRITE),
        ] {
            assert!(
                matches!(plan(name), KeyPlan::One { pos: 1, rights, .. } if rights == want),
                "{name}: {:?}",
                plan(name)
            );
        }
        assert!(matches!(plan("set"), KeyPlan::Set));
        assert!(matches!(plan("mset"), KeyPlan::Specs { fallback: None }));
        let stride = |name: &str| {
            let c = t.all().iter().find(|c| c.name == name).expect(name);
            c.key_plan.stride(&c.key_specs)
        };
        let s = |first, back, step, rights| {
            Some(Stride {
                first,
                back,
                step,
                rights,
            })
        };
        assert_eq!(stride("mset"), s(1, 1, 2, WRITE));
        assert_eq!(stride("del"), s(1, 1, 1, WRITE));
        assert_eq!(stride("mget"), s(1, 1, 1, READ));
        assert_eq!(stride("blpop"), s(1, 2, 1, READ | WRITE));
        assert_eq!(stride("get"), None, "a One plan");
        assert_eq!(stride("rename"), None, "two specs");
        assert_eq!(stride("eval"), None, "keynum");
        assert!(matches!(plan("eval"), KeyPlan::Specs { fallback: Some(_) }));
        assert!(matches!(plan("bitfield"), KeyPlan::Callback(_)));
        assert!(matches!(plan("ping"), KeyPlan::None));
        // The numeric SET plan reads GET as setGetKeys does.
        let set = t.all().iter().find(|c| c.name == "set").expect("set");
        let with_get: &[&[u8]] = &[b"set", b"k", b"v", b"nx", b"Get"];
        let rights = |argv: &[&[u8]]| acl_key_rights(&set.key_plan, &set.key_specs, argv).to_vec();
        assert_eq!(rights(with_get), vec![(1, READ | WRITE)]);
        assert_eq!(rights(&[b"set", b"k", b"get"]), vec![(1, WRITE)]);
        assert_eq!(
            rights(&[b"set", b"k", b"v", b"ex", b"10"]),
            vec![(1, WRITE)]
        );
    }
}
