//! UDP mode on loopback: GSO batches, GRO splitting, features, bursts, unreachable peers.

use crate::common;

use std::{
    collections::BTreeSet,
    io,
    net::SocketAddr,
    thread,
    time::{Duration, Instant},
};

use common::{assert_drained, bind, datagrams, families, recv_n, PATIENCE, V4, V6};
use smt_udp::{Mode, RecvBuffers, Socket, SocketConfig, SocketError};

fn config(gso: bool, gro: bool) -> SocketConfig {
    let mut config = SocketConfig::default();
    config.set_gso(gso).set_gro(gro);
    config
}

/// A receiver and a sender on the loopback address of `family`.
fn pair(family: SocketAddr, sender: &SocketConfig, receiver: &SocketConfig) -> (Socket, Socket) {
    (bind(family, receiver), bind(family, sender))
}

/// Sends `sent` in one `send` call and checks the same datagrams arrive, in order, from the
/// sender's address, whatever the offload settings on either side.
fn check_batch(family: SocketAddr, gso: bool, gro: bool, sent: &[Vec<u8>]) {
    let (rx, tx) = pair(family, &config(gso, true), &config(true, gro));
    let mut bufs = RecvBuffers::new(rx.features());
    tx.send(rx.local_addr().unwrap(), &sent.concat(), sent[0].len())
        .unwrap();

    let got = recv_n(&rx, &mut bufs, sent.len());
    let from = tx.local_addr().unwrap();
    let label = format!("{family} gso={gso} gro={gro}");
    assert_eq!(got.len(), sent.len(), "{label}: datagram count");
    for (i, ((addr, bytes), expected)) in got.iter().zip(sent).enumerate() {
        assert_eq!(*addr, from, "{label}: source of datagram {i}");
        assert_eq!(bytes, expected, "{label}: bytes of datagram {i}");
    }
    assert_drained(&rx, &mut bufs);
}

#[test]
fn gso_batch_arrives_as_the_datagrams_sent() {
    let sent = datagrams(10, 1200, 345);
    for family in families() {
        for (gso, gro) in [(true, true), (true, false), (false, true), (false, false)] {
            check_batch(family, gso, gro, &sent);
        }
    }
}

#[test]
fn contents_beyond_one_gso_call_are_split_across_calls() {
    // 100 segments: more than 64 per call; 138 601 bytes: more than 65 507 per call.
    let sent = datagrams(100, 1400, 1);
    for family in families() {
        check_batch(family, true, true, &sent);
        check_batch(family, true, false, &sent);
    }
}

#[test]
fn segment_size_at_or_beyond_the_length_sends_one_datagram() {
    for family in families() {
        for segment in [5000, 9999] {
            let (rx, tx) = pair(family, &config(true, true), &config(true, true));
            let mut bufs = RecvBuffers::new(rx.features());
            tx.send(rx.local_addr().unwrap(), &[7; 5000], segment)
                .unwrap();
            let got = recv_n(&rx, &mut bufs, 1);
            assert_eq!(
                got,
                [(tx.local_addr().unwrap(), vec![7; 5000])],
                "segment {segment}"
            );
            assert_drained(&rx, &mut bufs);
        }
    }
}

#[test]
fn empty_contents_send_one_empty_datagram() {
    for family in families() {
        let (rx, tx) = pair(family, &config(true, true), &config(true, true));
        let mut bufs = RecvBuffers::new(rx.features());
        tx.send(rx.local_addr().unwrap(), &[], 0).unwrap();
        let got = recv_n(&rx, &mut bufs, 1);
        assert_eq!(got, [(tx.local_addr().unwrap(), vec![])]);
    }
}

#[test]
fn misuse_is_rejected_with_invalid_input() {
    let (rx, tx) = pair(V4, &SocketConfig::default(), &SocketConfig::default());
    let dest = rx.local_addr().unwrap();
    let zero_segment = tx.send(dest, &[1, 2, 3], 0).unwrap_err();
    assert_eq!(
        zero_segment.kind(),
        io::ErrorKind::InvalidInput,
        "{zero_segment}"
    );
    let wrong_family = tx.send(V6, &[1, 2, 3], 3).unwrap_err();
    assert_eq!(
        wrong_family.kind(),
        io::ErrorKind::InvalidInput,
        "{wrong_family}"
    );
    assert!(
        wrong_family.to_string().contains("IPv4 socket"),
        "{wrong_family}"
    );
    // Nothing was sent, and the socket still works.
    assert_eq!(tx.send_some(dest, &[9; 2400], 1200).unwrap(), 2400);
    let mut bufs = RecvBuffers::new(rx.features());
    assert_eq!(recv_n(&rx, &mut bufs, 2).len(), 2);
    assert_drained(&rx, &mut bufs);
}

