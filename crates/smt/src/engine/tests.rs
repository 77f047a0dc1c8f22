//! The engine on real sockets, its time injected where a test steps it.

use std::sync::{Arc, Mutex};

use smt_proto::trace::Traced;
use smt_proto::wire::PacketType;

use super::*;
use crate::keys::{fresh_session_pair, AeadAlgorithm};

/// A clock the test moves by hand.
#[derive(Clone)]
struct ManualClock(Arc<Mutex<Instant>>);

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        *self.0.lock().unwrap()
    }
}

impl ManualClock {
    fn advance(&self, by: Duration) {
        *self.0.lock().unwrap() += by;
    }
}

#[test]
fn a_call_to_a_silent_peer_times_out_on_the_injected_clock() {
    let clock = ManualClock(Arc::new(Mutex::new(Instant::now())));
    let config = EndpointConfig::default();
    let any = "127.0.0.1:0".parse().unwrap();
    let mut engine = Engine::bind(any, &config, Box::new(clock.clone())).unwrap();
    let silent = std::net::UdpSocket::bind(any).unwrap();
    let peer = silent.local_addr().unwrap();
    let (keys, _) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    engine.install_session(peer, keys).unwrap();
    let call = engine
        .call(peer, b"anyone?".into(), CallOptions::new())
        .unwrap();
    engine.flush();
    let mut datagram = [0u8; 2048];
    assert!(silent.recv_from(&mut datagram).is_ok(), "the request left");
    // Step time to each deadline: no real waiting.
    let tick = config.protocol().tick();
    let abort_ticks = config.core_config(any).unwrap().abort_ticks;
    for _ in 0..abort_ticks * 2 {
        let next = engine
            .deadline()
            .expect("a timer while the call is pending");
        clock.advance(next.saturating_duration_since(clock.now()).max(tick));
        engine.turn(false);
        if let Some(outcome) = engine.poll_outcome() {
            match outcome {
                Outcome::Reply {
                    call: c,
                    result: Err(Error::Rpc(_)),
                } => {
                    assert_eq!(c, call);
                    return;
                }
                other => panic!("unexpected {other:?}"),
            }
        }
    }
    panic!("no timeout after {} ticks", abort_ticks * 2);
}

/// Turns `a` and `b` (with their sockets) until `done` says so; panics
/// after a minute (a loaded machine is slow, not stuck).
fn turn_until(
    a: &mut Engine,
    b: &mut Engine,
    mut done: impl FnMut(&mut Engine, &mut Engine) -> bool,
) {
    let start = std::time::Instant::now();
    while !done(a, b) {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no progress in a minute"
        );
        a.turn(true);
        b.turn(true);
    }
}

/// A finished large RPC's buffers (4 MiB messages: never pooled) are
/// left in the engine for its driver to free (the threaded driver does
/// so after releasing its lock: `threaded/drive/handoff.rs`), not freed in the
/// turn that finished it: counted, not timed.
#[test]
fn a_finished_large_rpc_leaves_its_buffers_for_the_driver_to_free() {
    let config = EndpointConfig::default();
    let any = "127.0.0.1:0".parse().unwrap();
    let mut client = Engine::bind(any, &config, Box::new(SystemClock)).unwrap();
    let mut server = Engine::bind(any, &config, Box::new(SystemClock)).unwrap();
    client.collect_released();
    server.collect_released();
    let (c, s) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    client.install_session(server.local_addr(), c).unwrap();
    server.install_session(client.local_addr(), s).unwrap();
    let len = 4 << 20;
    let request = Payload::Owned(bytes::Bytes::from(vec![0x5a; len]));
    client
        .call(server.local_addr(), request, CallOptions::new())
        .unwrap();
    client.flush();
    let mut rpc = None;
    turn_until(&mut client, &mut server, |_, server| {
        if let Some(Outcome::Request { rpc: r, data, .. }) = server.poll_outcome() {
            // Echoed as owned bytes: the server holds them until the ACK.
            server
                .respond(r, Payload::Owned(data), std::time::Instant::now())
                .unwrap();
            rpc = Some(r);
        }
        rpc.is_some()
    });
    let mut reply = None;
    turn_until(&mut client, &mut server, |client, _| {
        reply = reply.take().or_else(|| client.poll_outcome());
        reply.is_some()
    });
    // The turn that took the response in finished the client's RPC: its
    // request's wire buffer and data wait.
    let released = client.take_released();
    assert_eq!(released.len(), 2, "the request's wire buffer and data");
    assert!(released.bytes() >= 2 * len);
    assert!(client.take_released().is_empty(), "taken once");
    // The server's wait from the turn that took the client's ACK in.
    let mut waiting = smt_proto::Released::default();
    turn_until(&mut client, &mut server, |_, server| {
        waiting = server.take_released();
        !waiting.is_empty()
    });
    assert_eq!(waiting.len(), 2, "the response's wire buffer and data");
    assert_eq!(server.core.server_rpcs(), 0, "freed by the ACK");
    match reply {
        Some(Outcome::Reply {
            result: Ok(data), ..
        }) => assert_eq!(data.len(), len),
        other => panic!("expected the echo, got {other:?}"),
    }
}

