//! The forwarder's I/O: sockets, the clock, the timer. Thin by design:
//! every decision is the core's (`Forwarder`).
//!
//! Clients send to a listening socket. For each client the driver opens
//! one socket per path, all bound to the same *inside* address and port
//! on this device, each tied to its path's network device
//! (`SO_BINDTODEVICE`): whichever path a packet takes, the servers see
//! the client at one address, so one SMT session (one replay window per
//! key epoch) holds for all its packets (`docs/innetwork.md` § 3). What a
//! server sends back arrives on one of these sockets and goes to the
//! client from the listening socket, so the client sees the address it
//! called. The forwarder's namespace does not route; this process is the
//! only way through.
//!
//! A `timerfd` wakes the loop when the core's next packet is due (epoll's
//! millisecond timeouts are too coarse for a paced link).

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::net::UdpSocket as MioUdp;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token, Waker};
use rustix::time::{Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags, Timespec};
use socket2::{Domain, Protocol, Socket, Type};

use crate::{Config, Forwarder, Stats};

/// Most clients the driver opens sockets for; datagrams from more are
/// dropped (counted as malformed bytes).
pub const MAX_CLIENTS: usize = 1024;
/// Socket buffers (forced past `rmem_max` when privileged).
const BUFFER: usize = 8 << 20;

const TIMER: Token = Token(0);
const WAKER: Token = Token(1);
const LISTEN0: usize = 2;
const UPSTREAM0: usize = 1 << 20;

/// What the driver needs beyond the core's settings.
#[derive(Clone, Debug)]
pub struct DriverConfig {
    /// The sans-IO core's settings (paths, balance, queues).
    pub core: Config,
    /// Addresses (with the port clients use) to listen on.
    pub listen: Vec<SocketAddr>,
    /// The addresses the servers see clients at, one per family.
    pub inside: Vec<IpAddr>,
    /// Write every datagram the forwarder handles to this file (`dump`).
    pub dump: Option<PathBuf>,
}

/// Stops a running driver from another thread.
#[derive(Clone, Debug)]
pub struct Stopper {
    flag: Arc<AtomicBool>,
    waker: Arc<Waker>,
}

impl Stopper {
    /// Asks the driver to return from [`Driver::run`]; it wakes a driver
    /// blocked in its poll.
    pub fn stop(&self) {
        self.flag.store(true, Ordering::Release);
        let _ = self.waker.wake();
    }
}

/// One client's sockets toward the servers, one per path.
#[derive(Debug)]
struct Upstream {
    sockets: Vec<MioUdp>,
}

/// A bound forwarder, ready to [`Driver::run`].
#[derive(Debug)]
pub struct Driver {
    core: Forwarder,
    poll: Poll,
    listeners: Vec<MioUdp>,
    inside: Vec<IpAddr>,
    clients: HashMap<SocketAddr, usize>,
    upstreams: Vec<(SocketAddr, Upstream)>,
    timer: OwnedFd,
    stop: Arc<AtomicBool>,
    waker: Arc<Waker>,
    dump: Option<BufWriter<File>>,
    /// Datagrams the kernel refused to send.
    pub send_errors: u64,
}

