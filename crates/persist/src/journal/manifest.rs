//! The journal directory's manifest (Redis 7's multi-part AOF layout):
//! which base file (a Cairn snapshot, written by compaction) and which
//! journal files, in order, make up the data. Replaced atomically (write a
//! temporary file, fsync, rename, fsync the directory), so a crash leaves
//! either the old manifest or the new one.
//!
//! ```text
//! # cairn journal manifest v1
//! file appendonly.aof.2.base.snapshot seq 2 type b
//! file appendonly.aof.2.incr.journal seq 2 type i
//! file appendonly.aof.3.incr.journal seq 3 type i
//! ```
use crate::Error;
use std::io::Write;
use std::path::{Path, PathBuf};

pub const FIRST_LINE: &str = "# cairn journal manifest v1";

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Manifest {
    /// (file name, seq) of the base snapshot, if compaction made one.
    pub base: Option<(String, u64)>,
    /// (file name, seq) of each journal file, oldest first.
    pub incr: Vec<(String, u64)>,
}

impl Manifest {
    pub fn path(dir: &Path, appendfilename: &str) -> PathBuf {
        dir.join(format!("{appendfilename}.manifest"))
    }

    pub fn incr_name(appendfilename: &str, seq: u64) -> String {
        format!("{appendfilename}.{seq}.incr.journal")
    }

    pub fn base_name(appendfilename: &str, seq: u64) -> String {
        format!("{appendfilename}.{seq}.base.snapshot")
    }

    /// The highest sequence number in use.
    pub fn last_seq(&self) -> u64 {
        self.incr
            .iter()
            .map(|(_, s)| *s)
            .chain(self.base.iter().map(|(_, s)| *s))
            .max()
            .unwrap_or(0)
    }

    /// Parses the text of the manifest at `path`; a bad line is named by
    /// its number and its byte offset.
    pub fn parse(text: &str, path: &Path) -> Result<Manifest, Error> {
        let mut m = Manifest::default();
        let mut offset = 0u64;
        for (n, full) in text.split_inclusive('\n').enumerate() {
            let at = offset;
            offset += full.len() as u64;
            let line = full.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let fail =
                |why: String| Error::corrupt(path, at, format!("manifest line {}: {why}", n + 1));
            let w: Vec<&str> = line.split_ascii_whitespace().collect();
            let bad = || fail(format!("'{line}' is not 'file NAME seq N type b|i'"));
            if w.len() != 6 || w[0] != "file" || w[2] != "seq" || w[4] != "type" {
                return Err(bad());
            }
            let name = w[1].to_string();
            if name.contains('/') || name.contains('\\') || name == ".." {
                return Err(fail(format!("file name '{name}' is a path")));
            }
            let seq: u64 = w[3].parse().map_err(|_| bad())?;
            match w[5] {
                "b" if m.base.is_none() => m.base = Some((name, seq)),
                "b" => return Err(fail("a second base file".into())),
                "i" => {
                    if m.incr.last().is_some_and(|(_, s)| *s >= seq) {
                        return Err(fail("journal files out of order".into()));
                    }
                    m.incr.push((name, seq));
                }
                _ => return Err(bad()),
            }
        }
        Ok(m)
    }

    pub fn render(&self) -> String {
        let mut s = format!("{FIRST_LINE}\n");
        if let Some((name, seq)) = &self.base {
            s.push_str(&format!("file {name} seq {seq} type b\n"));
        }
        for (name, seq) in &self.incr {
            s.push_str(&format!("file {name} seq {seq} type i\n"));
        }
        s
    }

    /// Reads the manifest; None if there is none.
    pub fn load(dir: &Path, appendfilename: &str) -> Result<Option<Manifest>, Error> {
        let p = Self::path(dir, appendfilename);
        match std::fs::read_to_string(&p) {
            Ok(t) => Manifest::parse(&t, &p).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io(&p, "read", e)),
        }
    }

    /// Replaces the manifest atomically.
    pub fn store(&self, dir: &Path, appendfilename: &str) -> Result<(), Error> {
        let p = Self::path(dir, appendfilename);
        let tmp = dir.join(format!("temp-{appendfilename}.manifest"));
        let tmp = tmp.as_path();
        let io = |op| move |e| Error::io(tmp, op, e);
        let mut f = std::fs::File::create(tmp).map_err(io("create"))?;
        f.write_all(self.render().as_bytes()).map_err(io("write"))?;
        f.sync_all().map_err(io("fsync"))?;
        drop(f);
        std::fs::rename(tmp, &p).map_err(io("rename"))?;
        sync_dir(dir).map_err(|e| Error::io(dir, "fsync", e))
    }
}

/// fsyncs a directory so a rename or a new file in it survives a crash.
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_refusals() {
        let m = Manifest {
            base: Some(("a.2.base.snapshot".into(), 2)),
            incr: vec![
                ("a.2.incr.journal".into(), 2),
                ("a.3.incr.journal".into(), 3),
            ],
        };
        let text = m.render();
        assert_eq!(
            text,
            "# cairn journal manifest v1\nfile a.2.base.snapshot seq 2 type b\n\
             file a.2.incr.journal seq 2 type i\nfile a.3.incr.journal seq 3 type i\n"
        );
        let p = Path::new("/d/a.manifest");
        assert_eq!(Manifest::parse(&text, p).unwrap(), m);
        assert_eq!(m.last_seq(), 3);
        assert!(Manifest::parse("file ../x seq 1 type i", p).is_err());
        assert!(Manifest::parse("file x seq 2 type i\nfile y seq 1 type i", p).is_err());
        assert!(Manifest::parse("file x seq one type i", p).is_err());
        assert!(Manifest::parse("hello", p).is_err());
    }

    #[test]
    fn a_bad_line_is_named_by_file_line_and_offset() {
        let p = Path::new("/d/a.manifest");
        let text = "# cairn journal manifest v1\nfile x seq 2 type i\nfile y seq 1 type i\n";
        let e = Manifest::parse(text, p).unwrap_err();
        assert_eq!(e.offset, Some(48));
        assert_eq!(
            e.to_string(),
            "/d/a.manifest at offset 48: manifest line 3: journal files out of order"
        );
    }
}
