//! The socket: probing at bind time, sending with or without GSO, receiving in batches.

use std::{
    io,
    net::SocketAddr,
    os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd},
};

use quinn_udp::{Transmit, UdpSocketState, BATCH_SIZE};
use socket2::{Domain, Protocol, SockAddr, Type};

use crate::{
    calls::CallCounters,
    features::Bytes,
    gso::MAX_GSO_PAYLOAD,
    recv::{Framing, RecvBuffers},
    Features, Mode, SocketConfig, SocketError,
};

/// Receive slots per system call: `recvmmsg` where the platform has it (this crate's own on Linux
/// and Android, quinn-udp's elsewhere).
const RECV_BATCH: usize = if cfg!(any(
    target_os = "linux",
    target_os = "android",
    target_os = "freebsd"
)) {
    BATCH_SIZE
} else {
    1
};

/// Below this a socket buffer is worth a warning: one burst of a few dozen 64 KiB GSO batches
/// would fill it.
const LOW_BUFFER: usize = 2 << 20;

/// The least receive buffer a raw socket asks for, whatever [`SocketConfig::recv_buffer`] says
/// (Linux grants double). Without GRO the kernel charges every datagram a whole buffer: 2 304
/// bytes for a 1 500-byte packet, so 150 outstanding 64 KiB messages (45 datagrams each) take
/// 15.5 MB, and twice that in a socket bound without a port, which also queues the other
/// direction's packets to its address. Measured with `smt-bench` at 64 KiB x 150 on loopback:
/// the queue peaked at 28 MB; a 16 MiB buffer dropped ~9 000 packets per run, 32 MiB none.
const RAW_MIN_RECV_BUFFER: usize = 16 << 20;

/// A non-blocking UDP or raw-IP socket bound to one address. See the crate docs for what it uses
/// and how it degrades.
///
/// The methods take `&self`; the socket may be shared between a sending and a receiving thread.
#[derive(Debug)]
pub struct Socket {
    inner: socket2::Socket,
    /// quinn-udp's per-socket state: GSO and GRO support, the GSO `sendmsg`, and the receive on
    /// platforms other than Linux and Android (where `sys::RecvHeaders` receives).
    state: UdpSocketState,
    features: Features,
    framing: Framing,
    ipv6: bool,
    calls: CallCounters,
}

impl Socket {
    /// Opens a non-blocking socket for `config.mode` bound to `addr` (IPv4 or IPv6; IPv6 sockets
    /// are IPv6-only), sizes its buffers and probes its offloads.
    ///
    /// In raw-IP mode the socket is bound to the IP address only; a non-zero port of `addr` makes
    /// the kernel queue only packets addressed to that port (see the crate docs).
    pub fn bind(addr: SocketAddr, config: &SocketConfig) -> Result<Self, SocketError> {
        let inner = open_bound(addr, config)?;
        if let (Mode::RawIp { .. }, port @ 1..) = (config.mode, addr.port()) {
            filter_port(&inner, port, addr.is_ipv6())?;
        }
        if config.mode == Mode::Udp {
            // Best effort: without it, ICMP errors are simply not seen.
            #[cfg(any(target_os = "linux", target_os = "android"))]
            if let Err(e) = crate::sys::enable_recv_errors(inner.as_fd(), addr.is_ipv6()) {
                tracing::debug!("IP_RECVERR not available: {e}");
            }
        }
        // Also makes the socket non-blocking and enables GRO where it can.
        let state = UdpSocketState::new((&inner).into())?;
        #[cfg(any(target_os = "linux", target_os = "android"))]
        crate::sys::drop_unread_control_messages(inner.as_fd(), addr.is_ipv6());
        let features = probe(&inner, &state, config)?;
        tracing::debug!(%addr, %features, "socket bound");
        Ok(Self {
            framing: Framing::new(config.mode, addr),
            ipv6: addr.is_ipv6(),
            inner,
            state,
            features,
            calls: CallCounters::default(),
        })
    }

