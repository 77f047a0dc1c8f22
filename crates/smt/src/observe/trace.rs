//! The endpoint's event trace as JSON lines: one object per event of the
//! protocol core's trace (`smt_proto::trace`), stamped with the wall
//! clock. `smt dump --trace` turns it into per-RPC timelines; the schema
//! is in `docs/observability.md` (and here, field by field, in [`Line`]).
//!
//! As for the capture, the engine hands each turn's events to a writer
//! thread; a writer [`TRACE_BUFFER`] bytes behind drops events and counts
//! them (the last line says how many).

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use serde::Serialize;
use smt_proto::trace::{PacketSummary, TraceEvent, Traced};
use smt_proto::wire::Body;

use super::spool::{Sink, Spool};
use super::WallClock;

/// Bytes of events a trace holds for its writer before it drops (an
/// event is counted at 256 bytes).
pub const TRACE_BUFFER: usize = 64 << 20;
const EVENT_BYTES: usize = 256;
/// The `version` of the first line.
pub const TRACE_FORMAT_VERSION: u32 = 1;

/// A JSON-lines event trace of one or more endpoints. Clones write to the
/// same file; give one to [`crate::EndpointConfig::observe`]. Complete
/// after [`Trace::finish`], or once every clone is dropped.
#[derive(Clone)]
pub struct Trace {
    spool: Arc<Spool<Events>>,
}

/// How much a trace holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TraceSummary {
    /// Events written.
    pub events: u64,
    /// Events dropped because the writer was [`TRACE_BUFFER`] bytes
    /// behind, had failed, or the trace was finished. (Events the core's
    /// own queue lost are `lost` lines in the file.)
    pub dropped: u64,
}

impl Trace {
    /// Creates (or truncates) the file at `path`.
    pub fn create(path: impl AsRef<Path>) -> io::Result<Self> {
        Self::to_writer(File::create(path)?)
    }

    /// A trace written to `out`; its first line is written before this
    /// returns.
    pub fn to_writer(out: impl Write + Send + 'static) -> io::Result<Self> {
        let sink = JsonLines::start(out, WallClock::now())?;
        let spool = Spool::start("smt-trace", sink, TRACE_BUFFER)?;
        Ok(Self {
            spool: Arc::new(spool),
        })
    }

    /// Events written and dropped so far.
    pub fn summary(&self) -> TraceSummary {
        let t = self.spool.tally();
        TraceSummary {
            events: t.written,
            dropped: t.dropped,
        }
    }

    /// Writes every event queued and the last line, and closes the file.
    pub fn finish(&self) -> io::Result<TraceSummary> {
        self.spool.finish()?;
        Ok(self.summary())
    }

    /// Queues one turn's events of the endpoint at `local`.
    pub(crate) fn record(&self, local: SocketAddr, events: Vec<TraceEvent>) {
        let n = events.len();
        self.spool
            .offer(Events { local, events }, n * EVENT_BYTES, n as u64);
    }
}

impl std::fmt::Debug for Trace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Trace")
            .field("summary", &self.summary())
            .finish_non_exhaustive()
    }
}

struct Events {
    local: SocketAddr,
    events: Vec<TraceEvent>,
}

struct JsonLines<W: Write> {
    out: BufWriter<W>,
    clock: WallClock,
    written: u64,
}

impl<W: Write + Send + 'static> JsonLines<W> {
    fn start(out: W, clock: WallClock) -> io::Result<Self> {
        let mut sink = Self {
            out: BufWriter::with_capacity(1 << 20, out),
            clock,
            written: 0,
        };
        let first = Line {
            version: Some(TRACE_FORMAT_VERSION),
            ..Line::new(
                sink.seconds(clock.unix_nanos_at_start()),
                0,
                0,
                None,
                "trace_start",
            )
        };
        sink.line(&first)?;
        sink.out.flush()?;
        Ok(sink)
    }

    fn seconds(&self, unix_nanos: u64) -> f64 {
        // Microseconds: what the core's clock resolves usefully.
        (unix_nanos / 1000) as f64 / 1e6
    }

    fn line(&mut self, line: &Line) -> io::Result<()> {
        serde_json::to_writer(&mut self.out, line)?;
        self.out.write_all(b"\n")
    }
}

impl<W: Write + Send + 'static> Sink for JsonLines<W> {
    type Item = Events;

    fn write(&mut self, batch: Events) -> io::Result<()> {
        for e in &batch.events {
            let t = self.seconds(self.clock.unix_nanos(e.at));
            let us = self.clock.micros_since_start(e.at);
            let line = Line::of(t, us, e.tick, batch.local, &e.what);
            self.line(&line)?;
            self.written += 1;
        }
        Ok(())
    }

    fn finish(&mut self, dropped: u64) -> io::Result<()> {
        let end = Line {
            events: Some(self.written),
            count: Some(dropped),
            ..Line::new(
                self.seconds(self.clock.unix_nanos_now()),
                0,
                0,
                None,
                "trace_end",
            )
        };
        self.line(&end)?;
        self.out.flush()
    }
}

