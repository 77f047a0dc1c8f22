//! Platform sockets for SMT: UDP with segmentation and receive offload, batched receives, and
//! raw IP.
//!
//! This crate moves datagrams between the SMT driver and the kernel and knows nothing about the
//! protocol: it never reads a byte of what it sends or receives, with one exception, the IPv4
//! header that raw sockets deliver in front of every packet, which it strips. The driver decides
//! what to send, when, and to whom; this crate decides only how many system calls that takes.
//!
//! # What is used, and what happens without it
//!
//! [`Socket::bind`] probes the kernel once and [`Socket::features`] reports the outcome. Its
//! [`Display`](std::fmt::Display) form is one line meant for users ("what is in use").
//!
//! | Feature | Used when | Without it |
//! |---------|-----------|------------|
//! | GSO (`UDP_SEGMENT`): many datagrams in one `sendmsg` | UDP mode, Linux 4.18+, [`SocketConfig::gso`] | one `sendto` per datagram |
//! | GRO (`UDP_GRO`): the kernel hands over runs of same-size datagrams as one buffer | UDP mode, Linux 5.0+, [`SocketConfig::gro`] | one datagram per receive slot |
//! | `recvmmsg`: up to 32 receive slots per system call | Linux, Android, FreeBSD | one datagram per call |
//! | Large socket buffers | `SO_RCVBUF`/`SO_SNDBUF`, then `SO_RCVBUFFORCE`/`SO_SNDBUFFORCE` if `net.core.rmem_max`/`wmem_max` capped the size (needs `CAP_NET_ADMIN`) | whatever the kernel granted; a warning is logged below 2 MiB |
//! | A kernel port filter (classic BPF, `SO_ATTACH_FILTER`) | raw-IP mode, Linux, bound with a non-zero port | every packet of the protocol to the address is queued, and the driver drops the others' |
//!
//! With GRO the kernel may coalesce up to 64 datagrams into one buffer; [`RecvBuffers::iter`]
//! splits them again, so the driver always sees the datagrams as sent. On loopback a GSO batch is
//! never split on the way: a receiver with GRO gets the whole batch as one buffer, one without it
//! gets the datagrams one by one.
//!
//! A single datagram always leaves through a plain `sendto`, with no control message: the
//! common case for small RPCs, and ~250 ns cheaper per call than quinn-udp's `sendmsg` with its
//! `IP_TOS` control message (the `calls` line of smt's `rtt` example). [`Socket::calls`] counts
//! the system calls by kind.
//!
//! On Linux the receive is this crate's own `recvmmsg`, with its headers prepared once per
//! [`RecvBuffers`] and only the GRO segment size read back from the control messages (quinn-udp's
//! prepared 32 headers and decoded every control message it knows on each call). GSO sends, and
//! receives on other platforms, go through [`quinn_udp`]. [`Socket::recv_one`] takes one
//! datagram (or one GRO run) by `recvmsg` into the same buffers, ~250 ns cheaper than the batch
//! call for traffic that brings one datagram per wait, but it does not say whether more wait. If a network driver rejects GSO at run
//! time (`EIO` or `EINVAL` from `sendmsg`), quinn-udp turns GSO off for the socket and later sends go out one
//! datagram per system call; [`Socket::features`] keeps describing what bind found.
//!
//! # Raw IP mode
//!
//! [`Mode::RawIp`] opens a raw socket for one IP protocol number (default
//! [`DEFAULT_IP_PROTOCOL`], 253, reserved for experimentation by RFC 3692). It needs
//! `CAP_NET_RAW`; without it [`Socket::bind`] fails with [`SocketError::PermissionDenied`], whose
//! message explains the fix. In this mode:
//!
//! - The socket is bound to an IP address, and every address this crate returns has port 0.
//!   Ports are the driver's business, with one exception: a non-zero port in the address given to
//!   `bind` makes the kernel queue only packets whose destination port field (bytes 2-3 of the IP
//!   payload, where TCP, UDP and SMT keep it) holds it.
//! - Without that filter a raw socket receives **every** packet of its protocol addressed to its
//!   IP address (to any address if bound to the unspecified one), whichever process or peer it
//!   belongs to, including packets sent by other raw sockets of this host (on loopback, both
//!   directions of every exchange). The driver must filter, and the others' packets share the
//!   socket's receive buffer.
//! - The receive buffer is at least 16 MiB (32 MiB granted) whatever the configuration asks:
//!   without receive offload the kernel charges every datagram a whole buffer (2 304 bytes for a
//!   1 500-byte packet), and 150 outstanding 64 KiB messages overflowed 16 MiB on loopback.
//! - Sending makes one system call per datagram: the kernel has no segmentation offload for raw
//!   sockets, and no receive offload either.
//!
//! # Errors from the network
//!
//! Sockets are not connected; in UDP mode on Linux they enable `IP_RECVERR` (`IPV6_RECVERR`), so
//! an ICMP error (port or host unreachable) for a datagram they sent makes the next
//! [`Socket::recv`] fail once with it (`ConnectionRefused`, ...), and [`Socket::take_error`] then
//! reads the queued details: which destination could not be reached, and why. The socket polls
//! as failed (`POLLERR`) until that queue is drained. Without `IP_RECVERR` (raw-IP mode, other
//! platforms) Linux discards such errors. Nothing here panics on them.
//!
//! Datagrams are sent with the don't-fragment bit (quinn-udp sets `IP_PMTUDISC_PROBE`): a datagram
//! larger than the interface MTU fails with `EMSGSIZE` instead of being fragmented.
#![warn(missing_docs, unreachable_pub)]

