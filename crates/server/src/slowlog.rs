//! SLOWLOG: the last commands that ran longer than `slowlog-log-slower-than`
//! microseconds, with Redis's truncation of long argument lists (at most 32
//! arguments, each at most 128 bytes) so the log itself stays bounded.
use std::collections::VecDeque;

pub const MAX_ARGC: usize = 32;
pub const MAX_ARG_LEN: usize = 128;

pub struct Entry {
    pub id: u64,
    pub unix_secs: u64,
    pub micros: u64,
    pub args: Vec<Vec<u8>>,
    pub peer: String,
    pub name: Vec<u8>,
}

#[derive(Default)]
pub struct SlowLog {
    entries: VecDeque<Entry>,
    next_id: u64,
    max_len: usize,
}

impl SlowLog {
    pub fn set_max_len(&mut self, n: usize) {
        self.max_len = n;
        self.entries.truncate(n);
    }

    /// Records one command (slowlog.c `slowlogCreateEntry`).
    pub fn push<'a>(
        &mut self,
        args: impl ExactSizeIterator<Item = &'a [u8]>,
        micros: u64,
        peer: String,
        name: Vec<u8>,
    ) {
        if self.max_len == 0 {
            return;
        }
        let argc = args.len();
        let keep = argc.min(MAX_ARGC);
        let mut out = Vec::with_capacity(keep);
        for (i, a) in args.enumerate().take(keep) {
            if keep != argc && i == keep - 1 {
                out.push(format!("... ({} more arguments)", argc - keep + 1).into_bytes());
                break;
            }
            if a.len() > MAX_ARG_LEN {
                let mut t = a[..MAX_ARG_LEN].to_vec();
                t.extend_from_slice(
                    format!("... ({} more bytes)", a.len() - MAX_ARG_LEN).as_bytes(),
                );
                out.push(t);
            } else {
                out.push(a.to_vec());
            }
        }
        self.entries.push_front(Entry {
            id: self.next_id,
            unix_secs: cairn_engine::clock::now_ms() / 1000,
            micros,
            args: out,
            peer,
            name,
        });
        self.next_id += 1;
        self.entries.truncate(self.max_len);
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    #[allow(dead_code)] // clippy's len_without_is_empty asks for it beside len()
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn reset(&mut self) {
        self.entries.clear();
    }

    /// Newest first, as SLOWLOG GET returns them.
    pub fn newest(&self, n: usize) -> impl Iterator<Item = &Entry> {
        self.entries.iter().take(n)
    }
}
