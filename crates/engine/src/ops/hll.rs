//! HyperLogLog (Redis 7.0 `hyperloglog.c`): PFADD, PFCOUNT, PFMERGE,
//! PFDEBUG and PFSELFTEST, on string values laid out byte for byte as
//! Redis lays them out, so GET of a HyperLogLog returns Redis's bytes and
//! a value copied from Redis (or to it) keeps working.
//!
//! Layout: a 16-byte header (`HYLL`, the encoding byte, three unused
//! bytes, the cached cardinality as a little-endian u64 whose top bit
//! marks it stale) followed by the registers: 16384 of them, 6 bits each.
//!
//! - Dense: the registers packed LSB first, 12288 bytes.
//! - Sparse: run-length opcodes. ZERO `00xxxxxx` (1-64 zero registers),
//!   XZERO `01xxxxxx yyyyyyyy` (1-16384 zero registers), VAL `1vvvvvxx`
//!   (1-4 registers of value 1-32). A new HyperLogLog is sparse; it turns
//!   dense when a register needs a value above 32 or the string would pass
//!   `hll-sparse-max-bytes` (3000 by default, [`SPARSE_MAX_BYTES`]; the
//!   server passes the configured value to PFADD and PFMERGE).
//!
//! Elements are hashed with MurmurHash64A (seed 0xadc83b19): the low 14
//! bits pick the register, the run of zeros above them plus one is the
//! value. The estimate is Ertl's improved estimator as Redis 7.0 computes
//! it (`hllCount`, `hllTau`, `hllSigma`), in the same floating-point
//! order, so PFCOUNT answers the same number.
//!
//! Sparse updates follow Redis's `hllSparseSet` step by step (opcode split,
//! in-place insertion, the merge of at most five neighbouring opcodes,
//! promotion), since any shortcut would produce other, equally valid but
//! different, bytes. Corrupted values are handled without panicking: where
//! Redis would read the string's NUL terminator, the byte past the end
//! reads as 0 here too.
use crate::events::class;
use crate::keyspace::{Expiry, Guard, Key};
use crate::ops::bitmap::unshare;
use crate::ops::{as_str, as_str_mut};
use crate::value::{StrValue, Value};
use crate::{Error, Result};

/// Header bytes before the registers.
pub const HDR: usize = 16;
/// Index bits of the hash.
const P: u32 = 14;
/// Hash bits left for the zero run.
const Q: usize = 64 - P as usize;
/// Number of registers.
pub const REGISTERS: usize = 1 << P;
/// Size of a dense HyperLogLog, header included.
pub const DENSE_SIZE: usize = HDR + (REGISTERS * 6).div_ceil(8);
/// `hll-sparse-max-bytes`' default: the size past which a sparse
/// HyperLogLog turns dense.
pub const SPARSE_MAX_BYTES: usize = 3000;

const DENSE: u8 = 0;
const SPARSE: u8 = 1;
const VAL_MAX_VALUE: u8 = 32;
const VAL_MAX_LEN: usize = 4;
const ZERO_MAX_LEN: usize = 64;
const XZERO_MAX_LEN: usize = 16384;
/// 0.5 / ln(2), the estimator's constant for m → ∞.
const ALPHA_INF: f64 = 0.721_347_520_444_481_7;

/// Sparse data that does not describe exactly 16384 registers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Corrupt;

// ---------------------------------------------------------------------------
// Hashing.

