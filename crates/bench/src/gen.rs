//! YCSB's CoreWorkload generators, re-implemented so that a run of
//! `cairn-bench ycsb` draws keys, fields and operations from the same
//! distributions as YCSB 0.17 (`site.ycsb.generator.*` and
//! `site.ycsb.workloads.CoreWorkload`), and so names the same records.
//!
//! Every generator here is plain data plus a caller-supplied random number
//! generator: each client thread owns its own copies (no shared state on the
//! hot path), except the insert counter, [`AckCounter`], which is shared like
//! YCSB's `AcknowledgedCounterGenerator` and uses only atomics.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rand::Rng;

/// YCSB's `Utils.FNV_OFFSET_BASIS_64`.
pub const FNV_OFFSET_BASIS_64: u64 = 0xCBF2_9CE4_8422_2325;
/// YCSB's `Utils.FNV_PRIME_64`.
pub const FNV_PRIME_64: u64 = 1_099_511_628_211;

/// YCSB's `Utils.fnvhash64(long)`: FNV-1 over the 8 low-order bytes of the
/// value, least significant first, then Java's `Math.abs` of the signed
/// result (which leaves `Long.MIN_VALUE` negative, as Java does).
pub fn fnvhash64(val: i64) -> i64 {
    let mut val = val;
    let mut hash = FNV_OFFSET_BASIS_64;
    for _ in 0..8 {
        let octet = (val & 0xff) as u64;
        // Java's `>>` on a long is an arithmetic shift.
        val >>= 8;
        hash ^= octet;
        hash = hash.wrapping_mul(FNV_PRIME_64);
    }
    (hash as i64).wrapping_abs()
}

/// Java's `String.hashCode()` for an ASCII string (YCSB's Redis binding uses
/// it as the key's score in the `_indices` sorted set). For ASCII, UTF-16
/// code units equal the bytes.
pub fn java_string_hash(s: &[u8]) -> i32 {
    let mut h: i32 = 0;
    for &b in s {
        h = h.wrapping_mul(31).wrapping_add(b as i32);
    }
    h
}

/// CoreWorkload's `buildKeyName`: `user` followed by the key number (hashed
/// with [`fnvhash64`] unless inserts are ordered), left-padded with zeros to
/// `zeropadding` digits. Appends to `out`.
pub fn build_key_name(keynum: u64, zeropadding: usize, ordered: bool, out: &mut Vec<u8>) {
    let n: i64 = if ordered {
        keynum as i64
    } else {
        fnvhash64(keynum as i64)
    };
    let mut b = itoa::Buffer::new();
    let digits = b.format(n);
    out.extend_from_slice(b"user");
    for _ in digits.len()..zeropadding {
        out.push(b'0');
    }
    out.extend_from_slice(digits.as_bytes());
}

/// `ZipfianGenerator.zetastatic(st, n, theta, initialsum)`.
pub fn zeta(st: u64, n: u64, theta: f64, initial: f64) -> f64 {
    let mut sum = initial;
    for i in st..n {
        sum += 1.0 / ((i + 1) as f64).powf(theta);
    }
    sum
}

/// YCSB's `ZipfianGenerator.ZIPFIAN_CONSTANT`.
pub const ZIPFIAN_CONSTANT: f64 = 0.99;

/// YCSB's `ZipfianGenerator` (Gray et al., "Quickly Generating
/// Billion-Record Synthetic Databases", SIGMOD 1994): item `min` is the most
/// popular, `min + 1` the next, and so on.
#[derive(Clone, Debug)]
pub struct Zipfian {
    items: u64,
    base: u64,
    theta: f64,
    zeta2theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
    count_for_zeta: u64,
}

impl Zipfian {
    /// Items `min..=max` with constant `theta`; computes zeta(n) (O(n)).
    pub fn new(min: u64, max: u64, theta: f64) -> Zipfian {
        let items = max - min + 1;
        Zipfian::with_zetan(min, max, theta, zeta(0, items, theta, 0.0))
    }

