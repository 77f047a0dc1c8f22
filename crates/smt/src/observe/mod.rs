//! Recording what an endpoint does, for debugging and for users without
//! tcpdump (`docs/observability.md`): the types of the `smt-observe`
//! crate, wired into the endpoint by [`crate::EndpointConfig::set_observe`].
//!
//! - [`Capture`]: a pcapng file of every datagram the endpoint sends and
//!   receives, as it left or arrived at the socket (GSO batches as their
//!   datagrams, GRO batches split), with IP and UDP headers made from the
//!   real addresses; `smt dump` decrypts it with the endpoint's key log.
//! - [`Trace`]: JSON lines, one per event of the protocol core (packets
//!   sent and received, drops, records sealed and opened, RPCs started,
//!   failed, freed, handshakes, key epochs), for `smt dump --trace`; each
//!   line is a [`trace::Line`], the schema `smt dump` reads too.
//!
//! Both are off by default ([`Observe::default`]); off, they cost the
//! data path one branch. On, the data path copies what it saw into a
//! queue bounded in bytes and a writer thread writes the file: a writer
//! that falls behind drops what does not fit and counts it, and never
//! makes the endpoint wait.

pub use smt_observe::trace;
pub use smt_observe::{
    Capture, CaptureSummary, Trace, TraceSummary, CAPTURE_BUFFER, TRACE_BUFFER,
    TRACE_FORMAT_VERSION,
};
pub(crate) use smt_observe::{CaptureTap, Framing};

/// What an endpoint records ([`crate::EndpointConfig::observe`]).
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct Observe {
    /// Capture every datagram into this pcapng file.
    pub capture: Option<Capture>,
    /// Write the core's events into this JSON-lines trace.
    pub trace: Option<Trace>,
}

impl Observe {
    /// Nothing recorded.
    pub fn new() -> Self {
        Self::default()
    }

    /// Captures datagrams into `capture`.
    pub fn capture(mut self, capture: Capture) -> Self {
        self.capture = Some(capture);
        self
    }

    /// Writes the event trace into `trace`.
    pub fn trace(mut self, trace: Trace) -> Self {
        self.trace = Some(trace);
        self
    }
}
