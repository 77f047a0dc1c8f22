//! Shared by the `attack_*` tests: a client and an echo server with an
//! on-path attacker (the relay) between them, counters of what the victims
//! did, and the verdict of one attack.
//!
//! "Accepted" means the victims did something because of the attacker: the
//! server executed a request again (or one nobody sent), a side delivered
//! a message, or a side sent DATA (a retransmission or a response) after
//! the attack started. Every test attacks a quiet pair (all calls done), so
//! any of those is the attacker's doing.

#![allow(dead_code)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use smt::keys::{fresh_session_pair, AeadAlgorithm};
use smt::stats::Counters;
use smt::{DropReason, Endpoint, EndpointConfig, SessionKeys};
use smt_relay::attack::Tally;
use smt_relay::{Captured, Relay, RelayConfig, Tamper};

/// Requests executed by the server, by request bytes.
pub type Executions = Arc<Mutex<HashMap<Vec<u8>, u32>>>;

/// Whether the long variants run (`SMT_ATTACK_LONG=1`).
pub fn long() -> bool {
    std::env::var("SMT_ATTACK_LONG").is_ok_and(|v| v == "1")
}

pub fn bind() -> Endpoint {
    Endpoint::bind("127.0.0.1:0".parse().unwrap(), EndpointConfig::default()).unwrap()
}

/// Answers every request with its bytes reversed, counting executions.
pub fn serve_echo(server: &Endpoint) -> Executions {
    let executions: Executions = Arc::default();
    let (s, ex) = (server.clone(), executions.clone());
    std::thread::spawn(move || {
        while let Ok(mut req) = s.accept() {
            let data = req.take_data().to_vec();
            *ex.lock().unwrap().entry(data.clone()).or_default() += 1;
            let reply: Vec<u8> = data.iter().rev().copied().collect();
            let _ = req.respond(&reply);
        }
    });
    executions
}

/// A request of `size` bytes unique to `tag`.
pub fn request(tag: u64, size: usize) -> Vec<u8> {
    let mut v: Vec<u8> = (0..size.max(8))
        .map(|i| (i as u64).wrapping_mul(31) as u8 ^ tag as u8)
        .collect();
    v[..8].copy_from_slice(&tag.to_le_bytes());
    v
}

/// A client and an echo server with AES-128-GCM keys, the relay (capturing
/// everything) between them.
pub struct World {
    pub server: Endpoint,
    pub client: Endpoint,
    pub relay: Relay,
    pub executions: Executions,
    pub server_keys: SessionKeys,
}

impl World {
    pub fn new() -> Self {
        Self::with_tamper(None)
    }

    pub fn with_tamper(tamper: Option<Arc<dyn Tamper>>) -> Self {
        let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
        let server = bind();
        let executions = serve_echo(&server);
        let relay = spawn_relay(server.local_addr(), tamper);
        let client = bind();
        client.install_session(relay.local_addr(), ck).unwrap();
        // The server sees the relay's upstream socket, known only once the
        // client has sent: resolve keys for whoever sends first.
        let keys = sk.clone();
        server
            .set_key_resolver(Box::new(move |_peer: SocketAddr| Some(keys.clone())))
            .unwrap();
        Self {
            server,
            client,
            relay,
            executions,
            server_keys: sk,
        }
    }

    /// Calls with `sizes`, tags from `first`; checks every response.
    pub fn calls(&self, first: u64, sizes: &[usize]) {
        for (k, &size) in sizes.iter().enumerate() {
            let req = request(first + k as u64, size);
            let resp = self.client.call(self.relay.local_addr(), &req).unwrap();
            assert!(resp.iter().eq(req.iter().rev()), "wrong response");
        }
    }

    /// The client's address as the server sees it.
    pub fn client_at_server(&self) -> SocketAddr {
        self.relay.upstream_addr(self.client.local_addr()).unwrap()
    }

    pub fn captured(&self) -> Vec<Captured> {
        self.relay.captured()
    }

    pub fn snapshot(&self) -> Snapshot {
        Snapshot::take(&self.server, &self.client, &self.executions)
    }
}

pub fn spawn_relay(upstream: SocketAddr, tamper: Option<Arc<dyn Tamper>>) -> Relay {
    let mut config = RelayConfig::new(upstream);
    config.capture = true;
    config.capture_limit = 200_000;
    match tamper {
        Some(t) => Relay::spawn_with_tamper(config, t).unwrap(),
        None => Relay::spawn(config).unwrap(),
    }
}

/// What both victims have done so far.
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub server: Counters,
    pub client: Counters,
    pub executions: HashMap<Vec<u8>, u32>,
}

