//! Who a client is and what it may do: the ACL users (`acl`: the rules,
//! their description and the permission check), the registry of users
//! every connection authenticates against (AUTH, HELLO AUTH, memcached's
//! `-Y` token line), the ACL log, and the default user that `requirepass`
//! sets the password of, as in Redis 7.0.
use crate::exec::keys::Argv;
use crate::shared::Shared;
use acl::User;
use parking_lot::{Mutex, RwLock};
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub mod acl;

/// Every user, by name. Clients hold an `Arc` of their user and refresh it
/// when `generation` moves, so a rule change reaches them at their next
/// command (Redis's clients point at the user itself).
pub struct Registry {
    users: RwLock<BTreeMap<Vec<u8>, Arc<User>>>,
    generation: AtomicU64,
    /// `acl-pubsub-default allchannels`: new users and `reset` start with
    /// every channel.
    pub pubsub_all: std::sync::atomic::AtomicBool,
    pub log: Mutex<AclLog>,
}

impl Registry {
    /// Only the default user, with everything and no password.
    pub fn new(table: &crate::exec::table::CommandTable) -> Registry {
        let mut users = BTreeMap::new();
        users.insert(
            b"default".to_vec(),
            Arc::new(User::default_user(table, false)),
        );
        Registry {
            users: RwLock::new(users),
            generation: AtomicU64::new(1),
            pubsub_all: Default::default(),
            log: Mutex::new(AclLog::default()),
        }
    }

    /// Bumped on every change to any user.
    #[inline]
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    pub fn get(&self, name: &[u8]) -> Option<Arc<User>> {
        self.users.read().get(name).cloned()
    }

    pub fn default_user(&self) -> Arc<User> {
        self.get(b"default")
            .expect("the default user always exists")
    }

    /// Every user, in name order (ACL LIST, USERS, SAVE).
    pub fn all(&self) -> Vec<Arc<User>> {
        self.users.read().values().cloned().collect()
    }

    /// Replaces (or creates) a user; the previous version, if any.
    pub fn put(&self, user: User) -> Option<Arc<User>> {
        let old = self.users.write().insert(user.name.clone(), Arc::new(user));
        self.generation.fetch_add(1, Ordering::AcqRel);
        old
    }

    /// Removes a user (never `default`).
    pub fn remove(&self, name: &[u8]) -> Option<Arc<User>> {
        debug_assert!(name != b"default");
        let old = self.users.write().remove(name);
        if old.is_some() {
            self.generation.fetch_add(1, Ordering::AcqRel);
        }
        old
    }

