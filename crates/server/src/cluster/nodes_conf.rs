//! `cluster-config-file` (nodes.conf), in Redis 7.0's format so a node's
//! identity survives restarts and the file reads as Redis's does:
//!
//! ```text
//! <id> <ip>:<port>@<cport>[,<hostname>] myself,master - 0 0 <config-epoch> connected 0-16383
//! vars currentEpoch <n> lastVoteEpoch <n>
//! ```
//!
//! One line per known node (here only this one; lines of other nodes in a
//! file written by Redis are read past), then the `vars` line. As Redis
//! 7.0 (`clusterLoadConfig`, `clusterSaveConfig`, `clusterLockConfig`) the
//! file is locked with `flock` for the life of the process, so two nodes
//! cannot share one, and it is rewritten in place and fsynced on every
//! change. What this module does not own: the address in the line, which
//! comes from the config (`super::Addr`).
use super::Node;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::io::AsRawFd;
use std::path::Path;

/// The open, locked config file.
pub struct ConfigFile {
    file: File,
}

impl ConfigFile {
    /// Rewrites the file with `node` and its CLUSTER NODES line.
    pub fn save(&mut self, node: &Node, line: &str) -> Result<(), String> {
        let text = render(node, line);
        let f = &mut self.file;
        f.seek(SeekFrom::Start(0))
            .and_then(|_| f.write_all(text.as_bytes()))
            .and_then(|_| f.set_len(text.len() as u64))
            .and_then(|_| f.sync_data())
            .map_err(|e| e.to_string())
    }
}

/// The file's text for `node`.
pub fn render(node: &Node, line: &str) -> String {
    format!(
        "{line}\nvars currentEpoch {} lastVoteEpoch {}\n",
        node.current_epoch, node.last_vote_epoch
    )
}

/// Opens (creating) and locks the file at `path`; the node it describes,
/// or None when it is new or empty.
pub fn open(path: &Path) -> Result<(ConfigFile, Option<Node>), String> {
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| {
            format!(
                "Can't open {} in order to acquire a lock: {e}",
                path.display()
            )
        })?;
    // SAFETY: flock on a descriptor this function owns.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let e = std::io::Error::last_os_error();
        return Err(if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
            format!(
                "Sorry, the cluster configuration file {} is already used by a different \
                 Redis Cluster node. Please make sure that different nodes use different \
                 cluster configuration files.",
                path.display()
            )
        } else {
            format!("Impossible to lock {}: {e}", path.display())
        });
    }
    let mut text = String::new();
    file.read_to_string(&mut text)
        .map_err(|e| format!("Unrecoverable error reading {}: {e}", path.display()))?;
    let node = if text.trim().is_empty() {
        None
    } else {
        Some(parse(&text).map_err(|line| {
            format!("Unrecoverable error: corrupted cluster config file \"{line}\".")
        })?)
    };
    Ok((ConfigFile { file }, node))
}

/// The node flagged `myself` and the epochs of the `vars` line; Err with
/// the first line that does not parse.
pub fn parse(text: &str) -> Result<Node, String> {
    let mut me: Option<Node> = None;
    let (mut current, mut last_vote) = (0, 0);
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let argv: Vec<&str> = line.split_whitespace().collect();
        if argv[0] == "vars" {
            let mut pairs = argv[1..].chunks(2);
            for pair in &mut pairs {
                let [name, value] = pair else {
                    return Err(line.to_string());
                };
                let n: u64 = value.parse().map_err(|_| line.to_string())?;
                match *name {
                    "currentEpoch" => current = n,
                    "lastVoteEpoch" => last_vote = n,
                    _ => {}
                }
            }
            continue;
        }
        if argv.len() < 8 {
            return Err(line.to_string());
        }
        if !argv[2].split(',').any(|f| f == "myself") {
            continue;
        }
        let id = argv[0];
        if id.len() != 40 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(line.to_string());
        }
        let config_epoch = argv[6].parse().map_err(|_| line.to_string())?;
        me = Some(Node {
            id: id.to_ascii_lowercase(),
            current_epoch: 0,
            config_epoch,
            last_vote_epoch: 0,
        });
    }
    let mut node = me.ok_or_else(|| "(no node flagged myself)".to_string())?;
    // Redis keeps currentEpoch at least every node's config epoch.
    node.current_epoch = current.max(node.config_epoch);
    node.last_vote_epoch = last_vote;
    Ok(node)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node() -> Node {
        Node {
            id: "e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca".into(),
            current_epoch: 3,
            config_epoch: 2,
            last_vote_epoch: 1,
        }
    }

    #[test]
    fn round_trips() {
        let n = node();
        let line = format!(
            "{} :7000@17000 myself,master - 0 0 2 connected 0-16383",
            n.id
        );
        assert_eq!(parse(&render(&n, &line)).unwrap(), n);
    }

    #[test]
    fn reads_a_file_redis_wrote() {
        // A node of a three-master cluster: the other nodes are read past.
        let text = "\
07c37dfeb235213a872192d90877d0cd55635b91 127.0.0.1:30004@40004 slave e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 0 1426238317239 4 connected
e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 127.0.0.1:30001@40001,host-a myself,master - 0 0 1 connected 0-5460
vars currentEpoch 6 lastVoteEpoch 0
";
        let n = parse(text).unwrap();
        assert_eq!(n.id, "e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca");
        assert_eq!((n.current_epoch, n.config_epoch), (6, 1));
    }

    #[test]
    fn refuses_corrupt_files() {
        assert!(parse("abc :1@2 myself\n").is_err());
        assert!(parse("zz :1@2 myself,master - 0 0 0 connected\n").is_err());
        assert!(parse("vars currentEpoch x\n").is_err());
        // No line for this node.
        assert!(parse("vars currentEpoch 1 lastVoteEpoch 0\n").is_err());
    }

    #[test]
    fn a_second_open_is_refused_while_the_first_holds_the_lock() {
        let dir = std::env::temp_dir().join(format!("cairn-nodes-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("nodes.conf");
        let _ = std::fs::remove_file(&path);
        let (mut f, loaded) = open(&path).unwrap();
        assert!(loaded.is_none());
        let n = node();
        f.save(
            &n,
            &format!("{} :1@2 myself,master - 0 0 2 connected 0-16383", n.id),
        )
        .unwrap();
        let err = open(&path).err().unwrap();
        assert!(err.contains("already used"), "{err}");
        drop(f);
        let (_, loaded) = open(&path).unwrap();
        assert_eq!(loaded.unwrap(), n);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
