//! String operations (Redis 7.0 `t_string.c`): GET, SET and its variants,
//! GETEX/GETDEL/GETSET, MGET/MSET/MSETNX, APPEND, STRLEN, GETRANGE,
//! SETRANGE, the INCR family, INCRBYFLOAT and the operand lookup of LCS.
//!
//! Each function does what the Redis command does to the keyspace, in the
//! same order of checks, so the first error Redis would report is the one
//! returned here. Option parsing and reply shapes belong to the server.
//!
//! Encodings follow Redis's (`value::string`): whole strings are created
//! with `StrValue::from_bytes` (int/embstr/raw as `tryObjectEncoding`
//! picks), in-place edits (APPEND, SETRANGE) leave a `raw` string, the INCR
//! family stores `int`, and INCRBYFLOAT stores its text as a plain string
//! (`createStringObjectFromLongDouble` never makes an `int`).
//!
//! Keyspace notifications are recorded where `t_string.c` calls
//! `notifyKeyspaceEvent`, with its classes and names (`set`, `expire`,
//! `append`, `setrange`, `incrby` for the whole INCR/DECR family,
//! `incrbyfloat`, and `del`/`expire`/`persist` for GETDEL and GETEX); an
//! in-place edit tells WATCH with `g.modified`.
//!
//! Memcached client flags (`StrValue::Mc`) survive the in-place edits
//! (APPEND, SETRANGE, the INCR family, INCRBYFLOAT), as memcached's own
//! append and incr keep them; a whole-value write (SET, GETSET, MSET...)
//! stores a plain string. Either way the value is a new version, so its
//! memcached CAS changes.
use crate::entry::StrRef;
use crate::events::class;
use crate::keyspace::{Expiry, Guard, Key};
use crate::ops::{as_str, as_str_mut};
use crate::util::num;
use crate::value::string::EMBSTR_MAX;
use crate::value::{StrValue, Value};
use crate::{Error, Result};

/// SET's existence condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cond {
    Always,
    /// NX: only if the key does not exist.
    IfAbsent,
    /// XX: only if the key exists.
    IfPresent,
}

/// What SET did.
#[derive(Debug, PartialEq, Eq)]
pub struct SetOutcome {
    /// False when NX/XX stopped the write.
    pub written: bool,
    /// The old value when GET was asked for (None: the key did not exist).
    pub old: Option<Vec<u8>>,
}

/// The unit and base of an expire argument (SET EX/PX/EXAT/PXAT, SETEX,
/// PSETEX, GETEX).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TtlKind {
    /// EX, SETEX: seconds from now.
    Secs,
    /// PX, PSETEX: milliseconds from now.
    Millis,
    /// EXAT: a Unix time in seconds.
    AtSecs,
    /// PXAT: a Unix time in milliseconds.
    AtMillis,
}

impl TtlKind {
    /// The absolute deadline for the raw argument `n` at time `now_ms`
    /// (t_string.c `getExpireMillisecondsOrReply`): the value must be
    /// positive, a seconds value must survive `* 1000`, and the result must
    /// stay positive (Redis detects the overflow of `+ now` that way).
    /// `Error::InvalidExpireTime` is "invalid expire time in '<cmd>'
    /// command" on the wire.
    pub fn deadline(self, n: i64, now_ms: u64) -> Result<u64> {
        if n <= 0 {
            return Err(Error::InvalidExpireTime);
        }
        let ms = match self {
            TtlKind::Secs | TtlKind::AtSecs => n.checked_mul(1000),
            TtlKind::Millis | TtlKind::AtMillis => Some(n),
        }
        .ok_or(Error::InvalidExpireTime)?;
        let at = match self {
            TtlKind::Secs | TtlKind::Millis => ms.checked_add(now_ms as i64),
            TtlKind::AtSecs | TtlKind::AtMillis => Some(ms),
        };
        match at {
            Some(at) if at > 0 => Ok(at as u64),
            _ => Err(Error::InvalidExpireTime),
        }
    }

    /// Parses the raw argument and computes its deadline: NotInteger for
    /// text `string2ll` refuses, then the checks of [`TtlKind::deadline`].
    pub fn parse_deadline(self, arg: &[u8], now_ms: u64) -> Result<u64> {
        let n = num::parse_i64(arg).ok_or(Error::NotInteger)?;
        self.deadline(n, now_ms)
    }
}

/// What GETEX does to the key's expire time after reading it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GetExAction<'a> {
    /// No option: GETEX is GET.
    Keep,
    /// PERSIST: remove the TTL.
    Persist,
    /// EX/PX/EXAT/PXAT and the raw time argument, which is only parsed
    /// once the key is known to be a string, as Redis does.
    Expire(TtlKind, &'a [u8]),
}

/// GET key: the string's bytes, None if absent, WRONGTYPE otherwise.
pub fn get<R>(g: &mut Guard, db: usize, k: &Key, f: impl FnOnce(Option<&[u8]>) -> R) -> Result<R> {
    match g.read_ref(db, k) {
        None => Ok(f(None)),
        Some(e) => Ok(str_of(e)?.with_bytes(|b| f(Some(b)))),
    }
}

