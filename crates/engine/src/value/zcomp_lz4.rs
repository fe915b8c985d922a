//! liblz4 (1.10, C, bundled by the `lz4-sys` crate) as the second codec of
//! compressed string values (issue 25 item 1, branch lz4code;
//! docs/design.md, "LZ4 values coded in the background"): LZ4 HC with the
//! domain's dictionary *attached* (loaded into a stream once, then
//! referenced by each coding: `LZ4_attach_HC_dictionary`), and LZ4's fast
//! coder for the in-line coding a SET does under memory pressure. Decoding
//! is `LZ4_decompress_safe_usingDict` into a per-thread buffer that holds a
//! copy of the dictionary's bytes just before the output (branch mgetz):
//! liblz4 then decodes the dictionary as the block's *prefix*, in its fast
//! loop, where a dictionary apart from the output (its external-dictionary
//! mode) costs a `memmove` call per match into it and skips the loop's
//! short-match shortcut: ~30% fewer instructions and ~1.8x less time on
//! 2.8 KB of text (docs/design.md, "Reads of LZ4 values").
//!
//! This file owns the C calls and the prepared dictionary; `value::zcomp`
//! owns the coded value's header, the dictionary table and training, and
//! decides which codec a value uses. An LZ4 dictionary is raw content
//! (LZ4 keeps only its last 64 KiB), which is why a zstd-trained one can
//! serve (its bytes are mostly content).
// Links the bundled liblz4 (the functions are declared in `mod c`).
extern crate lz4_sys;
use std::cell::RefCell;
use std::os::raw::{c_char, c_int, c_void};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

mod c {
    use std::os::raw::{c_char, c_int, c_void};
    // Declared here rather than taken from lz4-sys, whose bindings stop
    // before the 1.10 attach calls (stable since 1.10, compiled into the
    // bundled library).
    extern "C" {
        pub fn LZ4_createStream() -> *mut c_void;
        pub fn LZ4_freeStream(s: *mut c_void) -> c_int;
        pub fn LZ4_sizeofState() -> c_int;
        pub fn LZ4_loadDict(s: *mut c_void, d: *const c_char, n: c_int) -> c_int;
        pub fn LZ4_resetStream_fast(s: *mut c_void);
        pub fn LZ4_attach_dictionary(w: *mut c_void, d: *const c_void);
        pub fn LZ4_compress_fast_continue(
            s: *mut c_void,
            src: *const c_char,
            dst: *mut c_char,
            n: c_int,
            cap: c_int,
            accel: c_int,
        ) -> c_int;
        pub fn LZ4_createStreamHC() -> *mut c_void;
        pub fn LZ4_freeStreamHC(s: *mut c_void) -> c_int;
        pub fn LZ4_sizeofStateHC() -> c_int;
        pub fn LZ4_loadDictHC(s: *mut c_void, d: *const c_char, n: c_int) -> c_int;
        pub fn LZ4_resetStreamHC_fast(s: *mut c_void, level: c_int);
        pub fn LZ4_attach_HC_dictionary(w: *mut c_void, d: *const c_void);
        pub fn LZ4_compress_HC_continue(
            s: *mut c_void,
            src: *const c_char,
            dst: *mut c_char,
            n: c_int,
            cap: c_int,
        ) -> c_int;
        pub fn LZ4_compressBound(n: c_int) -> c_int;
        pub fn LZ4_decompress_safe(
            src: *const c_char,
            dst: *mut c_char,
            n: c_int,
            cap: c_int,
        ) -> c_int;
        pub fn LZ4_decompress_safe_usingDict(
            src: *const c_char,
            dst: *mut c_char,
            n: c_int,
            cap: c_int,
            d: *const c_char,
            dn: c_int,
        ) -> c_int;
    }
}

