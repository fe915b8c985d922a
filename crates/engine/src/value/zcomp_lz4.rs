//! liblz4 (1.10, C, bundled by the `lz4-sys` crate) as the second codec of
//! compressed string values (issue 25 item 1, branch lz4code;
//! docs/design.md, "LZ4 values coded in the background"): LZ4 HC with the
//! domain's dictionary *attached* (loaded into a stream once, then
//! referenced by each coding: `LZ4_attach_HC_dictionary`), and LZ4's fast
//! coder for the in-line coding a SET does under memory pressure. Decoding
//! is `LZ4_decompress_safe_usingDict` with the dictionary's raw bytes.
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
}

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
        Some(Lz4Dict { raw, hc, fast })
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

/// Decodes `src` (one LZ4 block) appending exactly `n` bytes to `buf`.
/// False if the block does not decode to `n` bytes.
pub fn decompress(dict: Option<&Lz4Dict>, src: &[u8], n: usize, buf: &mut Vec<u8>) -> bool {
    let (Ok(sn), Ok(cap)) = (c_int::try_from(src.len()), c_int::try_from(n)) else {
        return false;
    };
    buf.reserve(n);
    let dst = buf.spare_capacity_mut();
    // SAFETY: `dst` has room for `n` bytes; the safe decoder never reads
    // past `src` or writes past `cap`; the dictionary bytes outlive the call.
    let r = unsafe {
        match dict {
            Some(d) => c::LZ4_decompress_safe_usingDict(
                src.as_ptr().cast(),
                dst.as_mut_ptr().cast(),
                sn,
                cap,
                d.raw.as_ptr().cast(),
                d.raw.len() as c_int,
            ),
            None => c::LZ4_decompress_safe(src.as_ptr().cast(), dst.as_mut_ptr().cast(), sn, cap),
        }
    };
    if r < 0 || r as usize != n {
        return false;
    }
    // SAFETY: lz4 wrote `n` bytes.
    unsafe { buf.set_len(buf.len() + n) };
    true
}
