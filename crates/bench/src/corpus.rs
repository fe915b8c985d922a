//! Real-text values (issue 25, E4): a word list read from text files that
//! Debian packages ship, and values cut from it that depend only on
//! (seed, key), so a reader regenerates any key's exact bytes to verify a
//! reply without the client ever storing what it wrote.
//!
//! The default corpus is every regular file under /usr/share/common-licenses
//! (Debian's `base-files`, on every Debian machine) and every
//! /usr/share/doc/<package>/copyright (one per installed package, so a CI
//! machine after scripts/install_test_clients.sh has several hundred), read
//! in sorted path order. The corpus differs between machines (installed
//! packages differ), so the report records its file count, word count and a
//! fingerprint: two runs compare only when those agree.
//!
//! A value is runs of 3 to 14 consecutive words taken from pseudo-random
//! places in the word list, joined by single spaces and cut at exactly the
//! configured size (scripts/bench_compression.sh's generator, with a
//! larger corpus). Whole values never repeat, so a compressor sees English
//! text, not copies of the same few licences (a value that were a window
//! of the raw corpus would share long runs with thousands of others, which
//! a trained dictionary would turn into an unrealistic ratio).

use std::path::{Path, PathBuf};

/// The word list.
pub struct Corpus {
    /// The words joined by single spaces (so a run of words is a slice).
    text: Vec<u8>,
    /// The words' own bytes, without the spaces.
    word_bytes: usize,
    /// (start, end) of each word in `text`.
    words: Vec<(u32, u32)>,
    files: usize,
    fingerprint: u64,
    source: String,
}

/// Where the default corpus comes from, besides the encyclopedias.
pub const DEBIAN_SOURCES: &str = "/usr/share/common-licenses/*, /usr/share/doc/*/copyright";

/// The encyclopedic prose of the default corpus: FOLDOC (the Free On-line
/// Dictionary of Computing, Debian's `dict-foldoc`) and the Jargon File
/// (`dict-jargon`), as dictd ships them (dictzip). Licences alone code
/// ~3.8x with zstd and a dictionary (the same few licences repeat in
/// hundreds of copyright files), far above the 2.8x of Wikipedia's text
/// that E4 models; with these two, 3.0x (LZ4 HC 4 with a dictionary
/// 2.85x), measured by `cairn-bench corpus` (docs/design.md).
pub const ENCYCLOPEDIAS: [&str; 2] = ["foldoc.dict.dz", "jargon.dict.dz"];

/// Where the encyclopedias are looked for, in order: dictd's directory
/// (the packages installed), then $CAIRN_CORPUS_DIR, else
/// ~/.cache/cairn/corpus (where scripts/text_corpus.sh unpacks them
/// without installing the packages, whose dictd daemon is not wanted).
pub fn encyclopedia_dirs() -> Vec<PathBuf> {
    let mut v = vec![PathBuf::from("/usr/share/dictd")];
    match std::env::var_os("CAIRN_CORPUS_DIR") {
        Some(d) => v.push(PathBuf::from(d)),
        None => {
            if let Some(h) = std::env::var_os("HOME") {
                v.push(Path::new(&h).join(".cache/cairn/corpus"));
            }
        }
    }
    v
}