impl Driver {
    /// Binds the listening sockets and the timer.
    pub fn bind(config: DriverConfig) -> io::Result<Self> {
        let core = Forwarder::new(config.core).map_err(io::Error::other)?;
        let poll = Poll::new()?;
        let mut listeners = Vec::new();
        for (i, addr) in config.listen.iter().enumerate() {
            let socket = udp_socket(*addr, None)?;
            let mut socket = MioUdp::from_std(socket);
            poll.registry()
                .register(&mut socket, Token(LISTEN0 + i), Interest::READABLE)?;
            listeners.push(socket);
        }
        let timer = rustix::time::timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
        )?;
        poll.registry()
            .register(&mut SourceFd(&timer.as_raw_fd()), TIMER, Interest::READABLE)?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        let dump = match &config.dump {
            Some(path) => Some(BufWriter::new(File::create(path)?)),
            None => None,
        };
        Ok(Self {
            core,
            poll,
            listeners,
            inside: config.inside,
            clients: HashMap::new(),
            upstreams: Vec::new(),
            timer,
            stop: Arc::new(AtomicBool::new(false)),
            waker,
            dump,
            send_errors: 0,
        })
    }

    /// The listening addresses (ports resolved).
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.listeners
            .iter()
            .filter_map(|l| l.local_addr().ok())
            .collect()
    }

    /// A handle that stops [`Driver::run`] from another thread.
    pub fn stopper(&self) -> Stopper {
        Stopper {
            flag: self.stop.clone(),
            waker: self.waker.clone(),
        }
    }

    /// The core's counters so far.
    pub fn stats(&self) -> &Stats {
        self.core.stats()
    }

    /// Forwards until stopped (or `until`), then returns the counters.
    pub fn run(&mut self, until: Option<Instant>) -> io::Result<Stats> {
        let mut events = Events::with_capacity(256);
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let now = Instant::now();
            self.transmit(now);
            if self.stop.load(Ordering::Acquire) || until.is_some_and(|u| now >= u) {
                break;
            }
            self.arm_timer(now)?;
            let timeout = until.map(|u| u.saturating_duration_since(now));
            match self.poll.poll(&mut events, timeout) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            for event in events.iter() {
                match event.token() {
                    TIMER => self.clear_timer(),
                    WAKER => {}
                    Token(t) if t >= UPSTREAM0 => self.read_servers(t - UPSTREAM0, &mut buf),
                    Token(t) => self.read_clients(t - LISTEN0, &mut buf)?,
                }
            }
        }
        if let Some(d) = &mut self.dump {
            d.flush()?;
        }
        Ok(self.core.stats().clone())
    }

    fn read_clients(&mut self, listener: usize, buf: &mut [u8]) -> io::Result<()> {
        loop {
            let (n, from) = match self.listeners[listener].recv_from(buf) {
                Ok(r) => r,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if transient(&e) => continue,
                Err(e) => return Err(e),
            };
            let from = canonical(from);
            self.record(b'c', &buf[..n]);
            if self.upstream(from).is_none() {
                continue;
            }
            self.core
                .handle_client_datagram(Instant::now(), from, &buf[..n]);
        }
    }

    fn read_servers(&mut self, slot: usize, buf: &mut [u8]) {
        let paths = self.core.config().paths.len();
        let (client_slot, path) = (slot / paths, slot % paths);
        loop {
            let (client, up) = &self.upstreams[client_slot];
            let n = match up.sockets[path].recv_from(buf) {
                Ok((n, _)) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(_) => continue,
            };
            let client = *client;
            self.record(b's', &buf[..n]);
            self.core.note_server_datagram(n);
            let Some(l) = self.listeners.iter().find(|l| same_family(l, client)) else {
                continue;
            };
            if l.send_to(&buf[..n], client).is_err() {
                self.send_errors += 1;
            }
        }
    }

    /// Sends every packet the core has due now.
    fn transmit(&mut self, now: Instant) {
        while let Some(t) = self.core.poll_transmit(now) {
            let Some(&slot) = self.clients.get(&t.client) else {
                continue;
            };
            let Some(to) = self.core.config().paths[t.path].server_for(t.client.ip()) else {
                self.send_errors += 1;
                continue;
            };
            self.record(b'p', &t.bytes);
            if self.upstreams[slot].1.sockets[t.path]
                .send_to(&t.bytes, to)
                .is_err()
            {
                self.send_errors += 1;
            }
        }
    }

    /// The client's sockets toward the servers, opened on first use.
    fn upstream(&mut self, client: SocketAddr) -> Option<usize> {
        if let Some(&slot) = self.clients.get(&client) {
            return Some(slot);
        }
        if self.upstreams.len() >= MAX_CLIENTS {
            return None;
        }
        let inside = *self
            .inside
            .iter()
            .find(|ip| ip.is_ipv4() == client.is_ipv4())?;
        let slot = self.upstreams.len();
        let mut up = match open_upstream(inside, client.port(), &self.core.config().paths) {
            Ok(up) => up,
            Err(e) => {
                eprintln!("smt-forwarder: no sockets for {client}: {e}");
                return None;
            }
        };
        let paths = up.sockets.len();
        for (k, s) in up.sockets.iter_mut().enumerate() {
            let token = Token(UPSTREAM0 + slot * paths + k);
            self.poll
                .registry()
                .register(s, token, Interest::READABLE)
                .ok()?;
        }
        self.upstreams.push((client, up));
        self.clients.insert(client, slot);
        Some(slot)
    }

    fn arm_timer(&self, now: Instant) -> io::Result<()> {
        let Some(at) = self.core.poll_timeout() else {
            return Ok(());
        };
        // A zero value would disarm the timer: at least a nanosecond.
        let wait = at
            .saturating_duration_since(now)
            .max(Duration::from_nanos(1));
        let spec = Itimerspec {
            it_interval: Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: Timespec {
                tv_sec: wait.as_secs() as _,
                tv_nsec: wait.subsec_nanos() as _,
            },
        };
        rustix::time::timerfd_settime(&self.timer, TimerfdTimerFlags::empty(), &spec)?;
        Ok(())
    }

    fn clear_timer(&self) {
        let mut expirations = [0u8; 8];
        let _ = rustix::io::read(self.timer.as_fd(), &mut expirations);
    }

    /// Appends a datagram to the dump: a direction byte (`c` from a
    /// client, `s` from a server, `p` sent on a path), a 4-byte big-endian
    /// length, the bytes.
    fn record(&mut self, direction: u8, bytes: &[u8]) {
        if let Some(d) = &mut self.dump {
            let _ = d.write_all(&[direction]);
            let _ = d.write_all(&(bytes.len() as u32).to_be_bytes());
            let _ = d.write_all(bytes);
        }
    }
}

