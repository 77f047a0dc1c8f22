//! The three front ends: SMT messages get the same replies as TCP, and
//! all three serve one database.

mod common;

use common::{kv_server, show};
use smt_kv::client::{Client, Transport};
use smt_kv::resp::Value;

fn mb(args: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    smt_kv::resp::reply::command(&mut out, args);
    out
}

/// One complete reply from a stream client's raw exchange.
fn one_reply(input: &[u8]) -> bool {
    matches!(Value::parse(input), Ok(Some((_, n))) if n == input.len())
}

/// Commands sent one per SMT message to one server and one per write over
/// TCP to another, in the same order: the replies match byte for byte.
#[test]
fn smt_messages_get_the_same_replies_as_tcp() {
    let script: Vec<Vec<u8>> = vec![
        mb(&[b"PING"]),
        mb(&[b"SET", b"k", b"v", b"EX", b"100"]),
        mb(&[b"GET", b"k"]),
        mb(&[b"SET", b"k", b"v2", b"NX", b"GET"]),
        mb(&[b"INCR", b"n"]),
        mb(&[b"INCR", b"k"]),
        mb(&[b"HSET", b"h", b"a", b"1", b"b", b"2"]),
        mb(&[b"HGETALL", b"h"]),
        mb(&[b"HMGET", b"h", b"a", b"zz"]),
        mb(&[b"GET", b"h"]),
        mb(&[b"MSET", b"x", b"1", b"y", b"2"]),
        mb(&[b"MGET", b"x", b"y", b"z"]),
        mb(&[b"DEL", b"x", b"y", b"z"]),
        mb(&[b"EXISTS", b"k", b"k", b"h"]),
        mb(&[b"SCAN", b"0", b"COUNT", b"100", b"MATCH", b"n"]),
        mb(&[b"DBSIZE"]),
        mb(&[b"CONFIG", b"GET", b"appendonly"]),
        mb(&[b"SELECT", b"1"]),
        mb(&[b"NOPE", b"a"]),
        mb(&[b"SET", b"big", &vec![b'b'; 200_000]]),
        mb(&[b"GET", b"big"]),
        b"ECHO inline\r\n".to_vec(),
        mb(&[b"FLUSHALL"]),
        mb(&[b"DBSIZE"]),
    ];
    let (over_tcp, ca) = kv_server();
    let (over_smt, smt_ca) = kv_server();
    let mut tcp = Client::connect(Transport::Tcp, over_tcp.tcp.unwrap(), &ca).unwrap();
    let mut smt = Client::connect(Transport::Smt, over_smt.smt.unwrap(), &smt_ca).unwrap();
    for command in &script {
        let want = tcp.raw(command, one_reply).unwrap();
        let got = smt.raw(command, one_reply).unwrap();
        assert_eq!(
            show(&got),
            show(&want),
            "for {}",
            show(&command[..command.len().min(60)])
        );
    }
}

#[test]
fn three_front_ends_serve_one_database() {
    let (server, ca) = kv_server();
    let mut tcp = Client::connect(Transport::Tcp, server.tcp.unwrap(), &ca).unwrap();
    let mut tls = Client::connect(Transport::Tls, server.tls.unwrap(), &ca).unwrap();
    let mut smt = Client::connect(Transport::Smt, server.smt.unwrap(), &ca).unwrap();
    let bulk = |v: &str| Value::Bulk(v.as_bytes().to_vec());

    assert_eq!(
        tcp.call(&[b"SET", b"k", b"from tcp"]).unwrap(),
        Value::Simple(b"OK".to_vec())
    );
    assert_eq!(tls.call(&[b"GET", b"k"]).unwrap(), bulk("from tcp"));
    assert_eq!(smt.call(&[b"GET", b"k"]).unwrap(), bulk("from tcp"));

    assert_eq!(
        smt.call(&[b"HSET", b"h", b"f", b"from smt"]).unwrap(),
        Value::Integer(1)
    );
    assert_eq!(
        tcp.call(&[b"HGETALL", b"h"]).unwrap(),
        Value::Array(vec![bulk("f"), bulk("from smt")])
    );
    assert_eq!(tls.call(&[b"INCR", b"n"]).unwrap(), Value::Integer(1));
    assert_eq!(smt.call(&[b"INCR", b"n"]).unwrap(), Value::Integer(2));
    assert_eq!(tcp.call(&[b"INCR", b"n"]).unwrap(), Value::Integer(3));
    for c in [&mut tcp, &mut tls, &mut smt] {
        assert_eq!(c.call(&[b"DBSIZE"]).unwrap(), Value::Integer(3));
    }
    let Value::Bulk(info) = tcp.call(&[b"INFO", b"stats"]).unwrap() else {
        panic!("INFO is a bulk string");
    };
    let info = String::from_utf8(info).unwrap();
    assert!(info.contains("smt_requests_processed:4"), "{info}");
}