/// One line of the trace. Always: `t` (wall clock, seconds since the Unix
/// epoch, microseconds), `us` (the endpoint's clock, microseconds since
/// the trace was made: the `now` the core was given), `tick` (the core's
/// tick count), `ep` (the endpoint's address), `ev` (the event). The rest
/// depends on `ev`; absent fields are left out.
#[derive(Debug, Serialize)]
pub(crate) struct Line {
    t: f64,
    us: i64,
    tick: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    ep: Option<String>,
    ev: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    peer: Option<String>,
    /// A client RPC's handle (stable across restarts).
    #[serde(skip_serializing_if = "Option::is_none")]
    rpc: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    epoch: Option<u64>,
    /// Message ID, hex.
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<String>,
    /// Packet: type name, key phase, bytes in the datagram (MAC included).
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    ty: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    phase: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    len: Option<u64>,
    /// The header does not parse (a receiver drops it as malformed).
    #[serde(skip_serializing_if = "Option::is_none")]
    malformed: Option<bool>,
    /// DATA: the payload's wire offset and length; RESEND: the range asked
    /// for; GRANT: the offset granted up to; HANDSHAKE: the stream offset
    /// and data length.
    #[serde(skip_serializing_if = "Option::is_none")]
    offset: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    length: Option<u64>,
    /// DATA header fields.
    #[serde(skip_serializing_if = "Option::is_none")]
    retransmit: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pkt: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    msg_len: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    wire_len: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    seg_offset: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    seg_len: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    incoming: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    priority: Option<u8>,
    /// ACK: the IDs acknowledged, hex.
    #[serde(skip_serializing_if = "Option::is_none")]
    ids: Option<Vec<String>>,
    /// HANDSHAKE fields; `kind` also for `handshake_started`.
    #[serde(skip_serializing_if = "Option::is_none")]
    ack: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    kind: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    flags: Option<u8>,
    /// `sealed`, `delivered`: which message of the RPC.
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    records: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    old_epoch: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    old_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    by_peer: Option<bool>,
    /// `lost`: events the core's queue lost; `trace_end`: events the
    /// writer dropped.
    #[serde(skip_serializing_if = "Option::is_none")]
    count: Option<u64>,
    /// `trace_end`: events written.
    #[serde(skip_serializing_if = "Option::is_none")]
    events: Option<u64>,
    /// `trace_start`: the format's version.
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<u32>,
}

fn hex(id: u64) -> String {
    format!("{id:#x}")
}

impl Line {
    fn new(t: f64, us: i64, tick: u64, ep: Option<SocketAddr>, ev: &'static str) -> Self {
        Self {
            t,
            us,
            tick,
            ep: ep.map(|a| a.to_string()),
            ev,
            peer: None,
            rpc: None,
            epoch: None,
            id: None,
            ty: None,
            phase: None,
            len: None,
            malformed: None,
            offset: None,
            length: None,
            retransmit: None,
            pkt: None,
            msg_len: None,
            wire_len: None,
            seg_offset: None,
            seg_len: None,
            incoming: None,
            priority: None,
            ids: None,
            ack: None,
            kind: None,
            flags: None,
            message: None,
            records: None,
            reason: None,
            error: None,
            old_epoch: None,
            old_id: None,
            by_peer: None,
            count: None,
            events: None,
            version: None,
        }
    }

