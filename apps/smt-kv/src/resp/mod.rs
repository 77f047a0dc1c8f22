//! RESP2, the Redis protocol: requests in (multibulk or inline), replies
//! out, and a reply reader for clients.
//!
//! The request side reproduces what redis-server 7.0 accepts and rejects,
//! byte for byte, including its quirks (see [`request`]); the differential
//! test (`tests/integration/oracle.rs`) holds it to that.

pub mod inline;
pub mod reply;
pub mod request;
pub mod value;

pub use request::{Limits, ProtocolError, RequestParser, Step};
pub use value::Value;
