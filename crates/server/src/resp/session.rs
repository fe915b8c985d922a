//! A RESP connection's session: parses the requests buffered so far
//! (`cairn_protocol::resp`), runs each through `exec::dispatch`, and keeps
//! what only RESP has per connection: the argument list being filled, a
//! request held by CLIENT PAUSE, a blocking command woken to run again,
//! and a read parked on the disk tier (`crate::tier_io`) run again once
//! its values are read.
//! A protocol error is answered, then the connection closes (Redis:
//! `setProtocolError` → `CLIENT_CLOSE_AFTER_REPLY`).
use crate::blocking;
use crate::client::Client;
use crate::exec::dispatch::{self, Outcome};
use crate::log;
use crate::net::listener::PROTECTED_MODE_ERROR;
use crate::net::session::{FrontEnd, Io, Refusal, Session, Stop};
use crate::resp::ctx::Args;
use crate::shared::Shared;
use crate::tier_io;
use cairn_protocol::resp::{parse_request, ArgList, Limits, Parsed};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Bulks at least this long that have not fully arrived are read into a
/// buffer of their own, sized exactly, which then becomes the argument
/// and, for SET, the stored value without another copy (Redis:
/// `PROTO_MBULK_BIG_ARG`).
const BIG_ARG: usize = cairn_engine::value::string::LARGE_MIN;

/// The RESP port's front end.
pub static FRONT_END: FrontEnd = FrontEnd {
    session: RespSession::boxed,
    refusal,
};

fn refusal(why: Refusal) -> Vec<u8> {
    match why {
        Refusal::MaxClients => b"-ERR max number of clients reached\r\n".to_vec(),
        Refusal::ProtectedMode => format!("-{PROTECTED_MODE_ERROR}").into_bytes(),
    }
}

#[derive(Default)]
pub struct RespSession {
    /// The arguments of the request being parsed or run.
    args: ArgList,
    /// A paused request sits at `rpos`; retry on the next cron tick.
    paused: bool,
    /// The blocked request at `rpos` should run again (a key is ready,
    /// its time ran out, or CLIENT UNBLOCK).
    wake: bool,
}

impl RespSession {
    fn boxed() -> Box<dyn Session> {
        Box::<RespSession>::default()
    }
}

