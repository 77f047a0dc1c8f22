//! Running the real `smt` binary from the tests: commands with a time
//! limit, servers that stop with the test, fresh keys and ports.

#![allow(dead_code)] // each test binary uses a part

use std::io::{BufRead, BufReader};
use std::net::UdpSocket;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

pub const BIN: &str = env!("CARGO_BIN_EXE_smt");

/// How long one command may take before the test fails.
const LIMIT: Duration = Duration::from_secs(60);

/// What one run of `smt` did.
#[derive(Debug)]
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `smt ARGS` (without `SMT_PSK` from the environment) to its end,
/// failing the test if it takes more than [`LIMIT`].
pub fn smt(args: &[&str]) -> Run {
    let child = Command::new(BIN)
        .args(args)
        .env_remove("SMT_PSK")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn smt");
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out: Output = match rx.recv_timeout(LIMIT) {
        Ok(out) => out.expect("wait for smt"),
        Err(_) => {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            panic!("smt {args:?} ran for more than {LIMIT:?}");
        }
    };
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs `smt ARGS`, which must succeed; returns its stdout.
pub fn smt_ok(args: &[&str]) -> String {
    let run = smt(args);
    assert_eq!(run.code, Some(0), "smt {args:?}: {}", run.stderr);
    run.stdout
}

/// A new pre-shared key from `smt keygen`.
pub fn psk() -> String {
    smt_ok(&["keygen"]).trim().to_string()
}

/// Where [`start_server`] listens when any port will do: the kernel picks
/// one and the banner says which, so no other test can take it between a
/// probe and the bind.
pub const ANY_PORT: &str = "127.0.0.1:0";

/// A loopback address whose UDP port was free a moment ago: for addresses
/// nothing binds (a dead peer) or that a test binds itself. Servers take
/// [`ANY_PORT`] instead.
pub fn free_addr() -> String {
    let socket = UdpSocket::bind("127.0.0.1:0").expect("bind a probe socket");
    socket.local_addr().expect("probe address").to_string()
}

/// A fresh, empty directory for one test's files.
pub fn temp_dir(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("smt-cli-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create the test directory");
    dir
}

/// An `smt server` process, killed when dropped.
pub struct Server {
    pub child: Child,
    pub addr: String,
    /// Its first line: the banner.
    pub banner: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `smt server --listen ADDR ARGS` (for at most 30 s unless ARGS
/// give a `--duration`) and returns once it printed its banner: it is
/// listening then. With port 0 (see [`ANY_PORT`]) `addr` of the result is
/// the address the banner names.
pub fn start_server(addr: &str, args: &[&str]) -> Server {
    let limit: &[&str] = if args.contains(&"--duration") {
        &[]
    } else {
        &["--duration", "30"]
    };
    let mut child = Command::new(BIN)
        .args(["server", "--listen", addr])
        .args(limit)
        .args(args)
        .env_remove("SMT_PSK")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn smt server");
    let stdout = child.stdout.take().expect("server stdout");
    let mut lines = BufReader::new(stdout).lines();
    let banner = match lines.next() {
        Some(Ok(line)) => line,
        other => panic!("smt server {args:?} did not start: {other:?}"),
    };
    // Keeps the pipe drained, so a server printing counters never blocks.
    std::thread::spawn(move || lines.for_each(drop));
    let addr = match addr.strip_suffix(":0") {
        Some(_) => banner_addr(&banner, "smt server on "),
        None => addr.to_string(),
    };
    Server {
        child,
        addr,
        banner,
    }
}

/// The address that follows `after` in a banner (up to the next space).
pub fn banner_addr(banner: &str, after: &str) -> String {
    let start = banner
        .find(after)
        .unwrap_or_else(|| panic!("no {after:?} in the banner {banner:?}"))
        + after.len();
    let rest = &banner[start..];
    rest[..rest.find(' ').unwrap_or(rest.len())].to_string()
}

/// Files of a CA and one server certificate, made by `smt ca init` and
/// `smt cert issue`.
pub struct Pki {
    /// The CA directory (`--ca` of `smt cert issue`).
    pub ca: String,
    /// The CA certificate (`--ca` of servers and clients).
    pub ca_pem: String,
    pub cert: String,
    pub key: String,
}

/// A CA in `dir/ca` and a server certificate `dir/server.pem` for `names`.
pub fn make_pki(dir: &std::path::Path, names: &[&str]) -> Pki {
    let d = dir.to_str().expect("a UTF-8 temporary directory");
    let (ca, out) = (format!("{d}/ca"), format!("{d}/server"));
    smt_ok(&["ca", "init", "--dir", &ca]);
    let mut issue = vec!["cert", "issue", "--ca", &ca, "--out", &out];
    for name in names {
        issue.extend_from_slice(&["--name", name]);
    }
    smt_ok(&issue);
    Pki {
        ca_pem: format!("{ca}/ca.pem"),
        ca,
        cert: format!("{out}.pem"),
        key: format!("{out}-key.pem"),
    }
}
