//! The typed counters (`smt::stats`) on real endpoints, and configurations
//! refused as `Error::Config` before anything is opened.

use std::net::SocketAddr;
use std::time::Duration;

use smt::keys::{fresh_session_pair, AeadAlgorithm};
use smt::stats::LatencyHistogram;
use smt::{DropReason, Endpoint, EndpointConfig, Error, LocalEndpoint, Stats};

fn any_port() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// An echo server and `clients` clients with sessions, each having made
/// `calls[i]` calls of 100 bytes.
fn run(calls: &[usize]) -> (Endpoint, Vec<Endpoint>) {
    let server = Endpoint::bind(any_port(), EndpointConfig::default()).unwrap();
    let echo = server.clone();
    std::thread::spawn(move || {
        while let Ok(req) = echo.accept() {
            let data = req.data().to_vec();
            let _ = req.respond(&data);
        }
    });
    let clients = calls
        .iter()
        .map(|&n| {
            let client = Endpoint::bind(any_port(), EndpointConfig::default()).unwrap();
            let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
            client.install_session(server.local_addr(), ck).unwrap();
            server.install_session(client.local_addr(), sk).unwrap();
            for i in 0..n {
                client.call(server.local_addr(), &[i as u8; 100]).unwrap();
            }
            client
        })
        .collect();
    (server, clients)
}

#[test]
fn stats_survive_a_json_round_trip_whole() {
    let (server, clients) = run(&[5, 2]);
    let stats = server.stats_with_peers(10).unwrap();
    assert_eq!(stats.peers.len(), 2);
    assert!(stats.total.drops.iter().count() == DropReason::ALL.len());
    let client = clients[0].stats_with_peers(1).unwrap();
    assert_eq!(client.total.rtt.count(), 5, "every call's round trip");
    for stats in [stats, client] {
        let json = serde_json::to_string(&stats).unwrap();
        let back: Stats = serde_json::from_str(&json).unwrap();
        assert_eq!(back, stats, "{json}");
    }
}

#[test]
fn serialised_stats_name_their_drop_reasons_and_buckets() {
    let (server, _clients) = run(&[1]);
    let json = serde_json::to_value(server.stats().unwrap()).unwrap();
    let drops = &json["total"]["drops"];
    for reason in DropReason::ALL {
        assert_eq!(drops[reason.name()], 0, "{reason:?} in {drops}");
    }
    // A histogram lists its filled buckets: the server timed its one
    // answer, and made no calls.
    let latency = &json["total"]["handler_latency"]["buckets"];
    let filled = latency.as_array().unwrap();
    assert_eq!(filled.len(), 1, "{latency}");
    assert_eq!(filled[0]["count"], 1);
    let le = Duration::from_nanos(filled[0]["le_nanos"].as_u64().unwrap());
    assert!((0..LatencyHistogram::BOUNDED).any(|i| LatencyHistogram::bound(i) == Some(le)));
    assert_eq!(json["total"]["rtt"]["buckets"], serde_json::json!([]));
    assert_eq!(json["total"]["rpcs"]["served"], 1);
    assert_eq!(json["total"]["traffic"]["messages_received"], 1);
    assert_eq!(json["held"]["sessions"], 1);
    // A reason this version does not know is refused, not dropped.
    let mut unknown = json.clone();
    unknown["total"]["drops"]["cosmic_rays"] = 1.into();
    let err = serde_json::from_value::<Stats>(unknown).unwrap_err();
    assert!(err.to_string().contains("cosmic_rays"), "{err}");
}

#[test]
fn the_busiest_peers_come_first_and_no_more_than_asked() {
    let (server, clients) = run(&[1, 6, 3]);
    let peers = server.stats_with_peers(2).unwrap().peers;
    let addrs: Vec<_> = peers.iter().map(|p| p.addr).collect();
    assert_eq!(addrs, [clients[1].local_addr(), clients[2].local_addr()]);
    assert_eq!(peers[0].counters.traffic.messages_received, 6);
    assert!(server.stats().unwrap().peers.is_empty());
    let one = server.peer_stats(clients[0].local_addr()).unwrap().unwrap();
    assert_eq!(one.counters.traffic.messages_received, 1);
    let nobody = "127.0.0.1:9".parse().unwrap();
    assert_eq!(server.peer_stats(nobody).unwrap(), None);
    let all = server.stats_with_peers(usize::MAX).unwrap();
    assert_eq!(all.peers.len(), 3);
    assert_eq!(all.held.sessions, 3);
}

