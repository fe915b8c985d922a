//! Order-0 canonical Huffman codebooks shared by many values.
//!
//! Owns building a code from byte counts, checking a persisted one, and
//! coding and decoding byte strings against it. Does not own which book a
//! value uses or when books are trained: that is `value::hash` (issue 20).
//!
//! Why an entropy coder and not an LZ coder: the data it is for (YCSB-like
//! records, text fields) is often random text over a small alphabet, which
//! has no repeats for LZ to find but only ~6 bits of information per byte.
//! Why one book for many values instead of one per value (what this module
//! did before issue 20): a per-value code pays its code-length table (~45
//! bytes) in every value and rebuilds a decode table on every read, which
//! cost more than the decoding itself; a shared book is built once.
//!
//! A book made by [`Codebook::from_counts`] codes **every** byte (lengths
//! 1..=`MAX_BITS`, the Kraft sum exactly 1), so any value can be coded
//! with it; a value the book does not suit simply codes longer than it is,
//! and the caller keeps it raw. A **fixed-width** book
//! ([`Codebook::fixed_from_counts`]) codes only the 2^w bytes a sample
//! showed, each in exactly w bits: a value holding another byte cannot be
//! coded ([`Codebook::encode_bits_into`] says so) and stays raw, and a
//! coded value's length in bits is w times its length in bytes, so the
//! caller need not store it. The only persisted form is the 256 code
//! lengths ([`Codebook::lens`], 0 = no code); codes are canonical, so the
//! lengths fix them.
//!
//! A coded string is the codes LSB-first, bit-reversed so that a peek of
//! the low bits indexes the decode table, padded with 0 bits to a byte.
//! Its symbol count is kept by the caller. Decoding reads two symbols per
//! table lookup when both fit in the 12-bit peek (huff0's "double symbol"
//! table; any two codes of up to 6 bits do, which is what random text over
//! 64 symbols gets).

/// Longest code, in bits: every code fits one 12-bit peek. A book codes
/// all 256 bytes, so the bytes a sample never showed take code space from
/// the ones it did: at 12 bits the 192 bytes outside YCSB's 64-symbol
/// alphabet push ~6 of the 64 from 6 to 7 bits (6.09 bits a byte); at 11
/// bits, 12 of them (6.19 bits a byte, and fewer lookups that yield two
/// symbols).
pub const MAX_BITS: u32 = 12;

/// Fewest times a fixed-width book's sample must show each of its bytes
/// (see [`Codebook::fixed_from_counts`]).
pub const MIN_FIXED_COUNT: u64 = 64;

/// Bits of the stream one decode-table lookup looks at.
const PEEK_BITS: u32 = 12;
const PEEK_SIZE: usize = 1 << PEEK_BITS;
const PEEK_MASK: u64 = PEEK_SIZE as u64 - 1;

/// `Codebook::fixed` of a byte without a code: above any code (codes have
/// at most `MAX_BITS` bits).
const NO_CODE: u32 = 1 << 31;

/// A shared code: what the encoder and the decoder need, built once.
pub struct Codebook {
    lens: [u8; 256],
    /// w if every byte with a code has a code of w bits, else 0.
    width: u32,
    /// Per byte: its bit-reversed canonical code, and its length again, as
    /// u64 so the encoder's shift and add take them straight from memory.
    code: [u64; 256],
    bits: [u64; 256],
    /// Per byte, for [`encode_fixed`](Self::encode_fixed): the code, or
    /// `NO_CODE` for a byte without one, so that one OR over a value's
    /// entries tells whether it can be coded (no lengths to add up).
    fixed: [u32; 256],
    /// Per 12-bit peek: `sym0 | sym1 << 8 | len0 << 16 | bits << 20 |
    /// symbols << 25` (one or two symbols; `bits` is what they use).
    dec: Box<[u32; PEEK_SIZE]>,
}

impl std::fmt::Debug for Codebook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Codebook").finish_non_exhaustive()
    }
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

