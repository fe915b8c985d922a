//! Keeps the README's list of supported commands equal to the command
//! table, and its list of the Redis 7.0 commands Cairn lacks (with the
//! issue that owns each) equal to Redis's `COMMAND LIST` less the table.
//! Both lists are generated here; the test fails when README.md differs,
//! and `CAIRN_UPDATE_README=1` rewrites it.
use crate::exec::meta::M;
use crate::exec::table::CommandTable;
use std::collections::BTreeMap;

const START: &str = "<!-- commands:start -->";
const END: &str = "<!-- commands:end -->";
const MISSING_START: &str = "<!-- missing:start -->";
const MISSING_END: &str = "<!-- missing:end -->";

/// The `group` field of a command's docs (string, hash, generic, ...).
fn group(docs: &M) -> &'static str {
    if let M::Map(pairs) = docs {
        for (k, v) in pairs.iter() {
            if let (M::Bulk("group") | M::Simple("group"), M::Bulk(g) | M::Simple(g)) = (k, v) {
                return g;
            }
        }
    }
    "other"
}

/// The Markdown list: one line per group, commands with their subcommands.
pub fn render(table: &CommandTable) -> String {
    let mut groups: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for c in table.top_level() {
        let mut name = c.name.to_ascii_uppercase();
        if !c.subs.is_empty() {
            let mut subs: Vec<String> = c.subs.keys().map(|s| s.to_ascii_uppercase()).collect();
            subs.sort();
            name = format!("{name} ({})", subs.join(" "));
        }
        groups.entry(group(&c.meta.docs)).or_default().push(name);
    }
    let mut out = String::new();
    for (g, mut names) in groups {
        names.sort();
        out.push_str(&format!("- **{g}**: {}\n", names.join(", ")));
    }
    out
}

/// Which issue (or none) will bring a Redis command Cairn lacks, by its
/// name (`parent|sub` for a subcommand).
fn owner(name: &str) -> &'static str {
    let top = name.split('|').next().unwrap_or(name);
    match top {
        "acl" => "issue 23 (security)",
        "replicaof" | "slaveof" | "psync" | "sync" | "replconf" | "failover" | "cluster" => {
            "issue 24 (replication and cluster)"
        }
        "module" => "not planned (Cairn loads no Redis modules)",
        _ => "issue 22 (not built yet)",
    }
}

/// The Markdown list of Redis commands the table lacks, grouped by the
/// issue that owns them: a missing container is named once with its
/// subcommands, a missing subcommand of a present one as `PARENT SUB`.
pub fn render_missing(table: &CommandTable) -> String {
    let have = |name: &str| -> bool {
        let mut parts = name.split('|');
        let top = parts.next().unwrap_or(name);
        match (table.lookup(top.as_bytes()), parts.next()) {
            (Some(c), Some(sub)) => table.lookup_sub(c, sub.as_bytes()).is_some(),
            (found, None) => found.is_some(),
            (None, Some(_)) => false,
        }
    };
    let mut owners: BTreeMap<&str, BTreeMap<String, Vec<String>>> = BTreeMap::new();
    for (name, _) in crate::exec::meta::redis_commands() {
        if have(name) {
            continue;
        }
        let by_top = owners.entry(owner(name)).or_default();
        match name.split_once('|') {
            // A subcommand of a container Cairn lacks entirely is listed
            // with the container.
            Some((top, sub)) if !have(top) => by_top
                .entry(top.to_ascii_uppercase())
                .or_default()
                .push(sub.to_ascii_uppercase()),
            Some((top, sub)) => {
                by_top.insert(
                    format!("{} {}", top.to_ascii_uppercase(), sub.to_ascii_uppercase()),
                    Vec::new(),
                );
            }
            None => {
                by_top.entry(name.to_ascii_uppercase()).or_default();
            }
        }
    }
    let mut out = String::new();
    if owners.is_empty() {
        out.push_str("- none\n");
    }
    for (owner, names) in owners {
        let list: Vec<String> = names
            .into_iter()
            .map(|(n, subs)| {
                if subs.is_empty() {
                    n
                } else {
                    format!("{n} ({})", subs.join(" "))
                }
            })
            .collect();
        out.push_str(&format!("- **{owner}**: {}\n", list.join(", ")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Replaces the text between `start` and `end` in `readme` by `body`;
    /// false when it was already so.
    fn splice(readme: &mut String, start: &str, end: &str, body: &str) -> bool {
        let (Some(a), Some(b)) = (readme.find(start), readme.find(end)) else {
            panic!("README.md lacks the {start} / {end} markers");
        };
        let want = format!("{start}\n{body}{end}");
        if readme[a..b + end.len()] == want {
            return false;
        }
        readme.replace_range(a..b + end.len(), &want);
        true
    }

    #[test]
    fn readme_lists_the_commands_cairn_lacks() {
        let table = CommandTable::build(&crate::resp::cmd::families()).expect("table builds");
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md");
        let mut readme = std::fs::read_to_string(path).expect("README.md");
        let body = render_missing(&table);
        if splice(&mut readme, MISSING_START, MISSING_END, &body) {
            if std::env::var_os("CAIRN_UPDATE_README").is_some() {
                std::fs::write(path, readme).expect("write README.md");
            } else {
                panic!(
                    "README.md's list of missing commands is out of date; run \
                     `CAIRN_UPDATE_README=1 cargo test -p cairn-server readme`.\nExpected:\n{body}"
                );
            }
        }
    }

    #[test]
    fn every_missing_command_has_an_owner_outside_this_issue_or_is_listed() {
        assert_eq!(owner("acl|setuser"), "issue 23 (security)");
        assert_eq!(owner("cluster|nodes"), "issue 24 (replication and cluster)");
        assert_eq!(owner("psync"), "issue 24 (replication and cluster)");
        assert!(owner("module|load").starts_with("not planned"));
        assert_eq!(owner("script|debug"), "issue 22 (not built yet)");
    }

    #[test]
    fn readme_lists_exactly_the_command_table() {
        let table = CommandTable::build(&crate::resp::cmd::families()).expect("table builds");
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md");
        let readme = std::fs::read_to_string(path).expect("README.md");
        let (Some(a), Some(b)) = (readme.find(START), readme.find(END)) else {
            panic!("README.md lacks the {START} / {END} markers");
        };
        let want = format!("{START}\n{}{END}", render(&table));
        let have = &readme[a..b + END.len()];
        if have != want {
            if std::env::var_os("CAIRN_UPDATE_README").is_some() {
                let updated = format!("{}{}{}", &readme[..a], want, &readme[b + END.len()..]);
                std::fs::write(path, updated).expect("write README.md");
            } else {
                panic!(
                    "README.md's command list is out of date; run \
                     `CAIRN_UPDATE_README=1 cargo test -p cairn-server readme`.\nExpected:\n{want}"
                );
            }
        }
    }
}
