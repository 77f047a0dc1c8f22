//! Helpers shared by the loopback tests.
#![allow(dead_code)] // each test binary uses a different subset

use std::{
    io,
    net::{Ipv4Addr, Ipv6Addr, SocketAddr},
    thread,
    time::{Duration, Instant},
};

use smt_udp::{RecvBuffers, Socket, SocketConfig};

pub const V4: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::LOCALHOST), 0);
pub const V6: SocketAddr = SocketAddr::new(std::net::IpAddr::V6(Ipv6Addr::LOCALHOST), 0);

/// How long a test waits for datagrams that should arrive at once on loopback.
pub const PATIENCE: Duration = Duration::from_secs(5);

/// Binds, failing the test on any error.
pub fn bind(addr: SocketAddr, config: &SocketConfig) -> Socket {
    Socket::bind(addr, config).unwrap_or_else(|e| panic!("bind {addr}: {e}"))
}

/// The loopback addresses to test: IPv4, and IPv6 unless the host has no `::1` (some network
/// namespaces lack it), which is noted on stdout.
pub fn families() -> Vec<SocketAddr> {
    match std::net::UdpSocket::bind(V6) {
        Ok(_) => vec![V4, V6],
        Err(e) => {
            println!("note: skipping IPv6: the host cannot bind {V6}: {e}");
            vec![V4]
        }
    }
}

/// Receives until `want` datagrams arrived or [`PATIENCE`] ran out; returns what arrived.
pub fn recv_n(socket: &Socket, bufs: &mut RecvBuffers, want: usize) -> Vec<(SocketAddr, Vec<u8>)> {
    let deadline = Instant::now() + PATIENCE;
    let mut got = Vec::new();
    while got.len() < want && Instant::now() < deadline {
        match socket.recv(bufs) {
            Ok(_) => got.extend(bufs.iter().map(|(from, d)| (from, d.to_vec()))),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                thread::sleep(Duration::from_millis(1))
            }
            Err(e) => panic!("recv: {e}"),
        }
    }
    got
}

/// Asserts nothing more is pending.
pub fn assert_drained(socket: &Socket, bufs: &mut RecvBuffers) {
    thread::sleep(Duration::from_millis(20));
    match socket.recv(bufs) {
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
        Ok(n) => panic!(
            "{n} unexpected datagrams: {:?}",
            bufs.iter().collect::<Vec<_>>()
        ),
        Err(e) => panic!("recv: {e}"),
    }
}

/// `count` datagrams of `size` bytes each, distinguishable by their first bytes, followed by a
/// `tail`-byte one if `tail > 0`.
pub fn datagrams(count: usize, size: usize, tail: usize) -> Vec<Vec<u8>> {
    let sizes = std::iter::repeat_n(size, count).chain((tail > 0).then_some(tail));
    sizes
        .enumerate()
        .map(|(i, len)| (0..len).map(|j| (i * 31 + j) as u8).collect())
        .collect()
}
