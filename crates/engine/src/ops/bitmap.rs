//! Bitmap operations (Redis 7.0 `bitops.c`): SETBIT, GETBIT, BITCOUNT,
//! BITPOS, BITOP, BITFIELD and BITFIELD_RO, on string values.
//!
//! A bitmap is a plain string: bit 0 is the most significant bit of the
//! first byte. Reads see an `int`-encoded string as its decimal text, as
//! Redis's `getObjectReadOnlyString` does; every write first turns the
//! value into a `raw` byte string (Redis `dbUnshareStringValue`), even when
//! no bit ends up changing, so OBJECT ENCODING answers as Redis does.
//!
//! BITCOUNT, BITPOS and BITOP run on values of up to proto-max-bulk-len
//! (512 MB by default), so they work a 64-bit word at a time; the bit by
//! bit definitions they must agree with live in the tests as models.
//!
//! BITCOUNT and BITPOS check their arguments at different points of the
//! lookup in Redis 7.0 (a missing key answers before any range argument is
//! parsed), so those ops take the argument parser as a closure and call it
//! at the moment Redis parses.
use crate::events::class;
use crate::keyspace::{Expiry, Guard, Key};
use crate::ops::{as_str, as_str_mut};
use crate::util::num;
use crate::value::{StrValue, Value};
use crate::{Error, Result};

/// Parses a bit offset as `getBitOffsetFromArgument` does: a `string2ll`
/// integer, or with `hash_bits > 0` (BITFIELD) also `#N`, meaning
/// `N * hash_bits`. The product wraps as the C multiplication does on
/// x86-64. The result must not be negative and its byte (`offset >> 3`)
/// must be below `max_bytes` (proto-max-bulk-len). None is
/// [`Error::BitOffsetOutOfRange`].
pub fn parse_bit_offset(arg: &[u8], hash_bits: u32, max_bytes: usize) -> Option<u64> {
    let (digits, mult) = match arg.split_first() {
        Some((b'#', rest)) if hash_bits > 0 => (rest, hash_bits as i64),
        _ => (arg, 1),
    };
    let off = num::parse_i64(digits)?.wrapping_mul(mult);
    if off < 0 || (off >> 3) as u64 >= max_bytes as u64 {
        return None;
    }
    Some(off as u64)
}

/// Whether BITCOUNT/BITPOS indexes count bytes or bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    Byte,
    Bit,
}

/// BITCOUNT's arguments after the key, as parsed once the key is known to
/// hold a string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CountArgs {
    /// No range: the whole string.
    Whole,
    /// A range Redis answers 0 for before looking at the unit (both
    /// indexes negative and start > end).
    Zero,
    /// `start end [BYTE|BIT]`, inclusive, negative from the end.
    Range { start: i64, end: i64, unit: Unit },
}

/// BITPOS's range after the bit: `start [end [BYTE|BIT]]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PosArgs {
    pub start: i64,
    /// None when not given: clear bits past the string then count as
    /// found, as if the string were zero padded.
    pub end: Option<i64>,
    pub unit: Unit,
}

/// A BITOP operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BitOp {
    And,
    Or,
    Xor,
    Not,
}

/// BITFIELD's overflow policy for SET and INCRBY.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Overflow {
    Wrap,
    Sat,
    Fail,
}

/// What one BITFIELD operation does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldOp {
    Get,
    /// SET: the new value; the reply is the old one.
    Set(i64),
    /// INCRBY: the increment; the reply is the new value.
    IncrBy(i64),
}

/// One parsed BITFIELD operation: `i<bits>` or `u<bits>` at a bit offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BitfieldOp {
    pub op: FieldOp,
    pub signed: bool,
    /// 1..=64 signed, 1..=63 unsigned.
    pub bits: u32,
    pub offset: u64,
    /// The OVERFLOW in force where this operation appeared.
    pub overflow: Overflow,
}

// ---------------------------------------------------------------------------
// Word-at-a-time primitives.

/// Number of set bits in `buf`.
pub fn popcount(buf: &[u8]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("popcnt") {
            // SAFETY: the CPU supports POPCNT, checked just above.
            return unsafe { popcount_popcnt(buf) };
        }
    }
    popcount_words(buf)
}

/// `popcount_words` compiled with the POPCNT instruction available, so
/// `count_ones` becomes one instruction instead of a bit-twiddling sequence.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt")]
unsafe fn popcount_popcnt(buf: &[u8]) -> u64 {
    popcount_words(buf)
}

/// Counts 32 bytes per turn in four independent sums (no dependency chain
/// between the four counts), then the tail.
#[inline(always)]
fn popcount_words(buf: &[u8]) -> u64 {
    let mut sums = [0u64; 4];
    let mut blocks = buf.chunks_exact(32);
    for b in &mut blocks {
        for (i, s) in sums.iter_mut().enumerate() {
            *s += word(&b[i * 8..i * 8 + 8]).count_ones() as u64;
        }
    }
    let mut total: u64 = sums.iter().sum();
    let mut words = blocks.remainder().chunks_exact(8);
    for w in &mut words {
        total += word(w).count_ones() as u64;
    }
    total
        + words
            .remainder()
            .iter()
            .map(|b| b.count_ones() as u64)
            .sum::<u64>()
}

/// Eight bytes as a native-endian word (for counting and masking, where
/// bit order within the word does not matter).
#[inline(always)]
fn word(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(b);
    u64::from_ne_bytes(a)
}

/// Position of the first bit equal to `bit` in the inclusive bit range
/// `from..=to` of `buf` (both inside `buf`), or None.
fn first_bit(buf: &[u8], from: u64, to: u64, bit: bool) -> Option<u64> {
    // Searching for a 0 is searching for a 1 in the complement.
    let flip = if bit { 0 } else { 0xff };
    let (b0, b1) = ((from >> 3) as usize, (to >> 3) as usize);
    let head = 0xffu8 >> (from & 7);
    let tail = 0xffu8 << (7 - (to & 7));
    let at = |i: usize, v: u8| i as u64 * 8 + v.leading_zeros() as u64;
    if b0 == b1 {
        let v = (buf[b0] ^ flip) & head & tail;
        return (v != 0).then(|| at(b0, v));
    }
    let v = (buf[b0] ^ flip) & head;
    if v != 0 {
        return Some(at(b0, v));
    }
    if let Some(p) = first_one(&buf[b0 + 1..b1], flip) {
        return Some((b0 as u64 + 1) * 8 + p);
    }
    let v = (buf[b1] ^ flip) & tail;
    (v != 0).then(|| at(b1, v))
}