/// MurmurHash2, 64-bit version (Redis's endian-neutral variant: words are
/// read little-endian).
pub fn murmur64a(key: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = seed ^ (key.len() as u64).wrapping_mul(M);
    let mut words = key.chunks_exact(8);
    for w in &mut words {
        let mut k = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = words.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate() {
            h ^= (b as u64) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// The register an element maps to and the value it offers it
/// (`hllPatLen`): 1 + the number of zeros above the index bits, at most
/// Q + 1.
pub fn pat_len(ele: &[u8]) -> (usize, u8) {
    let hash = murmur64a(ele, 0xadc8_3b19);
    let index = (hash & (REGISTERS as u64 - 1)) as usize;
    let rest = (hash >> P) | (1u64 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

// ---------------------------------------------------------------------------
// Dense registers.

/// Register `i` of a dense register array (the byte after the last one
/// reads as 0, like the NUL after Redis's sds).
pub fn dense_get(regs: &[u8], i: usize) -> u8 {
    let byte = i * 6 / 8;
    let fb = (i * 6) & 7;
    let b0 = regs.get(byte).copied().unwrap_or(0) as u32;
    let b1 = regs.get(byte + 1).copied().unwrap_or(0) as u32;
    (((b0 >> fb) | (b1 << (8 - fb))) & 63) as u8
}

/// Sets register `i` of a dense register array to `v` (< 64).
pub fn dense_set(regs: &mut [u8], i: usize, v: u8) {
    let byte = i * 6 / 8;
    let fb = (i * 6) & 7;
    let v = v as u32 & 63;
    if let Some(b) = regs.get_mut(byte) {
        *b = ((*b as u32 & !(63 << fb)) | (v << fb)) as u8;
    }
    if let Some(b) = regs.get_mut(byte + 1) {
        *b = ((*b as u32 & !(63 >> (8 - fb))) | (v >> (8 - fb))) as u8;
    }
}

/// `hllDenseSet`: raises register `i` to `count`; true if it changed.
fn dense_raise(regs: &mut [u8], i: usize, count: u8) -> bool {
    if count > dense_get(regs, i) {
        dense_set(regs, i, count);
        true
    } else {
        false
    }
}

// ---------------------------------------------------------------------------
// Sparse opcodes.

/// One sparse opcode: its register value (0 for the zero runs), how many
/// registers it covers, and its size in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Opcode {
    value: u8,
    run: usize,
    size: usize,
}

fn is_xzero(b: u8) -> bool {
    b & 0xc0 == 0x40
}

fn is_zero(b: u8) -> bool {
    b & 0xc0 == 0
}

fn is_val(b: u8) -> bool {
    b & 0x80 != 0
}

/// The opcode at `p`; a byte past the end reads as 0.
fn opcode_at(s: &[u8], p: usize) -> Opcode {
    let b = s[p];
    if is_zero(b) {
        Opcode {
            value: 0,
            run: (b & 0x3f) as usize + 1,
            size: 1,
        }
    } else if is_xzero(b) {
        let lo = s.get(p + 1).copied().unwrap_or(0) as usize;
        Opcode {
            value: 0,
            run: ((((b & 0x3f) as usize) << 8) | lo) + 1,
            size: 2,
        }
    } else {
        Opcode {
            value: ((b >> 2) & 0x1f) + 1,
            run: (b & 3) as usize + 1,
            size: 1,
        }
    }
}

fn val_op(value: u8, run: usize) -> u8 {
    ((value - 1) << 2) | (run as u8 - 1) | 0x80
}

/// Appends a ZERO or XZERO opcode for `run` zero registers.
fn push_zeros(seq: &mut Vec<u8>, run: usize) {
    if run > ZERO_MAX_LEN {
        let l = run - 1;
        seq.push((l >> 8) as u8 | 0x40);
        seq.push((l & 0xff) as u8);
    } else {
        seq.push(run as u8 - 1);
    }
}

/// A new, empty HyperLogLog: sparse, one XZERO per 16384 registers
/// (`createHLLObject`).
pub fn new_sparse() -> Vec<u8> {
    let mut s = Vec::with_capacity(HDR + 2);
    s.extend_from_slice(b"HYLL");
    s.push(SPARSE);
    s.resize(HDR, 0);
    let mut left = REGISTERS;
    while left > 0 {
        let run = left.min(XZERO_MAX_LEN);
        let l = run - 1;
        s.push((l >> 8) as u8 | 0x40);
        s.push((l & 0xff) as u8);
        left -= run;
    }
    s
}

/// `hllSparseToDense`: rewrites a sparse HyperLogLog as dense, keeping the
/// header (magic, unused bytes and cached cardinality). A dense one is
/// left alone. Fails, changing nothing, when the opcodes do not cover
/// exactly 16384 registers.
pub fn sparse_to_dense(hll: &mut Vec<u8>) -> std::result::Result<(), Corrupt> {
    if hll[4] == DENSE {
        return Ok(());
    }
    let mut dense = vec![0u8; DENSE_SIZE];
    dense[..HDR].copy_from_slice(&hll[..HDR]);
    dense[4] = DENSE;
    let mut idx = 0usize;
    let mut p = HDR;
    while p < hll.len() {
        let op = opcode_at(hll, p);
        if op.value > 0 {
            if idx + op.run > REGISTERS {
                break;
            }
            for i in idx..idx + op.run {
                dense_set(&mut dense[HDR..], i, op.value);
            }
        }
        idx += op.run;
        p += op.size;
    }
    if idx != REGISTERS {
        return Err(Corrupt);
    }
    *hll = dense;
    Ok(())
}

/// Marks the cached cardinality stale (`HLL_INVALIDATE_CACHE`).
fn invalidate(hll: &mut [u8]) {
    hll[15] |= 0x80;
}

/// `hllSparseSet`: raises register `index` of a sparse HyperLogLog to
/// `count`. Ok(false) if it already held as much; Ok(true) if it was
/// raised, in place or by promoting the value to dense (a value above 32,
/// or a string that would grow past `max_bytes`). Corrupt when the
/// opcodes do not reach the register, or promotion finds them invalid.
pub fn sparse_set(
    hll: &mut Vec<u8>,
    index: usize,
    count: u8,
    max_bytes: usize,
) -> std::result::Result<bool, Corrupt> {
    if count > VAL_MAX_VALUE {
        return promote(hll, index, count);
    }
    // Step 1: find the opcode covering the register.
    let end = hll.len();
    let (mut p, mut first, mut prev, mut span) = (HDR, 0usize, None, 0usize);
    let mut op = None;
    while p < end {
        let o = opcode_at(hll, p);
        span = o.run;
        if index < first + span {
            op = Some(o);
            break;
        }
        prev = Some(p);
        p += o.size;
        first += span;
    }
    let Some(op) = op else {
        return Err(Corrupt);
    };
    let next = Some(p + op.size).filter(|&n| n < end);
    let cur = hll[p];

    // Step 2: the cases that need no split.
    if is_val(cur) {
        if op.value >= count {
            return Ok(false);
        }
        if op.run == 1 {
            hll[p] = val_op(count, 1);
            return Ok(updated(hll, prev));
        }
    }
    if is_zero(cur) && op.run == 1 {
        hll[p] = val_op(count, 1);
        return Ok(updated(hll, prev));
    }

    // The general case: split the opcode around the register, into at
    // most XZERO-VAL-XZERO (5 bytes).
    let last = first + span - 1;
    let mut seq = Vec::with_capacity(5);
    if op.value == 0 {
        if index != first {
            push_zeros(&mut seq, index - first);
        }
        seq.push(val_op(count, 1));
        if index != last {
            push_zeros(&mut seq, last - index);
        }
    } else {
        if index != first {
            seq.push(val_op(op.value, index - first));
        }
        seq.push(val_op(count, 1));
        if index != last {
            seq.push(val_op(op.value, last - index));
        }
    }

    // Step 3: put the sequence in the opcode's place, unless that makes
    // the string too long for the sparse representation.
    let oldlen = if is_xzero(cur) { 2 } else { 1 };
    let delta = seq.len() as isize - oldlen as isize;
    if delta > 0 && end + delta as usize > max_bytes {
        return promote(hll, index, count);
    }
    let new_len = (end as isize + delta) as usize;
    let tail = match next {
        Some(n) => n,
        // The opcode ends the string (a corrupted XZERO may even claim a
        // byte past it).
        None => end,
    };
    hll.splice(p..tail.max(p), seq);
    hll.resize(new_len, 0);
    Ok(updated(hll, prev))
}

/// Step 4 of `hllSparseSet`: merges adjacent VAL opcodes of equal value
/// (while their run fits), scanning at most five opcodes from the one
/// before the change; then marks the cached cardinality stale.
fn updated(hll: &mut Vec<u8>, prev: Option<usize>) -> bool {
    let mut p = prev.unwrap_or(HDR);
    let mut scan = 5;
    while p < hll.len() && scan > 0 {
        scan -= 1;
        let b = hll[p];
        if is_xzero(b) {
            p += 2;
            continue;
        }
        if is_zero(b) {
            p += 1;
            continue;
        }
        if p + 1 < hll.len() && is_val(hll[p + 1]) {
            let (a, c) = (opcode_at(hll, p), opcode_at(hll, p + 1));
            if a.value == c.value && a.run + c.run <= VAL_MAX_LEN {
                hll[p + 1] = val_op(a.value, a.run + c.run);
                hll.remove(p);
                continue;
            }
        }
        p += 1;
    }
    invalidate(hll);
    true
}

/// The promotion path of `hllSparseSet`: convert to dense, then set the
/// register there.
fn promote(hll: &mut Vec<u8>, index: usize, count: u8) -> std::result::Result<bool, Corrupt> {
    sparse_to_dense(hll)?;
    dense_raise(&mut hll[HDR..], index, count);
    Ok(true)
}

/// `hllAdd`: adds one element; true if a register changed.
pub fn add(hll: &mut Vec<u8>, ele: &[u8], max_bytes: usize) -> std::result::Result<bool, Corrupt> {
    let (index, count) = pat_len(ele);
    match hll[4] {
        DENSE => Ok(dense_raise(&mut hll[HDR..], index, count)),
        SPARSE => sparse_set(hll, index, count, max_bytes),
        _ => Err(Corrupt),
    }
}

/// `isHLLObjectOrReply`: a string of at least a header, with the magic, a
/// known encoding, and for dense the exact size. An `int` never is.
pub fn validate(v: &StrValue) -> Result<&[u8]> {
    let Some(data) = v.stored_bytes() else {
        return Err(Error::HllInvalid);
    };
    if data.len() < HDR
        || &data[..4] != b"HYLL"
        || data[4] > SPARSE
        || (data[4] == DENSE && data.len() != DENSE_SIZE)
    {
        return Err(Error::HllInvalid);
    }
    Ok(data)
}

// ---------------------------------------------------------------------------
// Counting.

/// Register histogram: how many registers hold each value.
type Histogram = [u64; 64];

fn dense_histogram(regs: &[u8], h: &mut Histogram) {
    for c in regs[..REGISTERS * 6 / 8].chunks_exact(3) {
        let (b0, b1, b2) = (c[0] as usize, c[1] as usize, c[2] as usize);
        h[b0 & 63] += 1;
        h[(b0 >> 6 | b1 << 2) & 63] += 1;
        h[(b1 >> 4 | b2 << 4) & 63] += 1;
        h[b2 >> 2] += 1;
    }
}

fn sparse_histogram(hll: &[u8], h: &mut Histogram) -> std::result::Result<(), Corrupt> {
    let mut idx = 0usize;
    let mut p = HDR;
    while p < hll.len() {
        let op = opcode_at(hll, p);
        idx += op.run;
        h[op.value as usize] += op.run as u64;
        p += op.size;
    }
    if idx == REGISTERS {
        Ok(())
    } else {
        Err(Corrupt)
    }
}

/// Ertl's sigma function (`hllSigma`).
fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let prev = z;
        z += x * y;
        y += y;
        if prev == z {
            return z;
        }
    }
}

/// Ertl's tau function (`hllTau`). Redis's `pow(1 - x, 2)` is compiled to
/// a multiplication, so this multiplies too.
fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let prev = z;
        y *= 0.5;
        let d = 1.0 - x;
        z -= d * d * y;
        if prev == z {
            return z / 3.0;
        }
    }
}