    /// The bound address. In raw-IP mode the port is 0.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        let addr = self.inner.local_addr()?.as_socket();
        let addr = addr.ok_or_else(|| io::Error::other("socket has no IP address"))?;
        Ok(match self.features.mode {
            Mode::Udp => addr,
            // Linux reports the protocol number as the port of a raw socket.
            Mode::RawIp { .. } => with_port_zero(addr),
        })
    }

    /// What bind found: offloads, batch size, buffer sizes.
    ///
    /// This is the state at bind time. If a network driver later rejects GSO, quinn-udp stops
    /// using it and sends fall back to one datagram per system call; this value does not change.
    pub fn features(&self) -> &Features {
        &self.features
    }

    /// Sends `contents` to `dest` as datagrams of `segment_size` bytes; the last may be shorter.
    /// `segment_size >= contents.len()` sends one datagram, and empty `contents` one empty
    /// datagram. In raw-IP mode the port of `dest` is ignored.
    ///
    /// With GSO, one `sendmsg` carries up to [`Features::gso_max_segments`] datagrams and at most
    /// [`MAX_GSO_PAYLOAD`] bytes; larger contents take several calls. Without GSO (disabled, unsupported, or
    /// raw-IP mode) every datagram is its own call.
    ///
    /// # Errors
    ///
    /// `WouldBlock` when the socket buffer is full. One system call is all-or-nothing, so when
    /// the contents fit one GSO call nothing was sent and the same call can simply be retried.
    /// When they take several calls, the datagrams before the failing call **were** sent and a
    /// retry sends them again (the peer sees duplicates); [`Socket::send_some`] says how far it
    /// got. The same holds for any other error, such as `EMSGSIZE` for a datagram larger than the
    /// interface MTU (fragmentation is disabled), or `InvalidInput` for a `segment_size` of 0 or
    /// a `dest` of the wrong address family.
    ///
    /// A GSO segment larger than the interface MTU fails the call with `EMSGSIZE` on recent
    /// kernels; older ones said `EINVAL`, which quinn-udp takes for a driver without GSO and
    /// answers by turning GSO off for the socket. Keep segments within the MTU.
    pub fn send(&self, dest: SocketAddr, contents: &[u8], segment_size: usize) -> io::Result<()> {
        self.send_calls(dest, contents, segment_size)
            .map_err(|partial| partial.error)
    }

    /// Like [`Socket::send`], but reports progress: `Ok(n)` means the first `n` bytes of
    /// `contents` (whole datagrams) were sent; `n < contents.len()` means a later system call
    /// failed, and calling again with `&contents[n..]` resumes where it stopped. `Err` means
    /// nothing was sent.
    pub fn send_some(
        &self,
        dest: SocketAddr,
        contents: &[u8],
        segment_size: usize,
    ) -> io::Result<usize> {
        match self.send_calls(dest, contents, segment_size) {
            Ok(()) => Ok(contents.len()),
            Err(Partial { sent: 0, error }) => Err(error),
            Err(Partial { sent, error }) => {
                tracing::trace!(sent, total = contents.len(), %error, "partial send");
                Ok(sent)
            }
        }
    }

    /// Receives the datagrams waiting in the socket, up to one batch of receive slots, into
    /// `bufs`; read them with [`RecvBuffers::iter`]. Returns how many datagrams `iter` yields:
    /// GRO buffers count (and are yielded) as the datagrams they hold.
    ///
    /// In raw-IP mode a packet with a malformed IPv4 header is dropped, so `Ok(0)` is possible
    /// while more packets wait; only `WouldBlock` means the socket is drained.
    ///
    /// # Errors
    ///
    /// `WouldBlock` when nothing is pending. Any other error leaves `bufs` empty.
    pub fn recv(&self, bufs: &mut RecvBuffers) -> io::Result<usize> {
        self.recv_slots(bufs, false)
    }

    /// Like [`Socket::recv`], but into the first receive slot only: one datagram, or with GRO
    /// one run of them, through a `recvmsg` (Linux, Android). For traffic that brings one
    /// datagram at a time (a ping-pong): a batch call's set-up and the empty probe of its
    /// second slot cost ~0.3 µs more for that datagram.
    ///
    /// It does not say whether more wait: [`RecvBuffers::was_full`] is true after it got one.
    /// A caller that sleeps on level-triggered readiness (`poll`) learns it from its next
    /// wait; one on edge-triggered readiness must receive until `WouldBlock` before sleeping.
    pub fn recv_one(&self, bufs: &mut RecvBuffers) -> io::Result<usize> {
        self.recv_slots(bufs, true)
    }

    /// One receive call offering every slot of `bufs`, or the first only (`one`).
    fn recv_slots(&self, bufs: &mut RecvBuffers, one: bool) -> io::Result<usize> {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        let result = bufs.fill_from(self.framing, self.inner.as_fd(), one);
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        let result = bufs.fill(self.framing, one, |slots, meta| {
            self.state.recv((&self.inner).into(), slots, meta)
        });
        let empty = matches!(&result, Err(e) if e.kind() == io::ErrorKind::WouldBlock);
        self.calls.receive(empty);
        result
    }

    /// The data system calls made so far, by kind (see [`Calls`](crate::Calls)).
    pub fn calls(&self) -> crate::Calls {
        self.calls.snapshot()
    }

    /// The next ICMP error queued for a datagram this socket sent (UDP mode, Linux: the socket
    /// has `IP_RECVERR` on): the destination that could not be reached and the error, e.g.
    /// `ConnectionRefused` for a closed port. `Ok(None)` when none is queued. A receive that
    /// fails with an error other than `WouldBlock` means one is; drain them then, since the
    /// socket polls as failed (`POLLERR`) while any is queued. Entries the crate does not
    /// recognise come back with the unspecified address.
    pub fn take_error(&self) -> io::Result<Option<(SocketAddr, io::Error)>> {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        return crate::sys::recv_error(self.inner.as_fd());
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        return Ok(None);
    }

    /// Sends `contents` in as few system calls as the socket allows.
    fn send_calls(&self, dest: SocketAddr, contents: &[u8], segment_size: usize) -> SendResult {
        self.check_send(dest, contents, segment_size)
            .map_err(Partial::nothing_sent)?;
        if contents.is_empty() {
            return self
                .send_call(dest, contents, 0)
                .map_err(Partial::nothing_sent);
        }
        let segment = segment_size.min(contents.len());
        let per_call = self.segments_per_call(segment) * segment;
        let mut sent = 0;
        for chunk in contents.chunks(per_call) {
            self.send_call(dest, chunk, segment)
                .map_err(|error| Partial { sent, error })?;
            sent += chunk.len();
        }
        Ok(())
    }

    /// Rejects what the kernel would reject less clearly (or, for a family mismatch, with an
    /// error quinn-udp might mistake for missing GSO support).
    fn check_send(&self, dest: SocketAddr, contents: &[u8], segment_size: usize) -> io::Result<()> {
        if segment_size == 0 && !contents.is_empty() {
            let msg = "segment_size must be at least 1 byte";
            return Err(io::Error::new(io::ErrorKind::InvalidInput, msg));
        }
        if dest.is_ipv6() != self.ipv6 {
            let family = if self.ipv6 { "IPv6" } else { "IPv4" };
            let msg = format!("cannot send to {dest} from an {family} socket");
            return Err(io::Error::new(io::ErrorKind::InvalidInput, msg));
        }
        Ok(())
    }

    /// Datagrams of `segment` bytes one system call may carry: 1 without GSO.
    fn segments_per_call(&self, segment: usize) -> usize {
        if self.features.gso_max_segments <= 1 {
            return 1;
        }
        // quinn-udp lowers its maximum to 1 if the driver turns out to lack GSO.
        self.state
            .max_gso_segments()
            .min(MAX_GSO_PAYLOAD / segment)
            .max(1)
    }

    /// One system call: `chunk` as datagrams of `segment` bytes (GSO if it holds several).
    ///
    /// One datagram goes out through a plain `sendto`, in raw-IP and UDP mode alike: quinn-udp's
    /// `sendmsg` would add an `IP_TOS` control message (with ECN "not capable", the socket's
    /// default anyway) that the kernel parses on every call, and a `msghdr` and iovec to copy in.
    /// A small RPC's datagrams are sent one per call, so this is the common case.
    fn send_call(&self, dest: SocketAddr, chunk: &[u8], segment: usize) -> io::Result<()> {
        let gso = chunk.len() > segment;
        self.calls.send(gso);
        match self.features.mode {
            // Linux reads an IPv6 raw socket's destination port as a protocol number: it must
            // be 0.
            Mode::RawIp { .. } => self.send_one(with_port_zero(dest), chunk),
            Mode::Udp if !gso => self.send_one(dest, chunk),
            Mode::Udp => {
                let transmit = Transmit {
                    destination: dest,
                    ecn: None,
                    contents: chunk,
                    segment_size: Some(segment),
                    src_ip: None,
                };
                self.state.try_send((&self.inner).into(), &transmit)
            }
        }
    }

    /// One datagram, no control message: `sendto`.
    fn send_one(&self, dest: SocketAddr, datagram: &[u8]) -> io::Result<()> {
        let dest = SockAddr::from(dest);
        loop {
            match self.inner.send_to(datagram, &dest) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                result => return result.map(drop),
            }
        }
    }
}