/// FNV-1a 64 over `b`, continuing from `h`.
fn fnv1a(mut h: u64, b: &[u8]) -> u64 {
    for &x in b {
        h ^= x as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// SplitMix64's finaliser: a good 64-bit mix of (seed, key).
#[inline]
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A cap on the corpus: a few hundred copyright files already give
/// millions of words; more only costs start-up time.
const MAX_CORPUS_BYTES: usize = 64 << 20;

impl Corpus {
    /// The default corpus: [`DEBIAN_SOURCES`] and the [`ENCYCLOPEDIAS`]
    /// found (the source names which, so a report says what it used).
    pub fn debian() -> Result<Corpus, String> {
        let mut paths = Vec::new();
        paths.extend(regular_files(Path::new("/usr/share/common-licenses")));
        if let Ok(rd) = std::fs::read_dir("/usr/share/doc") {
            for e in rd.flatten() {
                let p = e.path().join("copyright");
                if p.is_file() {
                    paths.push(p);
                }
            }
        }
        // The encyclopedias last, in ENCYCLOPEDIAS order, whatever their
        // directory: the word list does not depend on where they were found.
        paths.sort();
        let mut source = DEBIAN_SOURCES.to_string();
        let dirs = encyclopedia_dirs();
        for name in ENCYCLOPEDIAS {
            match dirs.iter().map(|d| d.join(name)).find(|p| p.is_file()) {
                Some(p) => {
                    source.push_str(&format!(", {}", p.display()));
                    paths.push(p);
                }
                None => {
                    source.push_str(&format!(" (no {name}: scripts/text_corpus.sh fetches it)"))
                }
            }
        }
        Corpus::from_files(&paths, &source)
    }

    /// The files named (a directory stands for the regular files directly
    /// in it), in sorted path order.
    pub fn from_paths(specs: &[PathBuf]) -> Result<Corpus, String> {
        let mut paths = Vec::new();
        for s in specs {
            if s.is_dir() {
                paths.extend(regular_files(s));
            } else if s.is_file() {
                paths.push(s.clone());
            } else {
                return Err(format!(
                    "--text-source {}: no such file or directory",
                    s.display()
                ));
            }
        }
        paths.sort();
        paths.dedup();
        let names: Vec<String> = specs.iter().map(|p| p.display().to_string()).collect();
        Corpus::from_files(&paths, &names.join(", "))
    }

    fn from_files(paths: &[PathBuf], source: &str) -> Result<Corpus, String> {
        let mut texts = Vec::new();
        let mut total = 0;
        for p in paths {
            // Unreadable files (permissions, a dangling link) are skipped;
            // the file count in the report says how many were used.
            let Ok(b) = read_text(p) else { continue };
            total += b.len();
            texts.push(b);
            if total >= MAX_CORPUS_BYTES {
                break;
            }
        }
        let refs: Vec<&[u8]> = texts.iter().map(|t| t.as_slice()).collect();
        Corpus::from_texts(&refs, source)
    }

    /// A corpus of the given texts (in order).
    pub fn from_texts(texts: &[&[u8]], source: &str) -> Result<Corpus, String> {
        let mut text = Vec::new();
        let mut words = Vec::new();
        let mut word_bytes = 0;
        let mut h = FNV_OFFSET;
        for t in texts {
            for w in t
                .split(|b| b.is_ascii_whitespace())
                .filter(|w| !w.is_empty())
            {
                if !text.is_empty() {
                    text.push(b' ');
                }
                let start = text.len();
                text.extend_from_slice(w);
                let end = text.len();
                word_bytes += w.len();
                if end > u32::MAX as usize {
                    break;
                }
                words.push((start as u32, end as u32));
                h = fnv1a(h, w);
                h = fnv1a(h, b" ");
            }
        }
        // Fewer words than this and values would repeat passages often.
        if words.len() < 1000 {
            return Err(format!(
                "the text corpus ({source}) has {} words; at least 1000 are needed",
                words.len()
            ));
        }
        Ok(Corpus {
            text,
            words,
            word_bytes,
            files: texts.len(),
            fingerprint: h,
            source: source.to_string(),
        })
    }

    pub fn words(&self) -> usize {
        self.words.len()
    }

    /// Bytes of the words (without the whitespace between them).
    pub fn bytes(&self) -> usize {
        self.word_bytes
    }

    pub fn files(&self) -> usize {
        self.files
    }

    /// FNV-1a 64 of the word list, in hex.
    pub fn fingerprint(&self) -> String {
        format!("{:016x}", self.fingerprint)
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    #[inline]
    fn word(&self, i: usize) -> &[u8] {
        let (a, b) = self.words[i];
        &self.text[a as usize..b as usize]
    }
}

/// A file's bytes; `.gz` and `.dz` (dictd's dictzip, gzip with an index)
/// files decoded.
fn read_text(p: &Path) -> std::io::Result<Vec<u8>> {
    let b = std::fs::read(p)?;
    let gz = matches!(
        p.extension().and_then(|e| e.to_str()),
        Some("gz") | Some("dz")
    );
    if !gz {
        return Ok(b);
    }
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::MultiGzDecoder::new(&b[..]), &mut out)?;
    Ok(out)
}

fn regular_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.is_file())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Values of `size` bytes cut from a corpus, a function of (seed, key).
pub struct TextValues {
    corpus: Corpus,
    size: usize,
    seed: u64,
}

/// Where a returned value first differs from the one written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    pub key: u64,
    /// The first differing byte offset (the shorter length when one is a
    /// prefix of the other).
    pub offset: usize,
    pub got_len: usize,
    pub want_len: usize,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "key {}: {} bytes returned, {} written, first difference at byte {}",
            self.key, self.got_len, self.want_len, self.offset
        )
    }
}

