//! ACL users as Redis 7.0 models them (acl.c): a user's flags and password
//! hashes, and its selectors (the root one, rules outside parentheses, plus
//! any in parentheses), each with a command bitmap, first-arg exceptions,
//! key patterns with read/write rights and channel patterns. This module
//! owns the rules' syntax (`ACL SETUSER`, `user` lines), their description
//! (`ACL LIST`, `ACL GETUSER`, `ACL SAVE`) and the permission check; it
//! knows commands only through the command table, so categories come from
//! the metadata generated from Redis.
//!
//! Command ids are the table's indexes. Redis reserves its bitmap's last
//! bit to remember "+@all" (future commands); here that is `future`.
//! Where Redis walks its command dictionaries (whose order changes with
//! the hash seed of each run) this walks the table in its order, so a
//! description lists single commands in table order.
use crate::exec::keys::{Argv, KeyPlan, Stride};
use crate::exec::table::{flags, Command, CommandTable};
use cairn_engine::util::glob::glob_match;
use sha2::{Digest, Sha256};

/// Redis's categories, in its order (ACL CAT, descriptions).
pub const CATEGORIES: [&str; 21] = [
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

/// The category bit of `name` (any case), as `ACLGetCommandCategoryFlagByName`.
pub fn category_bit(name: &str) -> Option<u32> {
    CATEGORIES
        .iter()
        .position(|c| c.eq_ignore_ascii_case(name))
        .map(|i| 1 << i)
}

/// A command's categories as bits, from its metadata ("@read", ...).
pub fn command_categories(cmd: &Command) -> u32 {
    cmd.meta
        .acl_categories
        .iter()
        .filter_map(|c| category_bit(c.trim_start_matches('@')))
        .fold(0, |a, b| a | b)
}

/// Key rights a pattern grants, and a key access needs.
pub const READ: u8 = 1;
pub const WRITE: u8 = 2;
const ALL: u8 = READ | WRITE;

/// Why a rule was refused, worded by [`RuleError::message`] as
/// `ACLSetUserStringError`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleError {
    /// Unknown command or category.
    NoSuchCommand,
    Syntax,
    PatternAfterAllKeys,
    PatternAfterAllChannels,
    NoSuchPassword,
    BadHash,
    FirstArgOfSubcommand,
    /// A user defined twice in the configuration.
    Duplicate,
}

impl RuleError {
    pub fn message(self) -> &'static str {
        match self {
            RuleError::NoSuchCommand => "Unknown command or category name in ACL",
            RuleError::Syntax => "Syntax error",
            RuleError::PatternAfterAllKeys => {
                "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns"
            }
            RuleError::PatternAfterAllChannels => {
                "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels"
            }
            RuleError::NoSuchPassword => {
                "The password you are trying to remove from the user does not exist"
            }
            RuleError::BadHash => {
                "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters"
            }
            RuleError::FirstArgOfSubcommand => {
                "Allowing first-arg of a subcommand is not supported"
            }
            RuleError::Duplicate => {
                "Duplicate user found. A user can only be defined once in config files"
            }
        }
    }
}

/// One key pattern and the rights it grants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyPattern {
    pub pattern: Vec<u8>,
    pub rights: u8,
    shape: Shape,
    /// A literal (`Exact`) or a `Prefix` pattern's literal part of at
    /// most 8 bytes, as [`head_word`] of a key reads it masked with
    /// `mask`: such a pattern matches a key whose length is within
    /// `min_len..=max_len` and whose masked word equals `head`, one
    /// compare instead of a memcmp call (~18 instructions a key) and a
    /// branch on the shape (callgrind). Other patterns go to
    /// [`KeyPattern::matches`]: they have `min_len` > `max_len`, and a
    /// `head` no masked word equals (1 under a mask of 0), since the
    /// wrapping length test alone would pass an empty key.
    head: u64,
    mask: u64,
    min_len: usize,
    max_len: usize,
}

/// A key's first 8 bytes as a little-endian word, zero-padded when the
/// key is shorter (the bytes read twice by the two overlapping loads of a
/// 4-7 byte key are the same, so or-ing them is exact). Patterns hold no
/// NUL byte (`has_spaces`), but the word tests bound the key's length
/// anyway, so padding never stands in for a byte.
#[inline(always)]
fn head_word(key: &[u8]) -> u64 {
    if let Some(w) = key.first_chunk::<8>() {
        return u64::from_le_bytes(*w);
    }
    let n = key.len();
    if let (Some(lo), Some(hi)) = (key.first_chunk::<4>(), key.last_chunk::<4>()) {
        let (lo, hi) = (
            u32::from_le_bytes(*lo) as u64,
            u32::from_le_bytes(*hi) as u64,
        );
        return lo | (hi << (8 * (n - 4)));
    }
    key.iter()
        .enumerate()
        .fold(0, |w, (i, &b)| w | ((b as u64) << (8 * i)))
}

/// What a key pattern needs to be matched: most are a literal prefix and
/// `*` (`~app:*`) or a literal, which need no glob matcher. Decided once,
/// when the rule is set, since every command of a restricted user checks
/// each of its keys against the patterns (a glob match cost ~150
/// instructions a SET, callgrind).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    Exact,
    Prefix,
    Glob,
}

impl Shape {
    fn of(pattern: &[u8]) -> Shape {
        let special = |b: &u8| matches!(b, b'*' | b'?' | b'[' | b'\\');
        match pattern.split_last() {
            _ if !pattern.iter().any(special) => Shape::Exact,
            Some((b'*', head)) if !head.iter().any(special) => Shape::Prefix,
            _ => Shape::Glob,
        }
    }
}

impl KeyPattern {
    fn new(pattern: &[u8], rights: u8) -> KeyPattern {
        let shape = Shape::of(pattern);
        // The literal a word test compares, and the key lengths it holds
        // for: a literal's own length, or (a prefix) at least its length
        // and at least 1 (stringmatchlen matches no empty key against
        // "*"). An empty range for the rest.
        let (literal, min_len, max_len) = match shape {
            Shape::Exact if pattern.len() <= 8 => (pattern, pattern.len(), pattern.len()),
            Shape::Prefix if pattern.len() <= 9 => {
                let literal = &pattern[..pattern.len() - 1];
                (literal, literal.len().max(1), usize::MAX)
            }
            _ => (&[][..], usize::MAX, 0),
        };
        let mut word = [0u8; 8];
        word[..literal.len()].copy_from_slice(literal);
        let head = if min_len > max_len {
            1
        } else {
            u64::from_le_bytes(word)
        };
        KeyPattern {
            pattern: pattern.to_vec(),
            rights,
            shape,
            head,
            mask: u64::MAX
                .checked_shr(64 - 8 * literal.len() as u32)
                .unwrap_or(0),
            min_len,
            max_len,
        }
    }

    /// True if this is a word-test pattern (short literal or prefix) and
    /// it matches the key of length `len` whose [`head_word`] is `word`.
    #[inline(always)]
    fn word_matches(&self, word: u64, len: usize) -> bool {
        len.wrapping_sub(self.min_len) <= self.max_len.wrapping_sub(self.min_len)
            && word & self.mask == self.head
    }

    /// True if the pattern needs [`KeyPattern::matches`] (no word test).
    #[inline]
    fn needs_matcher(&self) -> bool {
        self.min_len > self.max_len
    }

    /// Redis's `stringmatchlen(pattern, key, nocase = 0)`.
    #[inline]
    fn matches(&self, key: &[u8]) -> bool {
        match self.shape {
            Shape::Exact => key == self.pattern.as_slice(),
            // An empty key matches no pattern but the empty one, "*"
            // included (stringmatchlen's loop never runs).
            // (A short prefix is matched by `word_matches` instead.)
            Shape::Prefix => {
                !key.is_empty() && key.starts_with(&self.pattern[..self.pattern.len() - 1])
            }
            Shape::Glob => glob_match(&self.pattern, key, false),
        }
    }

    fn describe(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(match self.rights {
            ALL => b"~".as_slice(),
            READ => b"%R~",
            _ => b"%W~",
        });
        out.extend_from_slice(&self.pattern);
    }
}

/// A set of rules: what a user may run, on which keys and channels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selector {
    root: bool,
    all_keys: bool,
    all_channels: bool,
    all_commands: bool,
    /// One bit per command id.
    allowed: Vec<u64>,
    /// Set by +@all / allcommands: Redis's reserved bit, "future commands".
    future: bool,
    /// Allowed first arguments of otherwise denied commands (+select|0).
    first_args: Vec<(usize, Vec<Vec<u8>>)>,
    keys: Vec<KeyPattern>,
    /// Some pattern of `keys` needs the matcher (`KeyPattern::needs_matcher`),
    /// kept up to date by `apply`.
    matcher_keys: bool,
    channels: Vec<Vec<u8>>,
}

