//! Keys from a handshake that does not prove the peer's address
//! (`Handshake::address_proof`) never replace the session that address
//! already has until a packet under the proving keys arrives: a spoofed
//! first flight leaves the session alone, a genuine restarted peer takes
//! over after one round trip, and keys that can never be proven are
//! refused — unless the endpoint has a retry key: then an address whose
//! opening could never prove it (a 0-RTT hello without forward secrecy)
//! first proves it with a RETRY round trip, and its new session replaces
//! the old one; a spoofer gets only a RETRY sent to the address it
//! claims. Sans-IO, on one virtual instant.

// Tests pick their own starting instant; the core still takes `now`.
#![allow(clippy::disallowed_methods)]

use std::net::SocketAddr;
use std::time::Instant;

use smt_proto::{
    AddressProof, Config, Endpoint, Event, Handshake, HandshakeAcceptor, HandshakeError,
    SessionKeys,
};
use smt_relay::KeyKind;

const SERVER_PORT: u16 = 5000;

fn client_addr() -> SocketAddr {
    "10.0.0.1:4000".parse().unwrap()
}

fn server_addr() -> SocketAddr {
    format!("10.0.0.2:{SERVER_PORT}").parse().unwrap()
}

/// A scripted exchange: the client says "hi", the server answers "ok";
/// keys come out once a side has both spoken and heard.
struct Script {
    says: &'static [u8],
    keys: Option<SessionKeys>,
    said: bool,
    heard: bool,
    proof: AddressProof,
    /// Keys as soon as this side has spoken (a 0-RTT hello's client).
    early: bool,
    /// Speaks first (the client).
    initiator: bool,
}

impl Script {
    fn boxed(says: &'static [u8], keys: SessionKeys, proof: AddressProof) -> Box<Self> {
        Box::new(Self {
            says,
            keys: Some(keys),
            said: false,
            heard: false,
            proof,
            early: false,
            initiator: says == b"hi",
        })
    }
}

impl std::fmt::Debug for Script {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Script")
    }
}

impl Handshake for Script {
    fn read(&mut self, _data: &[u8]) -> Result<(), HandshakeError> {
        self.heard = true;
        Ok(())
    }

    fn write(&mut self, out: &mut Vec<u8>) {
        if !self.said && (self.heard || self.initiator) {
            out.extend_from_slice(self.says);
            self.said = true;
        }
    }

    fn take_keys(&mut self) -> Option<SessionKeys> {
        match self.said && (self.heard || self.early) {
            true => self.keys.take(),
            false => None,
        }
    }

    fn address_proof(&self) -> AddressProof {
        self.proof
    }
}

/// The server side of [`Script`] with keys from `seed`.
struct Acceptor {
    seed: u64,
    proof: AddressProof,
}

impl HandshakeAcceptor for Acceptor {
    fn accept(&mut self, _peer: SocketAddr) -> Option<Box<dyn Handshake>> {
        let keys = KeyKind::Aes128(self.seed).session().1;
        Some(Script::boxed(b"ok", keys, self.proof))
    }
}

/// A server with an established session with the client, and the client.
struct World {
    server: Endpoint,
    client: Endpoint,
    now: Instant,
    executed: Vec<Vec<u8>>,
}

impl World {
    fn new(proof: AddressProof) -> Self {
        let mut server = Endpoint::new(Config {
            local_port: SERVER_PORT,
            ..Config::default()
        })
        .unwrap();
        let mut client = Endpoint::new(Config::default()).unwrap();
        let (ck, sk) = KeyKind::Aes128(1).session();
        client.install_session(server_addr(), ck).unwrap();
        server.install_session(client_addr(), sk).unwrap();
        server.set_handshake_acceptor(Box::new(Acceptor { seed: 2, proof }));
        Self {
            server,
            client,
            now: Instant::now(),
            executed: Vec::new(),
        }
    }

    /// The server answers openings it cannot trust with a stateless RETRY
    /// (the `smt` crate sets a random retry key at bind).
    fn with_retry_key(mut self) -> Self {
        let key = std::sync::Arc::new(smt_proto::sim::KeyedCipher::new(99));
        self.server.set_retry_key(key);
        self
    }

    /// Moves datagrams between `client` and the server until quiet (see
    /// [`settle`]).
    fn settle(&mut self, client: &mut Endpoint, deliver_to_client: bool) {
        settle(
            &mut self.server,
            client,
            self.now,
            deliver_to_client,
            &mut self.executed,
        );
    }