    /// Swaps in a whole new set of users (ACL LOAD, start-up).
    pub fn replace_all(&self, users: BTreeMap<Vec<u8>, Arc<User>>) {
        *self.users.write() = users;
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// The user `name` if `password` is one of its passwords and it is
    /// enabled (`ACLCheckUserCredentials`).
    pub fn authenticate(&self, name: &[u8], password: &[u8]) -> Option<Arc<User>> {
        self.get(name).filter(|u| u.password_ok(password))
    }
}

/// The user `name` if `pass` logs it in (AUTH, HELLO AUTH, memcached).
pub fn authenticate(shared: &Shared, user: &[u8], pass: &[u8]) -> Option<Arc<User>> {
    shared.acl.authenticate(user, pass)
}

/// The connection acts as `u` from now on.
pub fn set_user(
    shared: &crate::shared::Shared,
    c: &mut crate::client::Client,
    u: std::sync::Arc<crate::auth::acl::User>,
) {
    c.user_gen = shared.acl.generation();
    *c.info.user.lock() = u.name.clone();
    c.user = Some(u);
}

/// `requirepass` changed: it is the default user's only password, or the
/// user is `nopass` when empty (`ACLUpdateDefaultUserPassword`).
pub fn set_default_password(shared: &Shared, password: &str) {
    let mut u = (*shared.acl.default_user()).clone();
    let pubsub_all = shared.acl.pubsub_all.load(Ordering::Relaxed);
    let t = &shared.table;
    u.apply(t, b"resetpass", pubsub_all).expect("valid rule");
    if password.is_empty() {
        u.apply(t, b"nopass", pubsub_all).expect("valid rule");
    } else {
        let mut op = b">".to_vec();
        op.extend_from_slice(password.as_bytes());
        u.apply(t, &op, pubsub_all).expect("valid rule");
    }
    shared.acl.put(u);
    note_default_user(shared);
}

/// Keeps the request path's copy of "the default user needs a password"
/// (protected mode, and whether a new connection starts authenticated).
pub fn note_default_user(shared: &Shared) {
    let d = shared.acl.default_user();
    shared
        .hot
        .requirepass
        .store(!d.nopass, std::sync::atomic::Ordering::Relaxed);
}

/// Builds the users at start, as `ACLLoadUsersAtStartup` after the config:
/// the default user with `requirepass`, then `user` lines (a `default`
/// line starts that user afresh), or else the `aclfile`. Mixing the two is
/// refused, as in Redis.
pub fn load_at_start(shared: &Shared) -> Result<(), String> {
    let (lines, aclfile, requirepass, pubsub_all) = {
        let c = shared.config.read();
        (
            c.user_lines.clone(),
            c.aclfile.clone(),
            c.requirepass.clone(),
            c.acl_pubsub_default == crate::config::PubsubDefault::AllChannels,
        )
    };
    shared.acl.pubsub_all.store(pubsub_all, Ordering::Relaxed);
    if !aclfile.is_empty() && !lines.is_empty() {
        return Err("Configuring Redis with users defined in redis.conf and at the same setting an ACL file path is invalid. This setup is very likely to lead to configuration errors and security holes, please define either an ACL file or declare users directly in your redis.conf, but not both.".into());
    }
    let t = &shared.table;
    let mut users = BTreeMap::new();
    let mut default = User::default_user(t, pubsub_all);
    if !requirepass.is_empty() {
        let mut op = b">".to_vec();
        op.extend_from_slice(requirepass.as_bytes());
        default
            .apply(t, b"resetpass", pubsub_all)
            .expect("valid rule");
        default.apply(t, &op, pubsub_all).expect("valid rule");
    }
    users.insert(b"default".to_vec(), Arc::new(default));
    for line in &lines {
        let name = line[0].as_bytes();
        if acl::has_spaces(name) {
            return Err("Spaces not allowed in ACL usernames".into());
        }
        let mut u = match users.get(name) {
            Some(_) if name != b"default" => {
                return Err(format!(
                    "Duplicate user '{}' found in the configuration: {}",
                    line[0],
                    acl::RuleError::Duplicate.message()
                ))
            }
            Some(_) => {
                let mut d = User::new(b"default", t, pubsub_all);
                d.apply(t, b"reset", pubsub_all).expect("valid rule");
                d
            }
            None => User::new(name, t, pubsub_all),
        };
        let rules: Vec<&[u8]> = line[1..].iter().map(|r| r.as_bytes()).collect();
        let merged = acl::merge_selector_args(&rules).map_err(|i| {
            format!(
                "Unmatched parenthesis in acl selector starting at '{}'.",
                line[1 + i]
            )
        })?;
        for r in &merged {
            u.apply(t, r, pubsub_all).map_err(|e| {
                format!(
                    "Error loading ACL rule '{}' for the user named '{}': {}",
                    String::from_utf8_lossy(r),
                    line[0],
                    e.message()
                )
            })?;
        }
        if !u.enabled {
            crate::log::notice(&format!(
                "The user '{}' is disabled (there is no 'on' modifier in the user description). Make sure this is not a configuration error.",
                line[0]
            ));
        }
        users.insert(name.to_vec(), Arc::new(u));
    }
    if !aclfile.is_empty() {
        users = load_file(shared, &aclfile)
            .map_err(|e| format!("Aborting Redis startup because of ACL errors: {e}"))?;
    }
    shared.acl.replace_all(users);
    note_default_user(shared);
    Ok(())
}

/// Reads an ACL file (`ACLLoadFromFile`): every line `user <name> rules`
/// or blank. All errors are collected; with any, nothing is returned and
/// the caller keeps the users it has. A file without `default` gets the
/// stock default user.
pub fn load_file(shared: &Shared, path: &str) -> Result<BTreeMap<Vec<u8>, Arc<User>>, String> {
    let text = std::fs::read(path).map_err(|e| {
        format!(
            "Error loading ACLs, opening file '{path}': {}",
            crate::config::os_error_text(&e)
        )
    })?;
    let t = &shared.table;
    let pubsub_all = shared.acl.pubsub_all.load(Ordering::Relaxed);
    let mut users: BTreeMap<Vec<u8>, Arc<User>> = BTreeMap::new();
    let mut errors = String::new();
    for (i, raw) in text.split(|&b| b == b'\n').enumerate() {
        let linenum = i + 1;
        let line = trim(raw, b" \t\r\n");
        if line.is_empty() {
            continue;
        }
        // Redis splits on single spaces (sdssplitlen), no quoting.
        let argv: Vec<&[u8]> = line.split(|&b| b == b' ').collect();
        if argv[0] != b"user" || argv.len() < 2 {
            errors.push_str(&format!(
                "{path}:{linenum} should start with user keyword followed by the username. "
            ));
            continue;
        }
        let name = argv[1];
        if acl::has_spaces(name) {
            errors.push_str(&format!(
                "'{path}:{linenum}: username '{}' contains invalid characters. ",
                String::from_utf8_lossy(name)
            ));
            continue;
        }
        if users.contains_key(name) {
            errors.push_str(&format!(
                "WARNING: Duplicate user '{}' found on line {linenum}. ",
                String::from_utf8_lossy(name)
            ));
            continue;
        }
        let mut u = User::new(name, t, pubsub_all);
        let Ok(merged) = acl::merge_selector_args(&argv[2..]) else {
            errors.push_str(&format!(
                "{path}:{linenum}: Unmatched parenthesis in selector definition."
            ));
            continue;
        };
        for r in &merged {
            let r = trim(r, b"\t\r\n");
            if let Err(e) = u.apply(t, r, pubsub_all) {
                errors.push_str(&format!("{path}:{linenum}: {}. ", e.message()));
            }
        }
        users.insert(name.to_vec(), Arc::new(u));
    }
    if !errors.is_empty() {
        errors.push_str(
            "WARNING: ACL errors detected, no change to the previously active ACL rules was performed",
        );
        return Err(errors);
    }
    users
        .entry(b"default".to_vec())
        .or_insert_with(|| Arc::new(User::default_user(t, pubsub_all)));
    Ok(users)
}

/// Writes every user to `path` as `user <name> <rules>` lines, through a
/// temporary file renamed into place (`ACLSaveToFile`).
pub fn save_file(shared: &Shared, path: &str) -> std::io::Result<()> {
    let mut out = Vec::new();
    for u in shared.acl.all() {
        out.extend_from_slice(b"user ");
        out.extend_from_slice(&u.name);
        out.push(b' ');
        out.extend_from_slice(&u.describe(&shared.table));
        out.push(b'\n');
    }
    let tmp = format!(
        "{path}.tmp-{}-{}",
        std::process::id(),
        cairn_engine::clock::now_ms()
    );
    let r = std::fs::write(&tmp, &out).and_then(|()| std::fs::rename(&tmp, path));
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r
}

/// Every user as CONFIG REWRITE writes it when users come from `user`
/// lines (no `aclfile`): the name and the rules, in name order, as
/// Redis's rewriteConfigUserOption writes `user <name> <ACL LIST rules>`.
pub fn config_lines(shared: &Shared) -> Vec<Vec<String>> {
    shared
        .acl
        .all()
        .iter()
        .map(|u| {
            vec![
                String::from_utf8_lossy(&u.name).into_owned(),
                String::from_utf8_lossy(&u.describe(&shared.table)).into_owned(),
            ]
        })
        .collect()
}

fn trim<'a>(mut s: &'a [u8], set: &[u8]) -> &'a [u8] {
    while let [first, rest @ ..] = s {
        if !set.contains(first) {
            break;
        }
        s = rest;
    }
    while let [rest @ .., last] = s {
        if !set.contains(last) {
            break;
        }
        s = rest;
    }
    s
}

