//! Tests that pin the server crate's layering (docs/design.md, "Layout of
//! the server crate"): the connection layer names no protocol, and nothing
//! outside the RESP front end imports a command handler except start-up,
//! which builds the command table from the families.
use std::path::{Path, PathBuf};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Lines of `file` that are code (comments say what they like).
fn code_lines(file: &Path) -> Vec<String> {
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_connection_layer_names_no_protocol() {
    let mut files = Vec::new();
    sources(&src().join("net"), &mut files);
    assert!(files.len() >= 5, "net/ has its files");
    for f in files {
        for line in code_lines(&f) {
            for name in ["crate::resp", "crate::memcache", "cairn_protocol", "exec::"] {
                assert!(
                    !line.contains(name),
                    "{} names `{name}`: {line}",
                    f.display()
                );
            }
        }
    }
}

#[test]
fn only_handlers_and_start_up_import_handlers() {
    let root = src();
    let mut files = Vec::new();
    sources(&root, &mut files);
    // This file names the path it looks for.
    let allowed = [
        root.join("server.rs"),
        root.join("readme.rs"),
        root.join("layout.rs"),
    ];
    for f in files {
        if f.starts_with(root.join("resp")) || allowed.contains(&f) {
            continue;
        }
        for line in code_lines(&f) {
            assert!(
                !line.contains("resp::cmd"),
                "{} imports a command handler: {line}",
                f.display()
            );
        }
    }
}
