//! The fault-injecting relay on real loopback sockets, with an echo server
//! behind it. Each test tells one story; none asserts tight timings.

use std::collections::{HashMap, HashSet};
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use smt_relay::{Captured, Direction, Impairment, Relay, RelayConfig, RelayStats};

/// How long any test waits for something that should happen at once.
const PATIENCE: Duration = Duration::from_secs(3);

#[test]
fn clean_relay_forwards_everything_both_ways_byte_exact() {
    let server = EchoServer::start();
    let relay = Relay::spawn(RelayConfig::new(server.addr)).unwrap();
    let client = Client::new(&relay);
    let mut sent: Vec<Vec<u8>> = (0..200u32)
        .map(|i| payload(i, 1 + (i as usize * 37) % 1400))
        .collect();
    sent.extend([
        Vec::new(),
        vec![0xa5; 9000],
        vec![0x5a; smt_udp::MAX_GSO_PAYLOAD],
    ]);

    let mut got = Vec::new();
    for chunk in sent.chunks(20) {
        for bytes in chunk {
            client.send(bytes);
        }
        got.extend(client.recv_n(chunk.len()));
    }

    assert_eq!(got, sent, "every datagram comes back intact and in order");
    let stats = relay.stop();
    for dir in [stats.to_server, stats.to_client] {
        assert_eq!(dir.received, sent.len() as u64);
        assert_eq!(dir.forwarded, sent.len() as u64);
        assert_eq!(
            dir.lost + dir.reordered + dir.duplicated + dir.corrupted + dir.send_errors,
            0
        );
    }
}

#[test]
fn half_loss_loses_about_half_and_the_counters_add_up() {
    let server = EchoServer::start();
    let lossy = Impairment {
        loss: 0.5,
        ..Impairment::default()
    };
    let relay = Relay::spawn(RelayConfig::new(server.addr).both_ways(lossy)).unwrap();
    let client = Client::new(&relay);
    let n = 1000;

    send_windowed(&client, &relay, &server, (0..n).map(|i| payload(i, 64)));
    let got = client.recv_n(relay.stats().to_client.forwarded as usize);
    let stats = relay.stop();

    let (up, down) = (stats.to_server, stats.to_client);
    assert_eq!(up.received, u64::from(n));
    assert_eq!(up.forwarded + up.lost, up.received);
    assert_eq!(server.echoed(), up.forwarded);
    assert_eq!(down.received, up.forwarded);
    assert_eq!(down.forwarded + down.lost, down.received);
    assert_eq!(got.len() as u64, down.forwarded);
    assert!((350..=650).contains(&up.lost), "{stats:?}");
    assert!(
        down.lost * 4 >= down.received && down.lost * 4 <= 3 * down.received,
        "{stats:?}"
    );
}

#[test]
fn duplication_delivers_some_datagrams_twice() {
    let server = EchoServer::start();
    let dup = Impairment {
        duplicate: 0.3,
        ..Impairment::default()
    };
    let relay = Relay::spawn(RelayConfig {
        to_server: dup,
        ..RelayConfig::new(server.addr)
    })
    .unwrap();
    let client = Client::new(&relay);
    let n = 300;

    send_windowed(&client, &relay, &server, (0..n).map(|i| payload(i, 32)));
    // Stopping settles the count: a copy may still be on its way otherwise.
    let duplicated = relay.stop().to_server.duplicated;
    wait_for(|| server.echoed() == u64::from(n) + duplicated);

    assert!(duplicated > 30, "about 90 expected, got {duplicated}");
    let mut copies: HashMap<u32, u64> = HashMap::new();
    for bytes in server.payloads() {
        *copies.entry(seq_of(&bytes)).or_default() += 1;
    }
    assert_eq!(copies.len(), n as usize, "every datagram arrives");
    assert!(copies.values().all(|&c| c == 1 || c == 2));
    assert_eq!(
        copies.values().filter(|&&c| c == 2).count() as u64,
        duplicated
    );
}