/// The default of `value-compression-lz4-level`: HC 4 codes 2.8 KB of
/// text as small as zstd level 3 with a 64 KiB dictionary and decodes it in
/// a third of zstd's instructions; coding costs ~2.7x zstd's, paid by the
/// background coder (docs/design.md, "liblz4 measured").
pub const LEVEL_DEFAULT: i32 = 4;
/// Levels 3-12 are LZ4 HC's chain-table strategies. Level 2 (`lz4mid`)
/// keeps other tables, and a stream attached to a dictionary loaded at an
/// incompatible level would read them as its own: the directive starts at 3.
pub const LEVEL_MIN: i32 = 3;
pub const LEVEL_MAX: i32 = 12;

/// The most of a dictionary LZ4 uses (its window).
pub const DICT_MAX: usize = 64 << 10;

/// An LZ4 stream (fast or HC), freed on drop.
struct Stream {
    p: NonNull<c_void>,
    hc: bool,
}

// SAFETY: a loaded dictionary stream is only read once loaded (attached
// streams read its tables, never write them: lz4hc.c's dictCtx and lz4.c's
// dictCtx are const); per-thread working streams never leave their thread.
unsafe impl Send for Stream {}
// SAFETY: as above.
unsafe impl Sync for Stream {}

impl Stream {
    fn new(hc: bool) -> Option<Stream> {
        // SAFETY: plain allocations; null is checked.
        let p = unsafe {
            if hc {
                c::LZ4_createStreamHC()
            } else {
                c::LZ4_createStream()
            }
        };
        NonNull::new(p).map(|p| Stream { p, hc })
    }

    fn size(hc: bool) -> usize {
        // SAFETY: sizeof queries.
        unsafe {
            if hc {
                c::LZ4_sizeofStateHC() as usize
            } else {
                c::LZ4_sizeofState() as usize
            }
        }
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        // SAFETY: created by the matching create call, freed once here.
        unsafe {
            if self.hc {
                c::LZ4_freeStreamHC(self.p.as_ptr());
            } else {
                c::LZ4_freeStream(self.p.as_ptr());
            }
        }
    }
}

/// A dictionary prepared for LZ4: its bytes (the streams point into them,
/// and decoding reads them), loaded once into an HC stream and a fast one.
pub struct Lz4Dict {
    raw: Box<[u8]>,
    hc: Stream,
    fast: Stream,
    /// Unique for the process's life (ids are reused, addresses too): which
    /// dictionary a thread's decoding buffer holds a copy of.
    serial: u64,
}

/// The next `Lz4Dict::serial` (0 is "no dictionary").
static SERIAL: AtomicU64 = AtomicU64::new(1);

impl Lz4Dict {
    /// Prepares the last `DICT_MAX` bytes of `raw`.
    pub fn create(raw: &[u8]) -> Option<Lz4Dict> {
        let raw: Box<[u8]> = raw[raw.len().saturating_sub(DICT_MAX)..].into();
        let hc = Stream::new(true)?;
        let fast = Stream::new(false)?;
        // SAFETY: live streams; `raw` is boxed, so its bytes stay where the
        // streams point for as long as `self` (the fields drop together).
        unsafe {
            c::LZ4_resetStreamHC_fast(hc.p.as_ptr(), LEVEL_DEFAULT);
            c::LZ4_loadDictHC(hc.p.as_ptr(), raw.as_ptr().cast(), raw.len() as c_int);
            c::LZ4_loadDict(fast.p.as_ptr(), raw.as_ptr().cast(), raw.len() as c_int);
        }
        let serial = SERIAL.fetch_add(1, Ordering::Relaxed);
        Some(Lz4Dict {
            raw,
            hc,
            fast,
            serial,
        })
    }

    /// Bytes held outside jemalloc's view (C malloc) and in the raw copy.
    pub fn mem(&self) -> usize {
        self.raw.len() + Stream::size(true) + Stream::size(false)
    }

    /// The dictionary's content (what a persisted dictionary must keep).
    pub fn raw(&self) -> &[u8] {
        &self.raw
    }
}

