//! Attackers that own their addresses but hold no key: real UDP sockets on
//! thousands of loopback addresses that answer each RETRY with its token,
//! as anyone who can receive at an address can (`docs/protocol.md` § 4,
//! *Stateless retry*). Two modes:
//!
//! - **Session fill**: each socket sends a PskHello, follows the RETRY,
//!   reads the PskReply (the server now holds a session for the address,
//!   whose keys the attacker cannot derive), acknowledges it and makes way
//!   for a new socket. As many exchanges run at once as there are sockets.
//! - **Hold-open**: each socket opens a handshake (following the RETRY)
//!   and then sends one stream byte every [`TRICKLE`]; a PskHello's 34
//!   bytes done, it acknowledges the server's reply one byte per
//!   [`TRICKLE`] too. A TLS ClientHello (about 1.5 KB) lasts a minute and a
//!   half at that pace. A handshake the server stops answering for
//!   [`STALL`], or whose bytes are all acknowledged, starts over on a new
//!   socket.
//!
//! One thread, one `mio` poll over every socket; per socket a small state
//! record, and a queue of when each one acts next (all delays within a
//! mode are equal, so the queue stays in order by itself).

use std::collections::VecDeque;
use std::io::ErrorKind;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mio::net::UdpSocket;
use mio::{Events, Interest, Poll, Token};
use smt_proto::wire::{first_packet_len, Body, Packet, Repr, HANDSHAKE_RETRY};
use smt_relay::SplitMix64;

use crate::forge::{self, Stream};

/// A holder's pace: one byte per this.
pub const TRICKLE: Duration = Duration::from_millis(60);
/// A handshake the server has sent nothing about for this long (it acks
/// each byte; it resends its reply while that is not all acknowledged)
/// starts over.
pub const STALL: Duration = Duration::from_secs(1);
/// How long a session-fill exchange may take before it is abandoned.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(1);
/// The PskReply's length: a session exists on the server once it came.
const PSK_REPLY_LEN: u32 = 34;
/// A handshake counts as held while the server's last packet about it is
/// this recent.
const HELD_WITHIN: Duration = Duration::from_millis(500);

/// What the sockets do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    SessionFill,
    Hold,
}

/// One keyless attack.
#[derive(Debug)]
pub struct Plan {
    pub mode: Mode,
    pub server: SocketAddr,
    /// HANDSHAKE kind: PSK nonce exchange or TLS 1.3.
    pub kind: u8,
    /// Streams to open with, used in turn (empty: a fresh PskHello each).
    pub streams: Vec<Vec<u8>>,
    /// Sockets at once.
    pub sockets: usize,
    /// Distinct source addresses, used in turn by new sockets.
    pub addresses: usize,
}

/// What the attack did.
#[derive(Clone, Copy, Debug, Default)]
pub struct Tally {
    pub sockets_opened: u64,
    /// RETRYs answered with their token.
    pub retries: u64,
    /// Server replies read whole (PSK: a session now exists on the server).
    pub sessions: u64,
    /// Handshakes started over (stalled, or done).
    pub restarts: u64,
    /// Most handshakes held at once (a packet from the server about it
    /// within the last 0.5 s).
    pub held_peak: usize,
    pub sent: u64,
    pub sent_bytes: u64,
    pub send_errors: u64,
    pub back: u64,
    pub back_bytes: u64,
    pub elapsed: Duration,
}

/// The `n`-th attacker address: 127.100.0.1 on, 250 to a /24.
pub fn attacker_ip(n: usize) -> Ipv4Addr {
    let n = n % (100 * 62_500);
    Ipv4Addr::new(
        127,
        100 + (n / 62_500) as u8,
        ((n / 250) % 250) as u8,
        1 + (n % 250) as u8,
    )
}

/// One socket's handshake.
struct Conn {
    socket: UdpSocket,
    generation: u64,
    stream: Vec<u8>,
    token: Option<Vec<u8>>,
    /// The server has acknowledged `stream[..acked]`.
    acked: u32,
    /// The server's stream received in order so far.
    received: u32,
    /// What we acknowledged of it.
    our_ack: u32,
    replied: bool,
    progress: Instant,
}

/// Runs `plan` until `duration` passes or `stop` is set.
pub fn run(plan: &Plan, rng: &mut SplitMix64, duration: Duration, stop: &AtomicBool) -> Tally {
    match Attack::new(plan, rng) {
        Ok(mut a) => a.run(duration, stop),
        Err(e) => {
            eprintln!("smt-hostile:   keyless attack could not start: {e}");
            Tally::default()
        }
    }
}

struct Attack<'a> {
    plan: &'a Plan,
    rng: &'a mut SplitMix64,
    poll: Poll,
    conns: Vec<Conn>,
    due: VecDeque<(usize, u64, Instant)>,
    next_address: usize,
    next_stream: usize,
    tally: Tally,
}

