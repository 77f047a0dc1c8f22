//! `EndpointConfig::observe` over real sockets on loopback: the capture
//! holds exactly the datagrams that crossed the socket, framed with their
//! real addresses; the trace is JSON lines naming both ends of an RPC.

use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use etherparse::{NetSlice, SlicedPacket, TransportSlice};
use pcap_parser::pcapng::Block;
use pcap_parser::{PcapBlockOwned, PcapNGSlice};
use serde_json::Value;

use smt::keys::{fresh_session_pair, AeadAlgorithm};
use smt::observe::{Capture, Observe, Trace};
use smt::{CallOptions, Endpoint, EndpointConfig, Error};

/// One captured frame: source, destination, UDP payload, time (ns).
type Frame = (SocketAddr, SocketAddr, Vec<u8>, u64);

/// The frames of a pcapng file the capture wrote, checking its framing
/// (raw IPv4, UDP with a valid checksum), and its interface statistics.
fn frames(bytes: &[u8]) -> (Vec<Frame>, Option<u64>) {
    let mut out = Vec::new();
    let mut drops = None;
    for block in PcapNGSlice::from_slice(bytes).unwrap() {
        let Ok(PcapBlockOwned::NG(block)) = block else {
            panic!("a bad or legacy block");
        };
        match block {
            Block::InterfaceDescription(idb) => {
                assert_eq!(idb.linktype, pcap_parser::Linktype::RAW);
                assert_eq!(idb.ts_resolution(), Some(1_000_000_000));
            }
            Block::EnhancedPacket(epb) => {
                let data = &epb.data[..epb.caplen as usize];
                let p = SlicedPacket::from_ip(data).unwrap();
                let Some(NetSlice::Ipv4(ip)) = &p.net else {
                    panic!("not IPv4");
                };
                let Some(TransportSlice::Udp(udp)) = &p.transport else {
                    panic!("not UDP");
                };
                let h = ip.header();
                let sum = udp
                    .to_header()
                    .calc_checksum_ipv4(&h.to_header(), udp.payload())
                    .unwrap();
                assert_eq!(udp.checksum(), sum, "UDP checksum");
                let src = SocketAddr::new(h.source_addr().into(), udp.source_port());
                let dst = SocketAddr::new(h.destination_addr().into(), udp.destination_port());
                let ns = (u64::from(epb.ts_high) << 32) | u64::from(epb.ts_low);
                out.push((src, dst, udp.payload().to_vec(), ns));
            }
            Block::InterfaceStatistics(isb) => drops = isb.isb_ifdrop().map(|d| d.unwrap()),
            _ => {}
        }
    }
    (out, drops)
}

/// A call of 30 000 bytes (GSO batches of 1472-byte datagrams) to a plain
/// UDP socket that never answers, and three datagrams from it: the
/// capture holds every datagram the socket received, in order, byte for
/// byte, and the three as received, with the sockets' addresses.
#[test]
fn the_capture_holds_exactly_the_datagrams_on_the_wire() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wire.pcapng");
    let capture = Capture::create(&path).unwrap();
    let mut config = EndpointConfig::default();
    config.set_observe(Observe::new().capture(capture.clone()));
    let client = Endpoint::bind("127.0.0.1:0".parse().unwrap(), config).unwrap();
    let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
    let (to, from) = (peer.local_addr().unwrap(), client.local_addr());
    let (keys, _) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    client.install_session(to, keys).unwrap();
    let request: Vec<u8> = (0..30_000).map(|i| i as u8).collect();
    let options = CallOptions::new().timeout(Duration::from_millis(150));
    let err = client.call_with(to, &request, options).unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err}");
    for junk in [&b"not smt"[..], &[0u8; 100], &[0xff; 1]] {
        peer.send_to(junk, from).unwrap();
    }
    std::thread::sleep(Duration::from_millis(50));
    // Let the endpoint read the junk (a zero-timeout call turns it).
    let _ = client.call_with(to, b"x", Duration::from_millis(1));
    client.close();
    let summary = capture.finish().unwrap();
    assert_eq!(summary.dropped, 0);

    peer.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let mut on_wire = Vec::new();
    let mut buf = [0u8; 65_536];
    while let Ok(n) = peer.recv(&mut buf) {
        on_wire.push(buf[..n].to_vec());
    }
    let (frames, drops) = frames(&std::fs::read(&path).unwrap());
    assert_eq!(
        drops,
        Some(0),
        "the closing statistics say nothing was dropped"
    );
    assert_eq!(frames.len() as u64, summary.datagrams);
    let sent: Vec<Vec<u8>> = frames
        .iter()
        .filter(|f| (f.0, f.1) == (from, to))
        .map(|f| f.2.clone())
        .collect();
    assert!(
        sent.len() >= 21,
        "the request's 21 datagrams and more: {}",
        sent.len()
    );
    assert!(
        sent == on_wire,
        "the capture differs from what the socket received"
    );
    let received: Vec<&[u8]> = frames
        .iter()
        .filter(|f| (f.0, f.1) == (to, from))
        .map(|f| &f.2[..])
        .collect();
    assert_eq!(received, [&b"not smt"[..], &[0u8; 100], &[0xff; 1]]);
    assert!(frames.windows(2).all(|w| w[0].3 <= w[1].3), "in time order");
}

