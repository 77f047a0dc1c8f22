//! Unloaded round trip on loopback: a bare UDP ping-pong, the caller-driven
//! `LocalEndpoint` and the threaded `Endpoint`, side by side.
//!
//! `cargo run --release -p smt --example rtt -- [size] [iterations]`
//! (`taskset -c 0` in front pins everything to one core). The full
//! comparison with TCP, TLS and QUIC peers is `smt-bench`.
//!
//! Environment: `RTT_MTU` (link MTU, default 1500: e.g. 9000 for jumbo
//! frames, 65536 for loopback's own), `RTT_UNSCHEDULED` (bytes sent before
//! a grant), `RTT_OUTSTANDING` (the throughput line's levels, `1,8,32`),
//! `RTT_STATS` (print the client's counters), `RTT_TIMERS` (the `local`
//! line: each end's timer system calls, timer wake-ups and protocol timer
//! expiries by cause, per round trip).
//!
//! Each line also says what the process spent per round trip, from
//! `getrusage` (both ends, every thread): CPU time in user and kernel mode
//! and context switches. Those do not depend on what else the machine runs,
//! where the latency does.
#![allow(unsafe_code)]

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use smt::keys::{fresh_session_pair, AeadAlgorithm};
use smt::stats::quantile;
use smt::{Endpoint, EndpointConfig, LocalEndpoint, LocalEvent};

fn main() {
    // An optional third argument runs one line only: udp, udp-poll,
    // udp-uring, udp-smt, udp-smt1 (smt-udp's one-slot receive), calls, local, busy, threaded, mixed (both mixed pairs) or throughput.
    let only = std::env::args().nth(3);
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .take(2)
        .map(|a| a.parse().expect("size and iterations are numbers"))
        .collect();
    let run = |name: &str| only.as_deref().is_none_or(|o| o == name);
    let size = args.first().copied().unwrap_or(64);
    let iterations = args.get(1).copied().unwrap_or(20_000);
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    println!("{size} B, {iterations} round trips each");
    if run("udp") {
        report("udp ping-pong", || udp(any, size, iterations));
    }
    if run("udp-poll") {
        report("udp ping-pong, ppoll", || udp_poll(any, size, iterations));
    }
    #[cfg(target_os = "linux")]
    if run("udp-uring") {
        report("udp ping-pong, io_uring", || {
            uring::udp_uring(any, size, iterations)
        });
    }
    if run("udp-smt") {
        report("udp ping-pong, smt-udp", || {
            udp_smt(any, size, iterations, false)
        });
    }
    if run("udp-smt1") {
        report("udp ping-pong, recv_one", || {
            udp_smt(any, size, iterations, true)
        });
    }
    if run("calls") {
        calls::report(any, size, iterations);
    }
    if run("local") {
        report("smt LocalEndpoint", || local(any, size, iterations, false));
    }
    if run("busy") {
        report("smt LocalEndpoint busy", || {
            local(any, size, iterations, true)
        });
    }
    if run("threaded") {
        report("smt Endpoint", || threaded(any, size, iterations));
    }
    if run("mixed") {
        report("smt Local -> Endpoint", || {
            local_to_threaded(any, size, iterations)
        });
        report("smt Endpoint -> Local", || {
            threaded_to_local(any, size, iterations)
        });
    }
    if run("throughput") {
        let levels: Vec<usize> = std::env::var("RTT_OUTSTANDING")
            .map(|v| v.split(',').map(|x| x.parse().expect("a number")).collect())
            .unwrap_or_else(|_| vec![1, 8, 32, 150]);
        for outstanding in levels {
            let rate = throughput(any, size, iterations, outstanding);
            println!(
                "smt LocalEndpoint throughput, {outstanding:>3} outstanding: {rate:>9.0} RPC/s"
            );
        }
    }
}

