//! The list type. (Skeleton: the lists work replaces this file.)

/// A list value.
#[derive(Clone, Debug, Default)]
pub struct ListValue {
    items: std::collections::VecDeque<Box<[u8]>>,
}

impl ListValue {
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
        "quicklist"
    }
    pub fn mem_bytes(&self) -> usize {
        self.items.iter().map(|i| i.len() + 16).sum()
    }
}
