//! Calls to an address where nothing speaks SMT end promptly with a clear
//! error when the network says so (issue #11, item 4): the socket reads
//! ICMP port unreachables (`IP_RECVERR`) and the core fails calls to a
//! peer that never authenticated anything. Real UDP sockets on loopback.

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use smt::keys::{fresh_session_pair, AeadAlgorithm};
use smt::{Endpoint, EndpointConfig, Error, RpcError};

/// A loopback port with nothing bound to it (bound once, then closed).
fn closed_port() -> SocketAddr {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.local_addr().unwrap()
}

fn client() -> Endpoint {
    Endpoint::bind("127.0.0.1:0".parse().unwrap(), EndpointConfig::default()).expect("bind")
}

#[test]
fn a_call_to_a_closed_port_fails_fast_as_unreachable() {
    let client = client();
    let peer = closed_port();
    let (keys, _) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    client.install_session(peer, keys).unwrap();
    let started = Instant::now();
    let err = client
        .call(peer, b"anyone there?")
        .expect_err("nothing listens");
    assert!(
        matches!(err, Error::Rpc(RpcError::Unreachable)),
        "expected Unreachable, got {err:?} ({err})"
    );
    assert!(err.to_string().contains("unreachable"), "{err}");
    let stats = client.stats().unwrap().total;
    assert!(stats.packets.unreachable_reports >= 1, "{stats:?}");
    eprintln!(
        "failed after {:?} (the RPC timeout is about 1 s)",
        started.elapsed()
    );
}

/// Calling again at once does not send again: the report holds for a
/// moment (`handshake_abort_ticks`), so a retrying application does not
/// turn it into a stream of packets toward the address.
#[test]
fn calls_right_after_an_unreachable_report_fail_without_sending() {
    // A hold of 5 s instead of 100 ms: a descheduled test thread must not
    // outlive it.
    let mut config = EndpointConfig::default();
    config
        .protocol_mut()
        .set_handshake_timeout(Duration::from_secs(5));
    let client = Endpoint::bind("127.0.0.1:0".parse().unwrap(), config).unwrap();
    let peer = closed_port();
    let (keys, _) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    client.install_session(peer, keys).unwrap();
    let err = client.call(peer, b"first").expect_err("nothing listens");
    assert!(matches!(err, Error::Rpc(RpcError::Unreachable)), "{err:?}");
    let before = client.stats().unwrap().total;
    for _ in 0..100 {
        let err = client.call(peer, b"again").expect_err("still nothing");
        assert!(matches!(err, Error::Rpc(RpcError::Unreachable)), "{err:?}");
    }
    let after = client.stats().unwrap().total;
    assert_eq!(
        after.traffic.datagrams_sent, before.traffic.datagrams_sent,
        "calls within the report's hold sent nothing"
    );
}

#[test]
fn many_calls_to_a_closed_port_all_end_unreachable() {
    let client = client();
    let peer = closed_port();
    let (keys, _) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    client.install_session(peer, keys).unwrap();
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let c = client.clone();
            std::thread::spawn(move || c.call(peer, b"x"))
        })
        .collect();
    for t in threads {
        let err = t.join().unwrap().expect_err("nothing listens");
        assert!(matches!(err, Error::Rpc(RpcError::Unreachable)), "{err:?}");
    }
}

/// A silent UDP service (bound, never answering) sends no ICMP: the call
/// times out as before rather than failing as unreachable.
#[test]
fn a_silent_service_is_not_reported_unreachable() {
    let mut config = EndpointConfig::default();
    config
        .protocol_mut()
        .set_rpc_idle_timeout(Duration::from_millis(60));
    config
        .protocol_mut()
        .set_resend_after(Duration::from_millis(5));
    let client = Endpoint::bind("127.0.0.1:0".parse().unwrap(), config).unwrap();
    let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
    let peer = silent.local_addr().unwrap();
    let (keys, _) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    client.install_session(peer, keys).unwrap();
    let err = client.call(peer, b"hello?").expect_err("nobody answers");
    assert!(
        matches!(err, Error::Rpc(RpcError::Timeout)),
        "expected a timeout, got {err:?}"
    );
    drop(silent);
}