/// The estimate from a register histogram, in Redis's operation order.
fn estimate(h: &Histogram) -> u64 {
    let m = REGISTERS as f64;
    let mut z = m * tau((m - h[Q + 1] as f64) / m);
    for j in (1..=Q).rev() {
        z += h[j] as f64;
        z *= 0.5;
    }
    z += m * sigma(h[0] as f64 / m);
    (ALPHA_INF * m * m / z).round() as u64
}

/// `hllCount` of a validated HyperLogLog.
pub fn count(hll: &[u8]) -> std::result::Result<u64, Corrupt> {
    let mut h = [0u64; 64];
    if hll[4] == DENSE {
        dense_histogram(&hll[HDR..], &mut h);
    } else {
        sparse_histogram(hll, &mut h)?;
    }
    Ok(estimate(&h))
}

/// The estimate for registers held one per byte (PFCOUNT of several keys).
pub fn count_raw(regs: &[u8; REGISTERS]) -> u64 {
    let mut h = [0u64; 64];
    for &r in regs.iter() {
        h[r as usize & 63] += 1;
    }
    estimate(&h)
}

/// `hllMerge`: raises each of `max` to the matching register of a
/// validated HyperLogLog.
pub fn merge_into(max: &mut [u8; REGISTERS], hll: &[u8]) -> std::result::Result<(), Corrupt> {
    if hll[4] == DENSE {
        for (i, m) in max.iter_mut().enumerate() {
            *m = (*m).max(dense_get(&hll[HDR..], i));
        }
        return Ok(());
    }
    let mut i = 0usize;
    let mut p = HDR;
    while p < hll.len() {
        let op = opcode_at(hll, p);
        if op.value > 0 {
            if i + op.run > REGISTERS {
                break;
            }
            for m in &mut max[i..i + op.run] {
                *m = (*m).max(op.value);
            }
        }
        i += op.run;
        p += op.size;
    }
    if i == REGISTERS {
        Ok(())
    } else {
        Err(Corrupt)
    }
}

