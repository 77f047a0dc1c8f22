//! Writes the seed corpora of the fuzz targets into `fuzz/corpus/<target>/`
//! (run from anywhere: `cargo run -p smt-fuzz-seeds` in `fuzz/`). Each seed
//! is a valid input that reaches deep into its target; the fuzzer mutates
//! from there. The byte formats are documented with each harness.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use smt_proto::Handshake;
use smt_handshake::message::ServerReply0;
use smt_handshake::{
    KeyPool, ReplayCache, StaticKey, Ticket, VerifiedTicket, ZeroRttClient, ZeroRttServer,
};
use smt_tls::certs::Ca;
use smt_tls::{KxGroup, TlsClient, TlsOptions};

const NAME: &str = "server.fuzz.test";

fn main() {
    let corpus = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../corpus");
    let tickets = TicketSet::new();
    write(&corpus, "reassembly", reassembly_seeds());
    write(&corpus, "handshake_stream", handshake_seeds(&tickets));
    write(&corpus, "ticket_decode", ticket_seeds(&tickets));
    write(&corpus, "dns_record", dns_seeds(&tickets));
}

fn write(corpus: &Path, target: &str, seeds: Vec<(&'static str, Vec<u8>)>) {
    let dir = corpus.join(target);
    std::fs::create_dir_all(&dir).expect("create the corpus directory");
    for (name, bytes) in seeds {
        std::fs::write(dir.join(format!("seed-{name}")), bytes).expect("write a seed");
    }
}

// ---- reassembly (`smt_proto::fuzzing::reassembly_ops`) ----

/// A message description: data length, padding, record size, mss,
/// unscheduled bytes, ID, spare buffer bytes.
fn message(len: u32, pad: u8, record: u16, mss: u16, unscheduled: u32, id: u8) -> Vec<u8> {
    // Lengths from 4096 up are flagged with the top bit.
    let raw = if len >= 4096 { len | 0x80_0000 } else { len };
    let mut out = raw.to_be_bytes()[1..].to_vec();
    out.push(pad);
    out.extend_from_slice(&(record - 1).to_be_bytes());
    out.extend_from_slice(&mss.to_be_bytes());
    out.extend_from_slice(&((unscheduled / 16) as u16).to_be_bytes());
    out.extend_from_slice(&[id, 16]);
    out
}

fn deliver(out: &mut Vec<u8>, index: u16, retransmit: bool) {
    out.push(if retransmit { 8 } else { 0 });
    out.extend_from_slice(&index.to_be_bytes());
}

fn reassembly_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let mut seeds = Vec::new();
    // Small message, packets in reverse order, each twice.
    let mut s = message(3000, 0, 1000, 500, 8192, 4);
    for i in (0..7).rev() {
        deliver(&mut s, i, false);
        deliver(&mut s, i, true);
    }
    seeds.push(("reverse-duplicates", s));
    // Three segments (140 kB in 16 KiB records): in order runs, grants.
    let mut s = message(140_000, 37, 16384, 1400, 40_000, 6);
    for start in (0..150u16).step_by(30) {
        s.extend_from_slice(&[2]);
        s.extend_from_slice(&start.to_be_bytes());
        s.push(30);
        s.extend_from_slice(&[4, 0, 1, 0, 0]);
    }
    seeds.push(("three-segments-grants", s));
    // Losses answered through RESEND gaps.
    let mut s = message(20_000, 0, 4096, 1000, 65_000, 8);
    for i in (0..21).step_by(3) {
        deliver(&mut s, i, false);
    }
    s.extend_from_slice(&[0xf5, 8, 0x10, 0x00, 0x75, 4, 0x20, 0x00, 7]);
    seeds.push(("resend-gaps", s));
    // Forged packets: a copy of a real one, then a misfit segment.
    let mut s = message(5000, 3, 2000, 600, 10_000, 10);
    s.push(0x0b);
    for v in [0u32, 0, 0, 2044, 600, 0] {
        s.extend_from_slice(&v.to_be_bytes());
    }
    s.push(0);
    s.push(3);
    for v in [0u32, 0, 100, 700, 300 | 1 << 16, 0] {
        s.extend_from_slice(&v.to_be_bytes());
    }
    s.push(0xaa);
    deliver(&mut s, 1, false);
    s.push(7);
    seeds.push(("forged", s));
    // Empty message; 1-byte records with padding.
    seeds.push(("empty", message(0, 0, 1, 1, 0, 2)));
    let mut s = message(300, 200, 1, 64, 2000, 12);
    for i in 0..60 {
        deliver(&mut s, i * 7 % 60, false);
    }
    seeds.push(("tiny-records-padded", s));
    seeds
}

// ---- handshake_stream ----

fn stream_byte(i: usize) -> u8 {
    (i.wrapping_mul(31) ^ (i >> 7)) as u8
}

/// A consistent chunk of the scripted client stream, from peer 0.
fn chunk(out: &mut Vec<u8>, kind: u8, offset: u16, len: u16, ack: u16) {
    out.push(kind << 3);
    for v in [offset, len, ack] {
        out.extend_from_slice(&v.to_be_bytes());
    }
}

fn ticks(out: &mut Vec<u8>, n: u8) {
    out.extend_from_slice(&[4, n]);
}

