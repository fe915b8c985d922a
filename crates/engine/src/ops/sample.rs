//! The random picks HRANDFIELD and ZRANDMEMBER return with a count, as one
//! exact-size iterator (so the reply header can be written first). The
//! cases are Redis 7.0's `hrandfieldWithCountCommand` /
//! `zrandmemberWithCountCommand`:
//! * count 0: nothing;
//! * negative count (or count 1): `|count|` independent uniform picks,
//!   repeats allowed;
//! * count >= size: the whole collection, in iteration order;
//! * otherwise `count` distinct items in random order.
//!
//! Each family chooses which case applies and how it lists or indexes its
//! items (`ops::hash::sample`, `ops::zset::sample`); this file owns only
//! the iteration and the shuffle.

/// A collection independent uniform picks are drawn from.
pub trait Pick {
    type Item;
    /// How many items there are to pick from.
    fn size(&self) -> usize;
    /// The item at `i < size()`.
    fn get(&self, i: usize) -> Option<Self::Item>;
}

impl<T: Copy> Pick for Vec<T> {
    type Item = T;
    fn size(&self) -> usize {
        self.len()
    }
    fn get(&self, i: usize) -> Option<T> {
        <[T]>::get(self, i).copied()
    }
}

/// `remaining` items from one of the cases above. `W` walks the whole
/// collection, `P` gives independent picks.
pub struct Sample<W, P: Pick> {
    kind: Kind<W, P>,
    remaining: usize,
}

enum Kind<W, P: Pick> {
    Empty,
    Whole(W),
    Repeat(P),
    /// Already chosen and shuffled.
    Distinct(std::vec::IntoIter<P::Item>),
}

impl<W, P: Pick> Sample<W, P> {
    pub fn empty() -> Self {
        Sample {
            kind: Kind::Empty,
            remaining: 0,
        }
    }

    /// `wanted` independent picks from `from`, which must not be empty.
    pub fn repeat(from: P, wanted: usize) -> Self {
        Sample {
            kind: Kind::Repeat(from),
            remaining: wanted,
        }
    }

    /// The whole collection: `all` yields its `size` items.
    pub fn whole(all: W, size: usize) -> Self {
        Sample {
            kind: Kind::Whole(all),
            remaining: size,
        }
    }

    /// Items already chosen, in the order given.
    pub fn distinct(chosen: Vec<P::Item>) -> Self {
        Sample {
            remaining: chosen.len(),
            kind: Kind::Distinct(chosen.into_iter()),
        }
    }
}

/// Partial Fisher-Yates: the first `wanted` slots of `all` end up a
/// uniform random choice, in random order; the rest is dropped.
pub fn shuffle_prefix<T>(all: &mut Vec<T>, wanted: usize) {
    let wanted = wanted.min(all.len());
    for i in 0..wanted {
        let j = rand::random_range(i..all.len());
        all.swap(i, j);
    }
    all.truncate(wanted);
}

impl<W: Iterator<Item = P::Item>, P: Pick> Iterator for Sample<W, P> {
    type Item = P::Item;

    fn next(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            return None;
        }
        let item = match &mut self.kind {
            Kind::Empty => None,
            Kind::Whole(it) => it.next(),
            Kind::Repeat(from) => from.get(rand::random_range(0..from.size())),
            Kind::Distinct(it) => it.next(),
        };
        // Every kind holds at least `remaining` items, so `item` is Some
        // whenever `remaining` > 0; stop cleanly if that ever fails.
        self.remaining = if item.is_some() {
            self.remaining - 1
        } else {
            0
        };
        item
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl<W: Iterator<Item = P::Item>, P: Pick> ExactSizeIterator for Sample<W, P> {}

#[cfg(test)]
mod tests {
    use super::*;

    type S = Sample<std::vec::IntoIter<u32>, Vec<u32>>;

    #[test]
    fn each_case_yields_exactly_its_count() {
        assert_eq!(S::empty().count(), 0);
        let whole = S::whole(vec![1, 2, 3].into_iter(), 3);
        assert_eq!(whole.len(), 3);
        assert_eq!(whole.collect::<Vec<_>>(), [1, 2, 3]);
        let picks: Vec<u32> = S::repeat(vec![7, 8], 50).collect();
        assert_eq!(picks.len(), 50);
        assert!(picks.iter().all(|p| *p == 7 || *p == 8));
        assert_eq!(S::distinct(vec![5, 4]).collect::<Vec<_>>(), [5, 4]);
    }

    #[test]
    fn shuffle_prefix_keeps_distinct_items() {
        let mut all: Vec<u32> = (0..100).collect();
        shuffle_prefix(&mut all, 10);
        assert_eq!(all.len(), 10);
        let mut seen = all.clone();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), 10);
        assert!(all.iter().all(|x| *x < 100));
        let mut few = vec![1, 2];
        shuffle_prefix(&mut few, 5);
        assert_eq!(few.len(), 2);
    }
}
