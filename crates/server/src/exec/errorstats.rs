//! INFO errorstats' table: error replies counted by their code (the first
//! word), per worker. The dispatcher's error path (`dispatch::write_error`),
//! where every error reply is written, feeds it; INFO reads it and CONFIG
//! RESETSTAT clears it.
use parking_lot::{const_mutex, Mutex};

/// Distinct error codes tracked per worker. Redis's codes are a handful
/// (ERR, WRONGTYPE, NOAUTH, ...); the bound keeps a client that makes up
/// codes from growing the table.
const MAX_ERROR_CODES: usize = 128;

/// Workers with a table of their own: `server-threads` is at most 1024.
const MAX_WORKERS: usize = 1024;

/// One worker's (error code, count) pairs.
type ErrorTable = Mutex<Vec<(Box<str>, u64)>>;

/// Locked by its worker when counting and by INFO / RESETSTAT, so
/// uncontended; 32 KiB in all.
static ERRORS: [ErrorTable; MAX_WORKERS] = [const { const_mutex(Vec::new()) }; MAX_WORKERS];

/// Counts one error reply under its code: the text before the first space
/// within the first 31 bytes, or `ERR` when there is none (networking.c
/// `afterErrorReply`). `msg` is the reply without the leading `-`.
pub fn record_error(worker: usize, msg: &[u8]) {
    let head = &msg[..msg.len().min(31)];
    let code = match memchr::memchr(b' ', head) {
        Some(i) if i > 0 => String::from_utf8_lossy(&msg[..i]),
        _ => "ERR".into(),
    };
    let mut t = ERRORS[worker % MAX_WORKERS].lock();
    if let Some(entry) = t.iter_mut().find(|(c, _)| **c == *code) {
        entry.1 += 1;
    } else if t.len() < MAX_ERROR_CODES {
        t.push((code.into(), 1));
    }
}

/// Every worker's counts summed, codes sorted as Redis's rax returns them.
pub fn totals() -> Vec<(Box<str>, u64)> {
    let mut all: Vec<(Box<str>, u64)> = Vec::new();
    for t in ERRORS.iter() {
        for (code, n) in t.lock().iter() {
            match all.iter_mut().find(|(c, _)| c == code) {
                Some(e) => e.1 += n,
                None => all.push((code.clone(), *n)),
            }
        }
    }
    all.sort();
    all
}

/// CONFIG RESETSTAT: every count back to nothing.
pub fn reset() {
    for t in ERRORS.iter() {
        t.lock().clear();
    }
}