/// The string a key holds, in either stored form; WRONGTYPE otherwise.
fn str_of(e: crate::entry::Ref<'_>) -> Result<StrRef<'_>> {
    e.str().ok_or(Error::WrongType)
}

/// GET key for a reply written after the lock is released: `f` sees the
/// string value itself (None if absent), so a large one can be shared
/// (`StrValue::share`) instead of copied while the shard lock is held.
pub fn get_str<R>(
    g: &mut Guard,
    db: usize,
    k: &Key,
    f: impl FnOnce(Option<StrRef<'_>>) -> R,
) -> Result<R> {
    match g.read_ref(db, k) {
        None => Ok(f(None)),
        Some(e) => Ok(f(Some(str_of(e)?))),
    }
}

/// MGET with the values themselves (see `get_str`); non-strings are None.
pub fn mget_str(g: &mut Guard, db: usize, keys: &[Key], mut f: impl FnMut(Option<StrRef<'_>>)) {
    for k in keys {
        f(g.read_ref(db, k).and_then(|e| e.str()));
    }
}

/// SET key value [NX|XX] [GET] [EX|PX|EXAT|PXAT|KEEPTTL]. With `want_old`,
/// the old value must be a string (WRONGTYPE otherwise, and nothing is
/// written); it is read as GET reads it (a hit or a miss).
pub fn set(
    g: &mut Guard,
    db: usize,
    k: &Key,
    value: &[u8],
    cond: Cond,
    expiry: Expiry,
    want_old: bool,
) -> Result<SetOutcome> {
    // A small plain string goes straight into a compact block: no
    // `StrValue` buffer is built only to be copied and freed.
    let plain = num::should_store_as_int(value).is_none()
        && crate::compact::fits(k.bytes.len(), value.len());
    if plain {
        return set_with(g, db, k, cond, want_old, |g| {
            store_bytes(g, db, k, value, expiry)
        });
    }
    set_value(
        g,
        db,
        k,
        StrValue::from_bytes(value),
        cond,
        expiry,
        want_old,
    )
}

/// SET's write of a plain string that fits a compact block.
fn store_bytes(g: &mut Guard, db: usize, k: &Key, value: &[u8], expiry: Expiry) {
    drop(g.set_compact(db, k, value, value.len() > EMBSTR_MAX, expiry));
    g.notify(class::STRING, "set", db, k);
    if matches!(expiry, Expiry::At(_)) {
        g.notify(class::GENERIC, "expire", db, k);
    }
}

/// SET with the new value already built (outside the lock: a large value
/// arrives as the buffer it was read into and is stored as is).
pub fn set_value(
    g: &mut Guard,
    db: usize,
    k: &Key,
    value: StrValue,
    cond: Cond,
    expiry: Expiry,
    want_old: bool,
) -> Result<SetOutcome> {
    set_with(g, db, k, cond, want_old, |g| store(g, db, k, value, expiry))
}

/// SET's conditions and GET option around `write`, the store itself.
fn set_with(
    g: &mut Guard,
    db: usize,
    k: &Key,
    cond: Cond,
    want_old: bool,
    write: impl FnOnce(&mut Guard),
) -> Result<SetOutcome> {
    if cond == Cond::Always && !want_old {
        // The plain SET of redis-benchmark: one lookup, not two.
        write(g);
        return Ok(SetOutcome {
            written: true,
            old: None,
        });
    }
    let mut old = None;
    let exists = if want_old {
        match g.read_ref(db, k) {
            Some(e) => {
                old = Some(str_of(e)?.to_vec());
                true
            }
            None => false,
        }
    } else {
        g.exists(db, k)
    };
    let allowed = match cond {
        Cond::Always => true,
        Cond::IfAbsent => !exists,
        Cond::IfPresent => exists,
    };
    if !allowed {
        return Ok(SetOutcome {
            written: false,
            old,
        });
    }
    // A deadline already in the past is stored as given, as Redis 7.0 does;
    // lazy expiry then hides the key from the next lookup.
    write(g);
    Ok(SetOutcome { written: true, old })
}

/// SET's write (`setGenericCommand`): the value, then the `set`
/// notification, then `expire` if a time was given.
fn store(g: &mut Guard, db: usize, k: &Key, value: StrValue, expiry: Expiry) {
    set_str(g, db, k, value, expiry);
    g.notify(class::STRING, "set", db, k);
    if matches!(expiry, Expiry::At(_)) {
        g.notify(class::GENERIC, "expire", db, k);
    }
}

/// Stores a string value, dropping the old one without materializing it
/// (`Guard::set` hands an old compact string back as a new `Value`).
fn set_str(g: &mut Guard, db: usize, k: &Key, value: StrValue, expiry: Expiry) {
    if let StrValue::Bytes { data, raw } = &value {
        if crate::compact::fits(k.bytes.len(), data.len()) {
            drop(g.set_compact(db, k, data, *raw, expiry));
            return;
        }
    }
    drop(g.set(db, k, Value::Str(value), expiry));
}

/// The string of a value that was just taken out of the keyspace.
fn entry_value(v: Value) -> StrValue {
    match v {
        Value::Str(s) => s,
        // Callers check the type before removing or replacing the entry.
        _ => StrValue::Int(0),
    }
}

/// GETSET key value: the old string (None if absent) and the new value
/// stored with no TTL, as `setKey` without KEEPTTL leaves it.
pub fn getset(g: &mut Guard, db: usize, k: &Key, value: &[u8]) -> Result<Option<Vec<u8>>> {
    Ok(getset_value(g, db, k, StrValue::from_bytes(value))?.map(StrValue::into_vec))
}

/// GETSET with the new value already built; the old value is returned
/// whole (moved out of the keyspace, not copied).
pub fn getset_value(
    g: &mut Guard,
    db: usize,
    k: &Key,
    value: StrValue,
) -> Result<Option<StrValue>> {
    if let Some(e) = g.read(db, k) {
        as_str(&e.value)?;
    }
    let old = g.set(db, k, Value::Str(value), Expiry::Clear);
    g.notify(class::STRING, "set", db, k);
    Ok(old.map(|v| match v {
        Value::Str(s) => s,
        // Checked above: the old value is a string.
        _ => StrValue::Int(0),
    }))
}

/// GETDEL key: the string, removed; None if absent.
pub fn getdel(g: &mut Guard, db: usize, k: &Key) -> Result<Option<Vec<u8>>> {
    Ok(getdel_value(g, db, k)?.map(StrValue::into_vec))
}

/// GETDEL returning the removed value whole (moved, not copied).
pub fn getdel_value(g: &mut Guard, db: usize, k: &Key) -> Result<Option<StrValue>> {
    match g.read(db, k) {
        None => return Ok(None),
        Some(e) => as_str(&e.value)?,
    };
    let old = g.remove(db, k).map(|e| entry_value(e.into_value()));
    if old.is_some() {
        g.notify(class::GENERIC, "del", db, k);
    }
    Ok(old)
}

/// GETEX key [EX|PX|EXAT|PXAT t|PERSIST]: `f` sees the value (None if
/// absent), then the TTL changes. Order as in `getexCommand`: a missing key
/// answers None whatever the time argument, then WRONGTYPE, then the time
/// argument's errors. A deadline that is not in the future deletes the key
/// (`checkAlreadyExpired`).
pub fn getex<R>(
    g: &mut Guard,
    db: usize,
    k: &Key,
    action: GetExAction,
    f: impl FnOnce(Option<&[u8]>) -> R,
) -> Result<R> {
    getex_str(g, db, k, action, |s| match s {
        Some(s) => s.with_bytes(|b| f(Some(b))),
        None => f(None),
    })
}

/// GETEX with the string value itself (see `get_str`).
pub fn getex_str<R>(
    g: &mut Guard,
    db: usize,
    k: &Key,
    action: GetExAction,
    f: impl FnOnce(Option<StrRef<'_>>) -> R,
) -> Result<R> {
    let now = g.now;
    let Some(e) = g.read_ref(db, k) else {
        return Ok(f(None));
    };
    let s = str_of(e)?;
    let deadline = match action {
        GetExAction::Expire(kind, arg) => Some(kind.parse_deadline(arg, now)?),
        _ => None,
    };
    let r = f(Some(s));
    let had_ttl = e.expire_at() != 0;
    match (action, deadline) {
        (_, Some(at)) if at <= now => {
            crate::rewrite::del(g.engine(), &g.cx(), db, k.bytes);
            drop(g.remove(db, k));
            g.notify(class::GENERIC, "del", db, k);
        }
        (_, Some(at)) => {
            crate::rewrite::pexpireat(g.engine(), &g.cx(), db, k.bytes, at, std::iter::empty());
            g.set_expire(db, k, at);
            g.notify(class::GENERIC, "expire", db, k);
        }
        // Only a TTL actually removed counts as a change (`removeExpire`).
        (GetExAction::Persist, _) if had_ttl => {
            g.set_expire(db, k, 0);
            g.notify(class::GENERIC, "persist", db, k);
        }
        _ => {}
    }
    Ok(r)
}

/// MGET key...: `f` is called once per key, in order, with the string or
/// None when the key is absent or holds another type (MGET never fails).
pub fn mget(g: &mut Guard, db: usize, keys: &[Key], mut f: impl FnMut(Option<&[u8]>)) {
    for k in keys {
        match g.read_ref(db, k).and_then(|e| e.str()) {
            Some(s) => s.with_bytes(|b| f(Some(b))),
            None => f(None),
        }
    }
}

/// MSET key value...: every pair stored in order (a repeated key keeps the
/// last value), each with no TTL. The caller locked every key.
pub fn mset<'a>(g: &mut Guard, db: usize, pairs: impl IntoIterator<Item = (Key<'a>, &'a [u8])>) {
    mset_new(g, db, pairs.into_iter().map(|(k, v)| (k, NewStr::Bytes(v))));
}

/// A string to store: request bytes (copied once, into a compact block
/// when they fit) or a value already built (a large one keeps the buffer
/// it was read into).
pub enum NewStr<'a> {
    Bytes(&'a [u8]),
    Value(StrValue),
}

/// MSET with each value as the request gave it (see `NewStr`).
pub fn mset_new<'a>(
    g: &mut Guard,
    db: usize,
    pairs: impl IntoIterator<Item = (Key<'a>, NewStr<'a>)>,
) {
    for (k, v) in pairs {
        match v {
            NewStr::Bytes(b)
                if num::should_store_as_int(b).is_none()
                    && crate::compact::fits(k.bytes.len(), b.len()) =>
            {
                drop(g.set_compact(db, &k, b, b.len() > EMBSTR_MAX, Expiry::Clear));
            }
            NewStr::Bytes(b) => set_str(g, db, &k, StrValue::from_bytes(b), Expiry::Clear),
            NewStr::Value(v) => set_str(g, db, &k, v, Expiry::Clear),
        }
        g.notify(class::STRING, "set", db, &k);
    }
}

/// MSET with the values already built (large ones keep their buffers).
pub fn mset_values<'a>(
    g: &mut Guard,
    db: usize,
    pairs: impl IntoIterator<Item = (Key<'a>, StrValue)>,
) {
    for (k, v) in pairs {
        set_str(g, db, &k, v, Expiry::Clear);
        g.notify(class::STRING, "set", db, &k);
    }
}

/// MSETNX key value...: all pairs stored, or none if any key exists.
/// Returns whether they were stored.
pub fn msetnx<'a>(g: &mut Guard, db: usize, pairs: &[(Key<'a>, &'a [u8])]) -> bool {
    if pairs.iter().any(|(k, _)| g.exists(db, k)) {
        return false;
    }
    mset(g, db, pairs.iter().copied());
    true
}

/// The bytes of a string opened for editing, moved out (an `int` becomes
/// its text, as Redis `dbUnshareStringValue` does). The caller puts the
/// result back with `StrValue::edited`, the `raw` encoding of an edited
/// string; the buffer itself is moved, not copied.
fn take_bytes(s: &mut StrValue) -> Vec<u8> {
    std::mem::replace(s, StrValue::Int(0)).into_vec()
}

/// Redis `checkStringLength(c, size, append)`: `size + append` may not
/// exceed proto-max-bulk-len (`max`), nor overflow.
fn fits(max: usize, size: usize, append: usize) -> bool {
    matches!(size.checked_add(append), Some(total) if total <= max)
}

/// APPEND key value → the new length. A new key is created whole (any
/// encoding); an existing one is edited in place and becomes `raw`, even
/// when `value` is empty. The TTL is kept.
pub fn append(g: &mut Guard, db: usize, k: &Key, value: &[u8]) -> Result<usize> {
    let max = g.engine().limits.max_string();
    let Some(e) = g.write(db, k) else {
        g.set(
            db,
            k,
            Value::Str(StrValue::from_bytes(value)),
            Expiry::Clear,
        );
        g.notify(class::STRING, "append", db, k);
        return Ok(value.len());
    };
    let s = as_str_mut(&mut e.value)?;
    if !fits(max, s.len(), value.len()) {
        return Err(Error::StringTooLong);
    }
    let flags = s.mc_flags();
    let mut data = take_bytes(s);
    crate::value::string::reserve(&mut data, value.len());
    data.extend_from_slice(value);
    let len = data.len();
    *s = StrValue::edited(data).with_mc_flags(flags);
    // Even an empty append counts as a change, as in Redis.
    g.modified(db, k);
    g.notify(class::STRING, "append", db, k);
    Ok(len)
}

/// STRLEN key → the length, 0 if absent.
pub fn strlen(g: &mut Guard, db: usize, k: &Key) -> Result<usize> {
    match g.read_ref(db, k) {
        None => Ok(0),
        Some(e) => Ok(str_of(e)?.len()),
    }
}

/// The byte range GETRANGE returns for `start..=end` over `len` bytes
/// (t_string.c `getrangeCommand`): negative indexes count from the end,
/// both clamp into the string, and an empty range is None.
pub fn range_of(len: usize, start: i64, end: i64) -> Option<std::ops::Range<usize>> {
    if start < 0 && end < 0 && start > end {
        return None;
    }
    let n = len as i64;
    let mut start = if start < 0 {
        n.wrapping_add(start)
    } else {
        start
    };
    let mut end = if end < 0 { n.wrapping_add(end) } else { end };
    start = start.max(0);
    end = end.max(0);
    if end >= n {
        end = n - 1;
    }
    if start > end || len == 0 {
        return None;
    }
    Some(start as usize..end as usize + 1)
}

/// GETRANGE key start end: `f` sees the selected bytes (empty for a
/// missing key or an empty range).
pub fn getrange<R>(
    g: &mut Guard,
    db: usize,
    k: &Key,
    start: i64,
    end: i64,
    f: impl FnOnce(&[u8]) -> R,
) -> Result<R> {
    match g.read_ref(db, k) {
        None => Ok(f(b"")),
        Some(e) => Ok(
            str_of(e)?.with_bytes(|b| match range_of(b.len(), start, end) {
                Some(r) => f(&b[r]),
                None => f(b""),
            }),
        ),
    }
}

/// SETRANGE key offset value → the new length. The caller has refused a
/// negative offset. Setting nothing never creates a key or checks the
/// size; otherwise `offset + len` must fit proto-max-bulk-len, the gap is
/// zero-filled, and the result is `raw` with its TTL kept.
pub fn setrange(g: &mut Guard, db: usize, k: &Key, offset: usize, value: &[u8]) -> Result<usize> {
    let max = g.engine().limits.max_string();
    let fits = fits(max, offset, value.len());
    let Some(e) = g.write(db, k) else {
        if value.is_empty() {
            return Ok(0);
        }
        if !fits {
            return Err(Error::StringTooLong);
        }
        let mut data = vec![0u8; offset + value.len()];
        data[offset..].copy_from_slice(value);
        let len = data.len();
        g.set(db, k, Value::Str(StrValue::edited(data)), Expiry::Clear);
        g.notify(class::STRING, "setrange", db, k);
        return Ok(len);
    };
    let s = as_str_mut(&mut e.value)?;
    if value.is_empty() {
        return Ok(s.len());
    }
    if !fits {
        return Err(Error::StringTooLong);
    }
    let flags = s.mc_flags();
    let mut data = take_bytes(s);
    let end = offset + value.len();
    if data.len() < end {
        let extra = end - data.len();
        crate::value::string::reserve(&mut data, extra);
        data.resize(end, 0);
    }
    data[offset..end].copy_from_slice(value);
    let len = data.len();
    *s = StrValue::edited(data).with_mc_flags(flags);
    g.modified(db, k);
    g.notify(class::STRING, "setrange", db, k);
    Ok(len)
}

/// INCR/DECR/INCRBY/DECRBY key: adds `delta` and returns the new value.
/// The stored string must be a canonical i64 (NotInteger otherwise) and
/// the sum must not overflow (Overflow). An `int` value is updated in
/// place: no allocation on the hot path. The TTL is kept.
pub fn incr_by(g: &mut Guard, db: usize, k: &Key, delta: i64) -> Result<i64> {
    let Some(e) = g.write(db, k) else {
        g.set(db, k, Value::Str(StrValue::Int(delta)), Expiry::Clear);
        g.notify(class::STRING, "incrby", db, k);
        return Ok(delta);
    };
    let s = as_str_mut(&mut e.value)?;
    let cur = s.as_i64().ok_or(Error::NotInteger)?;
    let v = cur.checked_add(delta).ok_or(Error::Overflow)?;
    match s {
        StrValue::Int(n) => *n = v,
        _ => *s = StrValue::Int(v).with_mc_flags(s.mc_flags()),
    }
    g.modified(db, k);
    g.notify(class::STRING, "incrby", db, k);
    Ok(v)
}

/// INCRBYFLOAT key incr: adds in C `long double` (`util::num`) and stores
/// the text as a string, never as an `int`; `f` sees the stored text. The
/// stored value is checked before the increment (both NotFloat); a NaN or
/// infinite sum is NanOrInfinity. The TTL is kept.
pub fn incr_by_float<R>(
    g: &mut Guard,
    db: usize,
    k: &Key,
    incr: &[u8],
    f: impl FnOnce(&[u8]) -> R,
) -> Result<R> {
    let float_err = |e| match e {
        num::FloatIncrError::NotFloat => Error::NotFloat,
        num::FloatIncrError::NanOrInfinity => Error::NanOrInfinity,
    };
    let Some(e) = g.write(db, k) else {
        let text = num::incr_by_float(None, incr).map_err(float_err)?;
        let r = f(&text);
        g.set(db, k, Value::Str(float_text(text)), Expiry::Clear);
        g.notify(class::STRING, "incrbyfloat", db, k);
        return Ok(r);
    };
    let s = as_str_mut(&mut e.value)?;
    let text = s
        .with_bytes(|cur| num::incr_by_float(Some(cur), incr))
        .map_err(float_err)?;
    let r = f(&text);
    *s = float_text(text).with_mc_flags(s.mc_flags());
    g.modified(db, k);
    g.notify(class::STRING, "incrbyfloat", db, k);
    Ok(r)
}

/// INCRBYFLOAT's result as Redis stores it: `embstr` up to 44 bytes, `raw`
/// beyond, never `int` even when the text is an integer.
fn float_text(data: Vec<u8>) -> StrValue {
    let raw = data.len() > EMBSTR_MAX;
    StrValue::Bytes { data, raw }
}

/// LCS's operands: copies of both strings (a missing key is empty), so the
/// quadratic work runs after the shard locks are released. WRONGTYPE when
/// either key holds another type (LCS words that error its own way).
pub fn lcs_operands(g: &mut Guard, db: usize, a: &Key, b: &Key) -> Result<(Vec<u8>, Vec<u8>)> {
    let mut fetch = |k: &Key| -> Result<Option<Vec<u8>>> {
        match g.read_ref(db, k) {
            None => Ok(None),
            Some(e) => Ok(Some(str_of(e)?.to_vec())),
        }
    };
    // Redis looks both keys up before checking either type.
    let ra = fetch(a);
    let rb = fetch(b);
    Ok((ra?.unwrap_or_default(), rb?.unwrap_or_default()))
}

/// Errors for a value that would exceed the configured string limit.
pub fn check_len(g: &Guard, len: usize) -> Result<()> {
    if len > g.engine().limits.max_string() {
        return Err(Error::StringTooLong);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::test_support::{engine, with};
    use proptest::prelude::*;

    fn value(g: &mut Guard, key: &[u8]) -> Option<Vec<u8>> {
        let k = g.key(key);
        get(g, 0, &k, |v| v.map(<[u8]>::to_vec)).unwrap()
    }

    fn encoding(g: &mut Guard, key: &[u8]) -> &'static str {
        let k = g.key(key);
        g.peek(0, &k).unwrap().value.encoding()
    }

    fn expire_at(g: &mut Guard, key: &[u8]) -> u64 {
        let k = g.key(key);
        g.peek(0, &k).unwrap().expire_at()
    }

    fn put_hash(g: &mut Guard, key: &[u8]) {
        let k = g.key(key);
        g.set(0, &k, Value::Hash(Box::default()), Expiry::Clear);
    }

    fn put(g: &mut Guard, key: &[u8], v: &[u8], expiry: Expiry) {
        let k = g.key(key);
        set(g, 0, &k, v, Cond::Always, expiry, false).unwrap();
    }

    #[test]
    fn set_conditions_and_get_option() {
        let e = engine();
        with(&e, |g| {
            let k = g.key(b"k");
            let r = set(g, 0, &k, b"a", Cond::IfPresent, Expiry::Clear, false).unwrap();
            assert_eq!(
                r,
                SetOutcome {
                    written: false,
                    old: None
                }
            );
            let r = set(g, 0, &k, b"a", Cond::IfAbsent, Expiry::Clear, true).unwrap();
            assert_eq!(
                r,
                SetOutcome {
                    written: true,
                    old: None
                }
            );
            let r = set(g, 0, &k, b"b", Cond::IfAbsent, Expiry::Clear, true).unwrap();
            assert_eq!(
                r,
                SetOutcome {
                    written: false,
                    old: Some(b"a".to_vec())
                }
            );
            let r = set(g, 0, &k, b"c", Cond::IfPresent, Expiry::Clear, true).unwrap();
            assert_eq!(
                r,
                SetOutcome {
                    written: true,
                    old: Some(b"a".to_vec())
                }
            );
            assert_eq!(value(g, b"k").as_deref(), Some(&b"c"[..]));

            put_hash(g, b"h");
            let h = g.key(b"h");
            let r = set(g, 0, &h, b"v", Cond::Always, Expiry::Clear, true);
            assert_eq!(r, Err(Error::WrongType));
            // Without GET a SET replaces any type.
            set(g, 0, &h, b"v", Cond::Always, Expiry::Clear, false).unwrap();
            assert_eq!(value(g, b"h").as_deref(), Some(&b"v"[..]));
        });
    }

    #[test]
    fn set_expiry_modes() {
        let e = engine();
        with(&e, |g| {
            let far = g.now + 100_000;
            put(g, b"k", b"v", Expiry::At(far));
            put(g, b"k", b"w", Expiry::Keep);
            assert_eq!(expire_at(g, b"k"), far);
            put(g, b"k", b"x", Expiry::Clear);
            assert_eq!(expire_at(g, b"k"), 0);
            // A deadline in the past hides the key at once.
            put(g, b"p", b"v", Expiry::At(1));
            assert_eq!(value(g, b"p"), None);
        });
    }

    #[test]
    fn ttl_deadlines() {
        let now = 1_700_000_000_000;
        assert_eq!(TtlKind::Secs.deadline(10, now), Ok(now + 10_000));
        assert_eq!(TtlKind::Millis.deadline(10, now), Ok(now + 10));
        assert_eq!(TtlKind::AtSecs.deadline(10, now), Ok(10_000));
        assert_eq!(TtlKind::AtMillis.deadline(10, now), Ok(10));
        assert_eq!(
            TtlKind::AtMillis.deadline(i64::MAX, now),
            Ok(i64::MAX as u64)
        );
        for kind in [
            TtlKind::Secs,
            TtlKind::Millis,
            TtlKind::AtSecs,
            TtlKind::AtMillis,
        ] {
            assert_eq!(kind.deadline(0, now), Err(Error::InvalidExpireTime));
            assert_eq!(kind.deadline(-1, now), Err(Error::InvalidExpireTime));
            assert_eq!(kind.parse_deadline(b"1.5", now), Err(Error::NotInteger));
            assert_eq!(kind.parse_deadline(b" 1", now), Err(Error::NotInteger));
        }
        // Overflow of `* 1000` and of `+ now`.
        assert_eq!(
            TtlKind::Secs.deadline(i64::MAX / 1000 + 1, now),
            Err(Error::InvalidExpireTime)
        );
        assert_eq!(
            TtlKind::AtSecs.deadline(i64::MAX, now),
            Err(Error::InvalidExpireTime)
        );
        assert_eq!(
            TtlKind::Secs.deadline(i64::MAX / 1000, now),
            Err(Error::InvalidExpireTime)
        );
        assert_eq!(
            TtlKind::Millis.deadline(i64::MAX, now),
            Err(Error::InvalidExpireTime)
        );
    }

    #[test]
    fn encodings_follow_redis() {
        let e = engine();
        with(&e, |g| {
            put(g, b"i", b"12345", Expiry::Clear);
            assert_eq!(encoding(g, b"i"), "int");
            put(g, b"s", &[b'x'; 44], Expiry::Clear);
            assert_eq!(encoding(g, b"s"), "embstr");
            put(g, b"r", &[b'x'; 45], Expiry::Clear);
            assert_eq!(encoding(g, b"r"), "raw");
            put(g, b"z", b"012", Expiry::Clear);
            assert_eq!(encoding(g, b"z"), "embstr");

            // Any APPEND to an existing key leaves raw, even of nothing.
            let i = g.key(b"i");
            assert_eq!(append(g, 0, &i, b""), Ok(5));
            assert_eq!(encoding(g, b"i"), "raw");
            // A new key from APPEND is created whole.
            let n = g.key(b"n");
            assert_eq!(append(g, 0, &n, b"42"), Ok(2));
            assert_eq!(encoding(g, b"n"), "int");
            // INCR gives int; INCRBYFLOAT gives a string even for "3".
            assert_eq!(incr_by(g, 0, &i, 1), Ok(12346));
            assert_eq!(encoding(g, b"i"), "int");
            let f = g.key(b"f");
            let text = incr_by_float(g, 0, &f, b"3", <[u8]>::to_vec).unwrap();
            assert_eq!(text, b"3");
            assert_eq!(encoding(g, b"f"), "embstr");
            assert_eq!(incr_by(g, 0, &f, 1), Ok(4));
            assert_eq!(encoding(g, b"f"), "int");
            let big = g.key(b"big");
            incr_by_float(g, 0, &big, b"1e50", |_| ()).unwrap();
            assert_eq!(encoding(g, b"big"), "raw");
            // SETRANGE of nothing leaves the encoding alone.
            put(g, b"j", b"123", Expiry::Clear);
            let j = g.key(b"j");
            assert_eq!(setrange(g, 0, &j, 1, b""), Ok(3));
            assert_eq!(encoding(g, b"j"), "int");
            assert_eq!(setrange(g, 0, &j, 1, b"9"), Ok(3));
            assert_eq!(encoding(g, b"j"), "raw");
            assert_eq!(value(g, b"j").as_deref(), Some(&b"193"[..]));
        });
    }

    #[test]
    fn incr_errors_and_ttl() {
        let e = engine();
        with(&e, |g| {
            let k = g.key(b"k");
            put(g, b"k", b"9223372036854775807", Expiry::Clear);
            assert_eq!(incr_by(g, 0, &k, 1), Err(Error::Overflow));
            assert_eq!(incr_by(g, 0, &k, 0), Ok(i64::MAX));
            assert_eq!(incr_by(g, 0, &k, i64::MIN), Ok(-1));
            put(g, b"k", b"-9223372036854775808", Expiry::Clear);
            assert_eq!(incr_by(g, 0, &k, -1), Err(Error::Overflow));
            for bad in [
                &b"1.5"[..],
                b" 1",
                b"01",
                b"+1",
                b"-0",
                b"",
                b"abc",
                b"9223372036854775808",
            ] {
                put(g, b"k", bad, Expiry::Clear);
                assert_eq!(incr_by(g, 0, &k, 1), Err(Error::NotInteger), "{bad:?}");
            }
            let far = g.now + 100_000;
            put(g, b"k", b"5", Expiry::At(far));
            assert_eq!(incr_by(g, 0, &k, 1), Ok(6));
            assert_eq!(expire_at(g, b"k"), far);
            assert_eq!(
                incr_by_float(g, 0, &k, b"0.5", <[u8]>::to_vec),
                Ok(b"6.5".to_vec())
            );
            assert_eq!(expire_at(g, b"k"), far);
            assert_eq!(
                incr_by_float(g, 0, &k, b"inf", |_| ()),
                Err(Error::NanOrInfinity)
            );
            assert_eq!(incr_by_float(g, 0, &k, b"x", |_| ()), Err(Error::NotFloat));
            put_hash(g, b"h");
            let h = g.key(b"h");
            assert_eq!(incr_by(g, 0, &h, 1), Err(Error::WrongType));
            assert_eq!(incr_by_float(g, 0, &h, b"1", |_| ()), Err(Error::WrongType));
            assert_eq!(append(g, 0, &h, b"x"), Err(Error::WrongType));
            assert_eq!(setrange(g, 0, &h, 0, b""), Err(Error::WrongType));
            assert_eq!(strlen(g, 0, &h), Err(Error::WrongType));
        });
    }

    #[test]
    fn getset_getdel_getex() {
        let e = engine();
        with(&e, |g| {
            let k = g.key(b"k");
            let far = g.now + 100_000;
            assert_eq!(getset(g, 0, &k, b"a"), Ok(None));
            put(g, b"k", b"7", Expiry::At(far));
            assert_eq!(getset(g, 0, &k, b"b"), Ok(Some(b"7".to_vec())));
            assert_eq!(expire_at(g, b"k"), 0);

            let seen = getex(g, 0, &k, GetExAction::Expire(TtlKind::Secs, b"100"), |v| {
                v.map(<[u8]>::to_vec)
            });
            assert_eq!(seen, Ok(Some(b"b".to_vec())));
            assert_eq!(expire_at(g, b"k"), g.now + 100_000);
            getex(g, 0, &k, GetExAction::Persist, |_| ()).unwrap();
            assert_eq!(expire_at(g, b"k"), 0);
            // Errors in the time argument only after the key is found.
            let missing = g.key(b"missing");
            let r = getex(
                g,
                0,
                &missing,
                GetExAction::Expire(TtlKind::Secs, b"x"),
                |v| v.is_none(),
            );
            assert_eq!(r, Ok(true));
            let r = getex(g, 0, &k, GetExAction::Expire(TtlKind::Secs, b"x"), |_| ());
            assert_eq!(r, Err(Error::NotInteger));
            let r = getex(g, 0, &k, GetExAction::Expire(TtlKind::Secs, b"0"), |_| ());
            assert_eq!(r, Err(Error::InvalidExpireTime));
            // A deadline not in the future deletes the key after the read.
            let now = g.now.to_string();
            let r = getex(
                g,
                0,
                &k,
                GetExAction::Expire(TtlKind::AtMillis, now.as_bytes()),
                |v| v.map(<[u8]>::to_vec),
            );
            assert_eq!(r, Ok(Some(b"b".to_vec())));
            assert!(!g.exists(0, &k));

            put(g, b"k", b"v", Expiry::Clear);
            assert_eq!(getdel(g, 0, &k), Ok(Some(b"v".to_vec())));
            assert_eq!(getdel(g, 0, &k), Ok(None));
            put_hash(g, b"h");
            let h = g.key(b"h");
            assert_eq!(getdel(g, 0, &h), Err(Error::WrongType));
            assert_eq!(getset(g, 0, &h, b"x"), Err(Error::WrongType));
            assert!(matches!(
                g.peek(0, &h).map(|e| e.value.kind()),
                Some(crate::Kind::Hash)
            ));
        });
    }

    #[test]
    fn multi_key() {
        let e = engine();
        let (a, b, c) = (e.key(b"a"), e.key(b"b"), e.key(b"c"));
        let mut g = e.lock_keys(&crate::cx::testing::cx(), &[a, b, c]);
        mset(&mut g, 0, [(a, &b"1"[..]), (b, &b"2"[..]), (a, &b"3"[..])]);
        put_hash(&mut g, b"c");
        let mut seen = Vec::new();
        mget(&mut g, 0, &[a, b, c], |v| seen.push(v.map(<[u8]>::to_vec)));
        assert_eq!(seen, vec![Some(b"3".to_vec()), Some(b"2".to_vec()), None]);
        // MSETNX: all or nothing.
        assert!(!msetnx(&mut g, 0, &[(c, &b"x"[..])]));
        g.remove(0, &c);
        assert!(!msetnx(&mut g, 0, &[(c, &b"x"[..]), (a, &b"y"[..])]));
        assert!(!g.exists(0, &c));
        assert!(msetnx(&mut g, 0, &[(c, &b"x"[..]), (c, &b"z"[..])]));
        assert_eq!(value(&mut g, b"c").as_deref(), Some(&b"z"[..]));
    }

    #[test]
    fn string_length_limit() {
        let e = engine();
        e.limits
            .proto_max_bulk_len
            .store(10, std::sync::atomic::Ordering::Relaxed);
        with(&e, |g| {
            let k = g.key(b"k");
            assert_eq!(append(g, 0, &k, b"12345"), Ok(5));
            assert_eq!(append(g, 0, &k, b"67890"), Ok(10));
            assert_eq!(append(g, 0, &k, b"x"), Err(Error::StringTooLong));
            assert_eq!(setrange(g, 0, &k, 10, b"x"), Err(Error::StringTooLong));
            assert_eq!(
                setrange(g, 0, &k, usize::MAX, b"x"),
                Err(Error::StringTooLong)
            );
            assert_eq!(setrange(g, 0, &k, 100, b""), Ok(10));
            let n = g.key(b"n");
            assert_eq!(setrange(g, 0, &n, 100, b""), Ok(0));
            assert_eq!(setrange(g, 0, &n, 10, b"x"), Err(Error::StringTooLong));
            assert!(!g.exists(0, &n));
            assert_eq!(setrange(g, 0, &n, 9, b"x"), Ok(10));
            assert_eq!(check_len(g, 10), Ok(()));
            assert_eq!(check_len(g, 11), Err(Error::StringTooLong));
        });
    }

    #[test]
    fn getrange_ranges() {
        let r = |start, end| range_of(11, start, end);
        assert_eq!(r(0, -1), Some(0..11));
        assert_eq!(r(-3, -1), Some(8..11));
        assert_eq!(r(5, 3), None);
        assert_eq!(r(-1, -5), None);
        assert_eq!(r(10, 100), Some(10..11));
        assert_eq!(r(100, 200), None);
        assert_eq!(r(-100, -50), Some(0..1));
        assert_eq!(r(-100, 0), Some(0..1));
        assert_eq!(r(i64::MIN, i64::MAX), Some(0..11));
        assert_eq!(r(i64::MAX, i64::MAX), None);
        assert_eq!(range_of(0, 0, -1), None);
        assert_eq!(range_of(0, -1, 0), None);
    }

    #[test]
    fn lcs_operands_types() {
        let e = engine();
        let (a, b) = (e.key(b"a"), e.key(b"b"));
        let mut g = e.lock_keys(&crate::cx::testing::cx(), &[a, b]);
        put(&mut g, b"a", b"123", Expiry::Clear);
        assert_eq!(
            lcs_operands(&mut g, 0, &a, &b),
            Ok((b"123".to_vec(), Vec::new()))
        );
        put_hash(&mut g, b"b");
        assert_eq!(lcs_operands(&mut g, 0, &a, &b), Err(Error::WrongType));
        assert_eq!(lcs_operands(&mut g, 0, &b, &a), Err(Error::WrongType));
    }

    /// One step of the model test.
    #[derive(Clone, Debug)]
    enum Step {
        IncrBy(i64),
        Append(Vec<u8>),
        SetRange(usize, Vec<u8>),
        GetRange(i64, i64),
        Set(Vec<u8>),
    }

    fn step() -> impl Strategy<Value = Step> {
        let bytes = || {
            proptest::collection::vec(
                prop_oneof![Just(b'1'), Just(b'-'), Just(b'0'), any::<u8>()],
                0..6,
            )
        };
        let idx = || prop_oneof![-20i64..20, Just(i64::MIN), Just(i64::MAX)];
        prop_oneof![
            prop_oneof![-1000i64..1000, Just(i64::MAX), Just(i64::MIN), any::<i64>()]
                .prop_map(Step::IncrBy),
            bytes().prop_map(Step::Append),
            (0usize..24, bytes()).prop_map(|(o, v)| Step::SetRange(o, v)),
            (idx(), idx()).prop_map(|(s, e)| Step::GetRange(s, e)),
            prop_oneof![
                bytes(),
                (-50i64..50).prop_map(|n| n.to_string().into_bytes())
            ]
            .prop_map(Step::Set),
        ]
    }

    /// GETRANGE on a plain byte vector, written from the command's
    /// documentation: negative indexes count from the end, both ends
    /// clamp, an empty or inverted range is empty.
    fn model_range(v: &[u8], start: i64, end: i64) -> Vec<u8> {
        let n = v.len() as i128;
        let (s, e) = (start as i128, end as i128);
        if s < 0 && e < 0 && s > e {
            return Vec::new();
        }
        let s = if s < 0 { (n + s).max(0) } else { s };
        let e = if e < 0 { (n + e).max(0) } else { e }.min(n - 1);
        if n == 0 || s > e {
            return Vec::new();
        }
        v[s as usize..=e as usize].to_vec()
    }

    proptest! {
        #[test]
        fn string_ops_match_model(steps in proptest::collection::vec(step(), 1..40)) {
            let e = engine();
            let mut g = e.lock_all(&crate::cx::testing::cx());
            let k = g.key(b"k");
            let mut model: Option<Vec<u8>> = None;
            for s in steps {
                match s {
                    Step::IncrBy(d) => {
                        let cur = model.as_deref().unwrap_or(b"0");
                        let want = match num::parse_i64(cur) {
                            None => Err(Error::NotInteger),
                            Some(n) => {
                                let sum = n as i128 + d as i128;
                                i64::try_from(sum).map_err(|_| Error::Overflow)
                            }
                        };
                        prop_assert_eq!(incr_by(&mut g, 0, &k, d), want);
                        if let Ok(v) = want {
                            model = Some(v.to_string().into_bytes());
                        }
                    }
                    Step::Append(v) => {
                        let m = model.get_or_insert_with(Vec::new);
                        m.extend_from_slice(&v);
                        prop_assert_eq!(append(&mut g, 0, &k, &v), Ok(m.len()));
                    }
                    Step::SetRange(off, v) => {
                        let want = match (&mut model, v.is_empty()) {
                            (None, true) => 0,
                            (Some(m), true) => m.len(),
                            (m, false) => {
                                let m = m.get_or_insert_with(Vec::new);
                                if m.len() < off + v.len() {
                                    m.resize(off + v.len(), 0);
                                }
                                m[off..off + v.len()].copy_from_slice(&v);
                                m.len()
                            }
                        };
                        prop_assert_eq!(setrange(&mut g, 0, &k, off, &v), Ok(want));
                    }
                    Step::GetRange(s, e) => {
                        let want = model.as_deref().map(|m| model_range(m, s, e)).unwrap_or_default();
                        prop_assert_eq!(getrange(&mut g, 0, &k, s, e, <[u8]>::to_vec), Ok(want));
                    }
                    Step::Set(v) => {
                        set(&mut g, 0, &k, &v, Cond::Always, Expiry::Clear, false).unwrap();
                        model = Some(v);
                    }
                }
                prop_assert_eq!(value(&mut g, b"k"), model.clone());
                prop_assert_eq!(strlen(&mut g, 0, &k), Ok(model.as_ref().map_or(0, Vec::len)));
            }
        }
    }

    /// Every keyspace event recorded since the last call, as `event:key`.
    fn events() -> Vec<String> {
        crate::cx::testing::take_events()
            .into_iter()
            .filter_map(|e| match e {
                crate::events::Event::Notify { event, key, .. } => {
                    Some(format!("{event}:{}", String::from_utf8_lossy(&key)))
                }
                _ => None,
            })
            .collect()
    }

    /// An engine with every notification class on.
    fn notifying() -> crate::Engine {
        let e = engine();
        e.limits
            .notify
            .store(u32::MAX, std::sync::atomic::Ordering::Relaxed);
        events();
        e
    }

    #[test]
    fn notifications_follow_t_string_c() {
        let e = notifying();
        with(&e, |g| {
            let k = g.key(b"k");
            set(g, 0, &k, b"1", Cond::Always, Expiry::Clear, false).unwrap();
            assert_eq!(events(), ["new:k", "set:k"]);
            set(g, 0, &k, b"2", Cond::IfAbsent, Expiry::Clear, false).unwrap();
            assert_eq!(events(), Vec::<String>::new());
            set(
                g,
                0,
                &k,
                b"2",
                Cond::IfPresent,
                Expiry::At(u64::MAX / 2),
                true,
            )
            .unwrap();
            assert_eq!(events(), ["set:k", "expire:k"]);
            getset(g, 0, &k, b"3").unwrap();
            assert_eq!(events(), ["set:k"]);
            append(g, 0, &k, b"").unwrap();
            assert_eq!(events(), ["append:k"]);
            assert_eq!(setrange(g, 0, &k, 0, b"").unwrap(), 1);
            assert_eq!(events(), Vec::<String>::new());
            setrange(g, 0, &k, 0, b"4").unwrap();
            assert_eq!(events(), ["setrange:k"]);
            incr_by(g, 0, &k, -1).unwrap();
            assert_eq!(events(), ["incrby:k"]);
            incr_by_float(g, 0, &k, b"0.5", |_| ()).unwrap();
            assert_eq!(events(), ["incrbyfloat:k"]);
            // A failed write records nothing.
            assert!(incr_by(g, 0, &k, 1).is_err());
            assert_eq!(events(), Vec::<String>::new());
            getex(g, 0, &k, GetExAction::Persist, |_| ()).unwrap();
            assert_eq!(events(), Vec::<String>::new(), "no TTL to remove");
            getex(g, 0, &k, GetExAction::Expire(TtlKind::Secs, b"100"), |_| ()).unwrap();
            assert_eq!(events(), ["expire:k"]);
            getex(g, 0, &k, GetExAction::Persist, |_| ()).unwrap();
            assert_eq!(events(), ["persist:k"]);
            getex(
                g,
                0,
                &k,
                GetExAction::Expire(TtlKind::AtMillis, b"1"),
                |_| (),
            )
            .unwrap();
            assert_eq!(events(), ["del:k"]);
            assert_eq!(getdel(g, 0, &k).unwrap(), None);
            assert_eq!(events(), ["keymiss:k"]);
            let (a, b) = (g.key(b"a"), g.key(b"b"));
            mset(g, 0, [(a, &b"1"[..]), (b, &b"2"[..])]);
            assert_eq!(events(), ["new:a", "set:a", "new:b", "set:b"]);
            assert!(!msetnx(g, 0, &[(a, &b"1"[..])]));
            assert_eq!(events(), Vec::<String>::new());
            getdel(g, 0, &a).unwrap();
            assert_eq!(events(), ["del:a"]);
        });
    }

    #[test]
    fn in_place_edits_tell_watch() {
        let e = engine();
        let flag: crate::keyspace::WatchFlag = Default::default();
        let fired = || flag.swap(false, std::sync::atomic::Ordering::Relaxed);
        with(&e, |g| {
            let k = g.key(b"k");
            set(g, 0, &k, b"1", Cond::Always, Expiry::Clear, false).unwrap();
            g.watch(0, &k, &flag);
            append(g, 0, &k, b"").unwrap();
            assert!(fired(), "append");
            setrange(g, 0, &k, 0, b"").unwrap();
            assert!(!fired(), "an empty setrange changes nothing");
            setrange(g, 0, &k, 0, b"2").unwrap();
            assert!(fired(), "setrange");
            incr_by(g, 0, &k, 1).unwrap();
            assert!(fired(), "incrby");
            incr_by_float(g, 0, &k, b"1", |_| ()).unwrap();
            assert!(fired(), "incrbyfloat");
            getex(g, 0, &k, GetExAction::Persist, |_| ()).unwrap();
            assert!(!fired(), "persist of a key without TTL");
            getex(g, 0, &k, GetExAction::Expire(TtlKind::Secs, b"10"), |_| ()).unwrap();
            assert!(fired(), "getex ex");
        });
    }
}
