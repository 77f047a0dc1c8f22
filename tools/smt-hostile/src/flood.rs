//! Sending hostile datagrams at a fixed rate (or as fast as one thread
//! can), from a pool of bound sockets (whose replies are counted), from
//! spoofed sources (raw IPv4 with a made-up source address and port, or a
//! fresh socket on that address per datagram when raw sockets are not
//! permitted), or as whole forged IPv4 packets.

use std::io::ErrorKind;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use smt_relay::SplitMix64;

use crate::{icmp, netns};

/// How spoofed datagrams leave.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SpoofMode {
    /// Raw sockets when permitted, otherwise fresh sockets.
    Auto,
    /// Raw IPv4 sockets with a forged source (needs CAP_NET_RAW).
    Raw,
    /// A fresh UDP socket bound to a random 127.0.0.0/8 address per
    /// datagram (real sources, but every one new).
    Sockets,
}

/// Where one shot of datagrams comes from.
#[derive(Clone, Copy, Debug)]
pub enum Via {
    /// Pool socket number `n` (wrapped to the pool's size).
    Pool(usize),
    /// A new spoofed source, the same for every datagram of the shot.
    Spoofed,
    /// Whole IPv4 packets, headers and all, through the raw socket.
    RawIp,
}

/// Which addresses spoofed datagrams claim to come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpoofFrom {
    /// Any address in 127.1.0.0 – 127.254.255.255 and any port.
    AnyLoopback,
    /// One of this many distinct addresses, spread over the network
    /// namespace's realms (`netns::Realm`), any port.
    Pool(u32),
    /// One of this many distinct loopback addresses (127.1.0.1 on), any
    /// port: [`SpoofFrom::Pool`] without a network namespace.
    LoopbackPool(u32),
}

/// Datagrams sent together from one source.
#[derive(Debug)]
pub struct Shot {
    pub via: Via,
    pub datagrams: Vec<Vec<u8>>,
}

/// What a flood sent and what came back to its pool sockets.
#[derive(Clone, Copy, Debug, Default)]
pub struct Tally {
    pub sent: u64,
    pub sent_bytes: u64,
    pub send_errors: u64,
    pub back: u64,
    pub back_bytes: u64,
    pub elapsed: Duration,
    /// Datagrams the sender fell behind its rate by and skipped.
    pub skipped: u64,
}

/// The attacker's sockets for one class.
#[derive(Debug)]
pub struct Sources {
    pool: Vec<UdpSocket>,
    spoofer: Spoofer,
    from: SpoofFrom,
    target: SocketAddrV4,
}