impl Codebook {
    /// The Huffman book for these byte counts. Bytes never seen still get
    /// a (long) code: counts are raised to at least 1.
    pub fn from_counts(counts: &[u64; 256]) -> Codebook {
        // Scale into u32 keeping ratios; every symbol at least 1.
        let max = counts.iter().copied().max().unwrap_or(0).max(1);
        let shift = 64 - max.leading_zeros();
        let shift = shift.saturating_sub(30);
        let mut c32 = [0u32; 256];
        for (d, &s) in c32.iter_mut().zip(counts.iter()) {
            *d = ((s >> shift) as u32).max(1);
        }
        let lens = code_lengths(&c32);
        Codebook::from_lens(&lens)
            .expect("Huffman lengths of 256 used symbols form a complete code")
    }

    /// The fixed-width book for a sample that looks like uniform random
    /// text over 2^w of the 256 bytes (YCSB's values: 64 symbols, w = 6),
    /// or `None` if it does not. There the Huffman code of the seen bytes
    /// gives each exactly w bits, and a complete book would spend code
    /// space on the bytes never seen: at 12 bits at most, 192 unseen bytes
    /// push ~6 of the 64 to 7 bits (6.09 bits a byte, not 6.00), and the
    /// code lengths vary, so each coded value would have to store its
    /// length. Every seen byte must have been seen at least
    /// `MIN_FIXED_COUNT` times, so that a byte the sample missed is rare
    /// enough that the values holding it (kept raw) do not matter.
    pub fn fixed_from_counts(counts: &[u64; 256]) -> Option<Codebook> {
        let seen = counts.iter().filter(|&&c| c > 0).count();
        if !(2..256).contains(&seen) || !seen.is_power_of_two() {
            return None;
        }
        if counts.iter().any(|&c| c > 0 && c < MIN_FIXED_COUNT) {
            return None;
        }
        let max = counts.iter().copied().max().unwrap_or(0).max(1);
        let shift = (64 - max.leading_zeros()).saturating_sub(30);
        let mut c32 = [0u32; 256];
        for (d, &s) in c32.iter_mut().zip(counts.iter()) {
            // Seen bytes stay at least 1 after scaling; unseen stay 0.
            *d = if s > 0 {
                ((s >> shift) as u32).max(1)
            } else {
                0
            };
        }
        let lens = code_lengths(&c32);
        let w = seen.trailing_zeros() as u8;
        if lens.iter().any(|&l| l != 0 && l != w) {
            return None;
        }
        Codebook::from_lens(&lens)
    }

    /// A book from its persisted code lengths: `None` unless every length
    /// is at most `MAX_BITS`, the code is complete (Kraft sum exactly 1)
    /// and either every byte has a code (what
    /// [`from_counts`](Self::from_counts) makes) or the bytes that have one
    /// all have the same length (what
    /// [`fixed_from_counts`](Self::fixed_from_counts) makes).
    /// Completeness means every peek decodes, so the decoder needs no
    /// "no such code" case.
    pub fn from_lens(lens: &[u8; 256]) -> Option<Codebook> {
        if lens.iter().any(|&l| u32::from(l) > MAX_BITS) {
            return None;
        }
        let first = lens.iter().copied().find(|&l| l > 0)?;
        let uniform = lens.iter().all(|&l| l == 0 || l == first);
        if lens.contains(&0) && !uniform {
            return None;
        }
        let kraft: u32 = lens
            .iter()
            .filter(|&&l| l > 0)
            .map(|&l| 1u32 << (MAX_BITS - u32::from(l)))
            .sum();
        if kraft != 1 << MAX_BITS {
            return None;
        }
        let codes = canonical_codes(lens)?;
        let mut code = [0u64; 256];
        let mut bits = [0u64; 256];
        let mut fixed = [NO_CODE; 256];
        // One symbol per MAX_BITS peek: (symbol, length).
        let mut single = vec![(0u8, 0u8); 1 << MAX_BITS];
        for s in 0..256 {
            let l = lens[s];
            code[s] = u64::from(codes[s]);
            bits[s] = u64::from(l);
            if l > 0 {
                fixed[s] = u32::from(codes[s]);
            }
            if l == 0 {
                // No code: the encoder adds no bits for it, which is how
                // `encode_bits_into`'s caller sees that it was there.
                continue;
            }
            let mut i = codes[s] as usize;
            while i < single.len() {
                single[i] = (s as u8, l);
                i += 1 << l;
            }
        }
        let mask = (1usize << MAX_BITS) - 1;
        let mut dec = Box::new([0u32; PEEK_SIZE]);
        for (i, e) in dec.iter_mut().enumerate() {
            let (s0, l0) = single[i & mask];
            let rest = i >> l0;
            let (s1, l1) = single[rest & mask];
            let (sym1, bits, n) = if u32::from(l0) + u32::from(l1) <= PEEK_BITS {
                (s1, l0 + l1, 2u32)
            } else {
                (0, l0, 1)
            };
            *e = u32::from(s0)
                | u32::from(sym1) << 8
                | u32::from(l0) << 16
                | u32::from(bits) << 20
                | n << 25;
        }
        Some(Codebook {
            lens: *lens,
            width: if uniform { u32::from(first) } else { 0 },
            code,
            bits,
            fixed,
            dec,
        })
    }

