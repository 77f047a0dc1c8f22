//! The driver's transmit side of TLS offload: the core's DATA datagrams
//! (records with plaintext bodies and empty tags, `smt_proto::offload`)
//! become descriptors in the NIC's queues, as mlx5 writes WQEs for kTLS.
//!
//! - **Queue**: a message's packets all go through one queue, chosen by
//!   its ID (`(id >> 1) mod queues`: IDs step by two), as the SMT paper (§4.4.2)
//!   has a message's segments stay on one queue.
//! - **Context**: one per (queue, peer, key epoch) from the
//!   [`ContextPlanner`] (created on first use, the queue's least recently
//!   used one destroyed when its share of the table is full); a new key
//!   epoch is a new context, since key material cannot be resynced.
//! - **Resync**: the driver remembers where each context will stand after
//!   what it posted ([`RecordPos`]: the record and the offset in it) and
//!   posts a resync before any packet that does not start there: every
//!   new message (offset 0, no data needed), and a packet that resumes a
//!   message mid-record after another message or a retransmission
//!   (with the record's start from the core, mlx5's DUMP). A packet that
//!   continues where the context stands needs nothing, as a TCP segment
//!   with the expected sequence number needs nothing.
//! - **Segment**: the packet's header (with the destination in front, the
//!   addresses a real descriptor's headers carry) and its record bytes;
//!   the NIC encrypts the bodies and writes the tags, and the packet
//!   leaves as the wire would have had it from software.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use smt_offload::{
    CipherSuite, ContextId, ContextPlanner, CryptoInfo, Engine, EngineConfig, FlowKey, QueueId,
    Resync, RoundRobin, Segment, ThreadedEngine, TxCounters, TxDescriptor, WireOutput, WireSegment,
};
use smt_proto::crypto::{OffloadKey, OffloadSuite};
use smt_proto::offload::{RecordPos, TxRecords};
use smt_proto::Endpoint as Core;
use smt_udp::{GsoBatch, Socket, MAX_GSO_PAYLOAD};

use crate::observe::CaptureTap;

/// Bytes of the destination put in front of each segment's header.
const DEST_LEN: usize = 19;

/// Where the NIC's descriptors go: its queues.
pub trait TxNic {
    /// Hands `batch` to queue `queue` in one go (one doorbell).
    fn post(&mut self, queue: QueueId, batch: Vec<TxDescriptor>);
    /// The NIC's counters so far.
    fn counters(&self) -> TxCounters;
}

/// The driver's transmit state: planner, where each context stands, key
/// material by flow, descriptors waiting for the doorbell.
#[derive(Debug)]
pub struct TxOffload<N> {
    nic: N,
    queues: u16,
    planner: ContextPlanner,
    /// Where each context stands after what was posted to it.
    positions: HashMap<ContextId, RecordPos>,
    /// Peers numbered for the planner's flow keys.
    peers: HashMap<SocketAddr, u32>,
    /// Key material by (peer, key epoch), from the core.
    keys: HashMap<(SocketAddr, u64), CryptoInfo>,
    /// Descriptors per queue since the last doorbell.
    batches: Vec<Vec<TxDescriptor>>,
    stats: TxOffloadStats,
}

/// What the driver's transmit side did (the NIC counts the rest).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TxOffloadStats {
    /// DATA packets handed to the NIC.
    pub packets: u64,
    /// Resyncs to a record's first byte (a new message, mostly).
    pub resyncs: u64,
    /// Resyncs into the middle of a record, with its start replayed.
    pub resyncs_mid_record: u64,
    /// Packets not handed over: their key or message was gone (the
    /// protocol sends them again if they still matter).
    pub dropped: u64,
}

impl<N: TxNic> TxOffload<N> {
    /// The driver's side for a NIC with `queues` queues and `contexts`
    /// flow contexts.
    pub fn new(nic: N, queues: u16, contexts: usize) -> Self {
        let queues = queues.max(1);
        Self {
            nic,
            queues,
            planner: ContextPlanner::new(queues, contexts),
            positions: HashMap::new(),
            peers: HashMap::new(),
            keys: HashMap::new(),
            batches: (0..queues).map(|_| Vec::new()).collect(),
            stats: TxOffloadStats::default(),
        }
    }

