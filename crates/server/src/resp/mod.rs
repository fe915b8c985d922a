//! The RESP side of the server: command table, dispatch, argument parsing,
//! error texts, and one file per command family under `cmd/`.
pub mod args;
pub mod cmd;
pub mod ctx;
pub mod dispatch;
pub mod errors;
pub mod meta;
pub mod table;