#[test]
fn features_report_sane_values() {
    for family in families() {
        let socket = bind(family, &SocketConfig::default());
        let f = socket.features();
        println!("{family}: {f}");
        assert_eq!(f.mode, Mode::Udp);
        assert!((1..=64).contains(&f.gso_max_segments), "{f:?}");
        assert!((1..=64).contains(&f.gro_segments), "{f:?}");
        assert!((1..=32).contains(&f.recv_batch), "{f:?}");
        assert!(f.recv_buffer > 0 && f.send_buffer > 0, "{f:?}");
        if cfg!(target_os = "linux") {
            assert_eq!(f.recv_batch, 32, "Linux has recvmmsg");
        }
        let line = f.to_string();
        assert!(line.starts_with("udp: "), "{line}");
        assert!(line.contains("rcvbuf") && line.contains("sndbuf"), "{line}");
        assert!(!line.contains('\n'), "{line}");

        let off = bind(family, &config(false, false));
        let f = off.features();
        assert_eq!((f.gso_max_segments, f.gro_segments), (1, 1), "{f:?}");
        let line = f.to_string();
        assert!(line.starts_with("udp: no GSO, no GRO, "), "{line}");
    }
}

#[test]
fn buffers_are_reported_as_the_kernel_sized_them() {
    let big = bind(V4, &SocketConfig::default());
    let big = big.features();
    let mut small = SocketConfig::default();
    small.set_recv_buffer(64 << 10).set_send_buffer(64 << 10);
    let small = bind(V4, &small);
    let small = small.features();
    println!("asked 4 MiB: {big}\nasked 64 KiB: {small}");
    // Linux grants (and reports) double the request, or less if capped without CAP_NET_ADMIN.
    assert!(
        big.recv_buffer <= 8 << 20 && big.send_buffer <= 8 << 20,
        "{big:?}"
    );
    assert!(small.recv_buffer <= big.recv_buffer, "{small:?} vs {big:?}");
    assert!(small.recv_buffer < 1 << 20, "{small:?}");
}

#[test]
fn local_addr_is_the_bound_one() {
    for family in families() {
        let addr = bind(family, &SocketConfig::default()).local_addr().unwrap();
        assert_eq!(addr.ip(), family.ip());
        assert_ne!(addr.port(), 0);
    }
}

#[test]
fn binding_a_taken_port_says_so() {
    let first = bind(V4, &SocketConfig::default());
    let taken = first.local_addr().unwrap();
    let err = Socket::bind(taken, &SocketConfig::default()).unwrap_err();
    assert!(
        matches!(err, SocketError::AddrInUse(addr, _) if addr == taken),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains(&taken.to_string()) && text.contains("port 0"),
        "{text}"
    );
    assert!(std::error::Error::source(&err).is_some());
}

/// With `reuse_port` on every socket, a group shares one port, and each keeps its offloads; a
/// socket without it cannot join.
#[test]
fn sockets_with_reuse_port_share_one_port() {
    let mut shared = SocketConfig::default();
    shared.set_reuse_port(true);
    let first = bind(V4, &shared);
    let port = first.local_addr().unwrap();
    let second = Socket::bind(port, &shared).expect("a second SO_REUSEPORT socket joins");
    assert_eq!(second.local_addr().unwrap(), port);
    assert_eq!(
        second.features().gso_max_segments,
        first.features().gso_max_segments
    );
    let err = Socket::bind(port, &SocketConfig::default()).unwrap_err();
    assert!(matches!(err, SocketError::AddrInUse(..)), "{err:?}");
}

/// 2000 datagrams of 1400 bytes, sent as fast as the socket takes them while a second thread
/// drains the receiver: with 4 MiB buffers nothing is lost on loopback.
fn check_burst(family: SocketAddr, offloads: bool) {
    const COUNT: usize = 2000;
    const SIZE: usize = 1400;
    let both = config(offloads, offloads);
    let (rx, tx) = pair(family, &both, &both);
    let dest = rx.local_addr().unwrap();
    let receiver = thread::spawn(move || drain_burst(&rx, COUNT, SIZE));

    let per_call = tx.features().gso_max_segments.min(40);
    let contents: Vec<u8> = (0..COUNT)
        .flat_map(|seq| burst_datagram(seq, SIZE))
        .collect();
    let mut sent = 0;
    let deadline = Instant::now() + PATIENCE;
    while sent < contents.len() {
        assert!(Instant::now() < deadline, "sender stuck at {sent} bytes");
        let end = (sent + per_call * SIZE).min(contents.len());
        match tx.send_some(dest, &contents[sent..end], SIZE) {
            Ok(n) => sent += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => thread::yield_now(),
            Err(e) => panic!("send: {e}"),
        }
    }
    let seen = receiver.join().unwrap();
    let missing: Vec<usize> = (0..COUNT).filter(|seq| !seen.contains(seq)).collect();
    assert!(
        missing.is_empty(),
        "{family} offloads={offloads}: lost {missing:?}"
    );
}

