//! Longest common subsequence for the LCS command.
//!
//! Mirrors Redis 7.0 `lcsCommand` (`src/t_string.c`) step for step: the same
//! full `(alen+1) x (blen+1)` table of `u32` lengths, the same backtrack from
//! the end of both strings (on a mismatch it moves up in `a` only when that
//! keeps a strictly longer LCS, otherwise left in `b`), and so the same LCS
//! string and the same match ranges, listed from the end of the strings
//! backwards. Option handling (LEN, IDX, MINMATCHLEN, WITHMATCHLEN) and the
//! reply shape stay with the caller: filter `matches` with
//! `m.len >= minmatchlen` (MINMATCHLEN 0 or negative keeps all).
//!
//! The table guard is Redis's: refused when `(alen+1)*(blen+1)*4` bytes
//! exceed `proto-max-bulk-len`, so a client cannot make the server allocate
//! more transient memory than it could send in one bulk string.

/// One contiguous run of the LCS: `a[a.0..=a.1]` equals `b[b.0..=b.1]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LcsMatch {
    pub a: (usize, usize),
    pub b: (usize, usize),
    /// `a.1 - a.0 + 1`, what WITHMATCHLEN prints.
    pub len: usize,
}

/// The result of [`lcs`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lcs {
    /// Length of the LCS (what LEN and IDX's "len" print).
    pub len: usize,
    /// The LCS itself (the plain `LCS k1 k2` reply).
    pub string: Vec<u8>,
    /// Every run, in Redis's order (from the ends of the strings backwards).
    pub matches: Vec<LcsMatch>,
}

/// Why an LCS cannot be computed (carried by `Error::Lcs`; each front end
/// words it, Redis's texts are in `server::resp::errors`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LcsError {
    /// A string is at least `u32::MAX - 1` bytes.
    StringTooLong,
    /// The table would exceed proto-max-bulk-len.
    ExceedsProtoMaxBulkLen,
    /// The allocator refused the table.
    AllocFailed,
}

