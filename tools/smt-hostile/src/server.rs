//! The `smt server` process under attack: started fresh for each class
//! (with `--metrics` on loopback), watched through `/proc/<pid>/status`,
//! killed when dropped.

use std::io::{BufRead, BufReader};
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How the server authenticates clients.
#[derive(Clone, Debug)]
pub enum ServerKeys {
    /// The PSK nonce exchange with this master (hex), given through the
    /// environment (`SMT_PSK`) so it stays out of the process list.
    Psk(String),
    /// TLS 1.3 with this certificate chain and key (PEM files).
    Tls { cert: PathBuf, key: PathBuf },
}

/// Resident memory of the server process, from `/proc/<pid>/status`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Memory {
    /// `VmRSS`: resident now, KiB.
    pub rss_kib: u64,
    /// `VmHWM`: the peak resident size so far, KiB.
    pub hwm_kib: u64,
}

/// A running `smt server` child process.
#[derive(Debug)]
pub struct Server {
    child: Child,
    addr: SocketAddr,
    metrics: SocketAddr,
    last_line: Arc<Mutex<String>>,
}

impl Server {
    /// Starts `smt server` on a port of `ip` the kernel picks (no probe
    /// that another process could race) and waits (at most 10 s) until it
    /// says where it listens and where its metrics are.
    pub fn start(smt: &Path, keys: &ServerKeys, ip: IpAddr) -> Result<Self, String> {
        let mut cmd = Command::new(smt);
        // The server's counters (the report's in/out column) print only
        // when asked.
        cmd.args(["server", "--listen", &SocketAddr::new(ip, 0).to_string()])
            .args(["--stats-interval", "1", "--metrics", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        match keys {
            ServerKeys::Psk(hex) => {
                cmd.env("SMT_PSK", hex);
            }
            ServerKeys::Tls { cert, key } => {
                cmd.env_remove("SMT_PSK")
                    .arg("--cert")
                    .arg(cert)
                    .arg("--key")
                    .arg(key);
            }
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {} server: {e}", smt.display()))?;
        let Some(stdout) = child.stdout.take() else {
            let _ = child.kill();
            return Err("no stdout pipe from the server".into());
        };
        let last_line = Arc::new(Mutex::new(String::new()));
        let ready = drain_output(stdout, last_line.clone());
        let line = || {
            ready.recv_timeout(Duration::from_secs(10)).map_err(|_| {
                format!(
                    "the server ({}) did not report listening within 10 s",
                    smt.display()
                )
            })
        };
        let banner = line()?;
        let Some(addr) = listen_address(&banner) else {
            let _ = child.kill();
            return Err(format!("unexpected first line from the server: {banner:?}"));
        };
        let second = line()?;
        let Some(metrics) = metrics_address(&second) else {
            let _ = child.kill();
            return Err(format!("no metrics address from the server: {second:?}"));
        };
        Ok(Self {
            child,
            addr,
            metrics,
            last_line,
        })
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Where it serves `GET /metrics`.
    pub fn metrics(&self) -> SocketAddr {
        self.metrics
    }

    /// The process ID.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Resident memory now and at its peak, if the process can be read.
    pub fn memory(&self) -> Option<Memory> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).ok()?;
        let field = |name: &str| -> Option<u64> {
            let line = status.lines().find(|l| l.starts_with(name))?;
            line.split_whitespace().nth(1)?.parse().ok()
        };
        Some(Memory {
            rss_kib: field("VmRSS:")?,
            hwm_kib: field("VmHWM:")?,
        })
    }

    /// The last counter line the server printed (it prints one a second).
    pub fn last_stats(&self) -> String {
        self.last_line.lock().map(|l| l.clone()).unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// "metrics on http://ADDR/metrics (...)" → ADDR.
/// The address in the banner, `smt server on ADDR (...`.
fn listen_address(banner: &str) -> Option<SocketAddr> {
    let rest = banner.strip_prefix("smt server on ")?;
    rest.split_once(' ')?.0.parse().ok()
}

fn metrics_address(line: &str) -> Option<SocketAddr> {
    let rest = line.strip_prefix("metrics on http://")?;
    rest.split_once("/metrics")?.0.parse().ok()
}

/// Reads the server's stdout until it closes: the first two lines (banner,
/// metrics address) go to the returned channel, every line to `last` (the
/// pipe must keep draining or the server would block on its once-a-second
/// report).
fn drain_output(
    stdout: std::process::ChildStdout,
    last: Arc<Mutex<String>>,
) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for (n, line) in BufReader::new(stdout).lines().enumerate() {
            let Ok(line) = line else { break };
            if n < 2 {
                let _ = tx.send(line.clone());
            }
            if let Ok(mut slot) = last.lock() {
                *slot = line;
            }
        }
    });
    rx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_read_from_the_servers_first_lines() {
        let banner = "smt server on 127.0.0.1:40123 (gso, gro), PSK, 1 threads";
        assert_eq!(
            listen_address(banner),
            Some("127.0.0.1:40123".parse().unwrap())
        );
        assert_eq!(
            listen_address("smt server on [::1]:7 (udp), PSK"),
            Some("[::1]:7".parse().unwrap())
        );
        assert_eq!(listen_address("something else"), None);
        assert_eq!(
            metrics_address("metrics on http://127.0.0.1:9/metrics (Prometheus)"),
            Some("127.0.0.1:9".parse().unwrap())
        );
    }
}
