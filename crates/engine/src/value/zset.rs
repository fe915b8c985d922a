//! The sorted set type. (Skeleton: the sorted-sets work replaces this file.)

/// A sorted set value.
#[derive(Clone, Debug, Default)]
pub struct ZSetValue {
    items: Vec<(f64, Box<[u8]>)>,
}

impl ZSetValue {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn len(&self) -> usize {
        self.items.len()
    }
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
    pub fn encoding(&self) -> &'static str {
        "skiplist"
    }
    pub fn mem_bytes(&self) -> usize {
        self.items.iter().map(|i| i.1.len() + 24).sum()
    }
}
