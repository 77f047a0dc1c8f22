//! The C programs, built with the system's C compiler (`cc`) against the
//! library cargo just built: the example server and client talk over PSK,
//! TLS 1.3 and 0-RTT, and `tests/c/errors.c` walks the error paths. Without
//! a C compiler each test prints SKIPPED and passes.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime};

const PSK: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

/// How long a C program may run before the test gives up on it.
const LIMIT: Duration = Duration::from_secs(60);

#[test]
fn c_client_and_server_talk_over_a_psk() {
    let Some(c) = Compiler::find() else { return };
    let out = c.run_pair(&["--psk", PSK], |addr| {
        vec![addr.into(), "--psk".into(), PSK.into()]
    });
    assert!(out.contains("call 1: \"HELLO\" from 127.0.0.1:"), "{out}");
    assert!(out.contains("100000 bytes from"), "{out}");
    assert!(out.contains("all 4 responses right"), "{out}");
}

#[test]
fn c_client_and_server_talk_over_tls_with_the_server_called_by_name() {
    let Some(c) = Compiler::find() else { return };
    let pki = Pki::new(c.dir());
    let server_args = ["--cert", &pki.cert, "--key", &pki.key];
    let out = c.run_pair(&server_args, |addr| {
        // By name: the client looks "localhost" up and checks it in the
        // server's certificate.
        let port = addr.rsplit_once(':').unwrap().1;
        vec![format!("localhost:{port}"), "--ca".into(), pki.ca.clone()]
    });
    assert!(out.contains("all 4 responses right"), "{out}");
}

#[test]
fn c_client_presents_its_certificate_to_a_server_that_requires_one() {
    let Some(c) = Compiler::find() else { return };
    let pki = Pki::new(c.dir());
    let server_args = [
        "--cert",
        &pki.cert,
        "--key",
        &pki.key,
        "--client-ca",
        &pki.ca,
    ];
    let out = c.run_pair(&server_args, |addr| {
        let args = [
            "--ca",
            &pki.ca,
            "--cert",
            &pki.client_cert,
            "--key",
            &pki.client_key,
        ];
        std::iter::once(addr.to_string())
            .chain(args.iter().map(|s| s.to_string()))
            .collect()
    });
    assert!(out.contains("all 4 responses right"), "{out}");
}