/// The command (or subcommand) `argv` names, as the dispatcher resolves it
/// (`lookupCommand`), or None.
pub fn lookup_command<'t>(
    shared: &'t Shared,
    argv: &[&[u8]],
) -> Option<&'t crate::exec::table::Command> {
    let cmd = shared.table.lookup(argv.first()?)?;
    if cmd.subs.is_empty() || argv.len() < 2 {
        return Some(cmd);
    }
    shared.table.lookup_sub(cmd, argv[1])
}

/// The key arguments of `argv` with the rights each needs: read for a
/// key the command reads, write for one it inserts, updates or deletes
/// (from the key specs' flags, or the command's key callback; resolved
/// to numbers when the table was built, `exec::keys::KeyPlan`).
#[inline]
pub fn key_rights<A: Argv + ?Sized>(
    cmd: &crate::exec::table::Command,
    argv: &A,
) -> crate::exec::keys::KeyRights {
    crate::exec::keys::acl_key_rights(&cmd.key_plan, &cmd.key_specs, argv)
}

/// Brings the client's user up to date when any user changed since it
/// was read: rules changed by SETUSER apply from the next command, as in
/// Redis where clients point at the user itself. A deleted user's clients
/// are being closed; until then they act as the unauthenticated default.
///
/// Inlined, the re-read apart: as a call it cost every command ~18
/// instructions, most of them the call's register saves (callgrind,
/// session 18).
#[inline(always)]
pub fn refresh(shared: &Shared, client: &mut crate::client::Client) {
    let gen = shared.acl.generation();
    if client.user_gen != gen && client.user.is_some() {
        reread_user(shared, client, gen);
    }
}

