//! One file per command family; each exports `COMMANDS`, which
//! `table::CommandTable::build` assembles into the one command table.
use crate::resp::table::Def;

pub mod client;
pub mod connection;
pub mod hash;
pub mod info;
pub mod keys;
pub mod server;
pub mod string;

/// Every family's registrations, in the order COMMAND lists them.
pub fn families() -> Vec<&'static [Def]> {
    vec![
        string::COMMANDS,
        keys::COMMANDS,
        hash::COMMANDS,
        connection::COMMANDS,
        client::COMMANDS,
        server::COMMANDS,
        info::COMMANDS,
    ]
}