impl Selector {
    fn new(root: bool, n: usize, pubsub_all: bool) -> Selector {
        Selector {
            root,
            all_keys: false,
            all_channels: pubsub_all,
            all_commands: false,
            allowed: vec![0; n.div_ceil(64)],
            future: false,
            first_args: Vec::new(),
            keys: Vec::new(),
            matcher_keys: false,
            channels: Vec::new(),
        }
    }

    #[inline]
    fn bit(&self, id: usize) -> bool {
        self.allowed
            .get(id / 64)
            .is_some_and(|w| w & (1 << (id % 64)) != 0)
    }

    fn set_bit(&mut self, id: usize, on: bool) {
        if let Some(w) = self.allowed.get_mut(id / 64) {
            if on {
                *w |= 1 << (id % 64);
            } else {
                *w &= !(1 << (id % 64));
                self.all_commands = false;
            }
        }
    }

    fn reset_first_args(&mut self, id: usize) {
        self.first_args.retain(|(i, _)| *i != id);
    }

    /// `ACLChangeSelectorPerm`: a container's subcommands follow it.
    fn change_perm(&mut self, t: &CommandTable, id: usize, allow: bool) {
        self.set_bit(id, allow);
        self.reset_first_args(id);
        for &sub in t.get(id).subs.values() {
            self.set_bit(sub, allow);
        }
    }

    fn set_category(&mut self, t: &CommandTable, cat: u32, allow: bool) {
        for cmd in t.all() {
            if command_categories(cmd) & cat != 0 {
                self.change_perm(t, cmd.id, allow);
            }
        }
    }

    /// Commands of a category this selector allows and denies.
    fn count_category(&self, t: &CommandTable, cat: u32) -> (usize, usize) {
        let (mut on, mut off) = (0, 0);
        for cmd in t.all() {
            if command_categories(cmd) & cat != 0 {
                if self.bit(cmd.id) {
                    on += 1;
                } else {
                    off += 1;
                }
            }
        }
        (on, off)
    }

    /// One rule that acts on a selector (`ACLSetSelector`).
    fn apply(&mut self, t: &CommandTable, op: &[u8]) -> Result<(), RuleError> {
        let is = |w: &str| op.eq_ignore_ascii_case(w.as_bytes());
        if is("allkeys") || is("~*") {
            self.all_keys = true;
            self.keys.clear();
            self.matcher_keys = false;
        } else if is("resetkeys") {
            self.all_keys = false;
            self.keys.clear();
            self.matcher_keys = false;
        } else if is("allchannels") || is("&*") {
            self.all_channels = true;
            self.channels.clear();
        } else if is("resetchannels") {
            self.all_channels = false;
            self.channels.clear();
        } else if is("allcommands") || is("+@all") {
            self.allowed.iter_mut().for_each(|w| *w = u64::MAX);
            self.future = true;
            self.all_commands = true;
            self.first_args.clear();
        } else if is("nocommands") || is("-@all") {
            self.allowed.iter_mut().for_each(|w| *w = 0);
            self.future = false;
            self.all_commands = false;
            self.first_args.clear();
        } else if op[0] == b'~' || op[0] == b'%' {
            if self.all_keys {
                return Err(RuleError::PatternAfterAllKeys);
            }
            let (rights, offset) = if op[0] == b'%' {
                let mut rights = 0;
                let mut offset = 1;
                loop {
                    match op.get(offset).map(u8::to_ascii_uppercase) {
                        Some(b'R') if rights & READ == 0 => rights |= READ,
                        Some(b'W') if rights & WRITE == 0 => rights |= WRITE,
                        Some(b'~') => {
                            offset += 1;
                            break;
                        }
                        // "%R" with no "~": Redis ends its loop at the end
                        // of the rule and takes an empty pattern.
                        None => break,
                        _ => return Err(RuleError::Syntax),
                    }
                    offset += 1;
                }
                (rights, offset)
            } else {
                (ALL, 1)
            };
            let pattern = &op[offset..];
            if has_spaces(pattern) {
                return Err(RuleError::Syntax);
            }
            match self.keys.iter_mut().find(|k| k.pattern == pattern) {
                Some(k) => k.rights |= rights,
                None => self.keys.push(KeyPattern::new(pattern, rights)),
            }
            self.all_keys = false;
            self.matcher_keys = self.keys.iter().any(KeyPattern::needs_matcher);
        } else if op[0] == b'&' {
            if self.all_channels {
                return Err(RuleError::PatternAfterAllChannels);
            }
            let pattern = &op[1..];
            if has_spaces(pattern) {
                return Err(RuleError::Syntax);
            }
            if !self.channels.iter().any(|c| c == pattern) {
                self.channels.push(pattern.to_vec());
            }
            self.all_channels = false;
        } else if op[0] == b'+' && op.get(1) != Some(&b'@') {
            let name = &op[1..];
            match name.iter().rposition(|&b| b == b'|') {
                None => {
                    let cmd = lookup(t, name).ok_or(RuleError::NoSuchCommand)?;
                    self.change_perm(t, cmd.id, true);
                }
                Some(bar) => {
                    let (base, sub) = (&name[..bar], &name[bar + 1..]);
                    let cmd = lookup(t, base).ok_or(RuleError::NoSuchCommand)?;
                    if cmd.parent.is_some() {
                        return Err(RuleError::FirstArgOfSubcommand);
                    }
                    if sub.is_empty() {
                        return Err(RuleError::Syntax);
                    }
                    if !cmd.subs.is_empty() {
                        let sub = lookup(t, name).ok_or(RuleError::NoSuchCommand)?;
                        self.change_perm(t, sub.id, true);
                    } else {
                        crate::log::warning(&format!(
                            "Deprecation warning: Allowing a first arg of an otherwise blocked command is a misuse of ACL and may get disabled in the future (offender: +{})",
                            String::from_utf8_lossy(name)
                        ));
                        self.add_first_arg(cmd.id, sub);
                    }
                }
            }
        } else if op[0] == b'-' && op.get(1) != Some(&b'@') {
            let cmd = lookup(t, &op[1..]).ok_or(RuleError::NoSuchCommand)?;
            self.change_perm(t, cmd.id, false);
        } else if (op[0] == b'+' || op[0] == b'-') && op.get(1) == Some(&b'@') {
            let name = std::str::from_utf8(&op[2..]).map_err(|_| RuleError::NoSuchCommand)?;
            let cat = category_bit(name).ok_or(RuleError::NoSuchCommand)?;
            self.set_category(t, cat, op[0] == b'+');
        } else {
            return Err(RuleError::Syntax);
        }
        Ok(())
    }

    fn add_first_arg(&mut self, id: usize, arg: &[u8]) {
        match self.first_args.iter_mut().find(|(i, _)| *i == id) {
            Some((_, args)) => {
                if !args.iter().any(|a| a.eq_ignore_ascii_case(arg)) {
                    args.push(arg.to_vec());
                }
            }
            None => self.first_args.push((id, vec![arg.to_vec()])),
        }
    }

    fn first_args_of(&self, id: usize) -> &[Vec<u8>] {
        self.first_args
            .iter()
            .find(|(i, _)| *i == id)
            .map_or(&[], |(_, a)| a.as_slice())
    }

    /// The command rules that rebuild this selector's bitmap, starting
    /// with +@all or -@all (`ACLDescribeSelectorCommandRules`).
    pub fn describe_commands(&self, t: &CommandTable) -> String {
        let n = t.all().len();
        let mut fake = Selector::new(false, n, false);
        let additive = !self.future;
        let mut rules = String::from(if additive { "-@all " } else { "+@all " });
        fake.apply(t, rules.trim_end().as_bytes())
            .expect("a valid rule");
        // Best-fit categories, applied to a copy of the bitmap inverted as
        // they are chosen, so each round sees what is left to explain.
        let mut temp = Selector::new(false, n, false);
        temp.allowed.clone_from(&self.allowed);
        let mut applied = [false; CATEGORIES.len()];
        loop {
            let mut best = None;
            let (mut mindiff, mut maxsame) = (usize::MAX, 0);
            for (j, name) in CATEGORIES.iter().enumerate() {
                if applied[j] {
                    continue;
                }
                let (on, off) = temp.count_category(t, category_bit(name).expect("known"));
                let (diff, same) = if additive { (off, on) } else { (on, off) };
                if same > diff && (diff < mindiff || (diff == mindiff && same > maxsame)) {
                    best = Some(j);
                    mindiff = diff;
                    maxsame = same;
                }
            }
            let Some(j) = best else { break };
            let cat = 1 << j;
            fake.set_category(t, cat, additive);
            temp.set_category(t, cat, !additive);
            rules.push_str(if additive { "+@" } else { "-@" });
            rules.push_str(CATEGORIES[j]);
            rules.push(' ');
            applied[j] = true;
        }
        // Then single commands where the bitmaps still differ.
        for cmd in t.all() {
            let userbit = self.bit(cmd.id);
            if userbit != fake.bit(cmd.id) {
                rules.push(if userbit { '+' } else { '-' });
                rules.push_str(cmd.name);
                rules.push(' ');
                fake.change_perm(t, cmd.id, userbit);
            }
            if !userbit {
                for arg in self.first_args_of(cmd.id) {
                    rules.push('+');
                    rules.push_str(cmd.name);
                    rules.push('|');
                    rules.push_str(&String::from_utf8_lossy(arg));
                    rules.push(' ');
                }
            }
        }
        rules.pop();
        debug_assert_eq!(
            fake.allowed, self.allowed,
            "description does not rebuild: {rules}"
        );
        rules
    }

