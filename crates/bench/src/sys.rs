//! What the report says about the machine, and what /proc says about a
//! server process on it: CPU time (utime + stime), resident memory, and
//! which process listens on a port.

use std::collections::HashSet;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

/// The machine a run was made on.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Machine {
    pub hostname: Option<String>,
    /// Logical CPUs available to this process.
    pub cores: usize,
    pub cpu_model: Option<String>,
    pub memory_bytes: Option<u64>,
    pub kernel: Option<String>,
    pub os: Option<String>,
    pub data_dir: Option<DataDir>,
}

/// The file system under `--data-dir` (E2: persistence must be measured on
/// the disk it will run on).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DataDir {
    pub path: String,
    pub fs_type: Option<String>,
    pub device: Option<String>,
    pub mount_point: Option<String>,
}

fn read(p: impl AsRef<Path>) -> Option<String> {
    std::fs::read_to_string(p).ok()
}

/// Collects [`Machine`].
pub fn machine(data_dir: Option<&Path>) -> Machine {
    let cpuinfo = read("/proc/cpuinfo").unwrap_or_default();
    let cpu_model = cpuinfo.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == "model name").then(|| v.trim().to_string())
    });
    let memory_bytes = read("/proc/meminfo").and_then(|m| {
        m.lines().find_map(|l| {
            let rest = l.strip_prefix("MemTotal:")?;
            let kb: u64 = rest.trim().trim_end_matches("kB").trim().parse().ok()?;
            Some(kb * 1024)
        })
    });
    let kernel = read("/proc/sys/kernel/osrelease").map(|s| s.trim().to_string());
    let os = read("/etc/os-release").and_then(|s| {
        s.lines().find_map(|l| {
            l.strip_prefix("PRETTY_NAME=")
                .map(|v| v.trim_matches('"').to_string())
        })
    });
    let hostname = read("/proc/sys/kernel/hostname").map(|s| s.trim().to_string());
    Machine {
        hostname,
        cores: std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
        cpu_model,
        memory_bytes,
        kernel,
        os,
        data_dir: data_dir.map(data_dir_info),
    }
}

/// The mount holding `path` (longest mount-point prefix in
/// /proc/self/mountinfo).
pub fn data_dir_info(path: &Path) -> DataDir {
    let canon = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let mut best: Option<(usize, String, String, String)> = None;
    if let Some(mi) = read("/proc/self/mountinfo") {
        for line in mi.lines() {
            // id parent maj:min root mount-point options ... - fstype source superopts
            let (left, right) = match line.split_once(" - ") {
                Some(x) => x,
                None => continue,
            };
            let f: Vec<&str> = left.split(' ').collect();
            let r: Vec<&str> = right.split(' ').collect();
            if f.len() < 5 || r.len() < 2 {
                continue;
            }
            let mp = unescape_mount(f[4]);
            let mpp = PathBuf::from(&mp);
            if canon.starts_with(&mpp) {
                let len = mpp.as_os_str().len();
                if best.as_ref().is_none_or(|b| len >= b.0) {
                    best = Some((len, mp, r[0].to_string(), r[1].to_string()));
                }
            }
        }
    }
    DataDir {
        path: canon.display().to_string(),
        fs_type: best.as_ref().map(|b| b.2.clone()),
        device: best.as_ref().map(|b| b.3.clone()),
        mount_point: best.map(|b| b.1),
    }
}

/// mountinfo escapes space, tab, newline and backslash as octal.
fn unescape_mount(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Clock ticks per second for /proc/<pid>/stat times.
pub fn clk_tck() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let v = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if v > 0 {
        v as u64
    } else {
        100
    }
}

/// utime + stime of a process, in clock ticks (all its threads).
pub fn cpu_ticks(pid: u32) -> Option<u64> {
    let s = read(format!("/proc/{pid}/stat"))?;
    parse_stat_ticks(&s)
}

/// utime (field 14) + stime (field 15) from a /proc/<pid>/stat line; the
/// command name (field 2) may contain spaces and parentheses, so fields are
/// counted after the last ')'.
pub fn parse_stat_ticks(stat: &str) -> Option<u64> {
    let after = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = after.split_whitespace().collect();
    // after ')' field 3 (state) is index 0, so field n is index n - 3.
    let utime: u64 = f.get(14 - 3)?.parse().ok()?;
    let stime: u64 = f.get(15 - 3)?.parse().ok()?;
    Some(utime + stime)
}

/// Resident set size of a process in bytes (VmRSS).
pub fn rss_bytes(pid: u32) -> Option<u64> {
    let s = read(format!("/proc/{pid}/status"))?;
    s.lines().find_map(|l| {
        let rest = l.strip_prefix("VmRSS:")?;
        let kb: u64 = rest.trim().trim_end_matches("kB").trim().parse().ok()?;
        Some(kb * 1024)
    })
}