impl AsFd for Socket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inner.as_fd()
    }
}

impl AsRawFd for Socket {
    fn as_raw_fd(&self) -> RawFd {
        self.inner.as_raw_fd()
    }
}

type SendResult = Result<(), Partial>;

/// A send that stopped after `sent` bytes because a system call failed with `error`.
#[derive(Debug)]
struct Partial {
    sent: usize,
    error: io::Error,
}

impl Partial {
    fn nothing_sent(error: io::Error) -> Self {
        Self { sent: 0, error }
    }
}

/// Creates the socket and binds it. `EPERM`/`EACCES` means the mode (or port) needs a privilege.
fn open_bound(addr: SocketAddr, config: &SocketConfig) -> Result<socket2::Socket, SocketError> {
    let mode = config.mode;
    let classify = |e| SocketError::classify(e, mode, addr);
    let domain = Domain::for_address(addr);
    let (inner, bind_addr) = match mode {
        Mode::Udp => (
            socket2::Socket::new(domain, Type::DGRAM, Some(Protocol::UDP)),
            addr,
        ),
        Mode::RawIp { protocol } => {
            let protocol = Protocol::from(libc::c_int::from(protocol));
            (
                socket2::Socket::new(domain, Type::RAW, Some(protocol)),
                with_port_zero(addr),
            )
        }
    };
    let inner = inner.map_err(classify)?;
    // Raw IPv6 sockets never see IPv4, and Linux refuses IPV6_V6ONLY on them.
    if addr.is_ipv6() && mode == Mode::Udp {
        inner.set_only_v6(true)?;
    }
    #[cfg(all(
        unix,
        not(any(target_os = "solaris", target_os = "illumos", target_os = "cygwin"))
    ))]
    if config.reuse_port && mode == Mode::Udp {
        inner.set_reuse_port(true)?;
    }
    inner.bind(&bind_addr.into()).map_err(classify)?;
    Ok(inner)
}