    /// Items `min..=max` with a precomputed zeta(n).
    pub fn with_zetan(min: u64, max: u64, theta: f64, zetan: f64) -> Zipfian {
        let items = max - min + 1;
        let zeta2theta = zeta(0, 2, theta, 0.0);
        let eta = (1.0 - (2.0 / items as f64).powf(1.0 - theta)) / (1.0 - zeta2theta / zetan);
        Zipfian {
            items,
            base: min,
            theta,
            zeta2theta,
            alpha: 1.0 / (1.0 - theta),
            zetan,
            eta,
            count_for_zeta: items,
        }
    }

    /// The number of items the generator was built for.
    pub fn items(&self) -> u64 {
        self.items
    }

    /// zeta(n) currently in use.
    pub fn zetan(&self) -> f64 {
        self.zetan
    }

    /// `nextValue()`: a draw over the configured items.
    pub fn next<R: Rng + ?Sized>(&mut self, rng: &mut R) -> u64 {
        self.next_with_count(self.items, rng)
    }

    /// `nextLong(itemcount)`: a draw over `itemcount` items. As in YCSB, a
    /// larger count than before extends zeta incrementally; a smaller one
    /// keeps the old zeta (YCSB's `allowitemcountdecrease = false`).
    pub fn next_with_count<R: Rng + ?Sized>(&mut self, itemcount: u64, rng: &mut R) -> u64 {
        if itemcount > self.count_for_zeta {
            self.zetan = zeta(self.count_for_zeta, itemcount, self.theta, self.zetan);
            self.count_for_zeta = itemcount;
            // YCSB recomputes eta with the original `items`, not itemcount.
            self.eta = (1.0 - (2.0 / self.items as f64).powf(1.0 - self.theta))
                / (1.0 - self.zeta2theta / self.zetan);
        }
        let u: f64 = rng.random();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return self.base;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return self.base + 1;
        }
        // Java's (long) cast truncates toward zero and saturates, as `as` does.
        self.base + (itemcount as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64
    }
}

/// `ScrambledZipfianGenerator.ZETAN`: zeta(10^10, 0.99).
pub const SCRAMBLED_ZETAN: f64 = 26.469_028_201_783_02;
/// `ScrambledZipfianGenerator.ITEM_COUNT` (YCSB 0.17; the value ZETAN was
/// computed for).
pub const SCRAMBLED_ITEM_COUNT: u64 = 10_000_000_000;

/// YCSB's `ScrambledZipfianGenerator`: a zipfian draw over 10^10 items,
/// hashed with FNV-64 and folded onto `min..=max`, so popular items are
/// scattered over the key space instead of clustered at `min`.
#[derive(Clone, Debug)]
pub struct ScrambledZipfian {
    min: u64,
    itemcount: u64,
    gen: Zipfian,
}

impl ScrambledZipfian {
    pub fn new(min: u64, max: u64) -> ScrambledZipfian {
        ScrambledZipfian {
            min,
            itemcount: max - min + 1,
            gen: Zipfian::with_zetan(0, SCRAMBLED_ITEM_COUNT, ZIPFIAN_CONSTANT, SCRAMBLED_ZETAN),
        }
    }

    pub fn next<R: Rng + ?Sized>(&mut self, rng: &mut R) -> u64 {
        let v = self.gen.next(rng);
        self.min + (fnvhash64(v as i64) as u64) % self.itemcount
    }

    /// YCSB's `mean()`: the middle of the range (the hash spreads the draws).
    pub fn mean(&self) -> f64 {
        self.min as f64 + (self.itemcount - 1) as f64 / 2.0
    }
}

/// YCSB's `SkewedLatestGenerator`: the most recently inserted record is the
/// most popular, then the one before it, and so on.
#[derive(Clone, Debug)]
pub struct SkewedLatest {
    zipf: Zipfian,
}

impl SkewedLatest {
    /// `new SkewedLatestGenerator(basis)` where `basis.lastValue()` is
    /// `last`: a `ZipfianGenerator(last)` (items `0..last`).
    pub fn new(last: u64) -> SkewedLatest {
        SkewedLatest {
            zipf: Zipfian::new(0, last.max(1) - 1, ZIPFIAN_CONSTANT),
        }
    }

