//! The command context: what one running command carries into the engine.
//!
//! Every lock of the keyspace takes a `Cx` (`Engine::lock(cx, key)`), and
//! the guard it returns keeps it, so everything that belongs to the command
//! rather than to the thread travels with the call:
//!
//! - the database it runs in and its argument vector, which the journal
//!   records when the command writes (`record`), borrowed for exactly as
//!   long as the command runs: no lifetime is erased anywhere;
//! - its clock: one reading for the whole command, as Redis 7.0's `call()`
//!   fixes the time for every expiry check a command makes;
//! - the `Hold` of an EXEC, whose queued commands lock nothing of their
//!   own but borrow the held shards and collect their records into it;
//! - a `CmdState`, the mutable part: records staged in place of the command
//!   as sent (SET EX -> SET PXAT, SPOP -> SREM, expiry DELs found by
//!   lookups), the events it raised for the server (notifications, ready
//!   keys), and the end of what it appended to the journal.
//!
//! A command can therefore run inside another (EXEC's queued commands
//! today, a script's `redis.call` next): the inner command gets a `Cx` of
//! its own arguments that shares the outer one's hold and state. Nothing
//! here is thread-local, so a command could also be suspended and resumed
//! on another thread later (a disk tier).
//!
//! `Cx` is a bundle of borrowed handles and plain values: `Copy`, and
//! `Cx::DETACHED` is a constant for work outside any client command that
//! records nothing implicitly (tests, loading, the snapshot cut).
use crate::events::Event;
use crate::keyspace::Hold;
use crate::record::ArgSource;
use std::cell::{Cell, RefCell};

/// The mutable, per-command part of a context. The caller that starts a
/// command owns it (a stack local of the dispatcher), and takes its events
/// and journal end once the command is over and its locks are released.
#[derive(Default)]
pub struct CmdState {
    pub(crate) staged: RefCell<Staged>,
    /// Whether `staged` holds anything for the current guard (`pre` or an
    /// explicit record): a plain flag, so the common commit (nothing
    /// staged: the command as sent) never borrows `staged`.
    pub(crate) staged_any: Cell<bool>,
    events: RefCell<Vec<Event>>,
    /// End of the last unit this command appended to the journal (0: none):
    /// what the connection's reply must wait for under `appendfsync always`.
    journal_end: Cell<u64>,
    /// The client whose command this is (0: none), so client-side
    /// caching can skip a NOLOOP client's own writes (`crate::tracking`).
    client: Cell<u64>,
    /// The command is a replica's master's (`Limits::replica_expiry`).
    from_master: Cell<bool>,
}

/// Records staged for the current guard (`record::stage`, `record::expired`).
#[derive(Default)]
pub(crate) struct Staged {
    /// Encoded records that go first (expiry deletions found by lookups).
    pub(crate) pre: Vec<u8>,
    /// An explicit record replacing the command's own (`stage`).
    pub(crate) explicit: Vec<u8>,
    pub(crate) has_explicit: bool,
}

impl CmdState {
    pub fn new() -> CmdState {
        CmdState::default()
    }

    /// True if the command raised events not taken yet.
    pub fn has_events(&self) -> bool {
        !self.events.borrow().is_empty()
    }

    /// Takes the events raised so far, oldest first.
    pub fn take_events(&self) -> Vec<Event> {
        std::mem::take(&mut *self.events.borrow_mut())
    }

    /// Takes the end of what was appended to the journal since the last
    /// call (0: nothing).
    pub fn take_journal_end(&self) -> u64 {
        self.journal_end.replace(0)
    }

    /// Marks the command as the master's, applied by a replica: keys past
    /// their time are live to it (the master decides when they go).
    pub fn set_from_master(&self) {
        self.from_master.set(true);
    }

    /// Names the client running the command (`Cx::client`).
    pub fn set_client(&self, id: u64) {
        self.client.set(id);
    }

    pub(crate) fn push_event(&self, e: Event) {
        self.events.borrow_mut().push(e);
    }

