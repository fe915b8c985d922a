//! `conn-rate`: new connections per second, as issue 23's bar counts them:
//! each client thread connects, sends PING (memcached: `version`), reads
//! the answer and closes, in a loop, for a fixed time. Against a
//! `rediss://` target every connection is a full TLS handshake (the
//! client context resumes no session: `target::tls_client`).
//!
//! It prints one line per target and round; it writes no JSON report.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cli::{make_ctx, ConnRateCmd};
use crate::target::{Conn, Target};
use crate::wire::OpError;

/// One connect + PING + close; the PING's answer proves the handshake
/// finished (a TLS 1.3 server can refuse a client after its first flight).
fn once(t: &Target, timeout: Duration) -> Result<(), OpError> {
    match Conn::open(t, timeout)? {
        Conn::Resp(mut c) => {
            c.cmd(&[b"PING"]);
            c.send()?;
            c.read_ok()
        }
        Conn::Mc(mut c) => c.simple(b"version").map(|_| ()),
    }
}

/// Runs `threads` loops against `t` for `length`: (connections, errors).
fn measure(t: &Target, threads: usize, length: Duration, timeout: Duration) -> (u64, u64) {
    let done = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (t, done, failed, stop) = (t.clone(), done.clone(), failed.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match once(&t, timeout) {
                        Ok(()) => done.fetch_add(1, Ordering::Relaxed),
                        Err(_) => failed.fetch_add(1, Ordering::Relaxed),
                    };
                }
            })
        })
        .collect();
    std::thread::sleep(length);
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        let _ = h.join();
    }
    (done.load(Ordering::Relaxed), failed.load(Ordering::Relaxed))
}

pub fn command(a: ConnRateCmd) -> Result<(), String> {
    let (ctx, _pids) = make_ctx(&a.common)?;
    if a.threads == 0 || !(a.seconds.is_finite() && a.seconds > 0.0) {
        return Err("--threads and --seconds must be positive".into());
    }
    let length = Duration::from_secs_f64(a.seconds);
    for t in &ctx.targets {
        once(t, ctx.timeout).map_err(|e| format!("{}: {e}", t.name))?;
    }
    println!("target\tround\tconnections/s\terrors");
    for round in 1..=ctx.rounds {
        for t in &ctx.targets {
            let started = Instant::now();
            let (n, errors) = measure(t, a.threads, length, ctx.timeout);
            let rate = n as f64 / started.elapsed().as_secs_f64();
            println!("{}\t{round}\t{rate:.0}\t{errors}", t.name);
        }
    }
    Ok(())
}
