//! The set type. (Skeleton: the sets work replaces this file.)

/// A set value.
#[derive(Clone, Debug, Default)]
pub struct SetValue {
    items: Vec<Box<[u8]>>,
}

impl SetValue {
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
        "hashtable"
    }
    pub fn mem_bytes(&self) -> usize {
        self.items.iter().map(|i| i.len() + 16).sum()
    }
}
