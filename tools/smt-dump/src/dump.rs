//! The dump itself, in two passes over the capture's SMT packets: the first
//! decodes every header and follows the HANDSHAKE streams far enough to
//! name each session (so its keys can be found in the key log); the second
//! reassembles and decrypts messages, checks control tags and follows key
//! epochs, in capture order.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;

use smt_crypto::AesGcmCipher;
use smt_proto::crypto::{PacketCipher, TAG_LEN};
use smt_proto::record::{OpenError, SeqLayout};
use smt_proto::wire::{Body, Repr};

use crate::capture::{self, CaptureError};
use crate::handshake::{self, Stream};
use crate::keylog::{KeyLog, KeyMaterial};
use crate::keys::Keys;
use crate::link::{self, Transport};
use crate::message::{Lengths, Message, Placed, Ready};
use crate::packet::{self, Header, Split};
use crate::report::{
    CaptureSummary, MessageReport, PacketReport, Problem, Report, SessionReport, TagReport,
};

/// How to read a capture.
#[derive(Clone, Debug)]
pub struct Options {
    /// Control packets carry a MAC (`Config::authenticate_control`, on by
    /// default).
    pub tagged_control: bool,
    /// The record-sequence split both endpoints use (48/16 by default).
    pub seq_layout: SeqLayout,
    /// SMT's IP protocol number for raw-IP captures.
    pub ip_protocol: u8,
    /// UDP ports that carry SMT. Empty: every UDP datagram whose first
    /// packet parses as SMT.
    pub ports: Vec<u16>,
    /// Keep each message's whole plaintext in [`MessageReport::plaintext`].
    pub keep_plaintext: bool,
    /// Plaintext bytes shown per message.
    pub preview: usize,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            tagged_control: true,
            seq_layout: SeqLayout::DEFAULT,
            ip_protocol: smt_proto_default_protocol(),
            ports: Vec::new(),
            keep_plaintext: false,
            preview: 16,
        }
    }
}

/// SMT's IP protocol number in raw-IP mode (`smt::DEFAULT_IP_PROTOCOL`).
const fn smt_proto_default_protocol() -> u8 {
    253
}

/// Out-of-place searches per dump: each costs a few dozen AEAD opens.
const MAX_SEARCHES: usize = 1000;
/// Trial decryptions per session without a matching handshake.
const MAX_TRIALS: usize = 8;
/// Key-log entries tried by trial decryption in one dump: a large key log
/// and many sessions without handshakes must not make it quadratic.
const MAX_TRIAL_ENTRIES: usize = 100_000;

/// A flow: two addresses, whichever sent first.
type FlowKey = (SocketAddr, SocketAddr);

fn flow_key(a: SocketAddr, b: SocketAddr) -> FlowKey {
    if a <= b {
        (a, b)
    } else {
        (b, a)
    }
}

/// A message: its flow, session, sender, key epoch (as far as the key
/// phase tells it) and ID. IDs restart in every epoch (`protocol.md` § 11).
type MessageKey = (FlowKey, usize, SocketAddr, usize, u64);

/// One session of a flow (a new handshake on the flow starts another).
#[derive(Debug)]
struct Session {
    client: Option<SocketAddr>,
    server: Option<SocketAddr>,
    kind: Option<u8>,
    first_frame: u64,
    streams: HashMap<SocketAddr, Stream>,
    id: Option<Vec<u8>>,
    keys: Option<Keys>,
    keys_from: String,
    current: usize,
    highest: usize,
    trials: usize,
}

impl Session {
    fn new(first_frame: u64) -> Self {
        Self {
            client: None,
            server: None,
            kind: None,
            first_frame,
            streams: HashMap::new(),
            id: None,
            keys: None,
            keys_from: "none: no key log given".into(),
            current: 0,
            highest: 0,
            trials: 0,
        }
    }