/// Has the kernel queue only the packets whose destination port (bytes 2-3 of the IP payload,
/// where TCP, UDP and SMT keep it) is `port`: without this a raw socket queues every packet of its
/// protocol to its address, other endpoints' and its own outgoing ones on loopback included, and
/// they fill its buffer. A classic BPF program; the kernel runs it before charging the buffer.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn filter_port(inner: &socket2::Socket, port: u16, ipv6: bool) -> io::Result<()> {
    use libc::{BPF_ABS, BPF_B, BPF_H, BPF_IND, BPF_JEQ, BPF_JMP, BPF_K, BPF_LD, BPF_LDX};
    use libc::{BPF_MSH, BPF_RET};
    use socket2::SockFilter;
    // The opcodes fit 16 bits (`struct sock_filter`'s `code`).
    let op = |code: u32| code as u16;
    // A = the 16 bits at X + 2, or at 2 for IPv6, whose raw sockets see the payload only.
    let load = match ipv6 {
        false => SockFilter::new(op(BPF_LD | BPF_H | BPF_IND), 0, 0, 2),
        true => SockFilter::new(op(BPF_LD | BPF_H | BPF_ABS), 0, 0, 2),
    };
    let program = [
        // X = the IPv4 header's length, 4 x IHL (unused for IPv6).
        SockFilter::new(op(BPF_LDX | BPF_B | BPF_MSH), 0, 0, 0),
        load,
        SockFilter::new(op(BPF_JMP | BPF_JEQ | BPF_K), 0, 1, u32::from(port)),
        // Keep the whole packet, or none of it.
        SockFilter::new(op(BPF_RET | BPF_K), 0, 0, u32::MAX),
        SockFilter::new(op(BPF_RET | BPF_K), 0, 0, 0),
    ];
    inner.attach_filter(&program)
}

/// Elsewhere every packet of the protocol is queued; the driver filters.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn filter_port(_inner: &socket2::Socket, _port: u16, _ipv6: bool) -> io::Result<()> {
    Ok(())
}