thread_local! {
    /// This thread's working streams (HC: ~256 KiB, made only on threads
    /// that code in the background; fast: 16 KiB).
    static HC: RefCell<Option<Stream>> = const { RefCell::new(None) };
    static FAST: RefCell<Option<Stream>> = const { RefCell::new(None) };
    /// Decoding buffers, each a dictionary's bytes followed by room for a
    /// value; taken while in use, so a nested read (LCS reads two values)
    /// gets its own.
    static PREFIXED: RefCell<Vec<Prefixed>> = const { RefCell::new(Vec::new()) };
}

/// A decoding buffer: `buf[..dict_len]` is a copy of the dictionary whose
/// serial is `serial`, and the value is decoded right after it.
#[derive(Default)]
struct Prefixed {
    serial: u64,
    dict_len: usize,
    buf: Vec<u8>,
}

/// Buffers a thread keeps: one per dictionary in use at once, so values of
/// a few dictionaries (the current and a retired one) read in turn do not
/// copy 64 KiB each time. More dictionaries than this take turns.
const PREFIXED_KEEP: usize = 4;
/// A buffer kept for reuse holds at most a dictionary and a block's value
/// (under 32 KiB); a larger one (never made by the keyspace) is freed.
const PREFIXED_MAX: usize = DICT_MAX + (64 << 10);

/// A buffer holding `d`'s bytes with room for `n` after them.
fn take_prefixed(d: &Lz4Dict, n: usize) -> Prefixed {
    let mut p = PREFIXED.with(|p| {
        let mut p = p.borrow_mut();
        match p.iter().rposition(|b| b.serial == d.serial) {
            Some(i) => p.remove(i),
            None if p.len() < PREFIXED_KEEP => Prefixed::default(),
            None => p.remove(0),
        }
    });
    if p.serial != d.serial {
        p.buf.clear();
        p.buf.extend_from_slice(&d.raw);
        p.dict_len = d.raw.len();
        p.serial = d.serial;
    }
    if p.buf.len() < p.dict_len + n {
        p.buf.resize(p.dict_len + n, 0);
    }
    p
}

/// Gives a buffer back, the most recently used last; a nested read may have
/// made one more than `PREFIXED_KEEP`, and the least recently used goes.
fn put_prefixed(p: Prefixed) {
    if p.buf.len() <= PREFIXED_MAX {
        PREFIXED.with(|s| {
            let mut s = s.borrow_mut();
            if s.len() >= PREFIXED_KEEP {
                s.remove(0);
            }
            s.push(p);
        });
    }
}

/// The most a value of `n` bytes codes to.
pub fn bound(n: usize) -> usize {
    // SAFETY: a pure function of its argument.
    unsafe { c::LZ4_compressBound(n as c_int) as usize }
}

/// Codes `plain` into `out`'s spare capacity (at least `bound` bytes after
/// its length) and extends `out` by the coded bytes. `level` 0 is the fast
/// coder (acceleration 1), else LZ4 HC at that level (`LEVEL_MIN..`).
/// False on failure (`out` unchanged).
pub fn compress(dict: Option<&Lz4Dict>, plain: &[u8], level: i32, out: &mut Vec<u8>) -> bool {
    let Ok(n) = c_int::try_from(plain.len()) else {
        return false;
    };
    let hc = level > 0;
    let cell = if hc { &HC } else { &FAST };
    cell.with(|s| {
        let mut s = s.borrow_mut();
        if s.is_none() {
            *s = Stream::new(hc);
        }
        let Some(w) = s.as_ref() else {
            return false;
        };
        let w = w.p.as_ptr();
        let dst = out.spare_capacity_mut();
        let cap = c_int::try_from(dst.len()).unwrap_or(c_int::MAX);
        // SAFETY: `w` is this thread's stream; the reset forgets the last
        // value coded (the continue calls would otherwise use it as a
        // prefix); the dictionary stream outlives the call (the caller
        // holds a use of it); lz4 writes at most `cap` bytes to `dst`.
        let r = unsafe {
            if hc {
                c::LZ4_resetStreamHC_fast(w, level.clamp(LEVEL_MIN, LEVEL_MAX));
                let d = dict.map_or(std::ptr::null(), |d| d.hc.p.as_ptr() as *const c_void);
                c::LZ4_attach_HC_dictionary(w, d);
                c::LZ4_compress_HC_continue(
                    w,
                    plain.as_ptr().cast(),
                    dst.as_mut_ptr().cast::<c_char>(),
                    n,
                    cap,
                )
            } else {
                c::LZ4_resetStream_fast(w);
                let d = dict.map_or(std::ptr::null(), |d| d.fast.p.as_ptr() as *const c_void);
                c::LZ4_attach_dictionary(w, d);
                c::LZ4_compress_fast_continue(
                    w,
                    plain.as_ptr().cast(),
                    dst.as_mut_ptr().cast::<c_char>(),
                    n,
                    cap,
                    1,
                )
            }
        };
        if r <= 0 {
            return false;
        }
        // SAFETY: lz4 initialized `r` bytes of the spare capacity.
        unsafe { out.set_len(out.len() + r as usize) };
        true
    })
}

