//! Publishing and looking up SMT 0-RTT tickets through DNS.
//!
//! A server publishes its SMT ticket (an opaque byte string, typically 600–1500 bytes) as a
//! TXT record; a client fetches it before its first message, so it can send 0-RTT data to a
//! server it has never talked to (the "internal DNS resolver" of the SMT design). This crate
//! has three parts:
//!
//! - the record format: [`ticket_txt_strings`], [`ticket_from_txt`], [`ticket_domain`];
//! - [`TicketDnsServer`], an embedded authoritative server (UDP and TCP) for tests and small
//!   deployments, whose tickets are replaced at run time with [`TicketDnsServer::publish`];
//! - [`lookup_ticket`] / [`lookup_ticket_async`], a client that asks one given DNS server.
//!
//! # Record name
//!
//! The ticket of `<host>` lives at **`_smt-ticket.<host>.`**, one underscored leaf label as in
//! `_mta-sts.<host>` or `_dmarc.<host>` (RFC 8552 attribute leaves). Not
//! `_smt-ticket._udp.<host>.`: a `_proto` label belongs to SRV-style service-and-transport
//! pairs, while a ticket belongs to the server's name, whatever carries SMT (UDP in this
//! implementation, a raw IP protocol in the SMT paper), so a transport label would be wrong for
//! one of them and add nothing for the other. One label also leaves the most room for long
//! host names.
//!
//! # Record layout
//!
//! One TXT record; its character-strings, concatenated, are the text
//! `v=smt1;` + base64(ticket), with base64 as in RFC 4648 §4 (standard alphabet, `=` padding,
//! canonical). A character-string holds at most 255 bytes, so the text is cut into 255-byte
//! strings: the first starts with the version tag. A 1400-byte ticket becomes 1875 bytes of
//! text in eight strings, which `dig` shows as one line:
//!
//! ```text
//! $ dig @127.0.0.1 -p 38201 TXT _smt-ticket.server.smt.test +short
//! "v=smt1;w73lnNf...6DN30I" "vfJ9AU6ejK9ruw...aBdkr3" "cL/CBlH+F+iIF4...d1ESl3"
//!   "43dh4zIjLKyp1g...KJ9QuZ" "C9n5/x6qAdReYp...BKTNM/" "TWOCGHQHeiybLr...FmVuMD"
//!   "65PmugalRw6sDI...aEmEGY" "ba+8vI/MM4muD1...r4l8Y="
//! ```
//!
//! (one line in reality, shortened here: seven strings of 255 bytes and one of 90; the first
//! holds the tag and 248 base64 symbols). Without `+short`, dig first reports
//! `;; Truncated, retrying in TCP mode.` and shows a 1978-byte answer with the `aa` flag and
//! TTL [`TICKET_TTL_SECS`]; an unknown host gets NXDOMAIN with the zone's SOA.
//!
//! Decoding concatenates the strings (so any split a publisher chose is fine), then insists
//! on the exact tag `v=smt1;` and on canonical base64 of at most [`MAX_TICKET_LEN`] bytes;
//! anything else is a [`DnsError::Malformed`] with a named reason, never a panic. At a name
//! with several TXT records, records that do not start with `v=smt` are ignored, and more
//! than one ticket record is rejected as ambiguous.
//!
//! A ticket above roughly 300 bytes does not fit a 512-byte UDP answer, nor one above
//! roughly 800 bytes the usual 1232-byte EDNS payload: the server then truncates and the
//! client retries over TCP on the same port. Both sides of this crate do that; so do `dig`
//! and other resolvers.
//!
//! # Example
//!
//! ```
//! use smt_dns::{lookup_ticket, TicketDnsServer};
//!
//! let server = TicketDnsServer::spawn("127.0.0.1:0".parse().unwrap(), "smt.test").unwrap();
//! server.publish("server.smt.test", &[7; 1400]).unwrap();
//! let ticket = lookup_ticket(server.local_addr(), "server.smt.test").unwrap();
//! assert_eq!(ticket, [7; 1400]);
//! ```
#![warn(missing_docs, unreachable_pub)]

mod error;
mod lookup;
mod record;
mod server;
mod strict_base64;

pub use error::{DnsError, MalformedRecord};
pub use lookup::{lookup_ticket, lookup_ticket_async, LookupOptions};
pub use record::{
    ticket_domain, ticket_from_txt, ticket_txt_strings, MAX_TICKET_LEN, MAX_TXT_STRING_LEN,
    TICKET_LABEL, VERSION_TAG,
};
pub use server::{TicketDnsServer, NEGATIVE_TTL_SECS, TICKET_TTL_SECS};
