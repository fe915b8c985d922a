//! `cairn check-journal FILE [--fix]` (redis-check-aof): reads a journal
//! file, reports its batches and records and the first bad offset with the
//! reason; with `--fix`, truncates a damaged file to its last good batch.
//! Exit status 0 if the file is good (or was fixed), 1 otherwise.
use super::frame::{self, End};

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

/// Checks (and with `fix` repairs) one journal file.
pub fn check(path: &str, fix: bool) -> Result<Report, String> {
    let f = std::fs::File::open(path).map_err(|e| format!("Cannot open file {path}: {e}"))?;
    let len = f
        .metadata()
        .map_err(|e| format!("Cannot stat file {path}: {e}"))?
        .len();
    let s = frame::read(
        std::io::BufReader::with_capacity(1 << 20, f),
        len,
        |_, _| Ok(()),
    )
    .map_err(|e| format!("Cannot read file {path}: {e}"))?;
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
        .map_err(|e| format!("Cannot open {path} for writing: {e}"))?;
    f.set_len(keep)
        .and_then(|_| f.sync_all())
        .map_err(|e| format!("Failed to truncate {path}: {e}"))?;
    text.push_str(&format!(
        "\nSuccessfully truncated the journal to offset {keep} ({} bytes dropped)",
        len - keep
    ));
    Ok(Report { text, status: 0 })
}