impl<'a> Attack<'a> {
    fn new(plan: &'a Plan, rng: &'a mut SplitMix64) -> std::io::Result<Self> {
        let mut a = Self {
            plan,
            rng,
            poll: Poll::new()?,
            conns: Vec::with_capacity(plan.sockets),
            due: VecDeque::with_capacity(plan.sockets),
            next_address: 0,
            next_stream: 0,
            tally: Tally::default(),
        };
        let now = Instant::now();
        for i in 0..plan.sockets {
            let conn = a.fresh_conn(i, 0, now)?;
            a.conns.push(conn);
        }
        Ok(a)
    }

    fn run(&mut self, duration: Duration, stop: &AtomicBool) -> Tally {
        let start = Instant::now();
        for i in 0..self.conns.len() {
            self.open(i, start);
        }
        let mut events = Events::with_capacity(1024);
        let mut last_count = start;
        while !stop.load(Ordering::Relaxed) && start.elapsed() < duration {
            let now = Instant::now();
            let wait = self
                .due
                .front()
                .map_or(Duration::from_millis(10), |d| {
                    d.2.saturating_duration_since(now)
                })
                .min(Duration::from_millis(10));
            if self.poll.poll(&mut events, Some(wait)).is_err() {
                continue;
            }
            for event in events.iter() {
                self.read(event.token().0);
            }
            self.act_on_due(Instant::now());
            if last_count.elapsed() >= Duration::from_millis(100) {
                last_count = Instant::now();
                let held = self.held(last_count);
                self.tally.held_peak = self.tally.held_peak.max(held);
            }
        }
        self.tally.elapsed = start.elapsed();
        self.tally
    }

    /// A socket on the next attacker address, registered under token `i`.
    fn fresh_conn(&mut self, i: usize, generation: u64, now: Instant) -> std::io::Result<Conn> {
        let ip = attacker_ip(self.next_address % self.plan.addresses.max(1));
        self.next_address += 1;
        let mut socket = UdpSocket::bind(SocketAddr::V4(SocketAddrV4::new(ip, 0)))?;
        self.poll
            .registry()
            .register(&mut socket, Token(i), Interest::READABLE)?;
        self.tally.sockets_opened += 1;
        let stream = if self.plan.streams.is_empty() {
            forge::psk_hello_stream(self.rng)
        } else {
            self.next_stream += 1;
            self.plan.streams[self.next_stream % self.plan.streams.len()].clone()
        };
        Ok(Conn {
            socket,
            generation,
            stream,
            token: None,
            acked: 0,
            received: 0,
            our_ack: 0,
            replied: false,
            progress: now,
        })
    }

    /// Replaces socket `i` by a new one and opens again.
    fn restart(&mut self, i: usize, now: Instant) {
        self.tally.restarts += 1;
        let generation = self.conns[i].generation + 1;
        let _ = self.poll.registry().deregister(&mut self.conns[i].socket);
        match self.fresh_conn(i, generation, now) {
            Ok(conn) => {
                self.conns[i] = conn;
                self.open(i, now);
            }
            // Out of ports or descriptors: this slot rests, the old socket
            // (deregistered) stays until the end.
            Err(_) => self.tally.send_errors += 1,
        }
    }

    /// The opening: the whole stream (session fill) or its first byte
    /// (hold-open), with the token once a RETRY gave one.
    fn open(&mut self, i: usize, now: Instant) {
        let first = match self.plan.mode {
            Mode::SessionFill => self.conns[i].stream.len(),
            Mode::Hold => 1,
        };
        let c = &self.conns[i];
        let bytes = &c.stream[..first.min(c.stream.len())];
        let port = self.plan.server.port();
        let packet = match &c.token {
            Some(t) => forge::token_opening(port, self.plan.kind, t, bytes),
            None => forge::handshake(port, self.plan.kind, 0, bytes),
        };
        self.send(i, &packet);
        let wait = match self.plan.mode {
            Mode::SessionFill => EXCHANGE_TIMEOUT,
            Mode::Hold => TRICKLE,
        };
        self.due
            .push_back((i, self.conns[i].generation, now + wait));
    }

    fn send(&mut self, i: usize, packet: &[u8]) {
        match self.conns[i].socket.send_to(packet, self.plan.server) {
            Ok(_) => {
                self.tally.sent += 1;
                self.tally.sent_bytes += packet.len() as u64;
            }
            Err(_) => self.tally.send_errors += 1,
        }
    }

    fn act_on_due(&mut self, now: Instant) {
        while let Some(&(i, generation, at)) = self.due.front() {
            if at > now {
                return;
            }
            self.due.pop_front();
            if self.conns[i].generation != generation {
                continue; // restarted since
            }
            match self.plan.mode {
                Mode::SessionFill => self.restart(i, now), // no answer in time
                Mode::Hold => self.trickle(i, now),
            }
        }
    }

