//! The persistence error: a file that cannot be used, which file, where in
//! it and what is wrong. The snapshot reader, the journal's frame reader,
//! its manifest and `cairn check-journal` all report failures this way;
//! the server prints them when start-up stops (shared/STYLE.md, "Errors":
//! a persistence error fails start-up with the file and offset).
//!
//! Expected conditions are not errors: a journal's torn last frame is a
//! value (`journal::End::Torn`) that replay may accept; it becomes an
//! `Error` only where it is refused.
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

#[derive(Debug)]
pub struct Error {
    pub path: PathBuf,
    /// Byte offset in the file where the damage is (or where the failed
    /// read was); None when the failure concerns the whole file (it
    /// cannot be opened, stat'ed, renamed ...).
    pub offset: Option<u64>,
    pub kind: ErrorKind,
}

#[derive(Debug)]
pub enum ErrorKind {
    /// A system call on the file failed: `op` is what was tried ("open",
    /// "read", "write", "truncate", ...).
    Io { op: &'static str, source: io::Error },
    /// The bytes break the file's format, or hold what this server cannot
    /// take (a database it does not have, a key twice).
    Corrupt(String),
    /// A journal file ends inside its last frame: what a crash while
    /// appending leaves behind.
    Torn(String),
}

impl Error {
    pub fn io(path: &Path, op: &'static str, source: io::Error) -> Error {
        Error {
            path: path.to_path_buf(),
            offset: None,
            kind: ErrorKind::Io { op, source },
        }
    }

    pub fn corrupt(path: &Path, offset: u64, reason: impl Into<String>) -> Error {
        Error {
            path: path.to_path_buf(),
            offset: Some(offset),
            kind: ErrorKind::Corrupt(reason.into()),
        }
    }

    /// The same error at `offset`.
    pub fn at(mut self, offset: u64) -> Error {
        self.offset = Some(offset);
        self
    }

    /// What is wrong, without the file and offset.
    pub fn reason(&self) -> String {
        match &self.kind {
            ErrorKind::Io { op, source } => format!("cannot {op}: {source}"),
            ErrorKind::Corrupt(r) | ErrorKind::Torn(r) => r.clone(),
        }
    }

    /// The file does not exist (an `open` that found nothing).
    pub fn is_not_found(&self) -> bool {
        matches!(&self.kind, ErrorKind::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }
}

/// `Cannot open file PATH: No such file or directory` (redis-check-aof's
/// wording) for a failed call; `PATH at offset N: reason` for bad bytes.
impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = |f: &mut fmt::Formatter<'_>| match self.offset {
            Some(o) => write!(f, " at offset {o}"),
            None => Ok(()),
        };
        match &self.kind {
            ErrorKind::Io { op, source } => {
                write!(f, "Cannot {op} file {}", self.path.display())?;
                at(f)?;
                write!(f, ": {source}")
            }
            ErrorKind::Corrupt(reason) | ErrorKind::Torn(reason) => {
                write!(f, "{}", self.path.display())?;
                at(f)?;
                write!(f, ": {reason}")
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            ErrorKind::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_file_and_the_offset() {
        let p = Path::new("/d/appendonly.aof.1.incr.journal");
        let e = Error::corrupt(p, 40, "checksum mismatch");
        assert_eq!(
            e.to_string(),
            "/d/appendonly.aof.1.incr.journal at offset 40: checksum mismatch"
        );
        assert_eq!(e.reason(), "checksum mismatch");
        let e = Error::io(p, "open", io::Error::from(io::ErrorKind::NotFound));
        assert!(e.is_not_found());
        assert!(
            e.to_string()
                .starts_with("Cannot open file /d/appendonly.aof.1.incr.journal: "),
            "{e}"
        );
        let e = Error::io(p, "read", io::Error::other("Input/output error")).at(16);
        assert_eq!(
            e.to_string(),
            "Cannot read file /d/appendonly.aof.1.incr.journal at offset 16: Input/output error"
        );
        assert!(!e.is_not_found());
        assert_eq!(e.reason(), "cannot read: Input/output error");
    }
}
