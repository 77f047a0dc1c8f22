//! SMT at the link's MTU (`smt-aes-link`: loopback's, datagrams of up to
//! 65,507 bytes): messages on either side of the record size (16 KiB) and
//! of the datagram size come back byte for byte, and the DATA packets
//! really are larger than a jumbo frame (nothing in the stack caps them
//! near 9 KiB).

use smt::Bytes;
use smt_bench::systems::link::{self, LOOPBACK};
use smt_bench::systems::{self, System};

/// Sizes around the record size, around one and two datagrams, and bulk.
const SIZES: [usize; 9] = [
    1,
    16_384,
    16_385,
    65_000,
    65_507,
    65_536,
    131_014,
    200_000,
    1 << 20,
];

/// A request whose every byte depends on its size and position, so a
/// misplaced or stale segment shows.
fn request(size: usize) -> Bytes {
    (0..size)
        .map(|i| (i.wrapping_mul(31) ^ size) as u8)
        .collect::<Vec<u8>>()
        .into()
}

#[test]
fn smt_at_the_link_mtu_echoes_messages_across_records_and_datagrams_byte_for_byte() {
    let (server, slots) = systems::smt::start(System::SmtAesLink, 1).expect("smt-aes-link");
    let (client, addr) = slots[0].parts();
    for size in SIZES {
        let sent = request(size);
        let got = client.call(addr, sent.clone()).expect("echo");
        assert!(got == sent, "{size} B came back different");
    }
    let traffic = client.stats().expect("stats").total;
    let data_bytes = traffic.traffic.bytes_sent;
    let per_packet = data_bytes / traffic.packets.data_sent.max(1);
    if link::route_mtu(LOOPBACK) >= 32_768 {
        // 1.4 MB in ~30 DATA packets (plus a few control packets' bytes):
        // at a 9,000-byte cap it would be ~9 KB per packet.
        assert!(per_packet > 16_384, "{per_packet} B per DATA packet");
    }
    drop(slots);
    server.stop();
}
