//! Builds capture files from real SMT exchanges, with the ground truth of
//! what they hold: two `smt_proto::Endpoint`s with real handshakes (TLS 1.3
//! with rustls, or the PSK nonce exchange) and AES-GCM, joined by a
//! virtual link on a virtual clock; every datagram the link delivers is
//! written to the capture as it arrives, as tcpdump on the receiving hosts
//! would see it (a datagram the link loses is not in the capture; its
//! retransmission is). Also a "zoo" of
//! hand-made packets of every type, and malformed ones, for the dissector.
//!
//! Used by the tests and by `examples/make_captures.rs`, which writes the
//! committed captures under `tools/wireshark/testdata/`.

#![allow(dead_code)] // each test binary uses a different part

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use etherparse::{IpNumber, LinuxSllPacketType, PacketBuilder};
use pcap_parser::pcapng::{EnhancedPacketBlock, InterfaceDescriptionBlock, SectionHeaderBlock};
use pcap_parser::{LegacyPcapBlock, Linktype, PcapHeader, ToVec};
use serde::Serialize;
use smt::keys::{AeadAlgorithm, PskClient, SessionKeyLog};
use smt::ServerAcceptor;
use smt_proto::wire::{AckIds, Body, DataHeader, Packet, Repr};
use smt_proto::{Config, Endpoint, Event, HandshakeKind};
use smt_tls::certs::Ca;
use smt_tls::{KeyLogPolicy, TlsClient, TlsOptions, TlsServer};

/// How the captured datagrams are framed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// pcap, Ethernet, IPv4, UDP.
    EthernetUdp4,
    /// pcapng, raw IP (LINKTYPE_RAW), IPv6, UDP.
    RawUdp6,
    /// pcap, Linux cooked (SLL), IPv4, SMT's IP protocol 253.
    SllProto253,
}

/// Which handshake gives the session its keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keys {
    Tls,
    Psk,
    /// No handshake: both sides install keys from random traffic secrets
    /// that rekey like a 0-RTT SMT-key (`docs/handshake.md` § 4), and the
    /// key log names them with the 0-RTT labels under a made-up id, so
    /// `smt dump` must find them by trial decryption.
    InstalledZeroRtt,
}

/// One datagram of a capture and what it holds.
#[derive(Clone, Debug, Serialize)]
pub struct TruthFrame {
    pub frame: u64,
    pub src: String,
    pub dst: String,
    pub packets: Vec<TruthPacket>,
}

/// One packet as its sender built it (`Repr::parse` of its bytes, or the
/// reason it is malformed).
#[derive(Clone, Debug, Serialize)]
pub struct TruthPacket {
    /// Offset in the datagram.
    pub offset: usize,
    pub len: usize,
    #[serde(rename = "type")]
    pub kind: String,
    pub key_phase: Option<u8>,
    pub id: Option<String>,
    /// The type's fields by their dissector names (`smt.<name>`).
    pub fields: Vec<(String, String)>,
    /// Whether the packet is malformed (and a receiver drops it).
    pub malformed: bool,
    /// Why it is malformed (`WireError`'s text), if it is.
    pub error: Option<String>,
}

/// A message an application sent, and its plaintext.
#[derive(Clone, Debug, Serialize)]
pub struct TruthMessage {
    pub src: String,
    pub dst: String,
    pub id: String,
    pub kind: &'static str,
    pub len: usize,
    /// The plaintext (hex) when it is at most 4 KiB; else its FNV-1a 64
    /// hash (hex), to keep the committed truth small.
    pub plaintext_hex: Option<String>,
    pub plaintext_fnv64: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct Truth {
    pub capture: String,
    pub frames: Vec<TruthFrame>,
    pub messages: Vec<TruthMessage>,
}

/// A built capture: the file, the key log, and the truth.
pub struct Built {
    pub framing: Framing,
    /// The captured datagrams, to make variants of the capture from.
    pub frames: Vec<Frame>,
    pub capture: Vec<u8>,
    pub keylog: String,
    pub truth: Truth,
}

/// A datagram on the virtual link.
struct Sent {
    at: Instant,
    from: SocketAddr,
    to: SocketAddr,
    bytes: Vec<u8>,
}

/// What to send, and which datagram the link loses.
pub struct Exchange {
    pub name: String,
    pub keys: Keys,
    pub framing: Framing,
    /// Requests, in batches sent together (a batch's small requests share
    /// datagrams).
    pub batches: Vec<Vec<Vec<u8>>>,
    /// Loses the first datagram from the client whose first packet is DATA
    /// with this packet index (not a retransmission).
    pub lose_client_data_index: Option<u16>,
    /// Bits of record index (`Config::seq_layout`); fewer ID bits make the
    /// session rekey sooner.
    pub index_bits: u8,
}

/// The response the server sends to `request`: its bytes reversed, so
/// requests and responses differ.
pub fn response_to(request: &[u8]) -> Vec<u8> {
    request.iter().rev().copied().collect()
}

/// A request of `len` bytes, recognisable by `seed`.
pub fn request(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| seed.wrapping_add((i * 7 % 251) as u8))
        .collect()
}