/// Settles offloads and buffer sizes and reports them.
fn probe(
    inner: &socket2::Socket,
    state: &UdpSocketState,
    config: &SocketConfig,
) -> io::Result<Features> {
    Ok(Features {
        mode: config.mode,
        gso_max_segments: gso_segments(state, config),
        gro_segments: gro_segments(inner, state, config)?,
        recv_batch: RECV_BATCH,
        recv_buffer: RECV.apply(inner, recv_buffer(config))?,
        send_buffer: SEND.apply(inner, config.send_buffer)?,
    })
}

/// The receive buffer to ask for: as configured, and at least [`RAW_MIN_RECV_BUFFER`] in raw-IP
/// mode.
fn recv_buffer(config: &SocketConfig) -> usize {
    match config.mode {
        Mode::Udp => config.recv_buffer,
        Mode::RawIp { .. } => config.recv_buffer.max(RAW_MIN_RECV_BUFFER),
    }
}

fn with_port_zero(mut addr: SocketAddr) -> SocketAddr {
    addr.set_port(0);
    addr
}

/// GSO in use: what quinn-udp found, unless disabled or in raw-IP mode.
fn gso_segments(state: &UdpSocketState, config: &SocketConfig) -> usize {
    match config.mode {
        Mode::Udp if config.enable_gso => state.max_gso_segments(),
        _ => 1,
    }
}

/// GRO in use. quinn-udp always enables it when the kernel has it, so disabling it means
/// switching it off again.
fn gro_segments(
    inner: &socket2::Socket,
    state: &UdpSocketState,
    config: &SocketConfig,
) -> io::Result<usize> {
    let available = state.gro_segments();
    match config.mode {
        // quinn-udp's `UDP_GRO` setsockopt fails on raw sockets; this is belt and braces.
        Mode::RawIp { .. } => Ok(1),
        Mode::Udp if available > 1 && !config.enable_gro => disable_gro(inner).map(|()| 1),
        Mode::Udp => Ok(available),
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn disable_gro(inner: &socket2::Socket) -> io::Result<()> {
    crate::sys::set_int_option(inner.as_fd(), libc::SOL_UDP, libc::UDP_GRO, 0)
}

/// quinn-udp enables GRO on Linux and Android only.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn disable_gro(_inner: &socket2::Socket) -> io::Result<()> {
    Ok(())
}

/// One direction's socket buffer: how to set it, read it, and force it past the sysctl cap.
struct BufferKnob {
    name: &'static str,
    sysctl: &'static str,
    set: fn(&socket2::Socket, usize) -> io::Result<()>,
    get: fn(&socket2::Socket) -> io::Result<usize>,
    #[cfg(any(target_os = "linux", target_os = "android"))]
    force: libc::c_int,
}

const RECV: BufferKnob = BufferKnob {
    name: "SO_RCVBUF",
    sysctl: "net.core.rmem_max",
    set: socket2::Socket::set_recv_buffer_size,
    get: socket2::Socket::recv_buffer_size,
    #[cfg(any(target_os = "linux", target_os = "android"))]
    force: libc::SO_RCVBUFFORCE,
};

const SEND: BufferKnob = BufferKnob {
    name: "SO_SNDBUF",
    sysctl: "net.core.wmem_max",
    set: socket2::Socket::set_send_buffer_size,
    get: socket2::Socket::send_buffer_size,
    #[cfg(any(target_os = "linux", target_os = "android"))]
    force: libc::SO_SNDBUFFORCE,
};

impl BufferKnob {
    /// Sets the buffer to `requested` bytes, forcing it past the sysctl cap if that capped it,
    /// and returns the size the kernel reports.
    fn apply(&self, inner: &socket2::Socket, requested: usize) -> io::Result<usize> {
        // The kernel takes an `int` and doubles it.
        let requested = requested.min(i32::MAX as usize / 2);
        (self.set)(inner, requested)?;
        let mut actual = (self.get)(inner)?;
        if actual < full_grant(requested) && self.force(inner, requested) {
            actual = (self.get)(inner)?;
        }
        if actual < LOW_BUFFER {
            tracing::warn!(
                "{} is {} (requested {}), below 2 MiB: bursts may overflow it and be dropped; \
                 raise {} or run with CAP_NET_ADMIN",
                self.name,
                Bytes(actual),
                Bytes(requested),
                self.sysctl,
            );
        }
        Ok(actual)
    }

    /// Retries with the privileged `*FORCE` option, which ignores the sysctl cap. Returns
    /// whether the kernel accepted it.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    fn force(&self, inner: &socket2::Socket, requested: usize) -> bool {
        let value = libc::c_int::try_from(requested).unwrap_or(libc::c_int::MAX);
        match crate::sys::set_int_option(inner.as_fd(), libc::SOL_SOCKET, self.force, value) {
            Ok(()) => true,
            Err(e) => {
                tracing::debug!("{}FORCE refused ({e}); keeping the capped size", self.name);
                false
            }
        }
    }

    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    fn force(&self, _inner: &socket2::Socket, _requested: usize) -> bool {
        false
    }
}

