//! Cluster mode (`cluster-enabled yes`): Cairn answers as a Redis Cluster
//! of one master node that owns all 16,384 hash slots, so cluster-aware
//! clients connect and hash tags behave as on Redis Cluster. There is no
//! cluster bus: no other node is ever known, no slot ever moves, and a
//! key is never redirected (`MOVED`/`ASK` cannot happen).
//!
//! This module owns the node's identity (its 40-hex-digit ID and epochs,
//! kept in `cluster-config-file`: `nodes_conf`), the address it announces,
//! and Redis's `getNodeByQuery` for a node that owns every slot: the keys
//! of one command (of every queued command, at EXEC) must hash to one
//! slot, else `-CROSSSLOT`. The CLUSTER command's replies are built in
//! `resp::cmd::cluster` from what this module gives; the per-slot key
//! counts are the engine's (`cairn_engine::slots`).
use crate::client::Client;
use crate::exec::keys::{command_keys, has_keys, not_key_positions};
use crate::exec::table::Command;
use crate::shared::Shared;
use cairn_engine::slots::key_hash_slot;
use parking_lot::Mutex;

pub mod nodes_conf;

/// The node's identity and epochs, as `nodes.conf` keeps them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// 40 lower-case hex digits (cluster.c `getRandomHexChars`).
    pub id: String,
    /// `cluster_current_epoch`: the highest epoch this node has seen.
    pub current_epoch: u64,
    /// `cluster_my_epoch`: the epoch of this node's slot configuration.
    pub config_epoch: u64,
    pub last_vote_epoch: u64,
}

impl Node {
    pub fn fresh() -> Node {
        Node {
            id: random_id(),
            current_epoch: 0,
            config_epoch: 0,
            last_vote_epoch: 0,
        }
    }
}

/// A new node ID: 40 random hex digits.
pub fn random_id() -> String {
    (0..40)
        .map(|_| char::from_digit(rand::random_range(0..16u32), 16).unwrap_or('0'))
        .collect()
}

/// Cluster mode's state in `Shared`.
pub struct Cluster {
    /// `cluster-enabled`, fixed at start (the directive is immutable).
    enabled: bool,
    node: Mutex<Node>,
    /// The open `cluster-config-file`, holding its lock (`nodes_conf::open`).
    file: Mutex<Option<nodes_conf::ConfigFile>>,
}

impl Cluster {
    pub fn new(enabled: bool) -> Cluster {
        Cluster {
            enabled,
            node: Mutex::new(Node::fresh()),
            file: Mutex::new(None),
        }
    }

    #[inline]
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    pub fn node(&self) -> Node {
        self.node.lock().clone()
    }

    /// Changes the node's identity or epochs and writes the config file
    /// (Redis saves nodes.conf on every such change, `clusterSaveConfig`).
    pub fn update(&self, addr: &Addr, f: impl FnOnce(&mut Node)) -> Result<(), String> {
        let mut node = self.node.lock();
        f(&mut node);
        match &mut *self.file.lock() {
            Some(file) => file.save(&node, &addr.nodes_line(&node)),
            None => Ok(()),
        }
    }
}

/// Where this node says it is, as CLUSTER NODES/SLOTS/SHARDS show it.
#[derive(Clone, Debug, Default)]
pub struct Addr {
    /// `cluster-announce-ip`; empty as in Redis for a node that never met
    /// another (Redis learns its own IP from the bus).
    pub ip: String,
    pub port: u16,
    /// The cluster bus port Redis would listen on (`cluster-port`, else
    /// port + 10000), or `cluster-announce-bus-port`.
    pub cport: u32,
    /// `cluster-announce-hostname`.
    pub hostname: String,
    /// `cluster-preferred-endpoint-type`.
    pub endpoint: crate::config::ClusterEndpoint,
}

impl Addr {
    /// This node's CLUSTER NODES line, without the newline (cluster.c
    /// `clusterGenNodeDescription` for myself owning every slot).
    pub fn nodes_line(&self, node: &Node) -> String {
        let mut line = format!("{} {}:{}@{}", node.id, self.ip, self.port, self.cport);
        if !self.hostname.is_empty() {
            line.push(',');
            line.push_str(&self.hostname);
        }
        line.push_str(&format!(
            " myself,master - 0 0 {} connected 0-16383",
            node.config_epoch
        ));
        line
    }
}