/// First set bit of `bytes ^ flip`, skipping eight bytes per step while
/// they hold nothing.
fn first_one(bytes: &[u8], flip: u8) -> Option<u64> {
    let wflip = u64::from_ne_bytes([flip; 8]);
    let mut words = bytes.chunks_exact(8);
    let mut base = 0u64;
    for w in &mut words {
        let v = word(w) ^ wflip;
        if v != 0 {
            // Big-endian so the first byte's top bit is the word's top bit.
            let be = u64::from_be_bytes(v.to_ne_bytes());
            return Some(base + be.leading_zeros() as u64);
        }
        base += 64;
    }
    words
        .remainder()
        .iter()
        .position(|&b| b ^ flip != 0)
        .map(|i| base + i as u64 * 8 + (words.remainder()[i] ^ flip).leading_zeros() as u64)
}

/// Folds `src` into `acc` for BITOP (the first source initialises `acc`
/// with [`bitop_first`]); bytes of `acc` past the end of `src` meet zeros.
pub fn bitop_fold(acc: &mut [u8], src: &[u8], op: BitOp) {
    let n = src.len().min(acc.len());
    let (head, rest) = acc.split_at_mut(n);
    let src = &src[..n];
    let mut a = head.chunks_exact_mut(8);
    let mut s = src.chunks_exact(8);
    for (aw, sw) in (&mut a).zip(&mut s) {
        let (x, y) = (word(aw), word(sw));
        let r = match op {
            BitOp::And => x & y,
            BitOp::Or => x | y,
            BitOp::Xor => x ^ y,
            BitOp::Not => !y,
        };
        aw.copy_from_slice(&r.to_ne_bytes());
    }
    for (x, &y) in a.into_remainder().iter_mut().zip(s.remainder()) {
        *x = match op {
            BitOp::And => *x & y,
            BitOp::Or => *x | y,
            BitOp::Xor => *x ^ y,
            BitOp::Not => !y,
        };
    }
    match op {
        BitOp::And => rest.fill(0),
        BitOp::Not => rest.fill(0xff),
        BitOp::Or | BitOp::Xor => {}
    }
}

