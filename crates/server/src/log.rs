//! Server log lines in Redis's format (`pid:role date level message`), to
//! stderr or to `logfile`, filtered by `loglevel`. Messages carry their
//! details as `key=value` pairs so they can be grepped and parsed.
use parking_lot::Mutex;
use std::io::Write;
use std::sync::atomic::{AtomicU8, Ordering};

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
#[repr(u8)]
pub enum Level {
    Debug = 0,
    Verbose = 1,
    Notice = 2,
    Warning = 3,
    Nothing = 4,
}

impl Level {
    pub fn parse(s: &str) -> Option<Level> {
        Some(match s.to_ascii_lowercase().as_str() {
            "debug" => Level::Debug,
            "verbose" => Level::Verbose,
            "notice" => Level::Notice,
            "warning" => Level::Warning,
            "nothing" => Level::Nothing,
            _ => return None,
        })
    }

    fn mark(self) -> char {
        match self {
            Level::Debug => '.',
            Level::Verbose => '-',
            Level::Notice => '*',
            Level::Warning | Level::Nothing => '#',
        }
    }
}

static LEVEL: AtomicU8 = AtomicU8::new(Level::Notice as u8);
static FILE: Mutex<Option<std::fs::File>> = Mutex::new(None);

pub fn set_level(l: Level) {
    LEVEL.store(l as u8, Ordering::Relaxed);
}

/// Sends later lines to `path` (appending), or to stderr when empty.
pub fn set_file(path: &str) -> std::io::Result<()> {
    let f = if path.is_empty() {
        None
    } else {
        Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)?,
        )
    };
    *FILE.lock() = f;
    Ok(())
}

pub fn enabled(l: Level) -> bool {
    l as u8 >= LEVEL.load(Ordering::Relaxed) && l != Level::Nothing
}

pub fn log(l: Level, msg: &str) {
    if !enabled(l) {
        return;
    }
    let ms = cairn_engine::clock::now_ms();
    let line = format!(
        "{}:M {} {} {}\n",
        std::process::id(),
        format_time(ms),
        l.mark(),
        msg
    );
    let mut f = FILE.lock();
    match f.as_mut() {
        Some(file) => {
            let _ = file.write_all(line.as_bytes());
        }
        None => {
            let _ = std::io::stderr().write_all(line.as_bytes());
        }
    }
}

pub fn verbose(msg: &str) {
    log(Level::Verbose, msg)
}
pub fn notice(msg: &str) {
    log(Level::Notice, msg)
}
pub fn warning(msg: &str) {
    log(Level::Warning, msg)
}

/// `21 Nov 2026 13:35:00.123` in UTC, as Redis prints (it uses local time;
/// servers usually run in UTC).
fn format_time(ms: u64) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let secs = ms / 1000;
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    let t = secs % 86_400;
    format!(
        "{:02} {} {} {:02}:{:02}:{:02}.{:03}",
        d,
        MONTHS[(m - 1) as usize],
        y,
        t / 3600,
        (t / 60) % 60,
        t % 60,
        ms % 1000
    )
}

/// Days since 1970-01-01 to (year, month, day): Howard Hinnant's algorithm.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    #[test]
    fn dates() {
        assert_eq!(super::civil_from_days(0), (1970, 1, 1));
        assert_eq!(
            super::format_time(1_795_268_100_123),
            "21 Nov 2026 13:35:00.123"
        );
    }
}