    /// `nextValue()` given the insert counter's current `lastValue()`.
    pub fn next<R: Rng + ?Sized>(&mut self, last: u64, rng: &mut R) -> u64 {
        let z = self.zipf.next_with_count(last, rng);
        last.saturating_sub(z)
    }
}

/// YCSB's `HotspotIntegerGenerator`: a fraction `hot_opn` of draws fall
/// uniformly in the first `hot_set` fraction of `lower..=upper`, the rest
/// uniformly in the remainder.
#[derive(Clone, Debug)]
pub struct Hotspot {
    lower: u64,
    hot_interval: u64,
    cold_interval: u64,
    hot_opn: f64,
}

impl Hotspot {
    pub fn new(lower: u64, upper: u64, hot_set: f64, hot_opn: f64) -> Hotspot {
        let hot_set = hot_set.clamp(0.0, 1.0);
        let hot_opn = hot_opn.clamp(0.0, 1.0);
        let interval = upper - lower + 1;
        let hot_interval = (interval as f64 * hot_set) as u64;
        Hotspot {
            lower,
            hot_interval,
            cold_interval: interval - hot_interval,
            hot_opn,
        }
    }

    pub fn next<R: Rng + ?Sized>(&mut self, rng: &mut R) -> u64 {
        // YCSB divides by zero on an empty set; we fall back to the other one.
        let hot = rng.random::<f64>() < self.hot_opn;
        if (hot && self.hot_interval > 0) || self.cold_interval == 0 {
            self.lower + rng.random_range(0..self.hot_interval.max(1))
        } else {
            self.lower + self.hot_interval + rng.random_range(0..self.cold_interval)
        }
    }

    /// The hot set is `lower..lower + hot_len()`.
    pub fn hot_len(&self) -> u64 {
        self.hot_interval
    }
}

/// A number generator selected by name, as CoreWorkload's properties do
/// (`fieldlengthdistribution`, `scanlengthdistribution`).
#[derive(Clone, Debug)]
pub enum Length {
    Constant(u64),
    Uniform(u64, u64),
    Zipfian(Zipfian),
}

impl Length {
    pub fn next<R: Rng + ?Sized>(&mut self, rng: &mut R) -> u64 {
        match self {
            Length::Constant(n) => *n,
            Length::Uniform(lo, hi) => rng.random_range(*lo..=*hi),
            Length::Zipfian(z) => z.next(rng),
        }
    }

    pub fn max(&self) -> u64 {
        match self {
            Length::Constant(n) => *n,
            Length::Uniform(_, hi) => *hi,
            Length::Zipfian(z) => z.base + z.items - 1,
        }
    }
}

/// The request distributions of CoreWorkload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Distribution {
    Uniform,
    Zipfian,
    Latest,
    Hotspot,
    Sequential,
}

impl std::str::FromStr for Distribution {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "uniform" => Distribution::Uniform,
            "zipfian" => Distribution::Zipfian,
            "latest" => Distribution::Latest,
            "hotspot" => Distribution::Hotspot,
            "sequential" => Distribution::Sequential,
            _ => {
                return Err(format!(
                    "unknown request distribution {s:?} (uniform, zipfian, latest, hotspot, sequential)"
                ))
            }
        })
    }
}

/// CoreWorkload's `keychooser` plus `nextKeynum()`: draws a record number
/// that has been inserted (acknowledged) already.
#[derive(Clone, Debug)]
pub enum KeyChooser {
    Uniform {
        lo: u64,
        hi: u64,
    },
    Zipfian(ScrambledZipfian),
    Latest(SkewedLatest),
    Hotspot(Hotspot),
    /// YCSB's `SequentialGenerator`: each thread walks the range from its
    /// own offset (YCSB shares one counter; per-thread walks keep the hot
    /// path free of shared writes and visit the same keys).
    Sequential {
        lo: u64,
        hi: u64,
        next: u64,
    },
}