/// Computes the LCS of `a` and `b` the way Redis 7.0 does. A missing key is
/// the empty string, as in Redis. `proto_max_bulk_len` is the server's
/// `proto-max-bulk-len` (default 512 MiB).
pub fn lcs(a: &[u8], b: &[u8], proto_max_bulk_len: u64) -> Result<Lcs, LcsError> {
    // Redis stores lengths and indexes in uint32_t.
    let limit = u32::MAX as usize - 1;
    if a.len() >= limit || b.len() >= limit {
        return Err(LcsError::StringTooLong);
    }
    let alen = a.len();
    let blen = b.len();
    let width = blen + 1;
    // Cannot overflow u64: both factors are below 2^32.
    let cells = (alen as u64 + 1) * (blen as u64 + 1);
    let bytes = cells
        .checked_mul(std::mem::size_of::<u32>() as u64)
        .ok_or(LcsError::AllocFailed)?;
    if bytes > proto_max_bulk_len {
        return Err(LcsError::ExceedsProtoMaxBulkLen);
    }
    let cells = usize::try_from(cells).map_err(|_| LcsError::AllocFailed)?;
    let mut table: Vec<u32> = Vec::new();
    table
        .try_reserve_exact(cells)
        .map_err(|_| LcsError::AllocFailed)?;
    // Row 0 and column 0 are zero: the LCS with an empty prefix.
    table.resize(cells, 0);

    for i in 1..=alen {
        let (prev, cur) = table.split_at_mut(i * width);
        let prev = &prev[(i - 1) * width..];
        let cur = &mut cur[..width];
        let ai = a[i - 1];
        for j in 1..=blen {
            cur[j] = if ai == b[j - 1] {
                prev[j - 1] + 1
            } else {
                // Same as Redis's `lcs1 > lcs2 ? lcs1 : lcs2`.
                prev[j].max(cur[j - 1])
            };
        }
    }
    let at = |i: usize, j: usize| table[i * width + j];

    let total = at(alen, blen) as usize;
    let mut string = vec![0u8; total];
    let mut matches = Vec::new();

    // The current run, `None` where Redis uses `arange_start == alen`.
    // Fields: (a_start, a_end, b_start, b_end).
    let mut run: Option<(usize, usize, usize, usize)> = None;
    let mut idx = total;
    let (mut i, mut j) = (alen, blen);
    while i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            string[idx - 1] = a[i - 1];
            match &mut run {
                None => run = Some((i - 1, i - 1, j - 1, j - 1)),
                Some((a_start, _, b_start, _)) => {
                    if *a_start == i && *b_start == j {
                        // Contiguous: extend the run backwards.
                        *a_start -= 1;
                        *b_start -= 1;
                    } else {
                        // Unreachable (a mismatch step always closes the run
                        // first), but kept to mirror Redis.
                        emit = true;
                    }
                }
            }
            // Touching the start of either string ends the walk; emit now.
            if let Some((a_start, _, b_start, _)) = run {
                if a_start == 0 || b_start == 0 {
                    emit = true;
                }
            }
            idx -= 1;
            i -= 1;
            j -= 1;
        } else {
            if at(i - 1, j) > at(i, j - 1) {
                i -= 1;
            } else {
                j -= 1;
            }
            if run.is_some() {
                emit = true;
            }
        }
        if emit {
            if let Some((a_start, a_end, b_start, b_end)) = run.take() {
                matches.push(LcsMatch {
                    a: (a_start, a_end),
                    b: (b_start, b_end),
                    len: a_end - a_start + 1,
                });
            }
        }
    }

    Ok(Lcs {
        len: total,
        string,
        matches,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: u64 = 512 * 1024 * 1024;

    fn m(a: (usize, usize), b: (usize, usize)) -> LcsMatch {
        LcsMatch {
            a,
            b,
            len: a.1 - a.0 + 1,
        }
    }

    #[test]
    fn doc_example() {
        // Redis 7.0.15: SET key1 ohmytext; SET key2 mynewtext;
        // LCS key1 key2 -> "mytext";
        // LCS key1 key2 IDX WITHMATCHLEN -> [[4,7],[5,8],4], [[2,3],[0,1],2].
        let r = lcs(b"ohmytext", b"mynewtext", MAX).expect("fits");
        assert_eq!(r.string, b"mytext");
        assert_eq!(r.len, 6);
        assert_eq!(r.matches, vec![m((4, 7), (5, 8)), m((2, 3), (0, 1))]);
    }

    #[test]
    fn empty_and_disjoint() {
        let r = lcs(b"", b"abc", MAX).expect("fits");
        assert_eq!((r.len, r.string.len(), r.matches.len()), (0, 0, 0));
        let r = lcs(b"abc", b"xyz", MAX).expect("fits");
        assert_eq!((r.len, r.string.len(), r.matches.len()), (0, 0, 0));
    }

    #[test]
    fn redis_answers() {
        // Each expectation is Redis 7.0.15's LCS .. IDX WITHMATCHLEN output.
        let r = lcs(b"aaaa", b"aa", MAX).expect("fits");
        assert_eq!(r.string, b"aa");
        assert_eq!(r.matches, vec![m((2, 3), (0, 1))]);

        let r = lcs(b"abcabc", b"cbacba", MAX).expect("fits");
        assert_eq!(r.string, b"cbc");
        assert_eq!(
            r.matches,
            vec![m((5, 5), (3, 3)), m((4, 4), (1, 1)), m((2, 2), (0, 0))]
        );

        let r = lcs(b"xyzabcdef", b"abcxyzdef", MAX).expect("fits");
        assert_eq!(r.string, b"abcdef");
        assert_eq!(r.matches, vec![m((6, 8), (6, 8)), m((3, 5), (0, 2))]);
    }

    #[test]
    fn memory_guard() {
        let a = vec![b'a'; 12000];
        let b = vec![b'b'; 12000];
        assert_eq!(lcs(&a, &b, MAX), Err(LcsError::ExceedsProtoMaxBulkLen));
        // Exactly at the limit is allowed (Redis uses `>`).
        assert!(lcs(b"ab", b"abc", 3 * 4 * 4).is_ok());
        assert_eq!(
            lcs(b"ab", b"abc", 3 * 4 * 4 - 1),
            Err(LcsError::ExceedsProtoMaxBulkLen)
        );
    }
}
