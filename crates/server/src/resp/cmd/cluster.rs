//! CLUSTER and its Redis 7.0 subcommands, answered as a Redis Cluster of
//! one master node that owns all 16,384 slots answers them (cluster.c
//! `clusterCommand`), from the node `crate::cluster` keeps. Without
//! `cluster-enabled` every subcommand answers "This instance has cluster
//! support disabled", as Redis does (after the arity and subcommand
//! checks).
//!
//! What a node without a cluster bus cannot do — join other nodes (MEET),
//! give slots away (DELSLOTS, DELSLOTSRANGE, FLUSHSLOTS, SETSLOT ...
//! MIGRATING) — is refused with an error that says so
//! (`errors::cluster_one_node`, tests/diff/DIFFERENCES.md). Everything that
//! names another node answers as Redis does for a node it does not know,
//! which is every node but this one.
use crate::cluster::{Addr, Node};
use crate::config::ClusterEndpoint;
use crate::exec::table::Def;
use crate::resp::args;
use crate::resp::cmd::{reply_help, subcommand_syntax_error};
use crate::resp::ctx::{CmdResult, Ctx};
use crate::resp::errors;
use crate::resp::errors::CmdError;
use cairn_engine::slots::{key_hash_slot, SLOTS};

pub const COMMANDS: &[Def] = &[Def::container(
    "cluster",
    &[
        Def::new("addslots", addslots),
        Def::new("addslotsrange", addslotsrange),
        Def::new("bumpepoch", bumpepoch),
        Def::new("count-failure-reports", count_failure_reports),
        Def::new("countkeysinslot", countkeysinslot),
        Def::new("delslots", delslots),
        Def::new("delslotsrange", delslotsrange),
        Def::new("failover", failover),
        Def::new("flushslots", flushslots),
        Def::new("forget", forget),
        Def::new("getkeysinslot", getkeysinslot),
        Def::new("help", help),
        Def::new("info", info),
        Def::new("keyslot", keyslot),
        Def::new("links", links),
        Def::new("meet", meet),
        Def::new("myid", myid),
        Def::new("nodes", nodes),
        Def::new("replicas", replicas),
        Def::new("replicate", replicate),
        Def::new("reset", reset),
        Def::new("saveconfig", saveconfig),
        Def::new("set-config-epoch", set_config_epoch),
        Def::new("setslot", setslot),
        Def::new("shards", shards),
        Def::new("slaves", replicas),
        Def::new("slots", slots),
    ],
)];

/// The node, or the error a server without cluster support answers.
fn node(ctx: &Ctx) -> Result<Node, CmdError> {
    if !ctx.shared.cluster.enabled() {
        return Err(CmdError::text(errors::CLUSTER_DISABLED));
    }
    Ok(ctx.shared.cluster.node())
}

/// cluster.c `getSlotOrReply`.
fn slot_arg(arg: &[u8]) -> Result<u16, CmdError> {
    match cairn_engine::util::num::parse_i64(arg) {
        Some(n) if (0..SLOTS as i64).contains(&n) => Ok(n as u16),
        _ => Err(CmdError::text(errors::CLUSTER_INVALID_SLOT)),
    }
}

/// A node ID argument: this node, or the error for a node Redis does not
/// know (`clusterLookupNode` finds only IDs in its table).
fn is_me(node: &Node, arg: &[u8]) -> Result<(), CmdError> {
    if arg == node.id.as_bytes() {
        Ok(())
    } else {
        Err(errors::cluster_unknown_node(arg))
    }
}

fn save_failed(e: String) -> CmdError {
    CmdError::text(format!("ERR error saving the cluster node config: {e}"))
}

/// CLUSTER ADDSLOTS slot [slot ...] → every slot is this node's already:
/// the first argument is invalid or busy.
fn addslots(ctx: &mut Ctx) -> CmdResult {
    node(ctx)?;
    let slot = slot_arg(ctx.arg(2))?;
    Err(errors::cluster_slot_busy(slot))
}

/// CLUSTER ADDSLOTSRANGE start end [start end ...] → as ADDSLOTS, after
/// the pairs are checked.
fn addslotsrange(ctx: &mut Ctx) -> CmdResult {
    node(ctx)?;
    if ctx.argc() % 2 == 1 {
        return Err(CmdError::WrongArity("cluster|addslotsrange"));
    }
    let (start, end) = (slot_arg(ctx.arg(2))?, slot_arg(ctx.arg(3))?);
    if start > end {
        return Err(errors::cluster_range_reversed(start, end));
    }
    Err(errors::cluster_slot_busy(start))
}