/// Calls `f` with the `n` plain bytes of `src` (one LZ4 block), decoded
/// right after a copy of the dictionary (see the file's comment); None if
/// the block does not decode to `n` bytes.
pub fn with_decoded<R>(
    dict: Option<&Lz4Dict>,
    src: &[u8],
    n: usize,
    f: impl FnOnce(&[u8]) -> R,
) -> Option<R> {
    let Some(d) = dict else {
        let mut buf = Vec::with_capacity(n);
        return decompress(None, src, n, &mut buf).then(|| f(&buf));
    };
    let (Ok(sn), Ok(cap)) = (c_int::try_from(src.len()), c_int::try_from(n)) else {
        return None;
    };
    let mut p = take_prefixed(d, n);
    let dl = p.dict_len;
    let base = p.buf.as_mut_ptr();
    // SAFETY: `buf` holds the dictionary's `dl` bytes then at least `n`
    // more; both pointers come from one `as_mut_ptr`, the dictionary ends
    // where the output starts (liblz4 checks exactly that to take its
    // prefix loop), and the safe decoder writes at most `cap` bytes there
    // and reads matches only within the `dl` bytes before.
    let r = unsafe {
        c::LZ4_decompress_safe_usingDict(
            src.as_ptr().cast(),
            base.add(dl).cast(),
            sn,
            cap,
            base.cast_const().cast(),
            dl as c_int,
        )
    };
    let out = (r >= 0 && r as usize == n).then(|| f(&p.buf[dl..dl + n]));
    put_prefixed(p);
    out
}

