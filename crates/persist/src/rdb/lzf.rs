//! LZF, the compression of RDB strings (`rdbcompression yes`): liblzf 3.6
//! as Redis vendors it (`lzf_c.c`, `lzf_d.c`, `lzfP.h` with `HLOG 16`,
//! `VERY_FAST 1`, `ULTRA_FAST 0`).
//!
//! The stream is a sequence of literal runs (`000LLLLL` then L + 1 bytes)
//! and back references (`LLLooooo [extra length] oooooooo`: length
//! L + 2, or 7 + extra + 2 when L is 7; offset from the end of the output
//! minus one). Redis does not zero its hash table between calls (its
//! `INIT_HTAB` is 0) and only trusts a slot that passes the bounds checks,
//! so a stale slot can only ever yield a real match; this table reads as
//! zeroed at every call, which makes the output deterministic and still a
//! stream any liblzf reads.
use super::Malformed;
use std::cell::RefCell;

const HLOG: u32 = 16;
const HSIZE: usize = 1 << HLOG;
/// Most bytes one input byte of LZF data can decompress to.
const MAX_EXPANSION: usize = 88;
const MAX_LIT: usize = 1 << 5;
const MAX_OFF: usize = 1 << 13;
const MAX_REF: usize = (1 << 8) + (1 << 3);

/// liblzf's hash of the next three bytes (`IDX` with `VERY_FAST`).
#[inline]
fn idx(h: u32) -> usize {
    ((h >> (3 * 8 - HLOG)).wrapping_sub(h.wrapping_mul(5)) as usize) & (HSIZE - 1)
}

/// The hash table, kept per thread from call to call. A slot holds the
/// call's generation in its high half and position + 1 in its low half;
/// a slot of another generation reads as 0, "never set", so every call
/// sees a zeroed table without clearing one. A new zeroed table of 64 Ki
/// slots per string cost more than compressing it: a full sync of 1 KB
/// values spent ~200 µs a key in allocation, page faults and memset
/// (100,000 keys: 74 s, redis-server 5 s, on a loaded 2-core machine).
struct Table {
    generation: u32,
    slots: Vec<u64>,
}

thread_local! {
    static TABLE: RefCell<Table> = const {
        RefCell::new(Table {
            generation: 0,
            slots: Vec::new(),
        })
    };
}

/// Compresses `input` into at most `max_out` bytes (`lzf_compress`);
/// None when it does not fit, as liblzf's 0: Redis then writes the string
/// uncompressed.
pub fn compress(input: &[u8], max_out: usize) -> Option<Vec<u8>> {
    if input.is_empty() || max_out == 0 {
        return None;
    }
    TABLE.with(|t| {
        let t = &mut *t.borrow_mut();
        if t.slots.is_empty() || t.generation == u32::MAX {
            // First use, or the generations wrapped: a really zeroed table.
            t.slots = vec![0; HSIZE];
            t.generation = 0;
        }
        t.generation += 1;
        compress_with(
            input,
            max_out,
            &mut Htab {
                generation: u64::from(t.generation) << 32,
                slots: &mut t.slots,
            },
        )
    })
}

/// One call's view of `Table`: positions + 1 of this generation, 0 else.
struct Htab<'a> {
    generation: u64,
    slots: &'a mut [u64],
}

impl Htab<'_> {
    #[inline]
    fn get(&self, slot: usize) -> usize {
        let v = self.slots[slot];
        if v & !0xffff_ffff == self.generation {
            (v & 0xffff_ffff) as usize
        } else {
            0
        }
    }

    #[inline]
    fn set(&mut self, slot: usize, pos_plus_one: usize) {
        self.slots[slot] = self.generation | pos_plus_one as u64;
    }
}