mod calls;
mod error;
mod features;
mod gso;
mod recv;
mod socket;
#[cfg(any(target_os = "linux", target_os = "android"))]
mod sys;

use std::fmt;

pub use calls::Calls;
pub use error::SocketError;
pub use features::Features;
pub use gso::{GsoBatch, MAX_GSO_PAYLOAD};
pub use recv::RecvBuffers;
pub use socket::{size_buffers, Socket};

/// The IP protocol number raw-IP mode uses unless told otherwise: 253 (0xfd), reserved for
/// experimentation and testing by RFC 3692.
pub const DEFAULT_IP_PROTOCOL: u8 = 253;

/// How datagrams travel: inside UDP, or directly inside IP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Mode {
    /// UDP datagrams; unprivileged, and the only mode with segmentation and receive offload.
    #[default]
    Udp,
    /// Raw IP packets of one protocol number; needs `CAP_NET_RAW`. See the crate docs.
    RawIp {
        /// The IP protocol number (IPv4 "protocol", IPv6 "next header").
        protocol: u8,
    },
}

impl Mode {
    /// Raw IP with [`DEFAULT_IP_PROTOCOL`].
    pub const fn raw_ip() -> Self {
        Self::RawIp {
            protocol: DEFAULT_IP_PROTOCOL,
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Udp => f.write_str("udp"),
            Self::RawIp { protocol } => write!(f, "raw IP protocol {protocol} ({protocol:#04x})"),
        }
    }
}

/// What [`Socket::bind`] asks of the kernel: `Default` and chained `set_*`
/// setters (`SocketConfig::default().set_mode(Mode::raw_ip())`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SocketConfig {
    mode: Mode,
    recv_buffer: usize,
    send_buffer: usize,
    enable_gso: bool,
    enable_gro: bool,
    reuse_port: bool,
}

impl Default for SocketConfig {
    fn default() -> Self {
        Self {
            mode: Mode::Udp,
            recv_buffer: 4 << 20,
            send_buffer: 4 << 20,
            enable_gso: true,
            enable_gro: true,
            reuse_port: false,
        }
    }
}

impl SocketConfig {
    /// UDP or raw IP. Default: [`Mode::Udp`].
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Sets [`SocketConfig::mode`].
    pub fn set_mode(&mut self, mode: Mode) -> &mut Self {
        self.mode = mode;
        self
    }

    /// Requested `SO_RCVBUF` in bytes. Default: 4 MiB, at least 16 MiB in raw-IP mode (see the
    /// crate docs). Linux reports (and grants) double.
    pub fn recv_buffer(&self) -> usize {
        self.recv_buffer
    }

    /// Sets [`SocketConfig::recv_buffer`].
    pub fn set_recv_buffer(&mut self, bytes: usize) -> &mut Self {
        self.recv_buffer = bytes;
        self
    }

    /// Requested `SO_SNDBUF` in bytes. Default: 4 MiB. Linux reports (and grants) double.
    pub fn send_buffer(&self) -> usize {
        self.send_buffer
    }

    /// Sets [`SocketConfig::send_buffer`].
    pub fn set_send_buffer(&mut self, bytes: usize) -> &mut Self {
        self.send_buffer = bytes;
        self
    }

    /// Use UDP segmentation offload when the kernel has it. Default: true. Ignored in raw mode.
    pub fn gso(&self) -> bool {
        self.enable_gso
    }

    /// Sets [`SocketConfig::gso`].
    pub fn set_gso(&mut self, on: bool) -> &mut Self {
        self.enable_gso = on;
        self
    }

    /// Use UDP receive offload when the kernel has it. Default: true. Ignored in raw mode.
    pub fn gro(&self) -> bool {
        self.enable_gro
    }

    /// Sets [`SocketConfig::gro`].
    pub fn set_gro(&mut self, on: bool) -> &mut Self {
        self.enable_gro = on;
        self
    }

    /// Bind with `SO_REUSEPORT` (Unix), so several sockets share one port and the kernel spreads
    /// incoming datagrams over them by a hash of their addresses (one sender always reaches the
    /// same socket). Every socket of the group must set it, the first included. Default: false.
    /// Ignored in raw mode.
    pub fn reuse_port(&self) -> bool {
        self.reuse_port
    }

    /// Sets [`SocketConfig::reuse_port`].
    pub fn set_reuse_port(&mut self, on: bool) -> &mut Self {
        self.reuse_port = on;
        self
    }
}