/// The exchange of the committed TLS capture: a small request, a
/// three-packet one whose second packet is lost (RESEND, retransmission),
/// then two small ones sent together (coalesced).
pub fn tls_exchange() -> Exchange {
    Exchange {
        name: "smt-tls".into(),
        keys: Keys::Tls,
        framing: Framing::EthernetUdp4,
        batches: vec![
            vec![b"hello over SMT".to_vec()],
            vec![request(1, 4000)],
            vec![b"first of two".to_vec(), b"second of two".to_vec()],
        ],
        lose_client_data_index: Some(1),
        index_bits: 16,
    }
}

/// The exchange of the committed PSK capture: IPv6, pcapng, one request
/// large enough to need GRANTs (the endpoints send 8 000 unscheduled bytes
/// and grant 8 000 ahead, for a small capture).
pub fn psk_exchange() -> Exchange {
    Exchange {
        name: "smt-psk".into(),
        keys: Keys::Psk,
        framing: Framing::RawUdp6,
        batches: vec![vec![b"psk hello".to_vec()], vec![request(9, 20_000)]],
        lose_client_data_index: None,
        index_bits: 16,
    }
}

/// Enough one-request batches, with 8-bit message IDs, for the session to
/// pass through several key epochs (a side moves on when a quarter of its
/// 128 IDs per epoch are left).
pub fn rekeying_exchange() -> Exchange {
    Exchange {
        name: "smt-rekey".into(),
        keys: Keys::InstalledZeroRtt,
        framing: Framing::EthernetUdp4,
        batches: (0..250u16)
            .map(|i| vec![request(i as u8, 40 + usize::from(i % 7))])
            .collect(),
        lose_client_data_index: None,
        index_bits: 56,
    }
}

const MASTER: [u8; 32] = [0x5a; 32];

