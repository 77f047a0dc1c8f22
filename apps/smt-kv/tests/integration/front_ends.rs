//! The three front ends: SMT messages get the same replies as TCP, and
//! all three serve one database.

use crate::common;

use common::{kv_server, kv_server_with, show};
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

/// With a password, each front end refuses commands until AUTH: a TCP or
/// TLS connection stays authenticated, an SMT message only for itself.
#[test]
fn every_front_end_asks_for_the_password() {
    let (server, ca) = kv_server_with(|c| {
        c.requirepass = Some(smt_kv::cmd::Password::new(b"sesame".to_vec()));
    });
    let noauth = Value::Error(b"NOAUTH Authentication required.".to_vec());
    let wrongpass =
        Value::Error(b"WRONGPASS invalid username-password pair or user is disabled.".to_vec());
    for transport in [Transport::Tcp, Transport::Tls, Transport::Smt] {
        let addr = match transport {
            Transport::Tcp => server.tcp,
            Transport::Tls => server.tls,
            Transport::Smt => server.smt,
        };
        let mut c = Client::connect(transport, addr.unwrap(), &ca).unwrap();
        assert_eq!(
            c.call(&[b"SET", b"k", b"v"]).unwrap(),
            noauth,
            "{transport:?}"
        );
        assert_eq!(
            c.call_authenticated(b"open", &[b"GET", b"k"]).unwrap(),
            wrongpass,
            "{transport:?}"
        );
        assert_eq!(
            c.call_authenticated(b"sesame", &[b"SET", b"k", b"v"])
                .unwrap(),
            Value::Simple(b"OK".to_vec()),
            "{transport:?}"
        );
        let after = c.call(&[b"GET", b"k"]).unwrap();
        match transport {
            Transport::Smt => assert_eq!(after, noauth, "a message stands alone"),
            _ => assert_eq!(after, Value::Bulk(b"v".to_vec()), "{transport:?}"),
        }
    }
}

/// Keys nobody reads again still go: the loop's active expiry, a bounded
/// number per turn, collects them all (DBSIZE counts keys not yet
/// collected, as Redis's does).
#[test]
fn keys_nobody_reads_expire_anyway() {
    let (server, ca) = kv_server();
    let mut c = Client::connect(Transport::Tcp, server.tcp.unwrap(), &ca).unwrap();
    let mut pipeline = Vec::new();
    for i in 0..5000 {
        let key = format!("k{i}");
        smt_kv::resp::reply::command(&mut pipeline, &[b"SET", key.as_bytes(), b"v", b"PX", b"50"]);
    }
    smt_kv::resp::reply::command(&mut pipeline, &[b"SET", b"kept", b"v", b"EX", b"1000"]);
    let ends_after_all =
        |input: &[u8]| input.windows(5).filter(|w| w == b"+OK\r\n").count() == 5001;
    c.raw(&pipeline, ends_after_all).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let size = c.call(&[b"DBSIZE"]).unwrap();
        if size == Value::Integer(1) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "still {size:?} keys");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(c.call(&[b"TTL", b"kept"]).unwrap(), Value::Integer(1000));
}
