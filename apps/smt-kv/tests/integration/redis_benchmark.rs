//! Debian's `redis-benchmark` against smt-kv's TCP and TLS front ends:
//! its whole default suite (strings, lists, sets, sorted sets, hashes,
//! LRANGE, MSET: whatever the installed version runs), without and with
//! pipelining (`-P 16`, random keys), must complete every test with no
//! error; the tests it runs are those it runs against redis-server, and
//! after the same run the data left behind is the same as redis-server's.
//! With `-a`, against a server with a password, too. Throughput is
//! printed, never asserted (the figures are in docs/apps.md).
//!
//! Without redis-benchmark the test prints SKIPPED and passes (see
//! scripts/redis-test.sh).

use crate::common;

use std::io::Read;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{kv_server, kv_server_with, redis_available, RealRedis};
use smt_kv::client::{Client, Transport};

/// Runs redis-benchmark with `args`, killing it if it hangs; whether it
/// succeeded, its stdout and stderr.
fn redis_benchmark(args: &[String]) -> (bool, String, String) {
    let mut child = Command::new("redis-benchmark")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("redis-benchmark starts");
    // Generous: the machine is shared, and LRANGE_600 is slow on it.
    let deadline = Instant::now() + Duration::from_secs(300);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (mut out, mut err) = (String::new(), String::new());
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (status.is_some_and(|s| s.success()), out, err)
}

/// The suite's settings for one pipeline depth.
fn suite(pipeline: &str) -> Vec<String> {
    let mut args = vec!["-c", "8", "-P", pipeline, "--csv"];
    if pipeline == "1" {
        args.extend(["-n", "1000"]);
    } else {
        args.extend(["-n", "4000", "-r", "1000"]);
    }
    args.into_iter().map(String::from).collect()
}

fn host(addr: SocketAddr) -> Vec<String> {
    vec![
        "-h".into(),
        addr.ip().to_string(),
        "-p".into(),
        addr.port().to_string(),
    ]
}

/// Runs the default suite; the names of the tests that reported.
fn run(name: &str, target: &[String], pipeline: &str) -> Vec<String> {
    let args = [target, &suite(pipeline)].concat();
    let (ok, out, err) = redis_benchmark(&args);
    let context = format!("{name} -P {pipeline}:\nstdout: {out}\nstderr: {err}");
    assert!(ok, "redis-benchmark failed or hung: {context}");
    for bad in ["ERR", "Error", "WARNING", "NOAUTH", "WRONGTYPE"] {
        assert!(
            !out.contains(bad) && !err.contains(bad),
            "{bad:?} in the output: {context}"
        );
    }
    let mut tests = Vec::new();
    for line in out.lines().skip(1) {
        let test = line.split('"').nth(1).unwrap_or_default().to_owned();
        println!("{name:<14} -P {pipeline:<2} {line}");
        tests.push(test);
    }
    tests
}

/// What the suite leaves behind, read the same way from both servers.
fn leftovers(addr: SocketAddr, password: Option<&[u8]>) -> Vec<String> {
    let mut c = Client::connect(Transport::Tcp, addr, "").unwrap();
    let probes: [&[&[u8]]; 9] = [
        &[b"DBSIZE"],
        &[b"LLEN", b"mylist"],
        &[b"LRANGE", b"mylist", b"0", b"2"],
        &[b"SCARD", b"myset"],
        &[b"ZCARD", b"myzset"],
        &[b"HLEN", b"myhash"],
        &[b"GET", b"key:__rand_int__"],
        &[b"GET", b"counter:__rand_int__"],
        &[b"TYPE", b"mylist"],
    ];
    probes
        .iter()
        .map(|probe| {
            let reply = match password {
                Some(p) => c.call_authenticated(p, probe),
                None => c.call(probe),
            };
            format!("{:?}", reply.unwrap())
        })
        .collect()
}

#[test]
fn the_default_suite_completes_over_tcp_and_tls_as_against_redis_server() {
    if !redis_available() {
        return;
    }
    let (server, ca) = kv_server();
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, ca).unwrap();
    let mut tls = host(server.tls.unwrap());
    tls.extend(
        ["--tls", "--cacert", &ca_file.display().to_string()]
            .iter()
            .map(|s| s.to_string()),
    );
    for pipeline in ["1", "16"] {
        let redis = RealRedis::start(&[]);
        let want = run("redis-server", &host(redis.addr), pipeline);
        assert!(want.len() >= 16, "the default suite: {want:?}");
        let mut ours = Client::connect(Transport::Tcp, server.tcp.unwrap(), "").unwrap();
        ours.call(&[b"FLUSHALL"]).unwrap();
        assert_eq!(
            run("smt-kv TCP", &host(server.tcp.unwrap()), pipeline),
            want
        );
        if pipeline == "1" {
            // Pipelined runs may overshoot -n; unpipelined ones send
            // exactly the same commands to both.
            assert_eq!(
                leftovers(server.tcp.unwrap(), None),
                leftovers(redis.addr, None)
            );
        }
        assert_eq!(run("smt-kv TLS", &tls, pipeline), want);
    }
}

#[test]
fn the_suite_authenticates_with_a_password() {
    if !redis_available() {
        return;
    }
    let (server, _ca) = kv_server_with(|c| {
        c.requirepass = Some(smt_kv::cmd::Password::new(b"s3cret".to_vec()));
    });
    let mut target = host(server.tcp.unwrap());
    target.extend([
        "-a".into(),
        "s3cret".into(),
        "-t".into(),
        "set,get,lpush".into(),
    ]);
    let tests = run("smt-kv -a", &target, "1");
    assert_eq!(tests, ["SET", "GET", "LPUSH"]);
    // Without the password nothing but an error comes back.
    let (_, out, err) = redis_benchmark(
        &[
            host(server.tcp.unwrap()),
            ["-t", "set", "-n", "10", "--csv"]
                .map(String::from)
                .to_vec(),
        ]
        .concat(),
    );
    assert!(
        format!("{out}{err}").contains("NOAUTH"),
        "stdout: {out}\nstderr: {err}"
    );
    assert_eq!(
        leftovers(server.tcp.unwrap(), Some(b"s3cret"))[0],
        "Integer(2)"
    );
}
