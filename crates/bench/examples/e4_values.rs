//! Writes E4's values and a dictionary trained as the server trains one,
//! for scripts/lz4_tier_cost (the disk tier's LZ4 coding measured outside
//! the server): `DIR/dict.bin` (64 KiB, zstd's trainer over 1 MiB of
//! values, as `value::zcomp` and `cairn-bench corpus` train) and
//! `DIR/values.bin` (1,000 values of 2,800 bytes back to back, seed 25:
//! the first keys E4's load writes).
//! usage: cargo run --release -p cairn-bench --example e4_values -- DIR
use cairn_bench::corpus::{Corpus, TextValues};

fn main() -> Result<(), String> {
    let dir = std::env::args().nth(1).ok_or("usage: e4_values DIR")?;
    let t = TextValues::new(Corpus::debian()?, 2800, 25);
    let (mut samples, mut sizes, mut buf) = (Vec::new(), Vec::new(), Vec::new());
    // The training sample comes from keys the measured values are not.
    let mut k = u64::MAX;
    while samples.len() < 1 << 20 {
        t.value_into(k, &mut buf);
        samples.extend_from_slice(&buf);
        sizes.push(buf.len());
        k -= 1;
    }
    let dict =
        zstd::dict::from_continuous(&samples, &sizes, 64 << 10).map_err(|e| e.to_string())?;
    let mut values = Vec::new();
    for key in 0..1000u64 {
        t.value_into(key, &mut buf);
        values.extend_from_slice(&buf);
    }
    let w = |name: &str, b: &[u8]| {
        std::fs::write(format!("{dir}/{name}"), b).map_err(|e| format!("{dir}/{name}: {e}"))
    };
    w("dict.bin", &dict)?;
    w("values.bin", &values)
}