/// The addresses of this machine's interfaces.
fn local_ips() -> Vec<IpAddr> {
    let mut out = Vec::new();
    let mut ifap: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills ifap with a list we free with freeifaddrs;
    // each ifa_addr is null or points to a sockaddr of the family it says.
    unsafe {
        if libc::getifaddrs(&mut ifap) != 0 {
            return out;
        }
        let mut p = ifap;
        while !p.is_null() {
            let a = (*p).ifa_addr;
            if !a.is_null() {
                match (*a).sa_family as i32 {
                    libc::AF_INET => {
                        let sin = &*(a as *const libc::sockaddr_in);
                        out.push(IpAddr::from(
                            u32::from_be(sin.sin_addr.s_addr).to_be_bytes(),
                        ));
                    }
                    libc::AF_INET6 => {
                        let sin6 = &*(a as *const libc::sockaddr_in6);
                        out.push(IpAddr::from(sin6.sin6_addr.s6_addr));
                    }
                    _ => {}
                }
            }
            p = (*p).ifa_next;
        }
        libc::freeifaddrs(ifap);
    }
    out
}

/// True for loopback and for any address of this machine's interfaces.
pub fn is_local_ip(ip: IpAddr) -> bool {
    ip.is_loopback() || ip.is_unspecified() || local_ips().contains(&ip)
}

/// A listening socket from /proc/net/tcp{,6}: (local ip, port, inode).
fn listeners() -> Vec<(IpAddr, u16, u64)> {
    let mut out = Vec::new();
    for (file, v6) in [("/proc/net/tcp", false), ("/proc/net/tcp6", true)] {
        let Some(s) = read(file) else { continue };
        out.extend(s.lines().skip(1).filter_map(|l| parse_tcp_line(l, v6)));
    }
    out
}

/// One line of /proc/net/tcp: keeps LISTEN (state 0A) sockets.
pub fn parse_tcp_line(line: &str, v6: bool) -> Option<(IpAddr, u16, u64)> {
    let f: Vec<&str> = line.split_whitespace().collect();
    if f.len() < 10 || f[3] != "0A" {
        return None;
    }
    let (ip_hex, port_hex) = f[1].split_once(':')?;
    let port = u16::from_str_radix(port_hex, 16).ok()?;
    let inode: u64 = f[9].parse().ok()?;
    // The address is printed as host-order 32-bit words (little endian here).
    let ip = if v6 {
        if ip_hex.len() != 32 {
            return None;
        }
        let mut b = [0u8; 16];
        for w in 0..4 {
            let word = u32::from_str_radix(&ip_hex[w * 8..w * 8 + 8], 16).ok()?;
            b[w * 4..w * 4 + 4].copy_from_slice(&word.to_le_bytes());
        }
        IpAddr::from(b)
    } else {
        let word = u32::from_str_radix(ip_hex, 16).ok()?;
        IpAddr::from(word.to_le_bytes())
    };
    Some((ip, port, inode))
}

/// The process listening on `ip:port` on this machine, found through the
/// socket's inode in /proc/net/tcp and the `socket:[inode]` links in
/// /proc/*/fd (only processes we may inspect).
pub fn pid_listening_on(ip: IpAddr, port: u16) -> Option<u32> {
    let inodes: HashSet<u64> = listeners()
        .into_iter()
        .filter(|(lip, lport, _)| {
            *lport == port
                && (lip.is_unspecified()
                    || *lip == ip
                    || (ip.is_loopback() && lip.is_loopback())
                    || ip.is_unspecified())
        })
        .map(|(_, _, inode)| inode)
        .collect();
    if inodes.is_empty() {
        return None;
    }
    let me = std::process::id();
    let procs = std::fs::read_dir("/proc").ok()?;
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            if let Ok(link) = std::fs::read_link(fd.path()) {
                let l = link.to_string_lossy();
                if let Some(num) = l.strip_prefix("socket:[").and_then(|s| s.strip_suffix(']')) {
                    if num.parse::<u64>().is_ok_and(|i| inodes.contains(&i)) {
                        return Some(pid);
                    }
                }
            }
        }
    }
    None
}

/// The git commit of the current directory's repository, and whether the
/// work tree has uncommitted changes; None outside a repository.
pub fn git_commit() -> (Option<String>, Option<bool>) {
    let head = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    if head.is_none() {
        return (None, None);
    }
    let dirty = Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=no"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| !o.stdout.is_empty());
    (head, dirty)
}

/// Seconds since the Unix epoch.
pub fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// Whose CPU time [`cpu_seconds`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Who {
    /// This process, all its threads.
    SelfProcess,
    /// Children that have been waited for (a finished redis-benchmark).
    Children,
}

/// User + system CPU seconds from getrusage: the client's own cost, to
/// tell whether a client was its own bottleneck (a saturated single-threaded
/// client also times its own queueing).
pub fn cpu_seconds(who: Who) -> Option<f64> {
    let w = match who {
        Who::SelfProcess => libc::RUSAGE_SELF,
        Who::Children => libc::RUSAGE_CHILDREN,
    };
    // SAFETY: getrusage fills the zeroed struct; the result is checked.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(w, &mut ru) } != 0 {
        return None;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Some(tv(ru.ru_utime) + tv(ru.ru_stime))
}

