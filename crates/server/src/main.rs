//! `cairn`: a Redis-compatible data store. Starts like `redis-server`:
//! `cairn [config-file] [--directive value ...]`.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

mod blocking;
mod client;
mod config;
mod journal;
mod keyevents;
mod listener;
mod log;
mod memcache;
mod memory;
mod pubsub;
#[cfg(test)]
mod readme;
mod resp;
mod server;
mod shared;
mod slowlog;
mod util;
mod worker;

pub const VERSION: &str = env!("CARGO_PKG_VERSION");

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    match argv.first().map(String::as_str) {
        Some("--help" | "-h") => {
            print!("{}", config::usage());
            return;
        }
        Some("check-journal") => std::process::exit(journal::check::run(&argv[1..])),
        Some("--version" | "-v") => {
            println!(
                "Cairn server v={VERSION} redis-compat={} malloc=jemalloc bits={}",
                resp::meta::REDIS_VERSION,
                usize::BITS
            );
            return;
        }
        _ => {}
    }
    let cfg = match config::load(&argv) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = server::run(cfg) {
        log::warning(&e);
        std::process::exit(1);
    }
}