impl Session for RespSession {
    fn process(&mut self, io: Io<'_>, client: &mut Client, shared: &Shared, worker: usize) -> Stop {
        let stats = &shared.worker_stats[worker];
        let Io {
            input,
            rpos,
            need,
            out: wbuf,
            unsent_from,
            high_water,
        } = io;
        let RespSession { args, paused, wake } = self;
        let base = Limits {
            max_bulk_len: shared.hot.proto_max_bulk_len.load(Ordering::Relaxed),
            big_arg: BIG_ARG,
            ..Limits::default()
        };
        let mut closing = false;
        let mut stop = Stop::NeedInput;
        // A read of the disk tier may park the request at the head
        // (`crate::tier_io`) while this session runs it, nowhere else.
        client.tier.allowed = true;
        while *rpos < input.len() {
            if closing {
                stop = Stop::Closing;
                break;
            }
            if wbuf.len() - unsent_from + client.out_refs.pending() >= high_water {
                stop = Stop::OutputFull;
                break;
            }
            if client.tier.parked() {
                if !tier_io::collect(client) {
                    stop = Stop::Blocked;
                    break;
                }
                *wake = false;
            }
            if client.blocked.is_some() {
                if !*wake {
                    stop = Stop::Blocked;
                    break;
                }
                *wake = false;
            }
            // The clients the last command woke run first (`crate::served`).
            if client.served.waiting() {
                stop = Stop::Blocked;
                break;
            }
            let buf = &input[*rpos..];
            if buf.len() < *need {
                break;
            }
            // A client that still owes the password gets Redis's tighter
            // request limits; AUTH earlier in the same batch lifts them.
            let limits = Limits {
                unauthenticated: !client.authenticated,
                ..base
            };
            match parse_request(buf, &limits, args) {
                Ok(Parsed::Complete { consumed }) => {
                    *need = 0;
                    if !args.is_empty() {
                        let mut a = Args::new(buf, args);
                        if buf[0] == b'*' && !args.has_blocks() {
                            // Every argument is in `buf`: the journal can
                            // record the request's own bytes.
                            a = a.with_raw(&buf[..consumed]);
                        }
                        match dispatch::execute(shared, client, a, wbuf, stats) {
                            Outcome::Paused => {
                                // Counted until the worker lets it retry
                                // (`unpause`) or closes it.
                                shared.pause.held.fetch_add(1, Ordering::Relaxed);
                                *paused = true;
                                stop = Stop::Paused;
                                break;
                            }
                            Outcome::Blocked => {
                                let on = client.wants_block.take().expect("Blocked sets it");
                                if client.blocked.is_none() {
                                    // Registered first, then one more look: a
                                    // push that landed in between is not missed.
                                    blocking::register(shared, client.id, worker, &on);
                                    client.info.blocked.store(true, Ordering::Relaxed);
                                    client.blocked = Some(on);
                                    *wake = true;
                                    continue;
                                }
                                stop = Stop::Blocked;
                                break;
                            }
                            Outcome::Parked => {
                                tier_io::submit(client, worker);
                                if client.tier.parked() {
                                    stop = Stop::Blocked;
                                    break;
                                }
                                continue;
                            }
                            Outcome::Done => {
                                client.tier.done();
                                if let Some(on) = client.blocked.take() {
                                    blocking::unregister(shared, client.id, &on);
                                    client.info.blocked.store(false, Ordering::Relaxed);
                                    client.info.unblock_req.store(0, Ordering::Relaxed);
                                    if client.unblock.take().is_none() {
                                        blocking::handoff(shared, &on, Some(client));
                                        // Its wakes belong to the command
                                        // that just ran (`crate::served`).
                                        crate::served::settle(client);
                                    }
                                }
                            }
                        }
                        if client.close_after_reply {
                            closing = true;
                        }
                    }
                    *rpos += consumed;
                    for b in args.take_blocks() {
                        cairn_engine::lazyfree::release(b);
                    }
                }
                Ok(Parsed::Incomplete { min_total }) => {
                    *need = min_total;
                    break;
                }
                Ok(Parsed::Block { at, len }) => {
                    stop = Stop::Block { at, len };
                    break;
                }
                Err(e) => {
                    // Reply, then close this connection only (Redis:
                    // setProtocolError → CLIENT_CLOSE_AFTER_REPLY).
                    let msg = format!("ERR {e}");
                    cairn_protocol::resp::ReplyWriter::new(wbuf, client.proto).error(&msg);
                    log::verbose(&format!(
                        "Protocol error ({e}) from client {}",
                        client.info.addr
                    ));
                    closing = true;
                    *rpos = input.len();
                    break;
                }
            }
        }
        if closing {
            stop = Stop::Closing;
        }
        client.tier.allowed = false;
        stop
    }

    fn add_block(&mut self, at: usize, data: Arc<Vec<u8>>, _terminated: bool) {
        // RESP skips the two bytes after a large bulk without looking
        // at them.
        self.args.add_block(at, data);
    }

    fn holding(&self) -> bool {
        self.paused || self.wake
    }

    fn paused(&self) -> bool {
        self.paused
    }

    fn unpause(&mut self) {
        self.paused = false;
    }

    fn wake(&mut self) -> bool {
        !std::mem::replace(&mut self.wake, true)
    }

    fn parsed_bytes(&self) -> usize {
        self.args.heap_bytes()
    }

    fn release(&mut self) {
        for b in self.args.take_blocks() {
            cairn_engine::lazyfree::release(b);
        }
    }
}
