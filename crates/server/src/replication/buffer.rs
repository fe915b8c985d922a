//! The replication buffer: the bytes of the replication stream held in
//! memory, which are at once the backlog (`repl-backlog-size` of history
//! for partial resynchronisation) and what each attached replica has not
//! been sent yet. Redis 7.0's shared replication buffer
//! (`repl_buffer_blocks`, replication.c `feedReplicationBuffer`,
//! `incrementalTrimReplicationBacklog`): one copy of the stream in blocks,
//! each replica a position in it, so a second replica costs no second copy.
//!
//! Offsets are Redis's: `end` is `master_repl_offset`, the number of bytes
//! ever fed; the first byte held is number `start + 1`
//! (`repl_backlog_first_byte_offset`), and `end - start` is
//! `repl_backlog_histlen`. A replica's `PSYNC <id> <n>` asks for bytes from
//! number `n` on, which is possible for `start + 1 <= n <= end + 1`.
//!
//! Trimming: a block leaves the front once the rest still holds at least
//! `size` bytes and no reader needs it. So the history is between `size`
//! and `size` plus a block (Redis keeps between `size` less a block and
//! `size`, trimming one more; keeping the larger side accepts a partial
//! resynchronisation a little further back), and a slow replica keeps the
//! blocks it has not been sent, as in Redis, until the server drops it
//! (`client-output-buffer-limit replica`).
use std::collections::VecDeque;

/// Bytes per block (Redis's `PROTO_REPLY_CHUNK_BYTES`).
const BLOCK: usize = 16 * 1024;

pub struct Buffer {
    blocks: VecDeque<Vec<u8>>,
    /// Bytes fed before the first block's first byte.
    start: u64,
    /// Bytes ever fed (`master_repl_offset`).
    end: u64,
    /// `repl-backlog-size`.
    size: u64,
    /// The next byte each reader (a replica's sender) needs, by reader id;
    /// None for a free slot.
    readers: Vec<Option<u64>>,
}

impl Buffer {
    /// An empty buffer whose stream is at `offset` (the history starts
    /// after it, as Redis's `createReplicationBacklog` does).
    pub fn new(offset: u64, size: u64) -> Buffer {
        Buffer {
            blocks: VecDeque::new(),
            start: offset,
            end: offset,
            size: size.max(1),
            readers: Vec::new(),
        }
    }

    /// `master_repl_offset`.
    pub fn end(&self) -> u64 {
        self.end
    }

    /// `repl_backlog_first_byte_offset`.
    pub fn first_byte(&self) -> u64 {
        self.start + 1
    }

    /// `repl_backlog_histlen`.
    pub fn histlen(&self) -> u64 {
        self.end - self.start
    }

    /// Memory the blocks take (INFO memory `mem_replication_backlog`).
    pub fn bytes(&self) -> usize {
        self.blocks.iter().map(|b| b.capacity()).sum()
    }

    /// `repl-backlog-size` changed (CONFIG SET).
    pub fn resize(&mut self, size: u64) {
        self.size = size.max(1);
        self.trim();
    }

    /// Appends bytes to the stream. Every block but the last is full
    /// (`BLOCK` bytes): `copy_from` finds a byte's block by division.
    #[inline]
    pub fn feed(&mut self, bytes: &[u8]) {
        self.end += bytes.len() as u64;
        // Nearly every write is a command of some tens of bytes that fits
        // the last block: one capacity check and one copy.
        if let Some(last) = self.blocks.back_mut() {
            if BLOCK - last.len() >= bytes.len() {
                last.extend_from_slice(bytes);
                // The front block (full, as every block but the last) may
                // go once the rest holds `size`: checked here with two
                // loads, the readers' minimum only then (`trim`). Trimming
                // at every feed cost ~65 instructions a write.
                if self.end >= self.start + self.size + BLOCK as u64 {
                    self.trim();
                }
                return;
            }
        }
        self.feed_blocks(bytes);
    }