/// Where this node says it is, from the config (read at each use, so a
/// CONFIG SET of a `cluster-announce-*` directive shows at once) and the
/// bound port.
pub fn addr(shared: &Shared) -> Addr {
    let c = shared.config.read();
    let bound = shared.tcp_port.load(std::sync::atomic::Ordering::Relaxed);
    let port = if c.cluster_announce_port != 0 {
        c.cluster_announce_port
    } else {
        bound
    };
    let cport = if c.cluster_announce_bus_port != 0 {
        u32::from(c.cluster_announce_bus_port)
    } else if c.cluster_port != 0 {
        u32::from(c.cluster_port)
    } else {
        u32::from(bound) + 10000
    };
    Addr {
        ip: c.cluster_announce_ip.clone(),
        port,
        cport,
        hostname: c.cluster_announce_hostname.clone(),
        endpoint: c.cluster_preferred_endpoint_type,
    }
}

/// Changes the node's identity or epochs and writes the config file.
pub fn update(shared: &Shared, f: impl FnOnce(&mut Node)) -> Result<(), String> {
    shared.cluster.update(&addr(shared), f)
}

/// Start-up in cluster mode, after `dir` is the working directory and the
/// listeners are bound: reads `cluster-config-file` (or creates it with a
/// new node ID) before any key is loaded. Refuses, as Redis does, a
/// config file another running node holds.
pub fn open(shared: &Shared) -> Result<(), String> {
    if !shared.cluster.enabled() {
        return Ok(());
    }
    let path = shared.config.read().cluster_config_file.clone();
    let (file, loaded) = nodes_conf::open(std::path::Path::new(&path))?;
    let cl = &shared.cluster;
    *cl.file.lock() = Some(file);
    match loaded {
        Some(node) => {
            crate::log::notice(&format!("Node configuration loaded, I'm {}", node.id));
            *cl.node.lock() = node;
        }
        None => {
            let node = cl.node();
            crate::log::notice(&format!("No cluster configuration found, I'm {}", node.id));
        }
    }
    update(shared, |_| {}).map_err(|e| format!("Fatal: can't update cluster config file. {e}"))
}

/// Cluster mode keeps every key in database 0: data loaded from files
/// with keys in other databases cannot be served (Redis 7.0
/// `verifyClusterConfigWithData`, which exits the same way).
pub fn verify_data(shared: &Shared) -> Result<(), String> {
    if !shared.cluster.enabled() {
        return Ok(());
    }
    let cx = cairn_engine::Cx::DETACHED;
    for db in 1..shared.engine.databases() {
        if shared.engine.db_counts(&cx, db).0 > 0 {
            return Err(
                "You can't have keys in a DB different than DB 0 when in Cluster mode. Exiting."
                    .into(),
            );
        }
    }
    Ok(())
}

/// The one slot all keys of `cmd` (with arguments `argv`) hash to, folded
/// into `slot`; false when a key hashes elsewhere.
fn fold_slot(cmd: &Command, argv: &[&[u8]], slot: &mut Option<u16>) -> bool {
    let keys = command_keys(cmd.name, &cmd.key_specs, argv);
    let channels = not_key_positions(&cmd.key_specs, argv);
    for pos in keys.into_iter().map(|(p, _)| p).chain(channels) {
        let s = key_hash_slot(argv[pos]);
        match *slot {
            None => *slot = Some(s),
            Some(first) if first != s => return false,
            Some(_) => {}
        }
    }
    true
}

/// Redis's cluster check in `processCommand` (`getNodeByQuery`) for a node
/// that owns every slot: true when the keys of the command — of every
/// queued command, for EXEC — do not all hash to one slot. Commands
/// without keys are not looked at, as in Redis.
pub fn cross_slot(shared: &Shared, client: &Client, cmd: &Command, argv: &[&[u8]]) -> bool {
    let mut slot = None;
    if cmd.name == "exec" {
        // EXEC outside MULTI fails on its own.
        let Some(m) = &client.multi else {
            return false;
        };
        for (id, list) in &m.queued {
            let queued = shared.table.get(*id);
            let args: Vec<&[u8]> = list.iter(&[]).collect();
            if !fold_slot(queued, &args, &mut slot) {
                return true;
            }
        }
        return false;
    }
    // One argument after the name holds at most one key; a command with
    // no key spec (not even a `not_key` one, which SSUBSCRIBE's channels
    // are) and no getkeys callback is not looked at.
    if argv.len() < 3 || (cmd.key_specs.is_empty() && !has_keys(cmd.name, &[])) {
        return false;
    }
    !fold_slot(cmd, argv, &mut slot)
}

/// A script's `redis.call` in cluster mode (Redis 7.0
/// `scriptVerifyClusterState`): the call's own keys must hash to one slot.
/// Redis 7.0 does not compare them with the script's declared keys or its
/// other calls (7.2 does). None: it may run.
pub fn script_call_refusal(cmd: &Command, argv: &[&[u8]]) -> Option<&'static str> {
    let mut slot = None;
    (!fold_slot(cmd, argv, &mut slot)).then_some(crate::resp::errors::SCRIPT_CROSS_SLOT_CALL)
}