impl Snapshot {
    pub fn take(server: &Endpoint, client: &Endpoint, executions: &Executions) -> Self {
        Self {
            server: server.stats().unwrap().total,
            client: client.stats().unwrap().total,
            executions: executions.lock().unwrap().clone(),
        }
    }

    /// Things the victims did since `before` that only the attacker can
    /// have caused on a quiet pair.
    pub fn accepted_since(&self, before: &Snapshot) -> u64 {
        let execs = |s: &Snapshot| s.executions.values().map(|&n| u64::from(n)).sum::<u64>();
        let d = |a: u64, b: u64| a.saturating_sub(b);
        d(execs(self), execs(before))
            + d(
                self.server.traffic.messages_received,
                before.server.traffic.messages_received,
            )
            + d(
                self.client.traffic.messages_received,
                before.client.traffic.messages_received,
            )
            + d(
                self.server.packets.data_sent,
                before.server.packets.data_sent,
            )
            + d(
                self.client.packets.data_sent,
                before.client.packets.data_sent,
            )
    }

    /// Datagrams the two victims received since `before`.
    pub fn received_since(&self, before: &Snapshot) -> u64 {
        self.server.traffic.datagrams_received + self.client.traffic.datagrams_received
            - before.server.traffic.datagrams_received
            - before.client.traffic.datagrams_received
    }
}

/// Drops by reason on both victims between two snapshots, for the log.
pub fn drops_since(before: &Snapshot, after: &Snapshot) -> Vec<(DropReason, u64)> {
    DropReason::ALL
        .iter()
        .map(|&r| {
            let now = after.server.drops.get(r) + after.client.drops.get(r);
            let then = before.server.drops.get(r) + before.client.drops.get(r);
            (r, now - then)
        })
        .filter(|&(_, n)| n > 0)
        .collect()
}

pub fn format_drops(drops: &[(DropReason, u64)]) -> String {
    let parts: Vec<String> = drops
        .iter()
        .map(|(r, n)| format!("{}={n}", r.name()))
        .collect();
    parts.join(" ")
}

/// Waits until the victims have received `expected` more datagrams than at
/// `before` (or 3 s pass), then a little longer for any reaction (ticks are
/// 1 ms, a RESEND goes out after 5).
pub fn settle(
    server: &Endpoint,
    client: &Endpoint,
    executions: &Executions,
    before: &Snapshot,
    expected: u64,
) -> Snapshot {
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline {
        let now = Snapshot::take(server, client, executions);
        if now.received_since(before) >= expected {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(50));
    Snapshot::take(server, client, executions)
}

/// Prints the tally and the drop reasons; asserts nothing was accepted and
/// that every attempt reached a victim and was dropped or answered.
pub fn finish(tally: &Tally, before: &Snapshot, after: &Snapshot) {
    let drops = drops_since(before, after);
    println!("{tally}; drops: {}", format_drops(&drops));
    assert_eq!(tally.accepted, 0, "{tally}");
}

/// Control packets of every type, in both key phases, for IDs 0 to 3,
/// MAC'd under `keys` (keys the attacker derived itself).
pub fn keyed_control_packets(keys: &SessionKeys) -> Vec<Vec<u8>> {
    let mut rng = smt_relay::SplitMix64::new(0x5eed);
    let mut out = Vec::new();
    for ty in smt_relay::attack::CONTROL_TYPES {
        for (id, phase) in [(0, false), (1, false), (1, true), (2, true), (3, false)] {
            out.push(smt_relay::attack::keyed_control(
                &mut rng,
                keys.tx.as_ref(),
                ty,
                (0, 0),
                id,
                phase,
            ));
        }
    }
    out
}

/// Injects every datagram of `attempts` (direction, bytes) on the client's
/// route, waits for the victims, and tallies what they accepted.
pub fn run_attack(
    world: &World,
    name: &str,
    attempts: &[(smt_relay::Direction, Vec<u8>)],
) -> (Tally, Snapshot, Snapshot) {
    let before = world.snapshot();
    let client = world.client.local_addr();
    for (k, (direction, bytes)) in attempts.iter().enumerate() {
        world.relay.inject(*direction, client, bytes).unwrap();
        if k % 64 == 63 {
            // Let the victims keep up: a burst larger than the socket
            // buffer would be lost in the kernel, not by the protocol.
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let after = settle(
        &world.server,
        &world.client,
        &world.executions,
        &before,
        attempts.len() as u64,
    );
    let tally = Tally {
        name: name.to_owned(),
        attempts: attempts.len() as u64,
        accepted: after.accepted_since(&before),
    };
    (tally, before, after)
}
