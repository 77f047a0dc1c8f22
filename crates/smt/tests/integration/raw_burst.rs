//! Raw IP at 64 KiB × 150 outstanding (issue #12 item 5): every call
//! completes and neither raw socket's receive queue overflows.
//!
//! Raw IP has no receive offload, so every datagram is charged a whole
//! kernel buffer, and a raw socket bound without a port (as here and in
//! `smt-bench`) queues both directions of every exchange to its address:
//! 150 outstanding 64 KiB calls put up to ~30 MB in each queue. With the
//! benchmark's 8 MiB buffers (16 MiB granted) the queue overflowed and
//! thousands of packets were dropped per run. The kernel's own counter
//! (`/proc/net/raw`, `drops`) is read; no timing is asserted. Needs
//! `CAP_NET_RAW` (and Linux); skipped with a note otherwise.

use crate::common;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use smt::keys::{fresh_session_pair, AeadAlgorithm};
use smt::{Endpoint, EndpointConfig, Error, Mode};

/// An address of this test's own: raw sockets see every packet of their
/// protocol to their address, and other tests use 127.0.0.1.
const ADDR: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 77);
const SIZE: usize = 64 << 10;
const OUTSTANDING: usize = 150;
const CALLS_EACH: usize = 8;

/// `smt-bench`'s raw-IP configuration: 8 MiB socket buffers asked for.
fn config() -> EndpointConfig {
    let mut config = EndpointConfig::default();
    config
        .socket_mut()
        .set_mode(Mode::RawIp {
            protocol: smt::DEFAULT_IP_PROTOCOL,
        })
        .set_recv_buffer(8 << 20)
        .set_send_buffer(8 << 20);
    config
}

/// Packets the kernel dropped at the receive queues of raw sockets bound
/// to [`ADDR`] (the `drops` column of `/proc/net/raw`).
fn kernel_drops() -> u64 {
    // `/proc/net/raw` writes the address as the bytes of its in-memory
    // (network-order) u32, printed as a little-endian hex number.
    let local = format!("{:08X}:", u32::from_le_bytes(ADDR.octets()));
    let table = std::fs::read_to_string("/proc/net/raw").expect("read /proc/net/raw");
    table
        .lines()
        .skip(1)
        .filter(|l| {
            l.split_whitespace()
                .nth(1)
                .is_some_and(|a| a.starts_with(&local))
        })
        .filter_map(|l| l.split_whitespace().last()?.parse::<u64>().ok())
        .sum()
}

fn bind() -> Option<Endpoint> {
    match Endpoint::bind(SocketAddr::new(IpAddr::V4(ADDR), 0), config()) {
        Ok(e) => Some(e),
        Err(e) => {
            println!("note: skipped, cannot open a raw socket here: {e}");
            None
        }
    }
}

#[test]
fn calls_of_64_kib_with_150_outstanding_overflow_no_raw_receive_queue() {
    let (Some(server), Some(client)) = (bind(), bind()) else {
        return;
    };
    let (ck, sk) = fresh_session_pair(AeadAlgorithm::Aes128Gcm);
    client.install_session(server.local_addr(), ck).unwrap();
    server.install_session(client.local_addr(), sk).unwrap();
    common::spawn_echo(&server, 2);
    let to = server.local_addr();
    // One call first: the session is then validated at both ends.
    client.call(to, b"hello").unwrap();
    let client = Arc::new(client);
    let callers: Vec<_> = (0..OUTSTANDING)
        .map(|t| {
            let client = client.clone();
            std::thread::spawn(move || {
                let mut failed = Vec::new();
                for n in 0..CALLS_EACH {
                    let req = vec![(t * CALLS_EACH + n) as u8; SIZE];
                    match client.call(to, &req) {
                        Ok(resp) => assert!(resp == req, "wrong echo"),
                        Err(e) => failed.push(e),
                    }
                }
                failed
            })
        })
        .collect();
    let failed: Vec<Error> = callers
        .into_iter()
        .flat_map(|c| c.join().unwrap())
        .collect();
    let drops = kernel_drops();
    let cs = client.stats().unwrap().total;
    let ss = server.stats().unwrap().total;
    println!(
        "{} calls: {} failed; kernel drops {drops}; retransmitted client {} server {}; \
         rcvbuf {}",
        OUTSTANDING * CALLS_EACH,
        failed.len(),
        cs.packets.retransmitted,
        ss.packets.retransmitted,
        client.features(),
    );
    client.close();
    server.close();
    assert!(failed.is_empty(), "failed calls: {failed:?}");
    assert_eq!(drops, 0, "packets dropped at full raw receive queues");
}