impl TextValues {
    pub fn new(corpus: Corpus, size: usize, seed: u64) -> TextValues {
        TextValues {
            corpus,
            size: size.max(1),
            seed,
        }
    }

    pub fn size(&self) -> usize {
        self.size
    }

    pub fn corpus(&self) -> &Corpus {
        &self.corpus
    }

    /// Writes key `key`'s value into `out` (cleared first).
    pub fn value_into(&self, key: u64, out: &mut Vec<u8>) {
        out.clear();
        let n = self.corpus.words.len() as u64;
        let mut x = mix(self.seed ^ mix(key));
        while out.len() < self.size {
            // xorshift64: cheap, and never 0 after a non-zero start.
            x |= 1;
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let start = (x >> 16) % n;
            let run = 3 + x % 12;
            if !out.is_empty() {
                out.push(b' ');
            }
            if start + run <= n {
                // The corpus keeps its words joined by single spaces, so a
                // run that does not wrap is one slice of it: one copy
                // instead of one per word (the client's own cost: at E4's
                // pace, per-word copying took a core of the client).
                let (a, _) = self.corpus.words[start as usize];
                let (_, b) = self.corpus.words[(start + run - 1) as usize];
                out.extend_from_slice(&self.corpus.text[a as usize..b as usize]);
                continue;
            }
            for k in 0..run {
                if k > 0 {
                    out.push(b' ');
                }
                out.extend_from_slice(self.corpus.word(((start + k) % n) as usize));
                if out.len() >= self.size {
                    break;
                }
            }
        }
        // Words past `size` were copied whole; what the value holds is the
        // first `size` bytes either way.
        out.truncate(self.size);
    }

    /// Checks `got` against key `key`'s value; `want` is scratch space.
    pub fn verify(&self, key: u64, got: &[u8], want: &mut Vec<u8>) -> Result<(), Mismatch> {
        self.value_into(key, want);
        compare(key, got, want)
    }
}

/// Compares a returned value with the written one.
#[inline]
pub fn compare(key: u64, got: &[u8], want: &[u8]) -> Result<(), Mismatch> {
    if got == want {
        return Ok(());
    }
    let offset = got
        .iter()
        .zip(want)
        .position(|(a, b)| a != b)
        .unwrap_or(got.len().min(want.len()));
    Err(Mismatch {
        key,
        offset,
        got_len: got.len(),
        want_len: want.len(),
    })
}

/// How the values of a [`TextValues`] code under the server's coders, one
/// value at a time (as the server codes them): zstd level 3 without and
/// with a dictionary trained as the server trains one (64 KiB from the
/// first 1 MiB of values), LZ4's fast coder (the disk tier's) and LZ4 HC
/// at level 4 (the background coder's in RAM), each with the
/// zstd-trained dictionary's bytes as the server uses them, and LZ4 fast
/// without one. Ratios are plain bytes over coded bytes (a value that
/// does not shrink counts at its plain size, as the server keeps it).
#[derive(Debug, Clone, PartialEq)]
pub struct Ratios {
    pub values: usize,
    pub zstd: f64,
    pub zstd_dict: f64,
    pub lz4_fast: f64,
    pub lz4_fast_dict: f64,
    pub lz4_hc4_dict: f64,
}

impl Ratios {
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "values": self.values,
            "zstd3": self.zstd,
            "zstd3_dict": self.zstd_dict,
            "lz4_fast": self.lz4_fast,
            "lz4_fast_dict": self.lz4_fast_dict,
            "lz4_hc4_dict": self.lz4_hc4_dict,
            "dictionary": "64 KiB, zstd-trained from the first 1 MiB of values (keys counted down from u64::MAX); the coded values are keys 0..values",
        })
    }
}

/// The server's dictionary size and training sample (`value::zcomp`).
const DICT_BYTES: usize = 64 << 10;
const SAMPLE_BYTES: usize = 1 << 20;

