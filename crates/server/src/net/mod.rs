//! The connection layer: accepting sockets (`listener`), the worker loop
//! that polls them (`worker`), a connection's buffers and transport
//! (`conn`, `transport`, with TLS in `tls` and its contexts in
//! `tls_config`), the blocking link a SCRIPT DEBUG session borrows
//! (`debug_link`), and moving connections between workers (`balance`). It knows no protocol: each connection carries a
//! `Session` of its port's protocol (`session`), which parses what is
//! buffered, runs it and writes the replies.
pub mod balance;
pub mod conn;
mod debug_link;
pub mod listener;
pub mod migrate;
pub mod session;
pub mod tls;
pub mod tls_config;
pub mod transport;
pub mod worker;