/// A reply nobody takes (an async caller's future dropped) waits for
/// the driver to free it after its lock if it is large.
#[test]
fn a_large_reply_nobody_takes_is_left_for_the_driver_to_free() {
    let any = "127.0.0.1:0".parse().unwrap();
    let mut engine = Engine::bind(any, &EndpointConfig::default(), Box::new(SystemClock)).unwrap();
    let large = Bytes::from(vec![1; Payload::POOLED_COPY_LIMIT + 1]);
    engine.discard(Ok(large));
    engine.discard(Ok(Bytes::from_static(b"small: freed at once")));
    engine.discard(Err(Error::Closed));
    assert_eq!(engine.take_discarded().len(), 1);
    assert!(engine.take_discarded().is_empty(), "taken once");
}

/// A clock whose first reading after [`Preempted::arm`] lets `then`
/// run before it returns: the thread that read the time is
/// descheduled, and a peer acts meanwhile.
#[derive(Clone, Default)]
struct Preempted(Arc<Mutex<Option<Hook>>>);

type Hook = Box<dyn FnOnce() + Send>;

impl Preempted {
    fn arm(&self, then: impl FnOnce() + Send + 'static) {
        *self.0.lock().unwrap() = Some(Box::new(then));
    }
}

impl Clock for Preempted {
    fn now(&self) -> Instant {
        let now = Instant::now();
        let then = self.0.lock().unwrap().take();
        if let Some(then) = then {
            then();
        }
        now
    }
}

/// The time a core traced its first `what` packet at.
fn traced_at(engine: &mut Engine, what: fn(&Traced) -> bool) -> Option<Instant> {
    std::iter::from_fn(|| engine.core.poll_trace()).find_map(|e| what(&e.what).then_some(e.at))
}

/// A server descheduled in its turn while the client sends: the
/// request is still stamped after the client sent it (its trace's
/// `received` is never before the client's `sent`), because the turn
/// reads the clock after receiving, not before.
#[test]
fn a_datagram_is_never_stamped_before_it_was_sent() {
    let any = "127.0.0.1:0".parse().unwrap();
    let config = EndpointConfig::default();
    let clock = Preempted::default();
    let mut server = Engine::bind(any, &config, Box::new(clock.clone())).unwrap();
    let client = Engine::bind(any, &config, Box::new(SystemClock)).unwrap();
    let client = Arc::new(Mutex::new(client));
    let (c, s) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    let mut g = client.lock().unwrap();
    g.install_session(server.local_addr(), c).unwrap();
    server.install_session(g.local_addr(), s).unwrap();
    g.core.set_tracing(true);
    server.core.set_tracing(true);
    g.call(server.local_addr(), b"ping".into(), CallOptions::new())
        .unwrap();
    drop(g);
    // The request leaves while the server's turn is under way.
    let sender = client.clone();
    clock.arm(move || {
        // Later than the time just read, on any clock resolution.
        std::thread::sleep(Duration::from_millis(1));
        sender.lock().unwrap().flush();
    });
    let is_data =
        |t: &Traced| matches!(t, Traced::Sent { packet, .. } if packet.ty == PacketType::DATA);
    let mut received = None;
    let start = Instant::now();
    while received.is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no request in a minute"
        );
        server.turn(true);
        received = traced_at(
            &mut server,
            |t| matches!(t, Traced::Received { packet, .. } if packet.ty == PacketType::DATA),
        );
    }
    let sent = traced_at(&mut client.lock().unwrap(), is_data).expect("the request was sent");
    assert!(
        received.unwrap() >= sent,
        "received {:?} before it was sent",
        sent - received.unwrap()
    );
}

/// A call past its own deadline fails with `Error::Timeout` at that
/// deadline (not the protocol's `abort_ticks`), and the server is told
/// at once with RPC_UNKNOWN for the call's message ID.
#[test]
fn a_call_past_its_deadline_times_out_and_tells_the_server() {
    let clock = ManualClock(Arc::new(Mutex::new(Instant::now())));
    let config = EndpointConfig::default();
    let any = "127.0.0.1:0".parse().unwrap();
    let mut engine = Engine::bind(any, &config, Box::new(clock.clone())).unwrap();
    let server = std::net::UdpSocket::bind(any).unwrap();
    let peer = server.local_addr().unwrap();
    let (keys, _) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    engine.install_session(peer, keys).unwrap();
    let timeout = Duration::from_millis(50);
    let call = engine
        .call(peer, b"slow?".into(), CallOptions::new().timeout(timeout))
        .unwrap();
    engine.flush();
    let mut datagram = [0u8; 2048];
    let (_, _) = server.recv_from(&mut datagram).unwrap();
    let id = datagram[20..28].to_vec();
    assert_eq!(
        engine.deadline(),
        Some(clock.now() + config.protocol().tick())
    );
    clock.advance(timeout - Duration::from_millis(1));
    engine.turn(false);
    assert!(engine.poll_outcome().is_none(), "not yet");
    clock.advance(Duration::from_millis(1));
    engine.turn(false);
    match engine.poll_outcome() {
        Some(Outcome::Reply {
            call: c,
            result: Err(Error::Timeout { after }),
        }) => assert_eq!((c, after), (call, timeout)),
        other => panic!("expected the call's timeout, got {other:?}"),
    }
    assert_eq!(engine.outstanding_calls(), 0);
    // The server hears RPC_UNKNOWN for the call's ID (the client's
    // RESEND probes may come first).
    server
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    loop {
        let (n, _) = server.recv_from(&mut datagram).expect("RPC_UNKNOWN sent");
        if datagram[13] == smt_proto::wire::PacketType::RPC_UNKNOWN.0 {
            assert_eq!(&datagram[20..28], &id[..]);
            assert_eq!(n, 28 + 16, "header and MAC");
            return;
        }
    }
}
