//! The `smt-kv` binary: `certs` (private key 0600, no silent overwrite),
//! `cli --server HOST:PORT` over each front end, and `serve` with a
//! password from the environment.

use crate::common;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

use common::{kv_server, kv_server_with};

const BIN: &str = env!("CARGO_BIN_EXE_smt-kv");

fn smt_kv(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env_remove("SMT_KV_PASSWORD")
        .env_remove("SMT_KV_REQUIREPASS")
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "status {}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn certs_writes_a_private_key_and_keeps_existing_files() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("certs");
    let d_str = d.to_str().unwrap();
    let out = smt_kv(&["certs", "--dir", d_str]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(mode(&d.join("server-key.pem")), 0o600);
    assert_eq!(
        mode(&d.join("ca.pem")) & 0o022,
        0,
        "certificates are not writable by others"
    );
    let key = std::fs::read(d.join("server-key.pem")).unwrap();
    let ca = std::fs::read(d.join("ca.pem")).unwrap();

    let again = smt_kv(&["certs", "--dir", d_str]);
    assert!(!again.status.success(), "{}", text(&again));
    let said = String::from_utf8_lossy(&again.stderr);
    assert!(
        said.contains("already exists") && said.contains("--force"),
        "{said}"
    );
    assert_eq!(std::fs::read(d.join("server-key.pem")).unwrap(), key);
    assert_eq!(std::fs::read(d.join("ca.pem")).unwrap(), ca);

    // Even over a key someone made readable, --force leaves a private one.
    std::fs::set_permissions(d.join("server-key.pem"), PermissionsExt::from_mode(0o644)).unwrap();
    let forced = smt_kv(&["certs", "--dir", d_str, "--force"]);
    assert!(forced.status.success(), "{}", text(&forced));
    assert_ne!(std::fs::read(d.join("server-key.pem")).unwrap(), key);
    assert_eq!(mode(&d.join("server-key.pem")), 0o600);
    let leftovers: Vec<_> = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn cli_reaches_every_front_end_by_host_name() {
    let (server, ca) = kv_server();
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, &ca).unwrap();
    let ca_file = ca_file.to_str().unwrap();
    let front_ends = [
        ("tcp", server.tcp.unwrap()),
        ("tls", server.tls.unwrap()),
        ("smt", server.smt.unwrap()),
    ];
    for (transport, addr) in front_ends {
        let target = format!("localhost:{}", addr.port());
        let value = format!("via-{transport}");
        let set = [
            "cli",
            "--server",
            &target,
            "--transport",
            transport,
            "--ca",
            ca_file,
        ];
        let out = smt_kv(&[&set[..], &["SET", transport, &value]].concat());
        assert!(out.status.success(), "{transport}: {}", text(&out));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "OK\n");
        let out = smt_kv(&[&set[..], &["GET", transport]].concat());
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            format!("{value:?}\n"),
            "{}",
            text(&out)
        );
    }
    let bad = smt_kv(&["cli", "--server", "localhost", "PING"]);
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("HOST:PORT"),
        "{}",
        text(&bad)
    );
}

#[test]
fn cli_sends_the_password_from_a_flag_or_the_environment() {
    let (server, ca) = kv_server_with(|c| {
        c.requirepass = Some(smt_kv::cmd::Password::new(b"sesame".to_vec()));
    });
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, &ca).unwrap();
    for (transport, addr) in [("tcp", server.tcp.unwrap()), ("smt", server.smt.unwrap())] {
        let base = [
            "cli",
            "--server",
            &addr.to_string(),
            "--transport",
            transport,
            "--ca",
            ca_file.to_str().unwrap(),
        ]
        .map(String::from);
        let refused = smt_kv(&[&base.each_ref().map(String::as_str)[..], &["PING"]].concat());
        assert!(
            String::from_utf8_lossy(&refused.stdout).contains("NOAUTH"),
            "{}",
            text(&refused)
        );
        let with_flag = smt_kv(
            &[
                &base.each_ref().map(String::as_str)[..],
                &["-a", "sesame", "PING"],
            ]
            .concat(),
        );
        assert_eq!(
            String::from_utf8_lossy(&with_flag.stdout),
            "PONG\n",
            "{}",
            text(&with_flag)
        );
        let with_env = Command::new(BIN)
            .args(&base)
            .arg("PING")
            .env("SMT_KV_PASSWORD", "sesame")
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&with_env.stdout),
            "PONG\n",
            "{}",
            text(&with_env)
        );
    }
}

/// `serve` in a child process; killed when dropped.
struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn serve_takes_its_password_from_the_environment() {
    let mut child = Command::new(BIN)
        .args(["serve", "--tcp", "127.0.0.1:0", "--smt", "127.0.0.1:0"])
        .env("SMT_KV_REQUIREPASS", "from-env")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let _serve = Serve(child);
    let mut lines = BufReader::new(stderr).lines();
    let tcp = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|l| l.strip_prefix("smt-kv: tcp on ").map(str::to_owned))
        .expect("serve says where it listens");
    let out = smt_kv(&["cli", "--server", &tcp, "GET", "k"]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("NOAUTH"),
        "{}",
        text(&out)
    );
    let out = smt_kv(&["cli", "--server", &tcp, "-a", "from-env", "GET", "k"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "(nil)\n",
        "{}",
        text(&out)
    );
}