#[test]
fn the_rtt_histogram_brackets_the_measured_round_trips() {
    let (server, clients) = run(&[20]);
    let rtt = clients[0].stats().unwrap().total.rtt;
    assert_eq!(rtt.count(), 20);
    let mean = rtt.mean().unwrap();
    assert!(
        mean > Duration::ZERO && mean < Duration::from_secs(1),
        "{mean:?}"
    );
    // The median lies between the smallest and the largest sample (no
    // bound against the mean: one call descheduled on a busy machine moves
    // the mean by any amount, and tests carry no timing thresholds).
    let p50 = rtt.quantile(0.5).unwrap();
    let (lowest, highest) = (rtt.quantile(0.0).unwrap(), rtt.quantile(1.0).unwrap());
    assert!(
        p50 > Duration::ZERO && lowest <= p50 && p50 <= highest,
        "{lowest:?} <= {p50:?} <= {highest:?}"
    );
    // Each round trip lies within its call as timed from outside, and a
    // bucket's bound is at most `MAX_ERROR` above what it holds: the
    // largest bound read back is within that of the longest call.
    // Only these calls' buckets count: the histogram's difference from
    // before them.
    let before = rtt.buckets().to_owned();
    let mut longest = Duration::ZERO;
    for i in 0..20u8 {
        let started = std::time::Instant::now();
        clients[0].call(server.local_addr(), &[i; 100]).unwrap();
        longest = longest.max(started.elapsed());
    }
    let rtt = clients[0].stats().unwrap().total.rtt;
    let highest = (0..LatencyHistogram::BUCKETS)
        .rev()
        .find(|&i| rtt.buckets()[i] > before[i])
        .unwrap();
    let bound = LatencyHistogram::bound(highest).expect("not in the overflow bucket");
    let limit = longest.mul_f64(1.0 + LatencyHistogram::MAX_ERROR);
    assert!(bound <= limit, "{bound:?} > {limit:?}");
    let peer = clients[0].peer_stats(server.local_addr()).unwrap().unwrap();
    assert_eq!(peer.counters.rtt, rtt, "one peer: the same calls");
    // The server made no calls: nothing timed.
    assert_eq!(server.stats().unwrap().total.rtt.count(), 0);
}

/// What the local endpoint reports: the same types.
#[test]
fn a_local_endpoint_reports_the_same_stats() {
    let server = Endpoint::bind(any_port(), EndpointConfig::default()).unwrap();
    let mut client = LocalEndpoint::bind(any_port(), EndpointConfig::default()).unwrap();
    let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    client.install_session(server.local_addr(), ck).unwrap();
    server.install_session(client.local_addr(), sk).unwrap();
    let echo = server.clone();
    std::thread::spawn(move || {
        while let Ok(req) = echo.accept() {
            let _ = req.respond(b"ok");
        }
    });
    client.call(server.local_addr(), b"hi").unwrap();
    while client.poll(Some(Duration::from_secs(5))).unwrap().is_none() {}
    let stats = client.stats_with_peers(4);
    assert_eq!(stats.total.rpcs.completed, 1);
    assert_eq!(stats.peers[0].addr, server.local_addr());
    assert_eq!(client.stats().total, stats.total);
    assert!(client.peer_stats(server.local_addr()).is_some());
}

/// The setting each refusal names, from `Endpoint::bind` and
/// `LocalEndpoint::bind`.
fn refused(config: EndpointConfig) -> (&'static str, String) {
    let local = LocalEndpoint::bind(any_port(), config.clone()).unwrap_err();
    assert!(matches!(local, Error::Config(_)), "{local:?}");
    match Endpoint::bind(any_port(), config) {
        Err(Error::Config(e)) => (e.setting(), e.to_string()),
        other => panic!("expected Error::Config, got {other:?}"),
    }
}

/// Configurations that came back as `Error::Io(InvalidInput)` are
/// `Error::Config` naming the setting and the fix, and no socket is
/// opened for them.
#[test]
fn configurations_that_cannot_work_are_config_errors() {
    let mut config = EndpointConfig::default();
    config.set_max_outstanding_calls(0);
    let (setting, text) = refused(config);
    assert_eq!(setting, "EndpointConfig::max_outstanding_calls");
    assert!(text.contains("use at least 1"), "{text}");

    let mut config = EndpointConfig::default();
    config.protocol_mut().set_record_size(0);
    let (setting, text) = refused(config);
    assert_eq!(setting, "ProtocolConfig");
    assert!(text.contains("record_size"), "{text}");

    let mut config = EndpointConfig::default();
    config
        .protocol_mut()
        .set_handshake_timeout(Duration::from_millis(3));
    let (setting, text) = refused(config);
    assert_eq!(setting, "ProtocolConfig::handshake_timeout");
    assert!(text.contains("resend_after"), "{text}");

    let mut config = EndpointConfig::default();
    config.set_mtu(Some(100));
    let (setting, text) = refused(config);
    assert_eq!(setting, "EndpointConfig::mtu");
    assert!(text.contains("use an MTU from"), "{text}");

    // Refused before binding: a port in use is not what is reported.
    let taken = std::net::UdpSocket::bind(any_port()).unwrap();
    let mut config = EndpointConfig::default();
    config.set_max_outstanding_calls(0);
    let err = Endpoint::bind(taken.local_addr().unwrap(), config).unwrap_err();
    assert!(matches!(err, Error::Config(_)), "{err:?}");
}