impl KeyChooser {
    /// Builds the chooser as `CoreWorkload.init` does. `expected_new_keys`
    /// is `operationcount * insertproportion * 2` (YCSB's fudge factor).
    pub fn new(
        dist: Distribution,
        record_count: u64,
        expected_new_keys: u64,
        hot_set: f64,
        hot_opn: f64,
    ) -> KeyChooser {
        let last = record_count.max(1) - 1;
        match dist {
            Distribution::Uniform => KeyChooser::Uniform { lo: 0, hi: last },
            Distribution::Zipfian => {
                KeyChooser::Zipfian(ScrambledZipfian::new(0, record_count + expected_new_keys))
            }
            Distribution::Latest => KeyChooser::Latest(SkewedLatest::new(last)),
            Distribution::Hotspot => KeyChooser::Hotspot(Hotspot::new(0, last, hot_set, hot_opn)),
            Distribution::Sequential => KeyChooser::Sequential {
                lo: 0,
                hi: last,
                next: 0,
            },
        }
    }

    /// Gives a sequential chooser a per-thread starting point.
    pub fn offset(&mut self, thread: usize, threads: usize) {
        if let KeyChooser::Sequential { lo, hi, next } = self {
            let n = *hi - *lo + 1;
            *next = *lo + n * thread as u64 / threads.max(1) as u64;
        }
    }

    /// `nextKeynum()`: redraws until the number is at most `last` (the
    /// highest acknowledged insert), as YCSB does.
    pub fn next_keynum<R: Rng + ?Sized>(&mut self, last: u64, rng: &mut R) -> u64 {
        loop {
            let k = match self {
                KeyChooser::Uniform { lo, hi } => rng.random_range(*lo..=*hi),
                KeyChooser::Zipfian(z) => z.next(rng),
                KeyChooser::Latest(l) => l.next(last, rng),
                KeyChooser::Hotspot(h) => h.next(rng),
                KeyChooser::Sequential { lo, hi, next } => {
                    let k = *next;
                    *next = if *next >= *hi { *lo } else { *next + 1 };
                    k
                }
            };
            if k <= last {
                return k;
            }
        }
    }
}

/// The operations of CoreWorkload, in `createOperationGenerator`'s order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum YcsbOp {
    Read,
    Update,
    Insert,
    Scan,
    ReadModifyWrite,
}

impl YcsbOp {
    pub const ALL: [YcsbOp; 5] = [
        YcsbOp::Read,
        YcsbOp::Update,
        YcsbOp::Insert,
        YcsbOp::Scan,
        YcsbOp::ReadModifyWrite,
    ];
}

/// YCSB's `DiscreteGenerator` over the five operations.
#[derive(Clone, Debug)]
pub struct OpChooser {
    weights: [f64; 5],
    sum: f64,
}

impl OpChooser {
    /// Proportions in the order read, update, insert, scan, read-modify-write.
    pub fn new(weights: [f64; 5]) -> Result<OpChooser, String> {
        if weights.iter().any(|w| !w.is_finite() || *w < 0.0) {
            return Err("operation proportions must be finite and non-negative".into());
        }
        let sum: f64 = weights.iter().sum();
        if sum <= 0.0 {
            return Err("all operation proportions are zero".into());
        }
        Ok(OpChooser { weights, sum })
    }

    pub fn next<R: Rng + ?Sized>(&self, rng: &mut R) -> YcsbOp {
        let mut val: f64 = rng.random();
        for (i, w) in self.weights.iter().enumerate() {
            let p = w / self.sum;
            if val < p {
                return YcsbOp::ALL[i];
            }
            val -= p;
        }
        // Rounding left a sliver: the last operation with a weight.
        let i = self.weights.iter().rposition(|w| *w > 0.0).unwrap_or(0);
        YcsbOp::ALL[i]
    }
}

