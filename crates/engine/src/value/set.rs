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
    /// Calls `f` with every member. (Added on the sorted-sets branch for
    /// ZUNION/ZINTER/ZDIFF inputs; the sets work provides its own.)
    pub fn for_each(&self, mut f: impl FnMut(&[u8])) {
        self.items.iter().for_each(|m| f(m))
    }
    /// Membership test (sorted-sets branch, as `for_each`).
    pub fn contains(&self, member: &[u8]) -> bool {
        self.items.iter().any(|m| **m == *member)
    }
    /// Adds a member; true if new (sorted-sets branch, for its tests).
    pub fn insert(&mut self, member: &[u8]) -> bool {
        if self.contains(member) {
            return false;
        }
        self.items.push(member.into());
        true
    }
    pub fn mem_bytes(&self) -> usize {
        self.items.iter().map(|i| i.len() + 16).sum()
    }
}