/// [`refresh`] when the registry's generation moved.
#[cold]
#[inline(never)]
fn reread_user(shared: &Shared, client: &mut crate::client::Client, gen: u64) {
    client.user_gen = gen;
    let name = client
        .user
        .as_ref()
        .map(|u| u.name.clone())
        .unwrap_or_default();
    match shared.acl.get(&name) {
        Some(u) => client.user = Some(u),
        None => {
            client.user = Some(shared.acl.default_user());
            client.authenticated = false;
        }
    }
}

/// True if the client's user has rules to check: callers gather the
/// arguments for [`check`] only then (the default user as shipped has
/// none, and pays nothing more).
#[inline]
pub fn restricted(client: &crate::client::Client) -> bool {
    client.user.as_ref().is_some_and(|u| !u.unrestricted())
}

/// May `client` run `cmd` with `argv`? On a refusal the denial is logged
/// in the ACL log (`context`), and the reason returned for the caller to
/// word. Users whose root selector allows everything pay three flag tests.
///
/// Inlined, with a restricted user's common case: the user's table
/// (`acl::User::allows_at_once`: one load, and for a key one argument
/// read and the root's compiled patterns), so a one-key command of a
/// key-pattern user makes no call here; the call to the whole check
/// (and its spills: ~40 instructions, callgrind, session 16) is paid
/// only when the table does not say yes.
#[inline(always)]
pub fn check<A: Argv + ?Sized>(
    shared: &Shared,
    client: &crate::client::Client,
    cmd: &crate::exec::table::Command,
    argv: &A,
    context: Context,
) -> Result<(), acl::Denied> {
    match &client.user {
        Some(u) if !u.unrestricted() => {
            if u.allows_at_once(cmd, argv) {
                Ok(())
            } else {
                check_whole(shared, client, u, cmd, argv, context)
            }
        }
        _ => Ok(()),
    }
}

/// [`check`] when the user's table does not answer yes: every selector
/// (`ACLCheckAllUserCommandPerm`), and the refusal logged.
#[inline(never)]
fn check_whole<A: Argv + ?Sized>(
    shared: &Shared,
    client: &crate::client::Client,
    u: &acl::User,
    cmd: &crate::exec::table::Command,
    argv: &A,
    context: Context,
) -> Result<(), acl::Denied> {
    match u.check_args(cmd, argv, &key_rights(cmd, argv)) {
        Ok(()) => Ok(()),
        Err(d) => Err(denial(shared, client, cmd, argv, context, d)),
    }
}

/// Logs a refusal of [`check`] (kept out of the allowed path).
#[cold]
#[inline(never)]
fn denial<A: Argv + ?Sized>(
    shared: &Shared,
    client: &crate::client::Client,
    cmd: &crate::exec::table::Command,
    argv: &A,
    context: Context,
    denied: acl::Denied,
) -> acl::Denied {
    let (reason, object) = match denied {
        acl::Denied::Command => (Reason::Command, cmd.name.as_bytes()),
        acl::Denied::Key(i) => (Reason::Key, argv.arg(i)),
        acl::Denied::Channel(i) => (Reason::Channel, argv.arg(i)),
    };
    // A script's denial shows the client running its EVAL (Redis logs the
    // script's caller).
    let running = if context == Context::Lua {
        client.running
    } else {
        cmd.name
    };
    log_denial(shared, client, running, reason, context, object, None);
    denied
}

