//! The classes of hostile traffic (issue #11 item 6, issue #22), what each
//! sends, and what is meant to bound its effect on the server.

use std::net::SocketAddrV4;

use smt_relay::SplitMix64;

use crate::flood::{Shot, SpoofFrom, Via};
use crate::{forge, icmp, netns};

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
    /// (h) PSK hellos from 60,000 spoofed sources at full speed; the
    /// answers draw ICMP errors back to the server's socket.
    SpoofedPsk,
    /// (i) TLS ClientHellos from 60,000 spoofed sources at full speed.
    SpoofedTls,
    /// (j) Forged ICMP port and host unreachables quoting datagrams "from"
    /// the server to 60,000 addresses.
    ForgedIcmp,
    /// (k) Keyless PSK sessions from real sockets that follow RETRY.
    SessionFill,
    /// (l) PSK handshakes held open by sockets that follow RETRY and send a
    /// byte every 60 ms.
    HoldPsk,
    /// (m) TLS handshakes held open the same way.
    HoldTls,
    /// (n) Idle and slowloris connections to `--metrics`.
    MetricsSlowloris,
}

/// Distinct spoofed sources of the full-speed floods and forged ICMP.
pub const SPOOFED_SOURCES: u32 = 60_000;

impl Class {
    /// Every attack class, in the tables' order (amplification aside).
    pub const ATTACKS: [Class; 13] = [
        Class::Random,
        Class::Absurd,
        Class::Control,
        Class::Hellos,
        Class::Huge,
        Class::ClientHello,
        Class::SpoofedPsk,
        Class::SpoofedTls,
        Class::ForgedIcmp,
        Class::SessionFill,
        Class::HoldPsk,
        Class::HoldTls,
        Class::MetricsSlowloris,
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
            Self::SpoofedPsk => "(h) spoofed PSK hello flood",
            Self::SpoofedTls => "(i) spoofed TLS ClientHello flood",
            Self::ForgedIcmp => "(j) forged ICMP unreachables",
            Self::SessionFill => "(k) keyless session fill (follows RETRY)",
            Self::HoldPsk => "(l) PSK handshakes held open (follows RETRY)",
            Self::HoldTls => "(m) TLS handshakes held open (follows RETRY)",
            Self::MetricsSlowloris => "(n) metrics slowloris",
        }
    }

    /// The command-line name (`--classes`), also the name in `CHECK` lines.
    pub fn id(self) -> String {
        use clap::ValueEnum as _;
        self.to_possible_value()
            .map_or_else(String::new, |v| v.get_name().to_string())
    }

    /// What is meant to hold this class's effect on the server: the
    /// mechanism, and the issue whose fix provides it.
    pub fn bound(self) -> &'static str {
        match self {
            Self::Random | Self::Absurd | Self::Control => {
                "parsed and dropped with a named reason before any state (#11)"
            }
            Self::Hellos | Self::ClientHello => {
                "stateless RETRY past 64 handshakes; unvalidated sessions capped (1024) and expiring (#11)"
            }
            Self::Huge => "buffers reserved only for authenticated segments (#11)",
            Self::Amplification => "≤ 3× the bytes received, to an unvalidated address (#11)",
            Self::SpoofedPsk | Self::SpoofedTls => {
                "RETRY (#11); the error queue drained every turn, bounded per turn and always resumed (#22 fix 1)"
            }
            Self::ForgedIcmp => {
                "the error queue drained every turn; ICMP about unproven addresses ends nobody else's calls (#22 fix 1)"
            }
            Self::SessionFill => {
                "sessions unused by their peer stay on the unvalidated budget and expire; per-peer state within a configured total (#22 fix 2)"
            }
            Self::HoldPsk | Self::HoldTls => {
                "a total deadline per handshake, quotas per address and /24, the slowest displaced when full (#22 fix 3)"
            }
            Self::MetricsSlowloris => {
                "hyper: head within 5 s, connection within 10 s, 64 connections, the oldest closed (#22 fix 5)"
            }
        }
    }

    /// Whether the server under this class runs TLS (else the PSK nonce
    /// exchange).
    pub fn tls(self) -> bool {
        matches!(self, Self::ClientHello | Self::SpoofedTls | Self::HoldTls)
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

    /// Whether the class cannot run without raw sockets (whole forged IPv4
    /// packets, or tens of thousands of sources at full speed).
    pub fn needs_raw(self) -> bool {
        matches!(self, Self::SpoofedPsk | Self::SpoofedTls | Self::ForgedIcmp)
    }

    /// Where this class's spoofed sources come from.
    pub fn spoof_from(self, in_netns: bool) -> SpoofFrom {
        match (self, in_netns) {
            (Self::SpoofedPsk | Self::SpoofedTls | Self::ForgedIcmp, true) => {
                SpoofFrom::Pool(SPOOFED_SOURCES)
            }
            (Self::SpoofedPsk | Self::SpoofedTls | Self::ForgedIcmp, false) => {
                SpoofFrom::LoopbackPool(SPOOFED_SOURCES)
            }
            _ => SpoofFrom::AnyLoopback,
        }
    }
}