#[test]
fn c_client_without_a_certificate_hears_that_the_server_ended_the_session() {
    let Some(c) = Compiler::find() else { return };
    let pki = Pki::new(c.dir());
    let (server, client) = (
        c.build("examples/server.c", &[]),
        c.build("examples/client.c", &[]),
    );
    let server_args = [
        "--cert",
        &pki.cert,
        "--key",
        &pki.key,
        "--client-ca",
        &pki.ca,
    ];
    let (mut server, addr, _) = start_server(&server, &server_args);
    let out = finish(
        Command::new(client)
            .args([&addr, "--ca", &pki.ca])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let _ = server.kill();
    let _ = server.wait();
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("client's stderr:\n{stderr}");
    assert!(
        !out.status.success(),
        "the client succeeded without a certificate"
    );
    // TLS 1.3 lets the client finish its handshake before the server
    // checks the certificate: the server then ends the session, and each
    // call is reported failed (SMT_MSG_FAILED) with SMT_ERR_SESSION_CLOSED.
    assert!(
        stderr.contains("kind 3") && stderr.contains("the peer ended the session"),
        "{stderr}"
    );
}

#[test]
fn c_client_sends_its_first_request_with_a_zero_rtt_ticket() {
    let Some(c) = Compiler::find() else { return };
    let pki = Pki::new(c.dir());
    let (ticket, static_key) = pki.ticket(c.dir());
    let server_args = ["--ticket-key", &static_key, "--ticket", &ticket];
    let out = c.run_pair(&server_args, |addr| {
        // A new 0-RTT server refuses hellos stamped within the clock-skew
        // bound (100 ms) of its start.
        std::thread::sleep(Duration::from_millis(250));
        let args = [
            "--ticket",
            &ticket,
            "--ca",
            &pki.ca,
            "--name",
            "localhost",
            "--fs",
        ];
        std::iter::once(addr.to_string())
            .chain(args.iter().map(|s| s.to_string()))
            .collect()
    });
    assert!(out.contains("all 4 responses right"), "{out}");
}

#[test]
fn c_error_paths_return_their_codes_and_never_crash() {
    let Some(c) = Compiler::find() else { return };
    let errors = c.build("tests/c/errors.c", &["-pthread"]);
    let dir = c.dir().to_str().unwrap().to_owned();
    let out = finish(
        Command::new(errors)
            .arg(dir)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    println!("{text}");
    assert!(out.status.success(), "errors.c failed:\n{text}");
    let last = text.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("errors.c: ") && last.ends_with(" passed, 0 failed"),
        "{last}"
    );
}

#[test]
fn the_header_compiles_as_pedantic_c99_and_as_cxx() {
    let Some(c) = Compiler::find() else { return };
    let source = c.dir().join("header.c");
    std::fs::write(
        &source,
        "#include <string.h>\n#include <smt.h>\nint main(void) { smt_msg m; memset(&m, 0, sizeof m); smt_msg_release(&m); return 0; }\n",
    )
    .unwrap();
    let mut compilers = vec![("cc", vec!["-std=c99"])];
    if Command::new("c++")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        compilers.push(("c++", vec!["-x", "c++", "-std=c++11"]));
    } else {
        println!("SKIPPED (C++ only): no c++ on this machine");
    }
    for (compiler, flags) in compilers {
        let out = Command::new(compiler)
            .args(flags)
            .args([
                "-pedantic",
                "-Wall",
                "-Wextra",
                "-Werror",
                "-fsyntax-only",
                "-I",
            ])
            .arg(&c.include)
            .arg(&source)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{compiler}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn installed_library_is_found_by_pkg_config_and_links_statically_too() {
    let Some(c) = Compiler::find() else { return };
    if !Command::new("pkg-config")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        println!("SKIPPED: no pkg-config on this machine");
        return;
    }
    let prefix = c.dir().join("prefix");
    let install = Path::new(env!("CARGO_MANIFEST_DIR")).join("install.sh");
    let status = Command::new("bash")
        .arg(install)
        .arg("--prefix")
        .arg(&prefix)
        .arg("--from")
        .arg(&c.lib_dir)
        .status()
        .unwrap();
    assert!(status.success(), "install.sh failed");
    let pkg_config = |args: &[&str]| -> Vec<String> {
        let out = Command::new("pkg-config")
            .args(args)
            .arg("smt")
            .env("PKG_CONFIG_PATH", prefix.join("lib/pkgconfig"))
            .output()
            .unwrap();
        assert!(out.status.success(), "pkg-config {args:?} smt failed");
        let text = String::from_utf8(out.stdout).unwrap();
        text.split_whitespace().map(str::to_owned).collect()
    };
    assert_eq!(pkg_config(&["--modversion"]), [env!("CARGO_PKG_VERSION")]);
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    // The server with the flags pkg-config gives (shared library)...
    let server = c.dir().join("server-pc");
    let rpath = format!("-Wl,-rpath,{}", prefix.join("lib").display());
    let mut args = pkg_config(&["--cflags", "--libs"]);
    args.push(rpath);
    cc(&examples.join("server.c"), &server, &args);
    // ... and the client linked with the static library.
    let client = c.dir().join("client-static");
    let archive = prefix.join("lib/libsmt.a").display().to_string();
    let mut args = pkg_config(&["--cflags"]);
    args.extend(pkg_config(&["--static", "--libs"]).into_iter().map(|a| {
        if a == "-lsmt" {
            archive.clone()
        } else {
            a
        }
    }));
    cc(&examples.join("client.c"), &client, &args);
    let out = run_pair(&server, &["--psk", PSK], &client, |addr| {
        vec![addr.into(), "--psk".into(), PSK.into()]
    });
    assert!(out.contains("all 4 responses right"), "{out}");
}

fn cc(source: &Path, exe: &Path, args: &[String]) {
    let out = Command::new("cc")
        .arg(source)
        .arg("-o")
        .arg(exe)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cc {} {args:?} failed:\n{}",
        source.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The C compiler, the library's directory and a scratch directory.
struct Compiler {
    lib_dir: PathBuf,
    include: PathBuf,
    tmp: tempfile::TempDir,
}

impl Compiler {
    /// `None` (after printing SKIPPED) when there is no `cc`.
    fn find() -> Option<Self> {
        let found = Command::new("cc").arg("--version").output();
        if !found.is_ok_and(|o| o.status.success()) {
            println!("SKIPPED: no C compiler (cc) on this machine");
            return None;
        }
        let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
        Some(Self {
            lib_dir: library_dir(),
            include: crate_dir.join("include"),
            tmp: tempfile::tempdir().unwrap(),
        })
    }

    fn dir(&self) -> &Path {
        self.tmp.path()
    }

    /// Compiles `source` (relative to the crate) into the scratch
    /// directory, linked to the shared library (found again at run time
    /// through the rpath).
    fn build(&self, source: &str, extra: &[&str]) -> PathBuf {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(source);
        let exe = self.dir().join(src.file_stem().unwrap());
        let out = Command::new("cc")
            .args(["-Wall", "-Wextra", "-Werror", "-O1"])
            .arg("-I")
            .arg(&self.include)
            .arg(&src)
            .arg("-o")
            .arg(&exe)
            .arg("-L")
            .arg(&self.lib_dir)
            .arg(format!("-Wl,-rpath,{}", self.lib_dir.display()))
            .arg("-lsmt")
            .args(extra)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "cc {source} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        exe
    }

    /// Runs the example server with `server_args`, then the example client
    /// with the arguments `client_args` makes from the server's address.
    fn run_pair(
        &self,
        server_args: &[&str],
        client_args: impl FnOnce(&str) -> Vec<String>,
    ) -> String {
        let server = self.build("examples/server.c", &[]);
        let client = self.build("examples/client.c", &[]);
        run_pair(&server, server_args, &client, client_args)
    }
}

/// Runs `server` with `server_args`, then `client` with the arguments
/// `client_args` makes from the server's address; returns what the client
/// printed, once both have exited cleanly.
fn run_pair(
    server: &Path,
    server_args: &[&str],
    client: &Path,
    client_args: impl FnOnce(&str) -> Vec<String>,
) -> String {
    let (mut server, addr, lines) = start_server(server, server_args);
    let client = Command::new(client)
        .args(client_args(&addr))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let client = finish(client);
    let out = String::from_utf8_lossy(&client.stdout).into_owned();
    println!("client:\n{out}");
    if !client.status.success() {
        let _ = server.kill();
        panic!("the client failed ({}):\n{out}", client.status);
    }
    let server = finish(server);
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(server.status.success(), "the server failed: {rest:?}");
    assert_eq!(rest, ["served 4 requests"]);
    out
}

/// Starts `server` on a free port of 127.0.0.1 and returns it, its
/// address (from its banner) and the rest of its output.
fn start_server(
    server: &Path,
    server_args: &[&str],
) -> (Child, String, std::io::Lines<BufReader<ChildStdout>>) {
    let mut server = Command::new(server)
        .arg("127.0.0.1:0")
        .args(server_args)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(server.stdout.take().unwrap()).lines();
    let banner = lines.next().and_then(Result::ok).unwrap_or_default();
    let Some(addr) = banner.strip_prefix("listening on ") else {
        let _ = server.kill();
        panic!("the server did not start: {banner:?}");
    };
    (server, addr.to_owned(), lines)
}

/// Waits for `child` at most [`LIMIT`], killing it past that.
fn finish(mut child: Child) -> Output {
    let end = Instant::now() + LIMIT;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > end {
            let _ = child.kill();
            panic!("a C program ran for more than {LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// Builds the library and returns the directory of `libsmt.so`. Cargo
/// does not build a `cdylib` for a crate's integration tests (they cannot
/// link it), so the tests build it themselves, once per run, with the test
/// profile that is already compiled: a no-op when it is fresh. Under
/// `cargo test --workspace` the workspace's other members turn on more
/// features of some dependencies (smt's `dns`, smt-proto's `sim`, memchr,
/// once_cell...) than `-p smt-c` alone does, so the first such run
/// compiles those crates once more for the library (about a third of its
/// dependency tree, not AWS-LC); later runs find them fresh.
fn library_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
        let out = Command::new(env!("CARGO"))
            .args([
                "build",
                "--profile",
                "test",
                "--message-format",
                "json-render-diagnostics",
            ])
            .arg("--manifest-path")
            .arg(&manifest)
            .stderr(Stdio::inherit())
            .output()
            .unwrap();
        assert!(out.status.success(), "cargo build of libsmt failed");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let library = stdout
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .filter(|m| m["reason"] == "compiler-artifact")
            .flat_map(|m| m["filenames"].as_array().cloned().unwrap_or_default())
            .filter_map(|f| f.as_str().map(PathBuf::from))
            .find(|f| f.file_name().is_some_and(|n| n == "libsmt.so"))
            .expect("cargo built no libsmt.so");
        library.parent().unwrap().to_path_buf()
    })
    .clone()
}

/// A CA, a server certificate for localhost and 127.0.0.1, and a client
/// certificate, as files.
struct Pki {
    ca: String,
    cert: String,
    key: String,
    client_cert: String,
    client_key: String,
    issued: smt_tls::certs::IssuedCert,
}

impl Pki {
    fn new(dir: &Path) -> Self {
        let ca = smt_tls::certs::Ca::generate("libsmt test CA").unwrap();
        let issued = ca.issue(&["localhost", "127.0.0.1"], false).unwrap();
        let client = ca.issue(&["libsmt-test-client"], true).unwrap();
        let write = |name: &str, text: &str| {
            let path = dir.join(name);
            std::fs::write(&path, text).unwrap();
            path.to_str().unwrap().to_owned()
        };
        Self {
            ca: write("ca.pem", ca.cert_pem()),
            cert: write("server.pem", &issued.chain_pem()),
            key: write("server-key.pem", &issued.key_pem()),
            client_cert: write("client.pem", &client.chain_pem()),
            client_key: write("client-key.pem", &client.key_pem()),
            issued,
        }
    }

    /// A 0-RTT ticket for "localhost" and its static key, as `smt ticket
    /// issue` writes them (base64; hex).
    fn ticket(&self, dir: &Path) -> (String, String) {
        use smt::ticket::{StaticKey, Ticket};
        let key = StaticKey::generate();
        let ticket = Ticket::issue(
            &key,
            &self.issued.chain_der(),
            self.issued.key_der(),
            "localhost",
            SystemTime::now(),
            Duration::from_secs(600),
        )
        .unwrap();
        let (t, k) = (dir.join("smt-ticket"), dir.join("smt-ticket-static.key"));
        std::fs::write(&t, ticket.to_base64()).unwrap();
        std::fs::write(&k, hex::encode(key.to_bytes())).unwrap();
        (t.to_str().unwrap().into(), k.to_str().unwrap().into())
    }
}
