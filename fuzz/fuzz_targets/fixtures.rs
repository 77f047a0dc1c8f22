//! Keys and servers the targets share, made once per process (certificate
//! and ticket signing are far too slow to repeat per input).

// Each target uses some of the fixtures.
#![allow(dead_code)]

use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

use smt_handshake::{KeyPool, ReplayCache, StaticKey, Ticket, VerifiedTicket, ZeroRttServer};
use smt_tls::certs::Ca;
use smt_tls::TlsServer;

/// The name every certificate and ticket here is for.
pub const SERVER_NAME: &str = "server.fuzz.test";

pub struct Fixture {
    pub tls: TlsServer,
    pub zero_rtt: Arc<ZeroRttServer>,
    pub verified: VerifiedTicket,
    pub pool: KeyPool,
    /// The time every check is made at: the ticket stays valid however
    /// long a run lasts.
    pub now: SystemTime,
}

pub fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(make)
}

fn make() -> Fixture {
    let ca = Ca::generate("SMT fuzz CA").expect("CA");
    let leaf = ca.issue(&[SERVER_NAME], false).expect("leaf certificate");
    let tls = TlsServer::new(leaf.chain_pem().as_bytes(), leaf.key_pem().as_bytes(), None)
        .expect("TLS server");
    let started = SystemTime::now();
    let key = StaticKey::generate();
    let ticket = Ticket::issue(
        &key,
        &leaf.chain_der(),
        leaf.key_der(),
        SERVER_NAME,
        started,
        Duration::from_secs(3600),
    )
    .expect("ticket");
    // Checks are made a little after the server's start, so hellos stamped
    // then are fresh and not from before the start.
    let now = started + Duration::from_secs(2);
    let verified = ticket
        .verify(ca.cert_der(), SERVER_NAME, now)
        .expect("verified ticket");
    let pool = KeyPool::new(4);
    let zero_rtt = ZeroRttServer::new(
        key,
        ticket,
        Arc::new(KeyPool::new(4)),
        ReplayCache::new(1 << 16),
    )
    .expect("0-RTT server");
    Fixture {
        tls,
        zero_rtt: Arc::new(zero_rtt),
        verified,
        pool,
        now,
    }
}

/// `hello` with the ticket hash field (bytes 4..36 of a ClientHello0) set
/// to the server's, so arbitrary hellos get past "unknown ticket", and with
/// `stamp` its client time (bytes 101..109) set to the fixture's `now`, so
/// they get past the freshness checks too.
pub fn naming_our_ticket(hello: &[u8], stamp: bool) -> Vec<u8> {
    let f = fixture();
    let mut hello = hello.to_vec();
    if hello.len() >= 36 {
        hello[4..36].copy_from_slice(&f.verified.hash());
    }
    if stamp && hello.len() >= 109 {
        let millis = f
            .now
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        hello[101..109].copy_from_slice(&millis.to_be_bytes());
    }
    hello
}