#[test]
fn corruption_flips_exactly_one_bit() {
    let server = EchoServer::start();
    let corrupt = Impairment {
        corrupt: 0.25,
        ..Impairment::default()
    };
    let relay = Relay::spawn(RelayConfig {
        to_server: corrupt,
        ..RelayConfig::new(server.addr)
    })
    .unwrap();
    let client = Client::new(&relay);

    let mut flipped = 0;
    for i in 0..200 {
        let sent = payload(i, 1 + i as usize % 300);
        client.send(&sent);
        let [got] = client.recv_n(1).try_into().unwrap();
        assert_eq!(got.len(), sent.len());
        let bits: u32 = got
            .iter()
            .zip(&sent)
            .map(|(a, b)| (a ^ b).count_ones())
            .sum();
        assert!(bits <= 1, "datagram {i} has {bits} bits flipped");
        flipped += u64::from(bits);
    }

    assert!(flipped > 20, "about 50 expected, got {flipped}");
    assert_eq!(relay.stop().to_server.corrupted, flipped);
}

#[test]
fn reorder_lets_later_datagrams_overtake_and_holds_no_longer_than_the_bound() {
    let server = EchoServer::start();
    let reorder_delay = Duration::from_millis(20);
    let reorder = Impairment {
        reorder: 0.3,
        reorder_delay,
        ..Impairment::default()
    };
    let relay = Relay::spawn(RelayConfig {
        to_server: reorder,
        ..RelayConfig::new(server.addr)
    })
    .unwrap();
    let client = Client::new(&relay);
    let n = 300;

    let mut sent_at = Vec::new();
    for i in 0..n {
        sent_at.push(Instant::now());
        client.send(&payload(i, 32));
        if i % 50 == 49 {
            settle(&client, &relay, &server, u64::from(i) + 1);
        }
    }
    let mut order = Vec::new();
    let mut worst = Duration::ZERO;
    for arrival in client.recv_arrivals(n as usize) {
        let seq = seq_of(&arrival.bytes);
        worst = worst.max(arrival.at - sent_at[seq as usize]);
        order.push(seq);
    }

    let overtaken = order.windows(2).filter(|w| w[0] > w[1]).count();
    assert!(overtaken > 0, "no datagram overtook another: {order:?}");
    let mut sorted = order.clone();
    sorted.sort_unstable();
    assert_eq!(
        sorted,
        (0..n).collect::<Vec<_>>(),
        "every datagram arrives once"
    );
    // Generous slack: the machine is shared and its scheduler noisy.
    assert!(
        worst < reorder_delay + Duration::from_secs(1),
        "held {worst:?}"
    );
    let stats = relay.stop();
    assert!(stats.to_server.reordered > 30, "{stats:?}");
    assert_eq!(stats.to_server.forwarded, u64::from(n));
}

#[test]
fn capture_keeps_the_bytes_as_read_in_both_directions() {
    let server = EchoServer::start();
    let config = RelayConfig {
        capture: true,
        capture_limit: 6,
        ..RelayConfig::new(server.addr)
    };
    let relay = Relay::spawn(config).unwrap();
    let client = Client::new(&relay);

    for i in 0..5 {
        client.send(&payload(i, 10 + i as usize));
        client.recv_n(1);
    }
    let captured = relay.captured();

    let expected: Vec<(Direction, Vec<u8>)> = (0..3)
        .flat_map(|i| {
            [Direction::ToServer, Direction::ToClient].map(|d| (d, payload(i, 10 + i as usize)))
        })
        .collect();
    let seen: Vec<(Direction, Vec<u8>)> = captured
        .iter()
        .map(|c| (c.direction, c.bytes.clone()))
        .collect();
    assert_eq!(seen, expected, "capture stops at capture_limit");
    assert!(captured
        .iter()
        .all(|c: &Captured| c.client == client.addr()));
}

#[test]
fn two_clients_each_get_their_own_replies() {
    let server = EchoServer::start();
    let relay = Relay::spawn(RelayConfig::new(server.addr)).unwrap();
    let (alice, bob) = (Client::new(&relay), Client::new(&relay));

    for i in 0..50 {
        alice.send(format!("alice {i}").as_bytes());
        bob.send(format!("bob {i}").as_bytes());
    }
    let to_alice = alice.recv_n(50);
    let to_bob = bob.recv_n(50);

    assert!(to_alice.iter().all(|b| b.starts_with(b"alice ")));
    assert!(to_bob.iter().all(|b| b.starts_with(b"bob ")));
    assert_eq!(
        server.peers().len(),
        2,
        "the server sees one address per client"
    );
}

