//! One file per command family; each exports `COMMANDS`, which
//! `table::CommandTable::build` assembles into the one command table.
use crate::exec::table::Def;
use crate::resp::ctx::{CmdResult, Ctx};
use crate::resp::errors;
use crate::resp::errors::{truncate_lossy, CmdError};

pub mod acl;
pub mod bitmap;
pub mod client;
pub mod cluster;
pub mod connection;
pub mod debug_dataset;
pub mod dump;
pub mod failover;
pub mod functions;
pub mod geo;
pub mod hash;
pub mod hll;
pub mod info;
pub mod journal;
pub mod keys;
pub mod latency;
pub mod list;
pub mod lolwut;
pub mod memory;
pub mod multi;
pub mod pubsub;
pub mod replicaof;
pub mod replication;
pub mod scripting;
pub mod server;
pub mod set;
pub mod snapshot;
pub mod sort;
pub mod stream;
pub mod string;
pub mod tracking;
pub mod zset;

/// Every family's registrations, in the order COMMAND lists them.
pub fn families() -> Vec<&'static [Def]> {
    vec![
        string::COMMANDS,
        keys::COMMANDS,
        hash::COMMANDS,
        list::COMMANDS,
        set::COMMANDS,
        zset::COMMANDS,
        bitmap::COMMANDS,
        hll::COMMANDS,
        sort::COMMANDS,
        multi::COMMANDS,
        pubsub::COMMANDS,
        connection::COMMANDS,
        client::COMMANDS,
        server::COMMANDS,
        info::COMMANDS,
        memory::COMMANDS,
        snapshot::COMMANDS,
        journal::COMMANDS,
        scripting::COMMANDS,
        functions::COMMANDS,
        acl::COMMANDS,
        replication::COMMANDS,
        lolwut::COMMANDS,
        latency::COMMANDS,
        geo::COMMANDS,
        dump::COMMANDS,
        stream::COMMANDS,
        // branch cluster
        cluster::COMMANDS,
        // branch replica
        replicaof::COMMANDS,
        // branch sentinel
        failover::COMMANDS,
    ]
}

/// Redis's `addReplyHelp`: a header naming the command as typed (upper
/// case), the lines, and the HELP entry, all as status strings.
pub fn reply_help(ctx: &mut Ctx, lines: &[&str]) -> CmdResult {
    let name = String::from_utf8_lossy(ctx.arg(0)).to_ascii_uppercase();
    let mut w = ctx.reply();
    w.array(lines.len() + 3);
    w.simple(&format!(
        "{name} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    ));
    for l in lines {
        w.simple(l);
    }
    w.simple("HELP");
    w.simple("    Prints this help.");
    Ok(())
}

/// Redis's `addReplySubcommandSyntaxError`.
pub fn subcommand_syntax_error(ctx: &Ctx) -> CmdError {
    errors::subcommand_syntax(
        &truncate_lossy(ctx.arg(1), 128),
        &String::from_utf8_lossy(ctx.arg(0)).to_ascii_uppercase(),
    )
}