    fn is_client(&self, from: SocketAddr) -> Option<bool> {
        match (self.client, self.server) {
            (Some(c), _) if c == from => Some(true),
            (_, Some(s)) if s == from => Some(false),
            (Some(_), _) | (_, Some(_)) => Some(false),
            _ => None,
        }
    }

    /// The first of `epochs`, and direction (whether the sender is the
    /// client: as known, else either), whose cipher passes `test`.
    fn find_key(
        &mut self,
        epochs: &[usize],
        from_client: Option<bool>,
        test: impl Fn(&AesGcmCipher) -> bool,
    ) -> Option<(usize, bool)> {
        let dirs: &[bool] = match from_client {
            Some(true) => &[true],
            Some(false) => &[false],
            None => &[true, false],
        };
        let keys = self.keys.as_mut()?;
        for &epoch in epochs {
            let Some(e) = keys.epoch(epoch) else { continue };
            for &client in dirs {
                if test(if client { &e.c2s } else { &e.s2c }) {
                    return Some((epoch, client));
                }
            }
        }
        None
    }

    /// The cipher of one direction of one epoch.
    fn cipher(&mut self, epoch: usize, from_client: bool) -> Option<&AesGcmCipher> {
        let e = self.keys.as_mut()?.epoch(epoch)?;
        Some(if from_client { &e.c2s } else { &e.s2c })
    }

    /// Records who is the client, if nothing said so before.
    fn learn_roles(&mut self, client: SocketAddr, server: SocketAddr) {
        if self.client.is_none() {
            self.client = Some(client);
            self.server = Some(server);
        }
    }

    /// The epochs a packet with `phase` may belong to, likeliest first
    /// (`docs/protocol.md` § 11: current, else next or previous).
    fn candidates(&self, phase: bool) -> Vec<usize> {
        let c = self.current;
        if (c % 2 == 1) == phase {
            vec![c]
        } else {
            let mut v = vec![c + 1];
            if c > 0 {
                v.push(c - 1);
            }
            v
        }
    }

    /// The epoch a packet with `phase` most likely belongs to: the current
    /// one if the phase is its parity, else the previous one (an RPC
    /// finishing in it), else the next.
    fn epoch_for(&self, phase: bool) -> usize {
        let c = self.current;
        match ((c % 2 == 1) == phase, c) {
            (true, _) => c,
            (false, 0) => 1,
            (false, _) => c - 1,
        }
    }

    fn used(&mut self, epoch: usize) {
        if epoch > self.current {
            self.current = epoch;
        }
        self.highest = self.highest.max(epoch);
    }
}

/// A packet as the first pass left it.
struct Parsed<'a> {
    frame: u64,
    time: f64,
    from: SocketAddr,
    to: SocketAddr,
    transport: Transport,
    index: usize,
    split: Split<'a>,
    session: usize,
}

/// Reads `capture` (pcap or pcapng bytes) and reports every SMT packet;
/// with `keys`, decrypts the messages of the sessions it covers.
pub fn dump(capture: &[u8], keys: Option<&KeyLog>, opts: &Options) -> Result<Report, CaptureError> {
    let cap = capture::read(capture)?;
    let mut summary = CaptureSummary {
        format: match cap.format {
            capture::Format::Pcap => "pcap",
            capture::Format::PcapNg => "pcapng",
        },
        frames: cap.frames.len() as u64,
        smt_datagrams: 0,
        smt_packets: 0,
        skipped: BTreeMap::new(),
        error: cap.truncated.as_ref().map(ToString::to_string),
        capture_dropped: cap.dropped,
        key_log_errors: keys.map_or(Vec::new(), |k| {
            k.bad_lines
                .iter()
                .map(|(n, why)| format!("line {n}: {why}"))
                .collect()
        }),
    };
    let mut flows: HashMap<FlowKey, Vec<Session>> = HashMap::new();
    let mut parsed = Vec::new();
    for frame in &cap.frames {
        let datagram = match link::decode(frame.linktype, frame.data, opts.ip_protocol) {
            Ok(d) => d,
            Err(skip) => {
                *summary.skipped.entry(skip.to_string()).or_default() += 1;
                continue;
            }
        };
        if !is_smt(&datagram, opts) {
            *summary.skipped.entry("not SMT".into()).or_default() += 1;
            continue;
        }
        summary.smt_datagrams += 1;
        let (from, to) = (datagram.from(), datagram.to());
        let sessions = flows.entry(flow_key(from, to)).or_default();
        for (index, split) in packet::split(datagram.payload, opts.tagged_control)
            .into_iter()
            .enumerate()
        {
            let session = follow_handshake(sessions, frame.number, from, to, &split);
            parsed.push(Parsed {
                frame: frame.number,
                time: frame.time,
                from,
                to,
                transport: datagram.transport,
                index,
                split,
                session,
            });
        }
    }
    summary.smt_packets = parsed.len() as u64;
    let mut dumper = Dumper::new(opts, keys);
    dumper.find_keys(&mut flows);
    for p in &parsed {
        dumper.packet(&mut flows, p);
    }
    Ok(dumper.finish(summary, &flows))
}