/// With `keep_ports`, the server sees each client's own port number (on
/// the relay's IP), and replies still reach the right client.
#[test]
fn keep_ports_forwards_from_the_clients_port() {
    let server = EchoServer::start();
    let relay = Relay::spawn(RelayConfig {
        listen: "127.0.0.2:0".parse().unwrap(),
        keep_ports: true,
        ..RelayConfig::new(server.addr)
    })
    .unwrap();
    let client = Client::new(&relay);
    client.send(b"same port");
    assert_eq!(client.recv_n(1)[0], b"same port");
    let port = client.socket.local_addr().unwrap().port();
    let seen: Vec<SocketAddr> = server.peers().into_iter().collect();
    assert_eq!(
        seen,
        ["127.0.0.2"
            .parse::<std::net::IpAddr>()
            .map(|ip| SocketAddr::new(ip, port))
            .unwrap()]
    );
}

#[test]
fn stop_is_prompt_even_with_datagrams_held() {
    let server = EchoServer::start();
    let slow = Impairment {
        delay: Duration::from_secs(30),
        ..Impairment::default()
    };
    let relay = Relay::spawn(RelayConfig {
        to_server: slow,
        ..RelayConfig::new(server.addr)
    })
    .unwrap();
    let client = Client::new(&relay);
    for i in 0..10 {
        client.send(&payload(i, 16));
    }
    wait_for(|| relay.stats().to_server.received == 10);

    let started = Instant::now();
    let stats = relay.stop();

    assert!(
        started.elapsed() < Duration::from_secs(1),
        "stop took {:?}",
        started.elapsed()
    );
    assert_eq!(stats.to_server.forwarded, 0);
    assert_eq!(
        stats.to_server.lost, 10,
        "datagrams held at stop count as lost"
    );
    assert_eq!(server.echoed(), 0);
}

#[test]
fn bad_impairment_is_rejected_with_a_clear_error() {
    let bad = Impairment {
        loss: 2.0,
        ..Impairment::default()
    };
    let config = RelayConfig::new("127.0.0.1:9".parse().unwrap()).both_ways(bad);
    let err = Relay::spawn(config).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert!(err.to_string().contains("loss"), "{err}");
}

#[test]
fn stats_print_on_one_line() {
    let line = RelayStats::default().to_string();
    assert!(line.contains("to-server: received 0") && line.contains("to-client: received 0"));
    assert!(!line.contains('\n'));
}

// ---------------------------------------------------------------------------

/// A datagram carrying sequence number `seq` in its first four bytes,
/// padded to `len` (at least 4) with a pattern derived from `seq`.
fn payload(seq: u32, len: usize) -> Vec<u8> {
    let mut bytes = seq.to_be_bytes().to_vec();
    bytes.extend((0..len.saturating_sub(4)).map(|i| (seq as usize * 31 + i) as u8));
    bytes
}

fn seq_of(bytes: &[u8]) -> u32 {
    u32::from_be_bytes(bytes[..4].try_into().unwrap())
}

/// Sends in windows of 50, letting each window settle before the next, so
/// no burst can overflow a default-sized socket buffer anywhere on the path.
fn send_windowed(
    client: &Client,
    relay: &Relay,
    server: &EchoServer,
    datagrams: impl Iterator<Item = Vec<u8>>,
) {
    let mut sent = 0;
    for bytes in datagrams {
        client.send(&bytes);
        sent += 1;
        if sent % 50 == 0 {
            settle(client, relay, server, sent);
        }
    }
    settle(client, relay, server, sent);
}

/// Waits until all of `sent` datagrams from `client` have been decided on,
/// echoed and delivered back (or lost) and nothing is left in flight. A
/// duplicate copy may still be on its way: only `Relay::stop` settles that.
#[track_caller]
fn settle(client: &Client, relay: &Relay, server: &EchoServer, sent: u64) {
    wait_for(|| {
        let RelayStats {
            to_server: up,
            to_client: down,
            ..
        } = relay.stats();
        let echoed = server.echoed();
        up.forwarded + up.lost + up.send_errors == sent
            && echoed == up.forwarded + up.duplicated
            && down.received == echoed
            && down.forwarded + down.lost + down.send_errors == down.received
            && client.arrived() == down.forwarded + down.duplicated
    });
}

