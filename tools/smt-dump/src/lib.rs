//! `smt dump`: SMT captures made readable.
//!
//! Reads a pcap or pcapng file (tcpdump or Wireshark; UDP or SMT's own IP
//! protocol; IPv4 or IPv6; Ethernet, Linux cooked, loopback or raw-IP link
//! types), splits every datagram into its SMT packets and decodes each
//! header with `smt-proto`'s wire module. Given the endpoints' key log
//! (`SSLKEYLOGFILE` lines for TLS sessions, SMT's own labels for PSK and
//! 0-RTT sessions: [`keylog`]), it finds each session's keys, reassembles
//! messages as a receiver would and opens their records with
//! `smt-proto`'s record module and `smt-crypto`'s AES-GCM, reporting each
//! message's plaintext, and every record that fails to authenticate, is
//! replayed or is out of place. `docs/observability.md` shows it on a
//! capture.
//!
//! ```text
//! capture::read ─► link::decode ─► packet::split (wire::first_packet_len,
//!   frames          UDP / raw IP     Packet::new_checked, Repr::parse)
//!        ─► pass 1: HANDSHAKE streams name the sessions ─► key log ─► Keys
//!        ─► pass 2: tags verified, messages placed and opened ─► Report
//! ```
//!
//! With `--trace`, it reads the JSON-lines event traces endpoints write
//! (`smt::observe::Trace`) and prints one timeline per RPC ([`trace`]).
//!
//! Bad input never panics: an unreadable capture is a [`CaptureError`], a
//! malformed frame or packet is reported and skipped, and everything else
//! is a finding in the [`Report`].
#![warn(missing_docs, unreachable_pub)]

pub mod capture;
pub mod cli;
mod dump;
mod handshake;
pub mod keylog;
mod keys;
pub mod link;
mod message;
pub mod packet;
pub mod report;
pub mod trace;

pub use capture::CaptureError;
pub use dump::{dump, Options};
pub use keylog::KeyLog;
pub use message::RecordReport;
pub use report::{MessageReport, PacketReport, Problem, Report, SessionReport};