/// Whether a datagram is taken as SMT: raw IP with SMT's protocol number
/// always; UDP on a chosen port, or (no ports chosen) when its first packet
/// parses.
fn is_smt(d: &link::Datagram<'_>, opts: &Options) -> bool {
    match (d.ports, opts.ports.is_empty()) {
        (None, _) => true,
        (Some((s, t)), false) => opts.ports.contains(&s) || opts.ports.contains(&t),
        (Some(_), true) => packet::split(d.payload, opts.tagged_control)
            .first()
            .is_some_and(|p| p.repr.is_ok()),
    }
}

/// Tracks HANDSHAKE streams in the first pass; returns the index of the
/// session the packet belongs to (a new one for each handshake opening).
fn follow_handshake(
    sessions: &mut Vec<Session>,
    frame: u64,
    from: SocketAddr,
    to: SocketAddr,
    split: &Split<'_>,
) -> usize {
    if sessions.is_empty() {
        sessions.push(Session::new(frame));
    }
    let Ok(Repr {
        body:
            Body::Handshake {
                offset,
                kind,
                flags,
                ..
            },
        ..
    }) = split.repr
    else {
        return sessions.len() - 1;
    };
    let data = handshake::strip_token(flags, offset, split.handshake_data());
    let opening = offset == 0 && !data.is_empty() && flags & 0x01 == 0;
    let last = sessions.len() - 1;
    let copy = sessions[last]
        .streams
        .get(&from)
        .and_then(Stream::first)
        .is_some_and(|held| data.starts_with(held) || held.starts_with(data));
    if opening && !copy && sessions[last].is_client(from) != Some(false) {
        let fresh = sessions[last].kind.is_some();
        if fresh {
            sessions.push(Session::new(frame));
        }
        let s = sessions.last_mut().expect("pushed above or before");
        s.client = Some(from);
        s.server = Some(to);
        s.kind = Some(kind.0);
    }
    let s = sessions.last_mut().expect("never empty");
    s.streams.entry(from).or_default().add(offset, data);
    sessions.len() - 1
}

/// The second pass's state.
struct Dumper<'k> {
    opts: &'k Options,
    log: Option<&'k KeyLog>,
    /// Key-log ids a handshake in the capture claimed.
    claimed: BTreeSet<Vec<u8>>,
    messages: BTreeMap<MessageKey, Message>,
    /// Message IDs seen per (flow, session, sender), newest last, for the
    /// out-of-place search.
    recent_ids: HashMap<(FlowKey, usize, SocketAddr), Vec<u64>>,
    packets: Vec<PacketReport>,
    problems: Vec<Problem>,
    searches: usize,
    trial_entries: usize,
}