/// The NOPERM reply for a refused command (Redis's `processCommand`).
pub fn noperm(cmd: &crate::exec::table::Command, denied: acl::Denied) -> String {
    match denied {
        acl::Denied::Command => format!(
            "NOPERM this user has no permissions to run the '{}' command",
            cmd.name
        ),
        acl::Denied::Key(_) => {
            "NOPERM this user has no permissions to access one of the keys used as arguments".into()
        }
        acl::Denied::Channel(_) => {
            "NOPERM this user has no permissions to access one of the channels used as arguments"
                .into()
        }
    }
}

/// Why a denial is logged (ACL LOG's `reason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    Command,
    Key,
    Channel,
    Auth,
}

impl Reason {
    pub fn name(self) -> &'static str {
        match self {
            Reason::Command => "command",
            Reason::Key => "key",
            Reason::Channel => "channel",
            Reason::Auth => "auth",
        }
    }
}

/// Where the denied command ran (ACL LOG's `context`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Context {
    TopLevel,
    Multi,
    Lua,
}

impl Context {
    pub fn name(self) -> &'static str {
        match self {
            Context::TopLevel => "toplevel",
            Context::Multi => "multi",
            Context::Lua => "lua",
        }
    }
}

/// One ACL LOG entry; similar denials within a minute are counted in one.
#[derive(Clone, Debug)]
pub struct LogEntry {
    pub count: u64,
    pub reason: Reason,
    pub context: Context,
    pub object: Vec<u8>,
    pub username: Vec<u8>,
    /// Unix ms of the latest occurrence.
    pub ctime_ms: u64,
    /// CLIENT INFO line of the latest client.
    pub client_info: String,
}

/// The ACL log, newest first, at most `acllog-max-len` entries.
#[derive(Default)]
pub struct AclLog {
    entries: VecDeque<LogEntry>,
}

/// Denials this close together (ms) with the same reason, context, object
/// and user update one entry (`ACL_LOG_GROUPING_MAX_TIME_DELTA`).
const GROUPING_MS: u64 = 60_000;

impl AclLog {
    /// `addACLLogEntry`: looks at the 10 newest entries for a match.
    pub fn add(&mut self, e: LogEntry, max_len: usize) {
        let found = self.entries.iter().take(10).position(|c| {
            c.reason == e.reason
                && c.context == e.context
                && c.ctime_ms.abs_diff(e.ctime_ms) <= GROUPING_MS
                && c.object == e.object
                && c.username == e.username
        });
        match found {
            Some(i) => {
                let mut m = self.entries.remove(i).expect("found");
                m.count += 1;
                m.ctime_ms = e.ctime_ms;
                m.client_info = e.client_info;
                self.entries.push_front(m);
            }
            None => {
                self.entries.push_front(e);
                self.entries.truncate(max_len);
            }
        }
    }

    pub fn reset(&mut self) {
        self.entries.clear();
    }

    pub fn entries(&self) -> impl Iterator<Item = &LogEntry> {
        self.entries.iter()
    }
}

/// Logs a denial for `client` (its CLIENT INFO line as it runs `cmd`,
/// its user).
pub fn log_denial(
    shared: &Shared,
    client: &crate::client::Client,
    cmd: &'static str,
    reason: Reason,
    context: Context,
    object: &[u8],
    username: Option<&[u8]>,
) {
    let max = shared.config.read().acllog_max_len as usize;
    let e = LogEntry {
        count: 1,
        reason,
        context,
        object: object.to_vec(),
        username: match username {
            Some(u) => u.to_vec(),
            None => client.info.user.lock().clone(),
        },
        ctime_ms: cairn_engine::clock::now_ms(),
        client_info: {
            let mut line = Vec::new();
            let running = crate::client::Running {
                client,
                qbuf: 0,
                argv_mem: 0,
                cmd,
            };
            crate::client::client_line(&mut line, shared, &client.info, Some(running));
            while line.last() == Some(&b'\n') {
                line.pop();
            }
            String::from_utf8_lossy(&line).into_owned()
        },
    };
    shared.acl.log.lock().add(e, max);
}