    /// One call from the established client; whether its response came.
    fn established_call(&mut self, data: &[u8]) -> bool {
        let h = self
            .client
            .send_request(self.now, server_addr(), data)
            .unwrap();
        settle(
            &mut self.server,
            &mut self.client,
            self.now,
            true,
            &mut self.executed,
        );
        std::iter::from_fn(|| self.client.poll_event())
            .any(|e| matches!(e, Event::Response { rpc, data: ref r } if rpc == h && r == data))
    }
}

/// Moves datagrams between `client` and `server` (the server's datagrams
/// to the client's address reach `client` only if `deliver_to_client`),
/// answering every request with its bytes, until both are quiet.
fn settle(
    server: &mut Endpoint,
    client: &mut Endpoint,
    now: Instant,
    deliver_to_client: bool,
    executed: &mut Vec<Vec<u8>>,
) {
    let mut buf = vec![0; 2048];
    loop {
        let mut moved = false;
        while let Some(t) = client.poll_transmit(now, &mut buf) {
            server.handle_datagram(now, client_addr(), &buf[..t.len]);
            moved = true;
        }
        while let Some(t) = server.poll_transmit(now, &mut buf) {
            if deliver_to_client && t.destination == client_addr() {
                client.handle_datagram(now, server_addr(), &buf[..t.len]);
            }
            moved = true;
        }
        while let Some(e) = server.poll_event() {
            if let Event::Request { rpc, data } = e {
                server.send_response(now, rpc, &data).unwrap();
                executed.push(data);
                moved = true;
            }
        }
        if !moved {
            return;
        }
    }
}

/// A new client at the established client's address that starts the
/// scripted handshake (its keys from seed 2, as the server's acceptor).
fn restarted_client(now: Instant) -> Endpoint {
    let mut ep = Endpoint::new(Config::default()).unwrap();
    let keys = KeyKind::Aes128(2).session().0;
    let hs = Script::boxed(b"hi", keys, AddressProof::Proven);
    ep.connect(now, server_addr(), hs, smt_proto::HandshakeKind::TLS13);
    ep
}

/// A new client at the established client's address whose handshake gives
/// it keys as soon as its hello is written, as a 0-RTT hello does: its
/// first request travels in the first flight.
fn zero_rtt_client(now: Instant) -> Endpoint {
    let mut ep = Endpoint::new(Config::default()).unwrap();
    let keys = KeyKind::Aes128(2).session().0;
    let mut hs = Script::boxed(b"hi", keys, AddressProof::Proven);
    hs.early = true;
    ep.connect(now, server_addr(), hs, smt_proto::HandshakeKind::TLS13);
    ep
}

#[test]
fn a_spoofed_first_flight_leaves_the_session_alone() {
    for proof in [AddressProof::FirstKeys, AddressProof::Never] {
        let mut w = World::new(proof);
        let now = w.now;
        // The spoofer sends the hello; the server's answer goes to the
        // real client's address, which the spoofer never sees.
        let mut spoofer = restarted_client(now);
        w.settle(&mut spoofer, false);
        assert!(w.established_call(b"still here"), "{proof:?}");
        assert_eq!(w.executed, [b"still here".to_vec()]);
    }
}

#[test]
fn a_restarted_peer_takes_over_once_it_proves_its_address() {
    let mut w = World::new(AddressProof::FirstKeys);
    let now = w.now;
    let mut restarted = restarted_client(now);
    w.settle(&mut restarted, true);
    assert!(matches!(
        restarted.poll_event(),
        Some(Event::Connected { .. })
    ));
    // Its key confirmation proved the address: its calls work now.
    let h = restarted
        .send_request(now, server_addr(), b"after")
        .unwrap();
    w.settle(&mut restarted, true);
    let answered = std::iter::from_fn(|| restarted.poll_event())
        .any(|e| matches!(e, Event::Response { rpc, .. } if rpc == h));
    assert!(answered);
    assert_eq!(w.server.stats().handshakes_completed, 1);
}

#[test]
fn keys_that_can_never_be_proven_are_refused() {
    let mut w = World::new(AddressProof::Never);
    let now = w.now;
    let mut restarted = restarted_client(now);
    w.settle(&mut restarted, true);
    assert_eq!(w.server.stats().handshakes_failed, 1);
    assert_eq!(w.server.stats().handshakes_completed, 0);
}

#[test]
fn a_returning_address_whose_opening_proves_nothing_is_served_after_a_retry() {
    // The port of an earlier session is reused by a new client whose
    // handshake cannot prove its address (as a 0-RTT hello without
    // forward secrecy): it used to be refused, and the new client's calls
    // went unanswered until they timed out.
    let mut w = World::new(AddressProof::Never).with_retry_key();
    let now = w.now;
    let mut returning = restarted_client(now);
    w.settle(&mut returning, true);
    assert_eq!(w.server.stats().retries_sent, 1);
    assert_eq!(w.server.stats().retry_tokens_accepted, 1);
    assert_eq!(w.server.stats().handshakes_failed, 0);
    assert_eq!(w.server.stats().handshakes_completed, 1);
    let h = returning
        .send_request(now, server_addr(), b"new session")
        .unwrap();
    w.settle(&mut returning, true);
    let answered = std::iter::from_fn(|| returning.poll_event())
        .any(|e| matches!(e, Event::Response { rpc, .. } if rpc == h));
    assert!(answered, "the returning address got no answer");
    assert_eq!(w.executed, [b"new session".to_vec()]);
}

