//! Standalone instruction counts of zstd (and lz4_flex) on the values
//! scripts/bench_compression.sh makes, outside the server (issue 25, branch
//! zfast): what coding and decoding a 2.8 KB value costs in the codec
//! itself, per dictionary size, level and compression parameters, so a
//! change to `value::zcomp` can be judged by its count. Run it with
//! `scripts/zstd_cost/run.sh MODE LEVEL` (callgrind; see there).
//!
//! MODE is words joined by '-': `base` (ZSTD_createCDict, as the server),
//! `hint` (ZSTD_createCDict_advanced with a 4 KB source-size hint, with
//! `mmN`/`slN`/`hlN`/`clN`/`wlN`/`tlN`/`stN` overriding a parameter),
//! `attach`/`copy` (ZSTD_c_forceAttachDict), `noflags`, `cs2`
//! (ZSTD_compress2), `lvl`, `ref` (DCtx with a referenced DDict), `lz4`
//! (lz4_flex with the same dictionary). DK (dictionary KiB, default 16) and
//! NS (values sampled for training, default 92) come from the environment.
extern crate lz4_sys; // links liblz4 (its functions are declared in `mod c`)
use std::ptr::NonNull;
use zstd::zstd_safe::{zstd_sys as sys, DCtx, DDict};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).cloned().unwrap_or_default();
    let level: i32 = args.get(2).map(|s| s.parse().unwrap()).unwrap_or(3);
    let text = std::fs::read(std::env::var("VALUES").unwrap_or("values.txt".into())).unwrap();
    let vals: Vec<&[u8]> = text
        .split(|&b| b == b'\n')
        .filter(|v| !v.is_empty())
        .collect();
    // train on the first 92 values (256 KiB)
    let mut samples = Vec::new();
    let mut sizes = Vec::new();
    let dk: usize = std::env::var("DK")
        .map(|s| s.parse().unwrap())
        .unwrap_or(16);
    let ns: usize = std::env::var("NS")
        .map(|s| s.parse().unwrap())
        .unwrap_or(92);
    for v in &vals[1100..1100 + ns] {
        samples.extend_from_slice(v);
        sizes.push(v.len());
    }
    let dict = zstd::dict::from_continuous(&samples, &sizes, dk << 10).unwrap();
    if mode.starts_with("clz4") {
        // liblz4 1.10 (lz4-sys): the dictionary is raw text, so it is the
        // zstd dictionary's content (its tail) or, with `raw`, the
        // samples' last DK KiB.
        let d: &[u8] = if mode.contains("raw") {
            &samples[samples.len() - (dk << 10)..]
        } else {
            &dict
        };
        let hc: i32 = mode
            .split('-')
            .find_map(|p| p.strip_prefix("hc").map(|v| v.parse().unwrap()))
            .unwrap_or(0);
        if mode.contains("dec") {
            return clz4_dec_main(d, &vals, hc, mode.contains("fav"));
        }
        return clz4_main(d, &vals, hc, level);
    }
    if mode.starts_with("lz4") {
        let d: &[u8] = if mode.contains("raw") {
            &samples[samples.len() - (64 << 10)..]
        } else {
            &dict
        };
        return lz4_main(d, &vals);
    }
    let hint: u64 = if mode.contains("hint") {
        4096
    } else {
        sys::ZSTD_CONTENTSIZE_UNKNOWN as u64
    };
    let cdict: NonNull<sys::ZSTD_CDict> = unsafe {
        if mode.contains("hint") {
            let cp = sys::ZSTD_getCParams(level, hint, dict.len());
            let mut cp = cp;
            for part in mode.split('-') {
                if let Some(v) = part.strip_prefix("mm") {
                    cp.minMatch = v.parse().unwrap();
                }
                if let Some(v) = part.strip_prefix("sl") {
                    cp.searchLog = v.parse().unwrap();
                }
                if let Some(v) = part.strip_prefix("hl") {
                    cp.hashLog = v.parse().unwrap();
                }
                if let Some(v) = part.strip_prefix("cl") {
                    cp.chainLog = v.parse().unwrap();
                }
                if let Some(v) = part.strip_prefix("wl") {
                    cp.windowLog = v.parse().unwrap();
                }
                if let Some(v) = part.strip_prefix("tl") {
                    cp.targetLength = v.parse().unwrap();
                }
                if let Some(v) = part.strip_prefix("st") {
                    cp.strategy =
                        std::mem::transmute::<u32, sys::ZSTD_strategy>(v.parse::<u32>().unwrap());
                }
            }
            eprintln!("{cp:?}");
            NonNull::new(sys::ZSTD_createCDict_advanced(
                dict.as_ptr().cast(),
                dict.len(),
                sys::ZSTD_dictLoadMethod_e::ZSTD_dlm_byCopy,
                sys::ZSTD_dictContentType_e::ZSTD_dct_auto,
                cp,
                sys::ZSTD_customMem {
                    customAlloc: None,
                    customFree: None,
                    opaque: std::ptr::null_mut(),
                },
            ))
            .unwrap()
        } else {
            NonNull::new(sys::ZSTD_createCDict(
                dict.as_ptr().cast(),
                dict.len(),
                level,
            ))
            .unwrap()
        }
    };
    let ddict = DDict::try_create(&dict).unwrap();
    eprintln!(
        "cdict {} B ddict {} B",
        unsafe { sys::ZSTD_sizeof_CDict(cdict.as_ptr()) },
        ddict.sizeof()
    );
    let cctx = unsafe { sys::ZSTD_createCCtx() };
    unsafe {
        use sys::ZSTD_cParameter::*;
        if mode.contains("attach") {
            sys::ZSTD_CCtx_setParameter(cctx, ZSTD_c_experimentalParam4, 1);
        }
        if mode.contains("copy") {
            sys::ZSTD_CCtx_setParameter(cctx, ZSTD_c_experimentalParam4, 2);
        }
        if mode.contains("noflags") {
            sys::ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 0);
            sys::ZSTD_CCtx_setParameter(cctx, ZSTD_c_dictIDFlag, 0);
        }
        if mode.contains("lvl") {
            sys::ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level);
        }
    }
    let test = &vals[100..1100];
    let mut coded: Vec<Vec<u8>> = Vec::new();
    let t0 = std::time::Instant::now();
    let total = enc(cctx, cdict, test, &mut coded, mode.contains("cs2"));
    eprintln!(
        "enc {:.2} us/value",
        t0.elapsed().as_secs_f64() * 1e6 / test.len() as f64
    );
    eprintln!(
        "mode {mode} level {level}: {} values, {:.1} B coded avg",
        test.len(),
        total as f64 / test.len() as f64
    );
    let mut dctx = DCtx::create();
    if mode.contains("ref") {
        dctx.ref_ddict(&ddict).unwrap();
    }
    let t0 = std::time::Instant::now();
    let mut n = 0;
    for _ in 0..5 {
        n = dec(&mut dctx, &ddict, &coded, mode.contains("ref"));
    }
    eprintln!(
        "dec {:.2} us/value",
        t0.elapsed().as_secs_f64() * 1e6 / 5.0 / coded.len() as f64
    );
    eprintln!("decoded {n}");
}