/// CLUSTER DELSLOTS slot [slot ...]: refused, the node keeps every slot.
fn delslots(ctx: &mut Ctx) -> CmdResult {
    node(ctx)?;
    for i in 2..ctx.argc() {
        slot_arg(ctx.arg(i))?;
    }
    Err(errors::cluster_one_node(
        "CLUSTER DELSLOTS is not supported",
    ))
}

/// CLUSTER DELSLOTSRANGE start end [start end ...]: refused, as DELSLOTS.
fn delslotsrange(ctx: &mut Ctx) -> CmdResult {
    node(ctx)?;
    if ctx.argc() % 2 == 1 {
        return Err(CmdError::WrongArity("cluster|delslotsrange"));
    }
    for i in (2..ctx.argc()).step_by(2) {
        let (start, end) = (slot_arg(ctx.arg(i))?, slot_arg(ctx.arg(i + 1))?);
        if start > end {
            return Err(errors::cluster_range_reversed(start, end));
        }
    }
    Err(errors::cluster_one_node(
        "CLUSTER DELSLOTSRANGE is not supported",
    ))
}

/// CLUSTER FLUSHSLOTS: Redis's error while the database holds keys;
/// refused otherwise (the node keeps every slot).
fn flushslots(ctx: &mut Ctx) -> CmdResult {
    node(ctx)?;
    if ctx.engine().db_counts(&ctx.cx, 0).0 != 0 {
        return Err(CmdError::text(
            "ERR DB must be empty to perform CLUSTER FLUSHSLOTS.",
        ));
    }
    Err(errors::cluster_one_node(
        "CLUSTER FLUSHSLOTS is not supported",
    ))
}

/// CLUSTER SETSLOT slot IMPORTING id | MIGRATING id | STABLE | NODE id.
/// STABLE, and NODE naming this node, change nothing and answer +OK;
/// IMPORTING fails as for any slot the node owns; MIGRATING is refused.
fn setslot(ctx: &mut Ctx) -> CmdResult {
    let me = node(ctx)?;
    let slot = slot_arg(ctx.arg(2))?;
    let action = ctx.arg(3);
    let argc = ctx.argc();
    if args::is(action, "migrating") && argc == 5 {
        let target = ctx.arg(4);
        if target != me.id.as_bytes() {
            return Err(errors::cluster_unknown_setslot_node(target));
        }
        Err(errors::cluster_one_node(
            "CLUSTER SETSLOT MIGRATING is not supported",
        ))
    } else if args::is(action, "importing") && argc == 5 {
        Err(errors::cluster_already_owner(slot))
    } else if args::is(action, "stable") && argc == 4 {
        ctx.ok()
    } else if args::is(action, "node") && argc == 5 {
        is_me(&me, ctx.arg(4))?;
        ctx.ok()
    } else {
        Err(CmdError::text(errors::CLUSTER_SETSLOT_SYNTAX))
    }
}

/// CLUSTER BUMPEPOCH → +BUMPED epoch, or +STILL epoch when this node's
/// config epoch is already the highest (`clusterBumpConfigEpochWithoutConsensus`).
fn bumpepoch(ctx: &mut Ctx) -> CmdResult {
    node(ctx)?;
    let mut bumped = false;
    let mut epoch = 0;
    crate::cluster::update(ctx.shared, |n| {
        let max = n.current_epoch.max(n.config_epoch);
        if n.config_epoch == 0 || n.config_epoch != max {
            n.current_epoch += 1;
            n.config_epoch = n.current_epoch;
            bumped = true;
        }
        epoch = n.config_epoch;
    })
    .map_err(save_failed)?;
    let word = if bumped { "BUMPED" } else { "STILL" };
    ctx.reply().simple(&format!("{word} {epoch}"));
    Ok(())
}

/// CLUSTER SET-CONFIG-EPOCH epoch → +OK once, while the epoch is 0.
fn set_config_epoch(ctx: &mut Ctx) -> CmdResult {
    let me = node(ctx)?;
    let epoch = args::int(ctx.arg(2))?;
    if epoch < 0 {
        return Err(errors::cluster_invalid_epoch(epoch));
    }
    if me.config_epoch != 0 {
        return Err(CmdError::text(errors::CLUSTER_EPOCH_SET));
    }
    crate::cluster::update(ctx.shared, |n| {
        n.config_epoch = epoch as u64;
        n.current_epoch = n.current_epoch.max(epoch as u64);
    })
    .map_err(save_failed)?;
    ctx.ok()
}

