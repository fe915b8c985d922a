//! The RESP front end: its session (parse, run, reply), argument parsing,
//! error texts, the command context, and one file per command family under
//! `cmd/`. The command table and dispatch it shares with the other front
//! ends live in `crate::exec`.
pub mod args;
pub mod cmd;
pub mod ctx;
pub mod errors;
pub mod session;