/// The cached cardinality, if not marked stale.
fn cached(hll: &[u8]) -> Option<u64> {
    (hll[15] & 0x80 == 0).then(|| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&hll[8..16]);
        u64::from_le_bytes(b)
    })
}

// ---------------------------------------------------------------------------
// Keyspace operations.

/// The HyperLogLog at an entry opened for writing: WRONGTYPE for another
/// type, Redis's HyperLogLog WRONGTYPE for a string that is not one, else
/// the bytes as a `raw` string (`dbUnshareStringValue`).
fn open_hll(v: &mut Value) -> Result<&mut Vec<u8>> {
    let s = as_str_mut(v)?;
    validate(s)?;
    Ok(unshare(s))
}

/// PFADD key [element ...] → true if the key was created or a register
/// changed (then `pfadd` is notified). A corrupted sparse value fails
/// with INVALIDOBJ, keeping what the elements before added (as Redis).
/// `sparse_max_bytes` is `hll-sparse-max-bytes`.
pub fn pfadd<'a>(
    g: &mut Guard,
    db: usize,
    k: &Key,
    sparse_max_bytes: usize,
    elements: impl IntoIterator<Item = &'a [u8]>,
) -> Result<bool> {
    let Some(e) = g.write(db, k) else {
        let mut hll = new_sparse();
        for ele in elements {
            add(&mut hll, ele, sparse_max_bytes).map_err(|_| Error::HllCorrupt)?;
        }
        invalidate(&mut hll);
        g.set(db, k, Value::Str(StrValue::edited(hll)), Expiry::Clear);
        g.notify(class::STRING, "pfadd", db, k);
        return Ok(true);
    };
    let hll = open_hll(&mut e.value)?;
    let mut updated = false;
    for ele in elements {
        updated |= add(hll, ele, sparse_max_bytes).map_err(|_| Error::HllCorrupt)?;
    }
    if updated {
        invalidate(hll);
        g.modified(db, k);
        g.notify(class::STRING, "pfadd", db, k);
    }
    Ok(updated)
}

/// PFCOUNT key [key ...] → the estimated cardinality. One key: the cached
/// value, or a fresh count that is then cached in the value (a change
/// WATCH sees, though no notification). Several keys: the count of their
/// union, computed aside; nothing is written. Missing keys are empty.
pub fn pfcount(g: &mut Guard, db: usize, keys: &[Key]) -> Result<u64> {
    if let [k] = keys {
        let Some(e) = g.read(db, k) else {
            return Ok(0);
        };
        let hll = open_hll(&mut e.value)?;
        if let Some(card) = cached(hll) {
            return Ok(card);
        }
        let card = count(hll).map_err(|_| Error::HllCorrupt)?;
        hll[8..16].copy_from_slice(&card.to_le_bytes());
        g.modified(db, k);
        return Ok(card);
    }
    let mut max = [0u8; REGISTERS];
    for k in keys {
        if let Some(e) = g.read(db, k) {
            let hll = validate(as_str(&e.value)?)?;
            merge_into(&mut max, hll).map_err(|_| Error::HllCorrupt)?;
        }
    }
    Ok(count_raw(&max))
}

/// PFMERGE dest [src ...]: `dest` gets the register-wise maximum of
/// itself and every source (missing ones are empty); it turns dense if
/// any of them is dense, or when it grows past `sparse_max_bytes`
/// (`hll-sparse-max-bytes`). Notifies `pfadd`. The caller locked every key.
pub fn pfmerge(
    g: &mut Guard,
    db: usize,
    dest: &Key,
    sparse_max_bytes: usize,
    srcs: &[Key],
) -> Result<()> {
    let mut max = [0u8; REGISTERS];
    let mut use_dense = false;
    for k in std::iter::once(dest).chain(srcs) {
        if let Some(e) = g.read(db, k) {
            let hll = validate(as_str(&e.value)?)?;
            use_dense |= hll[4] == DENSE;
            merge_into(&mut max, hll).map_err(|_| Error::HllCorrupt)?;
        }
    }
    let fill = |hll: &mut Vec<u8>| -> Result<()> {
        if use_dense {
            sparse_to_dense(hll).map_err(|_| Error::HllCorrupt)?;
        }
        for (j, &m) in max.iter().enumerate() {
            if m == 0 {
                continue;
            }
            if hll[4] == DENSE {
                dense_raise(&mut hll[HDR..], j, m);
            } else {
                // Valid sparse data (checked by the merge above).
                let _ = sparse_set(hll, j, m, sparse_max_bytes);
            }
        }
        invalidate(hll);
        Ok(())
    };
    match g.write(db, dest) {
        Some(e) => fill(unshare(as_str_mut(&mut e.value)?))?,
        None => {
            let mut hll = new_sparse();
            fill(&mut hll)?;
            g.set(db, dest, Value::Str(StrValue::edited(hll)), Expiry::Clear);
        }
    }
    g.modified(db, dest);
    g.notify(class::STRING, "pfadd", db, dest);
    Ok(())
}