    pub(crate) fn note_journal_end(&self, end: u64) {
        if end != 0 {
            self.journal_end.set(end);
        }
    }
}

/// A command's context (see the module comment).
#[derive(Clone, Copy)]
pub struct Cx<'a> {
    /// The database the command runs in: the journal records its writes
    /// there.
    pub db: usize,
    args: Option<&'a dyn ArgSource>,
    /// The command's start, Unix milliseconds (0: read the clock at each
    /// lock).
    now_ms: u64,
    hold: Option<&'a Hold<'a>>,
    state: Option<&'a CmdState>,
}

impl<'a> Cx<'a> {
    /// No command: nothing is recorded implicitly (a write must stage its
    /// record or be recorded by `record::deleted`), events are dropped, and
    /// each lock reads the clock.
    pub const DETACHED: Cx<'static> = Cx {
        db: 0,
        args: None,
        now_ms: 0,
        hold: None,
        state: None,
    };

    /// A client command in `db` with `args`, started at `now_ms`, keeping
    /// its staged records and events in `state`.
    pub fn command(
        db: usize,
        args: Option<&'a dyn ArgSource>,
        now_ms: u64,
        state: &'a CmdState,
    ) -> Cx<'a> {
        Cx {
            db,
            args,
            now_ms,
            hold: None,
            state: Some(state),
        }
    }

    /// Work outside a client command whose events still matter (the active
    /// expiry sweep, eviction): events go to `state`, nothing is recorded
    /// implicitly.
    pub fn background(state: &'a CmdState) -> Cx<'a> {
        Cx {
            state: Some(state),
            ..Cx::DETACHED
        }
    }

    /// A command run inside this one (an EXEC's queued command): its own
    /// database, arguments and clock, this context's hold and state.
    pub fn nested(&self, db: usize, args: Option<&'a dyn ArgSource>, now_ms: u64) -> Cx<'a> {
        Cx {
            db,
            args,
            now_ms,
            ..*self
        }
    }

    /// This context with `hold`: every lock is served from it.
    pub fn with_hold(&self, hold: &'a Hold<'a>) -> Cx<'a> {
        Cx {
            hold: Some(hold),
            ..*self
        }
    }

    /// The command's clock in Unix milliseconds: its start, or now.
    #[inline]
    pub fn now_ms(&self) -> u64 {
        match self.now_ms {
            0 => crate::clock::now_ms(),
            t => t,
        }
    }

    #[inline]
    pub(crate) fn args(&self) -> Option<&'a dyn ArgSource> {
        self.args
    }

    /// True if the command runs inside a hold (EXEC, a script).
    #[inline]
    pub fn in_hold(&self) -> bool {
        self.hold.is_some()
    }

    #[inline]
    pub(crate) fn hold(&self) -> Option<&'a Hold<'a>> {
        self.hold
    }

    #[inline]
    pub fn state(&self) -> Option<&'a CmdState> {
        self.state
    }

    /// The client whose command this is (0: none, as for expiry).
    #[inline]
    pub fn client(&self) -> u64 {
        self.state.map_or(0, |s| s.client.get())
    }

    /// The command is a replica's master's (`CmdState::set_from_master`).
    pub(crate) fn is_master_command(&self) -> bool {
        self.state.is_some_and(|s| s.from_master.get())
    }

    /// Records an event for the server to handle after the command.
    #[inline]
    pub fn push_event(&self, e: Event) {
        if let Some(s) = self.state {
            s.push_event(e);
        }
    }
}

/// A context for the engine's unit tests whose events can be read back:
/// the state is per test thread and lives for the thread.
#[cfg(test)]
pub(crate) mod testing {
    use super::{CmdState, Cx};
    use crate::events::Event;

    thread_local! {
        static STATE: &'static CmdState = Box::leak(Box::new(CmdState::new()));
    }

    pub fn cx() -> Cx<'static> {
        Cx::background(STATE.with(|s| *s))
    }

    /// The events raised through `cx()` on this thread since the last call.
    pub fn take_events() -> Vec<Event> {
        STATE.with(|s| s.take_events())
    }
}