/// What the kernel reports for a buffer granted in full: Linux doubles the request to leave
/// room for its bookkeeping.
fn full_grant(requested: usize) -> usize {
    if cfg!(any(target_os = "linux", target_os = "android")) {
        requested * 2
    } else {
        requested
    }
}

/// Sizes an existing socket's buffers the way [`Socket::bind`] does
/// (forcing past the sysctl cap when privileged) and returns the sizes the
/// kernel reports. For tools and tests built on `std` sockets, such as the
/// fault-injecting relay, whose default 208 KiB buffers overflow in bursts.
pub fn size_buffers<S: AsFd>(socket: &S, recv: usize, send: usize) -> io::Result<(usize, usize)> {
    let sock = socket2::SockRef::from(socket);
    Ok((RECV.apply(&sock, recv)?, SEND.apply(&sock, send)?))
}

#[cfg(test)]
mod tests {
    use std::{net::Ipv4Addr, thread, time::Duration};

    use super::*;

    /// What one GSO batch of 10 × 1200 bytes and a 345-byte tail turned into on loopback.
    struct Arrival {
        slots: usize,
        datagrams: usize,
        /// Whether the sender had GSO and the receiver GRO.
        offloads: bool,
    }

    fn loopback_batch(gro: bool) -> Arrival {
        let local = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let rx_config = SocketConfig {
            enable_gro: gro,
            ..SocketConfig::default()
        };
        let rx = Socket::bind(local, &rx_config).unwrap();
        let tx = Socket::bind(local, &SocketConfig::default()).unwrap();
        tx.send(rx.local_addr().unwrap(), &[1; 12_345], 1200)
            .unwrap();
        thread::sleep(Duration::from_millis(20));
        let mut bufs = RecvBuffers::new(rx.features());
        let datagrams = rx.recv(&mut bufs).unwrap();
        let offloads = tx.features().gso_max_segments > 1 && rx.features().gro_segments > 1;
        Arrival {
            slots: bufs.slots_filled(),
            datagrams,
            offloads,
        }
    }

    /// Loopback does not segment a GSO packet on the way: a receiver with GRO gets the whole
    /// batch in one buffer, a receiver without it one buffer per datagram.
    #[test]
    fn loopback_hands_a_gso_batch_to_a_gro_socket_in_one_buffer() {
        let with_gro = loopback_batch(true);
        let without_gro = loopback_batch(false);
        println!(
            "slots filled: {} with GRO, {} without",
            with_gro.slots, without_gro.slots
        );
        assert_eq!(with_gro.datagrams, 11);
        assert_eq!((without_gro.slots, without_gro.datagrams), (11, 11));
        if with_gro.offloads {
            assert_eq!(with_gro.slots, 1);
        }
    }

    /// One datagram leaves through one plain `sendto` (no control message), a batch of eleven
    /// through one GSO `sendmsg` where the kernel has GSO (eleven `sendto`s where not); every
    /// receive call is counted, the one that finds the socket empty too.
    #[test]
    fn one_datagram_takes_one_plain_send_and_a_batch_one_gso_send() {
        let local = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let rx = Socket::bind(local, &SocketConfig::default()).unwrap();
        let tx = Socket::bind(local, &SocketConfig::default()).unwrap();
        let to = rx.local_addr().unwrap();
        tx.send(to, b"ping", 4).unwrap();
        tx.send(to, b"pong", 1200).unwrap();
        let sent = tx.calls();
        assert_eq!((sent.sends, sent.gso_sends), (2, 0));
        tx.send(to, &[1; 12_345], 1200).unwrap();
        let sent = tx.calls();
        match tx.features().gso_max_segments > 1 {
            true => assert_eq!((sent.sends, sent.gso_sends), (2, 1)),
            false => assert_eq!((sent.sends, sent.gso_sends), (2 + 11, 0)),
        }
        thread::sleep(Duration::from_millis(20));
        let mut bufs = RecvBuffers::new(rx.features());
        let mut datagrams = 0;
        while let Ok(n) = rx.recv(&mut bufs) {
            datagrams += n;
        }
        assert_eq!(datagrams, 13);
        let received = rx.calls();
        assert_eq!(received.empty_receives, 1);
        assert!(received.receives >= 2, "{received:?}");
        assert_eq!((received.sends, received.gso_sends), (0, 0));
    }

