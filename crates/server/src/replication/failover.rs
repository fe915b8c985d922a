//! FAILOVER's state on the master that hands over (replication.c
//! `failoverCommand`, `updateFailoverStatus`, `abortFailover`,
//! `clearFailoverState`): writes paused, a wait for a replica whose ACK
//! reaches `master_repl_offset`, then this server becomes that replica's
//! replica and its PSYNC carries `FAILOVER`, which makes the target promote
//! itself (`resp/cmd/replication.rs`). The link (`replica.rs`) reports the
//! PSYNC's answer here: accepted ends the failover, refused aborts it.
//!
//! The wait runs on a thread of its own, polling every 10 ms (Redis checks
//! in `beforeSleep`), so a worker never waits on it.

use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use cairn_engine::Cx;
use parking_lot::Mutex;

use super::replica;
use crate::log;
use crate::shared::{Msg, Shared};

const NONE: u8 = 0;
const WAIT_FOR_SYNC: u8 = 1;
const IN_PROGRESS: u8 = 2;

/// `NONE`, `WAIT_FOR_SYNC` or `IN_PROGRESS`; read without the lock by
/// INFO, PSYNC and the replica link.
static STATE: AtomicU8 = AtomicU8::new(NONE);

/// What FAILOVER asked for.
struct Plan {
    /// `TO host port`, or the replica found caught up.
    target: Option<(String, u16)>,
    /// Unix ms at which the wait ends (0: no TIMEOUT).
    end_ms: u64,
    force: bool,
}

static PLAN: Mutex<Plan> = Mutex::new(Plan {
    target: None,
    end_ms: 0,
    force: false,
});

/// INFO replication `master_failover_state`.
pub fn state_name() -> &'static str {
    match STATE.load(Ordering::Relaxed) {
        WAIT_FOR_SYNC => "waiting-for-sync",
        IN_PROGRESS => "failover-in-progress",
        _ => "no-failover",
    }
}

/// A failover is under way (either stage).
pub fn active() -> bool {
    STATE.load(Ordering::Relaxed) != NONE
}

/// This server is now its target's replica: its PSYNC says `FAILOVER`.
pub fn in_progress() -> bool {
    STATE.load(Ordering::Relaxed) == IN_PROGRESS
}

/// Waiting for a replica to catch up (the cron sends no PING then, as
/// Redis does not while a failover pauses clients: it would move the
/// offset the replica must reach).
pub fn waiting() -> bool {
    STATE.load(Ordering::Relaxed) == WAIT_FOR_SYNC
}

/// The checks and the start of FAILOVER once its arguments parsed, in
/// `failoverCommand`'s order; `Err` is the error text.
pub fn start(
    shared: &Shared,
    target: Option<(String, i64)>,
    timeout_ms: u64,
    force: bool,
) -> Result<(), &'static str> {
    let mut plan = PLAN.lock();
    if active() {
        return Err("ERR FAILOVER already in progress.");
    }
    if shared.replication.replica_mode() {
        return Err("ERR FAILOVER is not valid when server is a replica.");
    }
    let replicas = shared.replication.replicas.lock().clone();
    if replicas.is_empty() {
        return Err("ERR FAILOVER requires connected replicas.");
    }
    if force && (timeout_ms == 0 || target.is_none()) {
        return Err(
            "ERR FAILOVER with force option requires both a timeout and target HOST and IP.",
        );
    }
    let target = match target {
        Some((host, port)) => {
            let Some(rep) = replicas
                .iter()
                .find(|r| r.ip.eq_ignore_ascii_case(&host) && r.port == port)
            else {
                return Err("ERR FAILOVER target HOST and PORT is not a replica.");
            };
            if !rep.online() {
                return Err("ERR FAILOVER target replica is not online.");
            }
            log::notice(&format!("FAILOVER requested to {host}:{port}."));
            // findReplica matched the listening port, which fits a u16.
            Some((host, port as u16))
        }
        None => {
            log::notice("FAILOVER requested to any replica.");
            None
        }
    };
    let now = cairn_engine::clock::now_ms();
    *plan = Plan {
        target,
        end_ms: if timeout_ms > 0 { now + timeout_ms } else { 0 },
        force,
    };
    // pauseClients(PAUSE_DURING_FAILOVER, LLONG_MAX, CLIENT_PAUSE_WRITE).
    let p = &shared.pause;
    if p.until_ms.load(Ordering::Relaxed) <= now {
        // A client's pause that ran out may have left ALL behind.
        p.all.store(false, Ordering::Relaxed);
    }
    p.failover.store(true, Ordering::Relaxed);
    p.until_ms.store(u64::MAX, Ordering::Relaxed);
    STATE.store(WAIT_FOR_SYNC, Ordering::SeqCst);
    drop(plan);
    let Some(s) = shared.journal.server.get().and_then(|w| w.upgrade()) else {
        clear(shared);
        return Err("ERR the server is shutting down");
    };
    let spawned = std::thread::Builder::new()
        .name("cairn-failover".into())
        .spawn(move || {
            crate::memory::register_thread();
            while waiting() {
                update(&s);
                std::thread::sleep(Duration::from_millis(10));
            }
        });
    if spawned.is_err() {
        clear(shared);
        return Err("ERR can't start the failover thread");
    }
    Ok(())
}

