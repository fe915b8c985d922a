//! The process's shared Huffman codebooks for hash values (issue 20):
//! which books exist, which one new values are coded with, and training
//! the first one from the values written.
//!
//! Does not own the code itself (`util::huff`) or the layout of a coded
//! hash (`value::hash`). Persisted by the snapshot writer as its own
//! section (`cairn_persist::snapshot`), so a restart codes with the same
//! book; nothing ever *needs* a book to read a file, because snapshots and
//! the journal hold values logically.
//!
//! Why one set for the process and not one per shard or per engine: a book
//! is a 16 KiB decode table, 1,024 shards would hold 16 MiB of them and
//! each would need its own training sample; the values of one deployment
//! share one distribution far more often than they differ by shard. The
//! server runs one engine per process. (Tests run several engines in one
//! process; a book trained by one is simply used by the others, which is
//! correct for any data, only not tuned to it.)
//!
//! Books are immutable and never freed (at most [`MAX_BOOKS`]), so a coded
//! value can name its book by a one-byte id and read it with no lock. Only
//! one book is trained in this version; ids above 1 come from snapshots of
//! a later version, and a retraining policy for drifting data is future
//! work (docs/design.md, "Hash values: shared codebooks").

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Mutex, OnceLock};

use crate::util::huff::Codebook;

/// Number of book ids (1..=MAX_BOOKS); 0 means "no book".
pub const MAX_BOOKS: usize = 16;

/// Bytes of hash values sampled before the first book is built. 64 KiB
/// holds ~1,000 of each of 64 equally likely symbols, which puts the
/// Huffman lengths of such text within one bit of the ideal (see the
/// `trains_once_from_enough_values` test); a larger sample would delay
/// coding the first records for no measurable gain.
pub const TRAIN_BYTES: u64 = 64 * 1024;

static BOOKS: [OnceLock<Codebook>; MAX_BOOKS] = [const { OnceLock::new() }; MAX_BOOKS];
/// The id new values are coded with; 0 until a book is trained or loaded.
static CURRENT: AtomicU8 = AtomicU8::new(0);

struct Training {
    counts: [u64; 256],
    sampled: u64,
}

static TRAINING: Mutex<Training> = Mutex::new(Training {
    counts: [0; 256],
    sampled: 0,
});

/// The book with this id, if there is one.
pub fn get(id: u8) -> Option<&'static Codebook> {
    let i = usize::from(id).checked_sub(1)?;
    BOOKS.get(i)?.get()
}

/// The book new values are coded with, and its id.
pub fn current() -> Option<(u8, &'static Codebook)> {
    let id = CURRENT.load(Ordering::Acquire);
    get(id).map(|b| (id, b))
}

/// Counts the bytes of `values` toward the first book while there is no
/// book, and builds it once [`TRAIN_BYTES`] have been seen. Returns the
/// current book afterwards. Cost while training: one lock and one pass
/// over the values; none once a book exists (the caller asks `current`
/// first).
pub fn observe<'a>(values: impl Iterator<Item = &'a [u8]>) -> Option<(u8, &'static Codebook)> {
    let mut t = TRAINING.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(c) = current() {
        return Some(c);
    }
    for v in values {
        for &b in v {
            t.counts[b as usize] += 1;
        }
        t.sampled += v.len() as u64;
    }
    if t.sampled < TRAIN_BYTES {
        return None;
    }
    // A sample of uniform text over 2^w bytes gets a fixed-width book
    // (exactly w bits a byte, and coded values need not store their code's
    // length); anything else a complete Huffman book.
    let book =
        Codebook::fixed_from_counts(&t.counts).unwrap_or_else(|| Codebook::from_counts(&t.counts));
    let id = free_id()?;
    let lens = *book.lens();
    let _ = BOOKS[usize::from(id) - 1].set(book);
    // Another thread may have installed this id meanwhile (a snapshot
    // load); use the book only if it is the one just built.
    if get(id).is_some_and(|b| *b.lens() == lens) {
        CURRENT.store(id, Ordering::Release);
    }
    t.counts = [0; 256];
    t.sampled = 0;
    current()
}

fn free_id() -> Option<u8> {
    (1..=MAX_BOOKS as u8).find(|&id| get(id).is_none())
}

/// Every book, as `(id, code lengths, is current)`, for the snapshot.
pub fn all() -> Vec<(u8, [u8; 256], bool)> {
    let cur = CURRENT.load(Ordering::Acquire);
    (1..=MAX_BOOKS as u8)
        .filter_map(|id| get(id).map(|b| (id, *b.lens(), id == cur)))
        .collect()
}

/// Installs a book read from a snapshot under its id (and makes it the
/// current one if asked). False if the lengths are not a valid book or the
/// id already holds a different book (then values keep being coded with
/// the books this process has, which is only a matter of size).
pub fn install(id: u8, lens: &[u8; 256], make_current: bool) -> bool {
    let Some(slot) = usize::from(id).checked_sub(1).and_then(|i| BOOKS.get(i)) else {
        return false;
    };
    let Some(book) = Codebook::from_lens(lens) else {
        return false;
    };
    let _ = slot.set(book);
    let same = slot.get().is_some_and(|b| b.lens() == lens);
    if same && make_current {
        CURRENT.store(id, Ordering::Release);
    }
    same
}

/// Heap bytes held by all books: their decode tables, which the allocator
/// counts in `used_memory` like any heap block (the encode tables live in
/// the books' static slots).
pub fn heap_bytes() -> usize {
    BOOKS
        .iter()
        .filter_map(|b| b.get())
        .map(|b| b.heap_bytes())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_checks_ids_and_lengths() {
        assert!(!install(0, &[8; 256], false));
        assert!(!install(MAX_BOOKS as u8 + 1, &[8; 256], false));
        assert!(!install(MAX_BOOKS as u8, &[7; 256], false));
        // The last id is never trained in a test run: install, then a
        // different book under the same id is refused.
        assert!(install(MAX_BOOKS as u8, &[8; 256], false));
        assert!(install(MAX_BOOKS as u8, &[8; 256], false));
        let mut other = [8u8; 256];
        other[0] = 7;
        other[1] = 9;
        other[2] = 9;
        assert!(!install(MAX_BOOKS as u8, &other, false));
        assert!(all()
            .iter()
            .any(|(id, l, _)| *id == MAX_BOOKS as u8 && *l == [8; 256]));
        assert!(heap_bytes() >= 16 * 1024);
    }
}