fn lines(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// Both endpoints trace into one file: it starts with `trace_start` and
/// ends with `trace_end`; every event has the common fields; the RPC's
/// request is sealed by the client, sent, received, opened and delivered
/// by the server, and its response comes back the same way, all under
/// one message ID.
#[test]
fn the_trace_is_json_lines_with_both_ends_of_an_rpc() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.jsonl");
    let trace = Trace::create(&path).unwrap();
    let mut config = EndpointConfig::default();
    config.set_observe(Observe::new().trace(trace.clone()));
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let server = Endpoint::bind(any, config.clone()).unwrap();
    let client = Endpoint::bind(any, config).unwrap();
    let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    client.install_session(server.local_addr(), ck).unwrap();
    server.install_session(client.local_addr(), sk).unwrap();
    let echo = server.clone();
    std::thread::spawn(move || {
        while let Ok(mut req) = echo.accept() {
            let data = req.take_data();
            let _ = req.respond(&data);
        }
    });
    let request = vec![7u8; 4000];
    assert_eq!(
        client.call(server.local_addr(), &request).unwrap(),
        request[..]
    );
    client.close();
    server.close();
    let summary = trace.finish().unwrap();
    assert_eq!(summary.dropped, 0);

    let all = lines(&path);
    assert_eq!(all[0]["ev"], "trace_start");
    assert_eq!(all[0]["version"], 1);
    let end = all.last().unwrap();
    assert_eq!(end["ev"], "trace_end");
    assert_eq!(end["events"], summary.events);
    assert_eq!(end["count"], 0);
    let events = &all[1..all.len() - 1];
    assert_eq!(events.len() as u64, summary.events);
    for e in events {
        for field in ["t", "us", "tick", "ep", "ev"] {
            assert!(!e[field].is_null(), "{field} missing: {e}");
        }
    }
    let (c, s) = (
        client.local_addr().to_string(),
        server.local_addr().to_string(),
    );
    let find = |ep: &str, ev: &str, f: &dyn Fn(&Value) -> bool| {
        events
            .iter()
            .position(|e| e["ep"] == ep && e["ev"] == ev && f(e))
            .unwrap_or_else(|| panic!("no {ev} at {ep}"))
    };
    let started = find(&c, "rpc_started", &|e| e["length"] == 4000);
    let id = events[started]["id"].clone();
    let same = |e: &Value| e["id"] == id;
    let steps = [
        find(&c, "sealed", &|e| {
            same(e) && e["message"] == "request" && e["records"] == 1
        }),
        find(&c, "sent", &|e| {
            same(e) && e["type"] == "DATA" && e["offset"] == 0
        }),
        find(&s, "received", &|e| {
            same(e) && e["type"] == "DATA" && e["length"] == 1428
        }),
        find(&s, "opened", &|e| same(e) && e["records"] == 1),
        find(&s, "delivered", &|e| {
            same(e) && e["message"] == "request" && e["length"] == 4000
        }),
        find(&s, "sealed", &|e| same(e) && e["message"] == "response"),
        find(&c, "delivered", &|e| {
            same(e) && e["message"] == "response" && !e["rpc"].is_null()
        }),
        find(&s, "server_freed", &|e| same(e) && e["reason"] == "acked"),
    ];
    // Written turn by turn, per endpoint: an endpoint's events are in
    // order; across endpoints, time orders them.
    let us = |i: usize| events[i]["us"].as_i64().unwrap();
    assert!(
        steps.windows(2).all(|w| us(w[0]) <= us(w[1])),
        "out of time order: {:?}",
        steps.map(|i| format!("{} {} {}", events[i]["ep"], events[i]["ev"], us(i)))
    );
}