    /// The code length of every byte: the book's persisted form.
    pub fn lens(&self) -> &[u8; 256] {
        &self.lens
    }

    /// w if every byte that has a code has one of w bits (a fixed-width
    /// book, or a complete one of 8-bit codes), else 0. Then a value of n
    /// bytes codes in exactly n * w bits, if it can be coded at all.
    pub fn width(&self) -> u32 {
        self.width
    }

    /// Heap bytes the book holds (the decode table), for accounting.
    pub fn heap_bytes(&self) -> usize {
        std::mem::size_of::<[u32; PEEK_SIZE]>()
    }

    /// Bytes [`encode`](Self::encode) would append for `src`.
    pub fn encoded_len(&self, src: &[u8]) -> usize {
        let bits: usize = src.iter().map(|&b| self.lens[b as usize] as usize).sum();
        bits.div_ceil(8)
    }

    /// Appends the coded form of `src` to `out` (exactly
    /// `encoded_len(src)` bytes).
    pub fn encode(&self, src: &[u8], out: &mut Vec<u8>) {
        let start = out.len();
        let n = self.encode_into(src, out);
        out.truncate(start + n);
    }

    /// Writes the coded form of `src` at the end of `out` and returns its
    /// length; `out` may be left up to 8 bytes longer than that (the caller
    /// truncates). Four symbols (at most 48 bits) are gathered above the
    /// fewer than 8 bits left over, then one unaligned 8-byte store writes
    /// them and the whole bytes advance: one store and no branch per four
    /// input bytes.
    pub fn encode_into(&self, src: &[u8], out: &mut Vec<u8>) -> usize {
        self.encode_bits_into(src, out).div_ceil(8)
    }

    /// [`encode_into`](Self::encode_into), returning the code's length in
    /// bits. Bytes without a code (in a fixed-width book) add no bits, so
    /// `src` could be coded only if the result is `src.len() * width()`.
    pub fn encode_bits_into(&self, src: &[u8], out: &mut Vec<u8>) -> usize {
        let start = out.len();
        // Every code is at most 12 bits: 1.5 bytes a symbol, plus the
        // 8-byte store that may run past the last whole byte.
        out.resize(start + src.len() * 3 / 2 + 16, 0);
        let dst = &mut out[start..];
        let mut pos = 0usize;
        let mut acc: u64 = 0;
        let mut nbits = 0u64;
        let mut chunks = src.chunks_exact(4);
        for c in &mut chunks {
            let [a, b, c, d] = <[u8; 4]>::try_from(c).expect("chunks of 4");
            for s in [a, b, c, d] {
                acc |= self.code[s as usize] << nbits;
                nbits += self.bits[s as usize];
            }
            // `pos + 8 <= dst.len()`: pos <= 1.5 * (bytes coded so far).
            dst[pos..pos + 8].copy_from_slice(&acc.to_le_bytes());
            let whole = nbits / 8;
            pos += whole as usize;
            acc >>= whole * 8;
            nbits -= whole * 8;
        }
        for &s in chunks.remainder() {
            acc |= self.code[s as usize] << nbits;
            nbits += self.bits[s as usize];
        }
        dst[pos..pos + 8].copy_from_slice(&acc.to_le_bytes());
        pos * 8 + nbits as usize
    }

