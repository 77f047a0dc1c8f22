//! Support for the tests and experiments on the namespace topology
//! (`scripts/innetwork-topo.sh`): building and removing it, running code
//! on a thread inside a namespace (sockets made there stay there), and
//! running the `smt-forwarder` binary in the forwarder's namespace.

use std::fs::File;
use std::io::{self, Read};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};

/// Which topology (`docs/innetwork.md` § 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// One server reached over several paths.
    Paths,
    /// Several replicas, each over its own link.
    Replicas,
}

/// A built topology; dropping it removes it.
#[derive(Debug)]
pub struct Topology {
    script: PathBuf,
    tag: String,
    /// Paths to one server, or one link per replica.
    pub variant: Variant,
    /// Paths (or replicas) built.
    pub links: usize,
}

impl Topology {
    /// Builds the topology with `clients` client namespaces and `links`
    /// paths or replicas (tbf at `rates_mbit`, 0 for none), or returns
    /// `Ok(None)` with the script's SKIPPED reason printed when it cannot
    /// be built here (not root).
    pub fn up(
        script: &Path,
        tag: &str,
        variant: Variant,
        clients: usize,
        links: usize,
        rates_mbit: &[u64],
    ) -> io::Result<Option<Self>> {
        let check = Command::new("bash").arg(script).arg("check").output()?;
        if !check.status.success() {
            println!("SKIPPED: {}", String::from_utf8_lossy(&check.stdout).trim());
            return Ok(None);
        }
        let rates: Vec<String> = rates_mbit.iter().map(u64::to_string).collect();
        let (kind, flag) = match variant {
            Variant::Paths => ("paths", "--paths"),
            Variant::Replicas => ("replicas", "--replicas"),
        };
        let mut cmd = Command::new("bash");
        cmd.arg(script).args(["up", tag, kind, "--clients"]);
        cmd.arg(clients.to_string())
            .arg(flag)
            .arg(links.to_string());
        if !rates.is_empty() {
            cmd.arg("--rate-mbit").arg(rates.join(","));
        }
        let out = cmd.output()?;
        if !out.status.success() {
            return Err(io::Error::other(format!(
                "innetwork-topo.sh up failed: {}",
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        Ok(Some(Self {
            script: script.to_owned(),
            tag: tag.to_owned(),
            variant,
            links,
        }))
    }

    /// The namespace of `role`: `c0`.. (clients), `f`, `s0`.. (servers).
    pub fn ns(&self, role: &str) -> String {
        format!("smtin-{}-{role}", self.tag)
    }

    /// The forwarder's address on client `i`'s link.
    pub fn forwarder_addr(i: usize, v6: bool, port: u16) -> SocketAddr {
        // IPv6 link i is 2001:db8:c<i>::/64 (hex digit c, then i).
        let ip = match v6 {
            false => IpAddr::V4(Ipv4Addr::new(192, 0, 2, (4 * i + 1) as u8)),
            true => IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0xc0 | i as u16, 0, 0, 0, 0, 1)),
        };
        SocketAddr::new(ip, port)
    }

    /// The server's (replica's) address on path (link) `k`.
    pub fn server_addr(k: usize, v6: bool, port: u16) -> SocketAddr {
        let ip = match v6 {
            false => IpAddr::V4(Ipv4Addr::new(198, 51, 100, (4 * k + 2) as u8)),
            true => IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0xa0 | k as u16, 0, 0, 0, 0, 2)),
        };
        SocketAddr::new(ip, port)
    }

    /// The forwarder's `--path` arguments for this topology, with a delay
    /// (µs) and rate (Mbit/s) per link.
    pub fn path_args(&self, port: u16, delays_us: &[u64], rates_mbit: &[u64]) -> Vec<String> {
        (0..self.links)
            .flat_map(|k| {
                let (dev, replica) = match self.variant {
                    Variant::Paths => (format!("p{k}"), 0),
                    Variant::Replicas => (format!("r{k}"), k),
                };
                let spec = format!(
                    "dev={dev},to={},to={},delay-us={},rate-mbit={},replica={replica}",
                    Self::server_addr(k, false, port),
                    Self::server_addr(k, true, port),
                    delays_us.get(k).copied().unwrap_or(0),
                    rates_mbit.get(k).copied().unwrap_or(0),
                );
                ["--path".to_owned(), spec]
            })
            .collect()
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(&self.script)
            .args(["down", &self.tag])
            .output();
    }
}

/// Runs `f` on a new thread inside network namespace `ns` and returns
/// its result. Sockets it makes (and threads it starts) stay in `ns`.
pub fn in_namespace<T, F>(ns: &str, f: F) -> io::Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let file = File::open(Path::new("/var/run/netns").join(ns))?;
    std::thread::spawn(move || {
        rustix::thread::move_into_link_name_space(
            file.as_fd(),
            Some(rustix::thread::LinkNameSpaceType::Network),
        )?;
        Ok(f())
    })
    .join()
    .map_err(|_| io::Error::other("the thread in the namespace panicked"))?
}

/// The `smt-forwarder` binary running in a namespace; [`Running::stop`]
/// ends it and returns its counters.
#[derive(Debug)]
pub struct Running {
    child: Child,
    stdin: Option<ChildStdin>,
}

impl Running {
    /// Starts `binary` in namespace `ns` with `args` (plus
    /// `--until-stdin-eof`).
    pub fn start(binary: &Path, ns: &str, args: &[String]) -> io::Result<Self> {
        let mut child = Command::new("ip")
            .args(["netns", "exec", ns])
            .arg(binary)
            .args(args)
            .arg("--until-stdin-eof")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let stdin = child.stdin.take();
        // Give it time to bind before the first datagram.
        std::thread::sleep(std::time::Duration::from_millis(300));
        Ok(Self { child, stdin })
    }

    /// Stops the forwarder and returns its JSON counters.
    pub fn stop(mut self) -> io::Result<serde_json::Value> {
        drop(self.stdin.take());
        let mut out = String::new();
        if let Some(mut stdout) = self.child.stdout.take() {
            stdout.read_to_string(&mut out)?;
        }
        let status = self.child.wait()?;
        if !status.success() {
            return Err(io::Error::other(format!(
                "smt-forwarder exited with {status}"
            )));
        }
        serde_json::from_str(out.trim()).map_err(io::Error::other)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

/// The forwarder arguments common to every topology: listen on `port`
/// (IPv4 and IPv6), the inside addresses of the script.
pub fn base_args(port: u16) -> Vec<String> {
    [
        "--listen",
        &format!("0.0.0.0:{port}"),
        "--listen",
        &format!("[::]:{port}"),
        "--inside",
        "203.0.113.1",
        "--inside",
        "2001:db8:ff::1",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}