/// One socket per path, all on `inside` and one port, each on its path's
/// device: the client's own port if it is free (so the servers see the
/// port the client sent from, and captures on both sides name the flow
/// alike), else any.
fn open_upstream(inside: IpAddr, port: u16, paths: &[crate::PathConfig]) -> io::Result<Upstream> {
    let mut last = None;
    for attempt in 0..16 {
        let want = if attempt == 0 { port } else { 0 };
        let first = match udp_socket(SocketAddr::new(inside, want), Some(&paths[0].device)) {
            Ok(s) => s,
            Err(e) if attempt == 0 => {
                last = Some(e);
                continue;
            }
            Err(e) => return Err(e),
        };
        let port = first.local_addr()?.port();
        let mut sockets = vec![MioUdp::from_std(first)];
        let rest: io::Result<Vec<_>> = paths[1..]
            .iter()
            .map(|p| {
                udp_socket(SocketAddr::new(inside, port), Some(&p.device)).map(MioUdp::from_std)
            })
            .collect();
        match rest {
            Ok(more) => {
                sockets.extend(more);
                return Ok(Upstream { sockets });
            }
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no free port")))
}

/// A non-blocking UDP socket bound to `addr` (IPv6 only for IPv6), on
/// `device` if given, with large buffers.
fn udp_socket(addr: SocketAddr, device: Option<&str>) -> io::Result<UdpSocket> {
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    if let Some(dev) = device {
        socket.bind_device(Some(dev.as_bytes()))?;
    }
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    let socket: UdpSocket = socket.into();
    let _ = smt_udp::size_buffers(&socket, BUFFER, BUFFER);
    Ok(socket)
}

fn canonical(addr: SocketAddr) -> SocketAddr {
    match addr {
        SocketAddr::V6(v6) => match v6.ip().to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(IpAddr::V4(v4), v6.port()),
            None => addr,
        },
        v4 => v4,
    }
}

fn same_family(socket: &MioUdp, to: SocketAddr) -> bool {
    socket
        .local_addr()
        .is_ok_and(|a| a.is_ipv4() == to.is_ipv4())
}

fn transient(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::Interrupted
            | io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionReset
    )
}
