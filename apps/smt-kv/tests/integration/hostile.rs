//! Bad input on every front end: a Redis error reply and (on a stream) a
//! closed connection, never a crash, a hang or unbounded memory; the
//! server keeps serving everyone else.

use crate::common;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::Duration;

use common::{exchange, kv_server, kv_server_with, show};
use smt_kv::client::{Client, Transport};
use smt_kv::resp::Limits;

/// Inputs that must get `-ERR Protocol error: ...` and a close.
fn malformed() -> Vec<(&'static str, Vec<u8>, &'static str)> {
    vec![
        (
            "bulk length 2^40",
            b"*1\r\n$1099511627776\r\n".to_vec(),
            "invalid bulk length",
        ),
        (
            "multibulk length 2^40",
            b"*1099511627776\r\n".to_vec(),
            "invalid multibulk length",
        ),
        (
            "nesting bomb",
            b"*1\r\n".repeat(10_000),
            "expected '$', got '*'",
        ),
        (
            "unbalanced quotes",
            b"SET \"k v\r\n".to_vec(),
            "unbalanced quotes",
        ),
        (
            "huge inline line",
            vec![b'x'; 1 << 20],
            "too big inline request",
        ),
        (
            "huge count line",
            [&b"*"[..], &vec![b'9'; 1 << 20]].concat(),
            "too big mbulk count",
        ),
        (
            "garbage then quotes",
            (1u8..=255).cycle().take(5000).collect(),
            "Protocol error",
        ),
    ]
}

fn expect_refusal(name: &str, reply: &[u8], words: &str) {
    let text = String::from_utf8_lossy(reply);
    assert!(
        text.contains("-ERR Protocol error: ") && text.contains(words),
        "{name}: {}",
        show(reply)
    );
}

#[test]
fn malformed_streams_get_an_error_and_a_close() {
    let (server, _ca) = kv_server();
    let addr = server.tcp.unwrap();
    for (name, input, words) in malformed() {
        let got = exchange(addr, &input, false);
        assert!(got.closed, "{name}: connection left open");
        expect_refusal(name, &got.reply, words);
    }
    // Still serving.
    assert_eq!(exchange(addr, b"PING\r\n", true).reply, b"+PONG\r\n");
}

#[test]
fn malformed_tls_streams_get_an_error_and_a_close() {
    let (server, ca) = kv_server();
    let addr = server.tls.unwrap();
    for (name, input, words) in malformed() {
        let mut c = Client::connect(Transport::Tls, addr, &ca).unwrap();
        let reply = c.raw(&input, |_| false).unwrap();
        expect_refusal(name, &reply, words);
    }
    // Not TLS at all: the handshake fails and the connection closes.
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"PING\r\n").unwrap();
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    let mut c = Client::connect(Transport::Tls, addr, &ca).unwrap();
    assert_eq!(
        c.call(&[b"PING"]).unwrap(),
        smt_kv::resp::Value::Simple(b"PONG".to_vec())
    );
}

#[test]
fn malformed_smt_messages_get_an_error() {
    let (server, ca) = kv_server();
    let mut c = Client::connect(Transport::Smt, server.smt.unwrap(), &ca).unwrap();
    for (name, input, words) in malformed() {
        let reply = c.raw(&input, |_| true).unwrap();
        expect_refusal(name, &reply, words);
    }
    let truncated = c.raw(b"*2\r\n$3\r\nGET\r\n", |_| true).unwrap();
    expect_refusal("truncated", &truncated, "truncated command");
    assert_eq!(
        c.call(&[b"PING"]).unwrap(),
        smt_kv::resp::Value::Simple(b"PONG".to_vec())
    );
}

#[test]
fn a_command_cut_short_by_the_client_closing_is_reported() {
    let (server, _ca) = kv_server();
    let mut s = TcpStream::connect(server.tcp.unwrap()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"PING\r\n*2\r\n$3\r\nGET\r\n$5\r\nab").unwrap();
    s.shutdown(Shutdown::Write).unwrap();
    let mut reply = Vec::new();
    s.read_to_end(&mut reply).unwrap();
    assert_eq!(
        show(&reply),
        show(b"+PONG\r\n-ERR Protocol error: truncated command at end of input\r\n")
    );
}

/// A client that sends more than the query buffer limit of one command
/// is dropped (as Redis does, without a reply), and the server lives on.
#[test]
fn the_query_buffer_limit_drops_a_greedy_client() {
    let limits = Limits {
        max_bulk_len: 64 << 20,
        query_buffer_limit: 1 << 20,
    };
    let (server, _ca) = kv_server_with(|c| c.limits = limits);
    let addr = server.tcp.unwrap();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // A 32 MiB bulk is within max_bulk_len but 32 times the buffer limit.
    s.write_all(b"*2\r\n$4\r\nECHO\r\n$33554432\r\n").unwrap();
    let chunk = vec![b'a'; 64 * 1024];
    let mut sent = 0;
    while sent < 32 << 20 {
        if s.write_all(&chunk).is_err() {
            break;
        }
        sent += chunk.len();
    }
    assert!(
        sent < 32 << 20,
        "the server took the whole oversized command"
    );
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);
    assert!(rest.is_empty(), "{}", show(&rest));
    assert_eq!(exchange(addr, b"PING\r\n", true).reply, b"+PONG\r\n");
}

/// Max clients: the one too many hears Redis's words and is closed.
#[test]
fn clients_beyond_maxclients_are_refused() {
    let (server, _ca) = kv_server_with(|c| c.max_clients = 2);
    let addr = server.tcp.unwrap();
    let first = TcpStream::connect(addr).unwrap();
    let second = TcpStream::connect(addr).unwrap();
    let third = exchange(addr, b"PING\r\n", false);
    assert_eq!(third.reply, b"-ERR max number of clients reached\r\n");
    drop((first, second));
}

/// A TLS client hears a clean close (close_notify) after the last reply,
/// so it can tell the end of the conversation from a cut connection.
#[test]
fn tls_connections_end_with_close_notify() {
    let (server, ca) = kv_server();
    let addr = server.tls.unwrap();
    let config = smt_kv::client::tls_client_config(&ca).unwrap();
    let name = rustls_pki_types::ServerName::IpAddress(addr.ip().into());
    let conn = rustls::ClientConnection::new(config, name).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, TcpStream::connect(addr).unwrap());
    tls.sock
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    tls.write_all(b"PING\r\nQUIT\r\n").unwrap();
    let mut reply = Vec::new();
    // rustls reports a close without close_notify as UnexpectedEof.
    tls.read_to_end(&mut reply).unwrap();
    assert_eq!(reply, b"+PONG\r\n+OK\r\n");
}