impl Sources {
    /// `pool` sockets on distinct loopback addresses 127.0.2.1, 127.0.2.2,
    /// ... (so the server sees distinct peers) and a spoofer.
    pub fn new(
        target: SocketAddr,
        pool: usize,
        spoof: SpoofMode,
        from: SpoofFrom,
    ) -> Result<Self, String> {
        let SocketAddr::V4(target) = target else {
            return Err("the server must have an IPv4 address".into());
        };
        let pool = (0..pool)
            .map(|i| {
                let ip = Ipv4Addr::new(127, 0, 2 + (i / 250) as u8, 1 + (i % 250) as u8);
                let s = UdpSocket::bind(SocketAddrV4::new(ip, 0))
                    .map_err(|e| format!("cannot bind an attacker socket on {ip}: {e}"))?;
                s.set_nonblocking(true)
                    .map_err(|e| format!("cannot make a socket non-blocking: {e}"))?;
                Ok(s)
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(Self {
            pool,
            spoofer: Spoofer::new(spoof)?,
            from,
            target,
        })
    }

    /// How spoofed datagrams leave, and from where.
    pub fn spoof_kind(&self) -> String {
        let how = if self.spoofer.raw.is_some() {
            "raw IPv4"
        } else {
            "a fresh socket per datagram"
        };
        let from = match self.from {
            SpoofFrom::AnyLoopback => "random 127/8 sources".to_string(),
            SpoofFrom::Pool(n) => format!("{n} sources in 10/8"),
            SpoofFrom::LoopbackPool(n) => format!("{n} sources in 127/8"),
        };
        format!("{how}, {from}")
    }

    /// The pool's size.
    pub fn pool_len(&self) -> usize {
        self.pool.len()
    }

    /// Sends one shot; counts into `tally`.
    pub fn send(&self, rng: &mut SplitMix64, shot: &Shot, tally: &mut Tally) {
        let result = match shot.via {
            Via::Pool(n) if !self.pool.is_empty() => {
                let socket = &self.pool[n % self.pool.len()];
                shot.datagrams
                    .iter()
                    .try_for_each(|d| socket.send_to(d, self.target).map(|_| ()))
            }
            Via::RawIp => self.spoofer.send_ip(self.target, &shot.datagrams),
            _ => {
                let src = spoofed_source(rng, self.from);
                self.spoofer.send(src, self.target, &shot.datagrams)
            }
        };
        let bytes: usize = shot.datagrams.iter().map(Vec::len).sum();
        tally.sent += shot.datagrams.len() as u64;
        tally.sent_bytes += bytes as u64;
        if result.is_err() {
            tally.send_errors += 1;
        }
    }

    /// Reads everything waiting on the pool sockets; counts into `tally`.
    pub fn drain(&self, tally: &mut Tally) {
        let mut buf = [0u8; 65_536];
        for socket in &self.pool {
            while let Ok((n, _)) = socket.recv_from(&mut buf) {
                tally.back += 1;
                tally.back_bytes += n as u64;
            }
        }
    }
}

#[derive(Debug)]
struct Spoofer {
    raw: Option<Socket>,
}

impl Spoofer {
    fn new(mode: SpoofMode) -> Result<Self, String> {
        let raw = match mode {
            SpoofMode::Sockets => None,
            SpoofMode::Auto => raw_socket().ok(),
            SpoofMode::Raw => Some(raw_socket().map_err(|e| {
                format!("raw sockets are not permitted here ({e}); use --spoof sockets")
            })?),
        };
        Ok(Self { raw })
    }

    fn send(
        &self,
        src: SocketAddrV4,
        to: SocketAddrV4,
        datagrams: &[Vec<u8>],
    ) -> std::io::Result<()> {
        match &self.raw {
            Some(raw) => {
                let dst = SockAddr::from(SocketAddrV4::new(*to.ip(), 0));
                datagrams
                    .iter()
                    .try_for_each(|d| raw.send_to(&icmp::ip_udp(src, to, d), &dst).map(|_| ()))
            }
            None => {
                let socket = UdpSocket::bind(SocketAddrV4::new(*src.ip(), 0))?;
                datagrams
                    .iter()
                    .try_for_each(|d| socket.send_to(d, to).map(|_| ()))
            }
        }
    }

    /// Sends whole IPv4 packets (to `to`'s address) through the raw socket.
    fn send_ip(&self, to: SocketAddrV4, packets: &[Vec<u8>]) -> std::io::Result<()> {
        let Some(raw) = &self.raw else {
            return Err(std::io::Error::new(
                ErrorKind::PermissionDenied,
                "forged IPv4 packets need a raw socket",
            ));
        };
        let dst = SockAddr::from(SocketAddrV4::new(*to.ip(), 0));
        packets
            .iter()
            .try_for_each(|p| raw.send_to(p, &dst).map(|_| ()))
    }
}

/// `IPPROTO_RAW`: a send-only raw socket whose packets carry their own IPv4
/// header (`IP_HDRINCL` implied), whatever their protocol; unlike a raw UDP
/// socket it receives nothing, so it is not handed a copy of every UDP
/// datagram of the flood.
const IPPROTO_RAW: i32 = 255;

fn raw_socket() -> std::io::Result<Socket> {
    let s = Socket::new(Domain::IPV4, Type::RAW, Some(Protocol::from(IPPROTO_RAW)))?;
    s.set_header_included_v4(true)?;
    Ok(s)
}

/// Whether classes that need raw sockets can run with `mode`.
pub fn raw_permitted(mode: SpoofMode) -> bool {
    mode != SpoofMode::Sockets && raw_socket().is_ok()
}

/// A source for one spoofed shot.
fn spoofed_source(rng: &mut SplitMix64, from: SpoofFrom) -> SocketAddrV4 {
    match from {
        SpoofFrom::AnyLoopback => random_source(rng),
        SpoofFrom::Pool(n) => {
            let i = rng.below(u64::from(n.max(1))) as u32;
            netns::pool_source(i, n, rng.next_u64())
        }
        SpoofFrom::LoopbackPool(n) => {
            let i = rng.below(u64::from(n.max(1))) as u32;
            let ip = u32::from(Ipv4Addr::new(127, 1, 0, 0)) + (i / 250) * 256 + 1 + i % 250;
            let port = 1024 + (rng.next_u64() % (65_536 - 1024)) as u16;
            SocketAddrV4::new(Ipv4Addr::from(ip), port)
        }
    }
}

/// A source address in 127.1.0.0 – 127.254.255.255 (never 127.0.x.x, where
/// the legitimate clients and the pool live) and a port from 1024 up.
fn random_source(rng: &mut SplitMix64) -> SocketAddrV4 {
    let v = rng.next_u64();
    let ip = Ipv4Addr::new(
        127,
        1 + (v % 254) as u8,
        (v >> 8) as u8,
        1 + ((v >> 16) % 254) as u8,
    );
    let port = 1024 + ((v >> 32) % (65_536 - 1024)) as u16;
    SocketAddrV4::new(ip, port)
}

/// Shots sent between two looks at the clock at full speed.
const FULL_SPEED_BURST: u64 = 256;

/// Sends `next()`'s shots at `pps` datagrams a second (0: as fast as this
/// thread can) for `duration` or until `stop`, draining the pool's replies
/// as it goes.
pub fn run(
    sources: &Sources,
    rng: &mut SplitMix64,
    pps: u32,
    duration: Duration,
    stop: &AtomicBool,
    next: &mut dyn FnMut(&mut SplitMix64) -> Shot,
) -> Tally {
    let mut tally = Tally::default();
    let start = Instant::now();
    let burst_cap = u64::from(pps / 20).max(1);
    while !stop.load(Ordering::Relaxed) {
        let elapsed = start.elapsed();
        if elapsed >= duration {
            break;
        }
        if pps == 0 {
            for _ in 0..FULL_SPEED_BURST {
                let shot = next(rng);
                sources.send(rng, &shot, &mut tally);
            }
            sources.drain(&mut tally);
            continue;
        }
        let due = (elapsed.as_secs_f64() * f64::from(pps)) as u64;
        let owed = due.saturating_sub(tally.sent + tally.skipped);
        if owed > burst_cap {
            tally.skipped += owed - burst_cap;
        }
        let mut budget = owed.min(burst_cap);
        while budget > 0 {
            let shot = next(rng);
            let n = shot.datagrams.len().max(1) as u64;
            sources.send(rng, &shot, &mut tally);
            budget = budget.saturating_sub(n);
        }
        sources.drain(&mut tally);
        std::thread::sleep(Duration::from_micros(500));
    }
    tally.elapsed = start.elapsed();
    // Replies still on their way.
    std::thread::sleep(Duration::from_millis(20));
    sources.drain(&mut tally);
    tally
}

/// Whether an I/O error only says "nothing to read".
pub fn would_block(e: &std::io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
}