/// CLUSTER COUNT-FAILURE-REPORTS node-id → 0 for this node (no other
/// node can report it failing).
fn count_failure_reports(ctx: &mut Ctx) -> CmdResult {
    let me = node(ctx)?;
    is_me(&me, ctx.arg(2))?;
    ctx.int(0)
}

/// CLUSTER COUNTKEYSINSLOT slot → integer, from the slot index.
fn countkeysinslot(ctx: &mut Ctx) -> CmdResult {
    node(ctx)?;
    let slot = args::int(ctx.arg(2))?;
    if !(0..SLOTS as i64).contains(&slot) {
        return Err(CmdError::text(errors::CLUSTER_INVALID_SLOT_SHORT));
    }
    let n = ctx
        .engine()
        .slot_index()
        .map_or(0, |ix| ix.count(slot as u16));
    ctx.int(i64::from(n))
}

/// CLUSTER GETKEYSINSLOT slot count → up to `count` key names of the slot.
fn getkeysinslot(ctx: &mut Ctx) -> CmdResult {
    node(ctx)?;
    let slot = args::int(ctx.arg(2))?;
    let count = args::int(ctx.arg(3))?;
    if count < 0 || !(0..SLOTS as i64).contains(&slot) {
        return Err(CmdError::text(errors::CLUSTER_GETKEYSINSLOT_ARGS));
    }
    let keys = ctx.engine().keys_in_slot(
        &ctx.cx,
        slot as u16,
        usize::try_from(count).unwrap_or(usize::MAX),
    );
    let mut w = ctx.reply();
    w.array(keys.len());
    for k in &keys {
        w.bulk(k);
    }
    Ok(())
}

/// CLUSTER FAILOVER [FORCE|TAKEOVER]: only a replica fails over.
fn failover(ctx: &mut Ctx) -> CmdResult {
    node(ctx)?;
    match ctx.argc() {
        2 => {}
        3 if args::is(ctx.arg(2), "force") || args::is(ctx.arg(2), "takeover") => {}
        3 => return Err(CmdError::Syntax),
        _ => return Err(subcommand_syntax_error(ctx)),
    }
    Err(CmdError::text(errors::CLUSTER_FAILOVER_ON_MASTER))
}

/// CLUSTER FORGET node-id: there is no other node to forget.
fn forget(ctx: &mut Ctx) -> CmdResult {
    let me = node(ctx)?;
    is_me(&me, ctx.arg(2))?;
    Err(CmdError::text(errors::CLUSTER_FORGET_MYSELF))
}

/// CLUSTER REPLICATE node-id: there is no other master to follow.
fn replicate(ctx: &mut Ctx) -> CmdResult {
    let me = node(ctx)?;
    is_me(&me, ctx.arg(2))?;
    Err(CmdError::text(errors::CLUSTER_REPLICATE_MYSELF))
}

/// CLUSTER REPLICAS|SLAVES node-id → this master's replicas: none.
fn replicas(ctx: &mut Ctx) -> CmdResult {
    let me = node(ctx)?;
    is_me(&me, ctx.arg(2))?;
    ctx.reply().array(0);
    Ok(())
}

/// CLUSTER MEET ip port [cluster-port]: the ports are checked as Redis
/// does, then refused (no cluster bus).
fn meet(ctx: &mut Ctx) -> CmdResult {
    node(ctx)?;
    if ctx.argc() > 5 {
        return Err(subcommand_syntax_error(ctx));
    }
    if args::int(ctx.arg(3)).is_err() {
        return Err(CmdError::text(format!(
            "ERR Invalid TCP base port specified: {}",
            String::from_utf8_lossy(ctx.arg(3))
        )));
    }
    if ctx.argc() == 5 && args::int(ctx.arg(4)).is_err() {
        return Err(CmdError::text(format!(
            "ERR Invalid TCP bus port specified: {}",
            String::from_utf8_lossy(ctx.arg(4))
        )));
    }
    Err(errors::cluster_one_node("CLUSTER MEET is not supported"))
}