    /// Writes the descriptors for one datagram the core wrote (`datagram`,
    /// to `records.peer`): context, resync if needed, segment. They wait
    /// for [`TxOffload::ring`].
    pub fn post(&mut self, core: &Core, records: &TxRecords, datagram: &[u8]) {
        if self.try_post(core, records, datagram).is_none() {
            self.stats.dropped += 1;
        }
    }

    fn try_post(&mut self, core: &Core, tx: &TxRecords, datagram: &[u8]) -> Option<()> {
        let key = self.key(core, tx.peer, tx.epoch)?;
        let queue = QueueId(((tx.id >> 1) % u64::from(self.queues)) as u16);
        let flow = FlowKey {
            queue,
            peer: self.peer_number(tx.peer),
            epoch: tx.epoch as u32,
        };
        let batch = &mut self.batches[queue.index()];
        let (ctx, created) = self.planner.context_for(flow, &key, tx.start.seq, batch);
        if created {
            let start = RecordPos {
                seq: tx.start.seq,
                offset: 0,
            };
            self.positions.insert(ctx, start);
        }
        let stands = *self.positions.get(&ctx)?;
        if stands != tx.start {
            let prefix = match tx.start.offset {
                0 => Vec::new(),
                _ => core.tx_record_prefix(tx)?.to_vec(),
            };
            match prefix.is_empty() {
                true => self.stats.resyncs += 1,
                false => self.stats.resyncs_mid_record += 1,
            }
            batch.push(TxDescriptor::Resync(Resync {
                ctx,
                record_seq: tx.start.seq,
                offset: tx.start.offset as usize,
                record_prefix: prefix,
            }));
        }
        self.positions.insert(ctx, tx.end);
        let payload = datagram.get(tx.payload.clone())?;
        let mut header = Vec::with_capacity(DEST_LEN + tx.payload.start);
        header.extend_from_slice(&encode_dest(tx.peer));
        header.extend_from_slice(&datagram[..tx.payload.start]);
        batch.push(TxDescriptor::Segment(Segment {
            ctx,
            header,
            payload: payload.to_vec(),
            mss: u16::try_from(payload.len()).ok()?,
        }));
        self.stats.packets += 1;
        Some(())
    }

    /// Rings the doorbell: every queue's descriptors go to the NIC.
    pub fn ring(&mut self) {
        for (q, batch) in self.batches.iter_mut().enumerate() {
            if !batch.is_empty() {
                // NOTE: at most u16::MAX queues (`new`).
                self.nic.post(QueueId(q as u16), std::mem::take(batch));
            }
        }
    }

    /// The NIC.
    pub fn nic(&mut self) -> &mut N {
        &mut self.nic
    }

    /// The NIC's counters.
    pub fn counters(&self) -> TxCounters {
        self.nic.counters()
    }

    /// The driver's own counters.
    pub fn stats(&self) -> TxOffloadStats {
        self.stats
    }

    /// Key material for (peer, epoch), from the core the first time.
    fn key(&mut self, core: &Core, peer: SocketAddr, epoch: u64) -> Option<CryptoInfo> {
        if let Some(info) = self.keys.get(&(peer, epoch)) {
            return Some(info.clone());
        }
        let info = crypto_info(&core.tx_cipher(peer, epoch)?.offload_key()?, 0)?;
        if self.keys.len() >= 4096 {
            // Old epochs' and gone peers' keys: fetched again if needed.
            self.keys.clear();
        }
        self.keys.insert((peer, epoch), info.clone());
        Some(info)
    }

    fn peer_number(&mut self, peer: SocketAddr) -> u32 {
        let next = self.peers.len() as u32;
        *self.peers.entry(peer).or_insert(next)
    }
}

/// The NIC's form of a key the core handed out.
pub(crate) fn crypto_info(key: &OffloadKey, rec_seq: u64) -> Option<CryptoInfo> {
    let suite = match key.suite {
        OffloadSuite::Aes128Gcm => CipherSuite::Aes128Gcm,
        OffloadSuite::Aes256Gcm => CipherSuite::Aes256Gcm,
        _ => return None,
    };
    CryptoInfo::new(suite, &key.key, key.iv, rec_seq).ok()
}