/// Starts a BITOP result from its first source: a copy (zero padded), or
/// for NOT its complement.
pub fn bitop_first(acc: &mut [u8], src: &[u8], op: BitOp) {
    let n = src.len().min(acc.len());
    acc[..n].copy_from_slice(&src[..n]);
    acc[n..].fill(0);
    if op == BitOp::Not {
        for w in acc.chunks_mut(8) {
            for b in w {
                *b = !*b;
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Range semantics of BITCOUNT and BITPOS.

/// The inclusive bit range `start..=end` (in `unit`) of a string of `len`
/// bytes, after Redis's index conversion: negative from the end, clamped
/// to the string. None when empty.
fn bit_range(len: usize, start: i64, end: i64, unit: Unit) -> Option<(u64, u64)> {
    let total = match unit {
        Unit::Byte => len as i64,
        Unit::Bit => (len as i64) << 3,
    };
    let fix = |i: i64| {
        if i < 0 {
            total.saturating_add(i).max(0)
        } else {
            i
        }
    };
    let (start, mut end) = (fix(start), fix(end));
    if end >= total {
        end = total - 1;
    }
    if start > end {
        return None;
    }
    Some(match unit {
        Unit::Byte => (start as u64 * 8, end as u64 * 8 + 7),
        Unit::Bit => (start as u64, end as u64),
    })
}

/// BITCOUNT of `s` (t_string `bitcountCommand`).
pub fn count_bits(s: &[u8], args: CountArgs) -> i64 {
    let (from, to) = match args {
        CountArgs::Zero => return 0,
        CountArgs::Whole => {
            if s.is_empty() {
                return 0;
            }
            (0, s.len() as u64 * 8 - 1)
        }
        CountArgs::Range { start, end, unit } => {
            if start < 0 && end < 0 && start > end {
                return 0;
            }
            match bit_range(s.len(), start, end, unit) {
                Some(r) => r,
                None => return 0,
            }
        }
    };
    let (b0, b1) = ((from >> 3) as usize, (to >> 3) as usize);
    let all = popcount(&s[b0..=b1]);
    let before = (s[b0] & !(0xffu8 >> (from & 7))).count_ones();
    let after = (s[b1] & !(0xffu8 << (7 - (to & 7)))).count_ones();
    (all - before as u64 - after as u64) as i64
}

/// BITPOS of `bit` in `s` (`bitposCommand`): the first matching bit in
/// the range, else -1; except that looking for a clear bit without an
/// explicit end finds the first bit after the range's last byte, as if
/// the string went on with zeros.
pub fn find_bit(s: &[u8], bit: bool, args: Option<PosArgs>) -> i64 {
    let (range, end_given) = match args {
        None if s.is_empty() => (None, false),
        None => (Some((0, s.len() as u64 * 8 - 1)), false),
        Some(PosArgs { start, end, unit }) => {
            let end_given = end.is_some();
            let end = end.unwrap_or(match unit {
                Unit::Byte => s.len() as i64 - 1,
                Unit::Bit => ((s.len() as i64) << 3) + 7,
            });
            (bit_range(s.len(), start, end, unit), end_given)
        }
    };
    let Some((from, to)) = range else {
        return -1;
    };
    match first_bit(s, from, to, bit) {
        Some(p) => p as i64,
        None if bit || end_given => -1,
        None => (((to >> 3) + 1) * 8) as i64,
    }
}

// ---------------------------------------------------------------------------
// BITFIELD integers.

/// The `bits`-wide unsigned integer at bit `offset` of `buf`, reading
/// zeros past its end. Works on a 9-byte big-endian window, which holds
/// any field of up to 64 bits at any bit alignment.
pub fn get_unsigned(buf: &[u8], offset: u64, bits: u32) -> u64 {
    let (window, shift) = load_window(buf, offset, bits);
    ((window >> shift) & mask(bits) as u128) as u64
}

/// The `bits`-wide two's complement integer at bit `offset`.
pub fn get_signed(buf: &[u8], offset: u64, bits: u32) -> i64 {
    let v = get_unsigned(buf, offset, bits);
    if bits < 64 && v & (1u64 << (bits - 1)) != 0 {
        (v | (u64::MAX << bits)) as i64
    } else {
        v as i64
    }
}

/// Stores the low `bits` of `value` at bit `offset`. `buf` must hold the
/// field's last byte.
pub fn set_unsigned(buf: &mut [u8], offset: u64, bits: u32, value: u64) {
    let (window, shift) = load_window(buf, offset, bits);
    let m = (mask(bits) as u128) << shift;
    let window = (window & !m) | (((value as u128) << shift) & m);
    let first = (offset >> 3) as usize;
    for (i, b) in buf.iter_mut().skip(first).take(9).enumerate() {
        *b = (window >> (64 - 8 * i)) as u8;
    }
}

fn mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

/// The 72-bit window starting at the field's first byte (zero padded) and
/// the shift that brings the field to bit 0.
fn load_window(buf: &[u8], offset: u64, bits: u32) -> (u128, u32) {
    let first = usize::try_from(offset >> 3).unwrap_or(usize::MAX);
    let mut window = 0u128;
    for i in 0..9 {
        let b = first
            .checked_add(i)
            .and_then(|j| buf.get(j))
            .copied()
            .unwrap_or(0);
        window = (window << 8) | b as u128;
    }
    (window, 72 - (offset & 7) as u32 - bits)
}

/// Redis `checkUnsignedBitfieldOverflow`: 0, or 1/-1 for an overflow
/// upwards/downwards together with the value to store under WRAP or SAT.
fn unsigned_overflow(value: u64, incr: i64, bits: u32, ow: Overflow) -> (i32, u64) {
    let max = mask(bits);
    let maxincr = max.wrapping_sub(value) as i64;
    let minincr = value.wrapping_neg() as i64;
    let wrap = || value.wrapping_add(incr as u64) & max;
    if value > max || (incr > 0 && incr > maxincr) {
        (1, if ow == Overflow::Sat { max } else { wrap() })
    } else if incr < 0 && incr < minincr {
        (-1, if ow == Overflow::Sat { 0 } else { wrap() })
    } else {
        (0, 0)
    }
}

/// Redis `checkSignedBitfieldOverflow`, with its exact conditions
/// (including how an i64 field treats increments that would leave i64).
fn signed_overflow(value: i64, incr: i64, bits: u32, ow: Overflow) -> (i32, i64) {
    let max = if bits == 64 {
        i64::MAX
    } else {
        (1i64 << (bits - 1)) - 1
    };
    let min = -max - 1;
    let maxincr = (max as u64).wrapping_sub(value as u64) as i64;
    let minincr = min.wrapping_sub(value);
    let wrap = || {
        let c = (value as u64).wrapping_add(incr as u64);
        if bits < 64 {
            let m = u64::MAX << bits;
            if c & (1u64 << (bits - 1)) != 0 {
                (c | m) as i64
            } else {
                (c & !m) as i64
            }
        } else {
            c as i64
        }
    };
    if value > max || (bits != 64 && incr > maxincr) || (value >= 0 && incr > 0 && incr > maxincr) {
        (1, if ow == Overflow::Sat { max } else { wrap() })
    } else if value < min
        || (bits != 64 && incr < minincr)
        || (value < 0 && incr < 0 && incr < minincr)
    {
        (-1, if ow == Overflow::Sat { min } else { wrap() })
    } else {
        (0, 0)
    }
}

/// Runs one SET or INCRBY on `buf` (which holds the field): the reply
/// (None when OVERFLOW FAIL refused it) and whether the stored value
/// changed.
fn apply_write(buf: &mut [u8], op: &BitfieldOp) -> (Option<i64>, bool) {
    let (off, bits, ow) = (op.offset, op.bits, op.overflow);
    if op.signed {
        let old = get_signed(buf, off, bits);
        let (overflow, new, reply) = match op.op {
            FieldOp::IncrBy(d) => {
                let (o, lim) = signed_overflow(old, d, bits, ow);
                let new = if o != 0 { lim } else { old.wrapping_add(d) };
                (o, new, new)
            }
            FieldOp::Set(v) => {
                let (o, lim) = signed_overflow(v, 0, bits, ow);
                (o, if o != 0 { lim } else { v }, old)
            }
            FieldOp::Get => return (Some(old), false),
        };
        if overflow != 0 && ow == Overflow::Fail {
            return (None, false);
        }
        set_unsigned(buf, off, bits, new as u64);
        (Some(reply), old != new)
    } else {
        let old = get_unsigned(buf, off, bits);
        let (overflow, new, reply) = match op.op {
            FieldOp::IncrBy(d) => {
                let (o, lim) = unsigned_overflow(old, d, bits, ow);
                let new = if o != 0 {
                    lim
                } else {
                    old.wrapping_add(d as u64)
                };
                (o, new, new)
            }
            FieldOp::Set(v) => {
                let (o, lim) = unsigned_overflow(v as u64, 0, bits, ow);
                (o, if o != 0 { lim } else { v as u64 }, old)
            }
            FieldOp::Get => return (Some(old as i64), false),
        };
        if overflow != 0 && ow == Overflow::Fail {
            return (None, false);
        }
        set_unsigned(buf, off, bits, new);
        (Some(reply as i64), old != new)
    }
}

/// A GET: the field read from `buf` (zero padded; None is a missing key).
fn apply_get(buf: Option<&[u8]>, op: &BitfieldOp) -> i64 {
    let buf = buf.unwrap_or_default();
    if op.signed {
        get_signed(buf, op.offset, op.bits)
    } else {
        get_unsigned(buf, op.offset, op.bits) as i64
    }
}

// ---------------------------------------------------------------------------
// Keyspace operations.

/// The bytes of a string opened for a bit write, as `raw`: an `int` is
/// turned into its text first, as `dbUnshareStringValue` does. A memcached
/// item becomes a plain string: a bitmap edit drops its client flags and
/// CAS (the value is a new version, and no longer the client's data).
pub(crate) fn unshare(s: &mut StrValue) -> &mut Vec<u8> {
    s.plain_bytes_mut()
}

/// Zero-extends `data` to `len` bytes. Growth follows `sdsMakeRoomFor`
/// (double below 1 MB, then 1 MB more) instead of Vec's doubling, so a
/// bitmap of hundreds of megabytes is not given as much again in spare
/// capacity. A failed allocation is an error, not an abort.
fn grow_zero(data: &mut Vec<u8>, len: usize) -> Result<()> {
    if data.len() >= len {
        return Ok(());
    }
    if len > data.capacity() {
        const MB: usize = 1024 * 1024;
        let want = if len < MB {
            len * 2
        } else {
            len.saturating_add(MB)
        };
        if data.try_reserve_exact(want - data.len()).is_err() {
            data.try_reserve_exact(len - data.len())
                .map_err(|_| Error::OutOfMemory)?;
        }
    }
    data.resize(len, 0);
    Ok(())
}

/// Redis `lookupStringForBitCommand`: the string at `k` with at least
/// `last_byte + 1` bytes, created zero-filled if missing (no TTL), grown
/// with zeros if short, `raw` either way. The flag is true if the key was
/// created or grown. WRONGTYPE for another type.
fn open_for_bits<'g>(
    g: &'g mut Guard,
    db: usize,
    k: &Key,
    last_byte: usize,
) -> Result<(&'g mut Vec<u8>, Opened)> {
    let need = last_byte.saturating_add(1);
    let created = match g.write(db, k) {
        Some(e) => {
            as_str(&e.value)?;
            false
        }
        None => {
            // Created at its exact size, as `sdsnewlen`.
            let mut data = Vec::new();
            data.try_reserve_exact(need)
                .map_err(|_| Error::OutOfMemory)?;
            data.resize(need, 0);
            g.set(db, k, Value::Str(StrValue::edited(data)), Expiry::Clear);
            true
        }
    };
    let Some(e) = g.peek(db, k) else {
        // Just found or stored under the same lock.
        return Err(Error::NoSuchKey);
    };
    let data = unshare(as_str_mut(&mut e.value)?);
    let old = data.len();
    grow_zero(data, need)?;
    let grew = created || data.len() != old;
    Ok((data, Opened { created, grew }))
}

/// How `open_for_bits` found the string.
struct Opened {
    /// Stored just now: `set` already counted the change (and told WATCH),
    /// so the write must not count it again (Redis bumps `dirty` once for
    /// a SETBIT or BITFIELD SET that creates its key).
    created: bool,
    /// Created or lengthened: every write to it is a change.
    grew: bool,
}

/// SETBIT key offset 0|1 → the bit's old value. Notifies `setbit` (and
/// signals the key) only when the key was created or grown, or the bit
/// changed, as Redis 7.0 does.
pub fn setbit(g: &mut Guard, db: usize, k: &Key, offset: u64, on: bool) -> Result<bool> {
    let byte = usize::try_from(offset >> 3).map_err(|_| Error::BitOffsetOutOfRange)?;
    let (data, opened) = open_for_bits(g, db, k, byte)?;
    let mask = 0x80u8 >> (offset & 7);
    let old = data[byte] & mask != 0;
    if opened.grew || old != on {
        if on {
            data[byte] |= mask;
        } else {
            data[byte] &= !mask;
        }
        if !opened.created {
            g.modified(db, k);
        }
        g.notify(class::STRING, "setbit", db, k);
    }
    Ok(old)
}

/// GETBIT key offset → the bit (0 past the end or for a missing key).
pub fn getbit(g: &mut Guard, db: usize, k: &Key, offset: u64) -> Result<bool> {
    let Some(e) = g.read_ref(db, k) else {
        return Ok(false);
    };
    let s = e.str().ok_or(Error::WrongType)?;
    Ok(s.with_bytes(|b| {
        usize::try_from(offset >> 3)
            .ok()
            .and_then(|i| b.get(i))
            .is_some_and(|&v| v & (0x80 >> (offset & 7)) != 0)
    }))
}

/// BITCOUNT key [start end [BYTE|BIT]] → the number of set bits. As in
/// Redis 7.0 a missing key answers 0 before `parse` (the range arguments)
/// runs; a key of another type is WRONGTYPE, also before it.
pub fn bitcount<E: From<Error>>(
    g: &mut Guard,
    db: usize,
    k: &Key,
    parse: impl FnOnce() -> std::result::Result<CountArgs, E>,
) -> std::result::Result<i64, E> {
    let Some(e) = g.read_ref(db, k) else {
        return Ok(0);
    };
    let s = e.str().ok_or(Error::WrongType)?;
    let args = parse()?;
    Ok(s.with_bytes(|b| count_bits(b, args)))
}

/// BITPOS key bit [start [end [BYTE|BIT]]] → the first position of `bit`
/// (see [`find_bit`]). A missing key is all zeros: 0 for a clear bit, -1
/// for a set one, answered before `parse` runs (Redis 7.0).
pub fn bitpos<E: From<Error>>(
    g: &mut Guard,
    db: usize,
    k: &Key,
    bit: bool,
    parse: impl FnOnce() -> std::result::Result<Option<PosArgs>, E>,
) -> std::result::Result<i64, E> {
    let Some(e) = g.read_ref(db, k) else {
        return Ok(if bit { -1 } else { 0 });
    };
    let s = e.str().ok_or(Error::WrongType)?;
    let args = parse()?;
    Ok(s.with_bytes(|b| find_bit(b, bit, args)))
}

/// BITOP op dest src... → the result's length. Missing sources are empty
/// strings (zeros); the result is as long as the longest source and is
/// stored `raw` with no TTL (notifying `set`), or, when every source is
/// empty, `dest` is deleted (notifying `del` if it existed). The caller
/// locked `dest` and every source, and checked NOT's single source.
pub fn bitop(g: &mut Guard, db: usize, dest: &Key, op: BitOp, srcs: &[Key]) -> Result<usize> {
    // One counted lookup per source, in order, as Redis does; the first
    // non-string fails the command.
    let mut maxlen = 0;
    for k in srcs {
        if let Some(e) = g.read(db, k) {
            maxlen = maxlen.max(as_str(&e.value)?.len());
        }
    }
    if maxlen == 0 {
        if g.remove(db, dest).is_some() {
            g.notify(class::GENERIC, "del", db, dest);
        }
        return Ok(0);
    }
    let mut res = vec![0u8; maxlen];
    for (i, k) in srcs.iter().enumerate() {
        let mut fold = |b: &[u8]| {
            if i == 0 {
                bitop_first(&mut res, b, op)
            } else {
                bitop_fold(&mut res, b, op)
            }
        };
        match g.peek(db, k) {
            Some(e) => as_str(&e.value)?.with_bytes(fold),
            None => fold(b""),
        }
    }
    g.set(db, dest, Value::Str(StrValue::edited(res)), Expiry::Clear);
    g.notify(class::STRING, "set", db, dest);
    Ok(maxlen)
}

/// BITFIELD / BITFIELD_RO key ops... → one reply per operation (None: a
/// write refused by OVERFLOW FAIL). Only GETs: a read (a missing key reads
/// zeros). Otherwise, for BITFIELD_RO (`readonly_cmd`), Redis's error;
/// for BITFIELD the string is created or grown up to the farthest bit
/// written, then the operations run in order; `setbit` is notified once
/// if any of them changed a value (or the string was created or grown).
pub fn bitfield(
    g: &mut Guard,
    db: usize,
    k: &Key,
    ops: &[BitfieldOp],
    readonly_cmd: bool,
) -> Result<Vec<Option<i64>>> {
    let last_bit = ops
        .iter()
        .filter(|o| o.op != FieldOp::Get)
        .map(|o| o.offset + o.bits as u64 - 1)
        .max();
    let Some(last_bit) = last_bit else {
        return match g.read(db, k) {
            None => Ok(ops.iter().map(|o| Some(apply_get(None, o))).collect()),
            Some(e) => {
                let s = as_str(&e.value)?;
                Ok(s.with_bytes(|b| ops.iter().map(|o| Some(apply_get(Some(b), o))).collect()))
            }
        };
    };
    if readonly_cmd {
        return Err(Error::ReadOnlyWrite);
    }
    let last_byte = usize::try_from(last_bit >> 3).map_err(|_| Error::BitOffsetOutOfRange)?;
    let (data, opened) = open_for_bits(g, db, k, last_byte)?;
    let mut changed = false;
    let replies = ops
        .iter()
        .map(|o| match o.op {
            FieldOp::Get => Some(apply_get(Some(data), o)),
            _ => {
                let (reply, ch) = apply_write(data, o);
                changed |= reply.is_some() && (opened.grew || ch);
                reply
            }
        })
        .collect();
    if changed {
        if !opened.created {
            g.modified(db, k);
        }
        g.notify(class::STRING, "setbit", db, k);
    }
    Ok(replies)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::Event;
    use crate::ops::test_support::{engine, with};
    use proptest::prelude::*;
    use std::sync::atomic::Ordering;

    // -- Bit-by-bit models, written from the command documentation. --

    fn bit_at(s: &[u8], i: u64) -> bool {
        s.get((i / 8) as usize)
            .is_some_and(|b| b & (0x80 >> (i % 8)) != 0)
    }

    /// Converts a (start, end) pair as the docs describe: negative from
    /// the end, clamped; None when empty.
    fn model_range(total: i128, start: i64, end: i64) -> Option<(i128, i128)> {
        let fix = |i: i64| {
            let i = i as i128;
            if i < 0 {
                (total + i).max(0)
            } else {
                i
            }
        };
        let (s, e) = (fix(start), fix(end).min(total - 1));
        (s <= e).then_some((s, e))
    }

    fn model_count(s: &[u8], args: CountArgs) -> i64 {
        let (from, to) = match args {
            CountArgs::Zero => return 0,
            CountArgs::Whole => (0, s.len() as i128 * 8 - 1),
            CountArgs::Range { start, end, unit } => {
                if start < 0 && end < 0 && start > end {
                    return 0;
                }
                let bits = unit == Unit::Bit;
                let total = s.len() as i128 * if bits { 8 } else { 1 };
                let Some((a, b)) = model_range(total, start, end) else {
                    return 0;
                };
                if bits {
                    (a, b)
                } else {
                    (a * 8, b * 8 + 7)
                }
            }
        };
        (from..=to).filter(|&i| bit_at(s, i as u64)).count() as i64
    }

    fn model_pos(s: &[u8], bit: bool, args: Option<PosArgs>) -> i64 {
        let (range, end_given) = match args {
            None => ((!s.is_empty()).then(|| (0, s.len() as i128 * 8 - 1)), false),
            Some(PosArgs { start, end, unit }) => {
                let bits = unit == Unit::Bit;
                let total = s.len() as i128 * if bits { 8 } else { 1 };
                let end_v = end.unwrap_or(i64::MAX);
                let r = model_range(total, start, end_v);
                (
                    r.map(|(a, b)| if bits { (a, b) } else { (a * 8, b * 8 + 7) }),
                    end.is_some(),
                )
            }
        };
        let Some((from, to)) = range else {
            return -1;
        };
        for i in from..=to {
            if bit_at(s, i as u64) == bit {
                return i as i64;
            }
        }
        if bit || end_given {
            -1
        } else {
            // Past the last byte the range touches.
            ((to / 8 + 1) * 8) as i64
        }
    }

    fn model_get(s: &[u8], offset: u64, bits: u32, signed: bool) -> i64 {
        let mut v: u64 = 0;
        for i in 0..bits as u64 {
            v = (v << 1) | bit_at(s, offset + i) as u64;
        }
        if signed && bits < 64 && v >> (bits - 1) & 1 == 1 {
            v |= u64::MAX << bits;
        }
        v as i64
    }

    fn model_set(s: &mut [u8], offset: u64, bits: u32, v: u64) {
        for i in 0..bits as u64 {
            let b = (v >> (bits as u64 - 1 - i)) & 1 == 1;
            let pos = offset + i;
            let m = 0x80u8 >> (pos % 8);
            if b {
                s[(pos / 8) as usize] |= m;
            } else {
                s[(pos / 8) as usize] &= !m;
            }
        }
    }

    /// BITFIELD SET/INCRBY from the documentation, in i128 arithmetic.
    fn model_write(s: &mut [u8], op: &BitfieldOp) -> Option<i64> {
        let (lo, hi): (i128, i128) = if op.signed {
            (-(1i128 << (op.bits - 1)), (1i128 << (op.bits - 1)) - 1)
        } else {
            (0, (1i128 << op.bits) - 1)
        };
        let old = model_get(s, op.offset, op.bits, op.signed) as i128;
        let old = if op.signed { old } else { old & hi };
        let want = match op.op {
            FieldOp::Set(v) => {
                if op.signed {
                    v as i128
                } else {
                    v as u64 as i128
                }
            }
            FieldOp::IncrBy(d) => old + d as i128,
            FieldOp::Get => unreachable!(),
        };
        // Redis's quirk, kept for exactness: a signed SET so negative that
        // `max - value` wraps in i64 counts as an overflow upwards, so SAT
        // stores the maximum (checked against redis-server 7.0.15).
        let upwards = want > hi
            || (op.signed
                && op.bits < 64
                && matches!(op.op, FieldOp::Set(_))
                && want < hi - i64::MAX as i128);
        let new = if want < lo || want > hi {
            match op.overflow {
                Overflow::Fail => return None,
                Overflow::Sat => {
                    if upwards {
                        hi
                    } else {
                        lo
                    }
                }
                Overflow::Wrap => {
                    let span = 1i128 << op.bits;
                    (want - lo).rem_euclid(span) + lo
                }
            }
        } else {
            want
        };
        model_set(s, op.offset, op.bits, new as u64);
        Some(match op.op {
            FieldOp::Set(_) => old as i64,
            _ => new as i64,
        })
    }

    fn arb_buf() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..80),
            proptest::collection::vec(prop_oneof![Just(0u8), Just(0xff), any::<u8>()], 0..80),
            (0usize..80, any::<bool>(), 0usize..80).prop_map(|(n, ones, at)| {
                let mut v = vec![if ones { 0xff } else { 0 }; n];
                if at < n {
                    v[at] ^= 0x10;
                }
                v
            }),
        ]
    }

    fn arb_index() -> impl Strategy<Value = i64> {
        prop_oneof![
            -700i64..700,
            Just(i64::MIN),
            Just(i64::MAX),
            Just(-1),
            Just(0)
        ]
    }

    fn arb_unit() -> impl Strategy<Value = Unit> {
        prop_oneof![Just(Unit::Byte), Just(Unit::Bit)]
    }

    proptest! {
        #[test]
        fn popcount_matches_model(v in arb_buf(), skip in 0usize..8) {
            let v = &v[skip.min(v.len())..];
            let want: u64 = v.iter().map(|b| b.count_ones() as u64).sum();
            prop_assert_eq!(popcount(v), want);
            prop_assert_eq!(popcount_words(v), want);
        }

        #[test]
        fn bitcount_matches_model(v in arb_buf(), s in arb_index(), e in arb_index(), u in arb_unit()) {
            let args = CountArgs::Range { start: s, end: e, unit: u };
            prop_assert_eq!(count_bits(&v, args), model_count(&v, args));
            prop_assert_eq!(count_bits(&v, CountArgs::Whole), model_count(&v, CountArgs::Whole));
        }

        #[test]
        fn bitpos_matches_model(
            v in arb_buf(),
            bit in any::<bool>(),
            s in arb_index(),
            e in proptest::option::of(arb_index()),
            u in arb_unit(),
            ranged in any::<bool>(),
        ) {
            let args = ranged.then_some(PosArgs { start: s, end: e, unit: u });
            prop_assert_eq!(find_bit(&v, bit, args), model_pos(&v, bit, args), "{:?}", args);
        }

        #[test]
        fn bitop_matches_model(srcs in proptest::collection::vec(arb_buf(), 1..5), which in 0usize..4) {
            let op = [BitOp::And, BitOp::Or, BitOp::Xor, BitOp::Not][which];
            let srcs = if op == BitOp::Not { &srcs[..1] } else { &srcs[..] };
            let maxlen = srcs.iter().map(Vec::len).max().unwrap();
            let mut acc = vec![0x5au8; maxlen];
            for (i, s) in srcs.iter().enumerate() {
                if i == 0 { bitop_first(&mut acc, s, op) } else { bitop_fold(&mut acc, s, op) }
            }
            for (j, &got) in acc.iter().enumerate() {
                let byte = |s: &Vec<u8>| s.get(j).copied().unwrap_or(0);
                let mut want = byte(&srcs[0]);
                if op == BitOp::Not { want = !want; }
                for s in &srcs[1..] {
                    match op {
                        BitOp::And => want &= byte(s),
                        BitOp::Or => want |= byte(s),
                        BitOp::Xor => want ^= byte(s),
                        BitOp::Not => {}
                    }
                }
                prop_assert_eq!(got, want, "byte {}", j);
            }
        }

        #[test]
        fn bitfield_get_set_match_model(
            mut v in proptest::collection::vec(any::<u8>(), 18..24),
            offset in 0u64..80,
            bits in 1u32..=64,
            value in any::<u64>(),
        ) {
            for signed in [false, true] {
                prop_assert_eq!(
                    if signed { get_signed(&v, offset, bits) } else { get_unsigned(&v, offset, bits) as i64 },
                    model_get(&v, offset, bits, signed)
                );
            }
            // Past the end reads zeros.
            prop_assert_eq!(get_unsigned(&v, 8 * v.len() as u64 + offset, bits), 0);
            let mut m = v.clone();
            model_set(&mut m, offset, bits, value);
            set_unsigned(&mut v, offset, bits, value);
            prop_assert_eq!(&v, &m);
        }

        #[test]
        fn bitfield_writes_match_model(
            seed in proptest::collection::vec(any::<u8>(), 10),
            offset in 0u64..16,
            signed in any::<bool>(),
            bits in 1u32..=64,
            incr in any::<bool>(),
            arg in prop_oneof![any::<i64>(), -300i64..300, Just(i64::MAX), Just(i64::MIN)],
            ow in prop_oneof![Just(Overflow::Wrap), Just(Overflow::Sat), Just(Overflow::Fail)],
        ) {
            let bits = if signed { bits } else { bits.min(63) };
            let op = BitfieldOp {
                op: if incr { FieldOp::IncrBy(arg) } else { FieldOp::Set(arg) },
                signed, bits, offset, overflow: ow,
            };
            let mut a = seed.clone();
            let mut b = seed.clone();
            let (got, _) = apply_write(&mut a, &op);
            let want = model_write(&mut b, &op);
            prop_assert_eq!(got, want, "{:?}", op);
            prop_assert_eq!(a, b);
        }
    }

    #[test]
    fn overflow_edges_like_redis() {
        // Values checked against redis-server 7.0.15.
        assert_eq!(
            signed_overflow(i64::MAX, 1, 64, Overflow::Wrap),
            (1, i64::MIN)
        );
        assert_eq!(
            signed_overflow(i64::MAX, 1, 64, Overflow::Sat),
            (1, i64::MAX)
        );
        assert_eq!(
            signed_overflow(i64::MIN, -1, 64, Overflow::Sat),
            (-1, i64::MIN)
        );
        assert_eq!(
            signed_overflow(-1, i64::MIN, 64, Overflow::Wrap),
            (-1, i64::MAX)
        );
        assert_eq!(signed_overflow(100, 100, 8, Overflow::Wrap), (1, -56));
        assert_eq!(unsigned_overflow(u64::MAX, 0, 8, Overflow::Sat), (1, 255));
        assert_eq!(unsigned_overflow(u64::MAX, 0, 8, Overflow::Wrap), (1, 255));
        assert_eq!(unsigned_overflow(3, -4, 8, Overflow::Wrap), (-1, 255));
        assert_eq!(unsigned_overflow(3, -4, 8, Overflow::Sat), (-1, 0));
        assert_eq!(unsigned_overflow(3, -3, 8, Overflow::Sat), (0, 0));
        // A SET far below the minimum counts as overflowing upwards.
        assert_eq!(signed_overflow(i64::MIN, 0, 1, Overflow::Sat), (1, 0));
        assert_eq!(signed_overflow(i64::MIN, 0, 8, Overflow::Sat), (1, 127));
        assert_eq!(signed_overflow(-200, 0, 8, Overflow::Sat), (-1, -128));
    }

    #[test]
    fn offsets_parse_like_redis() {
        let max = 512 * 1024 * 1024;
        assert_eq!(parse_bit_offset(b"0", 0, max), Some(0));
        assert_eq!(parse_bit_offset(b"4294967295", 0, max), Some(4294967295));
        assert_eq!(parse_bit_offset(b"4294967296", 0, max), None);
        assert_eq!(parse_bit_offset(b"-1", 0, max), None);
        assert_eq!(parse_bit_offset(b"#1", 0, max), None);
        assert_eq!(parse_bit_offset(b"#1", 8, max), Some(8));
        assert_eq!(parse_bit_offset(b"#", 8, max), None);
        assert_eq!(parse_bit_offset(b"# 1", 8, max), None);
        // The multiplication wraps as Redis's does.
        assert_eq!(parse_bit_offset(b"#2305843009213693952", 8, max), Some(0));
        assert_eq!(parse_bit_offset(b"#9223372036854775807", 64, max), None);
        assert_eq!(parse_bit_offset(b"80", 0, 10), None);
        assert_eq!(parse_bit_offset(b"79", 0, 10), Some(79));
    }

    fn value(g: &mut Guard, key: &[u8]) -> Option<(Vec<u8>, &'static str)> {
        let k = g.key(key);
        g.peek(0, &k).map(|e| match &e.value {
            Value::Str(s) => (s.to_vec(), s.encoding()),
            _ => panic!("not a string"),
        })
    }

    fn put(g: &mut Guard, key: &[u8], v: &[u8]) {
        let k = g.key(key);
        g.set(0, &k, Value::Str(StrValue::from_bytes(v)), Expiry::Clear);
    }

    #[test]
    fn setbit_getbit_and_notifications() {
        let e = engine();
        e.limits.notify.store(
            class::STRING | class::GENERIC | class::KEYSPACE,
            Ordering::Relaxed,
        );
        with(&e, |g| {
            crate::cx::testing::take_events();
            let k = g.key(b"k");
            assert_eq!(setbit(g, 0, &k, 3, true), Ok(false));
            assert_eq!(value(g, b"k"), Some((vec![0x10], "raw")));
            assert_eq!(setbit(g, 0, &k, 3, true), Ok(true));
            assert_eq!(setbit(g, 0, &k, 3, false), Ok(true));
            // Growing counts as a change even when the bit stays 0.
            assert_eq!(setbit(g, 0, &k, 20, false), Ok(false));
            assert_eq!(value(g, b"k"), Some((vec![0, 0, 0], "raw")));
            let names: Vec<_> = crate::cx::testing::take_events()
                .into_iter()
                .filter_map(|ev| match ev {
                    Event::Notify { event, .. } => Some(event),
                    _ => None,
                })
                .collect();
            assert_eq!(names, ["setbit", "setbit", "setbit"]);
            assert_eq!(getbit(g, 0, &k, 2), Ok(false));
            assert_eq!(getbit(g, 0, &k, 1 << 40), Ok(false));
            let missing = g.key(b"missing");
            assert_eq!(getbit(g, 0, &missing, 0), Ok(false));
            // An int reads as its text and becomes raw on any bit write.
            put(g, b"i", b"12");
            let i = g.key(b"i");
            assert_eq!(getbit(g, 0, &i, 2), Ok(true)); // '1' = 0x31
            assert_eq!(setbit(g, 0, &i, 0, false), Ok(false));
            assert_eq!(value(g, b"i"), Some((b"12".to_vec(), "raw")));
            let h = g.key(b"h");
            g.set(0, &h, Value::Hash(Default::default()), Expiry::Clear);
            assert_eq!(setbit(g, 0, &h, 0, true), Err(Error::WrongType));
            assert_eq!(getbit(g, 0, &h, 0), Err(Error::WrongType));
        });
    }

    #[test]
    fn bitop_stores_raw_or_deletes() {
        let e = engine();
        let (a, b, d, m) = (e.key(b"a"), e.key(b"b"), e.key(b"d"), e.key(b"m"));
        let mut g = e.lock_keys(&crate::cx::testing::cx(), &[a, b, d, m]);
        put(&mut g, b"a", b"\xff\x0f");
        put(&mut g, b"b", b"7");
        assert_eq!(bitop(&mut g, 0, &d, BitOp::And, &[a, b]), Ok(2));
        assert_eq!(value(&mut g, b"d"), Some((vec![0x37, 0], "raw")));
        assert_eq!(bitop(&mut g, 0, &d, BitOp::Or, &[m, b]), Ok(1));
        assert_eq!(value(&mut g, b"d"), Some((vec![0x37], "raw")));
        assert_eq!(bitop(&mut g, 0, &d, BitOp::Not, &[a]), Ok(2));
        assert_eq!(value(&mut g, b"d"), Some((vec![0x00, 0xf0], "raw")));
        assert_eq!(bitop(&mut g, 0, &d, BitOp::Xor, &[m]), Ok(0));
        assert_eq!(value(&mut g, b"d"), None);
        g.set(0, &m, Value::Hash(Default::default()), Expiry::Clear);
        assert_eq!(
            bitop(&mut g, 0, &d, BitOp::Or, &[a, m]),
            Err(Error::WrongType)
        );
    }

    /// Redis bumps `dirty` once per SETBIT or BITFIELD that changed a
    /// value, creating the key included (INFO's
    /// `rdb_changes_since_last_save`, the save points' count).
    #[test]
    fn a_write_that_creates_its_key_counts_one_change() {
        let e = engine();
        let set = |v| BitfieldOp {
            op: FieldOp::Set(v),
            signed: true,
            bits: 5,
            offset: 0,
            overflow: Overflow::Wrap,
        };
        with(&e, |g| {
            let (a, b) = (g.key(b"a"), g.key(b"b"));
            let before = e.changes();
            setbit(g, 0, &a, 0, false).unwrap();
            bitfield(g, 0, &b, &[set(0)], false).unwrap();
            assert_eq!(e.changes(), before + 2, "created");
            setbit(g, 0, &a, 0, false).unwrap();
            bitfield(g, 0, &b, &[set(0)], false).unwrap();
            assert_eq!(e.changes(), before + 2, "unchanged");
            setbit(g, 0, &a, 0, true).unwrap();
            bitfield(g, 0, &b, &[set(1)], false).unwrap();
            assert_eq!(e.changes(), before + 4, "changed");
        });
    }

    #[test]
    fn bitfield_creates_grows_and_fails() {
        let e = engine();
        with(&e, |g| {
            let k = g.key(b"k");
            let op = |op, signed, bits, offset, overflow| BitfieldOp {
                op,
                signed,
                bits,
                offset,
                overflow,
            };
            // Reads of a missing key are zeros and create nothing.
            let r = bitfield(
                g,
                0,
                &k,
                &[op(FieldOp::Get, true, 64, 100, Overflow::Wrap)],
                false,
            );
            assert_eq!(r, Ok(vec![Some(0)]));
            assert_eq!(value(g, b"k"), None);
            // A refused write still creates the (zeroed) key, as Redis does.
            let r = bitfield(
                g,
                0,
                &k,
                &[op(FieldOp::IncrBy(10), false, 2, 0, Overflow::Fail)],
                false,
            );
            assert_eq!(r, Ok(vec![None]));
            assert_eq!(value(g, b"k"), Some((vec![0], "raw")));
            let r = bitfield(
                g,
                0,
                &k,
                &[
                    op(FieldOp::Set(-1), true, 8, 4, Overflow::Wrap),
                    op(FieldOp::Get, false, 16, 0, Overflow::Wrap),
                    op(FieldOp::IncrBy(1), false, 4, 0, Overflow::Sat),
                ],
                false,
            );
            assert_eq!(r, Ok(vec![Some(0), Some(0x0ff0), Some(1)]));
            assert_eq!(
                bitfield(
                    g,
                    0,
                    &k,
                    &[op(FieldOp::Set(1), false, 8, 0, Overflow::Wrap)],
                    true
                ),
                Err(Error::ReadOnlyWrite)
            );
        });
    }

    /// WATCH sees exactly the writes Redis signals: a changed, created or
    /// grown bitmap, not a SETBIT or BITFIELD that leaves it as it was.
    #[test]
    fn writes_signal_watchers() {
        let e = engine();
        with(&e, |g| {
            let k = g.key(b"k");
            let flag = crate::WatchFlag::default();
            g.watch(0, &k, &flag);
            let seen = || flag.swap(false, Ordering::Relaxed);
            setbit(g, 0, &k, 9, true).unwrap();
            assert!(seen(), "created");
            setbit(g, 0, &k, 9, true).unwrap();
            assert!(!seen(), "same bit");
            setbit(g, 0, &k, 9, false).unwrap();
            assert!(seen(), "changed bit");
            let set = |v| BitfieldOp {
                op: FieldOp::Set(v),
                signed: false,
                bits: 8,
                offset: 0,
                overflow: Overflow::Fail,
            };
            bitfield(g, 0, &k, &[set(0)], false).unwrap();
            assert!(!seen(), "same field");
            bitfield(g, 0, &k, &[set(300)], false).unwrap();
            assert!(!seen(), "refused write");
            bitfield(g, 0, &k, &[set(7)], false).unwrap();
            assert!(seen(), "changed field");
            getbit(g, 0, &k, 0).unwrap();
            bitcount(g, 0, &k, || Ok::<_, Error>(CountArgs::Whole)).unwrap();
            assert!(!seen(), "reads");
            let src = g.key(b"src");
            bitop(g, 0, &k, BitOp::Or, &[src]).unwrap();
            assert!(seen(), "BITOP deleting");
        });
    }
}
