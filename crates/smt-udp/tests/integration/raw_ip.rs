//! Raw-IP mode on loopback with protocol 253. Needs CAP_NET_RAW; without it the tests check the
//! permission error instead.
//!
//! A raw socket sees every protocol-253 packet to its address, including those of other tests
//! running at the same time, so each test marks its datagrams with a nonce and ignores the rest.

use crate::common;

use std::{
    io,
    net::SocketAddr,
    process, thread,
    time::{Duration, Instant, SystemTime},
};

use common::{families, PATIENCE};
use smt_udp::{Mode, RecvBuffers, Socket, SocketConfig, SocketError, DEFAULT_IP_PROTOCOL};

fn raw_config() -> SocketConfig {
    let mut config = SocketConfig::default();
    config.set_mode(Mode::raw_ip());
    config
}

/// Binds a raw socket; without CAP_NET_RAW checks the error's advice and returns `None`.
fn bind_raw(addr: SocketAddr) -> Option<Socket> {
    match Socket::bind(addr, &raw_config()) {
        Ok(socket) => Some(socket),
        Err(e @ SocketError::PermissionDenied { .. }) => {
            assert_permission_advice(&e);
            println!("note: no CAP_NET_RAW, checked the error instead: {e}");
            None
        }
        Err(e) => panic!("bind raw {addr}: {e}"),
    }
}

fn assert_permission_advice(error: &SocketError) {
    let text = error.to_string();
    for advice in ["CAP_NET_RAW", "setcap cap_net_raw+ep", "UDP mode"] {
        assert!(text.contains(advice), "{text:?} lacks {advice:?}");
    }
    assert!(std::error::Error::source(error).is_some());
}

/// Bytes no other test (or test run) sends.
fn nonce(label: &str) -> Vec<u8> {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{label}/{}/{nanos}/", process::id()).into_bytes()
}

/// Receives until `want` datagrams starting with `nonce` arrived or time ran out.
fn recv_marked(socket: &Socket, nonce: &[u8], want: usize) -> Vec<(SocketAddr, Vec<u8>)> {
    let mut bufs = RecvBuffers::new(socket.features());
    let deadline = Instant::now() + PATIENCE;
    let mut got = Vec::new();
    while got.len() < want && Instant::now() < deadline {
        match socket.recv(&mut bufs) {
            Ok(_) => got.extend(
                bufs.iter()
                    .filter(|(_, d)| d.starts_with(nonce))
                    .map(|(a, d)| (a, d.to_vec())),
            ),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                thread::sleep(Duration::from_millis(1))
            }
            Err(e) => panic!("recv: {e}"),
        }
    }
    got
}

#[test]
fn raw_sockets_exchange_a_datagram() {
    for family in families() {
        let (Some(a), Some(b)) = (bind_raw(family), bind_raw(family)) else {
            return;
        };
        let a_addr = a.local_addr().unwrap();
        assert_eq!(
            a_addr,
            SocketAddr::new(family.ip(), 0),
            "raw addresses have port 0"
        );

        let mut payload = nonce("exchange");
        payload.extend_from_slice(&[0xab; 1000]);
        // The port is ignored in raw mode.
        let mut dest = b.local_addr().unwrap();
        dest.set_port(4242);
        a.send(dest, &payload, payload.len()).unwrap();

        let got = recv_marked(&b, &payload[..payload.len() - 1000], 1);
        assert_eq!(
            got,
            [(a_addr, payload)],
            "{family}: IP payload only, from port 0"
        );
    }
}

#[test]
fn raw_send_splits_contents_into_datagrams() {
    for family in families() {
        let (Some(a), Some(b)) = (bind_raw(family), bind_raw(family)) else {
            return;
        };
        let mark = nonce("split");
        let sent: Vec<Vec<u8>> = (0..3u8)
            .map(|i| {
                let mut d = mark.clone();
                d.resize(100, i);
                d
            })
            .collect();
        let contents = [&sent[0][..], &sent[1], &sent[2][..60]].concat();
        a.send(b.local_addr().unwrap(), &contents, 100).unwrap();

        let got: Vec<Vec<u8>> = recv_marked(&b, &mark, 3)
            .into_iter()
            .map(|(_, d)| d)
            .collect();
        assert_eq!(
            got,
            [sent[0].clone(), sent[1].clone(), sent[2][..60].to_vec()],
            "{family}"
        );
    }
}

/// A datagram whose bytes 2..4 (where TCP, UDP and SMT keep the destination port) say `port`,
/// followed by `mark`.
fn to_port(port: u16, mark: &[u8]) -> Vec<u8> {
    [&[0, 0], &port.to_be_bytes()[..], mark].concat()
}

#[test]
fn a_raw_socket_bound_with_a_port_queues_only_packets_to_that_port() {
    for family in families() {
        let (Some(a), Some(b)) = (
            bind_raw(family),
            bind_raw(SocketAddr::new(family.ip(), 47_001)),
        ) else {
            return;
        };
        let mark = nonce("port");
        let (theirs, ours) = (to_port(47_002, &mark), to_port(47_001, &mark));
        let dest = b.local_addr().unwrap();
        a.send(dest, &theirs, theirs.len()).unwrap();
        a.send(dest, &ours, ours.len()).unwrap();

        // Loopback delivers in order: by the time `ours` is read, `theirs` was queued or dropped.
        let mut bufs = RecvBuffers::new(b.features());
        let deadline = Instant::now() + PATIENCE;
        let mut got = Vec::new();
        while !got.contains(&ours) && Instant::now() < deadline {
            match b.recv(&mut bufs) {
                Ok(_) => got.extend(
                    bufs.iter()
                        .filter(|(_, d)| d.ends_with(&mark))
                        .map(|(_, d)| d.to_vec()),
                ),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    thread::sleep(Duration::from_millis(1))
                }
                Err(e) => panic!("recv: {e}"),
            }
        }
        assert_eq!(got, [ours], "{family}: only the packet to port 47001");
        // Unfiltered, `a` saw both.
        assert_eq!(recv_marked(&a, &theirs, 1).len(), 1, "{family}");
    }
}

#[test]
fn raw_features_report_no_offloads() {
    for family in families() {
        let Some(socket) = bind_raw(family) else {
            return;
        };
        let f = socket.features();
        println!("{family}: {f}");
        assert_eq!(
            f.mode,
            Mode::RawIp {
                protocol: DEFAULT_IP_PROTOCOL
            }
        );
        assert_eq!((f.gso_max_segments, f.gro_segments), (1, 1));
        assert!(
            f.recv_batch >= 1 && f.recv_buffer > 0 && f.send_buffer > 0,
            "{f:?}"
        );
        let line = f.to_string();
        assert!(
            line.starts_with("raw IP protocol 253 (0xfd): no GSO, no GRO, "),
            "{line}"
        );
    }
}

#[test]
fn permission_error_explains_the_fix() {
    let error = SocketError::PermissionDenied {
        mode: Mode::raw_ip(),
        source: io::Error::from(io::ErrorKind::PermissionDenied),
    };
    assert_permission_advice(&error);
}
