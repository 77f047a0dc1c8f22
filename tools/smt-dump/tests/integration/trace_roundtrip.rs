//! The event trace end to end: real endpoints on loopback write their
//! traces with `smt::observe::Trace`, and `smt dump --trace` reads them
//! back through the one schema (`smt_observe::trace::Line`): every line
//! parses, loses no field, and the calls come out as timelines with both
//! ends named.

use std::net::SocketAddr;
use std::path::Path;

use smt::keys::{fresh_session_pair, AeadAlgorithm};
use smt::observe::trace::{Event, Line};
use smt::observe::{Observe, Trace};
use smt::{Endpoint, EndpointConfig};
use smt_dump::trace::timelines;

/// An endpoint on loopback that writes its own trace into `path`.
fn traced(path: &Path) -> (Endpoint, Trace) {
    let trace = Trace::create(path).unwrap();
    let mut config = EndpointConfig::default();
    config.set_observe(Observe::new().trace(trace.clone()));
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    (Endpoint::bind(any, config).unwrap(), trace)
}

/// Each line read as a `Line` and written back is the same JSON object:
/// the schema holds every field the writer wrote.
fn assert_lines_round_trip(text: &str) {
    for line in text.lines() {
        let typed = Line::parse(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        let again: serde_json::Value = serde_json::from_str(&typed.to_json()).unwrap();
        let written: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(again, written, "{line}");
    }
}

#[test]
fn traces_smt_writes_are_timelines_smt_dump_reads() {
    let dir = tempfile::tempdir().unwrap();
    let (cpath, spath) = (
        dir.path().join("client.jsonl"),
        dir.path().join("server.jsonl"),
    );
    let (client, ctrace) = traced(&cpath);
    let (server, strace) = traced(&spath);
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
    let sizes = [1usize, 4000, 30_000];
    for &n in &sizes {
        let request = vec![n as u8; n];
        assert_eq!(
            client.call(server.local_addr(), &request).unwrap(),
            request[..]
        );
    }
    client.close();
    server.close();
    assert_eq!(ctrace.finish().unwrap().dropped, 0);
    assert_eq!(strace.finish().unwrap().dropped, 0);

    let files: Vec<(String, String)> = [("client", &cpath), ("server", &spath)]
        .iter()
        .map(|(name, path)| (name.to_string(), std::fs::read_to_string(path).unwrap()))
        .collect();
    for (_, text) in &files {
        assert_lines_round_trip(text);
        let first = Line::parse(text.lines().next().unwrap()).unwrap();
        assert_eq!(
            first.event,
            Event::TraceStart {
                version: smt::observe::TRACE_FORMAT_VERSION
            }
        );
    }

    let t = timelines(&files).unwrap();
    assert!(t.files.iter().all(|f| f.complete && f.dropped == Some(0)));
    assert_eq!(t.rpcs.len(), sizes.len(), "{}", t.to_text(None));
    let (c, s) = (
        client.local_addr().to_string(),
        server.local_addr().to_string(),
    );
    for (r, &n) in t.rpcs.iter().zip(&sizes) {
        assert_eq!(r.outcome, "response", "{}", t.to_text(None));
        assert_eq!((r.client.as_ref(), r.server.as_ref()), (Some(&c), Some(&s)));
        assert_eq!(
            (r.request_len, r.response_len),
            (Some(n as u64), Some(n as u64))
        );
        let names: Vec<&str> = r.events.iter().map(|e| e.event.name()).collect();
        for ev in [
            "rpc_started",
            "sealed",
            "sent",
            "received",
            "opened",
            "delivered",
        ] {
            assert!(names.contains(&ev), "no {ev} in RPC {}: {names:?}", r.id);
        }
        assert!(r.is(&r.id.to_string()) && r.is(&r.id.0.to_string()));
    }
    let text = t.to_text(None);
    assert!(
        text.contains("client  sealed the request: 30000 B"),
        "{text}"
    );
    assert!(
        text.contains("server  delivered the request (30000 B)"),
        "{text}"
    );
}
