//! Session establishment fed arbitrary bytes. Byte 0 (bits 0-1) picks:
//! - 0, 1: HANDSHAKE packets into a server endpoint with a scripted
//!   handshake (`smt_proto::fuzzing::handshake_packets`: stream reassembly,
//!   ACKs, retransmission, restarts, alerts, early data);
//! - 2: the rest as the client's first flight into our rustls TLS 1.3
//!   server, obtained through `smt_proto::HandshakeAcceptor`, delivered in
//!   chunks of `1 << (byte 0 >> 4)` bytes;
//! - 3: the rest as the stream into the 0-RTT SMT-ticket server handshake,
//!   with ticket hash and time set to the server's when bit 2 is set.
//!
//! Handshakes must return errors or keys, never panic; the TLS server must
//! never produce keys from a client's first flight alone.
#![no_main]

mod fixtures;

use std::net::SocketAddr;

use libfuzzer_sys::fuzz_target;
use smt_proto::{Handshake, HandshakeAcceptor};
use smt_handshake::ZeroRttServerHandshake;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    match selector & 3 {
        0 | 1 => smt_proto::fuzzing::handshake_packets(std::time::Instant::now(), rest),
        2 => tls_first_flight(rest, 1 << (selector >> 4)),
        _ => zero_rtt_stream(rest, selector & 4 != 0),
    }
});

fn tls_first_flight(flight: &[u8], chunk: usize) {
    let mut acceptor = fixtures::fixture().tls.clone();
    let peer: SocketAddr = "192.0.2.1:4000".parse().expect("literal");
    let mut hs = acceptor
        .accept(peer)
        .expect("the TLS server accepts any peer");
    drive(hs.as_mut(), flight, chunk);
    // A client flight cannot finish a server handshake without the
    // client's Finished, which needs the server's answer first.
    assert!(hs.take_keys().is_none(), "TLS server keys from one flight");
}

fn zero_rtt_stream(stream: &[u8], our_ticket: bool) {
    let f = fixtures::fixture();
    let stream = match our_ticket {
        true => fixtures::naming_our_ticket(stream, true),
        false => stream.to_vec(),
    };
    let mut hs = ZeroRttServerHandshake::new(f.zero_rtt.clone(), f.now);
    drive(&mut hs, &stream, 64);
    let _ = hs.take_keys();
}

/// Feeds `bytes` in chunks until the handshake fails, collecting what it
/// answers (an alert, after a failure).
fn drive(hs: &mut dyn Handshake, bytes: &[u8], chunk: usize) {
    let mut out = Vec::new();
    for piece in bytes.chunks(chunk) {
        let failed = hs.read(piece).is_err();
        hs.write(&mut out);
        if failed {
            break;
        }
    }
}