/// [`Ratios`] over keys `0..n` (a dictionary trained on other keys).
pub fn ratios(v: &TextValues, n: usize) -> Result<Ratios, String> {
    use cairn_engine::value::zcomp_lz4 as lz4;
    let mut samples = Vec::new();
    let mut sizes = Vec::new();
    let mut buf = Vec::new();
    let mut k = u64::MAX;
    while samples.len() < SAMPLE_BYTES {
        v.value_into(k, &mut buf);
        samples.extend_from_slice(&buf);
        sizes.push(buf.len());
        k -= 1;
    }
    let dict = zstd::dict::from_continuous(&samples, &sizes, DICT_BYTES)
        .map_err(|e| format!("training a dictionary: {e}"))?;
    let frame = |c: &mut zstd::bulk::Compressor| -> Result<(), String> {
        use zstd::zstd_safe::CParameter as P;
        for p in [
            P::ContentSizeFlag(false),
            P::ChecksumFlag(false),
            P::DictIdFlag(false),
        ] {
            c.set_parameter(p).map_err(|e| e.to_string())?;
        }
        Ok(())
    };
    let mut plain_c = zstd::bulk::Compressor::new(3).map_err(|e| e.to_string())?;
    frame(&mut plain_c)?;
    let mut dict_c =
        zstd::bulk::Compressor::with_dictionary(3, &dict).map_err(|e| e.to_string())?;
    frame(&mut dict_c)?;
    let ld = lz4::Lz4Dict::create(&dict).ok_or("preparing the LZ4 dictionary")?;
    let mut plain = 0usize;
    let mut coded = [0usize; 5];
    let mut out = Vec::new();
    for key in 0..n as u64 {
        v.value_into(key, &mut buf);
        plain += buf.len();
        let z =
            |c: &mut zstd::bulk::Compressor| c.compress(&buf).map(|x| x.len()).unwrap_or(buf.len());
        let mut l = |d: Option<&lz4::Lz4Dict>, level: i32| {
            out.clear();
            out.reserve(lz4::bound(buf.len()));
            if lz4::compress(d, &buf, level, &mut out) {
                out.len()
            } else {
                buf.len()
            }
        };
        let sizes = [
            z(&mut plain_c),
            z(&mut dict_c),
            l(None, 0),
            l(Some(&ld), 0),
            l(Some(&ld), 4),
        ];
        for (c, s) in coded.iter_mut().zip(sizes) {
            *c += s.min(buf.len());
        }
    }
    let r = |c: usize| plain as f64 / c.max(1) as f64;
    Ok(Ratios {
        values: n,
        zstd: r(coded[0]),
        zstd_dict: r(coded[1]),
        lz4_fast: r(coded[2]),
        lz4_fast_dict: r(coded[3]),
        lz4_hc4_dict: r(coded[4]),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text() -> String {
        let mut t = String::new();
        for i in 0..3000 {
            t.push_str(&format!("word{} of\tthe\nlicence{} ", i, i % 7));
        }
        t
    }

    fn corpus() -> Corpus {
        Corpus::from_texts(&[text().as_bytes(), b"and a second file"], "test").unwrap()
    }

    #[test]
    fn values_depend_only_on_seed_and_key() {
        let a = TextValues::new(corpus(), 2800, 7);
        let b = TextValues::new(corpus(), 2800, 7);
        let (mut x, mut y) = (Vec::new(), Vec::new());
        for k in [0u64, 1, 2, 999, u64::MAX] {
            a.value_into(k, &mut x);
            b.value_into(k, &mut y);
            assert_eq!(x, y, "key {k}");
            assert_eq!(x.len(), 2800);
            // Words joined by single spaces: no other whitespace.
            assert!(!x.iter().any(|c| *c == b'\n' || *c == b'\t'));
        }
        a.value_into(1, &mut x);
        a.value_into(2, &mut y);
        assert_ne!(x, y, "keys differ");
        let c = TextValues::new(corpus(), 2800, 8);
        c.value_into(1, &mut y);
        assert_ne!(x, y, "seeds differ");
        let small = TextValues::new(corpus(), 10, 7);
        small.value_into(1, &mut y);
        assert_eq!(y.len(), 10);
        assert_eq!(&x[..10], &y[..], "a smaller size is a prefix");
    }

    /// The values as they were made before runs became slices (word by
    /// word): the same bytes, so runs before and after compare. Counts
    /// the runs that wrap past the corpus's end (the other path).
    fn value_word_by_word(v: &TextValues, key: u64, wrapped: &mut usize) -> Vec<u8> {
        let mut out = Vec::new();
        let n = v.corpus.words.len() as u64;
        let mut x = mix(v.seed ^ mix(key));
        while out.len() < v.size {
            x |= 1;
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let (start, run) = ((x >> 16) % n, 3 + x % 12);
            *wrapped += usize::from(start + run > n);
            for k in 0..run {
                if !out.is_empty() {
                    out.push(b' ');
                }
                out.extend_from_slice(v.corpus.word(((start + k) % n) as usize));
                if out.len() >= v.size {
                    break;
                }
            }
        }
        out.truncate(v.size);
        out
    }

    #[test]
    fn runs_copied_as_slices_make_the_word_by_word_values() {
        let mut wrapped = 0;
        for (size, seed) in [(2800, 7), (1, 3), (57, 9), (100_000, 11)] {
            let v = TextValues::new(corpus(), size, seed);
            let mut got = Vec::new();
            for k in 0..400u64 {
                v.value_into(k, &mut got);
                let want = value_word_by_word(&v, k, &mut wrapped);
                assert_eq!(got, want, "size {size} key {k}");
            }
        }
        assert!(wrapped > 0, "no run wrapped past the corpus's end");
    }

    #[test]
    fn verification_catches_a_flipped_byte() {
        let v = TextValues::new(corpus(), 2800, 3);
        let mut got = Vec::new();
        let mut want = Vec::new();
        v.value_into(42, &mut got);
        assert_eq!(v.verify(42, &got, &mut want), Ok(()));
        assert!(
            v.verify(43, &got, &mut want).is_err(),
            "another key's value"
        );
        got[1234] ^= 0x20;
        let m = v.verify(42, &got, &mut want).unwrap_err();
        assert_eq!((m.offset, m.got_len, m.want_len), (1234, 2800, 2800));
        got[1234] ^= 0x20;
        got.pop();
        let m = v.verify(42, &got, &mut want).unwrap_err();
        assert_eq!((m.offset, m.got_len), (2799, 2799));
        assert!(m.to_string().contains("first difference at byte 2799"));
    }

    #[test]
    fn corpus_fingerprint_follows_the_words() {
        let a = corpus();
        let b = corpus();
        assert_eq!(a.fingerprint(), b.fingerprint());
        assert_eq!(a.files(), 2);
        assert_eq!(a.words(), 3000 * 4 + 4);
        let t = text();
        let c = Corpus::from_texts(&[t.as_bytes(), b"and a second file", b"extra"], "t").unwrap();
        assert_ne!(a.fingerprint(), c.fingerprint());
        assert!(Corpus::from_texts(&[b"too few words"], "t").is_err());
    }

    #[test]
    fn gzip_and_dictzip_files_are_decoded() {
        use std::io::Write;
        let dir = std::env::temp_dir().join(format!("cairn-corpus-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let t = text();
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(t.as_bytes()).unwrap();
        let gz = enc.finish().unwrap();
        for name in ["a.txt.gz", "b.dict.dz"] {
            std::fs::write(dir.join(name), &gz).unwrap();
        }
        std::fs::write(dir.join("c.txt"), t.as_bytes()).unwrap();
        for name in ["a.txt.gz", "b.dict.dz", "c.txt"] {
            assert_eq!(read_text(&dir.join(name)).unwrap(), t.as_bytes(), "{name}");
        }
        let c = Corpus::from_paths(std::slice::from_ref(&dir)).unwrap();
        assert_eq!((c.files(), c.words()), (3, 3 * 3000 * 4));
        assert_eq!(
            c.bytes(),
            3 * t.split_whitespace().map(str::len).sum::<usize>()
        );
        // A file that is not gzip fails to decode rather than passing as text.
        std::fs::write(dir.join("bad.gz"), b"plain").unwrap();
        assert!(read_text(&dir.join("bad.gz")).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn ratios_order_the_coders() {
        // The test corpus is a few repeated words: every coder shrinks it,
        // a dictionary helps, HC beats fast.
        let v = TextValues::new(corpus(), 2800, 5);
        let r = ratios(&v, 50).unwrap();
        assert_eq!(r.values, 50);
        assert!(r.lz4_fast > 1.0, "{r:?}");
        assert!(r.zstd_dict > r.zstd, "{r:?}");
        assert!(r.lz4_fast_dict > r.lz4_fast, "{r:?}");
        assert!(r.lz4_hc4_dict > r.lz4_fast_dict, "{r:?}");
        let j = r.to_json();
        assert_eq!(j["values"], 50);
        assert!(j["zstd3_dict"].as_f64().unwrap() > 1.0);
        // The same values give the same ratios.
        assert_eq!(ratios(&v, 50).unwrap(), r);
    }

    #[test]
    fn values_are_not_windows_of_one_passage() {
        // Runs of 3-14 words from random places: a value's first 200 bytes
        // are not found in the next key's value.
        let v = TextValues::new(corpus(), 2800, 1);
        let (mut x, mut y) = (Vec::new(), Vec::new());
        v.value_into(10, &mut x);
        v.value_into(11, &mut y);
        assert!(!y.windows(200).any(|w| w == &x[..200]));
    }
}