fn compress_with(input: &[u8], max_out: usize, htab: &mut Htab) -> Option<Vec<u8>> {
    let in_len = input.len();
    let mut out = vec![0u8; max_out];
    let mut op = 1usize; // a literal run starts with its length byte
    let mut lit = 0usize;
    let mut ip = 0usize;
    let frst = |p: usize| (u32::from(input[p]) << 8) | u32::from(input[p + 1]);
    let next = |v: u32, p: usize| (v << 8) | u32::from(input[p + 2]);
    let mut hval = if in_len >= 2 { frst(0) } else { 0 };
    while in_len >= 3 && ip < in_len - 2 {
        hval = next(hval, ip);
        let slot = idx(hval);
        let stored = htab.get(slot);
        htab.set(slot, ip + 1);
        let found = stored.checked_sub(1).filter(|&r| {
            r < ip
                && ip - r - 1 < MAX_OFF
                && r > 0
                && input[r + 2] == input[ip + 2]
                && input[r] == input[ip]
                && input[r + 1] == input[ip + 1]
        });
        if let Some(r) = found {
            let off = ip - r - 1;
            let mut len = 2usize;
            let maxlen = (in_len - ip - len).min(MAX_REF);
            if op + 3 + 1 >= max_out && op - usize::from(lit == 0) + 3 + 1 >= max_out {
                return None;
            }
            out[op - lit - 1] = (lit as u8).wrapping_sub(1);
            op -= usize::from(lit == 0);
            // liblzf compares 16 bytes unrolled when maxlen > 16 before its
            // bounded loop; the same steps give the same match lengths.
            let mut done = false;
            if maxlen > 16 {
                for _ in 0..16 {
                    len += 1;
                    if input[r + len] != input[ip + len] {
                        done = true;
                        break;
                    }
                }
            }
            if !done {
                loop {
                    len += 1;
                    if !(len < maxlen && input[r + len] == input[ip + len]) {
                        break;
                    }
                }
            }
            len -= 2;
            ip += 1;
            if len < 7 {
                out[op] = ((off >> 8) + (len << 5)) as u8;
                op += 1;
            } else {
                out[op] = ((off >> 8) + (7 << 5)) as u8;
                out[op + 1] = (len - 7) as u8;
                op += 2;
            }
            out[op] = off as u8;
            op += 1;
            lit = 0;
            op += 1;
            ip += len + 1;
            if ip >= in_len - 2 {
                break;
            }
            // VERY_FAST: hash the two positions before the new ip.
            ip -= 2;
            hval = frst(ip);
            hval = next(hval, ip);
            htab.set(idx(hval), ip + 1);
            ip += 1;
            hval = next(hval, ip);
            htab.set(idx(hval), ip + 1);
            ip += 1;
        } else {
            if op >= max_out {
                return None;
            }
            lit += 1;
            out[op] = input[ip];
            op += 1;
            ip += 1;
            if lit == MAX_LIT {
                out[op - lit - 1] = (lit - 1) as u8;
                lit = 0;
                op += 1;
            }
        }
    }
    if op + 3 > max_out {
        return None;
    }
    while ip < in_len {
        lit += 1;
        out[op] = input[ip];
        op += 1;
        ip += 1;
        if lit == MAX_LIT {
            out[op - lit - 1] = (lit - 1) as u8;
            lit = 0;
            op += 1;
        }
    }
    out[op - lit - 1] = (lit as u8).wrapping_sub(1);
    op -= usize::from(lit == 0);
    out.truncate(op);
    Some(out)
}