    /// One more byte of our stream, or of our acknowledgment of theirs.
    fn trickle(&mut self, i: usize, now: Instant) {
        let c = &self.conns[i];
        if now.duration_since(c.progress) >= STALL {
            return self.restart(i, now);
        }
        let port = self.plan.server.port();
        let total = c.stream.len() as u32;
        let packet = if c.acked < total {
            let at = c.acked as usize;
            match (&c.token, at) {
                (Some(t), 0) => forge::token_opening(port, self.plan.kind, t, &c.stream[..1]),
                _ => {
                    let s = Stream {
                        offset: c.acked,
                        ack: c.our_ack,
                    };
                    forge::handshake_with(port, self.plan.kind, s, 0, &c.stream[at..at + 1])
                }
            }
        } else if c.our_ack < c.received {
            let s = Stream {
                offset: total,
                ack: c.our_ack + 1,
            };
            forge::handshake_with(port, self.plan.kind, s, 0, &[])
        } else if c.received > 0 {
            // Everything acknowledged both ways: the server lets the
            // handshake go soon; hold a new one instead.
            return self.restart(i, now);
        } else {
            // Our stream is all in; the server's answer is yet to come.
            self.due.push_back((i, c.generation, now + TRICKLE));
            return;
        };
        if c.acked >= total {
            self.conns[i].our_ack += 1;
        }
        self.send(i, &packet);
        self.due
            .push_back((i, self.conns[i].generation, now + TRICKLE));
    }

    /// Reads everything waiting on socket `i`.
    fn read(&mut self, i: usize) {
        let mut buf = [0u8; 2048];
        loop {
            let Some(c) = self.conns.get(i) else {
                return;
            };
            let n = match c.socket.recv_from(&mut buf) {
                Ok((n, _)) => n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(_) => continue,
            };
            self.tally.back += 1;
            self.tally.back_bytes += n as u64;
            let mut rest = &buf[..n];
            while !rest.is_empty() {
                let len = first_packet_len(rest, true).unwrap_or(rest.len()).max(1);
                let (packet, tail) = rest.split_at(len.min(rest.len()));
                self.on_packet(i, packet);
                rest = tail;
            }
        }
    }

    fn on_packet(&mut self, i: usize, packet: &[u8]) {
        let Ok(view) = Packet::new_checked(packet) else {
            return;
        };
        let Ok(repr) = Repr::parse(&view) else {
            return;
        };
        let Body::Handshake {
            offset,
            ack,
            flags,
            len,
            ..
        } = repr.body
        else {
            return;
        };
        let now = Instant::now();
        let c = &mut self.conns[i];
        if flags & HANDSHAKE_RETRY != 0 {
            // Only the first RETRY, before anything else came, counts (as
            // for a genuine initiator).
            if c.token.is_some() || c.acked != 0 || c.received != 0 {
                return;
            }
            c.token = Some(view.payload().to_vec());
            c.progress = now;
            // The opening's timer is replaced by the new opening's.
            c.generation += 1;
            self.tally.retries += 1;
            return self.open(i, now);
        }
        // Any packet of the handshake says the server still holds it
        // (while we acknowledge its reply byte by byte, it only resends).
        c.progress = now;
        if ack > c.acked && ack as usize <= c.stream.len() {
            c.acked = ack;
        }
        let end = offset.saturating_add(u32::from(len));
        if offset <= c.received && end > c.received {
            c.received = end;
        }
        let replied = c.received >= PSK_REPLY_LEN && !c.replied && self.plan.streams.is_empty();
        if !replied {
            return;
        }
        c.replied = true;
        self.tally.sessions += 1;
        if self.plan.mode == Mode::SessionFill {
            // Acknowledge the reply (the server stops resending it), then
            // make way for the next exchange.
            let s = Stream {
                offset: c.stream.len() as u32,
                ack: c.received,
            };
            let packet = forge::handshake_with(self.plan.server.port(), self.plan.kind, s, 0, &[]);
            self.send(i, &packet);
            self.restart(i, now);
        }
    }

    /// Handshakes that moved within [`HELD_WITHIN`].
    fn held(&self, now: Instant) -> usize {
        self.conns
            .iter()
            .filter(|c| c.acked > 0 && now.duration_since(c.progress) < HELD_WITHIN)
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attacker_addresses_are_distinct_and_loopback() {
        let a: Vec<Ipv4Addr> = (0..10_000).map(attacker_ip).collect();
        let mut sorted = a.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), a.len());
        assert!(a.iter().all(|ip| ip.is_loopback() && ip.octets()[3] != 0));
        assert_eq!(attacker_ip(0), Ipv4Addr::new(127, 100, 0, 1));
        assert_eq!(attacker_ip(250), Ipv4Addr::new(127, 100, 1, 1));
    }
}