/// A PFDEBUG subcommand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PfDebug {
    GetReg,
    Decode,
    Encoding,
    ToDense,
}

/// What a PFDEBUG subcommand answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PfDebugReply {
    /// GETREG: every register (the value is now dense).
    Registers(Vec<u8>),
    /// DECODE: the sparse opcodes as text (`z:N`, `Z:N`, `v:V,N`).
    Decoded(String),
    /// ENCODING: `dense` or `sparse`.
    Encoding(&'static str),
    /// TODENSE: whether it converted.
    Converted(bool),
    /// The subcommand was not known: Redis reports that only after the
    /// key checks.
    Unknown,
}

/// PFDEBUG sub key (`pfdebugCommand`): the key must exist and hold a
/// HyperLogLog, which becomes `raw`; `sub` None is an unknown subcommand.
/// GETREG and TODENSE convert a sparse value to dense, with no
/// notification and no signal, as in Redis.
pub fn pfdebug(g: &mut Guard, db: usize, k: &Key, sub: Option<PfDebug>) -> Result<PfDebugReply> {
    let Some(e) = g.write(db, k) else {
        return Err(Error::NoSuchKey);
    };
    let hll = open_hll(&mut e.value)?;
    let Some(sub) = sub else {
        return Ok(PfDebugReply::Unknown);
    };
    Ok(match sub {
        PfDebug::GetReg => {
            sparse_to_dense(hll).map_err(|_| Error::HllCorrupt)?;
            PfDebugReply::Registers((0..REGISTERS).map(|i| dense_get(&hll[HDR..], i)).collect())
        }
        PfDebug::Decode => {
            if hll[4] != SPARSE {
                return Err(Error::HllNotSparse);
            }
            PfDebugReply::Decoded(decode(hll))
        }
        PfDebug::Encoding => {
            PfDebugReply::Encoding(if hll[4] == DENSE { "dense" } else { "sparse" })
        }
        PfDebug::ToDense => {
            let sparse = hll[4] == SPARSE;
            if sparse {
                sparse_to_dense(hll).map_err(|_| Error::HllCorrupt)?;
            }
            PfDebugReply::Converted(sparse)
        }
    })
}

/// PFDEBUG DECODE's text of a sparse HyperLogLog's opcodes.
fn decode(hll: &[u8]) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let mut p = HDR;
    while p < hll.len() {
        let op = opcode_at(hll, p);
        if !out.is_empty() {
            out.push(' ');
        }
        let _ = match op {
            Opcode {
                value: 0,
                size: 1,
                run,
            } => write!(out, "z:{run}"),
            Opcode { value: 0, run, .. } => write!(out, "Z:{run}"),
            Opcode { value, run, .. } => write!(out, "v:{value},{run}"),
        };
        p += op.size;
    }
    out
}

/// Why PFSELFTEST failed: a debugging aid, so the front end shows the
/// details (Redis: a `TESTFAILED` error with the same figures).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SelfTestFailure {
    /// A dense register read back other than written.
    Register {
        index: usize,
        expected: u8,
        found: u8,
    },
    /// Adding to the sparse HyperLogLog found its data corrupt.
    CorruptSparse,
    /// The sparse HyperLogLog turned dense while still small.
    SparseNotUsed,
    /// The dense and sparse counts differ.
    Disagree,
    /// The estimate at `card` elements is off by more than six standard
    /// errors.
    TooBigError { card: u64, abserr: u64 },
}

