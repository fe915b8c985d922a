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