/// LZF decompression (liblzf's format, as Redis writes compressed RDB
/// strings) into exactly `len` bytes.
pub fn decompress(input: &[u8], len: usize) -> Result<Vec<u8>, Malformed> {
    // The output is at most ~ 264/2 times the input: a declared length
    // beyond that is a lie, refused before it can size an allocation.
    if len > input.len().saturating_mul(133).saturating_add(32) {
        return Err(Malformed);
    }
    // `len` comes from the payload: refuse what `input` cannot expand to
    // before allocating for it (a back reference, at most 3 bytes, yields
    // at most 264), so a forged length cannot make the server allocate.
    if len > input.len().saturating_mul(MAX_EXPANSION) {
        return Err(Malformed);
    }
    let mut out: Vec<u8> = Vec::with_capacity(len);
    let mut i = 0;
    while i < input.len() {
        let ctrl = input[i] as usize;
        i += 1;
        if ctrl < 32 {
            // A literal run of ctrl + 1 bytes.
            let n = ctrl + 1;
            let lit = input.get(i..i + n).ok_or(Malformed)?;
            out.extend_from_slice(lit);
            i += n;
        } else {
            // A back reference: length (ctrl >> 5) + 2, offset from the
            // low bits and the next byte.
            let mut n = ctrl >> 5;
            if n == 7 {
                n += *input.get(i).ok_or(Malformed)? as usize;
                i += 1;
            }
            n += 2;
            let back = ((ctrl & 0x1f) << 8) + *input.get(i).ok_or(Malformed)? as usize + 1;
            i += 1;
            let start = out.len().checked_sub(back).ok_or(Malformed)?;
            if out.len() + n > len {
                return Err(Malformed);
            }
            for k in 0..n {
                let b = out[start + k];
                out.push(b);
            }
        }
        if out.len() > len {
            return Err(Malformed);
        }
    }
    if out.len() != len {
        return Err(Malformed);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_literals_and_back_references() {
        // "aaaaaaaaaa": literal 'a', then a back reference of 9 bytes at
        // offset 1 (length 9 = 7 + 2: ctrl 0xe0, extra 0).
        let compressed = [0x00, b'a', 0xe0, 0x00, 0x00];
        assert_eq!(decompress(&compressed, 10), Ok(b"aaaaaaaaaa".to_vec()));
        assert_eq!(decompress(&compressed, 11), Err(Malformed));
        assert_eq!(decompress(&[0x20, 0x05], 3), Err(Malformed));
    }

    #[test]
    fn round_trips_and_gives_up_when_it_cannot_shrink() {
        let mut seed = 7u64;
        for len in [1usize, 2, 3, 4, 20, 21, 100, 1000, 70_000] {
            let repetitive: Vec<u8> = (0..len).map(|i| b"abcabcabd"[i % 9]).collect();
            let c = compress(&repetitive, len + 64).unwrap();
            assert_eq!(decompress(&c, len).unwrap(), repetitive, "len {len}");
            let random: Vec<u8> = (0..len)
                .map(|_| {
                    seed = seed
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    (seed >> 56) as u8
                })
                .collect();
            if let Some(c) = compress(&random, len + 64) {
                assert_eq!(decompress(&c, len).unwrap(), random);
            }
            if len > 4 {
                assert!(compress(&random, len - 4).is_none() || len < 64);
            }
        }
    }

    #[test]
    fn each_call_sees_an_empty_table_and_generations_wrap() {
        let text: Vec<u8> = (0..5000).map(|i| b"abcabcabd"[i % 9]).collect();
        let first = compress(&text, 6000).unwrap();
        TABLE.with(|t| {
            let t = &mut *t.borrow_mut();
            let used = t.slots.iter().filter(|&&v| v != 0).count();
            assert!(used > 0, "the call left its slots");
            t.generation += 1;
            let view = Htab {
                generation: u64::from(t.generation) << 32,
                slots: &mut t.slots,
            };
            assert!((0..HSIZE).all(|i| view.get(i) == 0));
            // The next call is the last generation before the wrap.
            t.generation = u32::MAX - 1;
        });
        assert_eq!(compress(&text, 6000).unwrap(), first);
        assert_eq!(TABLE.with(|t| t.borrow().generation), u32::MAX);
        assert_eq!(compress(&text, 6000).unwrap(), first);
        assert_eq!(TABLE.with(|t| t.borrow().generation), 1);
        assert_eq!(decompress(&first, 5000).unwrap(), text);
    }

    #[test]
    fn a_lying_length_is_refused_before_allocating() {
        assert_eq!(decompress(&[0x00, b'a'], usize::MAX), Err(Malformed));
    }
}
