//! The event trace (`smt_proto::trace`) on the two-endpoint harness: what
//! it shows of a loss and its repair, and that turning it on changes
//! nothing the endpoints do.

use std::time::Duration;

use smt_proto::sim::{Datagram, Link, Outcome, Pair, Verdict};
use smt_proto::trace::{MessageKind, PacketSummary};
use smt_proto::wire::{Body, Packet, PacketType};
use smt_proto::{Endpoint, TraceEvent, Traced};
use smt_relay::KeyKind;

const AES: KeyKind = KeyKind::Aes128(7);
const LIMIT: Duration = Duration::from_secs(30);

fn payload(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + 1) as u8).collect()
}

fn drain(ep: &mut Endpoint) -> Vec<TraceEvent> {
    std::iter::from_fn(|| ep.poll_trace()).collect()
}

/// `(offset, length, retransmit)` of a DATA packet's payload.
fn data_range(p: &PacketSummary) -> Option<(u64, usize, bool)> {
    match p.repr?.body {
        Body::Data(h) => Some((h.wire_offset(), h.payload_len(), h.retransmit)),
        _ => None,
    }
}

/// `(offset, length)` a RESEND asks for.
fn resend_range(p: &PacketSummary) -> Option<(u32, u32)> {
    match p.repr?.body {
        Body::Resend { offset, length, .. } => Some((offset, length)),
        _ => None,
    }
}

fn sent(events: &[TraceEvent]) -> impl Iterator<Item = &PacketSummary> {
    events.iter().filter_map(|e| match &e.what {
        Traced::Sent { packet, .. } => Some(packet),
        _ => None,
    })
}

/// The second packet of the first request (wire bytes 1428..2856 of a
/// 4000-byte request) is lost once. The server's trace shows one RESEND
/// for exactly that range, the client's one retransmission of exactly
/// it, and the server's the retransmitted packet completing the record
/// that opens, then the request delivered; no other byte is sent twice.
#[test]
fn a_lost_packet_is_traced_as_one_resend_and_one_retransmission_of_its_range() {
    let mut pair = Pair::with_keys(AES, Link::default(), 21);
    pair.client.set_tracing(true);
    pair.server.set_tracing(true);
    let server = pair.server_addr;
    let lost = std::rc::Rc::new(std::cell::Cell::new(None));
    let lose = lost.clone();
    pair.intercept = Some(Box::new(move |d: &Datagram| {
        let p = Packet::new_checked(&d.bytes[..]).unwrap();
        let second = p.packet_type() == PacketType::DATA && p.packet_index() == 1;
        if d.to == server && second && lose.get().is_none() {
            lose.set(Some(p.id()));
            return Verdict::Drop;
        }
        Verdict::Deliver
    }));
    let req = payload(4000);
    let h = pair.call(&req);
    assert!(pair.run(LIMIT));
    assert_eq!(pair.outcomes[&h], Outcome::Response(req));
    assert_eq!(pair.link_stats.intercepted, 1);
    let (client, server) = (drain(&mut pair.client), drain(&mut pair.server));

    let mss = pair.client.config().mss() as u64;
    let request: Vec<(u64, usize, bool)> = sent(&client).filter_map(data_range).collect();
    assert_eq!(
        request,
        [
            (0, 1428, false),
            (mss, 1428, false),
            (2 * mss, 4022 - 2 * mss as usize, false),
            (mss, 1428, true),
        ],
        "three packets, then the lost one again"
    );
    let resends: Vec<(u32, u32)> = sent(&server).filter_map(resend_range).collect();
    assert_eq!(
        resends,
        [(mss as u32, mss as u32)],
        "one RESEND, of the gap"
    );
    let retransmitted = sent(&server).filter_map(data_range).filter(|r| r.2).count();
    assert_eq!(retransmitted, 0, "the response went through at once");

    // On the server: the RESEND leaves before the retransmission arrives,
    // which completes the record; the request is delivered after it.
    let at = |pred: &dyn Fn(&Traced) -> bool| server.iter().position(|e| pred(&e.what));
    let resend =
        at(&|w| matches!(w, Traced::Sent { packet, .. } if resend_range(packet).is_some()));
    let repaired = at(
        &|w| matches!(w, Traced::Received { packet, .. } if data_range(packet).is_some_and(|r| r.2)),
    );
    let opened = at(&|w| matches!(w, Traced::Opened { records: 1, .. }));
    let delivered = at(&|w| {
        matches!(
            w,
            Traced::Delivered {
                kind: MessageKind::Request,
                len: 4000,
                ..
            }
        )
    });
    let order = [resend, repaired, opened, delivered];
    assert!(order.iter().all(Option::is_some), "{order:?}");
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}");
    // The RESEND waited for the server's resend_ticks of silence.
    let ticks = server[resend.unwrap()].tick;
    assert!(
        ticks >= u64::from(pair.server.config().resend_ticks),
        "{ticks}"
    );
    // Both ends name the message alike: the lost packet's ID.
    let resend_id = sent(&server)
        .find(|p| resend_range(p).is_some())
        .map(|p| p.id);
    assert_eq!(resend_id, lost.get());
}