/// Runs one line's round trips and prints their latency and cost.
fn report(name: &str, run: impl FnOnce() -> Vec<Duration>) {
    let before = Usage::now();
    let mut samples = run();
    let used = Usage::now().since(&before, samples.len());
    samples.sort();
    let pick = |q: f64| quantile(&samples, q).unwrap_or_default().as_secs_f64() * 1e6;
    let total: Duration = samples.iter().sum();
    let mean = total.as_secs_f64() * 1e6 / samples.len().max(1) as f64;
    println!(
        "{name:<24} p50 {:>7.1} µs  p99 {:>7.1} µs  mean {mean:>7.1} µs  per RT: {used}",
        pick(0.5),
        pick(0.99)
    );
}

/// The process's CPU time and context switches so far (`getrusage`).
struct Usage {
    user: Duration,
    system: Duration,
    voluntary: i64,
    involuntary: i64,
}

/// What one round trip cost on average, from two [`Usage`] readings.
struct PerRoundTrip {
    user_us: f64,
    system_us: f64,
    switches: f64,
    involuntary: f64,
}

impl Usage {
    fn now() -> Self {
        // SAFETY: getrusage writes one `rusage` into the zeroed struct it
        // is given and reads nothing else.
        let mut r: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: as above; RUSAGE_SELF counts every thread of the process.
        unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut r) };
        let time = |t: libc::timeval| {
            Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
        };
        Self {
            user: time(r.ru_utime),
            system: time(r.ru_stime),
            voluntary: r.ru_nvcsw,
            involuntary: r.ru_nivcsw,
        }
    }

    fn since(&self, before: &Self, round_trips: usize) -> PerRoundTrip {
        let n = round_trips.max(1) as f64;
        PerRoundTrip {
            user_us: (self.user - before.user).as_secs_f64() * 1e6 / n,
            system_us: (self.system - before.system).as_secs_f64() * 1e6 / n,
            switches: (self.voluntary - before.voluntary + self.involuntary - before.involuntary)
                as f64
                / n,
            involuntary: (self.involuntary - before.involuntary) as f64 / n,
        }
    }
}

impl std::fmt::Display for PerRoundTrip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "user {:>5.1} µs  sys {:>5.1} µs  {:.2} switches ({:.2} involuntary)",
            self.user_us, self.system_us, self.switches, self.involuntary
        )
    }
}

fn udp(any: SocketAddr, size: usize, n: usize) -> Vec<Duration> {
    let server = UdpSocket::bind(any).unwrap();
    let client = UdpSocket::bind(any).unwrap();
    let addr = server.local_addr().unwrap();
    let echo = std::thread::spawn(move || {
        let mut buf = vec![0u8; 65536];
        for _ in 0..n {
            let (len, from) = server.recv_from(&mut buf).unwrap();
            server.send_to(&buf[..len], from).unwrap();
        }
    });
    let msg = vec![7u8; size.min(smt_udp::MAX_GSO_PAYLOAD)];
    let mut buf = vec![0u8; 65536];
    let samples = (0..n)
        .map(|_| {
            let start = Instant::now();
            client.send_to(&msg, addr).unwrap();
            client.recv_from(&mut buf).unwrap();
            start.elapsed()
        })
        .collect();
    echo.join().unwrap();
    samples
}

/// The UDP ping-pong with each side waiting as SMT's drivers do: `ppoll`
/// on the socket, a wake-up eventfd and a timerfd (neither ever ready),
/// then a non-blocking receive. Against `udp` (a blocking `recvfrom`) it
/// prices the wait alone: one more system call and three wait queues per
/// side per round trip, no protocol work.
fn udp_poll(any: SocketAddr, size: usize, n: usize) -> Vec<Duration> {
    let server = UdpSocket::bind(any).unwrap();
    let client = UdpSocket::bind(any).unwrap();
    let addr = server.local_addr().unwrap();
    let echo = std::thread::spawn(move || {
        let waiter = PollWaiter::new(&server);
        let mut buf = vec![0u8; 65536];
        for _ in 0..n {
            let (len, from) = waiter.recv_from(&server, &mut buf);
            server.send_to(&buf[..len], from).unwrap();
        }
    });
    let waiter = PollWaiter::new(&client);
    let msg = vec![7u8; size.min(smt_udp::MAX_GSO_PAYLOAD)];
    let mut buf = vec![0u8; 65536];
    let samples = (0..n)
        .map(|_| {
            let start = Instant::now();
            client.send_to(&msg, addr).unwrap();
            waiter.recv_from(&client, &mut buf);
            start.elapsed()
        })
        .collect();
    echo.join().unwrap();
    samples
}

