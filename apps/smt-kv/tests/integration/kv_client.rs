//! `KvClient`, the Rust client over SMT: the `redis` crate's typed
//! commands, pipelines and errors work on it as on a `redis::Connection`,
//! and give the same results over SMT to smt-kv as a `redis::Connection`
//! over TCP to Debian's redis-server.

use crate::common;

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use common::{kv_server, kv_server_with, redis_available, RealRedis};
use smt_kv::kv_client::KvClient;
use smt_kv::redis::{self, Commands, ConnectionLike, RedisResult};

fn client(server: &smt_kv::server::RunningServer, ca: &str) -> KvClient {
    KvClient::connect(&server.smt.unwrap().to_string(), ca).unwrap()
}

/// A script of typed commands, as a `redis` crate user writes them; each
/// result printed, to compare two connections.
fn script<C: ConnectionLike>(con: &mut C) -> Vec<String> {
    type R<T> = RedisResult<T>;
    type S = Option<String>;
    let mut out = Vec::new();
    let mut note = |what: &str, r: String| out.push(format!("{what}: {r}"));
    let () = con.set("greeting", "hello").unwrap();
    note("get", format!("{:?}", con.get::<_, S>("greeting")));
    note("get missing", format!("{:?}", con.get::<_, S>("nobody")));
    note("incr", format!("{:?}", con.incr::<_, _, i64>("n", 5)));
    note("decr", format!("{:?}", con.decr::<_, _, i64>("n", 2)));
    let () = con.set_ex("temp", "v", 100).unwrap();
    note("ttl", format!("{:?}", con.ttl::<_, i64>("temp")));
    note("persist", format!("{:?}", con.persist::<_, bool>("temp")));
    note(
        "ttl after persist",
        format!("{:?}", con.ttl::<_, i64>("temp")),
    );
    note("expire", format!("{:?}", con.expire::<_, bool>("temp", 50)));
    note(
        "pexpire",
        format!("{:?}", con.pexpire::<_, bool>("missing", 50)),
    );
    let () = con.mset(&[("a", "1"), ("b", "2")]).unwrap();
    note(
        "mget",
        format!("{:?}", con.mget::<_, Vec<S>>(&["a", "b", "zz"])),
    );
    note("exists", format!("{:?}", con.exists::<_, bool>("a")));
    note("del", format!("{:?}", con.del::<_, i64>(&["a", "b", "zz"])));
    note(
        "lpush",
        format!("{:?}", con.lpush::<_, _, i64>("l", &["x", "y", "z"])),
    );
    note("rpush", format!("{:?}", con.rpush::<_, _, i64>("l", "w")));
    note(
        "lrange",
        format!("{:?}", con.lrange::<_, Vec<String>>("l", 0, -1)),
    );
    note("llen", format!("{:?}", con.llen::<_, i64>("l")));
    note("lpop", format!("{:?}", con.lpop::<_, S>("l", None)));
    let two = std::num::NonZeroUsize::new(2);
    note(
        "rpop 2",
        format!("{:?}", con.rpop::<_, Vec<String>>("l", two)),
    );
    note(
        "sadd",
        format!("{:?}", con.sadd::<_, _, i64>("s", &[3, 1, 2])),
    );
    let members: R<HashSet<String>> = con.smembers("s");
    note("smembers", format!("{:?}", members.map(sorted)));
    note(
        "sismember",
        format!("{:?}", con.sismember::<_, _, bool>("s", 2)),
    );
    note("srem", format!("{:?}", con.srem::<_, _, i64>("s", 2)));
    note("scard", format!("{:?}", con.scard::<_, i64>("s")));
    note(
        "zadd",
        format!("{:?}", con.zadd::<_, _, _, i64>("z", "a", 1.5)),
    );
    note(
        "zadd",
        format!("{:?}", con.zadd::<_, _, _, i64>("z", "b", 0.25)),
    );
    note(
        "zincr",
        format!("{:?}", con.zincr::<_, _, _, f64>("z", "a", 1)),
    );
    note(
        "zscore",
        format!("{:?}", con.zscore::<_, _, Option<f64>>("z", "a")),
    );
    let ranked: R<Vec<(String, f64)>> = con.zrange_withscores("z", 0, -1);
    note("zrange", format!("{ranked:?}"));
    note(
        "zrevrange",
        format!("{:?}", con.zrevrange::<_, Vec<String>>("z", 0, 0)),
    );
    note("zcard", format!("{:?}", con.zcard::<_, i64>("z")));
    note(
        "zpopmin",
        format!("{:?}", con.zpopmin::<_, Vec<String>>("z", 1)),
    );
    note("zrem", format!("{:?}", con.zrem::<_, _, i64>("z", "a")));
    note(
        "hset",
        format!("{:?}", con.hset::<_, _, _, i64>("h", "f", "v")),
    );
    let all: R<HashMap<String, String>> = con.hgetall("h");
    note("hgetall", format!("{all:?}"));
    note("hdel", format!("{:?}", con.hdel::<_, _, i64>("h", "f")));
    note("hlen", format!("{:?}", con.hlen::<_, i64>("h")));
    note("type", format!("{:?}", con.key_type::<_, String>("l")));
    let wrong: R<S> = con.get("l");
    note(
        "wrongtype",
        format!("{:?}", wrong.map_err(|e| e.code().map(str::to_owned))),
    );
    let (a, b): (String, i64) = redis::pipe()
        .cmd("SET")
        .arg("p")
        .arg("1")
        .ignore()
        .cmd("GET")
        .arg("p")
        .cmd("INCR")
        .arg("p")
        .query(con)
        .unwrap();
    note("pipeline", format!("{a} {b}"));
    out
}