    /// The line of one event: a decision table on the event's kind.
    pub(crate) fn of(t: f64, us: i64, tick: u64, local: SocketAddr, what: &Traced) -> Self {
        let line = |ev| Self::new(t, us, tick, Some(local), ev);
        let msg = |ev, peer: &SocketAddr, epoch, id| Self {
            peer: Some(peer.to_string()),
            epoch: Some(epoch),
            id: Some(hex(id)),
            ..line(ev)
        };
        match what {
            Traced::Sent { peer, packet } => line("sent").packet(peer, packet),
            Traced::Received { peer, packet } => line("received").packet(peer, packet),
            Traced::Dropped { peer, reason } => Self {
                peer: Some(peer.to_string()),
                reason: Some(reason.name()),
                ..line("dropped")
            },
            Traced::Sealed {
                peer,
                epoch,
                id,
                kind,
                len,
                wire_len,
                records,
            } => Self {
                message: Some(kind.name()),
                length: Some(*len),
                wire_len: Some(*wire_len),
                records: Some(*records),
                ..msg("sealed", peer, *epoch, *id)
            },
            Traced::Opened {
                peer,
                epoch,
                id,
                records,
            } => Self {
                records: Some(*records),
                ..msg("opened", peer, *epoch, *id)
            },
            Traced::OpenFailed {
                peer,
                epoch,
                id,
                reason,
            } => Self {
                reason: Some(reason.name()),
                ..msg("open_failed", peer, *epoch, *id)
            },
            Traced::Delivered {
                peer,
                epoch,
                id,
                kind,
                len,
                rpc,
            } => Self {
                message: Some(kind.name()),
                length: Some(*len),
                rpc: rpc.map(|r| r.0),
                ..msg("delivered", peer, *epoch, *id)
            },
            Traced::RpcStarted {
                rpc,
                peer,
                epoch,
                id,
                len,
            } => Self {
                rpc: Some(rpc.0),
                length: Some(*len),
                ..msg("rpc_started", peer, *epoch, *id)
            },
            Traced::RpcRestarted {
                rpc,
                peer,
                old_epoch,
                old_id,
                epoch,
                id,
            } => Self {
                rpc: Some(rpc.0),
                old_epoch: Some(*old_epoch),
                old_id: Some(hex(*old_id)),
                ..msg("rpc_restarted", peer, *epoch, *id)
            },
            Traced::RpcFailed {
                rpc,
                peer,
                epoch,
                id,
                error,
            } => Self {
                rpc: Some(rpc.0),
                reason: Some(error.name()),
                ..msg("rpc_failed", peer, *epoch, *id)
            },
            Traced::RpcAborted {
                rpc,
                peer,
                epoch,
                id,
            } => Self {
                rpc: Some(rpc.0),
                ..msg("rpc_aborted", peer, *epoch, *id)
            },
            Traced::ServerFreed {
                peer,
                epoch,
                id,
                reason,
            } => Self {
                reason: Some(reason.name()),
                ..msg("server_freed", peer, *epoch, *id)
            },
            Traced::HandshakeStarted { peer, kind } => Self {
                peer: Some(peer.to_string()),
                kind: Some(kind.0),
                ..line("handshake_started")
            },
            Traced::HandshakeDone { peer } => Self {
                peer: Some(peer.to_string()),
                ..line("handshake_done")
            },
            Traced::HandshakeFailed { peer, error } => Self {
                peer: Some(peer.to_string()),
                error: Some(error.to_string()),
                ..line("handshake_failed")
            },
            Traced::Rekeyed {
                peer,
                epoch,
                by_peer,
            } => Self {
                peer: Some(peer.to_string()),
                epoch: Some(*epoch),
                by_peer: Some(*by_peer),
                ..line("rekeyed")
            },
            Traced::Lost { count } => Self {
                count: Some(*count),
                ..line("lost")
            },
            // A kind of event this version does not know how to write.
            _ => line("unknown"),
        }
    }

    /// A packet's fields.
    fn packet(self, peer: &SocketAddr, p: &PacketSummary) -> Self {
        let base = Self {
            peer: Some(peer.to_string()),
            ty: Some(
                p.ty.name()
                    .map_or_else(|| format!("{:#04x}", p.ty.0), str::to_string),
            ),
            id: Some(hex(p.id)),
            phase: Some(u8::from(p.key_phase)),
            len: Some(p.len as u64),
            ..self
        };
        let Some(repr) = p.repr else {
            return Self {
                malformed: Some(true),
                ..base
            };
        };
        match repr.body {
            Body::Data(h) => Self {
                offset: Some(h.wire_offset()),
                length: Some(h.payload_len() as u64),
                retransmit: Some(h.retransmit),
                pkt: Some(h.packet_index),
                msg_len: Some(h.message_len),
                wire_len: Some(u64::from(h.message_wire_len)),
                seg_offset: Some(h.segment_offset),
                seg_len: Some(h.segment_len),
                incoming: Some(h.incoming),
                ..base
            },
            Body::Grant { offset, priority } => Self {
                offset: Some(u64::from(offset)),
                priority: Some(priority),
                ..base
            },
            Body::Resend {
                offset,
                length,
                priority,
            } => Self {
                offset: Some(u64::from(offset)),
                length: Some(u64::from(length)),
                priority: Some(priority),
                ..base
            },
            Body::Ack(ids) => Self {
                ids: Some(ids.as_slice().iter().map(|&i| hex(i)).collect()),
                ..base
            },
            Body::Handshake {
                offset,
                ack,
                len,
                kind,
                flags,
            } => Self {
                offset: Some(u64::from(offset)),
                ack: Some(ack),
                length: Some(u64::from(len)),
                kind: Some(kind.0),
                flags: Some(flags),
                ..base
            },
            _ => base,
        }
    }
}