    /// Codes `src` with a fixed-width book (`width()` in 1..=8) into
    /// `dst[..clen]`, `clen = ceil(src.len() * width / 8)`, the bytes the
    /// other encoders would write: no length to find first and no bits to
    /// count, so the caller can size the code before coding, or code a
    /// value of the same length straight over the old code inside a hash's
    /// buffer (issue 20's one-field update: nothing moves, nothing is
    /// allocated). Eight symbols (8w bits, w whole bytes) go out per
    /// unaligned 8-byte store while 8 bytes fit in `dst`, then only the w
    /// bytes that are theirs: nothing past `dst` is written, and nothing
    /// past `clen` unless `dst` is longer. False (with `dst[..clen]` holding
    /// junk the caller must overwrite) if a byte of `src` has no code, or
    /// the book is not fixed-width or `dst` too short.
    pub fn encode_fixed(&self, src: &[u8], dst: &mut [u8]) -> bool {
        match self.width {
            1 => self.encode_fixed_w::<1>(src, dst),
            2 => self.encode_fixed_w::<2>(src, dst),
            3 => self.encode_fixed_w::<3>(src, dst),
            4 => self.encode_fixed_w::<4>(src, dst),
            5 => self.encode_fixed_w::<5>(src, dst),
            6 => self.encode_fixed_w::<6>(src, dst),
            7 => self.encode_fixed_w::<7>(src, dst),
            8 => self.encode_fixed_w::<8>(src, dst),
            _ => false,
        }
    }

    /// [`encode_fixed`](Self::encode_fixed) for width `W`: the shifts are
    /// constants, so a symbol costs a load, a shift and two ORs.
    #[inline]
    fn encode_fixed_w<const W: usize>(&self, src: &[u8], dst: &mut [u8]) -> bool {
        if (src.len() * W).div_ceil(8) > dst.len() {
            return false;
        }
        let mut seen = 0u32;
        let mut pos = 0usize;
        let mut chunks = src.chunks_exact(8);
        for c in &mut chunks {
            let c: &[u8; 8] = c.try_into().expect("chunks of 8");
            let mut acc = 0u64;
            for (i, &s) in c.iter().enumerate() {
                let e = self.fixed[s as usize];
                seen |= e;
                acc |= u64::from(e) << (i * W);
            }
            let bytes = acc.to_le_bytes();
            match dst.get_mut(pos..pos + 8) {
                Some(d) => d.copy_from_slice(&bytes),
                None => dst[pos..pos + W].copy_from_slice(&bytes[..W]),
            }
            pos += W;
        }
        let rest = chunks.remainder();
        let mut acc = 0u64;
        for (i, &s) in rest.iter().enumerate() {
            let e = self.fixed[s as usize];
            seen |= e;
            acc |= u64::from(e) << (i * W);
        }
        let n = (rest.len() * W).div_ceil(8);
        dst[pos..pos + n].copy_from_slice(&acc.to_le_bytes()[..n]);
        seen & NO_CODE == 0
    }

    /// Decodes exactly `out.len()` bytes from the code `src[..clen]`.
    /// Bytes of `src` after the code, if any, are read but their bits never
    /// used: a caller decoding from inside a larger buffer passes the rest
    /// of it, so that nearly every refill is one 8-byte load. `None` (with
    /// `out` partly written) if the code runs out first, which a string
    /// this book encoded never does; trailing padding is not checked.
    pub fn decode(&self, src: &[u8], clen: usize, out: &mut [u8]) -> Option<()> {
        // SAFETY: `out` is valid for writes of `out.len()` bytes.
        unsafe { self.decode_raw(src, clen, out.as_mut_ptr(), out.len()) }
    }

    /// [`decode`](Self::decode) of an `n`-byte value appended to `out`,
    /// written straight into its spare capacity (no zero-fill first).
    /// `out` is unchanged on `None`.
    pub fn decode_append(
        &self,
        src: &[u8],
        clen: usize,
        n: usize,
        out: &mut Vec<u8>,
    ) -> Option<()> {
        out.reserve(n);
        let len = out.len();
        // SAFETY: `reserve` made `out[len..len + n]` valid for writes;
        // it becomes part of `out` only once every byte is written.
        unsafe {
            self.decode_raw(src, clen, out.as_mut_ptr().add(len), n)?;
            out.set_len(len + n);
        }
        Some(())
    }