    /// `feed` across block boundaries: fills the last block, starts new
    /// ones, and trims.
    #[cold]
    fn feed_blocks(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let room = match self.blocks.back() {
                Some(b) if b.len() < BLOCK => BLOCK - b.len(),
                _ => {
                    self.blocks.push_back(Vec::with_capacity(BLOCK));
                    BLOCK
                }
            };
            let n = room.min(bytes.len());
            let last = self.blocks.back_mut().expect("a block was just ensured");
            last.extend_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
        }
        self.trim();
    }

    /// True if a replica asking for bytes from number `from` on (PSYNC's
    /// offset) can be served from the history.
    pub fn can_continue(&self, from: u64) -> bool {
        from > self.start && from <= self.end + 1
    }

    /// A reader that needs the bytes from number `from` on (PSYNC's offset;
    /// `end() + 1` for "everything after now"). None if they are gone.
    pub fn add_reader(&mut self, from: u64) -> Option<usize> {
        if !self.can_continue(from) {
            return None;
        }
        let pos = Some(from - 1);
        match self.readers.iter().position(Option::is_none) {
            Some(i) => {
                self.readers[i] = pos;
                Some(i)
            }
            None => {
                self.readers.push(pos);
                Some(self.readers.len() - 1)
            }
        }
    }

    /// The reader is gone: its blocks may be trimmed.
    pub fn remove_reader(&mut self, id: usize) {
        if let Some(slot) = self.readers.get_mut(id) {
            *slot = None;
        }
        while self.readers.last() == Some(&None) {
            self.readers.pop();
        }
        self.trim();
    }

    /// How many readers there are (attached replicas).
    pub fn readers(&self) -> usize {
        self.readers.iter().flatten().count()
    }

    /// How many bytes the reader has not taken yet (its lag).
    pub fn pending(&self, id: usize) -> u64 {
        self.readers
            .get(id)
            .copied()
            .flatten()
            .map_or(0, |pos| self.end - pos)
    }

    /// Copies up to `max` of the reader's next bytes into `out` and moves
    /// it past them; returns how many.
    pub fn read(&mut self, id: usize, max: usize, out: &mut Vec<u8>) -> usize {
        let Some(Some(pos)) = self.readers.get(id).copied() else {
            return 0;
        };
        let n = self.copy_from(pos, max, out);
        self.readers[id] = Some(pos + n as u64);
        self.trim();
        n
    }

    /// Copies up to `max` bytes from byte index `pos` (0-based) on. The
    /// first block is found by division (every block but the last is
    /// full); walking from the front cost ~600 instructions a read with a
    /// 1 MB backlog (64 blocks), ~38 a replicated write at `-P 16`.
    fn copy_from(&self, pos: u64, max: usize, out: &mut Vec<u8>) -> usize {
        debug_assert!(pos >= self.start && pos <= self.end);
        let skip = (pos - self.start) as usize;
        let (mut i, mut at) = (skip / BLOCK, skip % BLOCK);
        let mut left = max.min((self.end - pos) as usize);
        let total = left;
        out.reserve(left);
        while left > 0 {
            let b = &self.blocks[i];
            debug_assert!(i + 1 == self.blocks.len() || b.len() == BLOCK);
            let n = (b.len() - at).min(left);
            out.extend_from_slice(&b[at..at + n]);
            left -= n;
            at = 0;
            i += 1;
        }
        total - left
    }

    /// Drops front blocks that neither the backlog nor a reader needs.
    fn trim(&mut self) {
        // The bound first: it is false nearly always, and the readers'
        // minimum is a walk over them.
        match self.blocks.front() {
            Some(b) if self.blocks.len() > 1 && self.histlen() - b.len() as u64 >= self.size => {}
            _ => return,
        }
        let needed = self
            .readers
            .iter()
            .flatten()
            .copied()
            .min()
            .unwrap_or(u64::MAX);
        // Never the last block: it is the one being filled.
        while self.blocks.len() > 1 {
            let len = self.blocks[0].len() as u64;
            if self.histlen() - len < self.size || self.start + len > needed {
                break;
            }
            self.start += len;
            self.blocks.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(n: usize, seed: u8) -> Vec<u8> {
        (0..n)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect()
    }

    #[test]
    fn offsets_follow_redis() {
        let mut b = Buffer::new(100, 1 << 20);
        assert_eq!((b.end(), b.first_byte(), b.histlen()), (100, 101, 0));
        assert!(b.can_continue(101));
        assert!(!b.can_continue(100));
        assert!(!b.can_continue(102));
        b.feed(b"*1\r\n$4\r\nPING\r\n");
        assert_eq!((b.end(), b.first_byte(), b.histlen()), (114, 101, 14));
        assert!(b.can_continue(101) && b.can_continue(115) && !b.can_continue(116));
        let r = b.add_reader(108).unwrap();
        let mut out = Vec::new();
        assert_eq!(b.read(r, 100, &mut out), 7);
        assert_eq!(out, b"\nPING\r\n");
        assert_eq!(b.pending(r), 0);
    }

    #[test]
    fn history_is_kept_to_the_size_and_readers_keep_theirs() {
        let size = 3 * BLOCK as u64 + 7;
        let mut b = Buffer::new(0, size);
        let mut all = Vec::new();
        let slow = b.add_reader(1).unwrap();
        for i in 0..200u8 {
            let chunk = bytes(1000 + i as usize * 13, i);
            all.extend_from_slice(&chunk);
            b.feed(&chunk);
        }
        // The slow reader holds everything.
        assert_eq!(b.histlen(), all.len() as u64);
        assert_eq!(b.pending(slow), all.len() as u64);
        let mut got = Vec::new();
        while b.read(slow, 5000, &mut got) > 0 {}
        assert_eq!(got, all);
        // Read out, its blocks went back to the backlog's bound.
        assert!(b.histlen() >= size && b.histlen() < size + BLOCK as u64);
        assert_eq!(b.end(), all.len() as u64);
        // Any offset in the history serves exactly the stream's tail.
        let first = b.first_byte();
        for from in [first, first + 1, first + 5000, b.end(), b.end() + 1] {
            let r = b.add_reader(from).unwrap();
            let mut out = Vec::new();
            b.read(r, usize::MAX, &mut out);
            assert_eq!(out, &all[from as usize - 1..], "from {from}");
            b.remove_reader(r);
        }
        assert!(b.add_reader(first - 1).is_none());
        assert!(b.add_reader(b.end() + 2).is_none());
        b.remove_reader(slow);
        // A smaller backlog trims at once.
        b.resize(1);
        assert!(b.histlen() <= BLOCK as u64);
    }

    #[test]
    fn feeds_of_every_size_keep_the_bound_and_read_back_exactly() {
        // Chunks from a byte to more than two blocks, so feeds end exactly
        // on, just before and just past block boundaries; reads of every
        // size from every kind of offset.
        let size = 2 * BLOCK as u64 + 100;
        let mut b = Buffer::new(7, size);
        let mut all = Vec::new();
        let sizes = [
            1,
            13,
            BLOCK - 14,
            BLOCK,
            1,
            BLOCK + 1,
            2 * BLOCK + 3,
            40,
            5000,
        ];
        for round in 0..40usize {
            let chunk = bytes(sizes[round % sizes.len()] + round, round as u8);
            all.extend_from_slice(&chunk);
            b.feed(&chunk);
            // No reader: the history is the size, or all there is, up to
            // a block more, after every feed.
            let h = b.histlen();
            assert!(h < size + BLOCK as u64, "round {round}: {h}");
            assert!(h >= size.min(all.len() as u64), "round {round}: {h}");
            assert_eq!(b.end(), 7 + all.len() as u64);
            let held = &all[all.len() - h as usize..];
            for from in [b.first_byte(), b.first_byte() + 1, b.end() - h / 2, b.end()] {
                for max in [7, 100, BLOCK - 1, BLOCK + 1, usize::MAX] {
                    let r = b.add_reader(from).unwrap();
                    let mut out = Vec::new();
                    let mut n = 0;
                    loop {
                        let got = b.read(r, max, &mut out);
                        if got == 0 {
                            break;
                        }
                        assert!(got <= max);
                        n += got;
                    }
                    let skip = (from - b.first_byte()) as usize;
                    assert_eq!(n, held.len() - skip);
                    assert!(out == held[skip..], "round {round} from {from} max {max}");
                    b.remove_reader(r);
                }
            }
        }
    }
}