impl<'k> Dumper<'k> {
    fn new(opts: &'k Options, log: Option<&'k KeyLog>) -> Self {
        Self {
            opts,
            log,
            claimed: BTreeSet::new(),
            messages: BTreeMap::new(),
            recent_ids: HashMap::new(),
            packets: Vec::new(),
            problems: Vec::new(),
            searches: 0,
            trial_entries: 0,
        }
    }

    /// Gives every session whose handshake names an id the key log holds
    /// its keys.
    fn find_keys(&mut self, flows: &mut HashMap<FlowKey, Vec<Session>>) {
        for s in flows.values_mut().flatten() {
            let (Some(kind), Some(client)) = (s.kind, s.client) else {
                if self.log.is_some() {
                    s.keys_from = "none yet: no handshake in the capture (trial decryption)".into();
                }
                continue;
            };
            let client_stream = s
                .streams
                .get(&client)
                .map(Stream::prefix)
                .unwrap_or_default();
            s.id = handshake::client_id(kind, &client_stream);
            let suite = s
                .server
                .and_then(|server| s.streams.get(&server))
                .and_then(|st| handshake::server_suite(&st.prefix()));
            let Some(log) = self.log else { continue };
            let Some(id) = &s.id else {
                s.keys_from = "none: the capture lacks the handshake's first message".into();
                continue;
            };
            match log.get(id) {
                Some(material) => {
                    self.claimed.insert(id.clone());
                    s.keys = Keys::new(material, suite);
                    s.keys_from = match s.keys {
                        Some(_) => format!("key log ({})", label_of(material)),
                        None => "none: the key log's secrets do not fit the suite".into(),
                    };
                }
                None => s.keys_from = "none: the key log has no line for this session".into(),
            }
        }
    }

    fn packet(&mut self, flows: &mut HashMap<FlowKey, Vec<Session>>, p: &Parsed<'_>) {
        let flow = flow_key(p.from, p.to);
        let Some(session) = flows.get_mut(&flow).and_then(|v| v.get_mut(p.session)) else {
            return;
        };
        let mut report = PacketReport {
            frame: p.frame,
            time: p.time,
            src: p.from.to_string(),
            dst: p.to.to_string(),
            transport: p.transport,
            index: p.index,
            offset: p.split.offset,
            len: p.split.bytes.len(),
            key_phase: None,
            id: None,
            header: p.split.header(),
            tag: None,
            notes: Vec::new(),
        };
        if let Header::Malformed { error, .. } = &report.header {
            self.problems.push(Problem {
                frame: p.frame,
                what: format!(
                    "malformed packet from {} (byte {} of the datagram): {error}",
                    p.from, p.split.offset
                ),
            });
        }
        if let Ok(repr) = &p.split.repr {
            report.key_phase = Some(u8::from(repr.key_phase));
            report.id = Some(format!("{:#x}", repr.id));
            if let Some(tag) = p.split.tag {
                let status = self.check_tag(session, p, repr, tag);
                report.tag = Some(TagReport {
                    hex: hex::encode(tag),
                    status,
                });
                if status == "bad" {
                    self.problems.push(Problem {
                        frame: p.frame,
                        what: format!(
                            "{} from {}: bad control tag",
                            repr.body.packet_type(),
                            p.from
                        ),
                    });
                }
            }
            if let Body::Data(d) = repr.body {
                self.data(session, (flow, p.session), p, repr, &d, &mut report);
            }
        }
        self.packets.push(report);
    }

