//! The flood classes of issue #11 item 6 and the datagrams each sends.

use smt_sim::SplitMix64;

use crate::flood::{Shot, Via};
use crate::forge;

/// A class of hostile traffic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum Class {
    /// (a) Random datagrams (random length and bytes) from 64 addresses.
    Random,
    /// (b) Parseable SMT headers with absurd fields, from 64 addresses
    /// that each opened a PSK exchange first.
    Absurd,
    /// (c) Every control packet type, forged (random or no MAC), from 64
    /// addresses that each opened a PSK exchange first.
    Control,
    /// (d) Keyless PSK hellos (and a few other handshake openings), each
    /// from a new spoofed source address and port.
    Hellos,
    /// (e) First DATA packets of new 64 MiB requests on 128 keyless PSK
    /// sessions.
    Huge,
    /// (f) TLS 1.3 ClientHellos (a real client's) from new spoofed sources
    /// against a TLS server.
    ClientHello,
    /// (g) Amplification: each spoofable packet type from its own socket,
    /// bytes back ÷ bytes sent.
    Amplification,
}

impl Class {
    /// Every flood class, in the order (amplification aside).
    pub const FLOODS: [Class; 6] = [
        Class::Random,
        Class::Absurd,
        Class::Control,
        Class::Hellos,
        Class::Huge,
        Class::ClientHello,
    ];

    /// The row name in the tables.
    pub fn label(self) -> &'static str {
        match self {
            Self::Random => "(a) random datagrams",
            Self::Absurd => "(b) absurd headers",
            Self::Control => "(c) forged control",
            Self::Hellos => "(d) keyless PSK hellos",
            Self::Huge => "(e) 64 MiB first DATA",
            Self::ClientHello => "(f) TLS ClientHellos",
            Self::Amplification => "(g) amplification",
        }
    }

    /// Whether the server under this class runs TLS (else the PSK nonce
    /// exchange).
    pub fn tls(self) -> bool {
        self == Self::ClientHello
    }

    /// Attacker sockets with real addresses whose replies are counted.
    pub fn pool(self) -> usize {
        match self {
            Self::Random | Self::Absurd | Self::Control => 64,
            Self::Huge => 128,
            _ => 0,
        }
    }

    /// Whether each pool socket opens a PSK exchange before the flood, so
    /// the flood reaches a session (whose keys the attacker lacks).
    pub fn primed(self) -> bool {
        matches!(self, Self::Absurd | Self::Control | Self::Huge)
    }
}

/// The next shots of one class.
#[derive(Debug)]
pub struct Generator {
    class: Class,
    port: u16,
    turn: usize,
    pool: usize,
    next_ids: Vec<u64>,
    client_hellos: Vec<Vec<Vec<u8>>>,
}

impl Generator {
    /// `client_hellos`: HANDSHAKE packets of real ClientHellos, for
    /// [`Class::ClientHello`].
    pub fn new(class: Class, port: u16, pool: usize, client_hellos: Vec<Vec<Vec<u8>>>) -> Self {
        Self {
            class,
            port,
            turn: 0,
            pool,
            next_ids: vec![2; pool],
            client_hellos,
        }
    }

    /// The next shot.
    pub fn next(&mut self, rng: &mut SplitMix64) -> Shot {
        self.turn = self.turn.wrapping_add(1);
        let via = Via::Pool(self.turn);
        let port = self.port;
        let one = |via, d| Shot {
            via,
            datagrams: vec![d],
        };
        match self.class {
            Class::Random => one(via, forge::random_datagram(rng)),
            Class::Absurd => one(via, forge::absurd(rng, port)),
            Class::Control => one(via, forge::forged_control(rng, port)),
            Class::Hellos => {
                let d = match rng.below(10) {
                    0 => forge::other_opening(rng, port, forge::KIND_TLS13, 300),
                    1 => forge::other_opening(rng, port, forge::KIND_SMT_TICKET, 300),
                    _ => forge::psk_hello(rng, port),
                };
                one(Via::Spoofed, d)
            }
            Class::Huge => {
                let n = self.turn % self.pool.max(1);
                let id = self.next_ids.get(n).copied().unwrap_or(2);
                if let Some(slot) = self.next_ids.get_mut(n) {
                    *slot = id + 2;
                }
                let d = forge::first_data(rng, port, id, forge::HUGE_MESSAGE, forge::MSS);
                one(Via::Pool(n), d)
            }
            Class::ClientHello => {
                let n = self.turn % self.client_hellos.len().max(1);
                Shot {
                    via: Via::Spoofed,
                    datagrams: self.client_hellos.get(n).cloned().unwrap_or_default(),
                }
            }
            Class::Amplification => one(via, forge::psk_hello(rng, port)),
        }
    }
}

/// HANDSHAKE packets of `n` real TLS 1.3 ClientHellos (rustls, the
/// client's default groups), as a client of `server_name` would send them.
pub fn client_hellos(
    tls: &smt_tls::TlsClient,
    server_name: &str,
    port: u16,
    n: usize,
) -> Result<Vec<Vec<Vec<u8>>>, String> {
    (0..n)
        .map(|_| {
            let mut hs = tls
                .handshake(server_name)
                .map_err(|e| format!("cannot start a TLS client handshake: {e}"))?;
            let mut stream = Vec::new();
            hs.write(&mut stream);
            Ok(forge::handshake_stream(port, forge::KIND_TLS13, &stream))
        })
        .collect()
}