#[inline(never)]
fn enc(
    cctx: *mut sys::ZSTD_CCtx,
    cdict: NonNull<sys::ZSTD_CDict>,
    vals: &[&[u8]],
    out: &mut Vec<Vec<u8>>,
    cs2: bool,
) -> usize {
    let mut t = 0;
    for v in vals {
        let mut o = vec![0u8; 4096];
        let r = unsafe {
            if cs2 {
                sys::ZSTD_CCtx_refCDict(cctx, cdict.as_ptr());
                sys::ZSTD_compress2(
                    cctx,
                    o.as_mut_ptr().cast(),
                    o.len(),
                    v.as_ptr().cast(),
                    v.len(),
                )
            } else {
                sys::ZSTD_compress_usingCDict(
                    cctx,
                    o.as_mut_ptr().cast(),
                    o.len(),
                    v.as_ptr().cast(),
                    v.len(),
                    cdict.as_ptr(),
                )
            }
        };
        assert!(unsafe { sys::ZSTD_isError(r) } == 0);
        o.truncate(r);
        t += r;
        out.push(o);
    }
    t
}

#[inline(never)]
fn dec(dctx: &mut DCtx, ddict: &DDict, coded: &[Vec<u8>], by_ref: bool) -> usize {
    let mut t = 0;
    let mut buf: Vec<u8> = Vec::with_capacity(4096);
    for c in coded {
        buf.clear();
        let r = if by_ref {
            dctx.decompress(&mut buf, c)
        } else {
            dctx.decompress_using_ddict(&mut buf, c, ddict)
        };
        t += r.unwrap();
    }
    t
}