    /// Keys as GETUSER shows them ("~*", or the patterns space-separated).
    pub fn describe_keys(&self) -> Vec<u8> {
        if self.all_keys {
            return b"~*".to_vec();
        }
        let mut out = Vec::new();
        for (i, k) in self.keys.iter().enumerate() {
            if i > 0 {
                out.push(b' ');
            }
            k.describe(&mut out);
        }
        out
    }

    /// Channels as GETUSER shows them.
    pub fn describe_channels(&self) -> Vec<u8> {
        if self.all_channels {
            return b"&*".to_vec();
        }
        let mut out = Vec::new();
        for (i, c) in self.channels.iter().enumerate() {
            if i > 0 {
                out.push(b' ');
            }
            out.push(b'&');
            out.extend_from_slice(c);
        }
        out
    }

    /// The selector in rule form (`ACLDescribeSelector`).
    fn describe(&self, t: &CommandTable, out: &mut Vec<u8>) {
        if self.all_keys {
            out.extend_from_slice(b"~* ");
        } else {
            for k in &self.keys {
                k.describe(out);
                out.push(b' ');
            }
        }
        if self.all_channels {
            out.extend_from_slice(b"&* ");
        } else {
            out.extend_from_slice(b"resetchannels ");
            for c in &self.channels {
                out.push(b'&');
                out.extend_from_slice(c);
                out.push(b' ');
            }
        }
        out.extend_from_slice(self.describe_commands(t).as_bytes());
    }

    /// `ACLSelectorCheckCmd`.
    #[inline]
    fn check<A: Argv + ?Sized>(
        &self,
        cmd: &Command,
        argv: &A,
        keys: &[(usize, u8)],
    ) -> Result<(), Denied> {
        if !self.all_commands && !cmd.has(flags::NO_AUTH) && !self.bit(cmd.id) {
            let idx = if cmd.parent.is_some() { 2 } else { 1 };
            let allowed = self.first_args_of(cmd.id);
            let ok = idx < argv.argc() && {
                let a = argv.arg(idx);
                allowed.iter().any(|f| f.eq_ignore_ascii_case(a))
            };
            if !ok {
                return Err(Denied::Command);
            }
        }
        if !self.all_keys {
            for &(pos, need) in keys {
                if !self.key_ok(argv.arg(pos), need) {
                    return Err(Denied::Key(pos));
                }
            }
        }
        if !self.all_channels && cmd.channels != Channels::None {
            self.check_channels(cmd.channels, argv)?;
        }
        Ok(())
    }

    fn check_channels<A: Argv + ?Sized>(&self, channels: Channels, argv: &A) -> Result<(), Denied> {
        let (range, literal) = match channels {
            Channels::None => (0..0, false),
            Channels::Publish => (1..2, false),
            Channels::Subscribe => (1..argv.argc(), false),
            Channels::PSubscribe => (1..argv.argc(), true),
        };
        for pos in range {
            if !channel_in(&self.channels, argv.arg(pos), literal) {
                return Err(Denied::Channel(pos));
            }
        }
        Ok(())
    }

    /// `ACLSelectorCheckKey`: a pattern with the rights `need` matches
    /// `key`. The word-test patterns go first (any match will do, so the
    /// order does not change the answer): a key of a restricted user's
    /// common shape costs one load and a compare per pattern.
    // Always inlined: out of line it cost ~48 instructions a SET, call
    // and spills included (callgrind).
    #[inline(always)]
    pub(crate) fn key_ok(&self, key: &[u8], need: u8) -> bool {
        if self.all_keys {
            return true;
        }
        let (word, len) = (head_word(key), key.len());
        for p in &self.keys {
            if p.rights & need == need && p.word_matches(word, len) {
                return true;
            }
        }
        self.matcher_keys && self.key_ok_by_matcher(key, need)
    }

    /// The patterns without a word test, through the matcher.
    #[inline(never)]
    fn key_ok_by_matcher(&self, key: &[u8], need: u8) -> bool {
        self.keys
            .iter()
            .any(|p| p.needs_matcher() && p.rights & need == need && p.matches(key))
    }
}

/// Which arguments of a command are channels (`ACLDoesCommandHaveChannels`):
/// the unsubscribe commands have none for ACL purposes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Channels {
    None,
    /// PUBLISH and SPUBLISH: argument 1.
    Publish,
    /// SUBSCRIBE and SSUBSCRIBE: every argument.
    Subscribe,
    /// PSUBSCRIBE: every argument, compared literally with the patterns.
    PSubscribe,
}

impl Channels {
    /// The channels of the command named `name` (resolved when the table
    /// is built: `Command::channels`).
    pub fn of(name: &str) -> Channels {
        match name {
            "publish" | "spublish" => Channels::Publish,
            "subscribe" | "ssubscribe" => Channels::Subscribe,
            "psubscribe" => Channels::PSubscribe,
            _ => Channels::None,
        }
    }
}

/// A channel against the patterns: as a glob, or (a PSUBSCRIBE pattern)
/// only equal to one of them.
fn channel_in(patterns: &[Vec<u8>], channel: &[u8], literal: bool) -> bool {
    patterns.iter().any(|p| {
        if literal {
            p == channel
        } else {
            glob_match(p, channel, false)
        }
    })
}

/// Why a command was refused, with the argument that caused it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Denied {
    Command,
    Key(usize),
    Channel(usize),
}

impl Denied {
    /// The order `ACLCheckAllUserCommandPerm` ranks reasons in.
    fn rank(self) -> (u8, usize) {
        match self {
            Denied::Command => (0, 0),
            Denied::Key(i) => (1, i),
            Denied::Channel(i) => (2, i),
        }
    }
}

/// What a user's root selector says about one command before any
/// argument is read, resolved for every command id whenever the user's
/// rules change ([`User::apply`]): a restricted user's check of a common
/// command is then one load from the user's table and, for a key, one
/// compiled pattern test (reading the root's bitmap, channel rules and
/// the command's plan on every request cost ~58 instructions a SET, the
/// pattern loop's set-up ~40 more; callgrind, session 16). Only the root
/// is consulted: when it allows a command the whole check answers Ok
/// whatever the other selectors say, so a yes here is the whole check's
/// yes; anything short of a yes runs the whole check, which finds the
/// refusal and logs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The root refuses the command (no bit, no first-argument
    /// exception) and there is no other selector: the whole check
    /// refuses it for any arguments.
    Denied,
    /// Allowed with nothing to check: no keys (or every key allowed) and
    /// no channels (or every channel allowed).
    Allowed,
    /// Allowed if the key at `pos` (`KeyPlan::One`) matches a root
    /// pattern granting `need`.
    Key { pos: u8, need: u8 },
    /// SET's key 1: written, and read too with a GET option
    /// (`KeyPlan::Set`).
    SetKey,
    /// Allowed if every key of one spec with a fixed stride (MSET, DEL,
    /// MGET: `KeyPlan::stride`) matches a root pattern granting its
    /// rights.
    Stride(Stride),
    /// Allowed if every key the plan walks (several specs: RENAME, SMOVE)
    /// matches a root pattern granting its rights.
    Keys,
    /// The whole check: the root refuses but another selector or a
    /// `+cmd|arg` exception may allow, channels to check, or keys only
    /// the command's callback finds.
    Full,
}

/// A word-test key pattern (a literal of up to 8 bytes, or a prefix of up
/// to 8 and `*`) as the compiled root holds it: [`KeyPattern`]'s word
/// test with the length range as a start and a span.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct WordTest {
    head: u64,
    mask: u64,
    min_len: usize,
    /// `max_len - min_len`.
    span: usize,
}

impl WordTest {
    #[inline(always)]
    fn matches(&self, word: u64, len: usize) -> bool {
        len.wrapping_sub(self.min_len) <= self.span && word & self.mask == self.head
    }
}

