//! The endpoint's event trace as JSON lines: one object per event of the
//! protocol core's trace (`smt_proto::trace`), stamped with the wall
//! clock. `smt dump --trace` turns it into per-RPC timelines. Each line
//! is a [`Line`] ([`schema`]: the fields, and the one type both the
//! writer and the readers use); `docs/observability.md` § 6 lists them
//! too.
//!
//! As for the capture, the engine hands each turn's events to a writer
//! thread; a writer [`TRACE_BUFFER`] bytes behind drops events and counts
//! them (the last line says how many).

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use smt_proto::trace::TraceEvent;

use crate::clock::WallClock;
use crate::spool::{Sink, Spool};

mod from_core;
pub mod schema;

pub use schema::{BadMessageId, Event, Line, MessageId, MessageRef, Packet, Role};

/// Bytes of events a trace holds for its writer before it drops (an
/// event is counted at 256 bytes).
pub const TRACE_BUFFER: usize = 64 << 20;
const EVENT_BYTES: usize = 256;
/// The `version` of the first line ([`Event::TraceStart`]): the schema
/// of [`Line`]. Version 1 since the trace was first written; readers
/// accept its files unchanged.
pub const TRACE_FORMAT_VERSION: u32 = 1;

/// A JSON-lines event trace of one or more endpoints. Clones write to the
/// same file; give one to each endpoint that should be in it
/// (`smt::EndpointConfig::set_observe`). Complete
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

    /// Queues one turn's events of the endpoint at `local` (the driver
    /// calls this with what `smt_proto::Endpoint::poll_trace` gave).
    /// Never waits: beyond [`TRACE_BUFFER`] they are dropped and counted.
    pub fn record(&self, local: SocketAddr, events: Vec<TraceEvent>) {
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
            t: sink.seconds(clock.unix_nanos_at_start()),
            us: 0,
            tick: 0,
            ep: None,
            event: Event::TraceStart {
                version: TRACE_FORMAT_VERSION,
            },
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
            t: self.seconds(self.clock.unix_nanos_now()),
            us: 0,
            tick: 0,
            ep: None,
            event: Event::TraceEnd {
                events: self.written,
                count: dropped,
            },
        };
        self.line(&end)?;
        self.out.flush()
    }
}