#[test]
fn a_spoofed_opening_from_a_returning_address_costs_one_retry() {
    let mut w = World::new(AddressProof::Never).with_retry_key();
    let now = w.now;
    let mut spoofer = restarted_client(now);
    w.settle(&mut spoofer, false);
    let stats = w.server.stats();
    assert_eq!(stats.retries_sent, 1, "one 60-byte RETRY, to the victim");
    assert_eq!(stats.handshakes_completed + stats.handshakes_failed, 0);
    assert!(w.established_call(b"still here"));
    assert_eq!(w.executed, [b"still here".to_vec()]);
}

#[test]
fn a_returning_zero_rtt_client_sends_its_first_flight_again_behind_the_token() {
    // The 0-RTT tail of `smt bench-handshake`: a new client on a reused
    // port sends its request with its hello; the server's old session for
    // the address refuses the request's records and the hello gets a
    // RETRY. The request used to wait for the client's resend timer and an
    // RPC_UNKNOWN restart (milliseconds); now it follows the token
    // opening at once. Everything here happens at one virtual instant, so
    // no timer can fire: the response comes from the RETRY round alone.
    let mut w = World::new(AddressProof::Never).with_retry_key();
    let now = w.now;
    let mut returning = zero_rtt_client(now);
    let h = returning
        .send_request(now, server_addr(), b"first flight")
        .unwrap();
    w.settle(&mut returning, true);
    assert_eq!(w.server.stats().retries_sent, 1);
    assert_eq!(w.server.stats().retry_tokens_accepted, 1);
    let answered = std::iter::from_fn(|| returning.poll_event())
        .any(|e| matches!(e, Event::Response { rpc, .. } if rpc == h));
    assert!(answered, "the first flight's request waits for a timer");
    assert_eq!(w.executed, [b"first flight".to_vec()]);
    let stats = returning.stats();
    assert_eq!((stats.requests_restarted, stats.resends_sent), (0, 0));
}

/// docs/protocol.md § 4, *Stateless retry*, byte for byte: after a RETRY
/// the opening carries `token length || token` before the stream bytes,
/// inside the same 1,432-byte data limit (1,472-byte datagrams), so the
/// first piece holds 1 + 20 + 1,411 bytes and a 1,424-byte opening (a TLS
/// ClientHello with X25519MLKEM768, docs/handshake.md § 8.1) takes a
/// second packet. `offset` and the peer's `ack` count stream bytes only.
#[test]
fn after_a_retry_the_first_piece_is_token_then_1411_stream_bytes() {
    let mut w = World::new(AddressProof::Never).with_retry_key();
    let now = w.now;
    let hello: &'static [u8] = Box::leak((0..1424).map(|i| i as u8).collect::<Box<[u8]>>());
    let mut client = Endpoint::new(Config::default()).unwrap();
    let keys = KeyKind::Aes128(2).session().0;
    let mut hs = Script::boxed(hello, keys, AddressProof::Proven);
    hs.initiator = true;
    client.connect(now, server_addr(), hs, smt_proto::HandshakeKind::TLS13);
    let mut buf = vec![0xee; 2048];
    while let Some(t) = client.poll_transmit(now, &mut buf) {
        w.server.handle_datagram(now, client_addr(), &buf[..t.len]);
    }
    let t = w.server.poll_transmit(now, &mut buf).expect("a RETRY");
    assert_eq!((t.len, buf[39]), (60, 0x01), "a 60-byte RETRY");
    let token = buf[40..60].to_vec();
    client.handle_datagram(now, server_addr(), &buf[..60]);

    // Written over a poison byte, so a byte the emitter forgot shows.
    buf.fill(0xee);
    let first = client
        .poll_transmit(now, &mut buf)
        .expect("the token opening");
    let mut want = vec![
        0x00, 0x00, 0x13, 0x88, // ports: 0 (the client's own is not set), 5000
        0, 0, 0, 0, 0, 0, 0, 0, // segment offset, message length
        0xa0, 0x20, // header length 40, key phase 0; HANDSHAKE
        0, 0, 0, 0, 0, 0, // mss, checksum, resend index
        0, 0, 0, 0, 0, 0, 0, 0, // ID
        0, 0, 0, 0, // offset 0 (stream bytes)
        0, 0, 0, 0, // ack 0
        0x05, 0x98, // len 1432 = 1 + 20 + 1411
        0x00, 0x02, // kind TLS13, flags TOKEN
        20,   // token length
    ];
    want.extend_from_slice(&token);
    want.extend_from_slice(&hello[..1411]);
    assert_eq!(first.len, 1472);
    assert_eq!(buf[..first.len], want[..]);
    let first = buf[..first.len].to_vec();

    buf.fill(0xee);
    let second = client.poll_transmit(now, &mut buf).expect("the rest");
    let mut want = vec![
        0x00, 0x00, 0x13, 0x88, 0, 0, 0, 0, 0, 0, 0, 0, 0xa0, 0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, //
        0x00, 0x00, 0x05, 0x83, // offset 1411: the token is not in the stream
        0, 0, 0, 0, // ack 0
        0x00, 0x0d, // len 13
        0x00, 0x00, // kind TLS13, no flags
    ];
    want.extend_from_slice(&hello[1411..]);
    assert_eq!(buf[..second.len], want[..]);
    let second = buf[..second.len].to_vec();

    // The server acknowledges the whole stream: 1424, not 1445.
    w.server.handle_datagram(now, client_addr(), &first);
    w.server.handle_datagram(now, client_addr(), &second);
    assert_eq!(w.server.stats().retry_tokens_accepted, 1);
    let mut last_ack = None;
    while let Some(t) = w.server.poll_transmit(now, &mut buf) {
        if buf[13] == 0x20 {
            last_ack = Some(u32::from_be_bytes([buf[32], buf[33], buf[34], buf[35]]));
        }
        let _ = t;
    }
    assert_eq!(last_ack, Some(1424));
}

