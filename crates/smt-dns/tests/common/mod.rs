//! Helpers shared by the integration tests.

use std::net::SocketAddr;

use smt_dns::TicketDnsServer;

/// The zone every test server is authoritative for.
pub const ZONE: &str = "smt.test";

/// A host inside [`ZONE`].
pub const HOST: &str = "server.smt.test";

/// A ticket server on a free loopback port.
pub fn server() -> TicketDnsServer {
    let bind: SocketAddr = "127.0.0.1:0".parse().unwrap();
    TicketDnsServer::spawn(bind, ZONE).expect("spawn ticket DNS server on loopback")
}

/// `len` pseudo-random bytes from `seed` (xorshift64*), standing in for a sealed ticket.
pub fn random_ticket(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 56) as u8
        })
        .collect()
}
