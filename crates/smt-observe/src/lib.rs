//! Recording what an SMT endpoint does, for debugging and for users
//! without tcpdump (`docs/observability.md`):
//!
//! - [`Capture`]: a pcapng file of every datagram an endpoint sends and
//!   receives, as it left or arrived at the socket (GSO batches as their
//!   datagrams, GRO batches split), with IP and UDP headers made from the
//!   real addresses; `smt dump`, Wireshark and tshark read it.
//! - [`Trace`]: JSON lines, one per event of the protocol core
//!   (`smt_proto::trace`: packets sent and received, drops, records
//!   sealed and opened, RPCs started, failed, freed, handshakes, key
//!   epochs). Every line is a [`trace::Line`]: the one schema the writer
//!   here serialises and `smt dump --trace` deserialises.
//!
//! The `smt` crate wires both into its endpoints (feature `observe`,
//! `EndpointConfig::set_observe`); this crate owns the file formats and
//! the writers. Each writer runs on its own thread behind a queue bounded
//! in bytes: the data path copies what it saw and goes on, and a writer
//! that falls behind drops what does not fit and counts it, never making
//! the endpoint wait.
#![warn(missing_docs, unreachable_pub)]

mod capture;
mod clock;
mod spool;
pub mod trace;

pub use capture::{Capture, CaptureSummary, CaptureTap, Framing, CAPTURE_BUFFER};
pub use trace::{Trace, TraceSummary, TRACE_BUFFER, TRACE_FORMAT_VERSION};
