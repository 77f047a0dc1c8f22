//! SMT-tickets and the 0-RTT messages. Every input goes through every
//! decoder with round-trip checks (`smt_handshake::fuzzing::decode_everything`:
//! what decodes must encode back to the same bytes). Then byte 0 picks a
//! live check on the rest (bits 0-1):
//! 1. a ClientHello0 to the 0-RTT server, its ticket hash set to the
//!    server's ticket so the checks past "unknown ticket" run (and, with
//!    bit 2, its time set to the server's clock, so the freshness checks
//!    pass and the key exchange and replay cache run);
//! 2. a ServerReply0 to a client that asked for forward secrecy;
//!
//! both must return an error or keys, never panic.
#![no_main]

mod fixtures;

use libfuzzer_sys::fuzz_target;
use smt_handshake::ZeroRttClient;

fuzz_target!(|data: &[u8]| {
    smt_handshake::fuzzing::decode_everything(data);
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let f = fixtures::fixture();
    match selector & 3 {
        1 => {
            let hello = fixtures::naming_our_ticket(rest, selector & 4 != 0);
            let _ = f.zero_rtt.accept(&hello, f.now);
        }
        2 => {
            let (_hello, _keys, client) = ZeroRttClient::start(&f.verified, &f.pool, true);
            let _ = client.finish(rest);
        }
        _ => {}
    }
});