    /// `recv_one` takes one datagram per call with its source, says "more may wait"
    /// (`was_full`) after each, and `WouldBlock` once drained; a batch receive after it still
    /// says "drained" when it did not fill its slots. Every call counts as a receive.
    #[test]
    fn recv_one_takes_one_datagram_per_call() {
        let local = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let rx = Socket::bind(local, SocketConfig::default().set_gro(false)).unwrap();
        let tx = Socket::bind(local, &SocketConfig::default()).unwrap();
        let to = rx.local_addr().unwrap();
        for byte in 0..3u8 {
            tx.send(to, &[byte; 10], 10).unwrap();
        }
        thread::sleep(Duration::from_millis(20));
        let mut bufs = RecvBuffers::new(rx.features());
        for byte in 0..2u8 {
            assert_eq!(rx.recv_one(&mut bufs).unwrap(), 1);
            let got: Vec<_> = bufs.iter().map(|(a, d)| (a, d.to_vec())).collect();
            assert_eq!(got, [(tx.local_addr().unwrap(), vec![byte; 10])]);
            assert!(bufs.was_full());
        }
        assert_eq!(rx.recv(&mut bufs).unwrap(), 1);
        assert!(!bufs.was_full());
        let err = rx.recv_one(&mut bufs).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
        let calls = rx.calls();
        assert_eq!((calls.receives, calls.empty_receives), (4, 1));
    }

    /// With GRO, one `recv_one` takes a whole coalesced run and splits it like `recv`.
    #[test]
    fn recv_one_splits_a_gro_run() {
        let local = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let rx = Socket::bind(local, &SocketConfig::default()).unwrap();
        let tx = Socket::bind(local, &SocketConfig::default()).unwrap();
        tx.send(rx.local_addr().unwrap(), &[1; 12_345], 1200)
            .unwrap();
        thread::sleep(Duration::from_millis(20));
        let mut bufs = RecvBuffers::new(rx.features());
        let mut datagrams = 0;
        while let Ok(n) = rx.recv_one(&mut bufs) {
            datagrams += n;
            assert!(bufs.iter().all(|(_, d)| d.len() <= 1200));
        }
        assert_eq!(datagrams, 11);
    }

    /// Bind leaves on none of the control messages quinn-udp enables that nothing reads, on
    /// IPv4 and dual-stack IPv6, and a datagram still arrives with its source address.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    #[test]
    fn bind_turns_off_unread_control_messages() {
        use crate::sys::get_int_option;
        let v4 = Socket::bind((Ipv4Addr::LOCALHOST, 0).into(), &SocketConfig::default()).unwrap();
        let v6 = Socket::bind("[::]:0".parse().unwrap(), &SocketConfig::default()).unwrap();
        let off = |socket: &Socket, level, name| {
            get_int_option(socket.inner.as_fd(), level, name).map_or(true, |value| value == 0)
        };
        for socket in [&v4, &v6] {
            assert!(off(socket, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS));
            assert!(off(socket, libc::IPPROTO_IP, libc::IP_RECVTOS));
            assert!(off(socket, libc::IPPROTO_IP, libc::IP_PKTINFO));
        }
        assert!(off(&v6, libc::IPPROTO_IPV6, libc::IPV6_RECVTCLASS));
        assert!(off(&v6, libc::IPPROTO_IPV6, libc::IPV6_RECVPKTINFO));

        let tx = Socket::bind((Ipv4Addr::LOCALHOST, 0).into(), &SocketConfig::default()).unwrap();
        tx.send(v4.local_addr().unwrap(), b"ping", 4).unwrap();
        thread::sleep(Duration::from_millis(20));
        let mut bufs = RecvBuffers::new(v4.features());
        assert_eq!(v4.recv(&mut bufs).unwrap(), 1);
        let (from, bytes) = bufs.iter().next().unwrap();
        assert_eq!((from, bytes), (tx.local_addr().unwrap(), &b"ping"[..]));
    }
}
