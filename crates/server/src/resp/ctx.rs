//! What a command handler gets: its arguments, the connection's state, the
//! shared server, and a reply buffer.
use crate::client::{BlockOn, Client, Unblock};
use crate::resp::errors::CmdError;
use crate::shared::Shared;
use cairn_engine::value::StrValue;
use cairn_engine::{Cx, Engine, StrRef};
use cairn_protocol::resp::{ArgList, ReplyWriter};
use std::sync::Arc;

/// A handler's outcome: the reply is already written on Ok.
pub type CmdResult = Result<(), CmdError>;

/// The arguments of one request, borrowed from the connection's read buffer.
#[derive(Clone, Copy)]
pub struct Args<'a> {
    buf: &'a [u8],
    list: &'a ArgList,
    /// The whole request as received (a RESP multibulk holding exactly
    /// these arguments), when the worker has it in one piece: the journal
    /// records it as it is (`Tag::Wire`).
    raw: Option<&'a [u8]>,
}

impl<'a> Args<'a> {
    pub fn new(buf: &'a [u8], list: &'a ArgList) -> Self {
        Args {
            buf,
            list,
            raw: None,
        }
    }

    /// `raw` must be one complete RESP multibulk request that parses to
    /// exactly these arguments (the bytes `parse_request` consumed for
    /// them, every argument read from those bytes).
    pub fn with_raw(self, raw: &'a [u8]) -> Self {
        debug_assert_eq!(raw.first(), Some(&b'*'));
        Args {
            raw: Some(raw),
            ..self
        }
    }

    pub fn len(&self) -> usize {
        self.list.len()
    }

    #[allow(dead_code)] // clippy's len_without_is_empty asks for it beside len()
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    // Inlined: a restricted ACL user's check reads its keys through it,
    // and the call cost ~8 of its ~21 instructions (callgrind, SET).
    #[inline]
    pub fn get(&self, i: usize) -> &'a [u8] {
        self.list.get(self.buf, i)
    }

    /// Argument `i`'s own buffer, when it was a large bulk read into one.
    pub fn block(&self, i: usize) -> Option<&'a Arc<Vec<u8>>> {
        self.list.block(i)
    }

    /// Arguments from index `from` on.
    pub fn iter_from(&self, from: usize) -> impl Iterator<Item = &'a [u8]> + 'a {
        let this = *self;
        (from..this.len()).map(move |i| this.get(i))
    }
}

/// The journal records a command as its arguments (`cairn_engine::record`).
impl cairn_engine::record::ArgSource for Args<'_> {
    fn argc(&self) -> usize {
        self.len()
    }

    fn arg(&self, i: usize) -> &[u8] {
        self.get(i)
    }

    fn put_args(&self, out: &mut Vec<u8>) {
        cairn_engine::record::put_args(out, (0..self.len()).map(|i| self.get(i)));
    }

    fn raw(&self) -> Option<&[u8]> {
        self.raw
    }
}

/// Everything a handler may touch.
pub struct Ctx<'a> {
    pub shared: &'a Shared,
    pub client: &'a mut Client,
    pub args: Args<'a>,
    pub out: &'a mut Vec<u8>,
    /// The command's context in the engine: every lock the handler takes
    /// passes it (`Engine::lock(&ctx.cx, key)`), so the journal records
    /// this command's writes, its events reach the server after it, and
    /// inside EXEC its locks are served from the transaction's hold.
    pub cx: Cx<'a>,
}