fn sorted(set: HashSet<String>) -> Vec<String> {
    let mut v: Vec<String> = set.into_iter().collect();
    v.sort();
    v
}

#[test]
fn typed_commands_over_smt_give_what_redis_server_gives_over_tcp() {
    let (server, ca) = kv_server();
    let mut kv = client(&server, &ca);
    let ours = script(&mut kv);
    for line in &ours {
        println!("{line}");
    }
    assert!(ours.contains(&"get: Ok(Some(\"hello\"))".to_owned()));
    assert!(ours.contains(&"pipeline: 1 2".to_owned()));
    if !redis_available() {
        return;
    }
    let redis = RealRedis::start(&[]);
    let mut con = redis::Client::open(format!("redis://{}/0", redis.addr))
        .unwrap()
        .get_connection()
        .unwrap();
    assert_eq!(ours, script(&mut con));
}

#[test]
fn a_pipeline_is_one_message_and_keeps_each_commands_error() {
    let (server, ca) = kv_server();
    let mut kv = client(&server, &ca);
    let before = server_requests(&mut kv);
    let results: Vec<RedisResult<String>> = redis::pipe()
        .ignore_errors()
        .cmd("SET")
        .arg("k")
        .arg("v")
        .cmd("LPUSH")
        .arg("k")
        .arg("x")
        .cmd("GET")
        .arg("k")
        .query(&mut kv)
        .unwrap();
    assert_eq!(results.len(), 3);
    assert_eq!(results[0].as_deref(), Ok("OK"));
    assert_eq!(results[1].as_ref().unwrap_err().code(), Some("WRONGTYPE"));
    assert_eq!(results[2].as_deref(), Ok("v"));
    assert_eq!(
        server_requests(&mut kv),
        before + 2,
        "one message for the pipeline, one for INFO"
    );
    assert!(kv.check_connection());
    assert!(kv.is_open());
}