/// One budget per address, but never the old session's: a spoofed
/// opening at an address whose session is validated gets a budget of its
/// own, unvalidated, until its keys make a new session (`docs/protocol.md`
/// § 4). However much the genuine client keeps sending under its session,
/// the held handshake's retransmissions toward the address stay within
/// three times the opening's bytes, and the client is served throughout.
#[test]
fn a_held_handshake_at_a_validated_address_keeps_a_budget_of_its_own() {
    let mut w = World::new(AddressProof::FirstKeys);
    assert!(w.established_call(b"validates the address"));
    let mut spoofer = restarted_client(w.now);
    let mut buf = vec![0; 2048];
    let mut opening = 0;
    while let Some(t) = spoofer.poll_transmit(w.now, &mut buf) {
        opening += t.len;
        w.server
            .handle_datagram(w.now, client_addr(), &buf[..t.len]);
    }
    let is_handshake = |d: &[u8]| {
        smt_proto::wire::Packet::new_checked(d)
            .is_ok_and(|p| p.packet_type() == smt_proto::wire::PacketType::HANDSHAKE)
    };
    let mut handshake_bytes = 0;
    for i in 0..150u32 {
        // A tick, and a call of the genuine client: authenticated packets
        // from the address, under the old session.
        w.now += w.server.config().tick;
        w.server.handle_timeout(w.now);
        let data = format!("call {i}").into_bytes();
        let h = w
            .client
            .send_request(w.now, server_addr(), &data[..])
            .unwrap();
        let mut answered = false;
        loop {
            let mut moved = false;
            while let Some(t) = w.client.poll_transmit(w.now, &mut buf) {
                w.server
                    .handle_datagram(w.now, client_addr(), &buf[..t.len]);
                moved = true;
            }
            while let Some(t) = w.server.poll_transmit(w.now, &mut buf) {
                if is_handshake(&buf[..t.len]) {
                    handshake_bytes += t.len;
                }
                w.client
                    .handle_datagram(w.now, server_addr(), &buf[..t.len]);
                moved = true;
            }
            while let Some(e) = w.server.poll_event() {
                if let Event::Request { rpc, data } = e {
                    w.server.send_response(w.now, rpc, &data).unwrap();
                    moved = true;
                }
            }
            while let Some(e) = w.client.poll_event() {
                answered |= matches!(e, Event::Response { rpc, .. } if rpc == h);
            }
            if !moved {
                break;
            }
        }
        assert!(answered, "call {i} of the genuine client was answered");
    }
    // Without the bound its resend schedule (`resend_ticks`, doubling)
    // would send the flight more than twice again in the 100 ticks before
    // the handshake gives up; the bound allows exactly two.
    assert!(
        opening > 0 && handshake_bytes >= opening,
        "the first flight went"
    );
    assert!(
        handshake_bytes <= 3 * opening,
        "the held handshake sent {handshake_bytes} bytes for a {opening}-byte opening"
    );
}