    /// The decoder. The stream is read at an absolute bit position: each
    /// step loads the 8 bytes holding it (57 or more usable bits) and makes
    /// four lookups of at most 12 bits each, which write at most 8 bytes;
    /// the last symbols go one lookup at a time so no bit past the last
    /// one is taken. Within 8 bytes of the end of `src` the missing bytes
    /// read as zeros; if their bits are taken the code was too short, which
    /// the final check catches.
    ///
    /// # Safety
    /// `dst` must be valid for writes of `n` bytes.
    unsafe fn decode_raw(&self, src: &[u8], clen: usize, dst: *mut u8, n: usize) -> Option<()> {
        if clen > src.len() {
            return None;
        }
        let dec: &[u32; PEEK_SIZE] = &self.dec;
        let load = |bitpos: usize| -> u64 {
            let at = bitpos >> 3;
            let w = match src.get(at..at + 8) {
                Some(w) => u64::from_le_bytes(w.try_into().expect("8 bytes")),
                None => {
                    let rest = src.get(at..).unwrap_or_default();
                    let mut b = [0u8; 8];
                    b[..rest.len()].copy_from_slice(rest);
                    u64::from_le_bytes(b)
                }
            };
            w >> (bitpos & 7)
        };
        let mut bitpos = 0usize;
        let mut i = 0usize;
        let width = self.width as usize;
        if width != 0 && 2 * width <= PEEK_BITS as usize {
            // A fixed-width book: every lookup yields two symbols and
            // takes 2w bits, so the stream's positions are known up front
            // (no data-dependent shifts) and its length is checked once.
            if n.checked_mul(width)?.div_ceil(8) > clen {
                return None;
            }
            let step = 2 * width;
            while i + 8 <= n {
                // 4 lookups take 8w <= 48 of the 57 or more bits loaded.
                let mut w = load(bitpos);
                for k in 0..4 {
                    let e = dec[(w & PEEK_MASK) as usize];
                    // SAFETY: `i + 2k + 2 <= i + 8 <= n`: inside `dst`.
                    unsafe {
                        dst.add(i + 2 * k)
                            .cast::<[u8; 2]>()
                            .write_unaligned((e as u16).to_le_bytes());
                    }
                    w >>= step;
                }
                bitpos += 4 * step;
                i += 8;
            }
            while i < n {
                let e = dec[(load(bitpos) & PEEK_MASK) as usize];
                // SAFETY: `i < n`.
                unsafe { dst.add(i).write(e as u8) };
                bitpos += width;
                i += 1;
            }
            return Some(());
        }
        while i + 8 <= n {
            let mut w = load(bitpos);
            let mut k = 0usize;
            let mut used = 0u32;
            for _ in 0..4 {
                let e = dec[(w & PEEK_MASK) as usize];
                // SAFETY: `i + 8 <= n` and `k` grows by at most 2 a step,
                // so `i + k + 2 <= i + 8 <= n`: inside `dst`.
                unsafe {
                    dst.add(i + k)
                        .cast::<[u8; 2]>()
                        .write_unaligned((e as u16).to_le_bytes());
                }
                k += (e >> 25) as usize;
                let bits = (e >> 20) & 0x1f;
                w >>= bits;
                used += bits;
            }
            bitpos += used as usize;
            i += k;
        }
        while i < n {
            let e = dec[(load(bitpos) & PEEK_MASK) as usize];
            // SAFETY: `i < n`.
            unsafe { dst.add(i).write(e as u8) };
            bitpos += ((e >> 16) & 0xf) as usize;
            i += 1;
        }
        (bitpos <= clen * 8).then_some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn book_for(sample: &[u8]) -> Codebook {
        let mut counts = [0u64; 256];
        for &b in sample {
            counts[b as usize] += 1;
        }
        Codebook::from_counts(&counts)
    }

    fn round_trip(book: &Codebook, src: &[u8]) -> usize {
        let mut c = vec![0xAA];
        book.encode(src, &mut c);
        assert_eq!(c.len() - 1, book.encoded_len(src));
        let mut d = vec![0u8; src.len()];
        book.decode(&c[1..], c.len() - 1, &mut d)
            .expect("valid code");
        // From inside a larger buffer too (the slack path).
        let mut more = c[1..].to_vec();
        more.extend_from_slice(&[0xff; 9]);
        let mut d2 = vec![0u8; src.len()];
        book.decode(&more, c.len() - 1, &mut d2)
            .expect("valid code");
        assert_eq!(d2, src);
        let mut d3 = b"head".to_vec();
        book.decode_append(&more, c.len() - 1, src.len(), &mut d3)
            .expect("valid code");
        assert_eq!(&d3[4..], src);
        assert!(book
            .decode_append(&c[1..2.min(c.len())], 1, src.len() + 9, &mut d3)
            .is_none());
        assert_eq!(&d3[4..], src);
        assert_eq!(d, src);
        c.len() - 1
    }

    fn ycsb_text(seed: &mut u64, n: usize) -> Vec<u8> {
        (0..n)
            .map(|_| {
                *seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                b' ' + (*seed >> 58) as u8
            })
            .collect()
    }

    #[test]
    fn edge_inputs() {
        let book = book_for(b"hello world");
        round_trip(&book, b"");
        round_trip(&book, b"a");
        round_trip(&book, b"ab");
        round_trip(&book, &[0xff; 3]);
        round_trip(&book, &(0..=255u8).collect::<Vec<_>>());
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
        let skewed = book_for(&v);
        assert!(skewed.lens().iter().all(|&l| (1..=12).contains(&l)));
        round_trip(&skewed, &v[..5000]);
        round_trip(&skewed, &(0..=255u8).collect::<Vec<_>>());
    }

    #[test]
    fn ycsb_text_codes_at_about_six_bits() {
        let mut seed = 1u64;
        let book = book_for(&ycsb_text(&mut seed, 64 * 1024));
        let v = ycsb_text(&mut seed, 100);
        let n = round_trip(&book, &v);
        // 6 bits a byte is 75; the codes for the 192 unseen bytes push a
        // few of the 64 to 7 bits.
        assert!((75..=78).contains(&n), "{n}");
    }

    #[test]
    fn persisted_lengths_are_checked() {
        let book = book_for(b"abcabcabd");
        let again = Codebook::from_lens(book.lens()).unwrap();
        assert_eq!(again.lens(), book.lens());
        let mut bad = *book.lens();
        bad[0] = 0;
        assert!(Codebook::from_lens(&bad).is_none());
        let mut bad = *book.lens();
        bad[7] = 13;
        assert!(Codebook::from_lens(&bad).is_none());
        // Over- and under-full codes.
        assert!(Codebook::from_lens(&[7; 256]).is_none());
        assert!(Codebook::from_lens(&[9; 256]).is_none());
        assert!(Codebook::from_lens(&[8; 256]).is_some());
    }

    #[test]
    fn short_code_is_rejected_not_misread() {
        let book = book_for(b"some text to train on");
        let mut c = Vec::new();
        book.encode(b"some text", &mut c);
        for cut in 0..c.len() {
            let mut d = vec![0u8; 9];
            assert!(book.decode(&c[..cut], cut, &mut d).is_none(), "{cut}");
            // Whatever follows a short code is not taken for its bits.
            let mut more = c[..cut].to_vec();
            more.extend_from_slice(&[0; 16]);
            assert!(book.decode(&more, cut, &mut d).is_none(), "{cut}");
        }
    }

    #[test]
    fn fixed_width_book_for_ycsb_text() {
        let mut seed = 3u64;
        let sample = ycsb_text(&mut seed, 64 * 1024);
        let mut counts = [0u64; 256];
        for &b in &sample {
            counts[b as usize] += 1;
        }
        let book = Codebook::fixed_from_counts(&counts).expect("64 symbols, uniform");
        assert_eq!(book.width(), 6);
        assert_eq!(book.lens().iter().filter(|&&l| l == 6).count(), 64);
        assert_eq!(book.lens().iter().filter(|&&l| l == 0).count(), 192);
        let again = Codebook::from_lens(book.lens()).unwrap();
        assert_eq!(again.width(), 6);
        let v = ycsb_text(&mut seed, 100);
        let mut c = Vec::new();
        assert_eq!(book.encode_bits_into(&v, &mut c), 600);
        let mut d = vec![0u8; 100];
        book.decode(&c, 75, &mut d).unwrap();
        assert_eq!(d, v);
        // A code too short for the value is refused, not misread.
        assert!(book.decode(&c, 74, &mut d).is_none());
        let mut d7 = vec![0u8; 7];
        book.decode(&c, 6, &mut d7).unwrap();
        assert_eq!(d7, v[..7]);
        // A byte outside the alphabet has no code: fewer bits than 6 a byte.
        let mut w = v.clone();
        w[40] = 0;
        assert!(book.encode_bits_into(&w, &mut Vec::new()) < 600);
        // Too few samples, a skewed sample or 2^k + 1 symbols: no fixed book.
        let mut few = [0u64; 256];
        few[b'a' as usize] = 10;
        few[b'b' as usize] = 10;
        assert!(Codebook::fixed_from_counts(&few).is_none());
        let mut skew = counts;
        skew[b' ' as usize] *= 4;
        assert!(Codebook::fixed_from_counts(&skew).is_none());
        let mut odd = counts;
        odd[0] = 1000;
        assert!(Codebook::fixed_from_counts(&odd).is_none());
        // A complete book of the same sample still codes every byte.
        assert_eq!(Codebook::from_counts(&counts).width(), 0);
        assert_eq!(Codebook::from_lens(&[8; 256]).unwrap().width(), 8);
        // Lengths with gaps must all be equal.
        let mut mixed = *book.lens();
        mixed[b' ' as usize] = 7;
        mixed[0] = 7;
        assert!(Codebook::from_lens(&mixed).is_none());
        assert!(Codebook::from_lens(&[0; 256]).is_none());
    }

    proptest! {
        #[test]
        fn fixed_width_round_trips(
            bits in 1u32..8,
            src in proptest::collection::vec(any::<u8>(), 0..600),
        ) {
            let n = 1usize << bits;
            let mut counts = [0u64; 256];
            for s in 0..n {
                counts[(s * 7 + 3) % 256] = 1000 + s as u64 % 3;
            }
            let book = Codebook::fixed_from_counts(&counts).expect("uniform");
            prop_assert_eq!(book.width(), bits);
            let mut c = vec![0x55];
            let got = book.encode_bits_into(&src, &mut c);
            let codable = src.iter().all(|&b| counts[b as usize] > 0);
            prop_assert_eq!(got == src.len() * bits as usize, codable);
            if codable {
                let clen = got.div_ceil(8);
                let mut d = vec![0u8; src.len()];
                book.decode(&c[1..], clen, &mut d).expect("valid code");
                prop_assert_eq!(&d, &src);
            }
            // `encode_fixed` writes the same code into exactly its bytes
            // (guards on both sides stay), or says the value cannot be
            // coded; with slack after the code it may use it, never more.
            let clen = (src.len() * bits as usize).div_ceil(8);
            for slack in [0usize, 3, 8] {
                let mut f = vec![0xA5u8; clen + slack + 2];
                let end = f.len() - 1;
                prop_assert_eq!(book.encode_fixed(&src, &mut f[1..end]), codable);
                prop_assert_eq!(f[0], 0xA5);
                prop_assert_eq!(f[end], 0xA5);
                if slack == 0 {
                    prop_assert!(f[1 + clen..].iter().all(|&b| b == 0xA5));
                }
                if codable {
                    prop_assert_eq!(&f[1..1 + clen], &c[1..1 + clen]);
                }
            }
            if clen > 0 {
                prop_assert!(!book.encode_fixed(&src, &mut vec![0u8; clen - 1]));
            }
        }

        #[test]
        fn round_trips(
            train in proptest::collection::vec(any::<u8>(), 0..500),
            src in proptest::collection::vec(any::<u8>(), 0..3000),
        ) {
            round_trip(&book_for(&train), &src);
        }

        #[test]
        fn small_alphabet_round_trips(src in proptest::collection::vec(0u8..5, 0..3000)) {
            round_trip(&book_for(&src), &src);
        }

        #[test]
        fn garbage_never_panics(
            code in proptest::collection::vec(any::<u8>(), 0..200),
            n in 0usize..400,
        ) {
            let book = book_for(b"etaoin shrdlu");
            let mut d = vec![0u8; n];
            let _ = book.decode(&code, code.len(), &mut d);
            let _ = book.decode(&code, code.len() / 2, &mut d);
            prop_assert!(book.decode(&code, code.len() + 1, &mut d).is_none());
        }
    }
}