/// CLUSTER RESET [HARD|SOFT] → +OK on an empty database: HARD gives the
/// node a new ID and zeroes its epochs. Unlike Redis the node keeps its
/// slots (it owns every slot, always).
fn reset(ctx: &mut Ctx) -> CmdResult {
    node(ctx)?;
    let hard = match ctx.argc() {
        2 => false,
        3 if args::is(ctx.arg(2), "hard") => true,
        3 if args::is(ctx.arg(2), "soft") => false,
        3 => return Err(CmdError::Syntax),
        _ => return Err(subcommand_syntax_error(ctx)),
    };
    if ctx.engine().db_counts(&ctx.cx, 0).0 != 0 {
        return Err(CmdError::text(errors::CLUSTER_RESET_WITH_KEYS));
    }
    crate::cluster::update(ctx.shared, |n| {
        if hard {
            *n = Node::fresh();
        }
    })
    .map_err(save_failed)?;
    ctx.ok()
}

/// CLUSTER SAVECONFIG → +OK once `cluster-config-file` is written.
fn saveconfig(ctx: &mut Ctx) -> CmdResult {
    node(ctx)?;
    crate::cluster::update(ctx.shared, |_| {}).map_err(save_failed)?;
    ctx.ok()
}

/// CLUSTER INFO → the state of a healthy one-node cluster (a verbatim
/// string in RESP3).
fn info(ctx: &mut Ctx) -> CmdResult {
    let me = node(ctx)?;
    let lines = [
        ("cluster_state", "ok".to_string()),
        ("cluster_slots_assigned", SLOTS.to_string()),
        ("cluster_slots_ok", SLOTS.to_string()),
        ("cluster_slots_pfail", "0".into()),
        ("cluster_slots_fail", "0".into()),
        ("cluster_known_nodes", "1".into()),
        ("cluster_size", "1".into()),
        ("cluster_current_epoch", me.current_epoch.to_string()),
        ("cluster_my_epoch", me.config_epoch.to_string()),
        ("cluster_stats_messages_sent", "0".into()),
        ("cluster_stats_messages_received", "0".into()),
        ("total_cluster_links_buffer_limit_exceeded", "0".into()),
    ];
    let text: String = lines.iter().map(|(k, v)| format!("{k}:{v}\r\n")).collect();
    ctx.reply().verbatim("txt", text.as_bytes());
    Ok(())
}

/// CLUSTER KEYSLOT key → the key's hash slot.
fn keyslot(ctx: &mut Ctx) -> CmdResult {
    node(ctx)?;
    let slot = key_hash_slot(ctx.arg(2));
    ctx.int(i64::from(slot))
}

/// CLUSTER LINKS → no links (no other node).
fn links(ctx: &mut Ctx) -> CmdResult {
    node(ctx)?;
    ctx.reply().array(0);
    Ok(())
}

/// CLUSTER MYID → this node's 40-hex-digit ID.
fn myid(ctx: &mut Ctx) -> CmdResult {
    let me = node(ctx)?;
    ctx.bulk(me.id.as_bytes())
}

/// CLUSTER NODES → this node's line (a verbatim string in RESP3).
fn nodes(ctx: &mut Ctx) -> CmdResult {
    let me = node(ctx)?;
    let line = crate::cluster::addr(ctx.shared).nodes_line(&me) + "\n";
    ctx.reply().verbatim("txt", line.as_bytes());
    Ok(())
}

/// The endpoint CLUSTER SLOTS and SHARDS give (cluster.c
/// `getPreferredEndpoint`): the IP, the hostname ("?" when unset), or
/// nothing for `unknown-endpoint` (SLOTS then gives a null).
fn endpoint(addr: &Addr) -> &str {
    match addr.endpoint {
        ClusterEndpoint::Ip => &addr.ip,
        ClusterEndpoint::Hostname if !addr.hostname.is_empty() => &addr.hostname,
        ClusterEndpoint::Hostname => "?",
        ClusterEndpoint::UnknownEndpoint => "",
    }
}

/// CLUSTER SLOTS → [[0, 16383, [endpoint, port, id, {extra networking}]]].
fn slots(ctx: &mut Ctx) -> CmdResult {
    let me = node(ctx)?;
    let addr = crate::cluster::addr(ctx.shared);
    let mut w = ctx.reply();
    w.array(1);
    w.array(3);
    w.int(0);
    w.int(SLOTS as i64 - 1);
    w.array(4);
    if addr.endpoint == ClusterEndpoint::UnknownEndpoint {
        w.null();
    } else {
        w.bulk(endpoint(&addr).as_bytes());
    }
    w.int(i64::from(addr.port));
    w.bulk(me.id.as_bytes());
    // What the endpoint does not already say (`addNodeToNodeReply`).
    let with_ip = addr.endpoint != ClusterEndpoint::Ip;
    let with_host = addr.endpoint != ClusterEndpoint::Hostname && !addr.hostname.is_empty();
    w.map(usize::from(with_ip) + usize::from(with_host));
    if with_ip {
        w.bulk(b"ip");
        w.bulk(addr.ip.as_bytes());
    }
    if with_host {
        w.bulk(b"hostname");
        w.bulk(addr.hostname.as_bytes());
    }
    Ok(())
}