/// PFSELFTEST (`pfselftestCommand`): register access on random values,
/// then ten million distinct elements added to a dense and a sparse
/// HyperLogLog, checking at each power of ten that the sparse one is still
/// sparse while small, that both agree, and that the error stays within
/// six standard errors.
pub fn selftest() -> std::result::Result<(), SelfTestFailure> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::SmallRng::from_rng(&mut rand::rng());
    let mut dense = vec![0u8; DENSE_SIZE];
    dense[..4].copy_from_slice(b"HYLL");
    let mut bytes = vec![0u8; REGISTERS];
    for _ in 0..1000 {
        for (i, b) in bytes.iter_mut().enumerate() {
            let r = rng.random::<u8>() & 63;
            *b = r;
            dense_set(&mut dense[HDR..], i, r);
        }
        for (i, &b) in bytes.iter().enumerate() {
            let v = dense_get(&dense[HDR..], i);
            if v != b {
                return Err(SelfTestFailure::Register {
                    index: i,
                    expected: b,
                    found: v,
                });
            }
        }
    }

    dense[HDR..].fill(0);
    let mut sparse = new_sparse();
    let relerr = 1.04 / (REGISTERS as f64).sqrt();
    let seed: u64 = rng.random();
    let mut checkpoint: u64 = 1;
    for j in 1..=10_000_000u64 {
        let ele = (j ^ seed).to_le_bytes();
        let (index, cnt) = pat_len(&ele);
        dense_raise(&mut dense[HDR..], index, cnt);
        add(&mut sparse, &ele, SPARSE_MAX_BYTES).map_err(|_| SelfTestFailure::CorruptSparse)?;
        if j != checkpoint {
            continue;
        }
        if (j as usize) < SPARSE_MAX_BYTES / 2 && sparse[4] != SPARSE {
            return Err(SelfTestFailure::SparseNotUsed);
        }
        let d = count(&dense).unwrap_or(0);
        if count(&sparse) != Ok(d) {
            return Err(SelfTestFailure::Disagree);
        }
        let abserr = (checkpoint as i64 - d as i64).unsigned_abs();
        let maxerr = if j == 10 {
            1
        } else {
            (relerr * 6.0 * checkpoint as f64).ceil() as u64
        };
        if abserr > maxerr {
            return Err(SelfTestFailure::TooBigError {
                card: checkpoint,
                abserr,
            });
        }
        checkpoint *= 10;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::Event;
    use crate::ops::test_support::{engine, with};
    use proptest::prelude::*;
    use std::sync::atomic::Ordering;

    /// Every register of a HyperLogLog, by walking the sparse opcodes or
    /// reading the dense ones.
    fn registers(hll: &[u8]) -> Vec<u8> {
        if hll[4] == DENSE {
            return (0..REGISTERS).map(|i| dense_get(&hll[HDR..], i)).collect();
        }
        let mut out = Vec::new();
        let mut p = HDR;
        while p < hll.len() {
            let op = opcode_at(hll, p);
            out.extend(std::iter::repeat_n(op.value, op.run));
            p += op.size;
        }
        out
    }

    #[test]
    fn murmur_and_pattern_match_redis() {
        // Registers Redis 7.0.15 reports (PFDEBUG DECODE) for PFADD h a b c:
        // Z:8436 v:1,1 Z:4274 v:2,1 Z:3068 v:1,1 Z:603.
        let mut got: Vec<_> = [&b"a"[..], b"b", b"c"].iter().map(|e| pat_len(e)).collect();
        got.sort();
        assert_eq!(got, vec![(8436, 1), (12711, 2), (15780, 1)]);
        let mut hll = new_sparse();
        for e in [&b"a"[..], b"b", b"c"] {
            assert_eq!(add(&mut hll, e, SPARSE_MAX_BYTES), Ok(true));
        }
        assert_eq!(decode(&hll), "Z:8436 v:1,1 Z:4274 v:2,1 Z:3068 v:1,1 Z:603");
        assert_eq!(count(&hll), Ok(3));
    }

    #[test]
    fn empty_and_header() {
        let hll = new_sparse();
        assert_eq!(hll, b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\0\x7f\xff");
        assert_eq!(decode(&hll), "Z:16384");
        assert_eq!(count(&hll), Ok(0));
        assert_eq!(DENSE_SIZE, 12304);
        // Corrupted sparse data.
        assert_eq!(count(&hll[..HDR]), Err(Corrupt));
        let mut short = hll.clone();
        short[HDR + 1] = 0xfe;
        assert_eq!(count(&short), Err(Corrupt));
        assert_eq!(sparse_to_dense(&mut short.clone()), Err(Corrupt));
        // The register past the covered ones cannot be set.
        assert_eq!(sparse_set(&mut short, 16383, 3, 3000), Err(Corrupt));
        // A truncated XZERO reads a 0 past the end without panicking.
        let mut cut = hll.clone();
        cut.pop();
        assert_eq!(decode(&cut), "Z:16129");
        assert_eq!(count(&cut), Err(Corrupt));
        let _ = sparse_set(&mut cut, 5, 3, 3000);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn dense_registers_round_trip(vals in proptest::collection::vec(0u8..64, REGISTERS)) {
            let mut regs = vec![0u8; DENSE_SIZE - HDR];
            for (i, &v) in vals.iter().enumerate() {
                dense_set(&mut regs, i, v);
            }
            for (i, &v) in vals.iter().enumerate() {
                prop_assert_eq!(dense_get(&regs, i), v);
            }
        }

        /// Random register updates applied to a sparse HyperLogLog (with
        /// its promotions) and to a plain array agree register by
        /// register; the sparse bytes are always well formed and minimal
        /// where Redis merges; converting to dense keeps every register.
        #[test]
        fn sparse_matches_model(
            sets in proptest::collection::vec((0usize..REGISTERS, 1u8..40), 1..400),
            clustered in any::<bool>(),
            max_bytes in prop_oneof![Just(3000usize), 20usize..400],
        ) {
            let mut hll = new_sparse();
            let mut model = vec![0u8; REGISTERS];
            for (i, c) in sets {
                let i = if clustered { i % 97 } else { i };
                let c = if clustered { c % 34 + 1 } else { c };
                let changed = sparse_or_dense_set(&mut hll, i, c, max_bytes);
                prop_assert_eq!(changed, c > model[i]);
                model[i] = model[i].max(c);
                prop_assert_eq!(&registers(&hll), &model);
                if hll[4] == SPARSE {
                    prop_assert!(hll.len() <= max_bytes.max(18));
                }
            }
            let mut h = [0u64; 64];
            for &r in &model { h[r as usize] += 1; }
            prop_assert_eq!(count(&hll), Ok(estimate(&h)));
            let mut raw = [0u8; REGISTERS];
            raw.copy_from_slice(&model);
            prop_assert_eq!(count(&hll), Ok(count_raw(&raw)));
            let mut max = [0u8; REGISTERS];
            merge_into(&mut max, &hll).unwrap();
            prop_assert_eq!(&max[..], &model[..]);
            let card = hll[8..16].to_vec();
            sparse_to_dense(&mut hll).unwrap();
            prop_assert_eq!(hll.len(), DENSE_SIZE);
            prop_assert_eq!(&hll[8..16], &card[..]);
            prop_assert_eq!(registers(&hll), model);
        }
    }

    fn sparse_or_dense_set(hll: &mut Vec<u8>, i: usize, c: u8, max_bytes: usize) -> bool {
        if hll[4] == DENSE {
            dense_raise(&mut hll[HDR..], i, c)
        } else {
            sparse_set(hll, i, c, max_bytes).unwrap()
        }
    }

    #[test]
    fn sparse_opcodes_split_and_merge() {
        let mut hll = new_sparse();
        assert_eq!(sparse_set(&mut hll, 1000, 2, 3000), Ok(true));
        assert_eq!(decode(&hll), "Z:1000 v:2,1 Z:15383");
        assert_eq!(sparse_set(&mut hll, 1001, 2, 3000), Ok(true));
        assert_eq!(decode(&hll), "Z:1000 v:2,2 Z:15382");
        assert_eq!(sparse_set(&mut hll, 1001, 1, 3000), Ok(false));
        assert_eq!(sparse_set(&mut hll, 1003, 2, 3000), Ok(true));
        assert_eq!(decode(&hll), "Z:1000 v:2,2 z:1 v:2,1 Z:15380");
        assert_eq!(sparse_set(&mut hll, 1002, 2, 3000), Ok(true));
        assert_eq!(decode(&hll), "Z:1000 v:2,4 Z:15380");
        assert_eq!(sparse_set(&mut hll, 1001, 5, 3000), Ok(true));
        assert_eq!(decode(&hll), "Z:1000 v:2,1 v:5,1 v:2,2 Z:15380");
        assert_eq!(sparse_set(&mut hll, 0, 1, 3000), Ok(true));
        assert_eq!(decode(&hll), "v:1,1 Z:999 v:2,1 v:5,1 v:2,2 Z:15380");
        // Above 32 promotes to dense.
        assert_eq!(sparse_set(&mut hll, 7, 33, 3000), Ok(true));
        assert_eq!(hll.len(), DENSE_SIZE);
        assert_eq!(dense_get(&hll[HDR..], 7), 33);
        assert_eq!(dense_get(&hll[HDR..], 1001), 5);
        // So does growing past the limit.
        let mut hll = new_sparse();
        assert_eq!(sparse_set(&mut hll, 100, 1, 20), Ok(true));
        assert_eq!(hll.len(), DENSE_SIZE);
    }

    fn get(g: &mut Guard, key: &[u8]) -> Option<(Vec<u8>, &'static str)> {
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

    fn notes() -> Vec<&'static str> {
        crate::cx::testing::take_events()
            .into_iter()
            .filter_map(|ev| match ev {
                Event::Notify { event, .. } => Some(event),
                _ => None,
            })
            .collect()
    }

    /// `hll-sparse-max-bytes` as given by the caller: a sparse value that
    /// would grow past it turns dense, in PFADD and in PFMERGE.
    #[test]
    fn sparse_max_bytes_is_the_callers() {
        let e = engine();
        with(&e, |g| {
            let enc = |g: &mut Guard, name: &[u8]| {
                let k = g.key(name);
                pfdebug(g, 0, &k, Some(PfDebug::Encoding))
            };
            let elements: Vec<Vec<u8>> = (0..40).map(|i| format!("e{i}").into_bytes()).collect();
            let (a, b, m) = (g.key(b"a"), g.key(b"b"), g.key(b"m"));
            pfadd(
                g,
                0,
                &a,
                SPARSE_MAX_BYTES,
                elements.iter().map(Vec::as_slice),
            )
            .unwrap();
            assert_eq!(enc(g, b"a"), Ok(PfDebugReply::Encoding("sparse")));
            pfadd(g, 0, &b, 40, elements.iter().map(Vec::as_slice)).unwrap();
            assert_eq!(enc(g, b"b"), Ok(PfDebugReply::Encoding("dense")));
            pfmerge(g, 0, &m, 40, &[a]).unwrap();
            assert_eq!(enc(g, b"m"), Ok(PfDebugReply::Encoding("dense")));
        });
    }

    #[test]
    fn pfadd_pfcount_cache_and_events() {
        let e = engine();
        e.limits
            .notify
            .store(class::STRING | class::KEYSPACE, Ordering::Relaxed);
        with(&e, |g| {
            crate::cx::testing::take_events();
            let k = g.key(b"h");
            assert_eq!(
                pfadd(g, 0, &k, SPARSE_MAX_BYTES, [&b"a"[..], b"b", b"c"]),
                Ok(true)
            );
            assert_eq!(pfadd(g, 0, &k, SPARSE_MAX_BYTES, [&b"a"[..]]), Ok(false));
            assert_eq!(notes(), ["pfadd"]);
            let (v, enc) = get(g, b"h").unwrap();
            assert_eq!(enc, "raw");
            assert_eq!(v[15] & 0x80, 0x80);
            assert_eq!(pfcount(g, 0, &[k]), Ok(3));
            let (v, _) = get(g, b"h").unwrap();
            assert_eq!(&v[8..16], &3u64.to_le_bytes());
            // The cache is used as is: a forged value shows.
            let mut forged = v.clone();
            forged[8] = 42;
            put(g, b"h", &forged);
            assert_eq!(pfcount(g, 0, &[k]), Ok(42));
            // A new empty key from PFADD with no elements.
            let n = g.key(b"n");
            assert_eq!(pfadd(g, 0, &n, SPARSE_MAX_BYTES, []), Ok(true));
            assert_eq!(pfadd(g, 0, &n, SPARSE_MAX_BYTES, []), Ok(false));
            assert_eq!(pfcount(g, 0, &[n]), Ok(0));
            let missing = g.key(b"missing");
            assert_eq!(pfcount(g, 0, &[missing]), Ok(0));
            assert_eq!(pfcount(g, 0, &[missing, k, n]), Ok(3));
            // Not a HyperLogLog.
            put(g, b"s", b"HYLL");
            let s = g.key(b"s");
            assert_eq!(
                pfadd(g, 0, &s, SPARSE_MAX_BYTES, [&b"x"[..]]),
                Err(Error::HllInvalid)
            );
            assert_eq!(pfcount(g, 0, &[s]), Err(Error::HllInvalid));
            put(g, b"i", b"12345678901234567");
            let i = g.key(b"i");
            assert_eq!(pfcount(g, 0, &[i, k]), Err(Error::HllInvalid));
            let hk = g.key(b"hash");
            g.set(0, &hk, Value::Hash(Box::default()), Expiry::Clear);
            assert_eq!(
                pfadd(g, 0, &hk, SPARSE_MAX_BYTES, []),
                Err(Error::WrongType)
            );
            // Corrupted: a sparse header with no opcodes.
            put(g, b"c", b"HYLL\x01\0\0\0\0\0\0\x80\0\0\0\x80");
            let c = g.key(b"c");
            assert_eq!(pfcount(g, 0, &[c]), Err(Error::HllCorrupt));
            assert_eq!(pfcount(g, 0, &[c, k]), Err(Error::HllCorrupt));
            assert_eq!(
                pfadd(g, 0, &c, SPARSE_MAX_BYTES, [&b"x"[..]]),
                Err(Error::HllCorrupt)
            );
        });
    }

    #[test]
    fn pfmerge_and_pfdebug() {
        let e = engine();
        with(&e, |g| {
            let (a, b, d) = (g.key(b"a"), g.key(b"b"), g.key(b"d"));
            pfadd(g, 0, &a, SPARSE_MAX_BYTES, [&b"1"[..], b"2", b"3"]).unwrap();
            pfadd(g, 0, &b, SPARSE_MAX_BYTES, [&b"3"[..], b"4"]).unwrap();
            assert_eq!(pfmerge(g, 0, &d, SPARSE_MAX_BYTES, &[a, b]), Ok(()));
            assert_eq!(pfcount(g, 0, &[d]), Ok(4));
            assert_eq!(
                pfdebug(g, 0, &d, Some(PfDebug::Encoding)),
                Ok(PfDebugReply::Encoding("sparse"))
            );
            assert_eq!(
                pfdebug(g, 0, &b, Some(PfDebug::ToDense)),
                Ok(PfDebugReply::Converted(true))
            );
            assert_eq!(
                pfdebug(g, 0, &b, Some(PfDebug::ToDense)),
                Ok(PfDebugReply::Converted(false))
            );
            assert_eq!(
                pfdebug(g, 0, &b, Some(PfDebug::Decode)),
                Err(Error::HllNotSparse)
            );
            // A dense source makes the destination dense.
            assert_eq!(pfmerge(g, 0, &d, SPARSE_MAX_BYTES, &[b]), Ok(()));
            assert_eq!(
                pfdebug(g, 0, &d, Some(PfDebug::Encoding)),
                Ok(PfDebugReply::Encoding("dense"))
            );
            assert_eq!(pfcount(g, 0, &[d]), Ok(4));
            let Ok(PfDebugReply::Registers(regs)) = pfdebug(g, 0, &a, Some(PfDebug::GetReg)) else {
                panic!("registers expected");
            };
            assert_eq!(regs.iter().filter(|&&r| r > 0).count(), 3);
            let missing = g.key(b"x");
            assert_eq!(pfdebug(g, 0, &missing, None), Err(Error::NoSuchKey));
            assert_eq!(pfdebug(g, 0, &a, None), Ok(PfDebugReply::Unknown));
        });
    }

    #[test]
    fn estimates_are_close() {
        let mut hll = new_sparse();
        let mut dense = new_sparse();
        sparse_to_dense(&mut dense).unwrap();
        for n in 1..=200_000u32 {
            let ele = n.to_string();
            add(&mut hll, ele.as_bytes(), SPARSE_MAX_BYTES).unwrap();
            add(&mut dense, ele.as_bytes(), SPARSE_MAX_BYTES).unwrap();
            if n.is_power_of_two() || n % 50_000 == 0 {
                let c = count(&hll).unwrap();
                assert_eq!(Ok(c), count(&dense));
                let err = (c as f64 - n as f64).abs() / n as f64;
                assert!(err < 0.03 || (c as i64 - n as i64).abs() <= 2, "{n}: {c}");
            }
        }
        // Both ended dense with the same registers.
        assert_eq!(hll.len(), DENSE_SIZE);
        assert_eq!(hll[HDR..], dense[HDR..]);
    }

    #[test]
    fn selftest_passes() {
        assert_eq!(selftest(), Ok(()));
    }

    /// WATCH sees PFADD when it changes something, PFMERGE always, and a
    /// PFCOUNT that refreshes the cached cardinality (Redis signals it);
    /// not a PFADD that changes nothing or a PFCOUNT served from the cache.
    #[test]
    fn writes_signal_watchers() {
        let e = engine();
        with(&e, |g| {
            let k = g.key(b"h");
            let flag = crate::WatchFlag::default();
            g.watch(0, &k, &flag);
            let seen = || flag.swap(false, Ordering::Relaxed);
            pfadd(g, 0, &k, SPARSE_MAX_BYTES, [&b"a"[..]]).unwrap();
            assert!(seen(), "created");
            pfadd(g, 0, &k, SPARSE_MAX_BYTES, [&b"a"[..]]).unwrap();
            assert!(!seen(), "no change");
            pfcount(g, 0, &[k]).unwrap();
            assert!(seen(), "cache refreshed");
            pfcount(g, 0, &[k]).unwrap();
            assert!(!seen(), "cache used");
            let other = g.key(b"other");
            pfcount(g, 0, &[k, other]).unwrap();
            assert!(!seen(), "union");
            pfmerge(g, 0, &k, SPARSE_MAX_BYTES, &[other]).unwrap();
            assert!(seen(), "merge");
        });
    }
}