    /// Verifies a control tag under the epochs the phase may name.
    fn check_tag(
        &mut self,
        session: &mut Session,
        p: &Parsed<'_>,
        repr: &Repr,
        tag: &[u8; TAG_LEN],
    ) -> &'static str {
        let verify = |cipher: &AesGcmCipher| cipher.verify_control_tag(p.split.body, tag).is_ok();
        if session.keys.is_none() {
            self.trial(session, p.from, |c| verify(c));
        }
        if session.keys.is_none() {
            // No keys: follow announced epochs unverified, so messages of
            // different epochs stay apart.
            if matches!(repr.body, Body::KeyUpdate) && repr.id != 1 {
                let next = session.epoch_for(repr.key_phase);
                session.used(next.max(session.current));
            }
            return "unchecked";
        }
        let epochs = session.candidates(repr.key_phase);
        let from_client = session.is_client(p.from);
        match session.find_key(&epochs, from_client, verify) {
            Some((epoch, _)) => {
                session.used(epoch);
                "ok"
            }
            None => "bad",
        }
    }

    /// Tries key-log material no handshake claimed on a session without
    /// keys; `opens` says whether a cipher opens the probe packet sent by
    /// `from`.
    fn trial(
        &mut self,
        session: &mut Session,
        from: SocketAddr,
        opens: impl Fn(&AesGcmCipher) -> bool,
    ) {
        let Some(log) = self.log else { return };
        if session.trials >= MAX_TRIALS || session.kind.is_some() {
            return;
        }
        session.trials += 1;
        for (id, material) in &log.sessions {
            if self.claimed.contains(id) {
                continue;
            }
            self.trial_entries += 1;
            if self.trial_entries > MAX_TRIAL_ENTRIES {
                return;
            }
            let Some(mut keys) = Keys::new(material, None) else {
                continue;
            };
            for epoch in [0, 1] {
                let Some(e) = keys.epoch(epoch) else { continue };
                let client = match (opens(&e.c2s), opens(&e.s2c)) {
                    (true, _) => true,
                    (_, true) => false,
                    _ => continue,
                };
                session.client = Some(from).filter(|_| client);
                session.keys_from = format!(
                    "key log ({}, id {}, found by trial decryption)",
                    label_of(material),
                    hex::encode(id)
                );
                session.id = Some(id.clone());
                session.keys = Some(keys);
                self.claimed.insert(id.clone());
                if !client {
                    session.server = Some(from);
                }
                return;
            }
        }
    }

    fn data(
        &mut self,
        session: &mut Session,
        at: (FlowKey, usize),
        p: &Parsed<'_>,
        repr: &Repr,
        d: &smt_proto::wire::DataHeader,
        report: &mut PacketReport,
    ) {
        let key = (
            at.0,
            at.1,
            p.from,
            session.epoch_for(repr.key_phase),
            repr.id,
        );
        let lengths = Lengths {
            message_len: d.message_len,
            wire_len: d.message_wire_len,
        };
        let msg = self
            .messages
            .entry(key)
            .or_insert_with(|| Message::new(repr.id, repr.key_phase, lengths, p.frame));
        let recent = self.recent_ids.entry((at.0, at.1, p.from)).or_default();
        if recent.last() != Some(&repr.id) {
            recent.retain(|&id| id != repr.id);
            recent.push(repr.id);
            if recent.len() > 32 {
                recent.remove(0);
            }
        }
        let was_complete = msg.is_complete();
        let segment = (u64::from(d.segment_offset), u64::from(d.segment_len));
        let placed = msg.place(
            p.frame,
            lengths,
            segment,
            d.wire_offset(),
            p.split.payload(),
            d.retransmit,
        );
        match placed {
            Placed::New => {}
            Placed::Duplicate if was_complete && !d.retransmit => {
                let what = format!(
                    "replayed: a copy of a packet of message {:#x}, complete since frame {}, without the RETRANSMIT flag",
                    repr.id,
                    msg.complete_at.unwrap_or(0)
                );
                report.notes.push(what.clone());
                self.problems.push(Problem {
                    frame: p.frame,
                    what,
                });
            }
            Placed::Duplicate => report
                .notes
                .push("duplicate: these bytes arrived before".into()),
            Placed::Conflict => {
                let what = format!(
                    "out of place: other bytes than an earlier copy at wire byte {} of message {:#x} (first copy kept)",
                    d.wire_offset(),
                    repr.id
                );
                report.notes.push(what.clone());
                self.problems.push(Problem {
                    frame: p.frame,
                    what,
                });
            }
            Placed::Disagrees { restarted } => {
                let what = format!(
                    "out of place: lengths disagree with the earlier packets of message {:#x}{}",
                    repr.id,
                    if restarted {
                        " (nothing had opened: the message starts over)"
                    } else {
                        " (dropped)"
                    }
                );
                report.notes.push(what.clone());
                self.problems.push(Problem {
                    frame: p.frame,
                    what,
                });
            }
        }
        self.open_ready(session, key, p, repr.key_phase, report);
    }

    /// Opens every record of the message that is now whole.
    fn open_ready(
        &mut self,
        session: &mut Session,
        key: MessageKey,
        p: &Parsed<'_>,
        phase: bool,
        report: &mut PacketReport,
    ) {
        let layout = self.opts.seq_layout;
        loop {
            let Some(msg) = self.messages.get_mut(&key) else {
                return;
            };
            let Some(ready) = msg.next_record() else {
                return;
            };
            if session.keys.is_none() {
                let (id, index) = (msg.id, ready.index);
                let probe = ready.bytes.clone();
                self.trial(session, p.from, |c| opens(c, layout, id, index, &probe));
            }
            if !self.open_next(session, key, &ready, p, phase, report) {
                return;
            }
        }
    }

    /// Opens the message's next record (`ready`) under the session's keys;
    /// whether the message may go on to the record after it.
    fn open_next(
        &mut self,
        session: &mut Session,
        key: MessageKey,
        ready: &Ready,
        p: &Parsed<'_>,
        phase: bool,
        report: &mut PacketReport,
    ) -> bool {
        let layout = self.opts.seq_layout;
        let Some(msg) = self.messages.get_mut(&key) else {
            return false;
        };
        if session.keys.is_none() {
            return false;
        }
        // The epoch its first record opened under, else the likeliest ones.
        let epochs = match msg.epoch {
            Some(e) => vec![e],
            None => std::iter::once(key.3)
                .chain(
                    session
                        .candidates(phase)
                        .into_iter()
                        .filter(|&e| e != key.3),
                )
                .collect(),
        };
        let from_client = session.is_client(p.from);
        let id = msg.id;
        let found = session.find_key(&epochs, from_client, |c| {
            opens(c, layout, id, ready.index, &ready.bytes)
        });
        let Some((epoch, client)) = found else {
            let e = classify(session, msg, ready, layout, from_client);
            self.failed(session, key, ready, p, e, report);
            return false;
        };
        let Some(cipher) = session.cipher(epoch, client) else {
            return false;
        };
        let result = msg.open(cipher, layout, ready, p.frame);
        msg.epoch = Some(epoch);
        session.learn_roles(
            if client { p.from } else { p.to },
            if client { p.to } else { p.from },
        );
        session.used(epoch);
        if let Err(e) = result {
            self.failed(session, key, ready, p, e, report);
            return false;
        }
        report.notes.push(opened_note(msg));
        true
    }

    fn failed(
        &mut self,
        session: &mut Session,
        key: MessageKey,
        ready: &Ready,
        p: &Parsed<'_>,
        e: OpenError,
        report: &mut PacketReport,
    ) {
        let belongs = match e {
            OpenError::Auth if self.searches < MAX_SEARCHES => {
                self.searches += 1;
                self.search(session, key, ready)
            }
            _ => None,
        };
        let Some(msg) = self.messages.get_mut(&key) else {
            return;
        };
        msg.fail(ready, p.frame, e, belongs.clone());
        let status = msg.records.last().map_or("", |r| r.status);
        let what = format!(
            "record {} of message {:#x} ({} > {}, wire byte {}): {status}{}",
            ready.index,
            msg.id,
            p.from,
            p.to,
            ready.wire_offset,
            belongs.map_or(String::new(), |b| format!(": {b}"))
        );
        report.notes.push(what.clone());
        self.problems.push(Problem {
            frame: p.frame,
            what,
        });
    }

    /// Where a record that failed under its expected sequence number does
    /// open: another index of its message, the same place in a recent
    /// message of the same sender, or the other direction.
    fn search(&mut self, session: &mut Session, key: MessageKey, ready: &Ready) -> Option<String> {
        let layout = self.opts.seq_layout;
        let (flow, s, from, guess, id) = key;
        let epoch = self.messages.get(&key)?.epoch.unwrap_or(guess);
        let from_client = session.is_client(from).unwrap_or(true);
        let recent = self
            .recent_ids
            .get(&(flow, s, from))
            .cloned()
            .unwrap_or_default();
        let e = session.keys.as_mut()?.epoch(epoch)?;
        let (own, other) = if from_client {
            (&e.c2s, &e.s2c)
        } else {
            (&e.s2c, &e.c2s)
        };
        let mut tries: Vec<(&AesGcmCipher, u64, u64, &str)> = Vec::new();
        for index in 0..(ready.index + 4).min(64) {
            if index != ready.index {
                tries.push((own, id, index, ""));
            }
        }
        // The sender's recent messages, and its neighbours in ID order.
        let neighbours = [id.wrapping_sub(4), id.wrapping_sub(2), id + 2, id + 4];
        let mut others: Vec<u64> = recent.iter().rev().copied().collect();
        others.extend(neighbours.iter().filter(|n| !recent.contains(n)));
        for &other_id in others.iter().filter(|&&i| i != id) {
            for index in 0..4 {
                tries.push((own, other_id, index, ""));
            }
        }
        tries.push((other, id, ready.index, " of the other direction"));
        tries.into_iter().find_map(|(cipher, id, index, dir)| {
            opens(cipher, layout, id, index, &ready.bytes)
                .then(|| format!("it opens as record {index} of message {id:#x}{dir}"))
        })
    }

    fn finish(mut self, capture: CaptureSummary, flows: &HashMap<FlowKey, Vec<Session>>) -> Report {
        let mut sessions = Vec::new();
        let mut index_of = HashMap::new();
        let mut order: Vec<(&FlowKey, usize, &Session)> = flows
            .iter()
            .flat_map(|(k, v)| v.iter().enumerate().map(move |(i, s)| (k, i, s)))
            .collect();
        order.sort_by_key(|(_, _, s)| s.first_frame);
        for (flow, i, s) in order {
            index_of.insert((*flow, i), sessions.len());
            sessions.push(SessionReport {
                index: sessions.len(),
                client: s.client.map(|a| a.to_string()),
                server: s
                    .server
                    .or_else(|| s.client.map(|c| if c == flow.0 { flow.1 } else { flow.0 }))
                    .map(|a| a.to_string()),
                handshake: s.kind.map(packet::kind_name),
                key_log_id: s.id.as_deref().map(hex::encode),
                keys: s.keys_from.clone(),
                first_frame: s.first_frame,
                epochs: s.highest,
            });
        }
        let mut messages: Vec<MessageReport> = Vec::new();
        for ((flow, s, from, _, _), msg) in std::mem::take(&mut self.messages) {
            let session = &flows[&flow][s];
            let to = if from == flow.0 { flow.1 } else { flow.0 };
            messages.push(self.message_report(index_of[&(flow, s)], session, from, to, msg));
        }
        messages.sort_by_key(|m| (m.first_frame, m.session));
        self.problems.sort_by_key(|p| p.frame);
        Report {
            capture,
            packets: self.packets,
            sessions,
            messages,
            problems: self.problems,
        }
    }

    fn message_report(
        &mut self,
        index: usize,
        session: &Session,
        from: SocketAddr,
        to: SocketAddr,
        msg: Message,
    ) -> MessageReport {
        let kind = match session.is_client(from) {
            Some(client) if client == msg.id.is_multiple_of(2) => "request",
            Some(_) => "response",
            None => "unknown",
        };
        let failed = msg.records.iter().any(|r| r.status != "ok");
        let status = match (msg.is_complete(), session.keys.is_some(), failed) {
            (true, _, _) => "complete",
            (false, false, _) => "no_keys",
            (false, true, true) => "failed",
            (false, true, false) => "incomplete",
        };
        let mut problems = msg.problems.clone();
        match status {
            "incomplete" | "failed" => problems.push(format!(
                "incomplete: wire bytes from {} of {} never arrived intact",
                msg.first_gap(),
                msg.lengths.wire_len
            )),
            "no_keys" => problems.push(format!(
                "not decrypted (no keys): {} of {} wire bytes captured",
                msg.bytes_held(),
                msg.lengths.wire_len
            )),
            _ => {}
        }
        if session.keys.is_some() {
            for p in &problems {
                self.problems.push(Problem {
                    frame: msg.last_frame,
                    what: format!("message {:#x} {from} > {to}: {p}", msg.id),
                });
            }
        }
        let preview = &msg.plaintext[..msg.plaintext.len().min(self.opts.preview)];
        MessageReport {
            session: index,
            src: from.to_string(),
            dst: to.to_string(),
            kind,
            id: format!("{:#x}", msg.id),
            key_phase: u8::from(msg.phase),
            epoch: msg.epoch,
            first_frame: msg.first_frame,
            last_frame: msg.last_frame,
            message_len: msg.lengths.message_len,
            message_wire_len: msg.lengths.wire_len,
            packets: msg.packets,
            retransmissions: msg.retransmissions,
            duplicates: msg.duplicates,
            status,
            plaintext_len: msg.plaintext.len(),
            first_bytes: hex::encode(preview),
            records: msg.records.clone(),
            problems,
            plaintext: self.opts.keep_plaintext.then_some(msg.plaintext),
        }
    }
}