/// SMT requests the server has answered (INFO's counter).
fn server_requests(kv: &mut KvClient) -> u64 {
    let info: String = redis::cmd("INFO").arg("stats").query(kv).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("smt_requests_processed:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn clones_share_one_endpoint_across_threads() {
    let (server, ca) = kv_server();
    let kv = client(&server, &ca);
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let mut kv = kv.clone();
            std::thread::spawn(move || {
                for _ in 0..100 {
                    let _: i64 = kv.incr("shared", 1).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut kv = kv;
    assert_eq!(kv.get::<_, i64>("shared").unwrap(), 400);
}

#[test]
fn async_queries_run_on_a_tokio_runtime() {
    let (server, ca) = kv_server();
    let kv = client(&server, &ca);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let () = kv
            .query_async(redis::cmd("SET").arg("k").arg("async"))
            .await
            .unwrap();
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..10 {
            let kv = kv.clone();
            tasks.spawn(async move { kv.query_async::<i64>(redis::cmd("INCR").arg("c")).await });
        }
        let mut counts: Vec<i64> = tasks
            .join_all()
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
        counts.sort_unstable();
        assert_eq!(counts, (1..=10).collect::<Vec<_>>());
        let got: String = kv.query_async(redis::cmd("GET").arg("k")).await.unwrap();
        assert_eq!(got, "async");
        let wrong = kv.query_async::<i64>(redis::cmd("INCR").arg("k")).await;
        assert_eq!(wrong.unwrap_err().code(), Some("ERR"));
    });
}

#[test]
fn a_password_goes_with_every_message() {
    let (server, ca) = kv_server_with(|c| {
        c.requirepass = Some(smt_kv::cmd::Password::new(b"sesame".to_vec()));
    });
    let mut anonymous = client(&server, &ca);
    let refused: RedisResult<()> = anonymous.set("k", "v");
    assert_eq!(refused.unwrap_err().code(), Some("NOAUTH"));
    let mut wrong = client(&server, &ca).with_password("open");
    let refused: RedisResult<Option<String>> = wrong.get("k");
    assert_eq!(refused.unwrap_err().code(), Some("WRONGPASS"));
    let mut kv = client(&server, &ca).with_password("sesame");
    assert!(!format!("{kv:?}").contains("sesame"), "{kv:?}");
    let () = kv.set("k", "v").unwrap();
    assert_eq!(kv.get::<_, String>("k").unwrap(), "v");
    let (a, b): (String, String) = redis::pipe().get("k").get("k").query(&mut kv).unwrap();
    assert_eq!((a.as_str(), b.as_str()), ("v", "v"));
    // The anonymous client is still refused: nothing carried over.
    assert!(anonymous.get::<_, Option<String>>("k").is_err());
}

#[test]
fn a_host_name_is_resolved_and_checked_against_the_certificate() {
    let (server, ca) = kv_server();
    let smt_addr = server.smt.unwrap();
    let mut kv = KvClient::connect(&format!("localhost:{}", smt_addr.port()), &ca).unwrap();
    let () = kv.set("named", "yes").unwrap();
    assert_eq!(kv.get::<_, String>("named").unwrap(), "yes");

    // A name the certificate does not carry fails the handshake.
    let endpoint = smt::Endpoint::bind(
        "127.0.0.1:0".parse().unwrap(),
        smt::EndpointConfig::default(),
    )
    .unwrap();
    endpoint
        .set_tls_client(smt_tls::TlsClient::new(ca.as_bytes(), None).unwrap())
        .unwrap();
    let name = smt::tls::ServerName::try_from("elsewhere.example").unwrap();
    endpoint.set_server_name(smt_addr, name).unwrap();
    let mut impostor = KvClient::with_endpoint(endpoint, &smt_addr.to_string())
        .unwrap()
        .with_timeout(Duration::from_secs(20));
    let e = impostor.get::<_, Option<String>>("named").unwrap_err();
    println!("wrong name: {e}");
    assert!(e.to_string().contains("elsewhere.example"), "{e}");

    for (bad, says) in [
        ("localhost", "is not HOST:PORT"),
        ("localhost:http", "is not a port number"),
        ("no-such-host.invalid:1", ""),
    ] {
        let e = KvClient::connect(bad, &ca).unwrap_err();
        println!("{bad}: {e}");
        assert!(e.to_string().contains(says), "{bad}: {e}");
    }
}

#[test]
fn a_server_that_never_answers_fails_the_call_at_its_deadline() {
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let (_server, ca) = kv_server();
    let mut kv = KvClient::connect(&silent.local_addr().unwrap().to_string(), &ca)
        .unwrap()
        .with_timeout(Duration::from_millis(300));
    let start = Instant::now();
    let e = kv.get::<_, Option<String>>("k").unwrap_err();
    println!("{e} after {:?}", start.elapsed());
    assert!(start.elapsed() < Duration::from_secs(60), "{e}");
}