/// One burst datagram: its sequence number, then a pattern derived from it.
fn burst_datagram(seq: usize, size: usize) -> Vec<u8> {
    let mut d: Vec<u8> = (0..size).map(|i| (seq + i) as u8).collect();
    d[..4].copy_from_slice(&(seq as u32).to_be_bytes());
    d
}

/// Receives until `count` distinct burst datagrams arrived (or time ran out), checking each.
fn drain_burst(rx: &Socket, count: usize, size: usize) -> BTreeSet<usize> {
    let mut bufs = RecvBuffers::new(rx.features());
    let mut seen = BTreeSet::new();
    let deadline = Instant::now() + PATIENCE;
    while seen.len() < count && Instant::now() < deadline {
        match rx.recv(&mut bufs) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                thread::sleep(Duration::from_micros(50));
                continue;
            }
            Err(e) => panic!("recv: {e}"),
        }
        for (_, d) in bufs.iter() {
            let seq = u32::from_be_bytes([d[0], d[1], d[2], d[3]]) as usize;
            assert_eq!(d, burst_datagram(seq, size), "datagram {seq} corrupted");
            assert!(seen.insert(seq), "datagram {seq} duplicated");
        }
    }
    seen
}

#[test]
fn burst_with_gso_and_gro_loses_nothing() {
    for family in families() {
        check_burst(family, true);
    }
}

#[test]
fn burst_without_offloads_loses_nothing() {
    for family in families() {
        check_burst(family, false);
    }
}

/// Linux drops ICMP errors for unconnected sockets without `IP_RECVERR`, so nothing surfaces;
/// elsewhere an error may come back as `ConnectionRefused` from a later call. Never a panic.
#[test]
fn sending_to_a_closed_port_does_not_panic() {
    let refused = |e: &io::Error| e.kind() == io::ErrorKind::ConnectionRefused;
    for family in families() {
        let tx = bind(family, &SocketConfig::default());
        let closed = bind(family, &SocketConfig::default()).local_addr().unwrap();
        let mut bufs = RecvBuffers::new(tx.features());
        for round in 0..3 {
            let sent = tx.send(closed, &[0; 3000], 1000);
            thread::sleep(Duration::from_millis(10));
            let received = tx.recv(&mut bufs);
            println!("{family} round {round}: send {sent:?}, then recv {received:?}");
            assert!(sent.as_ref().err().is_none_or(refused), "send: {sent:?}");
            let err = received.expect_err("nothing can have arrived");
            assert!(
                err.kind() == io::ErrorKind::WouldBlock || refused(&err),
                "recv: {err}"
            );
        }
    }
}

/// Past `net.core.rmem_max`/`wmem_max`, a privileged process gets the size it asked for
/// (`SO_*BUFFORCE`) and an unprivileged one the cap; either way the report is the truth.
#[cfg(target_os = "linux")]
#[test]
fn buffers_past_the_sysctl_cap_are_forced_or_capped() {
    let sysctl = |name: &str| -> Option<usize> {
        std::fs::read_to_string(format!("/proc/sys/net/core/{name}"))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    let (Some(rmem_max), Some(wmem_max)) = (sysctl("rmem_max"), sysctl("wmem_max")) else {
        println!("note: cannot read the buffer sysctls; skipping");
        return;
    };
    let requested = 2 * rmem_max.max(wmem_max);
    let mut config = SocketConfig::default();
    config.set_recv_buffer(requested).set_send_buffer(requested);
    let f = bind(V4, &config).features().clone();
    println!("asked {requested} past caps {rmem_max}/{wmem_max}: {f}");
    assert!(
        [2 * requested, 2 * rmem_max].contains(&f.recv_buffer),
        "{f:?}"
    );
    assert!(
        [2 * requested, 2 * wmem_max].contains(&f.send_buffer),
        "{f:?}"
    );
}