/// A user's verdicts and its root selector's compiled key patterns, built
/// from its rules by every [`User::apply`] (so whatever publishes a user,
/// `Registry::put` or `replace_all`, publishes them with its rules, and
/// its clients see both at the same command).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Table {
    /// By command id.
    verdicts: Box<[Verdict]>,
    /// By the rights a key needs (0-3): the word tests of the root
    /// patterns granting them, in rule order. Grouped by rights when
    /// built, so the per-key test compares no rights.
    words: [Box<[WordTest]>; 4],
    /// By the rights a key needs: a root pattern granting them has no
    /// word test, so a key no word test matched goes to the matcher.
    matcher: [bool; 4],
    /// Every verdict is `Allowed`: nothing needs checking
    /// ([`User::unrestricted`]). Held here so the test every command
    /// makes is one load from the user (the root's three flags through
    /// the selectors `Vec` were a pointer and three loads; callgrind,
    /// session 18), and read from the verdicts rather than the root's
    /// flags, which a user can lack while allowing everything (`+@all
    /// -get +get` leaves every command's bit set but not `allcommands`),
    /// so two users with the same verdicts have the same table.
    unrestricted: bool,
}

impl Table {
    /// A placeholder while a user is first built.
    fn empty() -> Table {
        Table {
            verdicts: Box::new([]),
            words: Default::default(),
            matcher: [false; 4],
            unrestricted: false,
        }
    }

    fn build(u: &User, t: &CommandTable) -> Table {
        let root = &u.selectors[0];
        let grants = |p: &KeyPattern, need: usize| p.rights & need as u8 == need as u8;
        let verdicts: Box<[Verdict]> = t.all().iter().map(|c| u.verdict_of(c)).collect();
        Table {
            unrestricted: verdicts.iter().all(|v| *v == Verdict::Allowed),
            verdicts,
            words: std::array::from_fn(|need| {
                root.keys
                    .iter()
                    .filter(|p| !p.needs_matcher() && grants(p, need))
                    .map(|p| WordTest {
                        head: p.head,
                        mask: p.mask,
                        min_len: p.min_len,
                        span: p.max_len - p.min_len,
                    })
                    .collect()
            }),
            matcher: std::array::from_fn(|need| {
                root.keys
                    .iter()
                    .any(|p| p.needs_matcher() && grants(p, need))
            }),
        }
    }
}

/// A user: flags, password hashes (hex SHA-256) and selectors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    pub name: Vec<u8>,
    pub enabled: bool,
    pub nopass: bool,
    /// `sanitize-payload` (Some(false)) or `skip-sanitize-payload`
    /// (Some(true)); neither on a new user.
    pub skip_sanitize: Option<bool>,
    passwords: Vec<String>,
    /// The root selector first.
    selectors: Vec<Selector>,
    /// What the rules say per command, and the root's key patterns
    /// compiled: rebuilt by every change ([`User::apply`]).
    table: Table,
}

impl User {
    /// A new user: off, no passwords, no commands, no keys; channels as
    /// `acl-pubsub-default` says.
    pub fn new(name: &[u8], t: &CommandTable, pubsub_all: bool) -> User {
        let mut u = User {
            name: name.to_vec(),
            enabled: false,
            nopass: false,
            skip_sanitize: None,
            passwords: Vec::new(),
            selectors: vec![Selector::new(true, t.all().len(), pubsub_all)],
            table: Table::empty(),
        };
        u.table = Table::build(&u, t);
        u
    }

    /// The default user: everything, no password (`ACLCreateDefaultUser`).
    pub fn default_user(t: &CommandTable, pubsub_all: bool) -> User {
        let mut u = User::new(b"default", t, pubsub_all);
        for op in ["+@all", "~*", "&*", "on", "nopass"] {
            u.apply(t, op.as_bytes(), pubsub_all).expect("valid rule");
        }
        u
    }

    fn root(&mut self) -> &mut Selector {
        &mut self.selectors[0]
    }

    /// One rule (`ACLSetUser`). On error the user may be half changed:
    /// callers apply rules to a copy and keep it only when all succeed.
    /// The table is rebuilt whatever the outcome, so it always answers
    /// as the rules stand (a whole rebuild costs less than the category
    /// rules' own walk of the command table).
    pub fn apply(
        &mut self,
        t: &CommandTable,
        op: &[u8],
        pubsub_all: bool,
    ) -> Result<(), RuleError> {
        let r = self.apply_rule(t, op, pubsub_all);
        self.table = Table::build(self, t);
        r
    }

    fn apply_rule(
        &mut self,
        t: &CommandTable,
        op: &[u8],
        pubsub_all: bool,
    ) -> Result<(), RuleError> {
        let is = |w: &str| op.eq_ignore_ascii_case(w.as_bytes());
        if op.is_empty() {
            return Ok(());
        }
        if is("on") {
            self.enabled = true;
        } else if is("off") {
            self.enabled = false;
        } else if is("skip-sanitize-payload") {
            self.skip_sanitize = Some(true);
        } else if is("sanitize-payload") {
            self.skip_sanitize = Some(false);
        } else if is("nopass") {
            self.nopass = true;
            self.passwords.clear();
        } else if is("resetpass") {
            self.nopass = false;
            self.passwords.clear();
        } else if op[0] == b'>' || op[0] == b'#' {
            let hash = if op[0] == b'>' {
                hash_password(&op[1..])
            } else {
                valid_hash(&op[1..])?
            };
            if !self.passwords.contains(&hash) {
                self.passwords.push(hash);
            }
            self.nopass = false;
        } else if op[0] == b'<' || op[0] == b'!' {
            let hash = if op[0] == b'<' {
                hash_password(&op[1..])
            } else {
                valid_hash(&op[1..])?
            };
            let at = self
                .passwords
                .iter()
                .position(|p| *p == hash)
                .ok_or(RuleError::NoSuchPassword)?;
            self.passwords.remove(at);
        } else if op[0] == b'(' && op[op.len() - 1] == b')' {
            let mut s = Selector::new(false, t.all().len(), pubsub_all);
            let inner = &op[1..op.len() - 1];
            let words = cairn_protocol::resp::split_inline_args(inner).ok_or(RuleError::Syntax)?;
            for w in words.iter().filter(|w| !w.is_empty()) {
                s.apply(t, w)?;
            }
            self.selectors.push(s);
        } else if is("clearselectors") {
            self.selectors.truncate(1);
        } else if is("reset") {
            for r in ["resetpass", "resetkeys", "resetchannels"] {
                self.apply_rule(t, r.as_bytes(), pubsub_all)?;
            }
            if pubsub_all {
                self.apply_rule(t, b"allchannels", pubsub_all)?;
            }
            for r in ["off", "sanitize-payload", "clearselectors", "-@all"] {
                self.apply_rule(t, r.as_bytes(), pubsub_all)?;
            }
        } else {
            self.root().apply(t, op)?;
        }
        Ok(())
    }

    /// True if the root selector allows every command with any keys and
    /// channels: nothing needs checking (the default user as shipped).
    #[inline(always)]
    pub fn unrestricted(&self) -> bool {
        self.table.unrestricted
    }

    /// True if `password` is one of the user's (or the user is nopass).
    /// Disabled users match nothing (`ACLCheckUserCredentials`).
    pub fn password_ok(&self, password: &[u8]) -> bool {
        if !self.enabled {
            return false;
        }
        if self.nopass {
            return true;
        }
        let hashed = hash_password(password);
        // Every hash is compared, without an early exit.
        self.passwords.iter().fold(false, |ok, p| {
            ok | super::constant_time_eq(p.as_bytes(), hashed.as_bytes())
        })
    }

    pub fn passwords(&self) -> &[String] {
        &self.passwords
    }

    pub fn selectors(&self) -> &[Selector] {
        &self.selectors
    }

    /// The user in rule form, as ACL LIST and ACL SAVE write it after
    /// "user <name> " (`ACLDescribeUser`).
    pub fn describe(&self, t: &CommandTable) -> Vec<u8> {
        let mut out = Vec::new();
        let flags = [
            ("on", self.enabled),
            ("off", !self.enabled),
            ("nopass", self.nopass),
            ("skip-sanitize-payload", self.skip_sanitize == Some(true)),
            ("sanitize-payload", self.skip_sanitize == Some(false)),
        ];
        for (name, set) in flags {
            if set {
                out.extend_from_slice(name.as_bytes());
                out.push(b' ');
            }
        }
        for p in &self.passwords {
            out.push(b'#');
            out.extend_from_slice(p.as_bytes());
            out.push(b' ');
        }
        for s in &self.selectors {
            if s.root {
                s.describe(t, &mut out);
            } else {
                out.extend_from_slice(b" (");
                s.describe(t, &mut out);
                out.push(b')');
            }
        }
        out
    }