/// The UDP ping-pong through smt-udp's `Socket`, as SMT's drivers call
/// it: `ppoll` as in [`udp_poll`], then `Socket::recv` (a receive batch)
/// and `Socket::send`. Against `udp_poll` it prices smt-udp's system calls
/// alone (no protocol work; a few hundred instructions of set-up).
fn udp_smt(any: SocketAddr, size: usize, n: usize, one: bool) -> Vec<Duration> {
    use smt_udp::{RecvBuffers, Socket, SocketConfig};
    let server = Socket::bind(any, &SocketConfig::default()).unwrap();
    let client = Socket::bind(any, &SocketConfig::default()).unwrap();
    let addr = server.local_addr().unwrap();
    let echo = std::thread::spawn(move || {
        let waiter = PollWaiter::on(&server);
        let mut bufs = RecvBuffers::new(server.features());
        let mut reply = vec![0u8; 65536];
        for _ in 0..n {
            waiter.recv_smt(&server, &mut bufs, one);
            let (from, datagram) = bufs.iter().next().unwrap();
            let len = datagram.len();
            reply[..len].copy_from_slice(datagram);
            server.send(from, &reply[..len], len).unwrap();
        }
    });
    let waiter = PollWaiter::on(&client);
    let mut bufs = RecvBuffers::new(client.features());
    let msg = vec![7u8; size.min(smt_udp::MAX_GSO_PAYLOAD)];
    let samples = (0..n)
        .map(|_| {
            let start = Instant::now();
            client.send(addr, &msg, msg.len()).unwrap();
            waiter.recv_smt(&client, &mut bufs, one);
            start.elapsed()
        })
        .collect();
    echo.join().unwrap();
    samples
}

/// The data system calls one small datagram can take, each timed alone.
mod calls;

/// The ping-pong waiting and receiving through io_uring.
#[cfg(target_os = "linux")]
mod uring;

/// A non-blocking socket's wait as SMT's drivers do it (see [`udp_poll`]).
struct PollWaiter {
    fds: [libc::c_int; 3],
}

impl PollWaiter {
    fn new(socket: &UdpSocket) -> Self {
        socket.set_nonblocking(true).unwrap();
        Self::on(socket)
    }

    /// For a socket that is non-blocking already.
    fn on(socket: &impl std::os::fd::AsRawFd) -> Self {
        // SAFETY: neither call takes pointers; the descriptors leak with
        // the process (a benchmark line).
        let wake = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        // SAFETY: as above.
        let alarm = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK) };
        assert!(wake >= 0 && alarm >= 0, "eventfd and timerfd");
        Self {
            fds: [socket.as_raw_fd(), wake, alarm],
        }
    }

    /// Sleeps until the socket is readable.
    fn sleep(&self) {
        let mut fds = self.fds.map(|fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        });
        // SAFETY: `fds` is a live local array of three pollfd structs;
        // no timeout and no signal mask.
        unsafe { libc::ppoll(fds.as_mut_ptr(), 3, std::ptr::null(), std::ptr::null()) };
    }

    /// Sleeps until the socket is readable, then receives: two system
    /// calls, as SMT's drivers make after their send.
    fn recv_from(&self, socket: &UdpSocket, buf: &mut [u8]) -> (usize, SocketAddr) {
        loop {
            self.sleep();
            match socket.recv_from(buf) {
                Ok(got) => return got,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => panic!("receive: {e}"),
            }
        }
    }

    /// The same through smt-udp: one receive batch with a datagram, or
    /// with `one` a one-slot receive (`Socket::recv_one`).
    fn recv_smt(&self, socket: &smt_udp::Socket, bufs: &mut smt_udp::RecvBuffers, one: bool) {
        loop {
            self.sleep();
            let got = match one {
                true => socket.recv_one(bufs),
                false => socket.recv(bufs),
            };
            match got {
                Ok(1..) => return,
                Ok(0) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => panic!("receive: {e}"),
            }
        }
    }
}