/// The destination as a segment's header carries it: family, address,
/// port.
fn encode_dest(dest: SocketAddr) -> [u8; DEST_LEN] {
    let mut out = [0; DEST_LEN];
    match dest.ip() {
        IpAddr::V4(ip) => {
            out[0] = 4;
            out[1..5].copy_from_slice(&ip.octets());
        }
        IpAddr::V6(ip) => {
            out[0] = 6;
            out[1..17].copy_from_slice(&ip.octets());
        }
    }
    out[17..].copy_from_slice(&dest.port().to_be_bytes());
    out
}

fn decode_dest(header: &[u8]) -> Option<SocketAddr> {
    let port = u16::from_be_bytes([*header.get(17)?, *header.get(18)?]);
    let ip: IpAddr = match header.first()? {
        4 => <[u8; 4]>::try_from(header.get(1..5)?).ok()?.into(),
        6 => <[u8; 16]>::try_from(header.get(1..17)?).ok()?.into(),
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// A segment as a datagram: its destination and its bytes (header after
/// the destination, then the encrypted payload).
pub fn wire_datagram(segment: &WireSegment) -> Option<(SocketAddr, Vec<u8>)> {
    let dest = decode_dest(&segment.header)?;
    let mut bytes = segment.header[DEST_LEN..].to_vec();
    bytes.extend_from_slice(&segment.payload);
    Some((dest, bytes))
}

/// The deterministic engine as the NIC: descriptors are applied when
/// posted, on the caller's thread, and what leaves waits in
/// [`DeterministicNic::wire`] (tests and simulations).
#[derive(Debug)]
pub struct DeterministicNic {
    engine: Engine,
}

impl DeterministicNic {
    /// A NIC model with `queues` queues and room for `contexts` flow
    /// contexts.
    pub fn new(queues: u16, contexts: usize) -> Self {
        Self {
            engine: Engine::new(EngineConfig {
                queues: queues.max(1),
                context_capacity: contexts,
            }),
        }
    }

    /// The next datagram that left the NIC, oldest first.
    pub fn wire(&mut self) -> Option<(SocketAddr, Vec<u8>)> {
        let segment = self.engine.poll_wire()?;
        wire_datagram(&segment)
    }
}

impl TxNic for DeterministicNic {
    fn post(&mut self, queue: QueueId, batch: Vec<TxDescriptor>) {
        for desc in batch {
            // NOTE: the queue exists (TxOffload numbers them below the
            // engine's count); a refused post would only lose a packet.
            let _ = self.engine.post(queue, desc);
        }
        self.engine.run(&mut RoundRobin::default());
    }

    fn counters(&self) -> TxCounters {
        self.engine.counters()
    }
}

/// The threaded engine as the NIC: a worker thread per queue encrypts and
/// sends on the endpoint's socket, gathering each run of datagrams into
/// GSO batches.
#[derive(Debug)]
pub struct ThreadedNic {
    engine: ThreadedEngine,
    send_errors: Arc<AtomicU64>,
}

impl ThreadedNic {
    /// Starts `queues` workers sending on `socket` (`gso_segments`: what
    /// one send may carry; 1 without GSO).
    pub fn start(
        socket: Arc<Socket>,
        queues: u16,
        contexts: usize,
        ring: usize,
        gso_segments: usize,
    ) -> io::Result<Self> {
        Self::start_capturing(socket, queues, contexts, ring, gso_segments, None)
    }

    /// [`ThreadedNic::start`], the workers copying what they send into
    /// `capture`.
    pub(crate) fn start_capturing(
        socket: Arc<Socket>,
        queues: u16,
        contexts: usize,
        ring: usize,
        gso_segments: usize,
        capture: Option<CaptureTap>,
    ) -> io::Result<Self> {
        let send_errors = Arc::new(AtomicU64::new(0));
        let outputs = (0..queues.max(1))
            .map(|_| {
                let mut output =
                    SocketOutput::new(socket.clone(), gso_segments, send_errors.clone());
                output.capture = capture.clone();
                Box::new(output) as Box<dyn WireOutput>
            })
            .collect();
        let config = EngineConfig {
            queues: queues.max(1),
            context_capacity: contexts,
        };
        let engine = ThreadedEngine::start_with_outputs(config, ring, outputs)?;
        Ok(Self {
            engine,
            send_errors,
        })
    }

    /// Datagrams the workers could not send.
    pub fn send_errors(&self) -> u64 {
        self.send_errors.load(Ordering::Relaxed)
    }
}

impl TxNic for ThreadedNic {
    fn post(&mut self, queue: QueueId, batch: Vec<TxDescriptor>) {
        // Fails only once a worker has stopped (the endpoint is closing).
        let _ = self.engine.post_batch(queue, batch);
    }

    fn counters(&self) -> TxCounters {
        self.engine.counters()
    }
}

/// How long a worker waits for room in a full socket before it gives up
/// on a batch (the protocol retransmits).
const FULL_SOCKET_WAIT: Duration = Duration::from_millis(50);

/// One worker's way to the wire: consecutive datagrams to one destination
/// and of one size (the last may be shorter) are sent in one GSO call,
/// gathered by the same rule as the engine's own sends ([`GsoBatch`]).
struct SocketOutput {
    socket: Arc<Socket>,
    batch: GsoBatch,
    errors: Arc<AtomicU64>,
    /// A copy of what leaves, with a capture on.
    capture: Option<CaptureTap>,
}

impl SocketOutput {
    fn new(socket: Arc<Socket>, max_segments: usize, errors: Arc<AtomicU64>) -> Self {
        Self {
            socket,
            // Room for any one datagram after a full batch: the engine's
            // segments are never longer than a GSO send.
            batch: GsoBatch::new(max_segments, MAX_GSO_PAYLOAD),
            errors,
            capture: None,
        }
    }

    /// Sends the gathered datagrams, waiting a little for room if the
    /// socket is full. `send_some` says how far a refused batch got, so
    /// no datagram goes out twice.
    fn send(&mut self) {
        let Some((dest, bytes, segment)) = self.batch.gathered() else {
            return;
        };
        let (mut at, mut waited) = (0, Duration::ZERO);
        while at < bytes.len() {
            match self.socket.send_some(dest, &bytes[at..], segment) {
                Ok(n) if n > 0 => {
                    if let Some(tap) = &self.capture {
                        // A worker thread of the NIC stand-in: it keeps no
                        // engine clock, and reads the system's.
                        let sent = &bytes[at..at + n];
                        tap.sent(std::time::Instant::now(), dest, sent, segment);
                    }
                    at += n;
                }
                Ok(_) => break,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && waited < FULL_SOCKET_WAIT => {
                    let step = Duration::from_millis(1);
                    let fd = std::os::fd::AsFd::as_fd(&*self.socket);
                    let _ = crate::wait::wait(fd, true, None, Some(step));
                    waited += step;
                }
                Err(e) => {
                    tracing::debug!("offload engine: send failed: {e}");
                    let left = (bytes.len() - at).div_ceil(segment.max(1));
                    self.errors.fetch_add(left as u64, Ordering::Relaxed);
                    break;
                }
            }
        }
        self.batch.clear();
    }
}

impl WireOutput for SocketOutput {
    fn segment(&mut self, segment: WireSegment) {
        let Some(dest) = decode_dest(&segment.header) else {
            return;
        };
        let header = &segment.header[DEST_LEN..];
        let len = header.len() + segment.payload.len();
        if len > MAX_GSO_PAYLOAD {
            // Not a datagram any socket could send; the engine never
            // makes one (its segments are one MTU's worth).
            self.errors.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if !self.batch.fits(dest, len) {
            self.send();
        }
        let room = self.batch.free_space();
        room[..header.len()].copy_from_slice(header);
        room[header.len()..len].copy_from_slice(&segment.payload);
        self.batch.commit(dest, len);
    }

    fn flush(&mut self) {
        self.send();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn destinations_round_trip() {
        for dest in ["10.1.2.3:4000", "[2001:db8::7]:53"] {
            let dest: SocketAddr = dest.parse().unwrap();
            assert_eq!(decode_dest(&encode_dest(dest)), Some(dest));
        }
        assert_eq!(decode_dest(&[9; DEST_LEN]), None);
    }
}