/// Compares without an early exit on the first differing byte, so the
/// time taken does not reveal how much of a guess was right (Redis
/// compares SHA-256 digests with `time_independent_strcmp` for the same
/// reason). The length still shows; Redis hides it by hashing first.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let n = a.len().max(b.len());
    let mut diff = (a.len() != b.len()) as u8;
    for i in 0..n {
        diff |= a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0);
    }
    diff == 0
}

#[cfg(test)]
mod tests {
    use super::{acl, constant_time_eq, key_rights};
    use proptest::prelude::*;

    /// Arguments and key patterns built from a few bytes, so keys and
    /// patterns meet often, at lengths either side of the 8-byte word.
    const WORDS: &[&str] = &[
        "key:",
        "key:1",
        "key:12345678",
        "k",
        "",
        "myhash",
        "my",
        "counter:",
        "1",
        "2",
        "0",
        "get",
        "GET",
        "x",
        "keys",
        "numkeys",
        "store",
        "by",
        "limit",
        "streams",
        "block",
    ];
    const PATTERNS: &[&str] = &[
        "key:*",
        "k*",
        "*",
        "myhash",
        "my*",
        "counter:*",
        "key:12345678*",
        "key:1",
        "k?y:*",
        "[km]*",
        "key:123456789",
        "x",
        "",
    ];

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// The shortcut says yes only where the whole check does, and for
        /// a user with one selector on a command whose keys the plan
        /// finds (no callback) and the root allows outright, exactly where
        /// it does.
        #[test]
        fn the_shortcut_agrees_with_the_whole_check(
            pats in prop::collection::vec((any::<prop::sample::Index>(), 1u8..4), 0..4),
            commands in any::<bool>(),
            channels in any::<bool>(),
            selector in any::<bool>(),
            picks in prop::collection::vec(any::<prop::sample::Index>(), 0..10),
            which in prop::collection::vec(any::<prop::sample::Index>(), 16),
        ) {
            let t = crate::server::command_table().expect("command table");
            let mut rules: Vec<String> = vec!["on".into()];
            let allowed = if commands { "+@all" } else { "-@all +get +set +mset +hset +incr +del +publish +eval" };
            rules.extend(allowed.split(' ').map(String::from));
            rules.push(if channels { "&*".into() } else { "resetchannels".into() });
            for (i, r) in &pats {
                let rights = ["", "R", "W", "RW"][*r as usize];
                rules.push(format!("%{rights}~{}", i.get(PATTERNS)));
            }
            if selector {
                rules.push("(~counter:* +@all)".into());
            }
            let mut u = acl::User::new(b"u", &t, false);
            for r in &rules {
                u.apply(&t, r.as_bytes(), false).expect("rule");
            }
            let rest: Vec<&[u8]> = picks.iter().map(|i| i.get(WORDS).as_bytes()).collect();
            for w in &which {
                let c = w.get(t.all());
                let mut argv: Vec<&[u8]> = c.name.split('|').map(str::as_bytes).collect();
                argv.extend(&rest);
                while !c.arity_ok(argv.len()) && argv.len() > 1 {
                    argv.pop();
                }
                if !c.arity_ok(argv.len()) {
                    continue;
                }
                let whole = u.check(c, &argv, &key_rights(c, argv.as_slice()));
                let quick = u.allows_at_once(c, argv.as_slice());
                if quick {
                    prop_assert_eq!(whole, Ok(()), "{:?} {:?}", rules, argv);
                }
                let decidable = u.selectors().len() == 1
                    && u.keys_decide(c).is_some()
                    && c.key_plan.each_key(&c.key_specs, argv.as_slice(), |_, _| true).is_some();
                if decidable {
                    prop_assert_eq!(quick, whole.is_ok(), "{:?} {:?}", rules, argv);
                }
            }
        }
    }

    #[test]
    fn constant_time_eq_is_equality() {
        assert!(constant_time_eq(b"", b""));
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret1"));
        assert!(!constant_time_eq(b"secret", b""));
        assert!(!constant_time_eq(b"a\0", b"a"));
    }
}