/// The whole machine's CPU time by state, from /proc/stat's `cpu` line
/// (ticks): where a phase's two cores went, server and client together.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BoxTicks {
    pub busy: u64,
    pub idle: u64,
    pub iowait: u64,
    pub steal: u64,
}

pub fn box_ticks() -> Option<BoxTicks> {
    parse_box_ticks(&read("/proc/stat")?)
}

/// Parses /proc/stat's first line: `cpu user nice system idle iowait irq
/// softirq steal ...` (guest time is already inside user).
pub fn parse_box_ticks(stat: &str) -> Option<BoxTicks> {
    let line = stat.lines().next()?;
    let mut f = line.split_whitespace();
    if f.next()? != "cpu" {
        return None;
    }
    let v: Vec<u64> = f.take(8).map(|x| x.parse().ok()).collect::<Option<_>>()?;
    if v.len() < 8 {
        return None;
    }
    Some(BoxTicks {
        busy: v[0] + v[1] + v[2] + v[5] + v[6],
        idle: v[3],
        iowait: v[4],
        steal: v[7],
    })
}

impl BoxTicks {
    /// Shares of the time between two readings, in percent: busy, idle,
    /// iowait, steal (None when no tick passed).
    pub fn shares_since(&self, before: &BoxTicks) -> Option<[f64; 4]> {
        let d = [
            self.busy.saturating_sub(before.busy),
            self.idle.saturating_sub(before.idle),
            self.iowait.saturating_sub(before.iowait),
            self.steal.saturating_sub(before.steal),
        ];
        let all: u64 = d.iter().sum();
        (all > 0).then(|| d.map(|x| x as f64 * 100.0 / all as f64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn box_ticks_split_the_cpu_line() {
        let st = "cpu  100 5 20 800 7 3 2 9 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n";
        let a = parse_box_ticks(st).unwrap();
        assert_eq!(
            a,
            BoxTicks {
                busy: 130,
                idle: 800,
                iowait: 7,
                steal: 9
            }
        );
        let b = BoxTicks {
            busy: 230,
            idle: 850,
            iowait: 7,
            steal: 59,
        };
        assert_eq!(b.shares_since(&a), Some([50.0, 25.0, 0.0, 25.0]));
        assert_eq!(a.shares_since(&a), None);
        assert_eq!(parse_box_ticks("intr 1 2 3\n"), None);
        assert_eq!(parse_box_ticks("cpu 1 2 3\n"), None);
    }

    #[test]
    fn own_cpu_time_grows_with_work() {
        let a = cpu_seconds(Who::SelfProcess).unwrap();
        // Spin ~30 ms of CPU (wall clock as the bound, so it ends).
        let t = std::time::Instant::now();
        let mut x = 0u64;
        while t.elapsed() < std::time::Duration::from_millis(30) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let b = cpu_seconds(Who::SelfProcess).unwrap();
        assert!(b - a >= 0.01, "{a} -> {b}");
        assert!(cpu_seconds(Who::Children).unwrap() >= 0.0);
    }

    #[test]
    fn stat_ticks() {
        let line = "1234 (redis-server (x) y) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 4 0 100 0 0";
        assert_eq!(parse_stat_ticks(line), Some(325));
        assert_eq!(parse_stat_ticks("garbage"), None);
        // Our own process has a parseable stat line.
        assert!(cpu_ticks(std::process::id()).is_some());
        assert!(rss_bytes(std::process::id()).unwrap() > 0);
    }

    #[test]
    fn tcp_lines() {
        let l = "   0: 0100007F:18EB 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 123456 1 0000000000000000 100 0 0 10 0";
        let (ip, port, inode) = parse_tcp_line(l, false).unwrap();
        assert_eq!(ip, "127.0.0.1".parse::<IpAddr>().unwrap());
        assert_eq!(port, 6379);
        assert_eq!(inode, 123456);
        let est = l.replace(" 0A ", " 01 ");
        assert_eq!(parse_tcp_line(&est, false), None);
        let l6 = "   1: 00000000000000000000000001000000:1A0B 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 99 1 0000000000000000 100 0 0 10 0";
        let (ip, port, _) = parse_tcp_line(l6, true).unwrap();
        assert_eq!(ip, "::1".parse::<IpAddr>().unwrap());
        assert_eq!(port, 6667);
    }

    #[test]
    fn finds_own_listener() {
        // A listener in a child process is found through its port.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        // Our own pid is skipped on purpose (the client is never the server).
        assert_eq!(pid_listening_on("127.0.0.1".parse().unwrap(), port), None);
    }

    #[test]
    fn machine_info() {
        let m = machine(Some(Path::new("/tmp")));
        assert!(m.cores >= 1);
        let d = m.data_dir.unwrap();
        assert!(d.fs_type.is_some(), "{d:?}");
        assert_eq!(unescape_mount("/a\\040b"), "/a b");
    }
}