/// YCSB's `AcknowledgedCounterGenerator`: hands out insert numbers, and
/// `last()` is the highest number below which every insert has completed,
/// so readers never pick a record still being written. Lock-free: a ring of
/// flags plus a try-lock that only the acknowledging (inserting) threads
/// take, exactly like YCSB's `tryLock`.
pub struct AckCounter {
    next: AtomicU64,
    limit: AtomicU64,
    window: Box<[AtomicBool]>,
    lock: AtomicBool,
}

const ACK_WINDOW: usize = 1 << 16;

impl AckCounter {
    /// The next value handed out is `start`; `last()` is `start - 1`.
    pub fn new(start: u64) -> AckCounter {
        AckCounter {
            next: AtomicU64::new(start),
            limit: AtomicU64::new(start.wrapping_sub(1)),
            window: (0..ACK_WINDOW).map(|_| AtomicBool::new(false)).collect(),
            lock: AtomicBool::new(false),
        }
    }

    pub fn next_value(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// The highest value such that it and all below are acknowledged.
    pub fn last(&self) -> u64 {
        self.limit.load(Ordering::Acquire)
    }

    /// How many values have been handed out so far (the next value).
    pub fn issued(&self) -> u64 {
        self.next.load(Ordering::Relaxed)
    }

    /// Marks `value` done and advances `last()` over every contiguous
    /// acknowledged value.
    pub fn acknowledge(&self, value: u64) {
        // A value more than a window ahead of `last()` would overwrite an
        // unconsumed slot; help sweep and wait for the window to move (YCSB
        // throws here).
        while value.wrapping_sub(self.last()) as usize >= ACK_WINDOW {
            self.sweep();
            std::thread::yield_now();
        }
        self.window[(value as usize) % ACK_WINDOW].store(true, Ordering::Release);
        self.sweep();
    }

    /// Advances `last()` over acknowledged slots if no other thread is
    /// doing so right now.
    fn sweep(&self) {
        if self
            .lock
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return;
        }
        let mut limit = self.limit.load(Ordering::Relaxed);
        loop {
            let idx = (limit.wrapping_add(1) as usize) % ACK_WINDOW;
            if !self.window[idx].swap(false, Ordering::AcqRel) {
                break;
            }
            limit = limit.wrapping_add(1);
        }
        self.limit.store(limit, Ordering::Release);
        self.lock.store(false, Ordering::Release);
    }
}