    /// Flags as GETUSER lists them.
    pub fn flag_names(&self) -> Vec<&'static str> {
        let mut f = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            f.push("nopass");
        }
        match self.skip_sanitize {
            Some(true) => f.push("skip-sanitize-payload"),
            Some(false) => f.push("sanitize-payload"),
            None => {}
        }
        f
    }

    /// May this user run `cmd` with `argv` (`ACLCheckAllUserCommandPerm`)?
    /// `keys` are the key arguments with the rights each needs (from the
    /// command's key specs). With several selectors the refusal reported is
    /// a command refusal if none allowed the command, else the last key or
    /// channel no selector matched.
    pub fn check(&self, cmd: &Command, argv: &[&[u8]], keys: &[(usize, u8)]) -> Result<(), Denied> {
        self.check_args(cmd, argv, keys)
    }

    /// [`User::check`] on arguments read by index (the dispatcher's
    /// request, without gathering them into a slice).
    #[inline]
    pub fn check_args<A: Argv + ?Sized>(
        &self,
        cmd: &Command,
        argv: &A,
        keys: &[(usize, u8)],
    ) -> Result<(), Denied> {
        let mut worst = Denied::Command;
        for s in &self.selectors {
            match s.check(cmd, argv, keys) {
                Ok(()) => return Ok(()),
                Err(d) if d.rank() > worst.rank() => worst = d,
                Err(_) => {}
            }
        }
        Err(worst)
    }

    /// The root selector when it allows `cmd` outright and `cmd` has no
    /// channels to check: then its verdict on the command's keys alone
    /// (`Selector::key_ok` on each) is enough for an `Ok`; None says
    /// nothing, and the caller runs the whole check. The table's
    /// verdicts start from it.
    #[inline]
    pub fn keys_decide(&self, cmd: &Command) -> Option<&Selector> {
        let s = &self.selectors[0];
        ((s.all_commands || s.bit(cmd.id)) && (s.all_channels || cmd.channels == Channels::None))
            .then_some(s)
    }

    /// The root selector's [`Verdict`] on `c`, as the table holds it.
    fn verdict_of(&self, c: &Command) -> Verdict {
        let root = &self.selectors[0];
        if self.keys_decide(c).is_none() {
            let allows = root.all_commands || c.has(flags::NO_AUTH) || root.bit(c.id);
            let alone = self.selectors.len() == 1 && root.first_args_of(c.id).is_empty();
            return if !allows && alone {
                Verdict::Denied
            } else {
                Verdict::Full
            };
        }
        if root.all_keys {
            return Verdict::Allowed;
        }
        match c.key_plan {
            KeyPlan::None => Verdict::Allowed,
            KeyPlan::One { pos, rights, .. } => {
                u8::try_from(pos).map_or(Verdict::Keys, |pos| Verdict::Key { pos, need: rights })
            }
            KeyPlan::Set => Verdict::SetKey,
            KeyPlan::Specs { .. } => c
                .key_plan
                .stride(&c.key_specs)
                .map_or(Verdict::Keys, Verdict::Stride),
            KeyPlan::Callback(_) => Verdict::Full,
        }
    }

    /// The table's verdict on the command `id`.
    #[cfg(test)]
    pub fn verdict(&self, id: usize) -> Verdict {
        self.table
            .verdicts
            .get(id)
            .copied()
            .unwrap_or(Verdict::Full)
    }

    /// True if the table answers yes for `cmd` with `argv`: then
    /// [`User::check`] is Ok. False says nothing; the caller runs the
    /// whole check (which also finds the refusal to log). Inlined into
    /// `auth::check`: a call and its spills cost more than the test
    /// (~40 instructions, callgrind, session 16).
    #[inline(always)]
    pub fn allows_at_once<A: Argv + ?Sized>(&self, cmd: &Command, argv: &A) -> bool {
        // One key test for both one-key verdicts: the request path holds
        // a single inlined copy of it.
        let (pos, need) = match self.table.verdicts.get(cmd.id) {
            Some(Verdict::Allowed) => return true,
            Some(&Verdict::Key { pos, need }) => (usize::from(pos), need),
            Some(Verdict::SetKey) => (1, set_rights(argv)),
            Some(&Verdict::Stride(s)) => return self.stride_keys_ok(s, argv),
            Some(Verdict::Keys) => return self.plan_keys_ok(cmd, argv),
            _ => return false,
        };
        pos < argv.argc() && self.root_key_ok(argv.arg(pos), need)
    }

    /// Every key of a [`Stride`] against the root, in a counted loop with
    /// the key test inlined (out of line: one call per command, where the
    /// spec walk made one per key).
    #[inline(never)]
    fn stride_keys_ok<A: Argv + ?Sized>(&self, s: Stride, argv: &A) -> bool {
        s.each_key(argv.argc(), |i| self.root_key_ok(argv.arg(i), s.rights)) == Some(true)
    }

    /// Every key of a multi-key plan against the root (out of line: a
    /// walk of the specs costs more than the call).
    #[inline(never)]
    fn plan_keys_ok<A: Argv + ?Sized>(&self, cmd: &Command, argv: &A) -> bool {
        cmd.key_plan.each_key(&cmd.key_specs, argv, |pos, need| {
            self.root_key_ok(argv.arg(pos), need)
        }) == Some(true)
    }

    /// `ACLSelectorCheckKey` on the root through its compiled patterns:
    /// the key's head word is read once and compared with each word test
    /// granting `need`; the matcher runs only when a pattern granting it
    /// has no word test. Answers as `Selector::key_ok` (the root's
    /// `all_keys` aside, which the verdicts have already taken).
    #[inline(always)]
    fn root_key_ok(&self, key: &[u8], need: u8) -> bool {
        let need = usize::from(need & ALL);
        let (word, len) = (head_word(key), key.len());
        self.table.words[need].iter().any(|w| w.matches(word, len))
            || (self.table.matcher[need] && self.selectors[0].key_ok_by_matcher(key, need as u8))
    }

    /// True if a selector allows every channel, or `other`'s channel
    /// patterns are all among this user's (`ACLKillPubsubClientsIfNeeded`'s
    /// shortcuts): then no subscriber of `other` loses a channel.
    pub fn keeps_channels_of(&self, other: &User) -> bool {
        if self.selectors.iter().any(|s| s.all_channels) {
            return true;
        }
        let mine: Vec<&Vec<u8>> = self.selectors.iter().flat_map(|s| &s.channels).collect();
        other
            .selectors
            .iter()
            .flat_map(|s| &s.channels)
            .all(|c| mine.contains(&c))
    }

    /// The channel patterns of every selector (a subscriber's channels
    /// are checked against these when the user changes).
    pub fn all_channel_patterns(&self) -> Vec<Vec<u8>> {
        self.selectors
            .iter()
            .flat_map(|s| s.channels.clone())
            .collect()
    }
}

/// The rights SET needs on its key (`setGetKeys`): write, and read as
/// well when a GET option follows the value.
#[inline(always)]
fn set_rights<A: Argv + ?Sized>(argv: &A) -> u8 {
    let argc = argv.argc();
    let get = argc > 3 && (3..argc).any(|i| argv.arg(i).eq_ignore_ascii_case(b"get"));
    if get {
        ALL
    } else {
        WRITE
    }
}

/// Joins rules that a selector in parentheses spreads over several
/// arguments (`ACLMergeSelectorArguments`). Err: the index of the argument
/// whose "(" is never closed.
pub fn merge_selector_args(args: &[&[u8]]) -> Result<Vec<Vec<u8>>, usize> {
    let mut out = Vec::new();
    let mut open: Option<(usize, Vec<u8>)> = None;
    for (j, &op) in args.iter().enumerate() {
        if let Some((_, sel)) = open.as_mut() {
            sel.push(b' ');
            sel.extend_from_slice(op);
            if op.last() == Some(&b')') {
                out.push(open.take().expect("open").1);
            }
            continue;
        }
        if op.first() == Some(&b'(') && op.last() != Some(&b')') {
            open = Some((j, op.to_vec()));
            continue;
        }
        out.push(op.to_vec());
    }
    match open {
        Some((j, _)) => Err(j),
        None => Ok(out),
    }
}

/// `ACLStringHasSpaces`: spaces or NUL bytes (usernames, patterns).
pub fn has_spaces(s: &[u8]) -> bool {
    s.iter()
        .any(|&b| b == 0 || b.is_ascii_whitespace() || b == 0x0b)
}

/// Hex SHA-256 of a password, as Redis stores it.
pub fn hash_password(password: &[u8]) -> String {
    let digest = Sha256::digest(password);
    let mut s = String::with_capacity(64);
    for b in digest {
        s.push(char::from(b"0123456789abcdef"[usize::from(b >> 4)]));
        s.push(char::from(b"0123456789abcdef"[usize::from(b & 15)]));
    }
    s
}

