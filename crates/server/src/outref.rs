//! References to large values inside a connection's reply stream.
//!
//! A reply that carries a large string (GET of a 100 MB value, memcached
//! `get`) does not copy the bytes into the output buffer while the shard
//! lock is held: the handler writes the reply's framing (`$<len>\r\n`,
//! `\r\n`) into the output buffer as usual and records, here, a reference
//! to the value's shared buffer (`BigBytes`) at the output offset where the
//! bytes belong. The worker then writes the output buffer and the
//! referenced bytes in order with `writev`, as the socket accepts them, and
//! drops each reference once written (the last reference to a deleted
//! value frees it on the lazyfree thread).
//!
//! Referenced bytes count as pending output everywhere a reply's size
//! matters: backpressure (`OUT_HIGH_WATER`), `client-output-buffer-limit`,
//! CLIENT LIST's `obl`/`omem`. Code that edits the output buffer other than
//! by appending (dropping a reply, inserting pushes before one) keeps the
//! references in step through `truncate` and `shift`.
use cairn_engine::value::string::BigBytes;
use std::collections::VecDeque;
use std::io::IoSlice;

/// Replies with a value at least this long reference it instead of copying
/// it (when the value is stored shared at all, i.e. `LARGE_MIN` or more).
pub const MIN_REF: usize = cairn_engine::value::string::LARGE_MIN;

/// One referenced range of a shared buffer, placed before output byte `at`.
struct OutRef {
    at: usize,
    data: BigBytes,
    /// The part still to write: starts at the range's start and advances
    /// as the socket accepts bytes.
    start: usize,
    end: usize,
}

/// A connection's references, in output order.
#[derive(Default)]
pub struct OutRefs {
    list: VecDeque<OutRef>,
    /// Bytes referenced and not yet written.
    bytes: usize,
}

impl OutRefs {
    /// Appends `data[range]` to the reply stream after the bytes `out`
    /// holds now.
    pub fn push(&mut self, out: &[u8], data: BigBytes, range: std::ops::Range<usize>) {
        debug_assert!(range.end <= data.len());
        if range.is_empty() {
            return;
        }
        self.bytes += range.len();
        self.list.push_back(OutRef {
            at: out.len(),
            data,
            start: range.start,
            end: range.end,
        });
    }

    /// Referenced bytes not yet written.
    pub fn pending(&self) -> usize {
        self.bytes
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The output buffer was cut to `len` bytes: references placed after
    /// that point belonged to the dropped replies. A reply always writes
    /// some framing before its reference, so a reference placed exactly at
    /// `len` belongs to the dropped part too unless nothing was dropped.
    pub fn truncate(&mut self, len: usize) {
        while self.list.back().is_some_and(|r| r.at >= len) {
            // `at == len` with nothing after it is impossible: a reference
            // is always followed by the reply's closing "\r\n".
            let r = self.list.pop_back().expect("checked non-empty");
            self.bytes -= r.end - r.start;
        }
    }

    /// `by` bytes were inserted into the output buffer at offset `from`
    /// (pushes placed before a reply): references at or after it move.
    pub fn shift(&mut self, from: usize, by: usize) {
        for r in self.list.iter_mut().rev() {
            if r.at < from {
                break;
            }
            r.at += by;
        }
    }

    /// Drops every reference (the connection is closing).
    pub fn clear(&mut self) {
        self.list.clear();
        self.bytes = 0;
    }

    /// Fills `slices` with the output from `wpos` on, in order: runs of
    /// `wbuf` and referenced ranges, at most `slices.capacity()` of them
    /// and at most `limit` bytes in all (so one `writev` into a socket
    /// that a fast reader keeps draining cannot run for long).
    pub fn gather<'a>(
        &'a self,
        wbuf: &'a [u8],
        wpos: usize,
        limit: usize,
        slices: &mut Vec<IoSlice<'a>>,
    ) {
        let mut left = limit;
        let mut take = |s: &'a [u8], slices: &mut Vec<IoSlice<'a>>| -> bool {
            let s = &s[..s.len().min(left)];
            left -= s.len();
            slices.push(IoSlice::new(s));
            left > 0
        };
        let mut pos = wpos;
        for r in &self.list {
            if slices.len() + 2 > slices.capacity() {
                return;
            }
            if r.at > pos {
                if !take(&wbuf[pos..r.at], slices) {
                    return;
                }
                pos = r.at;
            }
            if !take(&r.data[r.start..r.end], slices) {
                return;
            }
        }
        if pos < wbuf.len() && slices.len() < slices.capacity() {
            take(&wbuf[pos..], slices);
        }
    }