fn handshake_seeds(t: &TicketSet) -> Vec<(&'static str, Vec<u8>)> {
    let _ = stream_byte(0);
    let mut seeds = Vec::new();
    // Scripted: keys after 128 bytes, in order, then early data, a call.
    let mut s = vec![0, 0x01 | 0x20];
    chunk(&mut s, 0, 0, 100, 0);
    chunk(&mut s, 0, 100, 100, 100);
    s.extend_from_slice(&[6, 2, 7]);
    ticks(&mut s, 5);
    seeds.push(("scripted-in-order", s));
    // Out of order, duplicated, retransmission ticks, keys and next keys.
    let mut s = vec![1, 0x83 | 0x40];
    s.extend_from_slice(&[6, 4]);
    chunk(&mut s, 1, 300, 200, 0);
    chunk(&mut s, 1, 0, 150, 0);
    chunk(&mut s, 1, 100, 250, 0);
    ticks(&mut s, 4);
    chunk(&mut s, 1, 0, 150, 0);
    s.extend_from_slice(&[3, 0, 0, 0, 50]);
    ticks(&mut s, 20);
    seeds.push(("scripted-reordered", s));
    // A failing handshake (alert), a restart, and a silent one timing out.
    let mut s = vec![0, 0x0a];
    chunk(&mut s, 0, 0, 200, 0);
    chunk(&mut s, 0, 0, 60, 0);
    s.push(0x80);
    s.extend_from_slice(&[0, 0, 0, 40, 0, 0]);
    ticks(&mut s, 31);
    seeds.push(("scripted-fail-restart-timeout", s));
    // Real first flights: TLS 1.3 ClientHellos (whole, and in 16-byte
    // chunks) and a 0-RTT ClientHello0.
    for (name, selector, groups) in [
        ("tls-client-hello", 2u8, None),
        (
            "tls-client-hello-x25519-chunked",
            2 | 4 << 4,
            Some(KxGroup::X25519),
        ),
    ] {
        let mut s = vec![selector];
        s.extend_from_slice(&t.tls_client_hello(groups));
        seeds.push((name, s));
    }
    let mut s = vec![3 | 4];
    s.extend_from_slice(&t.hello(true));
    seeds.push(("zero-rtt-hello", s));
    seeds
}

// ---- ticket_decode and dns_record ----

/// A CA, a server certificate, a ticket and a 0-RTT server for it.
struct TicketSet {
    ca_pem: String,
    ticket: Ticket,
    verified: VerifiedTicket,
    server: ZeroRttServer,
    pool: KeyPool,
}

impl TicketSet {
    fn new() -> Self {
        let ca = Ca::generate("SMT fuzz seed CA").expect("CA");
        let leaf = ca.issue(&[NAME], false).expect("leaf");
        let key = StaticKey::generate();
        let now = SystemTime::now();
        let life = Duration::from_secs(3600);
        let ticket = Ticket::issue(&key, &leaf.chain_der(), leaf.key_der(), NAME, now, life)
            .expect("ticket");
        let verified = ticket.verify(ca.cert_der(), NAME, now).expect("verify");
        let pool = KeyPool::new(2);
        let server = ZeroRttServer::new(
            key,
            ticket.clone(),
            std::sync::Arc::new(KeyPool::new(2)),
            ReplayCache::new(64),
        )
        .expect("server");
        // Hellos stamped before the server's start plus the clock-skew bound
        // are refused: let that pass.
        std::thread::sleep(Duration::from_millis(1500));
        Self {
            ca_pem: ca.cert_pem().to_owned(),
            ticket,
            verified,
            server,
            pool,
        }
    }

    fn hello(&self, fs: bool) -> Vec<u8> {
        ZeroRttClient::start(&self.verified, &self.pool, fs).0
    }

    fn reply(&self) -> Vec<u8> {
        let accepted = self
            .server
            .accept(&self.hello(true), SystemTime::now())
            .expect("accept");
        accepted.reply.expect("a reply with forward secrecy").0
    }

    fn tls_client_hello(&self, group: Option<KxGroup>) -> Vec<u8> {
        let mut options = TlsOptions::default();
        if let Some(g) = group {
            options = options.kx_groups(&[g]);
        }
        let client =
            TlsClient::with_options(self.ca_pem.as_bytes(), None, &options).expect("TLS client");
        let mut hs = client.start(NAME).expect("handshake");
        let mut out = Vec::new();
        hs.write(&mut out);
        out
    }
}

fn ticket_seeds(t: &TicketSet) -> Vec<(&'static str, Vec<u8>)> {
    let reply = t.reply();
    assert!(ServerReply0::decode(&reply).is_ok());
    let mut hello_live = vec![1];
    hello_live.extend_from_slice(&t.hello(true));
    let mut reply_live = vec![2];
    reply_live.extend_from_slice(&reply);
    vec![
        ("ticket", t.ticket.as_bytes().to_vec()),
        ("ticket-base64", t.ticket.to_base64().into_bytes()),
        ("client-hello0", t.hello(false)),
        ("client-hello0-fs", t.hello(true)),
        ("server-reply0", reply),
        ("live-hello", hello_live),
        ("live-reply", reply_live),
    ]
}

fn dns_seeds(t: &TicketSet) -> Vec<(&'static str, Vec<u8>)> {
    let text = |bytes: &[u8]| smt_dns::ticket_txt_strings(bytes).concat().into_bytes();
    let with_cut = |cut: u8, body: Vec<u8>| [vec![cut], body].concat();
    vec![
        ("ticket-255", with_cut(255, text(t.ticket.as_bytes()))),
        ("ticket-one-string", with_cut(0, text(t.ticket.as_bytes()))),
        ("short-7", with_cut(7, text(b"abcde"))),
        ("tag-only", with_cut(0, b"v=smt1;".to_vec())),
        ("newer-version", with_cut(0, b"v=smt2;AAAA".to_vec())),
        ("bad-padding", with_cut(3, b"v=smt1;QUI=QUI=".to_vec())),
    ]
}