/// `updateFailoverStatus`: the timeout (abort, or with FORCE fail over
/// anyway), else a replica whose ACK is at our offset becomes the target.
fn update(shared: &Shared) {
    let mut plan = PLAN.lock();
    if !waiting() {
        return;
    }
    if plan.end_ms != 0 && plan.end_ms <= cairn_engine::clock::now_ms() {
        match plan.target.clone() {
            Some((host, port)) if plan.force => {
                log::notice(&format!(
                    "FAILOVER to {host}:{port} time out exceeded, failing over."
                ));
                hand_over(shared, &host, port);
            }
            _ => abort_locked(
                shared,
                &mut plan,
                &Cx::DETACHED,
                None,
                "Replica never caught up before timeout",
            ),
        }
        return;
    }
    let offset = shared.replication.offset();
    let replicas = shared.replication.replicas.lock().clone();
    let synced = match &plan.target {
        Some((host, port)) => replicas
            .iter()
            .any(|r| {
                r.ip.eq_ignore_ascii_case(host)
                    && r.port == i64::from(*port)
                    && r.ack_offset() == offset
            })
            .then(|| (host.clone(), *port)),
        None => replicas
            .iter()
            .filter(|r| r.ack_offset() == offset)
            .find_map(|r| Some((r.ip.clone(), u16::try_from(r.port).ok()?))),
    };
    if let Some((host, port)) = synced {
        // From now on we fail over to this node.
        plan.target = Some((host.clone(), port));
        log::notice(&format!(
            "Failover target {host}:{port} is synced, failing over."
        ));
        hand_over(shared, &host, port);
    }
}

/// This server becomes the target's replica; the link's PSYNC carries
/// FAILOVER while the state says so. Called with `PLAN` held, as every
/// change of `STATE` is, so an ABORT cannot slip between the two.
fn hand_over(shared: &Shared, host: &str, port: u16) {
    STATE.store(IN_PROGRESS, Ordering::SeqCst);
    replica::set_master(shared, &Cx::DETACHED, None, host, port);
}

/// The link got the target's answer to `PSYNC ... FAILOVER`: `+CONTINUE`
/// or `+FULLRESYNC` end the failover, anything else aborts it (this
/// server is a master again).
pub fn psync_answered(shared: &Shared, accepted: bool) {
    let mut plan = PLAN.lock();
    if !in_progress() {
        return;
    }
    if accepted {
        clear_locked(shared, &mut plan);
    } else {
        abort_locked(
            shared,
            &mut plan,
            &Cx::DETACHED,
            None,
            "Failover target rejected psync request",
        );
    }
}

/// FAILOVER ABORT (`abortFailover`). `cx` and `caller`: the asking
/// command's and worker's, as for REPLICAOF NO ONE.
pub fn abort(shared: &Shared, cx: &Cx, caller: Option<usize>, why: &str) {
    let mut plan = PLAN.lock();
    abort_locked(shared, &mut plan, cx, caller, why);
}

/// `abortFailover`: a server already handing over is a master again.
fn abort_locked(shared: &Shared, plan: &mut Plan, cx: &Cx, caller: Option<usize>, why: &str) {
    if !active() {
        return;
    }
    match &plan.target {
        Some((host, port)) => log::notice(&format!("FAILOVER to {host}:{port} aborted: {why}")),
        None => log::notice(&format!("FAILOVER to any replica aborted: {why}")),
    }
    if in_progress() {
        replica::unset_master(shared, cx, caller);
    }
    clear_locked(shared, plan);
}

/// `clearFailoverState` when a start fails.
fn clear(shared: &Shared) {
    let mut plan = PLAN.lock();
    clear_locked(shared, &mut plan);
}

/// `clearFailoverState`: no plan, and the failover's pause lifted (held
/// writes run, or on a server now a replica get READONLY).
fn clear_locked(shared: &Shared, plan: &mut Plan) {
    *plan = Plan {
        target: None,
        end_ms: 0,
        force: false,
    };
    STATE.store(NONE, Ordering::SeqCst);
    let p = &shared.pause;
    if p.failover.swap(false, Ordering::Relaxed) {
        p.until_ms.store(0, Ordering::Relaxed);
        p.all.store(false, Ordering::Relaxed);
        for w in shared.workers() {
            w.send(Msg::Poke);
        }
    }
}