    /// Accounts `n` written bytes, starting at output position `*wpos`:
    /// advances `*wpos` through `wbuf` and consumes references in order.
    pub fn advance(&mut self, wbuf_len: usize, wpos: &mut usize, mut n: usize) {
        while n > 0 {
            match self.list.front_mut() {
                Some(r) if r.at == *wpos => {
                    let k = n.min(r.end - r.start);
                    r.start += k;
                    self.bytes -= k;
                    n -= k;
                    if r.start == r.end {
                        self.list.pop_front();
                    }
                }
                front => {
                    let stop = front.map_or(wbuf_len, |r| r.at);
                    let k = n.min(stop - *wpos);
                    debug_assert!(k > 0, "written bytes beyond the output");
                    if k == 0 {
                        return;
                    }
                    *wpos += k;
                    n -= k;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes everything through `gather`/`advance` with a writer that
    /// accepts at most `chunk` bytes per call, into a Vec.
    fn drain(refs: &mut OutRefs, wbuf: &[u8], chunk: usize) -> Vec<u8> {
        let mut wpos = 0;
        let mut got = Vec::new();
        loop {
            let mut slices = Vec::with_capacity(4);
            refs.gather(wbuf, wpos, 9, &mut slices);
            if slices.is_empty() {
                break;
            }
            let mut n = 0;
            for s in &slices {
                let k = s.len().min(chunk - n);
                got.extend_from_slice(&s[..k]);
                n += k;
                if n == chunk {
                    break;
                }
            }
            refs.advance(wbuf.len(), &mut wpos, n);
        }
        assert_eq!(wpos, wbuf.len());
        assert_eq!(refs.pending(), 0);
        assert!(refs.is_empty());
        got
    }

    #[test]
    fn references_interleave_with_the_buffer_in_order() {
        let a = BigBytes::new(b"AAAAAAAAAA".to_vec());
        let b = BigBytes::new(b"0123456789".to_vec());
        for chunk in [1, 3, 7, 100] {
            let mut out = Vec::new();
            let mut refs = OutRefs::default();
            out.extend_from_slice(b"$10\r\n");
            refs.push(&out, a.clone(), 0..10);
            out.extend_from_slice(b"\r\n$4\r\n");
            refs.push(&out, b.clone(), 2..6);
            out.extend_from_slice(b"\r\n");
            refs.push(&out, b.clone(), 0..1);
            refs.push(&out, b.clone(), 9..10);
            out.extend_from_slice(b"!");
            assert_eq!(refs.pending(), 16);
            let got = drain(&mut refs, &out, chunk);
            assert_eq!(
                got, b"$10\r\nAAAAAAAAAA\r\n$4\r\n2345\r\n09!",
                "chunk {chunk}"
            );
        }
    }

    #[test]
    fn truncate_and_shift_follow_buffer_edits() {
        let a = BigBytes::new(b"xyz".to_vec());
        let mut out = b"+OK\r\n$3\r\n".to_vec();
        let mut refs = OutRefs::default();
        refs.push(&out, a.clone(), 0..3);
        out.extend_from_slice(b"\r\n");
        // Pushes inserted before the second reply.
        out.splice(5..5, b">P\r\n".iter().copied());
        refs.shift(5, 4);
        assert_eq!(drain(&mut refs, &out, 2), b"+OK\r\n>P\r\n$3\r\nxyz\r\n");
        // A reply dropped (CLIENT REPLY OFF): its reference goes too.
        let mut out = b"+OK\r\n$3\r\n".to_vec();
        refs.push(&out, a, 0..3);
        out.extend_from_slice(b"\r\n");
        out.truncate(5);
        refs.truncate(5);
        assert_eq!(refs.pending(), 0);
        assert_eq!(drain(&mut refs, &out, 100), b"+OK\r\n");
    }
}