/// Polls `done` until it holds; panics after [`PATIENCE`].
#[track_caller]
fn wait_for(mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !done() {
        assert!(Instant::now() < deadline, "gave up waiting");
        thread::sleep(Duration::from_millis(1));
    }
}

/// A client socket that talks to the relay. A background thread reads
/// replies as they come, so the socket's buffer never overflows.
struct Client {
    socket: UdpSocket,
    inbox: Arc<Mutex<Vec<Arrival>>>,
    /// Datagrams received so far, taken or not.
    arrived: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Client {
    fn new(relay: &Relay) -> Self {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        socket.connect(relay.local_addr()).unwrap();
        socket
            .set_read_timeout(Some(Duration::from_millis(5)))
            .unwrap();
        let reader = socket.try_clone().unwrap();
        let inbox = Arc::new(Mutex::new(Vec::new()));
        let arrived = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (i, a, s) = (inbox.clone(), arrived.clone(), stop.clone());
        let thread = thread::spawn(move || {
            let mut buf = vec![0; 1 << 16];
            while !s.load(Ordering::SeqCst) {
                if let Ok(len) = reader.recv(&mut buf) {
                    let (at, bytes) = (Instant::now(), buf[..len].to_vec());
                    i.lock().unwrap().push(Arrival { at, bytes });
                    a.fetch_add(1, Ordering::SeqCst);
                }
            }
        });
        Self {
            socket,
            inbox,
            arrived,
            stop,
            thread: Some(thread),
        }
    }

    fn addr(&self) -> SocketAddr {
        self.socket.local_addr().unwrap()
    }

    fn arrived(&self) -> u64 {
        self.arrived.load(Ordering::SeqCst)
    }

    fn send(&self, bytes: &[u8]) {
        self.socket.send(bytes).unwrap();
    }

    /// Takes the next `n` datagrams received; panics if they do not come in
    /// time.
    #[track_caller]
    fn recv_n(&self, n: usize) -> Vec<Vec<u8>> {
        self.recv_arrivals(n).into_iter().map(|a| a.bytes).collect()
    }

    /// Like [`Client::recv_n`], with arrival times.
    #[track_caller]
    fn recv_arrivals(&self, n: usize) -> Vec<Arrival> {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let mut inbox = self.inbox.lock().unwrap();
            if inbox.len() >= n {
                return inbox.drain(..n).collect();
            }
            let have = inbox.len();
            drop(inbox);
            assert!(
                Instant::now() < deadline,
                "only {have} of {n} datagrams arrived"
            );
            thread::sleep(Duration::from_millis(1));
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A datagram the client received, and when.
struct Arrival {
    at: Instant,
    bytes: Vec<u8>,
}

/// A UDP echo server on its own thread, logging what it echoes and who sent
/// it.
struct EchoServer {
    addr: SocketAddr,
    log: Arc<Mutex<Vec<Echoed>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// One datagram the echo server sent back.
struct Echoed {
    from: SocketAddr,
    bytes: Vec<u8>,
}

impl EchoServer {
    fn start() -> Self {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        socket
            .set_read_timeout(Some(Duration::from_millis(5)))
            .unwrap();
        let addr = socket.local_addr().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (l, s) = (log.clone(), stop.clone());
        let thread = thread::spawn(move || {
            let mut buf = vec![0; 1 << 16];
            while !s.load(Ordering::SeqCst) {
                let Ok((len, from)) = socket.recv_from(&mut buf) else {
                    continue;
                };
                // The relay may already be gone; that is not the server's problem.
                let _ = socket.send_to(&buf[..len], from);
                let bytes = buf[..len].to_vec();
                l.lock().unwrap().push(Echoed { from, bytes });
            }
        });
        Self {
            addr,
            log,
            stop,
            thread: Some(thread),
        }
    }

    /// How many datagrams it has echoed.
    fn echoed(&self) -> u64 {
        self.log.lock().unwrap().len() as u64
    }

    fn payloads(&self) -> Vec<Vec<u8>> {
        self.log
            .lock()
            .unwrap()
            .iter()
            .map(|e| e.bytes.clone())
            .collect()
    }

    fn peers(&self) -> HashSet<SocketAddr> {
        self.log.lock().unwrap().iter().map(|e| e.from).collect()
    }
}

impl Drop for EchoServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
