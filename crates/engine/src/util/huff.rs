//! An order-0 canonical Huffman coder for packed value buffers.
//!
//! Why an entropy coder and not an LZ coder: the data it is for (YCSB-like
//! records, text fields) is often random text over a small alphabet, which
//! has no repeats for LZ to find but only ~6 bits of information per byte.
//! An order-0 code takes that 25% and costs little CPU: encoding is one
//! pass to count and one to write bits, decoding one table lookup per byte.
//!
//! Format of a compressed blob:
//!
//! ```text
//! varint n              original length (LEB128)
//! code lengths          nibbles, low nibble first, for symbols 0..=255 in order:
//!                         1..=11  this symbol's code length
//!                         0 c c   a run of (c + 1) unused symbols (c = next
//!                                 two nibbles, low first: 1..=256 symbols)
//!                       padded with a 0 nibble to a whole byte
//! bit stream            codes LSB-first, canonical (shorter codes first,
//!                       then by symbol), bit-reversed so an 11-bit peek
//!                       indexes the decode table directly
//! ```
//!
//! Every decode checks its input: a blob that was not produced here (or was
//! damaged) gives `None`, never a panic or an over-long output.

/// Longest code, in bits. 11 keeps the decode table at 2048 entries (4 KiB,
/// on the stack, rebuilt per blob) while costing nothing measurable on
/// realistic inputs (a byte alphabet needs 8 bits when flat).
pub const MAX_BITS: u32 = 11;

const TABLE_SIZE: usize = 1 << MAX_BITS;

fn put_varint(out: &mut Vec<u8>, mut v: usize) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