/// YCSB's `RandomByteIterator` alphabet: printable bytes from `' '` upward,
/// six random bits each. Fills `out` with `len` such bytes.
pub fn random_ascii<R: Rng + ?Sized>(rng: &mut R, len: usize, out: &mut Vec<u8>) {
    let mut left = len;
    while left > 0 {
        let mut bits: u64 = rng.random();
        let take = left.min(10);
        for _ in 0..take {
            out.push(b' ' + (bits & 63) as u8);
            bits >>= 6;
        }
        left -= take;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    fn rng() -> SmallRng {
        SmallRng::seed_from_u64(0x5eed)
    }

    #[test]
    fn fnv_matches_ycsb() {
        // Values printed by YCSB's own Utils.fnvhash64 (Java), and the first
        // keys of every YCSB load (user6284781860667377211, ...).
        let known: [(i64, i64); 9] = [
            (0, 6284781860667377211),
            (1, 8517097267634966620),
            (2, 1820151046732198393),
            (3, 4052466453699787802),
            (4, 3232700585171816769),
            (12345, 1792800413050876852),
            (999999, 2744965632448235251),
            (2147483647, 627943977067101855),
            (10000000000, 1201321332300452516),
        ];
        for (k, h) in known {
            assert_eq!(fnvhash64(k), h, "fnvhash64({k})");
        }
    }

    #[test]
    fn key_layout() {
        let mut k = Vec::new();
        build_key_name(0, 1, false, &mut k);
        assert_eq!(k, b"user6284781860667377211");
        k.clear();
        build_key_name(1, 1, false, &mut k);
        assert_eq!(k, b"user8517097267634966620");
        k.clear();
        build_key_name(7, 1, true, &mut k);
        assert_eq!(k, b"user7");
        k.clear();
        build_key_name(7, 5, true, &mut k);
        assert_eq!(k, b"user00007");
        k.clear();
        build_key_name(2, 25, false, &mut k);
        assert_eq!(k, b"user0000001820151046732198393");
    }

    #[test]
    fn java_hash_matches() {
        // From Java's String.hashCode().
        assert_eq!(java_string_hash(b"user6284781860667377211"), -594971599);
        assert_eq!(java_string_hash(b"user8517097267634966620"), -314243905);
        assert_eq!(java_string_hash(b"user1820151046732198393"), -338223234);
        assert_eq!(java_string_hash(b"user7"), 111578572);
        assert_eq!(java_string_hash(b"user"), 3599307);
        assert_eq!(java_string_hash(b""), 0);
    }

    #[test]
    fn zeta_matches_java() {
        // Java: sum over i<1000 of 1/(i+1)^0.99.
        assert!((zeta(0, 1000, 0.99, 0.0) - 7.728953217284729).abs() < 1e-12);
        // ScrambledZipfianGenerator.ZETAN is zeta(10^10, 0.99); check the
        // asymptotic form n^(1-t)/(1-t) + zeta(t) agrees (zeta(0.99) =
        // -99.4228...).
        let n = SCRAMBLED_ITEM_COUNT as f64;
        let approx = n.powf(0.01) / 0.01 - 99.422_794;
        assert!((approx - SCRAMBLED_ZETAN).abs() < 0.01, "{approx}");
        // Incremental zeta equals the full sum.
        let part = zeta(0, 400, 0.99, 0.0);
        assert!((zeta(400, 1000, 0.99, part) - zeta(0, 1000, 0.99, 0.0)).abs() < 1e-12);
    }

    /// The exact zipf probability of rank `i` (0-based) among `n` items.
    fn zipf_p(i: u64, n: u64, theta: f64) -> f64 {
        1.0 / ((i + 1) as f64).powf(theta) / zeta(0, n, theta, 0.0)
    }

    #[test]
    fn zipfian_head_mean_and_skew() {
        let n = 1000;
        let mut z = Zipfian::new(0, n - 1, ZIPFIAN_CONSTANT);
        let mut r = rng();
        let draws = 2_000_000u64;
        let mut counts = vec![0u64; n as usize];
        let mut sum = 0f64;
        for _ in 0..draws {
            let v = z.next(&mut r);
            assert!(v < n, "{v} out of range");
            counts[v as usize] += 1;
            sum += v as f64;
        }
        // Gray's algorithm is exact for the two most popular items.
        for i in 0..2 {
            let got = counts[i as usize] as f64 / draws as f64;
            let want = zipf_p(i, n, 0.99);
            assert!(
                (got - want).abs() / want < 0.02,
                "P({i}) = {got}, want {want}"
            );
        }
        // Item 0 is about 12.9% of all draws at n = 1000 (1 / 7.729).
        assert!((counts[0] as f64 / draws as f64 - 0.1294).abs() < 0.003);
        // The mean: exact zipf mean within 5% (Gray's method approximates
        // the tail).
        let exact_mean: f64 = (0..n).map(|i| i as f64 * zipf_p(i, n, 0.99)).sum();
        let mean = sum / draws as f64;
        assert!(
            (mean - exact_mean).abs() / exact_mean < 0.05,
            "mean {mean}, zipf mean {exact_mean}"
        );
        // Skew: the log-log slope of frequency against rank over ranks
        // 10..300 is about -theta.
        let (mut sx, mut sy, mut sxx, mut sxy, mut m) = (0.0, 0.0, 0.0, 0.0, 0.0);
        for (i, c) in counts.iter().enumerate().take(300).skip(10) {
            let x = ((i + 1) as f64).ln();
            let y = (*c as f64).ln();
            sx += x;
            sy += y;
            sxx += x * x;
            sxy += x * y;
            m += 1.0;
        }
        let slope = (m * sxy - sx * sy) / (m * sxx - sx * sx);
        assert!((slope + 0.99).abs() < 0.12, "log-log slope {slope}");
        // Monotone on average: the first 10 ranks get more than the next 90.
        let top10: u64 = counts[..10].iter().sum();
        let next90: u64 = counts[10..100].iter().sum();
        assert!(top10 > next90 / 2 && counts[0] > counts[1] && counts[1] > counts[5]);
    }

    #[test]
    fn zipfian_grows_incrementally() {
        let mut z = Zipfian::new(0, 99, ZIPFIAN_CONSTANT);
        let mut r = rng();
        let full = zeta(0, 200, 0.99, 0.0);
        for _ in 0..10_000 {
            assert!(z.next_with_count(200, &mut r) < 200);
        }
        assert!((z.zetan() - full).abs() < 1e-9);
        // A smaller count never recomputes (YCSB's default).
        z.next_with_count(50, &mut r);
        assert!((z.zetan() - full).abs() < 1e-9);
    }

    #[test]
    fn scrambled_zipfian_spreads_the_head() {
        let (min, max) = (0u64, 9_999u64);
        let mut s = ScrambledZipfian::new(min, max);
        let mut r = rng();
        let draws = 1_000_000u64;
        let mut counts = vec![0u64; 10_000];
        let mut sum = 0f64;
        for _ in 0..draws {
            let v = s.next(&mut r);
            assert!((min..=max).contains(&v));
            counts[v as usize] += 1;
            sum += v as f64;
        }
        // YCSB: "the mean is simply the middle of the range" -- roughly: the
        // head items land where FNV puts them. The exact expectation is the
        // zipf head (ranks below 10^5, half the mass) at its hashed slots
        // plus the rest spread uniformly.
        let mean = sum / draws as f64;
        assert!((mean - s.mean()).abs() / s.mean() < 0.05, "mean {mean}");
        let mut head_mass = 0.0;
        let mut head_mean = 0.0;
        for z in 0..100_000u64 {
            let p = 1.0 / ((z + 1) as f64).powf(0.99) / SCRAMBLED_ZETAN;
            head_mass += p;
            head_mean += p * (fnvhash64(z as i64) as u64 % 10_000) as f64;
        }
        let want = head_mean + (1.0 - head_mass) * 4999.5;
        assert!(
            (mean - want).abs() / want < 0.01,
            "mean {mean}, expected {want}"
        );
        // The most popular item is zipf item 0 hashed: fnv(0) % n, drawn
        // with probability at least 1/ZETAN (3.78%).
        let hot = (fnvhash64(0) as u64 % 10_000) as usize;
        let (argmax, _) = counts.iter().enumerate().max_by_key(|(_, c)| **c).unwrap();
        assert_eq!(argmax, hot);
        let p = counts[hot] as f64 / draws as f64;
        assert!((p - 1.0 / SCRAMBLED_ZETAN).abs() < 0.004, "P(hot) = {p}");
        // Skewed: the top 1% of items get far more than 1% of draws.
        let mut sorted = counts.clone();
        sorted.sort_unstable_by(|a, b| b.cmp(a));
        let top: u64 = sorted[..100].iter().sum();
        assert!(top as f64 / draws as f64 > 0.2, "top 1% share {top}");
    }

    #[test]
    fn latest_favours_newest() {
        let last = 999u64;
        let mut l = SkewedLatest::new(last);
        let mut r = rng();
        let draws = 500_000;
        let mut at_last = 0;
        let mut near = 0;
        for _ in 0..draws {
            let v = l.next(last, &mut r);
            assert!(v <= last);
            if v == last {
                at_last += 1;
            }
            if v + 10 > last {
                near += 1;
            }
        }
        // P(last) is the zipf head probability over `last` items.
        let want = zipf_p(0, last, 0.99);
        let got = at_last as f64 / draws as f64;
        assert!(
            (got - want).abs() / want < 0.03,
            "P(latest) {got} want {want}"
        );
        assert!(near as f64 / draws as f64 > 0.3);
        // After more inserts the newest key is the favourite.
        let mut hits = 0;
        for _ in 0..10_000 {
            if l.next(1500, &mut r) == 1500 {
                hits += 1;
            }
        }
        assert!(hits > 1000, "{hits}");
    }

    #[test]
    fn hotspot_fractions() {
        let mut h = Hotspot::new(0, 9_999, 0.2, 0.8);
        assert_eq!(h.hot_len(), 2_000);
        let mut r = rng();
        let draws = 200_000;
        let mut hot = 0;
        for _ in 0..draws {
            let v = h.next(&mut r);
            assert!(v <= 9_999);
            if v < 2_000 {
                hot += 1;
            }
        }
        let f = hot as f64 / draws as f64;
        assert!((f - 0.8).abs() < 0.01, "hot fraction {f}");
    }

    #[test]
    fn key_chooser_respects_acknowledged_limit() {
        let mut r = rng();
        for dist in [
            Distribution::Uniform,
            Distribution::Zipfian,
            Distribution::Latest,
            Distribution::Hotspot,
            Distribution::Sequential,
        ] {
            let mut c = KeyChooser::new(dist, 1000, 100, 0.2, 0.8);
            for _ in 0..20_000 {
                assert!(c.next_keynum(999, &mut r) <= 999, "{dist:?}");
            }
        }
        // Zipfian's key space includes expected inserts, but never returns
        // one not yet acknowledged.
        let mut c = KeyChooser::new(Distribution::Zipfian, 10, 1000, 0.2, 0.8);
        for _ in 0..1000 {
            assert!(c.next_keynum(9, &mut r) <= 9);
        }
    }

    #[test]
    fn op_chooser_proportions() {
        let c = OpChooser::new([0.5, 0.5, 0.0, 0.0, 0.0]).unwrap();
        let mut r = rng();
        let mut reads = 0;
        for _ in 0..100_000 {
            match c.next(&mut r) {
                YcsbOp::Read => reads += 1,
                YcsbOp::Update => {}
                op => panic!("unexpected {op:?}"),
            }
        }
        assert!((reads as f64 / 100_000.0 - 0.5).abs() < 0.01);
        let c = OpChooser::new([0.0, 0.0, 0.05, 0.95, 0.0]).unwrap();
        let scans = (0..100_000)
            .filter(|_| c.next(&mut r) == YcsbOp::Scan)
            .count();
        assert!((scans as f64 / 100_000.0 - 0.95).abs() < 0.01);
        assert!(OpChooser::new([0.0; 5]).is_err());
        assert!(OpChooser::new([-1.0, 2.0, 0.0, 0.0, 0.0]).is_err());
    }

    #[test]
    fn ack_counter_is_contiguous() {
        let c = AckCounter::new(100);
        assert_eq!(c.last(), 99);
        let a = c.next_value();
        let b = c.next_value();
        let d = c.next_value();
        assert_eq!((a, b, d), (100, 101, 102));
        c.acknowledge(b);
        assert_eq!(c.last(), 99, "a gap keeps last() back");
        c.acknowledge(a);
        assert_eq!(c.last(), 101);
        c.acknowledge(d);
        assert_eq!(c.last(), 102);
        // Concurrent acknowledgers end contiguous.
        let c = std::sync::Arc::new(AckCounter::new(0));
        let hs: Vec<_> = (0..4)
            .map(|_| {
                let c = c.clone();
                std::thread::spawn(move || {
                    for _ in 0..50_000 {
                        let v = c.next_value();
                        c.acknowledge(v);
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        // The last acknowledger may have lost the try-lock race; one more
        // acknowledgement sweeps up.
        let v = c.next_value();
        c.acknowledge(v);
        assert_eq!(c.last(), 200_000);
    }

    #[test]
    fn random_ascii_alphabet() {
        let mut r = rng();
        let mut v = Vec::new();
        random_ascii(&mut r, 1000, &mut v);
        assert_eq!(v.len(), 1000);
        assert!(v.iter().all(|b| (32..96).contains(b)));
    }
}