/// Why a record opens under none of the session's keys: framing and
/// content errors come before authentication.
fn classify(
    session: &mut Session,
    msg: &Message,
    ready: &Ready,
    layout: SeqLayout,
    from_client: Option<bool>,
) -> OpenError {
    let epoch = msg
        .epoch
        .or_else(|| session.candidates(false).first().copied())
        .unwrap_or(0);
    let Some(e) = session.keys.as_mut().and_then(|k| k.epoch(epoch)) else {
        return OpenError::Auth;
    };
    let cipher = if from_client.unwrap_or(true) {
        &e.c2s
    } else {
        &e.s2c
    };
    let record = ready.bytes.clone();
    match smt_proto::record::open_segment(
        cipher,
        layout,
        msg.id,
        ready.index,
        &record,
        &mut Vec::new(),
    ) {
        Err(e) => e,
        Ok(_) => OpenError::Auth,
    }
}

/// What a packet's note says when it completed a record.
fn opened_note(msg: &Message) -> String {
    let Some(r) = msg.records.last() else {
        return String::new();
    };
    let complete = match msg.is_complete() {
        true => format!(" (message complete: {} bytes)", msg.plaintext.len()),
        false => String::new(),
    };
    format!(
        "record {} of message {:#x} opened: {} bytes{complete}",
        r.index, msg.id, r.data_len
    )
}

/// Whether `record` opens as record `index` of message `id` under `cipher`.
fn opens(cipher: &AesGcmCipher, layout: SeqLayout, id: u64, index: u64, record: &[u8]) -> bool {
    let copy = record.to_vec();
    smt_proto::record::open_segment(cipher, layout, id, index, &copy, &mut Vec::new()).is_ok()
}

fn label_of(material: &KeyMaterial) -> &'static str {
    match material {
        KeyMaterial::Tls { .. } => "TLS traffic secrets",
        KeyMaterial::Psk { .. } => "PSK traffic keys",
        KeyMaterial::ZeroRtt { fs: None, .. } => "0-RTT SMT-key secrets",
        KeyMaterial::ZeroRtt { fs: Some(_), .. } => "0-RTT SMT-key and forward-secret secrets",
    }
}
