//! Keeps the README's list of supported commands equal to the command table.
//! The list is generated here; the test fails when README.md differs, and
//! `CAIRN_UPDATE_README=1` rewrites it.
use crate::exec::meta::M;
use crate::exec::table::CommandTable;
use std::collections::BTreeMap;

const START: &str = "<!-- commands:start -->";
const END: &str = "<!-- commands:end -->";

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

#[cfg(test)]
mod tests {
    use super::*;

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
