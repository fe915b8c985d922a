//! `cairn check-journal FILE [--fix]` (redis-check-aof): reads a journal
//! file, reports its batches and records and the first bad offset with the
//! reason; with `--fix`, truncates a damaged file to its last good batch.
//! Exit status 0 if the file is good (or was fixed), 1 otherwise.
use super::frame::{self, End};
use crate::Error;
use std::path::Path;

/// Runs the subcommand; returns the process exit status.
pub fn run(args: &[String]) -> i32 {
    let (fix, file) = match args {
        [f] if f != "--fix" => (false, f),
        [a, f] | [f, a] if a == "--fix" => (true, f),
        _ => {
            eprintln!("Usage: cairn check-journal [--fix] <file>");
            return 1;
        }
    };
    match check(file, fix) {
        Ok(report) => {
            println!("{}", report.text);
            report.status
        }
        Err(e) => {
            eprintln!("{e}");
            1
        }
    }
}

pub struct Report {
    pub text: String,
    pub status: i32,
}

/// Checks (and with `fix` repairs) one journal file. The file's damage
/// is the report; an `Error` is a file that could not be read or cut.
pub fn check(path: &str, fix: bool) -> Result<Report, Error> {
    let file = frame::Reader::open(Path::new(path))?;
    let len = file.len_bytes();
    let s = file.read(|_, _| Ok(()))?;
    let mut text = format!(
        "Journal {path}: {len} bytes, {} good batches, {} records, good up to offset {}",
        s.frames, s.records, s.good_end
    );
    let (bad_at, reason, torn) = match s.end {
        End::Clean => {
            text.push_str("\nJournal is valid");
            return Ok(Report { text, status: 0 });
        }
        End::Torn { good_end, reason } => (good_end, reason, true),
        End::Corrupt { offset, reason } => (offset, reason, false),
    };
    text.push_str(&format!(
        "\n{} at offset {bad_at}: {reason}",
        if torn {
            "Torn last batch"
        } else {
            "Corruption"
        }
    ));
    if !fix {
        text.push_str(&format!(
            "\nJournal is not valid; 'cairn check-journal --fix {path}' truncates it to offset {} \
             (dropping {} bytes)",
            s.good_end,
            len - s.good_end
        ));
        return Ok(Report { text, status: 1 });
    }
    if s.good_end < frame::HEADER_LEN {
        text.push_str("\nThe file header itself is bad: not fixing (is this a Cairn journal?)");
        return Ok(Report { text, status: 1 });
    }
    let keep = s.good_end;
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| Error::io(Path::new(path), "write", e))?;
    f.set_len(keep)
        .and_then(|_| f.sync_all())
        .map_err(|e| Error::io(Path::new(path), "truncate", e).at(keep))?;
    text.push_str(&format!(
        "\nSuccessfully truncated the journal to offset {keep} ({} bytes dropped)",
        len - keep
    ));
    Ok(Report { text, status: 0 })
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_engine::record::{encode, Tag};

    fn journal(frames: usize) -> Vec<u8> {
        let mut f = frame::header().to_vec();
        for i in 0..frames {
            let mut p = Vec::new();
            let k = format!("k{i}");
            encode(
                &mut p,
                Tag::Command,
                0,
                [&b"DEL"[..], k.as_bytes()].into_iter(),
            );
            frame::put_frame(&mut f, &p);
        }
        f
    }

    fn file(name: &str, bytes: &[u8]) -> String {
        let p =
            std::env::temp_dir().join(format!("cairn-check-test-{}-{name}", std::process::id()));
        std::fs::write(&p, bytes).unwrap();
        p.to_str().unwrap().to_string()
    }

    #[test]
    fn a_good_file_a_torn_one_fixed_and_a_corrupt_one() {
        let good = journal(3);
        let good_path = file("good", &good);
        let r = check(&good_path, false).unwrap();
        assert_eq!(r.status, 0, "{}", r.text);
        assert!(r.text.contains("3 good batches, 3 records"), "{}", r.text);
        assert!(r.text.ends_with("Journal is valid"), "{}", r.text);

        let cut = good.len() - 2;
        let p = file("torn", &good[..cut]);
        let r = check(&p, false).unwrap();
        assert_eq!(r.status, 1);
        let last = journal(2).len();
        assert!(
            r.text
                .contains(&format!("Torn last batch at offset {last}")),
            "{}",
            r.text
        );
        let r = check(&p, true).unwrap();
        assert_eq!(r.status, 0, "{}", r.text);
        assert_eq!(std::fs::read(&p).unwrap(), journal(2));
        std::fs::remove_file(&p).unwrap();

        let mut bad = good.clone();
        bad[frame::HEADER_LEN as usize + 9] ^= 1;
        let p = file("corrupt", &bad);
        let r = check(&p, false).unwrap();
        assert_eq!(r.status, 1);
        assert!(
            r.text.contains(&format!(
                "Corruption at offset {}: checksum mismatch",
                frame::HEADER_LEN
            )),
            "{}",
            r.text
        );
        std::fs::remove_file(&p).unwrap();
        std::fs::remove_file(&good_path).unwrap();
    }

    #[test]
    fn a_missing_file_is_an_error_naming_it() {
        let e = check("/nonexistent/cairn-journal", false).err().unwrap();
        assert!(e.is_not_found());
        assert!(
            e.to_string()
                .starts_with("Cannot open file /nonexistent/cairn-journal: "),
            "{e}"
        );
    }
}
