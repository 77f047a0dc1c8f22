//! A Rust Redis client, the `redis` crate, against the TCP front end: its
//! connection setup, typed commands, pipelines and errors all work as
//! against Redis.

use crate::common;

use std::collections::HashMap;

use common::kv_server;
use redis::{Commands, RedisResult};

fn connect(server: &smt_kv::server::RunningServer) -> redis::Connection {
    let url = format!("redis://{}/0", server.tcp.unwrap());
    redis::Client::open(url).unwrap().get_connection().unwrap()
}

#[test]
fn the_redis_crate_sets_gets_and_pipelines() {
    let (server, _ca) = kv_server();
    let mut con = connect(&server);
    let () = con.set("greeting", "hello").unwrap();
    let got: String = con.get("greeting").unwrap();
    assert_eq!(got, "hello");
    let missing: Option<String> = con.get("nobody").unwrap();
    assert_eq!(missing, None);
    // The crate's `incr` and `set_ex` send INCRBY and SETEX.
    assert_eq!(con.incr::<_, _, i64>("counter", 1).unwrap(), 1);
    let () = con.set_ex("temp", "v", 100).unwrap();
    assert!(con.exists::<_, bool>("temp").unwrap());
    assert_eq!(con.ttl::<_, i64>("temp").unwrap(), 100);

    let added: i64 = redis::cmd("HSET")
        .arg("user:1")
        .arg(&[("name", "ada"), ("lang", "en")])
        .query(&mut con)
        .unwrap();
    assert_eq!(added, 2);
    let all: HashMap<String, String> = con.hgetall("user:1").unwrap();
    assert_eq!(all["name"], "ada");
    let one: String = con.hget("user:1", "lang").unwrap();
    assert_eq!(one, "en");

    let (a, b): (String, i64) = redis::pipe()
        .cmd("SET")
        .arg("p")
        .arg("1")
        .ignore()
        .cmd("GET")
        .arg("p")
        .cmd("INCR")
        .arg("p")
        .query(&mut con)
        .unwrap();
    assert_eq!((a.as_str(), b), ("1", 2));

    let keys: Vec<String> = con.scan().unwrap().collect::<RedisResult<_>>().unwrap();
    assert_eq!(keys.len(), 5, "{keys:?}");
    assert_eq!(redis::cmd("DBSIZE").query::<i64>(&mut con).unwrap(), 5);
    let () = redis::cmd("PING").query(&mut con).unwrap();
}

#[test]
fn the_redis_crate_sees_redis_errors() {
    let (server, _ca) = kv_server();
    let mut con = connect(&server);
    let () = con.hset("h", "f", "v").unwrap();
    let wrong: RedisResult<String> = con.get("h");
    let e = wrong.unwrap_err();
    assert_eq!(e.code(), Some("WRONGTYPE"), "{e}");
    let unknown: RedisResult<()> = redis::cmd("OBJECT")
        .arg("ENCODING")
        .arg("h")
        .query(&mut con);
    assert!(unknown.unwrap_err().to_string().contains("unknown command"));
    // The connection is still usable after errors.
    let () = con.set("after", "ok").unwrap();
}