/// CLUSTER SHARDS → one shard: {slots: [0, 16383], nodes: [this node]}.
fn shards(ctx: &mut Ctx) -> CmdResult {
    let me = node(ctx)?;
    let addr = crate::cluster::addr(ctx.shared);
    let mut w = ctx.reply();
    w.array(1);
    w.map(2);
    w.bulk(b"slots");
    w.array(2);
    w.int(0);
    w.int(SLOTS as i64 - 1);
    w.bulk(b"nodes");
    w.array(1);
    let with_host = !addr.hostname.is_empty();
    w.map(7 + usize::from(with_host));
    w.bulk(b"id");
    w.bulk(me.id.as_bytes());
    w.bulk(b"port");
    w.int(i64::from(addr.port));
    w.bulk(b"ip");
    w.bulk(addr.ip.as_bytes());
    w.bulk(b"endpoint");
    w.bulk(endpoint(&addr).as_bytes());
    if with_host {
        w.bulk(b"hostname");
        w.bulk(addr.hostname.as_bytes());
    }
    w.bulk(b"role");
    w.bulk(b"master");
    w.bulk(b"replication-offset");
    w.int(0);
    w.bulk(b"health");
    w.bulk(b"online");
    Ok(())
}

/// CLUSTER HELP.
fn help(ctx: &mut Ctx) -> CmdResult {
    node(ctx)?;
    reply_help(ctx, HELP)
}

/// Redis 7.0.15's `clusterCommandHelp`.
const HELP: &[&str] = &[
    "ADDSLOTS <slot> [<slot> ...]",
    "    Assign slots to current node.",
    "ADDSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
    "    Assign slots which are between <start-slot> and <end-slot> to current node.",
    "BUMPEPOCH",
    "    Advance the cluster config epoch.",
    "COUNT-FAILURE-REPORTS <node-id>",
    "    Return number of failure reports for <node-id>.",
    "COUNTKEYSINSLOT <slot>",
    "    Return the number of keys in <slot>.",
    "DELSLOTS <slot> [<slot> ...]",
    "    Delete slots information from current node.",
    "DELSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
    "    Delete slots information which are between <start-slot> and <end-slot> from current node.",
    "FAILOVER [FORCE|TAKEOVER]",
    "    Promote current replica node to being a master.",
    "FORGET <node-id>",
    "    Remove a node from the cluster.",
    "GETKEYSINSLOT <slot> <count>",
    "    Return key names stored by current node in a slot.",
    "FLUSHSLOTS",
    "    Delete current node own slots information.",
    "INFO",
    "    Return information about the cluster.",
    "KEYSLOT <key>",
    "    Return the hash slot for <key>.",
    "MEET <ip> <port> [<bus-port>]",
    "    Connect nodes into a working cluster.",
    "MYID",
    "    Return the node id.",
    "NODES",
    "    Return cluster configuration seen by node. Output format:",
    "    <id> <ip:port> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
    "REPLICATE <node-id>",
    "    Configure current node as replica to <node-id>.",
    "RESET [HARD|SOFT]",
    "    Reset current node (default: soft).",
    "SET-CONFIG-EPOCH <epoch>",
    "    Set config epoch of current node.",
    "SETSLOT <slot> (IMPORTING <node-id>|MIGRATING <node-id>|STABLE|NODE <node-id>)",
    "    Set slot state.",
    "REPLICAS <node-id>",
    "    Return <node-id> replicas.",
    "SAVECONFIG",
    "    Force saving cluster configuration on disk.",
    "SLOTS",
    "    Return information about slots range mappings. Each range is made of:",
    "    start, end, master and replicas IP addresses, ports and ids",
    "SHARDS",
    "    Return information about slot range mappings and the nodes associated with them.",
    "LINKS",
    "    Return information about all network links between this node and its peers.",
    "    Output format is an array where each array element is a map containing attributes of a link",
];
