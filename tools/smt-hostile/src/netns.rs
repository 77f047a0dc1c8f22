//! The network the attacks run in: a namespace this program creates (as
//! root) and runs itself inside, where the answers a server sends to
//! spoofed sources meet what they would meet on a real network, and ICMP
//! errors really come back.
//!
//! ```text
//!  namespace smt-hostile-PID (server, legitimate clients, attacker)
//!    lo     127.0.0.0/8; and 10.0.0.0/9 as local addresses on which
//!           nothing listens: answers there draw ICMP port unreachables
//!    veth   192.0.2.1/30 (the server's address)
//!           10.128.0.0/9 via 192.0.2.2
//!              |
//!  namespace smt-hostile-PID-r (a router, forwarding)
//!    veth   192.0.2.2/30
//!           10.128.0.0/10 blackhole: answers vanish, as to hosts that are off
//!           10.192.0.0/10 unreachable: ICMP host unreachables, at the rate a
//!                         Linux router sends them (about one a second)
//! ```
//!
//! Inside, the ICMP rate limits that belong to one host (`icmp_ratelimit`,
//! `icmp_msgs_per_sec`) are lifted: each spoofed address stands for a host
//! of its own, which would answer on its own. Nothing outside the two
//! namespaces changes; both are deleted when the run ends, even after an
//! error.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};

/// The server's address inside the namespace.
pub const SERVER_IP: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
/// The router's side of the link.
const ROUTER_IP: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);

/// Where a spoofed source address lives, and so what the server's answers
/// to it meet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Realm {
    /// A local address with nothing listening: ICMP port unreachable.
    PortUnreachable,
    /// Past the router, dropped without a word.
    Silent,
    /// Past the router, which answers ICMP host unreachable.
    HostUnreachable,
}

impl Realm {
    /// The `n`-th address of a pool of spoofed sources in this realm.
    pub fn address(self, n: u32) -> Ipv4Addr {
        let (base, span) = match self {
            Self::PortUnreachable => (0x0a00_0000u32, 1 << 23),
            Self::Silent => (0x0a80_0000, 1 << 22),
            Self::HostUnreachable => (0x0ac0_0000, 1 << 22),
        };
        // Skip .0 and .255 of every /24, as hosts would.
        let host = 1 + n % 254;
        let net = (n / 254) % (span >> 8);
        Ipv4Addr::from(base + (net << 8) + host)
    }
}

/// The share of spoofed sources in each realm: most spoofed addresses
/// answer with a port unreachable (the costly case for the server's error
/// queue), some are silent, a few lie behind a router.
pub fn realm_of(n: u32) -> Realm {
    match n % 16 {
        0 => Realm::HostUnreachable,
        1 | 2 => Realm::Silent,
        _ => Realm::PortUnreachable,
    }
}

/// Whether this process runs as root (the effective user ID in
/// `/proc/self/status`).
pub fn is_root() -> bool {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1))
        == Some("0")
}

/// The two namespaces (and the link between them), deleted on drop.
#[derive(Debug)]
pub struct Namespace {
    name: String,
    router: String,
    veth: String,
}

/// Every namespace this program makes is called this, then its process ID.
const PREFIX: &str = "smt-hostile-";

impl Namespace {
    /// Creates and wires both namespaces (needs root and iproute2's `ip`),
    /// after deleting any left by an earlier run that was killed.
    pub fn create() -> Result<Self, String> {
        remove_stale();
        let pid = std::process::id();
        let name = format!("{PREFIX}{pid}");
        let ns = Self {
            router: format!("{name}-r"),
            name,
            veth: format!("sh{pid}a"),
        };
        ns.wire()?;
        Ok(ns)
    }