/// Everything one seeded run over a lossy, reordering, duplicating link
/// puts on the wire and delivers.
fn run(tracing: bool) -> (Vec<Datagram>, Vec<Outcome>, smt_proto::Stats) {
    let link = Link {
        loss: 0.05,
        reorder: 0.05,
        duplicate: 0.02,
        ..Link::default()
    };
    let mut pair = Pair::with_keys(AES, link, 5);
    pair.client.set_tracing(tracing);
    pair.server.set_tracing(tracing);
    pair.capture = Some(Vec::new());
    let calls: Vec<_> = [10, 3000, 70_000, 1 << 20, 64]
        .into_iter()
        .map(|len| pair.call(&payload(len)))
        .collect();
    assert!(pair.run(LIMIT));
    let traced = drain(&mut pair.client).len() + drain(&mut pair.server).len();
    assert_eq!(traced > 0, tracing, "{traced} events");
    let outcomes = calls.iter().map(|h| pair.outcomes[h].clone()).collect();
    (pair.capture.take().unwrap(), outcomes, *pair.client.stats())
}

/// Tracing observes only: the same seeded run puts the same bytes on the
/// wire, with and without it.
#[test]
fn tracing_changes_nothing_on_the_wire() {
    let (wire_off, outcomes_off, stats_off) = run(false);
    let (wire_on, outcomes_on, stats_on) = run(true);
    assert!(stats_off.retransmitted_packets > 0, "the link lost some");
    assert_eq!(wire_off.len(), wire_on.len());
    assert!(wire_off == wire_on, "the wire differs with tracing on");
    assert_eq!(outcomes_off, outcomes_on);
    assert_eq!(stats_off, stats_on);
}

/// A full queue keeps the oldest events and says how many it lost.
#[test]
fn an_undrained_trace_loses_the_newest_events_and_counts_them() {
    let mut pair = Pair::with_keys(AES, Link::default(), 3);
    pair.client.set_tracing(true);
    for _ in 0..20 {
        for _ in 0..600 {
            pair.call(&payload(10));
        }
        assert!(pair.run(LIMIT));
    }
    let events = drain(&mut pair.client);
    assert_eq!(events.len(), smt_proto::trace::DEFAULT_TRACE_CAPACITY);
    assert!(matches!(events[0].what, Traced::Sealed { .. }));
    assert!(matches!(events[1].what, Traced::RpcStarted { .. }));
    // The next event that fits comes after the count of those lost.
    pair.call(&payload(10));
    let next = drain(&mut pair.client);
    assert!(
        matches!(next[0].what, Traced::Lost { count } if count > 0),
        "{:?}",
        next[0]
    );
}