/// Runs `ex` between two endpoints and captures it.
pub fn build(ex: &Exchange) -> Built {
    let ipv6 = ex.framing == Framing::RawUdp6;
    let (client_addr, server_addr): (SocketAddr, SocketAddr) = if ipv6 {
        (
            "[fd00::1]:40000".parse().unwrap(),
            "[fd00::2]:7878".parse().unwrap(),
        )
    } else {
        (
            "10.0.0.1:40000".parse().unwrap(),
            "10.0.0.2:7878".parse().unwrap(),
        )
    };
    let dir = std::env::temp_dir().join(format!(
        "smt-dump-build-{}-{}-{}",
        ex.name,
        std::process::id(),
        COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let key_path = dir.with_extension("keys");
    let mut cfg = Config {
        seq_layout: smt_proto::record::SeqLayout::new(ex.index_bits).unwrap(),
        ..Config::default()
    };
    if ex.keys == Keys::Psk {
        cfg.unscheduled_bytes = 8000;
        cfg.grant_window = 8000;
    }
    cfg.local_port = client_addr.port();
    let mut client = Endpoint::new(cfg.clone()).unwrap();
    cfg.local_port = server_addr.port();
    let mut server = Endpoint::new(cfg).unwrap();
    let t0 = Instant::now();
    let mut now = t0;
    let mut connected_at_once = false;
    match ex.keys {
        Keys::Tls => {
            let ca = Ca::generate("smt dump test CA").unwrap();
            let cert = ca.issue(&[&server_addr.ip().to_string()], false).unwrap();
            let options = TlsOptions::default().key_log(KeyLogPolicy::File(key_path.clone()));
            let tls_server = TlsServer::with_options(
                cert.chain_pem().as_bytes(),
                cert.key_pem().as_bytes(),
                None,
                &TlsOptions::default(),
            )
            .unwrap();
            server.set_handshake_acceptor(Box::new(tls_server));
            let tls_client =
                TlsClient::with_options(ca.cert_pem().as_bytes(), None, &options).unwrap();
            let hs = tls_client.handshake(&server_addr.ip().to_string()).unwrap();
            client.connect(now, server_addr, hs, HandshakeKind::TLS13);
        }
        Keys::Psk => {
            let log = Some(Arc::new(SessionKeyLog::open(&key_path).unwrap()));
            let acceptor = ServerAcceptor::new(None, None)
                .with_psk(&MASTER, AeadAlgorithm::Aes128Gcm)
                .with_key_log(log.clone());
            server.set_handshake_acceptor(Box::new(acceptor));
            let psk = PskClient::new(&MASTER, AeadAlgorithm::Aes128Gcm);
            let hs = psk.handshake(client_addr);
            client.connect(now, server_addr, Box::new(hs), HandshakeKind::PSK_NONCE);
        }
        Keys::InstalledZeroRtt => {
            let (c2s, s2c) = ([0x11u8; 32], [0x22u8; 32]);
            let secrets = smt_crypto::TrafficSecrets::new(
                smt_crypto::TlsHash::Sha256,
                AeadAlgorithm::Aes128Gcm,
                &c2s,
                &s2c,
            )
            .unwrap();
            let role = |r| smt_crypto::secrets::session_keys(r, &secrets);
            client
                .install_session(server_addr, role(smt_proto::Role::Client))
                .unwrap();
            server
                .install_session(client_addr, role(smt_proto::Role::Server))
                .unwrap();
            let id = hex::encode([0x42; 32]);
            let log = format!(
                "SMT_0RTT_CLIENT_TRAFFIC_SECRET {id} {}\nSMT_0RTT_SERVER_TRAFFIC_SECRET {id} {}\n",
                hex::encode(c2s),
                hex::encode(s2c)
            );
            std::fs::write(&key_path, log).unwrap();
            connected_at_once = true;
        }
    }
    let mut link: VecDeque<Sent> = VecDeque::new();
    let mut captured: Vec<(Duration, SocketAddr, SocketAddr, Vec<u8>)> = Vec::new();
    let mut messages: Vec<(Vec<u8>, SocketAddr, SocketAddr, Option<u64>)> = Vec::new();
    let mut unnamed: VecDeque<usize> = VecDeque::new();
    let mut batches: VecDeque<Vec<Vec<u8>>> = ex.batches.iter().cloned().collect();
    let mut outstanding = 0usize;
    let mut connected = connected_at_once;
    let mut lose = ex.lose_client_data_index;
    let mut buf = vec![0u8; 65536];
    let latency = Duration::from_micros(50);
    let mut quiet_until: Option<Instant> = None;
    for _step in 0..1_000_000 {
        // Events: start batches, answer requests, collect responses.
        while let Some(ev) = server.poll_event() {
            if let Event::Request { rpc, data } = ev {
                let resp = response_to(&data);
                server.send_response(now, rpc, &resp).unwrap();
            }
        }
        while let Some(ev) = client.poll_event() {
            match ev {
                Event::Connected { .. } => connected = true,
                Event::Response { .. } => outstanding -= 1,
                Event::Failed { error, .. } => panic!("RPC failed: {error:?}"),
                Event::HandshakeFailed { error, .. } => panic!("handshake failed: {error:?}"),
                _ => {}
            }
        }
        if connected && outstanding == 0 {
            if let Some(batch) = batches.pop_front() {
                for req in batch {
                    client.send_request(now, server_addr, &req).unwrap();
                    outstanding += 1;
                    unnamed.push_back(messages.len());
                    messages.push((req, client_addr, server_addr, None));
                }
            } else if quiet_until.is_none() {
                // Let ACKs and the last control packets go out.
                quiet_until = Some(now + Duration::from_millis(20));
            }
        }
        // Transmit everything both sides have.
        for (ep, from) in [(&mut client, client_addr), (&mut server, server_addr)] {
            while let Some(t) = ep.poll_transmit(now, &mut buf) {
                let bytes = buf[..t.len].to_vec();
                if from == client_addr {
                    // A request's first packet names its ID.
                    for id in first_packets(&bytes) {
                        if let Some(i) = unnamed.pop_front() {
                            messages[i].3 = Some(id);
                        }
                    }
                }
                let lost = from == client_addr && lose.is_some_and(|i| is_first_data(&bytes, i));
                if lost {
                    lose = None;
                }
                if !lost {
                    link.push_back(Sent {
                        at: now + latency,
                        from,
                        to: t.destination,
                        bytes,
                    });
                }
            }
        }
        // Move the clock to the next thing that happens.
        let next = [
            link.front().map(|s| s.at),
            client.poll_timeout(),
            server.poll_timeout(),
        ]
        .into_iter()
        .flatten()
        .min();
        let Some(next) = next else { break };
        if quiet_until.is_some_and(|q| next > q) {
            break;
        }
        now = now.max(next);
        while link.front().is_some_and(|s| s.at <= now) {
            let s = link.pop_front().unwrap();
            captured.push((now - t0, s.from, s.to, s.bytes.clone()));
            let ep = if s.to == client_addr {
                &mut client
            } else {
                &mut server
            };
            ep.handle_datagram(now, s.from, &s.bytes);
        }
        for ep in [&mut client, &mut server] {
            if ep.poll_timeout().is_some_and(|t| t <= now) {
                ep.handle_timeout(now);
            }
        }
    }
    assert!(
        batches.is_empty() && outstanding == 0,
        "the exchange did not finish"
    );
    let keylog = std::fs::read_to_string(&key_path).unwrap_or_default();
    let _ = std::fs::remove_file(&key_path);
    let truth_messages = messages
        .iter()
        .flat_map(|(req, client, server, id)| {
            let id = id.expect("every request was sent");
            [
                truth_message(*client, *server, id, "request", req),
                truth_message(*server, *client, id, "response", &response_to(req)),
            ]
        })
        .collect();
    let frames: Vec<Frame> = captured
        .iter()
        .map(|(t, from, to, bytes)| Frame {
            time: *t,
            from: *from,
            to: *to,
            bytes: bytes.clone(),
        })
        .collect();
    Built {
        framing: ex.framing,
        capture: write_capture(ex.framing, &frames),
        keylog,
        truth: Truth {
            capture: ex.name.clone(),
            frames: truth_frames(&frames),
            messages: truth_messages,
        },
        frames,
    }
}

static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Whether a datagram's first packet is a first transmission of DATA
/// packet `index`.
fn is_first_data(bytes: &[u8], index: u16) -> bool {
    matches!(
        smt_dump::packet::split(bytes, true).first().map(|p| &p.repr),
        Some(Ok(Repr { body: Body::Data(d), .. })) if d.packet_index == index && !d.retransmit
    )
}

/// The IDs of the DATA packets in a datagram that start a message (first
/// transmission of packet 0 of the first segment).
fn first_packets(datagram: &[u8]) -> Vec<u64> {
    smt_dump::packet::split(datagram, true)
        .into_iter()
        .filter_map(|p| match p.repr {
            Ok(Repr {
                id,
                body: Body::Data(d),
                ..
            }) if d.segment_offset == 0 && d.packet_index == 0 && !d.retransmit => Some(id),
            _ => None,
        })
        .collect()
}

fn truth_message(
    src: SocketAddr,
    dst: SocketAddr,
    id: u64,
    kind: &'static str,
    data: &[u8],
) -> TruthMessage {
    TruthMessage {
        src: src.to_string(),
        dst: dst.to_string(),
        id: format!("{id:#x}"),
        kind,
        len: data.len(),
        plaintext_hex: (data.len() <= 4096).then(|| hex::encode(data)),
        plaintext_fnv64: format!("{:016x}", fnv64(data)),
    }
}

/// FNV-1a, 64 bits: enough to tell a wrong plaintext from the right one.
pub fn fnv64(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A datagram to capture.
#[derive(Clone, Debug)]
pub struct Frame {
    pub time: Duration,
    pub from: SocketAddr,
    pub to: SocketAddr,
    pub bytes: Vec<u8>,
}

/// A datagram's packets: (offset, parse result, bytes), split as a
/// receiver splits them.
fn packets(datagram: &[u8]) -> Vec<(usize, Result<Repr, smt_proto::wire::WireError>, usize)> {
    smt_dump::packet::split(datagram, true)
        .into_iter()
        .map(|s| (s.offset, s.repr, s.bytes.len()))
        .collect()
}

fn truth_frames(frames: &[Frame]) -> Vec<TruthFrame> {
    frames
        .iter()
        .enumerate()
        .map(|(i, f)| TruthFrame {
            frame: i as u64 + 1,
            src: f.from.to_string(),
            dst: f.to.to_string(),
            packets: packets(&f.bytes)
                .into_iter()
                .map(|(offset, repr, len)| truth_packet(offset, len, repr, &f.bytes[offset..]))
                .collect(),
        })
        .collect()
}

fn truth_packet(
    offset: usize,
    len: usize,
    repr: Result<Repr, smt_proto::wire::WireError>,
    bytes: &[u8],
) -> TruthPacket {
    let repr = match repr {
        Ok(repr) => repr,
        Err(e) => {
            return TruthPacket {
                offset,
                len,
                kind: "MALFORMED".into(),
                key_phase: None,
                id: None,
                fields: vec![],
                malformed: true,
                error: Some(e.to_string()),
            }
        }
    };
    let f = |n: &str, v: String| (n.to_string(), v);
    let fields = match repr.body {
        Body::Data(d) => vec![
            f("msg_len", d.message_len.to_string()),
            f("seg_offset", d.segment_offset.to_string()),
            f("mss", d.mss.to_string()),
            f("msg_wire_len", d.message_wire_len.to_string()),
            f("seg_len", d.segment_len.to_string()),
            f("incoming", d.incoming.to_string()),
            f("pkt_index", bytes_u16(bytes, 28).to_string()),
            f("resend_index", bytes_u16(bytes, 18).to_string()),
            f("wire_offset", d.wire_offset().to_string()),
            f("payload_len", d.payload_len().to_string()),
            f("retransmit", u8::from(d.retransmit).to_string()),
        ],
        Body::Grant { offset, priority } => vec![
            f("grant_offset", offset.to_string()),
            f("priority", priority.to_string()),
        ],
        Body::Resend {
            offset,
            length,
            priority,
        } => vec![
            f("resend_offset", offset.to_string()),
            f("resend_length", length.to_string()),
            f("priority", priority.to_string()),
        ],
        Body::Ack(ids) => vec![
            f("ack_count", ids.as_slice().len().to_string()),
            f(
                "ack_id",
                ids.as_slice()
                    .iter()
                    .map(|i| format!("{i:#x}"))
                    .collect::<Vec<_>>()
                    .join(","),
            ),
        ],
        Body::Handshake {
            offset,
            ack,
            len,
            kind,
            flags,
        } => vec![
            f("hs_offset", offset.to_string()),
            f("hs_ack", ack.to_string()),
            f("hs_len", len.to_string()),
            f("hs_kind", kind.0.to_string()),
            f("hs_flags", flags.to_string()),
        ],
        _ => vec![],
    };
    TruthPacket {
        offset,
        len,
        kind: repr.body.packet_type().to_string(),
        key_phase: Some(u8::from(repr.key_phase)),
        id: Some(format!("{:#x}", repr.id)),
        fields,
        malformed: false,
        error: None,
    }
}

fn bytes_u16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// Base of the capture's timestamps (2026-01-01T00:00:00Z).
const EPOCH: u64 = 1_767_225_600;

/// Frames the datagrams as `framing` says and writes the capture file.
pub fn write_capture(framing: Framing, frames: &[Frame]) -> Vec<u8> {
    let linked: Vec<(Duration, Vec<u8>)> = frames
        .iter()
        .map(|f| (f.time, frame_bytes(framing, f)))
        .collect();
    match framing {
        Framing::EthernetUdp4 => pcap(Linktype::ETHERNET, &linked),
        Framing::SllProto253 => pcap(Linktype::LINUX_SLL, &linked),
        Framing::RawUdp6 => pcapng(Linktype::RAW, &linked),
    }
}

fn frame_bytes(framing: Framing, f: &Frame) -> Vec<u8> {
    let (IpAddr::V4(src4), IpAddr::V4(dst4)) = (f.from.ip(), f.to.ip()) else {
        let (IpAddr::V6(src), IpAddr::V6(dst)) = (f.from.ip(), f.to.ip()) else {
            panic!("mixed address families");
        };
        let b = PacketBuilder::ipv6(src.octets(), dst.octets(), 64).udp(f.from.port(), f.to.port());
        let mut out = Vec::new();
        b.write(&mut out, &f.bytes).unwrap();
        return out;
    };
    let mut out = Vec::new();
    match framing {
        Framing::EthernetUdp4 => {
            PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
                .ipv4(src4.octets(), dst4.octets(), 64)
                .udp(f.from.port(), f.to.port())
                .write(&mut out, &f.bytes)
                .unwrap();
        }
        Framing::SllProto253 => {
            PacketBuilder::linux_sll(LinuxSllPacketType::OUTGOING, 6, [2, 0, 0, 0, 0, 1, 0, 0])
                .ipv4(src4.octets(), dst4.octets(), 64)
                .write(&mut out, IpNumber(253), &f.bytes)
                .unwrap();
        }
        Framing::RawUdp6 => unreachable!("IPv6 framing with IPv4 addresses"),
    }
    out
}

fn pcap(linktype: Linktype, frames: &[(Duration, Vec<u8>)]) -> Vec<u8> {
    let mut header = PcapHeader::new();
    header.network = linktype;
    header.snaplen = 262_144;
    let mut out = header.to_vec().unwrap();
    for (t, data) in frames {
        let mut block = LegacyPcapBlock {
            ts_sec: (EPOCH + t.as_secs()) as u32,
            ts_usec: t.subsec_micros(),
            caplen: data.len() as u32,
            origlen: data.len() as u32,
            data,
        };
        out.extend_from_slice(&block.to_vec().unwrap());
    }
    out
}

fn pcapng(linktype: Linktype, frames: &[(Duration, Vec<u8>)]) -> Vec<u8> {
    let mut shb = SectionHeaderBlock {
        block_type: 0,
        block_len1: 0,
        bom: 0x1a2b_3c4d,
        major_version: 1,
        minor_version: 0,
        section_len: -1,
        options: vec![],
        block_len2: 0,
    };
    let mut idb = InterfaceDescriptionBlock {
        block_type: 0,
        block_len1: 0,
        linktype,
        reserved: 0,
        snaplen: 262_144,
        options: vec![],
        block_len2: 0,
        if_tsresol: 6,
        if_tsoffset: 0,
    };
    let mut out = shb.to_vec().unwrap();
    out.extend_from_slice(&idb.to_vec().unwrap());
    for (t, data) in frames {
        let micros = (EPOCH * 1_000_000) + t.as_micros() as u64;
        let mut padded = data.clone();
        padded.resize(data.len().div_ceil(4) * 4, 0);
        let mut epb = EnhancedPacketBlock {
            block_type: 0,
            block_len1: 0,
            if_id: 0,
            ts_high: (micros >> 32) as u32,
            ts_low: micros as u32,
            caplen: data.len() as u32,
            origlen: data.len() as u32,
            data: &padded,
            options: vec![],
            block_len2: 0,
        };
        out.extend_from_slice(&epb.to_vec().unwrap());
    }
    out
}

/// The zoo: one datagram per packet type (control packets with all-zero
/// MACs, as under the null cipher), a coalesced datagram, a key phase of
/// 1, a retransmission, and malformed packets of several kinds. Over raw
/// IP protocol 253 behind a Linux cooked header.
pub fn zoo() -> Built {
    let (c, s): (SocketAddr, SocketAddr) = (
        "10.1.0.1:7002".parse().unwrap(),
        "10.1.0.2:7001".parse().unwrap(),
    );
    let data = |id: u64, index: u16, retransmit: bool, phase: bool| {
        let d = DataHeader {
            message_len: 3000,
            message_wire_len: 3022,
            segment_offset: 0,
            segment_len: 3022,
            mss: 1428,
            packet_index: index,
            retransmit,
            incoming: 3022,
            priority: 0,
        };
        let mut out = emit(c, s, id, phase, Body::Data(d), false);
        let payload_len = d.payload_len();
        out.extend((0..payload_len).map(|i| (i % 256) as u8));
        if index == 0 {
            // A record header at the start of the segment.
            out[44..49].copy_from_slice(&[0x17, 0x03, 0x03, 0x0b, 0xcd]);
        }
        out
    };
    let mut ids = AckIds::new();
    ids.push(2);
    ids.push(4);
    let hs = |from: SocketAddr, to: SocketAddr, offset: u32, data: &[u8], kind: u8, flags: u8| {
        let mut out = emit(
            from,
            to,
            0,
            false,
            Body::Handshake {
                offset,
                ack: 0,
                len: data.len() as u16,
                kind: smt_proto::HandshakeKind(kind),
                flags,
            },
            false,
        );
        out.extend_from_slice(data);
        out
    };
    let mut coalesced = emit(
        s,
        c,
        2,
        false,
        Body::Grant {
            offset: 3022,
            priority: 0,
        },
        true,
    );
    coalesced.extend(emit(s, c, 4, false, Body::Busy, true));
    coalesced.extend(emit(
        s,
        c,
        6,
        false,
        Body::Resend {
            offset: 1428,
            length: 1428,
            priority: 1,
        },
        true,
    ));
    let mut trailing = emit(s, c, 8, false, Body::NeedAck, true);
    trailing.extend_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
    let mut bad_reserved = emit(s, c, 10, false, Body::Busy, true);
    bad_reserved[12] |= 0x02;
    let mut bad_type = emit(s, c, 12, false, Body::Busy, true);
    bad_type[13] = 0x7f;
    let mut bad_ack = emit(c, s, 0, false, Body::Ack(ids), true);
    bad_ack[28..30].copy_from_slice(&[0, 17]);
    let datagrams: Vec<(SocketAddr, SocketAddr, Vec<u8>)> = vec![
        (c, s, hs(c, s, 0, &[0x01, 0x01, 0xaa, 0xbb], 2, 0)),
        (s, c, hs(s, c, 0, &[0u8; 20], 2, 0x01)),
        (c, s, data(2, 0, false, false)),
        (c, s, data(2, 1, false, false)),
        (
            s,
            c,
            emit(
                s,
                c,
                2,
                false,
                Body::Grant {
                    offset: 3022,
                    priority: 2,
                },
                true,
            ),
        ),
        (c, s, data(2, 1, true, false)),
        (s, c, emit(s, c, 2, true, Body::RpcUnknown, true)),
        (s, c, emit(s, c, 2, false, Body::NeedAck, true)),
        (s, c, emit(s, c, 2, false, Body::Overloaded, true)),
        (s, c, emit(s, c, 4, false, Body::Abandoned, true)),
        (
            s,
            c,
            emit(
                s,
                c,
                0,
                false,
                Body::Credit {
                    limit: 1024,
                    sequence: 7,
                },
                true,
            ),
        ),
        (c, s, emit(c, s, 0, false, Body::Ack(ids), true)),
        (c, s, emit(c, s, 0, true, Body::KeyUpdate, true)),
        (c, s, emit(c, s, 1, true, Body::KeyUpdate, true)),
        (s, c, coalesced),
        (s, c, trailing),
        (s, c, bad_reserved),
        (s, c, bad_type),
        (c, s, bad_ack),
        (c, s, data(2, 1, false, false)[..60].to_vec()),
        (c, s, vec![0x1b, 0x5a, 0x1b, 0x59, 0, 0, 0, 0, 0, 0]),
    ];
    let frames: Vec<Frame> = datagrams
        .into_iter()
        .enumerate()
        .map(|(i, (from, to, bytes))| Frame {
            time: Duration::from_millis(i as u64),
            from,
            to,
            bytes,
        })
        .collect();
    Built {
        framing: Framing::SllProto253,
        capture: write_capture(Framing::SllProto253, &frames),
        keylog: String::new(),
        truth: Truth {
            capture: "smt-zoo".into(),
            frames: truth_frames(&frames),
            messages: vec![],
        },
        frames,
    }
}

/// One packet's bytes: the header `Repr::emit` writes, plus a zero MAC
/// for a control packet when `tagged`.
fn emit(
    from: SocketAddr,
    to: SocketAddr,
    id: u64,
    phase: bool,
    body: Body,
    tagged: bool,
) -> Vec<u8> {
    let repr = Repr {
        src_port: from.port(),
        dst_port: to.port(),
        key_phase: phase,
        id,
        body,
    };
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut Packet::new_unchecked(&mut out[..]));
    if tagged {
        out.extend_from_slice(&[0; 16]);
    }
    out
}