/// The next shots of one class.
#[derive(Debug)]
pub struct Generator {
    class: Class,
    server: SocketAddrV4,
    port: u16,
    turn: usize,
    pool: usize,
    next_ids: Vec<u64>,
    client_hellos: Vec<Vec<Vec<u8>>>,
    /// Where forged ICMP says the server's datagrams went.
    icmp_about: SpoofFrom,
}

impl Generator {
    /// `client_hellos`: HANDSHAKE packets of real ClientHellos, for the
    /// ClientHello classes; `icmp_about`: the addresses forged ICMP errors
    /// name as the server's destinations.
    pub fn new(
        class: Class,
        server: SocketAddrV4,
        pool: usize,
        client_hellos: Vec<Vec<Vec<u8>>>,
        icmp_about: SpoofFrom,
    ) -> Self {
        Self {
            class,
            server,
            port: server.port(),
            turn: 0,
            pool,
            next_ids: vec![2; pool],
            client_hellos,
            icmp_about,
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
            Class::ClientHello | Class::SpoofedTls => {
                let n = self.turn % self.client_hellos.len().max(1);
                Shot {
                    via: Via::Spoofed,
                    datagrams: self.client_hellos.get(n).cloned().unwrap_or_default(),
                }
            }
            Class::SpoofedPsk => one(Via::Spoofed, forge::psk_hello(rng, port)),
            Class::ForgedIcmp => one(Via::RawIp, self.forged_icmp(rng)),
            // Not generated: stateful attackers of their own.
            Class::Amplification
            | Class::SessionFill
            | Class::HoldPsk
            | Class::HoldTls
            | Class::MetricsSlowloris => one(via, forge::psk_hello(rng, port)),
        }
    }

    /// A port unreachable from the destination itself (three in four) or
    /// a host unreachable from a router, about a 40-byte SMT packet the
    /// server "sent" to one of the pool's addresses.
    fn forged_icmp(&self, rng: &mut SplitMix64) -> Vec<u8> {
        let to = match self.icmp_about {
            SpoofFrom::Pool(n) => {
                netns::pool_source(rng.below(u64::from(n)) as u32, n, rng.next_u64())
            }
            _ => {
                let n = SPOOFED_SOURCES;
                let i = rng.below(u64::from(n)) as u32;
                let ip = u32::from(std::net::Ipv4Addr::new(127, 1, 0, 0))
                    + (i / 250) * 256
                    + 1
                    + i % 250;
                SocketAddrV4::new(ip.into(), 1024 + (rng.next_u64() % 64_000) as u16)
            }
        };
        let quoted = forge::handshake(to.port(), forge::KIND_PSK_NONCE, 0, &[]);
        if rng.below(4) == 0 {
            let router = netns::Realm::HostUnreachable.address(rng.below(1024) as u32 * 254);
            icmp::unreachable(router, self.server, to, icmp::HOST_UNREACHABLE, &quoted)
        } else {
            icmp::unreachable(*to.ip(), self.server, to, icmp::PORT_UNREACHABLE, &quoted)
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
    let streams = client_hello_streams(tls, server_name, n)?;
    Ok(streams
        .iter()
        .map(|s| forge::handshake_stream(port, forge::KIND_TLS13, s))
        .collect())
}

/// The handshake streams (TLS records) of `n` real ClientHellos.
pub fn client_hello_streams(
    tls: &smt_tls::TlsClient,
    server_name: &str,
    n: usize,
) -> Result<Vec<Vec<u8>>, String> {
    (0..n)
        .map(|_| {
            let mut hs = tls
                .handshake(server_name)
                .map_err(|e| format!("cannot start a TLS client handshake: {e}"))?;
            let mut stream = Vec::new();
            hs.write(&mut stream);
            Ok(stream)
        })
        .collect()
}