fn valid_hash(h: &[u8]) -> Result<String, RuleError> {
    if h.len() != 64
        || !h
            .iter()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
    {
        return Err(RuleError::BadHash);
    }
    Ok(String::from_utf8(h.to_vec()).expect("hex"))
}

/// A command of the table by full name ("get", "config|get"), as
/// `ACLLookupCommand` finds it.
fn lookup<'t>(t: &'t CommandTable, name: &[u8]) -> Option<&'t Command> {
    match name.iter().position(|&b| b == b'|') {
        None => t.lookup(name),
        Some(bar) => {
            let parent = t.lookup(&name[..bar])?;
            t.lookup_sub(parent, &name[bar + 1..])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> CommandTable {
        crate::server::command_table().expect("command table")
    }

    fn user(t: &CommandTable, rules: &[&str]) -> Result<User, RuleError> {
        let mut u = User::new(b"u", t, false);
        for r in rules {
            u.apply(t, r.as_bytes(), false)?;
        }
        Ok(u)
    }

    fn cmd<'t>(t: &'t CommandTable, name: &str) -> &'t Command {
        lookup(t, name.as_bytes()).unwrap_or_else(|| panic!("{name}"))
    }

    #[test]
    fn default_user_is_described_as_redis_does() {
        let t = table();
        let u = User::default_user(&t, false);
        assert_eq!(
            String::from_utf8(u.describe(&t)).unwrap(),
            "on nopass ~* &* +@all"
        );
        assert!(u.password_ok(b"anything"));
    }

    #[test]
    fn a_new_user_has_nothing() {
        let t = table();
        let u = User::new(b"x", &t, false);
        assert_eq!(
            String::from_utf8(u.describe(&t)).unwrap(),
            "off resetchannels -@all"
        );
        assert!(!u.password_ok(b""));
        assert_eq!(
            u.check(cmd(&t, "get"), &[b"get", b"k"], &[(1, READ)]),
            Err(Denied::Command)
        );
    }

    #[test]
    fn rules_round_trip_through_their_description() {
        let t = table();
        let cases: &[&[&str]] = &[
            &[
                "on", ">pw", "~app:*", "%R~ro:*", "%W~wo:*", "&news.*", "+@read", "-keys", "+set",
            ],
            &["+@all", "-@dangerous", "+flushdb", "allkeys", "allchannels"],
            &["+@hash", "+@string", "-hgetall", "+client|id", "+select|0"],
            &[
                "on",
                "nopass",
                "+@all",
                "-config|set",
                "(+get ~foo*)",
                "(+@write %W~bar)",
            ],
        ];
        for rules in cases {
            let u = user(&t, rules).unwrap();
            let text = String::from_utf8(u.describe(&t)).unwrap();
            // Parse the description back as a user line would be.
            let words: Vec<Vec<u8>> =
                cairn_protocol::resp::split_inline_args(text.as_bytes()).unwrap();
            let words: Vec<&[u8]> = words.iter().map(Vec::as_slice).collect();
            let merged = merge_selector_args(&words).unwrap();
            let mut again = User::new(b"u", &t, false);
            for w in &merged {
                again
                    .apply(&t, w, false)
                    .unwrap_or_else(|e| panic!("{text}: {e:?}"));
            }
            assert_eq!(again, u, "{rules:?} described as {text}");
        }
    }

    #[test]
    fn descriptions_match_redis_7_0() {
        // ACL LIST lines from redis-server 7.0.15 after the same SETUSERs.
        let t = table();
        let cases: &[(&[&str], &str)] = &[
            (&[], "off resetchannels -@all"),
            (&["+@hash"], "off resetchannels -@all +@hash"),
            (&["+@all", "-@dangerous"], "off resetchannels +@all -@dangerous"),
            (
                &["on", ">pw", "~app:*", "%R~ro:*", "%W~wo:*", "&news.*", "+@read", "-keys", "+set"],
                "on #30c952fab122c3f9759f02a6d95c3758b246b4fee239957b2d4fee46e26170c4 ~app:* %R~ro:* %W~wo:* resetchannels &news.* -@all +@read +set -keys",
            ),
            (
                &["on", "nopass", "+@all", "-config|set", "(+get ~foo*)", "(+@write %W~bar)"],
                "on nopass resetchannels +@all -config|set (~foo* resetchannels -@all +get) (%W~bar resetchannels -@all +@write)",
            ),
            (
                &["+@hash", "+@string", "-hgetall", "+client|id", "+select|0"],
                "off resetchannels -@all +@string +@hash +client|id -hgetall +select|0",
            ),
            (
                &["on", ">p", "+@all", "~*", "(+get ~x)", "reset"],
                "off sanitize-payload resetchannels -@all",
            ),
        ];
        // Redis lists single commands in the order of its command
        // dictionaries, which changes with each run's hash seed: compare
        // every word, and the order of all but the single-command rules.
        let single = |w: &&str| (w.starts_with('+') || w.starts_with('-')) && !w.contains('@');
        for (rules, want) in cases {
            let got = String::from_utf8(user(&t, rules).unwrap().describe(&t)).unwrap();
            let (mut a, mut b): (Vec<&str>, Vec<&str>) =
                (got.split(' ').collect(), want.split(' ').collect());
            let oa: Vec<&str> = a.iter().filter(|w| !single(w)).copied().collect();
            let ob: Vec<&str> = b.iter().filter(|w| !single(w)).copied().collect();
            assert_eq!(oa, ob, "{rules:?}: {got}");
            a.sort_unstable();
            b.sort_unstable();
            assert_eq!(a, b, "{rules:?}: {got}");
        }
    }

    #[test]
    fn category_rules_describe_with_categories() {
        let t = table();
        let u = user(&t, &["+@hash"]).unwrap();
        assert_eq!(u.selectors()[0].describe_commands(&t), "-@all +@hash");
        let u = user(&t, &["+@all", "-@dangerous"]).unwrap();
        assert_eq!(u.selectors()[0].describe_commands(&t), "+@all -@dangerous");
    }

    #[test]
    fn errors_are_redis_errors() {
        let t = table();
        assert_eq!(user(&t, &["+nosuch"]), Err(RuleError::NoSuchCommand));
        assert_eq!(user(&t, &["+@nosuch"]), Err(RuleError::NoSuchCommand));
        assert_eq!(user(&t, &["bogus"]), Err(RuleError::Syntax));
        assert_eq!(
            user(&t, &["allkeys", "~x"]),
            Err(RuleError::PatternAfterAllKeys)
        );
        assert_eq!(
            user(&t, &["&*", "&x"]),
            Err(RuleError::PatternAfterAllChannels)
        );
        assert_eq!(user(&t, &["<nope"]), Err(RuleError::NoSuchPassword));
        assert_eq!(user(&t, &["#abc"]), Err(RuleError::BadHash));
        assert_eq!(
            user(&t, &["+config|get|x"]),
            Err(RuleError::FirstArgOfSubcommand)
        );
        assert_eq!(user(&t, &["+select|"]), Err(RuleError::Syntax));
        assert_eq!(user(&t, &["%X~k"]), Err(RuleError::Syntax));
        assert_eq!(user(&t, &["~a b"]), Err(RuleError::Syntax));
    }

    #[test]
    fn passwords_hash_add_and_remove() {
        let t = table();
        let mut u = user(&t, &["on", ">one", ">two", ">one"]).unwrap();
        assert_eq!(u.passwords().len(), 2);
        assert!(u.password_ok(b"one") && u.password_ok(b"two") && !u.password_ok(b"three"));
        u.apply(&t, b"<one", false).unwrap();
        assert!(!u.password_ok(b"one"));
        let h = hash_password(b"two");
        u.apply(&t, format!("!{h}").as_bytes(), false).unwrap();
        assert!(u.passwords().is_empty());
        u.apply(&t, format!("#{h}").as_bytes(), false).unwrap();
        assert!(u.password_ok(b"two"));
        u.apply(&t, b"off", false).unwrap();
        assert!(!u.password_ok(b"two"), "disabled users cannot log in");
        // Redis's hash of "foobar".
        assert_eq!(
            hash_password(b"foobar"),
            "c3ab8ff13720e8ad9047dd39466b3c8974e592c2fa383d4a3960714caef0c4f2"
        );
    }

    #[test]
    fn key_patterns_match_as_globs_do() {
        let keys = [
            &b""[..],
            b"k",
            b"key",
            b"key:",
            b"key:1",
            b"key:1:x",
            b"kez:1",
            b"a*b",
            b"a?b",
            b"axb",
        ];
        for pat in [
            &b"*"[..],
            b"key",
            b"key:*",
            b"key:1*",
            b"k*y*",
            b"a\\*b",
            b"a?b",
            b"[ak]*",
            b"",
            b"key:\\*",
        ] {
            let p = KeyPattern::new(pat, ALL);
            for key in keys {
                assert_eq!(
                    p.matches(key),
                    glob_match(pat, key, false),
                    "{pat:?} {key:?}"
                );
                assert_eq!(
                    word_path(&p, key),
                    glob_match(pat, key, false),
                    "{pat:?} {key:?}"
                );
            }
        }
        assert_eq!(Shape::of(b"key:*"), Shape::Prefix);
        assert_eq!(Shape::of(b"key"), Shape::Exact);
        assert_eq!(Shape::of(b"k*y*"), Shape::Glob);
    }

    /// How `Selector::key_ok` matches one pattern: the word test, or the
    /// matcher for a pattern without one (which the word test refuses).
    fn word_path(p: &KeyPattern, key: &[u8]) -> bool {
        let word = p.word_matches(head_word(key), key.len());
        if p.needs_matcher() {
            assert!(!word, "{:?} {key:?}", p.pattern);
            p.matches(key)
        } else {
            word
        }
    }

    /// Prefixes up to 8 bytes are compared as one masked word of the key
    /// (zero-padded when shorter) with a length range, longer ones byte
    /// by byte: both agree with the glob matcher at every length around
    /// the word.
    #[test]
    fn prefix_patterns_match_as_globs_do_at_every_length() {
        let text = b"abcdefghijkl";
        for plen in 0..=10 {
            let mut pat = text[..plen].to_vec();
            pat.push(b'*');
            let p = KeyPattern::new(&pat, ALL);
            assert_eq!(p.shape, Shape::Prefix);
            for klen in 0..=text.len() {
                for key in [text[..klen].to_vec(), {
                    let mut k = text[..klen].to_vec();
                    if let Some(b) = k.get_mut(plen.saturating_sub(1)) {
                        *b ^= 0x20;
                    }
                    k
                }] {
                    assert_eq!(
                        p.matches(&key),
                        glob_match(&pat, &key, false),
                        "{pat:?} {key:?}"
                    );
                    assert_eq!(
                        word_path(&p, &key),
                        glob_match(&pat, &key, false),
                        "{pat:?} {key:?}"
                    );
                }
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        /// A selector's key test (word tests first, then the matcher)
        /// answers as the glob matcher does over its patterns, for random
        /// patterns and keys of every length around the 8-byte word, NUL
        /// bytes in keys included.
        #[test]
        fn key_ok_agrees_with_the_glob_matcher(
            pats in proptest::collection::vec(
                (proptest::collection::vec(proptest::sample::select(&b"ab:*?["[..]), 0..11), 1u8..4),
                0..5,
            ),
            keys in proptest::collection::vec(
                proptest::collection::vec(proptest::sample::select(&b"ab:\0"[..]), 0..13),
                1..8,
            ),
        ) {
            let t = table();
            let mut s = Selector::new(true, t.all().len(), false);
            for (p, r) in &pats {
                let mut rule = format!("%{}~", ["", "R", "W", "RW"][*r as usize]).into_bytes();
                rule.extend_from_slice(p);
                s.apply(&t, &rule).expect("rule");
            }
            for key in &keys {
                for need in [READ, WRITE, READ | WRITE] {
                    let want = s
                        .keys
                        .iter()
                        .any(|p| p.rights & need == need && glob_match(&p.pattern, key, false));
                    proptest::prop_assert_eq!(s.key_ok(key, need), want, "{:?} {:?}", pats, key);
                }
            }
        }
    }

    #[test]
    fn head_word_reads_a_key_zero_padded() {
        let keys: [&[u8]; 5] = [b"", b"a", b"abc", b"abcdef", b"abcdefghij"];
        for key in keys {
            let mut w = [0u8; 8];
            let n = key.len().min(8);
            w[..n].copy_from_slice(&key[..n]);
            assert_eq!(head_word(key), u64::from_le_bytes(w), "{key:?}");
        }
    }

    /// The root selector's verdict on one key only ever says yes where
    /// the whole check does.
    #[test]
    fn keys_decide_is_a_subset_of_check() {
        let t = table();
        let users = [
            user(&t, &["on", "~key:*", "%R~r:*", "resetchannels", "+@all"]).unwrap(),
            user(&t, &["on", "~key:*", "+get", "+set", "+publish"]).unwrap(),
            user(&t, &["on", "%W~w*", "-@all", "+set", "(~sel:* +get)"]).unwrap(),
            user(&t, &["on", "allkeys", "&*", "+@all", "-get"]).unwrap(),
        ];
        let keys: [&[u8]; 6] = [b"key:1", b"r:1", b"w", b"sel:1", b"other", b""];
        let mut yes = 0;
        for u in &users {
            for name in ["get", "set", "publish", "incr"] {
                let c = cmd(&t, name);
                for key in keys {
                    for need in [READ, WRITE, READ | WRITE] {
                        if u.keys_decide(c).is_some_and(|s| s.key_ok(key, need)) {
                            yes += 1;
                            let argv: [&[u8]; 3] = [name.as_bytes(), key, b"v"];
                            assert_eq!(u.check(c, &argv, &[(1, need)]), Ok(()), "{name} {key:?}");
                        }
                    }
                }
            }
        }
        assert!(yes > 10, "{yes}");
    }

    #[test]
    fn key_rights_and_selectors() {
        let t = table();
        let u = user(&t, &["+@all", "%R~r:*", "%W~w:*", "~rw:*", "(+set ~sel:*)"]).unwrap();
        let get = cmd(&t, "get");
        let set = cmd(&t, "set");
        assert_eq!(u.check(get, &[b"get", b"r:1"], &[(1, READ)]), Ok(()));
        assert_eq!(
            u.check(get, &[b"get", b"w:1"], &[(1, READ)]),
            Err(Denied::Key(1))
        );
        assert_eq!(u.check(set, &[b"set", b"w:1", b"v"], &[(1, WRITE)]), Ok(()));
        assert_eq!(
            u.check(set, &[b"set", b"rw:1", b"v"], &[(1, WRITE)]),
            Ok(())
        );
        // Only the selector allows sel:*, and only for SET.
        assert_eq!(
            u.check(set, &[b"set", b"sel:1", b"v"], &[(1, WRITE)]),
            Ok(())
        );
        assert_eq!(
            u.check(get, &[b"get", b"sel:1"], &[(1, READ)]),
            Err(Denied::Key(1))
        );
    }

    #[test]
    fn channels_and_first_args() {
        let t = table();
        let u = user(
            &t,
            &["+@all", "resetchannels", "&news.*", "-select", "+select|0"],
        )
        .unwrap();
        let publish = cmd(&t, "publish");
        assert_eq!(
            u.check(publish, &[b"publish", b"news.x", b"m"], &[]),
            Ok(())
        );
        assert_eq!(
            u.check(publish, &[b"publish", b"other", b"m"], &[]),
            Err(Denied::Channel(1))
        );
        let psub = cmd(&t, "psubscribe");
        assert_eq!(
            u.check(psub, &[b"psubscribe", b"news.x"], &[]),
            Err(Denied::Channel(1)),
            "a PSUBSCRIBE pattern must equal a channel pattern"
        );
        assert_eq!(u.check(psub, &[b"psubscribe", b"news.*"], &[]), Ok(()));
        let select = cmd(&t, "select");
        assert_eq!(u.check(select, &[b"select", b"0"], &[]), Ok(()));
        assert_eq!(
            u.check(select, &[b"select", b"1"], &[]),
            Err(Denied::Command)
        );
        // AUTH is allowed to everyone (no-auth flag).
        assert_eq!(u.check(cmd(&t, "auth"), &[b"auth", b"x"], &[]), Ok(()));
    }

    #[test]
    fn reset_and_merged_selector_arguments() {
        let t = table();
        let mut u = user(&t, &["on", ">p", "+@all", "~*", "(+get ~x)"]).unwrap();
        u.apply(&t, b"reset", false).unwrap();
        assert_eq!(
            String::from_utf8(u.describe(&t)).unwrap(),
            "off sanitize-payload resetchannels -@all"
        );
        let args: Vec<&[u8]> = vec![b"on", b"(+get", b"~x)", b"+set"];
        assert_eq!(
            merge_selector_args(&args).unwrap(),
            vec![b"on".to_vec(), b"(+get ~x)".to_vec(), b"+set".to_vec()]
        );
        assert_eq!(merge_selector_args(&[b"(+get".as_slice(), b"~x"]), Err(0));
    }

    /// Rules from the whole grammar, for the table's property tests:
    /// categories, commands, subcommands and first-argument exceptions,
    /// key patterns with rights (word-test and matcher ones), channels,
    /// selectors, and the rules that reset them.
    const RULES: &[&str] = &[
        "on",
        "off",
        "nopass",
        "reset",
        "+@all",
        "-@all",
        "allcommands",
        "nocommands",
        "+@read",
        "-@write",
        "+@string",
        "-@hash",
        "+@pubsub",
        "-@dangerous",
        "+@scripting",
        "+get",
        "-get",
        "+set",
        "-set",
        "+mset",
        "+hset",
        "-hset",
        "+incr",
        "+publish",
        "+subscribe",
        "+psubscribe",
        "+eval",
        "+sort",
        "+client",
        "-client",
        "+client|id",
        "+config|get",
        "+select|0",
        "+get|key:1",
        "+set|x",
        "-select",
        "+auth",
        "~key:*",
        "%R~k*",
        "%W~my*",
        "~myhash",
        "%RW~key:1",
        "~[km]*",
        "~k?y:*",
        "%R~key:12345678*",
        "~counter:*",
        "allkeys",
        "resetkeys",
        "~*",
        "~",
        "&news.*",
        "&*",
        "allchannels",
        "resetchannels",
        "&x",
        "(~counter:* +@all)",
        "(+get ~sel:*)",
        "(%W~w* +set &*)",
        "(+@read %R~k*)",
        "clearselectors",
    ];
    const ARGS: &[&str] = &[
        "key:",
        "key:1",
        "key:12345678",
        "k",
        "",
        "myhash",
        "my",
        "counter:1",
        "sel:1",
        "w1",
        "1",
        "2",
        "0",
        "get",
        "GET",
        "x",
        "news.1",
        "news.*",
        "id",
        "keys",
        "numkeys",
        "store",
        "by",
        "limit",
    ];

    fn user_of(t: &CommandTable, rules: &[&str]) -> User {
        let mut u = User::new(b"u", t, false);
        for r in rules {
            // A refused rule (a pattern after allkeys) leaves the user as
            // a refused SETUSER would not; the table must follow anyway.
            let _ = u.apply(t, r.as_bytes(), false);
        }
        u
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        /// The table's answer against the whole check for random users
        /// and commands: a yes is the whole check's Ok; Denied is a
        /// command refusal and Allowed an Ok for any arguments; and where
        /// the plan finds the keys, the table answers as the root
        /// selector's own check (and, with one selector, as the whole
        /// check). So the dispatcher's answer (the table's yes, else the
        /// whole check) is always the whole check's.
        #[test]
        fn the_table_agrees_with_the_whole_check(
            rules in proptest::collection::vec(proptest::sample::select(RULES), 0..12),
            picks in proptest::collection::vec(proptest::sample::select(ARGS), 0..8),
            which in proptest::collection::vec(proptest::prelude::any::<proptest::sample::Index>(), 24),
        ) {
            let t = table();
            let u = user_of(&t, &rules);
            for w in &which {
                let c = w.get(t.all());
                let mut argv: Vec<&[u8]> = c.name.split('|').map(str::as_bytes).collect();
                argv.extend(picks.iter().map(|a| a.as_bytes()));
                while !c.arity_ok(argv.len()) && argv.len() > 1 {
                    argv.pop();
                }
                if !c.arity_ok(argv.len()) {
                    continue;
                }
                let keys = crate::auth::key_rights(c, argv.as_slice());
                let whole = u.check(c, &argv, &keys);
                let quick = u.allows_at_once(c, argv.as_slice());
                let why = format!("{rules:?} {argv:?} {:?}", u.verdict(c.id));
                let dispatched = if quick { Ok(()) } else { whole };
                proptest::prop_assert_eq!(dispatched, whole, "{}", why);
                match u.verdict(c.id) {
                    Verdict::Denied => proptest::prop_assert_eq!(whole, Err(Denied::Command), "{}", why),
                    Verdict::Allowed => proptest::prop_assert!(quick && whole.is_ok(), "{}", why),
                    Verdict::Key { .. } | Verdict::SetKey | Verdict::Stride(_) | Verdict::Keys => {
                        let found = c.key_plan.each_key(&c.key_specs, argv.as_slice(), |_, _| true).is_some();
                        if found {
                            let root = u.selectors[0].check(c, argv.as_slice(), &keys);
                            proptest::prop_assert_eq!(quick, root.is_ok(), "{}", why);
                            if u.selectors.len() == 1 {
                                proptest::prop_assert_eq!(quick, whole.is_ok(), "{}", why);
                            }
                        }
                    }
                    Verdict::Full => proptest::prop_assert!(!quick, "{}", why),
                }
            }
        }

        /// After any sequence of SETUSER changes (each a copy of the user
        /// with some rules applied, kept whole or dropped on an error, as
        /// `ACL SETUSER` does) the table is the one built from scratch:
        /// from the user as it stands, and from its description applied to
        /// a new user (as ACL LOAD or a restart would build it).
        #[test]
        fn the_table_follows_every_change(
            changes in proptest::collection::vec(
                proptest::collection::vec(proptest::sample::select(RULES), 1..5),
                1..6,
            ),
        ) {
            let t = table();
            let mut u = User::new(b"u", &t, false);
            for rules in &changes {
                let mut next = u.clone();
                if rules.iter().all(|r| next.apply(&t, r.as_bytes(), false).is_ok()) {
                    u = next;
                }
                proptest::prop_assert_eq!(&u.table, &Table::build(&u, &t), "{:?}", changes);
            }
            let text = u.describe(&t);
            let words = cairn_protocol::resp::split_inline_args(&text).expect("description");
            let words: Vec<&[u8]> = words.iter().map(Vec::as_slice).collect();
            let mut again = User::new(b"u", &t, false);
            for w in merge_selector_args(&words).expect("balanced") {
                again.apply(&t, &w, false).expect("described rule");
            }
            proptest::prop_assert_eq!(&again.table, &u.table, "{:?} {}", changes, String::from_utf8_lossy(&text));
        }
    }

    /// A user is unrestricted when its verdicts allow everything, whether
    /// or not its root holds the `allcommands` flag (a found case of
    /// `the_table_follows_every_change`: the flag is lost by `-get` and
    /// not restored by `+get`, while its description `+@all` sets it).
    #[test]
    fn unrestricted_follows_the_verdicts() {
        let t = table();
        let u = user(&t, &["on", "+@all", "-get", "allkeys", "&*", "+get"]).unwrap();
        assert!(!u.selectors[0].all_commands);
        assert!(u.unrestricted());
        let u = user(&t, &["on", "+@all", "-get", "allkeys", "&*"]).unwrap();
        assert!(!u.unrestricted());
        let u = user(&t, &["on", "+@all", "~key:*", "&*"]).unwrap();
        assert!(!u.unrestricted());
        assert!(User::default_user(&t, false).unrestricted());
    }

    /// The verdicts of a user like the bench's: allowed commands with one
    /// key are a key test, commands without keys need nothing, refused
    /// ones are refusals, and channel commands take the whole check.
    #[test]
    fn verdicts_of_a_key_pattern_user() {
        let t = table();
        let u = user(
            &t,
            &[
                "on",
                "~key:*",
                "~myhash",
                "resetchannels",
                "+@all",
                "-flushall",
            ],
        )
        .unwrap();
        let v = |name: &str| u.verdict(cmd(&t, name).id);
        assert_eq!(v("get"), Verdict::Key { pos: 1, need: READ });
        assert_eq!(
            v("incr"),
            Verdict::Key {
                pos: 1,
                need: READ | WRITE
            }
        );
        assert_eq!(v("set"), Verdict::SetKey);
        assert_eq!(
            v("mset"),
            Verdict::Stride(Stride {
                first: 1,
                back: 1,
                step: 2,
                rights: WRITE
            })
        );
        assert_eq!(v("rename"), Verdict::Keys);
        assert_eq!(v("ping"), Verdict::Allowed);
        assert_eq!(v("flushall"), Verdict::Denied);
        assert_eq!(v("publish"), Verdict::Full);
        assert_eq!(v("bitfield"), Verdict::Full, "keys only its callback finds");
        let u = user(
            &t,
            &[
                "on",
                "allkeys",
                "&*",
                "-@all",
                "+get",
                "+select|0",
                "(+set)",
            ],
        )
        .unwrap();
        let v = |name: &str| u.verdict(cmd(&t, name).id);
        assert_eq!(v("get"), Verdict::Allowed);
        assert_eq!(v("select"), Verdict::Full, "a first-argument exception");
        assert_eq!(v("set"), Verdict::Full, "another selector allows it");
        assert_eq!(
            v("auth"),
            Verdict::Full,
            "allowed to everyone, not by the root"
        );
    }
}
