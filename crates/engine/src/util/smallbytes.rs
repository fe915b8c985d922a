//! `SmallBytes`: an owned byte string that keeps up to 23 bytes inline in
//! its 24 bytes and puts longer ones in one heap block.
//!
//! Used for keys inside an `Entry` and for sorted-set skiplist members, the
//! two places where a short string per item would otherwise cost an
//! allocation of its own (jemalloc's 32-byte class for a 23-byte string,
//! plus the 16-byte `Box<[u8]>` that points to it).
//!
//! Layout: `bytes[..len]` inline when `len <= 23`; when `len == HEAP`,
//! `bytes[0..8]` is the pointer and `bytes[8..16]` the length of a leaked
//! `Box<[u8]>` that this value owns and frees on drop. Plain bytes rather
//! than an enum so all 23 bytes are usable (an enum would spend one on its
//! tag): a YCSB key (`user` + 19 digits) is exactly 23 bytes.

/// Longest string stored inline.
pub const INLINE_MAX: usize = 23;

/// `len` value meaning "the bytes are on the heap".
const HEAP: u8 = 0xff;

pub struct SmallBytes {
    bytes: [u8; INLINE_MAX],
    len: u8,
}

impl SmallBytes {
    pub fn new(b: &[u8]) -> SmallBytes {
        if b.len() <= INLINE_MAX {
            let mut bytes = [0u8; INLINE_MAX];
            bytes[..b.len()].copy_from_slice(b);
            return SmallBytes {
                bytes,
                len: b.len() as u8,
            };
        }
        Self::from_box(b.into())
    }

    /// Takes a heap string; one that fits inline is copied in and freed.
    pub fn from_box(b: Box<[u8]>) -> SmallBytes {
        if b.len() <= INLINE_MAX {
            return Self::new(&b);
        }
        let mut bytes = [0u8; INLINE_MAX];
        let len = b.len();
        let ptr = Box::into_raw(b) as *mut u8 as usize;
        bytes[0..8].copy_from_slice(&(ptr as u64).to_ne_bytes());
        bytes[8..16].copy_from_slice(&(len as u64).to_ne_bytes());
        SmallBytes { bytes, len: HEAP }
    }

    fn heap_parts(&self) -> (*mut u8, usize) {
        let ptr = u64::from_ne_bytes(self.bytes[0..8].try_into().expect("8 bytes"));
        let len = u64::from_ne_bytes(self.bytes[8..16].try_into().expect("8 bytes"));
        (ptr as usize as *mut u8, len as usize)
    }

    pub fn as_slice(&self) -> &[u8] {
        if self.len == HEAP {
            let (ptr, len) = self.heap_parts();
            // SAFETY: `ptr`/`len` came from `Box::into_raw` of a `Box<[u8]>`
            // in `from_box`, which this value owns until drop.
            unsafe { std::slice::from_raw_parts(ptr, len) }
        } else {
            &self.bytes[..self.len as usize]
        }
    }

    /// Heap bytes held apart from the 24 bytes of the value itself.
    pub fn heap_bytes(&self) -> usize {
        if self.len == HEAP {
            self.heap_parts().1
        } else {
            0
        }
    }
}

impl Drop for SmallBytes {
    fn drop(&mut self) {
        if self.len == HEAP {
            let (ptr, len) = self.heap_parts();
            // SAFETY: as in `as_slice`; this is the one place it is freed.
            drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, len)) });
        }
    }
}

impl Default for SmallBytes {
    fn default() -> Self {
        SmallBytes::new(b"")
    }
}

impl Clone for SmallBytes {
    fn clone(&self) -> Self {
        SmallBytes::new(self.as_slice())
    }
}

impl std::ops::Deref for SmallBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl std::fmt::Debug for SmallBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.as_slice()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_and_heap() {
        assert_eq!(std::mem::size_of::<SmallBytes>(), 24);
        for n in [0usize, 1, 22, 23, 24, 100, 70_000] {
            let b: Vec<u8> = (0..n).map(|i| (i * 13) as u8).collect();
            let s = SmallBytes::new(&b);
            assert_eq!(&*s, &b[..]);
            assert_eq!(s.heap_bytes(), if n <= INLINE_MAX { 0 } else { n });
            let c = s.clone();
            drop(s);
            assert_eq!(&*c, &b[..]);
            let f = SmallBytes::from_box(b.clone().into_boxed_slice());
            assert_eq!(&*f, &b[..]);
            assert_eq!(f.heap_bytes(), c.heap_bytes());
        }
        assert!(SmallBytes::default().is_empty());
    }
}
