//! Without the `observe` feature: no pcapng writer, no trace, no serde.
//! These uninhabited types stand where the driver keeps an optional
//! capture or trace, so its code is written once; no value of them can
//! exist, and every method is unreachable by construction.

use std::net::SocketAddr;
use std::time::Instant;

use smt_proto::trace::TraceEvent;

/// Cannot be built without the `observe` feature.
#[derive(Clone, Debug)]
pub(crate) enum Capture {}

/// Cannot be built without the `observe` feature.
#[derive(Clone, Debug)]
pub(crate) enum Trace {}

impl Trace {
    pub(crate) fn record(&self, _local: SocketAddr, _events: Vec<TraceEvent>) {
        match *self {}
    }
}

/// Always empty without the `observe` feature.
#[derive(Clone, Debug, Default)]
pub(crate) struct Observe {
    pub capture: Option<Capture>,
    pub trace: Option<Trace>,
}

/// What goes over the wire under the SMT packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Framing {
    Udp,
    Ip(u8),
}

// The fields mirror the real tap, which the engine builds; nothing reads
// them here.
#[allow(dead_code)]
#[derive(Clone, Debug)]
pub(crate) struct CaptureTap {
    pub capture: Capture,
    pub local: SocketAddr,
    pub framing: Framing,
}

impl CaptureTap {
    pub(crate) fn sent(&self, _at: Instant, _to: SocketAddr, _datagrams: &[u8], _segment: usize) {
        match self.capture {}
    }

    pub(crate) fn received(&self, _at: Instant, _from: SocketAddr, _datagram: &[u8]) {
        match self.capture {}
    }
}