/// A client and an echo server thread that answers `n` requests, both
/// `LocalEndpoint`s with fresh AES-128-GCM keys.
fn local_echo_pair(
    any: SocketAddr,
    config: EndpointConfig,
    n: usize,
) -> (LocalEndpoint, SocketAddr, std::thread::JoinHandle<()>) {
    let mut client = LocalEndpoint::bind(any, config.clone()).unwrap();
    let at = client.local_addr();
    let (addr, echo) = local_echo(
        any,
        config,
        n,
        &mut |peer, keys| client.install_session(peer, keys).unwrap(),
        at,
    );
    (client, addr, echo)
}

/// A `LocalEndpoint` echo server on its own thread that answers `n`
/// requests from `client`, whose keys go to `install`.
fn local_echo(
    any: SocketAddr,
    config: EndpointConfig,
    n: usize,
    install: &mut dyn FnMut(SocketAddr, smt::SessionKeys),
    client: SocketAddr,
) -> (SocketAddr, std::thread::JoinHandle<()>) {
    let mut server = LocalEndpoint::bind(any, config).unwrap();
    let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    install(server.local_addr(), ck);
    server.install_session(client, sk).unwrap();
    let addr = server.local_addr();
    let echo = std::thread::spawn(move || {
        let mut served = 0;
        while served < n {
            if let Some(LocalEvent::Request { request, data }) = server.poll(None).unwrap() {
                server.respond(request, data).unwrap();
                served += 1;
            }
        }
        print_timers("server", &server, n);
        // The last responses' ACKs.
        let _ = server.poll(Some(Duration::from_millis(20)));
    });
    (addr, echo)
}

/// Waits for the outcome of one call: true for a response, false (after
/// saying why) for a failure.
fn next_outcome(client: &mut LocalEndpoint) -> bool {
    loop {
        match client.poll(None).unwrap() {
            Some(LocalEvent::Response { .. }) => return true,
            Some(LocalEvent::Failed { error, .. }) => {
                eprintln!("call failed: {error}");
                return false;
            }
            _ => {}
        }
    }
}

/// The endpoints' configuration, with the environment's knobs applied.
fn config() -> EndpointConfig {
    let mut config = EndpointConfig::default();
    if let Ok(v) = std::env::var("RTT_MTU") {
        config.set_mtu(Some(v.parse().expect("RTT_MTU is a byte count")));
    }
    if let Ok(v) = std::env::var("RTT_UNSCHEDULED") {
        config
            .protocol_mut()
            .set_unscheduled_bytes(v.parse().expect("a byte count"));
    }
    config
}

fn local(any: SocketAddr, size: usize, n: usize, busy_poll: bool) -> Vec<Duration> {
    let mut config = config();
    config.set_busy_poll(busy_poll);
    let (mut client, addr, echo) = local_echo_pair(any, config, n);
    // Shared, as an application holding its message in `Bytes` would:
    // the endpoint seals from it without a copy.
    let msg = smt::Bytes::from(vec![7u8; size]);
    let samples = (0..n)
        .map(|_| {
            let start = Instant::now();
            client.call(addr, &msg).unwrap();
            next_outcome(&mut client);
            start.elapsed()
        })
        .collect();
    print_timers("client", &client, n);
    echo.join().unwrap();
    samples
}

/// With `RTT_TIMERS`: `endpoint`'s timer work per round trip (of `n`).
fn print_timers(side: &str, endpoint: &LocalEndpoint, n: usize) {
    if std::env::var_os("RTT_TIMERS").is_none() {
        return;
    }
    let t = endpoint.timer_counts();
    let per = |x: u64| x as f64 / n as f64;
    let causes: Vec<String> = (t.expiries.iter())
        .map(|(name, k)| format!("{name} {:.4}", per(*k)))
        .collect();
    eprintln!(
        "{side}: per round trip timerfd_settime {:.4}, alarm wake-ups {:.4}; expiries {}",
        per(t.alarm_sets),
        per(t.alarm_rings),
        causes.join(", ")
    );
}