pub fn lz4_main(dict: &[u8], vals: &[&[u8]]) {
    let test = &vals[100..1100];
    let mut coded = Vec::new();
    let t = lz4_enc(dict, test, &mut coded);
    eprintln!(
        "lz4 dict {}: {:.1} B coded avg",
        dict.len(),
        t as f64 / test.len() as f64
    );
    let n = lz4_dec(dict, &coded);
    eprintln!("decoded {n}");
}

#[inline(never)]
fn lz4_enc(dict: &[u8], vals: &[&[u8]], out: &mut Vec<Vec<u8>>) -> usize {
    let mut t = 0;
    for v in vals {
        let c = lz4_flex::block::compress_with_dict(v, dict);
        t += c.len();
        out.push(c);
    }
    t
}

#[inline(never)]
fn lz4_dec(dict: &[u8], coded: &[Vec<u8>]) -> usize {
    let mut t = 0;
    let mut buf = vec![0u8; 4096];
    for c in coded {
        t += lz4_flex::block::decompress_into_with_dict(c, &mut buf, dict).unwrap();
    }
    t
}

mod c {
    use std::os::raw::{c_char, c_int, c_void};
    extern "C" {
        pub fn LZ4_createStream() -> *mut c_void;
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
        pub fn LZ4_loadDictHC(s: *mut c_void, d: *const c_char, n: c_int) -> c_int;
        pub fn LZ4_resetStreamHC_fast(s: *mut c_void, level: c_int);
        pub fn LZ4_favorDecompressionSpeed(s: *mut c_void, favor: c_int);
        pub fn LZ4_attach_HC_dictionary(w: *mut c_void, d: *const c_void);
        pub fn LZ4_compress_HC_continue(
            s: *mut c_void,
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

/// `fav` in the mode: LZ4 HC's `LZ4_favorDecompressionSpeed` (levels 10+).
static FAV: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// liblz4 with an attached dictionary (`hc` = 0: the fast coder at
/// acceleration `accel`; otherwise LZ4 HC at that level).
pub fn clz4_main(dict: &[u8], vals: &[&[u8]], hc: i32, accel: i32) {
    let test = &vals[100..1100];
    let mut coded = Vec::new();
    let t0 = std::time::Instant::now();
    let t = clz4_enc(dict, test, &mut coded, hc, accel.max(1));
    eprintln!(
        "enc {:.2} us/value",
        t0.elapsed().as_secs_f64() * 1e6 / test.len() as f64
    );
    eprintln!(
        "liblz4 hc {hc} accel {accel} dict {}: {:.1} B coded avg",
        dict.len(),
        t as f64 / test.len() as f64
    );
    let t0 = std::time::Instant::now();
    let mut n = 0;
    for _ in 0..5 {
        n = clz4_dec(dict, &coded);
    }
    eprintln!(
        "dec {:.2} us/value",
        t0.elapsed().as_secs_f64() * 1e6 / 5.0 / coded.len() as f64
    );
    for (v, c) in test.iter().zip(&coded) {
        let mut buf = vec![0u8; 4096];
        let r = unsafe {
            c::LZ4_decompress_safe_usingDict(
                c.as_ptr().cast(),
                buf.as_mut_ptr().cast(),
                c.len() as i32,
                4096,
                dict.as_ptr().cast(),
                dict.len() as i32,
            )
        };
        assert_eq!(&buf[..r as usize], *v);
    }
    eprintln!("decoded {n}, every value checked");
}

#[inline(never)]
fn clz4_enc(dict: &[u8], vals: &[&[u8]], out: &mut Vec<Vec<u8>>, hc: i32, accel: i32) -> usize {
    let mut t = 0;
    unsafe {
        if hc == 0 {
            let d = c::LZ4_createStream();
            c::LZ4_loadDict(d, dict.as_ptr().cast(), dict.len() as i32);
            let w = c::LZ4_createStream();
            for v in vals {
                let mut o = vec![0u8; 4096];
                c::LZ4_resetStream_fast(w);
                c::LZ4_attach_dictionary(w, d);
                let r = c::LZ4_compress_fast_continue(
                    w,
                    v.as_ptr().cast(),
                    o.as_mut_ptr().cast(),
                    v.len() as i32,
                    4096,
                    accel,
                );
                assert!(r > 0);
                o.truncate(r as usize);
                t += r as usize;
                out.push(o);
            }
        } else {
            let d = c::LZ4_createStreamHC();
            c::LZ4_resetStreamHC_fast(d, hc);
            c::LZ4_loadDictHC(d, dict.as_ptr().cast(), dict.len() as i32);
            let w = c::LZ4_createStreamHC();
            for v in vals {
                let mut o = vec![0u8; 4096];
                c::LZ4_resetStreamHC_fast(w, hc);
                c::LZ4_favorDecompressionSpeed(
                    w,
                    FAV.load(std::sync::atomic::Ordering::Relaxed) as i32,
                );
                c::LZ4_attach_HC_dictionary(w, d);
                let r = c::LZ4_compress_HC_continue(
                    w,
                    v.as_ptr().cast(),
                    o.as_mut_ptr().cast(),
                    v.len() as i32,
                    4096,
                );
                assert!(r > 0);
                o.truncate(r as usize);
                t += r as usize;
                out.push(o);
            }
        }
    }
    t
}

#[inline(never)]
fn clz4_dec(dict: &[u8], coded: &[Vec<u8>]) -> usize {
    let mut t = 0;
    let mut buf = vec![0u8; 4096];
    for c in coded {
        let r = unsafe {
            c::LZ4_decompress_safe_usingDict(
                c.as_ptr().cast(),
                buf.as_mut_ptr().cast(),
                c.len() as i32,
                buf.len() as i32,
                dict.as_ptr().cast(),
                dict.len() as i32,
            )
        };
        assert!(r > 0);
        t += r as usize;
    }
    t
}

/// `clz4-hcN-dec`: the same HC-coded blocks decoded four ways, each into a
/// reply-like buffer (`$2800\r\n` + value + `\r\n` appended per value, as
/// a server's output buffer): `dec_ext` decodes with the dictionary apart
/// (`LZ4_decompress_safe_usingDict`'s external-dictionary loop) into a
/// scratch buffer and copies it over (the server's path before branch
/// mgetz); `dec_ext_direct` the same straight into the reply; `dec_prefix`
/// into a scratch buffer that holds the dictionary just before the output
/// (liblz4 then takes its prefix loop, `withPrefix64k`) and copies;
/// `dec_flex` lz4_flex's decoder (no safe-decode) into the scratch, copied.
pub fn clz4_dec_main(dict: &[u8], vals: &[&[u8]], hc: i32, fav: bool) {
    let test = &vals[100..1100];
    let mut coded = Vec::new();
    FAV.store(fav, std::sync::atomic::Ordering::Relaxed);
    let t = clz4_enc(dict, test, &mut coded, hc, 1);
    eprintln!(
        "liblz4 hc {hc} dict {}: {:.1} B coded avg",
        dict.len(),
        t as f64 / test.len() as f64
    );
    let want: Vec<u8> = test.iter().flat_map(|v| reply_of(v)).collect();
    let mut out = Vec::with_capacity(want.len() + 4096);
    let mut scratch = Vec::with_capacity(4096);
    let mut pre = vec![0u8; dict.len() + 4096];
    pre[..dict.len()].copy_from_slice(dict);
    type F = fn(&[u8], &[Vec<u8>], &[&[u8]], &mut Vec<u8>, &mut Vec<u8>, &mut Vec<u8>);
    let ways: [(&str, F); 4] = [
        ("ext", dec_ext),
        ("ext_direct", dec_ext_direct),
        ("prefix", dec_prefix),
        ("flex", dec_flex),
    ];
    for (name, f) in ways {
        let t0 = std::time::Instant::now();
        for _ in 0..5 {
            out.clear();
            f(dict, &coded, test, &mut out, &mut scratch, &mut pre);
        }
        let us = t0.elapsed().as_secs_f64() * 1e6 / 5.0 / coded.len() as f64;
        assert!(out == want, "{name} decodes wrong");
        eprintln!("{name}: {us:.3} us/value, every value checked");
    }
}

fn reply_of(v: &[u8]) -> Vec<u8> {
    let mut r = format!("${}\r\n", v.len()).into_bytes();
    r.extend_from_slice(v);
    r.extend_from_slice(b"\r\n");
    r
}

fn head(out: &mut Vec<u8>, n: usize) {
    out.push(b'$');
    out.extend_from_slice(n.to_string().as_bytes());
    out.extend_from_slice(b"\r\n");
}

#[inline(never)]
fn dec_ext(
    dict: &[u8],
    coded: &[Vec<u8>],
    vals: &[&[u8]],
    out: &mut Vec<u8>,
    s: &mut Vec<u8>,
    _: &mut Vec<u8>,
) {
    for (c, v) in coded.iter().zip(vals) {
        s.clear();
        let r = unsafe {
            c::LZ4_decompress_safe_usingDict(
                c.as_ptr().cast(),
                s.as_mut_ptr().cast(),
                c.len() as i32,
                v.len() as i32,
                dict.as_ptr().cast(),
                dict.len() as i32,
            )
        };
        assert_eq!(r as usize, v.len());
        unsafe { s.set_len(v.len()) };
        head(out, v.len());
        out.extend_from_slice(s);
        out.extend_from_slice(b"\r\n");
    }
}

#[inline(never)]
fn dec_ext_direct(
    dict: &[u8],
    coded: &[Vec<u8>],
    vals: &[&[u8]],
    out: &mut Vec<u8>,
    _: &mut Vec<u8>,
    _: &mut Vec<u8>,
) {
    for (c, v) in coded.iter().zip(vals) {
        head(out, v.len());
        out.reserve(v.len() + 2);
        let dst = out.spare_capacity_mut();
        let r = unsafe {
            c::LZ4_decompress_safe_usingDict(
                c.as_ptr().cast(),
                dst.as_mut_ptr().cast(),
                c.len() as i32,
                v.len() as i32,
                dict.as_ptr().cast(),
                dict.len() as i32,
            )
        };
        assert_eq!(r as usize, v.len());
        unsafe { out.set_len(out.len() + v.len()) };
        out.extend_from_slice(b"\r\n");
    }
}

#[inline(never)]
fn dec_prefix(
    dict: &[u8],
    coded: &[Vec<u8>],
    vals: &[&[u8]],
    out: &mut Vec<u8>,
    _: &mut Vec<u8>,
    pre: &mut Vec<u8>,
) {
    let d = dict.len();
    for (c, v) in coded.iter().zip(vals) {
        let r = unsafe {
            c::LZ4_decompress_safe_usingDict(
                c.as_ptr().cast(),
                pre.as_mut_ptr().add(d).cast(),
                c.len() as i32,
                v.len() as i32,
                pre.as_ptr().cast(),
                d as i32,
            )
        };
        assert_eq!(r as usize, v.len());
        head(out, v.len());
        out.extend_from_slice(&pre[d..d + v.len()]);
        out.extend_from_slice(b"\r\n");
    }
}

#[inline(never)]
fn dec_flex(
    dict: &[u8],
    coded: &[Vec<u8>],
    vals: &[&[u8]],
    out: &mut Vec<u8>,
    s: &mut Vec<u8>,
    _: &mut Vec<u8>,
) {
    s.resize(4096, 0);
    for (c, v) in coded.iter().zip(vals) {
        let r = lz4_flex::block::decompress_into_with_dict(c, s, dict).unwrap();
        assert_eq!(r, v.len());
        head(out, v.len());
        out.extend_from_slice(&s[..r]);
        out.extend_from_slice(b"\r\n");
    }
}