fn get_varint(buf: &[u8]) -> Option<(usize, usize)> {
    let mut v: usize = 0;
    for (i, &b) in buf.iter().enumerate().take(10) {
        let bits = usize::from(b & 0x7f);
        let shift = 7 * i as u32;
        if shift >= usize::BITS || (shift > 0 && bits >> (usize::BITS - shift) != 0) {
            return None;
        }
        v |= bits << shift;
        if b & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

/// Huffman code lengths for `counts`, none longer than `MAX_BITS`. Symbols
/// with count 0 get length 0. A single used symbol gets length 1.
fn code_lengths(counts: &[u32; 256]) -> [u8; 256] {
    let mut counts = *counts;
    loop {
        let lens = huffman_lengths(&counts);
        if lens.iter().all(|&l| u32::from(l) <= MAX_BITS) {
            return lens;
        }
        // Too deep: flatten the distribution and try again (each round
        // halves the ratio between the rarest and the commonest symbol).
        for c in counts.iter_mut().filter(|c| **c > 0) {
            *c = (*c >> 1) | 1;
        }
    }
}

fn huffman_lengths(counts: &[u32; 256]) -> [u8; 256] {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let mut lens = [0u8; 256];
    // Nodes 0..256 are leaves; internal nodes follow. parent[i] links up.
    let mut parent = [0u16; 512];
    let mut heap: BinaryHeap<Reverse<(u64, u16)>> = BinaryHeap::with_capacity(256);
    for (s, &c) in counts.iter().enumerate() {
        if c > 0 {
            heap.push(Reverse((u64::from(c), s as u16)));
        }
    }
    match heap.len() {
        0 => return lens,
        1 => {
            let Reverse((_, s)) = heap.pop().expect("one element");
            lens[s as usize] = 1;
            return lens;
        }
        _ => {}
    }
    let mut next = 256u16;
    while heap.len() > 1 {
        let Reverse((ca, a)) = heap.pop().expect("len > 1");
        let Reverse((cb, b)) = heap.pop().expect("len > 1");
        parent[a as usize] = next;
        parent[b as usize] = next;
        heap.push(Reverse((ca + cb, next)));
        next += 1;
    }
    let root = next - 1;
    // Depth of internal nodes, computed top-down (parents have larger ids).
    let mut depth = [0u8; 512];
    for n in (256..root).rev() {
        depth[n as usize] = depth[parent[n as usize] as usize].saturating_add(1);
    }
    for s in 0..256 {
        if counts[s] > 0 {
            lens[s] = depth[parent[s] as usize].saturating_add(1);
        }
    }
    lens
}

/// Canonical codes for `lens`, bit-reversed for an LSB-first stream.
/// `None` if the lengths over-subscribe the code space.
fn canonical_codes(lens: &[u8; 256]) -> Option<[u16; 256]> {
    let mut bl_count = [0u32; MAX_BITS as usize + 1];
    for &l in lens.iter() {
        if u32::from(l) > MAX_BITS {
            return None;
        }
        bl_count[l as usize] += 1;
    }
    bl_count[0] = 0;
    // Kraft: the lengths must fit in the code space.
    let kraft: u32 = (1..=MAX_BITS as usize)
        .map(|l| bl_count[l] << (MAX_BITS as usize - l))
        .sum();
    if kraft > 1 << MAX_BITS {
        return None;
    }
    let mut next_code = [0u32; MAX_BITS as usize + 2];
    let mut code = 0u32;
    for bits in 1..=MAX_BITS as usize {
        code = (code + bl_count[bits - 1]) << 1;
        next_code[bits] = code;
    }
    let mut codes = [0u16; 256];
    for s in 0..256 {
        let l = lens[s] as usize;
        if l > 0 {
            let c = next_code[l];
            next_code[l] += 1;
            codes[s] = (c.reverse_bits() >> (32 - l)) as u16;
        }
    }
    Some(codes)
}

/// Appends the compressed form of `src` to `out`.
pub fn compress(src: &[u8], out: &mut Vec<u8>) {
    let mut counts = [0u32; 256];
    for &b in src {
        counts[b as usize] += 1;
    }
    let lens = code_lengths(&counts);
    let codes = canonical_codes(&lens).expect("Huffman lengths satisfy Kraft");
    put_varint(out, src.len());
    // Code lengths, nibble-coded.
    let mut nibbles: Vec<u8> = Vec::with_capacity(128);
    let mut s = 0;
    while s < 256 {
        if lens[s] == 0 {
            let mut run = 1;
            while s + run < 256 && lens[s + run] == 0 {
                run += 1;
            }
            let c = (run - 1) as u8;
            nibbles.extend_from_slice(&[0, c & 0xf, c >> 4]);
            s += run;
        } else {
            nibbles.push(lens[s]);
            s += 1;
        }
    }
    for pair in nibbles.chunks(2) {
        out.push(pair[0] | pair.get(1).map_or(0, |h| h << 4));
    }
    // Bit stream.
    let total_bits: usize = src
        .iter()
        .map(|&b| lens[b as usize] as usize)
        .sum::<usize>();
    out.reserve(total_bits.div_ceil(8));
    let mut acc: u64 = 0;
    let mut nbits = 0u32;
    for &b in src {
        acc |= u64::from(codes[b as usize]) << nbits;
        nbits += u32::from(lens[b as usize]);
        if nbits >= 32 {
            out.extend_from_slice(&(acc as u32).to_le_bytes());
            acc >>= 32;
            nbits -= 32;
        }
    }
    while nbits > 0 {
        out.push(acc as u8);
        acc >>= 8;
        nbits = nbits.saturating_sub(8);
    }
}

/// The original length recorded in a compressed blob.
pub fn decompressed_len(blob: &[u8]) -> Option<usize> {
    get_varint(blob).map(|(n, _)| n)
}

/// Appends the decompressed form of `blob` to `out`. `None` (with `out`
/// possibly partly written) if `blob` is not a valid compressed blob, or if
/// it would decode to more than `max_len` bytes.
pub fn decompress(blob: &[u8], max_len: usize, out: &mut Vec<u8>) -> Option<()> {
    let (n, mut pos) = get_varint(blob)?;
    if n > max_len {
        return None;
    }
    // Code lengths.
    let mut lens = [0u8; 256];
    let mut s = 0usize;
    let mut nib = 0usize; // nibble index from `pos`
    let nibble = |i: usize| -> Option<u8> {
        let b = *blob.get(pos + i / 2)?;
        Some(if i.is_multiple_of(2) { b & 0xf } else { b >> 4 })
    };
    while s < 256 {
        let v = nibble(nib)?;
        nib += 1;
        match v {
            0 => {
                let c = nibble(nib)? | (nibble(nib + 1)? << 4);
                nib += 2;
                s += c as usize + 1;
            }
            1..=11 => {
                lens[s] = v;
                s += 1;
            }
            _ => return None,
        }
    }
    if s != 256 {
        return None;
    }
    pos += nib.div_ceil(2);
    let codes = canonical_codes(&lens)?;
    // Decode table: 11-bit peek -> (symbol << 4) | length; 0 = no code.
    let mut table = [0u16; TABLE_SIZE];
    for sym in 0..256 {
        let l = lens[sym] as usize;
        if l == 0 {
            continue;
        }
        let entry = ((sym as u16) << 4) | l as u16;
        let mut i = codes[sym] as usize;
        while i < TABLE_SIZE {
            table[i] = entry;
            i += 1 << l;
        }
    }
    let data = &blob[pos..];
    let start = out.len();
    out.resize(start + n, 0);
    let dst = &mut out[start..];
    let mut acc: u64 = 0;
    let mut nbits = 0u32;
    let mut next = 0usize;
    for slot in dst.iter_mut() {
        if nbits <= 56 {
            if next + 8 <= data.len() {
                // Branch-free refill: load 8 bytes, keep the whole ones
                // that fit above the bits still held.
                let w = u64::from_le_bytes(data[next..next + 8].try_into().expect("8 bytes"));
                acc |= w << nbits;
                let take = (63 - nbits) / 8;
                next += take as usize;
                nbits += take * 8;
            } else {
                while nbits <= 56 && next < data.len() {
                    acc |= u64::from(data[next]) << nbits;
                    next += 1;
                    nbits += 8;
                }
            }
        }
        let e = table[(acc & (TABLE_SIZE as u64 - 1)) as usize];
        let l = u32::from(e & 0xf);
        if l == 0 || l > nbits {
            out.truncate(start);
            return None;
        }
        *slot = (e >> 4) as u8;
        acc >>= l;
        nbits -= l;
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn round_trip(src: &[u8]) -> usize {
        let mut c = Vec::new();
        compress(src, &mut c);
        let mut d = Vec::new();
        decompress(&c, usize::MAX, &mut d).expect("valid blob");
        assert_eq!(d, src);
        assert_eq!(decompressed_len(&c), Some(src.len()));
        c.len()
    }

    #[test]
    fn edge_inputs() {
        round_trip(b"");
        round_trip(b"a");
        round_trip(b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
        round_trip(&(0..=255u8).collect::<Vec<_>>());
        // A very skewed (Fibonacci) distribution forces length limiting.
        let mut v = Vec::new();
        let (mut a, mut b) = (1usize, 1usize);
        for s in 0..30u8 {
            v.extend(std::iter::repeat_n(s, a));
            (a, b) = (b, a + b);
            if a > 200_000 {
                break;
            }
        }
        round_trip(&v);
    }

    #[test]
    fn ycsb_like_text_shrinks_by_a_sixth() {
        let mut seed = 1u64;
        let mut rec = Vec::new();
        for i in 0..10 {
            rec.push(6);
            rec.extend_from_slice(format!("field{i}").as_bytes());
            rec.push(100);
            for _ in 0..100 {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                rec.push(b' ' + (seed >> 58) as u8);
            }
        }
        let n = round_trip(&rec);
        assert!(n * 6 <= rec.len() * 5, "{n} of {}", rec.len());
    }

    #[test]
    fn bad_blobs_are_rejected() {
        let mut c = Vec::new();
        compress(b"hello hello hello", &mut c);
        // Truncations and a limit below the length.
        for cut in 0..c.len() {
            let mut d = Vec::new();
            let _ = decompress(&c[..cut], usize::MAX, &mut d);
            assert!(d.len() <= 17);
        }
        assert!(decompress(&c, 16, &mut Vec::new()).is_none());
        // Invalid nibble.
        assert!(decompress(&[3, 0xff], usize::MAX, &mut Vec::new()).is_none());
    }

    proptest! {
        #[test]
        fn round_trips(src in proptest::collection::vec(any::<u8>(), 0..3000)) {
            round_trip(&src);
        }

        #[test]
        fn small_alphabet_round_trips(src in proptest::collection::vec(0u8..5, 0..3000)) {
            round_trip(&src);
        }

        #[test]
        fn garbage_never_panics(blob in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut d = Vec::new();
            let _ = decompress(&blob, 10_000, &mut d);
            prop_assert!(d.len() <= 10_000);
        }
    }
}