/// Closed loop: `outstanding` calls in flight, a new one as each completes.
fn throughput(any: SocketAddr, size: usize, n: usize, outstanding: usize) -> f64 {
    let (mut client, addr, echo) = local_echo_pair(any, config(), n);
    // Shared, as an application holding its message in `Bytes` would:
    // the endpoint seals from it without a copy.
    let msg = smt::Bytes::from(vec![7u8; size]);
    let start = Instant::now();
    let (mut sent, mut done) = (0, 0);
    while done < n {
        while sent < n && sent - done < outstanding {
            client.call(addr, &msg).unwrap();
            sent += 1;
        }
        next_outcome(&mut client);
        done += 1;
    }
    let rate = n as f64 / start.elapsed().as_secs_f64();
    let _ = client.poll(Some(Duration::from_millis(5)));
    if std::env::var_os("RTT_STATS").is_some() {
        eprintln!("client {:?}", client.stats().total);
    }
    echo.join().unwrap();
    rate
}

/// A `LocalEndpoint` client calling a threaded `Endpoint` echo server: a
/// mixed pair, which tells the client's costs from the server's.
fn local_to_threaded(any: SocketAddr, size: usize, n: usize) -> Vec<Duration> {
    let mut client = LocalEndpoint::bind(any, config()).unwrap();
    let addr = client.local_addr();
    let server = threaded_echo(any, addr, &mut |peer, keys| {
        client.install_session(peer, keys).unwrap()
    });
    let msg = smt::Bytes::from(vec![7u8; size]);
    let samples = (0..n)
        .map(|_| {
            let start = Instant::now();
            client.call(server.local_addr(), &msg).unwrap();
            next_outcome(&mut client);
            start.elapsed()
        })
        .collect();
    server.close();
    samples
}

/// A threaded `Endpoint` client calling a `LocalEndpoint` echo server.
fn threaded_to_local(any: SocketAddr, size: usize, n: usize) -> Vec<Duration> {
    let client = Endpoint::bind(any, config()).unwrap();
    let (server, echo) = local_echo(
        any,
        config(),
        n,
        &mut |peer, keys| client.install_session(peer, keys).unwrap(),
        client.local_addr(),
    );
    let msg = smt::Bytes::from(vec![7u8; size]);
    let samples = (0..n)
        .map(|_| {
            let start = Instant::now();
            client.call(server, &msg).unwrap();
            start.elapsed()
        })
        .collect();
    echo.join().unwrap();
    client.close();
    samples
}

/// A threaded echo server with a session for `client`, whose keys go to
/// `install`.
fn threaded_echo(
    any: SocketAddr,
    client: SocketAddr,
    install: &mut dyn FnMut(SocketAddr, smt::SessionKeys),
) -> Endpoint {
    let server = Endpoint::bind(any, config()).unwrap();
    let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    install(server.local_addr(), ck);
    server.install_session(client, sk).unwrap();
    let acceptor = server.clone();
    std::thread::spawn(move || {
        while let Ok(mut req) = acceptor.accept() {
            let data = req.take_data();
            let _ = req.respond(data);
        }
    });
    server
}

fn threaded(any: SocketAddr, size: usize, n: usize) -> Vec<Duration> {
    let client = Endpoint::bind(any, config()).unwrap();
    let server = Endpoint::bind(any, config()).unwrap();
    let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    client.install_session(server.local_addr(), ck).unwrap();
    server.install_session(client.local_addr(), sk).unwrap();
    let acceptor = server.clone();
    std::thread::spawn(move || {
        while let Ok(mut req) = acceptor.accept() {
            let data = req.take_data();
            let _ = req.respond(data);
        }
    });
    // Shared, as an application holding its message in `Bytes` would:
    // the endpoint seals from it without a copy.
    let msg = smt::Bytes::from(vec![7u8; size]);
    let samples = (0..n)
        .map(|_| {
            let start = Instant::now();
            client.call(server.local_addr(), &msg).unwrap();
            start.elapsed()
        })
        .collect();
    server.close();
    client.close();
    samples
}
