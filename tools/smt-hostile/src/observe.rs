//! What the kernel says about the server process from outside: its UDP
//! socket's memory (`ss -uamn`: receive and error queues together, the
//! socket's buffer, its drops) and how busy each of its threads is
//! (`/proc/<pid>/task/*/stat`).

use std::collections::HashMap;
use std::fmt;
use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

/// The kernel's clock ticks per second in `/proc/*/stat` (`USER_HZ`, 100 on
/// every Linux ABI).
const USER_HZ: f64 = 100.0;

/// A thread busier than this share of one CPU counts as busy (the
/// server's threads take a few per cent when only its timers run).
pub const BUSY_SHARE: f64 = 0.25;

/// Bytes a socket may hold once its server is idle: a reader that keeps up
/// leaves at most a few datagrams (or errors) behind.
pub const MAX_LEFT_QUEUED: u64 = 64 * 1024;

/// The server socket's memory, from `ss`'s `skmem`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SocketQueues {
    /// `r`: bytes charged to the socket's receive side: datagrams waiting
    /// to be read *and* ICMP errors waiting on its error queue (both count
    /// against the receive buffer).
    pub queued: u64,
    /// `rb`: the receive buffer; once `queued` reaches it, every arriving
    /// datagram is dropped.
    pub rcvbuf: u64,
    /// `d`: datagrams dropped for want of room since the socket opened.
    pub drops: u64,
}

impl SocketQueues {
    /// More than [`MAX_LEFT_QUEUED`] waits: nobody is reading (with the
    /// whole buffer taken, every arriving datagram is dropped).
    pub fn stuck(&self) -> bool {
        self.queued > MAX_LEFT_QUEUED
    }
}

impl fmt::Display for SocketQueues {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} / {} B, {} drops",
            self.queued, self.rcvbuf, self.drops
        )
    }
}

/// The UDP socket bound to `addr`, as `ss -uamn` shows it (the caller's
/// network namespace), if there is one.
pub fn socket_queues(addr: SocketAddr) -> Option<SocketQueues> {
    let filter = format!("sport = :{}", addr.port());
    let out = Command::new("ss").args(["-uamnH", &filter]).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let local = addr.to_string();
    // A socket is a line with its addresses, then a line with skmem.
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let ours = line.split_whitespace().any(|w| w == local);
        let skmem = lines.next().unwrap_or_default();
        if ours {
            return parse_skmem(skmem);
        }
    }
    None
}

/// `skmem:(r832,rb212992,t0,tb212992,f3264,w0,o0,bl0,d0)`.
fn parse_skmem(line: &str) -> Option<SocketQueues> {
    let inner = line.trim().strip_prefix("skmem:(")?.strip_suffix(')')?;
    let fields: HashMap<&str, u64> = inner
        .split(',')
        .filter_map(|f| {
            let digits = f.find(|c: char| c.is_ascii_digit())?;
            Some((&f[..digits], f[digits..].parse().ok()?))
        })
        .collect();
    Some(SocketQueues {
        queued: *fields.get("r")?,
        rcvbuf: *fields.get("rb")?,
        drops: fields.get("d").copied().unwrap_or(0),
    })
}

/// One thread's share of a CPU over the sampled interval.
#[derive(Clone, Debug, PartialEq)]
pub struct ThreadLoad {
    pub name: String,
    pub share: f64,
}

impl fmt::Display for ThreadLoad {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {:.0} %", self.name, 100.0 * self.share)
    }
}

/// Every thread of `pid` with its CPU share over `interval`, busiest
/// first (empty if the process cannot be read).
pub fn thread_loads(pid: u32, interval: Duration) -> Vec<ThreadLoad> {
    let before = cpu_ticks(pid);
    std::thread::sleep(interval);
    let after = cpu_ticks(pid);
    let secs = interval.as_secs_f64().max(1e-3);
    let mut loads: Vec<ThreadLoad> = after
        .iter()
        .map(|(tid, (name, ticks))| {
            let was = before.get(tid).map_or(*ticks, |b| b.1);
            ThreadLoad {
                name: name.clone(),
                share: ticks.saturating_sub(was) as f64 / USER_HZ / secs,
            }
        })
        .collect();
    loads.sort_by(|a, b| b.share.total_cmp(&a.share));
    loads
}

/// Thread ID → (name, user + system clock ticks).
fn cpu_ticks(pid: u32) -> HashMap<u32, (String, u64)> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return HashMap::new();
    };
    dir.flatten()
        .filter_map(|task| {
            let tid = task.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(task.path().join("stat")).ok()?;
            Some((tid, parse_stat(&stat)?))
        })
        .collect()
}

/// The name and `utime + stime` of a `stat` line (`pid (comm) state ...`;
/// the name may hold spaces and parentheses, so it ends at the last `)`).
fn parse_stat(stat: &str) -> Option<(String, u64)> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let name = stat.get(open + 1..close)?.to_string();
    // After the name: state (field 3) ... utime (14), stime (15).
    let rest: Vec<&str> = stat.get(close + 1..)?.split_whitespace().collect();
    let utime: u64 = rest.get(11)?.parse().ok()?;
    let stime: u64 = rest.get(12)?.parse().ok()?;
    Some((name, utime + stime))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skmem_fields_are_read_by_name() {
        let q = parse_skmem("\t skmem:(r8388224,rb8388608,t0,tb8388608,f0,w0,o0,bl0,d51234)")
            .expect("parses");
        assert_eq!(q.queued, 8_388_224);
        assert_eq!(q.rcvbuf, 8_388_608);
        assert_eq!(q.drops, 51_234);
        assert!(q.stuck());
        assert!(parse_skmem("nothing").is_none());
    }

    #[test]
    fn a_stat_line_with_a_strange_name_parses() {
        let line = "42 (smt (x) y) S 1 42 42 0 -1 4194560 100 0 0 0 250 70 0 0 20 0 3 0";
        assert_eq!(parse_stat(line), Some(("smt (x) y".into(), 320)));
    }

    #[test]
    fn this_process_has_threads_to_read() {
        let loads = thread_loads(std::process::id(), Duration::from_millis(20));
        assert!(!loads.is_empty());
    }
}
