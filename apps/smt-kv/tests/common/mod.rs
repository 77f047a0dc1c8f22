//! Shared test helpers: our server, the real redis-server (installed on
//! demand, as scripts/test.sh does), and raw exchanges over TCP.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use smt_kv::server::{RunningServer, ServerConfig};

/// Our server on 127.0.0.1 with all three front ends, and its CA.
pub fn kv_server() -> (RunningServer, String) {
    kv_server_with(|_| {})
}

/// As [`kv_server`], with the configuration adjusted first.
pub fn kv_server_with(adjust: impl FnOnce(&mut ServerConfig)) -> (RunningServer, String) {
    let mut config = ServerConfig::ephemeral(IpAddr::V4(Ipv4Addr::LOCALHOST)).unwrap();
    adjust(&mut config);
    let ca = config.identity.ca_pem.clone().unwrap();
    (RunningServer::start(config).unwrap(), ca)
}

/// Whether `program` is on PATH.
pub fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path)
            .map(|dir: PathBuf| dir.join(program))
            .any(|p| p.is_file())
    })
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
}

/// Whether redis-server and redis-benchmark can run: found on PATH, or
/// installed through `scripts/redis-test.sh --install` when root with
/// apt-get. Prints SKIPPED when not.
pub fn redis_available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    let available = *AVAILABLE.get_or_init(find_or_install_redis);
    if !available {
        println!("SKIPPED: redis-server/redis-benchmark are not installed (run scripts/redis-test.sh --install as root)");
    }
    available
}

fn find_or_install_redis() -> bool {
    let found = || on_path("redis-server") && on_path("redis-benchmark");
    if found() {
        return true;
    }
    if is_root() && on_path("apt-get") {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/redis-test.sh");
        match Command::new("bash").arg(&script).arg("--install").status() {
            Ok(status) if status.success() && found() => return true,
            result => eprintln!("installing redis failed: {result:?}"),
        }
    }
    false
}

/// A real redis-server on a free port, configured as smt-kv behaves: no
/// persistence, one database. Killed when dropped.
pub struct RealRedis {
    child: Child,
    pub addr: SocketAddr,
}

impl RealRedis {
    pub fn start(extra: &[&str]) -> Self {
        // `free_port` releases the port before redis-server binds it, so
        // another test may take it meanwhile: then redis-server exits, and
        // the probe below could even reach the other test's listener. A
        // server counts as started only if it still runs once its port
        // answers; otherwise a new port is tried.
        for _ in 0..5 {
            if let Some(started) = Self::try_start(free_port(), extra) {
                return started;
            }
        }
        panic!("redis-server did not start on any of 5 free ports");
    }

    fn try_start(port: u16, extra: &[&str]) -> Option<Self> {
        let mut args: Vec<String> = [
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--databases",
            "1",
            "--protected-mode",
            "no",
            "--daemonize",
            "no",
            "--logfile",
            "",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        let mut child = Command::new("redis-server")
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server starts");
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if child.try_wait().expect("redis-server's status").is_some() {
                return None; // it exited: the port was taken
            }
            if TcpStream::connect(addr).is_ok() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "redis-server did not start on {addr}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // The answer may have come from another listener on the port if
        // redis-server was just failing to bind it: still running?
        std::thread::sleep(Duration::from_millis(50));
        if child.try_wait().expect("redis-server's status").is_some() {
            return None;
        }
        Some(Self { child, addr })
    }
}

impl Drop for RealRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `ECHO` with a marker, sent after a case so that its end is seen.
const SENTINEL: &[u8] = b"*2\r\n$4\r\nECHO\r\n$15\r\n--end-of-case--\r\n";
const SENTINEL_REPLY: &[u8] = b"$15\r\n--end-of-case--\r\n";

/// What a connection got back for some input.
#[derive(Debug, PartialEq, Eq)]
pub struct Exchange {
    pub reply: Vec<u8>,
    /// The server closed the connection.
    pub closed: bool,
}

/// Sends `input` on a fresh connection, then (with `sentinel`) a marker
/// command, and reads until the marker's reply or the server closes.
/// Without the marker, reads until the server closes.
pub fn exchange(addr: SocketAddr, input: &[u8], sentinel: bool) -> Exchange {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(input).unwrap();
    if sentinel {
        s.write_all(SENTINEL).unwrap();
    }
    let mut reply = Vec::new();
    let mut buf = [0u8; 64 * 1024];
    loop {
        if sentinel && reply.ends_with(SENTINEL_REPLY) {
            reply.truncate(reply.len() - SENTINEL_REPLY.len());
            return Exchange {
                reply,
                closed: false,
            };
        }
        match s.read(&mut buf) {
            Ok(0) => {
                return Exchange {
                    reply,
                    closed: true,
                }
            }
            Ok(n) => reply.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                return Exchange {
                    reply,
                    closed: true,
                }
            }
            Err(e) => panic!(
                "no end to the reply after {} bytes: {e}: {:?}",
                reply.len(),
                show(&reply)
            ),
        }
    }
}

/// Bytes as readable text: printable ASCII as is, the rest escaped.
pub fn show(bytes: &[u8]) -> String {
    bytes.escape_ascii().to_string()
}
