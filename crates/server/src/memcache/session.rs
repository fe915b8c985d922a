//! A memcached connection's session: decodes the requests buffered so far
//! (`cairn_protocol::memcache`: text and meta commands, and the SASL
//! authentication line while the client owes a password), runs each
//! (`memcache::execute`) and counts its bytes for `stats`. memcached has no
//! blocking commands and no CLIENT PAUSE, so a session never holds a
//! request at the head of the buffer.
use super::{admin, execute, run_due_flush, stats, Ctx, DB};
use crate::client::Client;
use crate::exec::admission;
use crate::net::listener::PROTECTED_MODE_ERROR;
use crate::net::session::{FrontEnd, Io, Refusal, Session, Stop};
use crate::shared::{bump, Shared};
use cairn_engine::{CmdState, Cx};
use cairn_protocol::memcache::{Auth, DataBlock, Decoded, Decoder, Limits};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Large data blocks that have not fully arrived are read into a buffer of
/// their own by the connection layer (the same threshold as for RESP
/// bulks).
const BIG_VALUE: usize = cairn_engine::value::string::LARGE_MIN;

/// The `memcached-port` front end.
pub static FRONT_END: FrontEnd = FrontEnd {
    session: McSession::boxed,
    refusal,
};

fn refusal(why: Refusal) -> Vec<u8> {
    match why {
        // memcached's own words when it is out of connections.
        Refusal::MaxClients => b"ERROR Too many open connections\r\n".to_vec(),
        Refusal::ProtectedMode => format!("SERVER_ERROR {PROTECTED_MODE_ERROR}").into_bytes(),
    }
}

/// Per-connection memcached state.
#[derive(Default)]
pub struct McSession {
    decoder: Decoder,
    /// The large data block of the request at the head of the buffer,
    /// read into a buffer of its own (`Stop::Block`).
    block: Option<DataBlock>,
}

impl McSession {
    fn boxed() -> Box<dyn Session> {
        Box::<McSession>::default()
    }
}

impl Session for McSession {
    fn process(&mut self, io: Io<'_>, client: &mut Client, shared: &Shared, worker: usize) -> Stop {
        let Io {
            input,
            rpos,
            need,
            out,
            unsent_from,
            high_water,
        } = io;
        let st = self;
        let stats = &shared.memcache.stats[worker];
        let wstats = &shared.worker_stats[worker];
        while *rpos < input.len() {
            if out.len() - unsent_from + client.out_refs.pending() >= high_water {
                return Stop::OutputFull;
            }
            let buf = &input[*rpos..];
            if buf.len() < *need {
                break;
            }
            if !client.authenticated {
                match st.decoder.decode_auth(buf) {
                    Auth::Incomplete { min_total } => {
                        *need = min_total;
                        break;
                    }
                    Auth::Close => return Stop::Abort,
                    Auth::Reply { consumed, msg } => {
                        *need = 0;
                        *rpos += consumed;
                        out.extend_from_slice(msg.as_bytes());
                        out.extend_from_slice(b"\r\n");
                    }
                    Auth::Credentials {
                        consumed,
                        user,
                        pass,
                    } => {
                        *need = 0;
                        *rpos += consumed;
                        admin::authenticate(shared, client, stats, user, pass, out);
                    }
                }
                continue;
            }
            // Eviction runs before each request, as for RESP commands.
            let evicted = CmdState::new();
            let no_memory = !admission::room_for(shared, &Cx::background(&evicted), 0);
            crate::keyevents::after_command(shared, &evicted, None);
            let limits = Limits {
                max_value: shared.hot.proto_max_bulk_len.load(Ordering::Relaxed),
                no_memory,
                big_value: BIG_VALUE,
            };
            match st.decoder.decode_with(buf, &limits, st.block.as_ref()) {
                Decoded::Incomplete { min_total } => {
                    *need = min_total;
                    break;
                }
                Decoded::Block { at, len } => return Stop::Block { at, len },
                Decoded::Skipped { consumed } => {
                    *need = 0;
                    *rpos += consumed;
                    stats.add(stats::Stat::BytesRead, consumed as u64);
                }
                Decoded::Close => return Stop::Abort,
                Decoded::Request { consumed, req } => {
                    *need = 0;
                    // Rules changed by ACL SETUSER apply from the next
                    // request, as on the RESP port. A deleted user's
                    // connection is being closed (ACL DELUSER); meanwhile
                    // it runs nothing.
                    crate::auth::refresh(shared, client);
                    if !client.authenticated {
                        *rpos += consumed;
                        out.extend_from_slice(super::errors::NOPERM.as_bytes());
                        out.extend_from_slice(b"\r\n");
                        if let Some(b) = st.block.take() {
                            cairn_engine::lazyfree::release(b.data);
                        }
                        continue;
                    }
                    let before = out.len() + client.out_refs.pending();
                    // One clock reading for the request and its state in the
                    // engine, as for a RESP command (`dispatch::invoke`).
                    let state = CmdState::new();
                    let ecx = Cx::command(DB, None, cairn_engine::clock::now_ms(), &state);
                    run_due_flush(shared, &ecx);
                    let mut cx = Ctx {
                        shared,
                        out: &mut *out,
                        stats,
                        client: &mut *client,
                        ecx,
                    };
                    // A disk tier read that failed where the reader could
                    // not return it (`tier::fail_read`) fails this request
                    // alone: its partial reply goes, the error is its
                    // answer, the key is as it was.
                    let reply_start = cx.out.len();
                    if let Err(m) = cairn_engine::tier::catch_read_failure(|| execute(&mut cx, req))
                    {
                        crate::log::warning(&m);
                        cx.out.truncate(reply_start);
                        cx.client.out_refs.truncate(reply_start);
                        cx.line(&format!("SERVER_ERROR {m}"));
                    }
                    crate::keyevents::after_command(shared, &state, None);
                    client.note_journal_end(state.take_journal_end());
                    bump(&wstats.commands, 1);
                    let block_len = st.block.as_ref().map_or(0, |b| b.data.len() + 2);
                    stats.add(stats::Stat::BytesRead, (consumed + block_len) as u64);
                    let after = out.len() + client.out_refs.pending();
                    stats.add(stats::Stat::BytesWritten, (after - before) as u64);
                    *rpos += consumed;
                    if let Some(b) = st.block.take() {
                        cairn_engine::lazyfree::release(b.data);
                    }
                    if client.close_after_reply {
                        return Stop::Closing;
                    }
                }
            }
        }
        Stop::NeedInput
    }

    fn add_block(&mut self, _at: usize, data: Arc<Vec<u8>>, terminated: bool) {
        // memcached's data block always follows its command line: `at` is
        // where the decoder already knows it to be.
        self.block = Some(DataBlock { data, terminated });
    }

    fn holding(&self) -> bool {
        false
    }

    fn paused(&self) -> bool {
        false
    }

    fn unpause(&mut self) {}

    fn wake(&mut self) -> bool {
        false
    }

    fn release(&mut self) {}
}