    fn wire(&self) -> Result<(), String> {
        let (n, r) = (self.name.as_str(), self.router.as_str());
        let (va, vb) = (self.veth.clone(), format!("sh{}b", std::process::id()));
        let server = format!("{SERVER_IP}/30");
        let router = format!("{ROUTER_IP}/30");
        let via = ROUTER_IP.to_string();
        ip(&["netns", "add", n])?;
        ip(&["netns", "add", r])?;
        ip(&["link", "add", &va, "type", "veth", "peer", "name", &vb])?;
        ip(&["link", "set", &va, "netns", n])?;
        ip(&["link", "set", &vb, "netns", r])?;
        ip(&["-n", n, "addr", "add", &server, "dev", &va])?;
        ip(&["-n", r, "addr", "add", &router, "dev", &vb])?;
        for (ns, dev) in [(n, &va), (r, &vb)] {
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
            ip(&["-n", ns, "link", "set", dev, "up"])?;
        }
        ip(&["-n", n, "route", "add", "local", "10.0.0.0/9", "dev", "lo"])?;
        ip(&["-n", n, "route", "add", "10.128.0.0/9", "via", &via])?;
        ip(&["-n", r, "route", "add", "blackhole", "10.128.0.0/10"])?;
        ip(&["-n", r, "route", "add", "unreachable", "10.192.0.0/10"])?;
        sysctl(r, "net.ipv4.ip_forward=1")?;
        for ns in [n, r] {
            sysctl(ns, "net.ipv4.icmp_ratelimit=0")?;
            sysctl(ns, "net.ipv4.icmp_msgs_per_sec=10000000")?;
            sysctl(ns, "net.ipv4.icmp_msgs_burst=10000000")?;
        }
        Ok(())
    }

    /// Runs `program ARGS` inside the server's namespace with as many
    /// file descriptors as the hard limit allows (`prlimit`, when
    /// present: the soft limit is often 1024), its output passed through.
    pub fn run_inside(&self, program: &Path, args: &[String]) -> Result<ExitStatus, String> {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.name]);
        if let (true, Some((_, hard))) = (which("prlimit"), open_files_limit()) {
            cmd.args(["prlimit", &format!("--nofile={hard}:{hard}"), "--"]);
        }
        cmd.arg(program)
            .args(args)
            .status()
            .map_err(|e| format!("cannot run {} in the namespace: {e}", program.display()))
    }

    /// The server namespace's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        // Deleting a namespace removes its end of the veth pair, and with
        // it the other end; a pair that never moved is deleted here.
        let _ = ip(&["netns", "del", &self.name]);
        let _ = ip(&["netns", "del", &self.router]);
        let _ = ip(&["link", "del", &self.veth]);
    }
}

/// Deletes this program's namespaces whose process is gone (a run killed
/// before it could clean up).
fn remove_stale() {
    let Ok(out) = Command::new("ip").args(["netns", "list"]).output() else {
        return;
    };
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some(name) = line.split_whitespace().next() else {
            continue;
        };
        let Some(pid) = name.strip_prefix(PREFIX) else {
            continue;
        };
        let pid = pid.trim_end_matches("-r");
        let gone = pid
            .parse::<u32>()
            .is_ok_and(|p| !Path::new(&format!("/proc/{p}")).exists());
        if gone {
            let _ = ip(&["netns", "del", name]);
        }
    }
}

/// Whether `tool` is on the PATH.
pub fn which(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(tool).is_file()))
}

/// This process's soft and hard limits on open files (`/proc/self/limits`;
/// `None` when unreadable or unlimited).
pub fn open_files_limit() -> Option<(u64, u64)> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    let mut numbers = line
        .trim_start_matches("Max open files")
        .split_whitespace()
        .map(|w| w.parse::<u64>().ok());
    Some((numbers.next()??, numbers.next()??))
}

fn ip(args: &[&str]) -> Result<(), String> {
    run("ip", args)
}

fn sysctl(ns: &str, setting: &str) -> Result<(), String> {
    run("ip", &["netns", "exec", ns, "sysctl", "-q", "-w", setting])
}

fn run(program: &str, args: &[&str]) -> Result<(), String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "{program} {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    ))
}

/// The source of the `n`-th spoofed datagram from a pool of `pool`
/// addresses spread over the realms, on a port drawn from `port_bits`.
pub fn pool_source(n: u32, pool: u32, port_bits: u64) -> SocketAddrV4 {
    let i = n % pool.max(1);
    let port = 1024 + (port_bits % (65_536 - 1024)) as u16;
    SocketAddrV4::new(realm_of(i).address(i), port)
}