/// Decodes `src` (one LZ4 block) appending exactly `n` bytes to `buf`.
/// False if the block does not decode to `n` bytes.
pub fn decompress(dict: Option<&Lz4Dict>, src: &[u8], n: usize, buf: &mut Vec<u8>) -> bool {
    if dict.is_some() {
        return with_decoded(dict, src, n, |p| buf.extend_from_slice(p)).is_some();
    }
    let (Ok(sn), Ok(cap)) = (c_int::try_from(src.len()), c_int::try_from(n)) else {
        return false;
    };
    buf.reserve(n);
    let dst = buf.spare_capacity_mut();
    // SAFETY: `dst` has room for `n` bytes; the safe decoder never reads
    // past `src` or writes past `cap`.
    let r =
        unsafe { c::LZ4_decompress_safe(src.as_ptr().cast(), dst.as_mut_ptr().cast(), sn, cap) };
    if r < 0 || r as usize != n {
        return false;
    }
    // SAFETY: lz4 wrote `n` bytes.
    unsafe { buf.set_len(buf.len() + n) };
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::zcomp::sample_text;

    fn dict_of(seed: u64, len: usize) -> Lz4Dict {
        let raw: Vec<u8> = (0..)
            .flat_map(|i| sample_text(seed * 1000 + i, 1000))
            .take(len)
            .collect();
        Lz4Dict::create(&raw).unwrap()
    }

    fn code(d: &Lz4Dict, v: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(bound(v.len()));
        assert!(compress(Some(d), v, LEVEL_DEFAULT, &mut out));
        out
    }

    fn kept() -> Vec<u64> {
        PREFIXED.with(|p| p.borrow().iter().map(|b| b.serial).collect())
    }

    /// Values of more dictionaries than a thread keeps buffers for, read in
    /// turn, nested and appended, decode to their bytes; a dictionary made
    /// after another was freed (its address may be reused) is not taken
    /// for it; small dictionaries (liblz4's small-prefix loop) too.
    #[test]
    fn decodes_with_the_dictionary_as_prefix() {
        let dicts: Vec<Lz4Dict> = (0..PREFIXED_KEEP as u64 + 2)
            .map(|i| dict_of(i, if i == 1 { 5000 } else { DICT_MAX }))
            .collect();
        let vals: Vec<Vec<u8>> = (0..dicts.len() as u64)
            .map(|i| sample_text(77 + i, 2800))
            .collect();
        let coded: Vec<Vec<u8>> = dicts.iter().zip(&vals).map(|(d, v)| code(d, v)).collect();
        for round in 0..3 {
            for (i, d) in dicts.iter().enumerate() {
                let (c, v) = (&coded[i], &vals[i]);
                let got = with_decoded(Some(d), c, v.len(), |p| p.to_vec());
                assert_eq!(got.as_deref(), Some(&v[..]), "round {round} dict {i}");
                let mut tail = b"$2800\r\n".to_vec();
                assert!(decompress(Some(d), c, v.len(), &mut tail));
                assert_eq!(&tail[7..], &v[..]);
                // A nested read (LCS) gets a buffer of its own.
                let j = (i + 1) % dicts.len();
                with_decoded(Some(d), c, v.len(), |a| {
                    with_decoded(Some(&dicts[j]), &coded[j], vals[j].len(), |b| {
                        assert_eq!((a, b), (&v[..], &vals[j][..]));
                    })
                })
                .unwrap()
                .unwrap();
                assert!(kept().len() <= PREFIXED_KEEP);
            }
        }
        // The same dictionary read again keeps its buffer (no reload).
        let last = dicts.last().unwrap();
        with_decoded(Some(last), coded.last().unwrap(), 2800, |_| ()).unwrap();
        assert_eq!(kept().last(), Some(&last.serial));
        // Freed, then another made: its values decode with its own bytes.
        let serials: Vec<u64> = dicts.iter().map(|d| d.serial).collect();
        drop(dicts);
        let fresh = dict_of(99, DICT_MAX);
        assert!(!serials.contains(&fresh.serial));
        let v = sample_text(5, 2800);
        let c = code(&fresh, &v);
        assert_eq!(
            with_decoded(Some(&fresh), &c, v.len(), |p| p.to_vec()),
            Some(v.clone())
        );
        // Without a dictionary: straight into the output.
        let mut plain = Vec::with_capacity(bound(v.len()));
        assert!(compress(None, &v, LEVEL_DEFAULT, &mut plain));
        let mut out = b"x".to_vec();
        assert!(decompress(None, &plain, v.len(), &mut out));
        assert_eq!(&out[1..], &v[..]);
    }

    /// A block that does not decode to the length asked for is refused,
    /// with nothing appended and the buffer still usable.
    #[test]
    fn a_wrong_block_or_length_is_refused() {
        let d = dict_of(3, DICT_MAX);
        let v = sample_text(8, 2800);
        let c = code(&d, &v);
        assert_eq!(with_decoded(Some(&d), &c, v.len() - 1, |_| ()), None);
        assert_eq!(
            with_decoded(Some(&d), &c[..c.len() / 2], v.len(), |_| ()),
            None
        );
        let mut out = b"ab".to_vec();
        assert!(!decompress(Some(&d), &c[..c.len() - 3], v.len(), &mut out));
        assert_eq!(out, b"ab");
        assert_eq!(
            with_decoded(Some(&d), &c, v.len(), |p| p == &v[..]),
            Some(true)
        );
    }
}