impl<'a> Ctx<'a> {
    pub fn engine(&self) -> &'a Engine {
        &self.shared.engine
    }

    pub fn arg(&self, i: usize) -> &'a [u8] {
        self.args.get(i)
    }

    pub fn argc(&self) -> usize {
        self.args.len()
    }

    pub fn db(&self) -> usize {
        self.client.db
    }

    /// The command's clock, Unix milliseconds: fixed for its whole run.
    pub fn now_ms(&self) -> u64 {
        self.cx.now_ms()
    }

    /// A writer in this connection's protocol (RESP2 or RESP3).
    pub fn reply(&mut self) -> ReplyWriter<'_> {
        ReplyWriter::new(self.out, self.client.proto)
    }

    pub fn ok(&mut self) -> CmdResult {
        self.reply().simple("OK");
        Ok(())
    }

    pub fn int(&mut self, n: i64) -> CmdResult {
        self.reply().int(n);
        Ok(())
    }

    pub fn bulk(&mut self, b: &[u8]) -> CmdResult {
        self.reply().bulk(b);
        Ok(())
    }

    pub fn null(&mut self) -> CmdResult {
        self.reply().null();
        Ok(())
    }

    /// Argument `i` as a string value to store: a large bulk keeps the
    /// buffer it was read into (a reference, not a copy), so SET of 100 MB
    /// copies nothing, and the value is built before any lock is taken.
    pub fn value_arg(&self, i: usize) -> StrValue {
        match self.args.block(i) {
            Some(b) => StrValue::from_shared(b.clone()),
            None => StrValue::from_bytes(self.arg(i)),
        }
    }

    /// A string value as a bulk reply. A large one is not copied: the reply
    /// references its shared buffer (`crate::outref`), so the copy of
    /// megabytes neither happens under the shard lock nor at all.
    pub fn bulk_str(&mut self, s: StrRef<'_>) {
        self.bulk_str_range(s, None);
    }

    /// `bulk_str` of `range` of the value's bytes (GETRANGE), all of them
    /// when None.
    pub fn bulk_str_range(&mut self, s: StrRef<'_>, range: Option<std::ops::Range<usize>>) {
        if let Some(data) = s.share() {
            let range = range.unwrap_or(0..data.len());
            if range.len() >= crate::outref::MIN_REF {
                let len = range.len();
                self.reply().bulk_len(len);
                self.client.out_refs.push(self.out, data, range);
                self.out.extend_from_slice(b"\r\n");
                return;
            }
            let mut w = ReplyWriter::new(self.out, self.client.proto);
            w.bulk(&data[range]);
            return;
        }
        if let (StrRef::Coded(_) | StrRef::Tiered { .. }, None) = (s, &range) {
            // Decoded straight into the reply (GET, MGET of a compressed
            // value, or of a tiered one: its length is in the pointer, its
            // record fetched and checked against it before the handler ran).
            self.reply().bulk_len(s.len());
            s.append_to(self.out);
            self.out.extend_from_slice(b"\r\n");
            return;
        }
        let mut w = ReplyWriter::new(self.out, self.client.proto);
        s.with_bytes(|b| match range {
            Some(r) => w.bulk(&b[r]),
            None => w.bulk(b),
        });
    }

    /// `bulk_str`, or a null when absent.
    pub fn bulk_str_or_null<'s>(&mut self, s: Option<impl Into<StrRef<'s>>>) {
        match s {
            Some(s) => self.bulk_str(s.into()),
            None => {
                self.reply().null();
            }
        }
    }

    /// A bulk string, or a null when absent.
    pub fn bulk_or_null(&mut self, b: Option<&[u8]>) -> CmdResult {
        match b {
            Some(b) => self.reply().bulk(b),
            None => self.reply().null(),
        }
        Ok(())
    }

    /// True if this run retries a command that blocked earlier (a key it
    /// waits on became ready, or its time ran out). A blocking command
    /// that meets a key of the wrong type on a retry keeps waiting, as in
    /// Redis 7.0, where only a push to the key serves the client.
    pub fn is_retry(&self) -> bool {
        self.client.blocked.is_some()
    }

    /// Called by a blocking command (BLPOP, BZPOPMIN, ...) that found
    /// nothing to serve: waits on `keys` of the current database for up to
    /// `timeout_ms` (0: forever), then runs the command again. Where Redis
    /// would not block (inside MULTI/EXEC) or once the time has run out,
    /// it answers `on_timeout` now instead. CLIENT UNBLOCK ... ERROR ends
    /// the wait with Redis's UNBLOCKED error.
    pub fn block<'k>(
        &mut self,
        keys: impl IntoIterator<Item = &'k [u8]>,
        timeout_ms: u64,
        on_timeout: OnTimeout,
    ) -> CmdResult {
        let unblock = if self.client.in_exec {
            Some(Unblock::Timeout)
        } else {
            self.client.unblock
        };
        match unblock {
            Some(Unblock::Timeout) => {
                let mut w = self.reply();
                match on_timeout {
                    OnTimeout::NullArray => w.null_array(),
                    OnTimeout::NullBulk => w.null(),
                }
                Ok(())
            }
            Some(Unblock::Error) => Err(CmdError::text(crate::resp::errors::UNBLOCKED)),
            None => {
                let deadline_ms = match &self.client.blocked {
                    Some(b) => b.deadline_ms,
                    None if timeout_ms == 0 => 0,
                    None => block_deadline_ms(cairn_engine::clock::now_us(), timeout_ms),
                };
                self.client.wants_block = Some(BlockOn {
                    db: self.client.db,
                    keys: keys.into_iter().map(Box::from).collect(),
                    deadline_ms,
                    stream_ids: Vec::new(),
                });
                Ok(())
            }
        }
    }
}

/// What a blocking command answers when it gives up waiting (both `_` in
/// RESP3). Redis 7.0 answers a null array on timeout for every blocking
/// command, BLMOVE and BRPOPLPUSH included; those two answer a null bulk
/// string only inside MULTI, where they do not block. Each handler picks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnTimeout {
    NullArray,
    NullBulk,
}

/// The deadline of a block of `timeout_ms` that starts at `now_us` (the
/// clock read now, not the command's clock, which was read when its turn
/// began), rounded up to the next whole millisecond: the worker fires a
/// deadline once `clock::now_ms()` (whole milliseconds, rounded down)
/// reaches it, so a deadline rounded down fired up to a millisecond early.
/// rq's `test_blocking_results` (XREAD BLOCK 1000) measured 0.99976 s.
/// Redis never answers a blocking timeout before it has passed.
fn block_deadline_ms(now_us: u64, timeout_ms: u64) -> u64 {
    now_us
        .saturating_add(timeout_ms.saturating_mul(1000))
        .div_ceil(1000)
}

#[cfg(test)]
mod tests {
    use super::block_deadline_ms;

    /// A block never ends before its timeout: the deadline is rounded up,
    /// so `now_ms() >= deadline` only once `timeout_ms` have passed.
    #[test]
    fn block_deadlines_round_up() {
        assert_eq!(block_deadline_ms(5_000_000, 1000), 6_000);
        assert_eq!(block_deadline_ms(5_000_001, 1000), 6_001);
        assert_eq!(block_deadline_ms(5_000_999, 1000), 6_001);
        assert_eq!(block_deadline_ms(5_000_750, 1), 5_002);
        for start in [0u64, 1, 499, 999, 1_000, 123_456_789] {
            for t in [1u64, 10, 1000] {
                let d = block_deadline_ms(start, t);
                assert!(d * 1000 >= start + t * 1000, "{start} {t} {d}");
                assert!(d * 1000 < start + t * 1000 + 1000, "{start} {t} {d}");
            }
        }
        assert_eq!(
            block_deadline_ms(u64::MAX - 5, u64::MAX),
            u64::MAX.div_ceil(1000)
        );
    }
}
