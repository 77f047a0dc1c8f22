//! Status codes (gRPC's, with gRPC's numbers) and how SMT's errors map to
//! them.
//!
//! The mapping keeps one promise that retry policies rely on:
//! [`Code::Unavailable`] means *the request did not run* (refused
//! unexecuted, never delivered, nobody there), so retrying it is safe;
//! a failure after which the request may have run is [`Code::Unknown`]
//! (or [`Code::DeadlineExceeded`] for the caller's own deadline).

use std::fmt;

use bytes::Bytes;
use smt::{HandshakeError, RpcError, SendError};
use tower::BoxError;

use crate::Metadata;

/// What became of an RPC: gRPC's status codes, with its numbers on the
/// wire. An unknown number read from the wire is [`Code::Unknown`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Code {
    /// Not an error.
    Ok = 0,
    /// The caller cancelled (or its endpoint closed).
    Cancelled = 1,
    /// Something failed and the request may have run.
    Unknown = 2,
    /// The caller's request is malformed (and would be anywhere).
    InvalidArgument = 3,
    /// The deadline passed before the RPC completed.
    DeadlineExceeded = 4,
    /// Something the request names does not exist.
    NotFound = 5,
    /// Something the request would create exists already.
    AlreadyExists = 6,
    /// The caller may not do this.
    PermissionDenied = 7,
    /// A resource ran out (a quota, the message size limit).
    ResourceExhausted = 8,
    /// The system is not in a state in which the request can run.
    FailedPrecondition = 9,
    /// The operation was aborted (a concurrency conflict).
    Aborted = 10,
    /// Past the valid range.
    OutOfRange = 11,
    /// The server has no such method.
    Unimplemented = 12,
    /// A bug: an invariant broke.
    Internal = 13,
    /// The request did not run (refused, overloaded, nobody there, the
    /// server shutting down): safe to retry, preferably with back-off.
    Unavailable = 14,
    /// Data was lost or corrupted.
    DataLoss = 15,
    /// The caller did not prove who it is.
    Unauthenticated = 16,
}

impl Code {
    /// The code with gRPC's number `n` ([`Code::Unknown`] for others).
    pub fn from_u32(n: u32) -> Self {
        const ALL: [Code; 17] = [
            Code::Ok,
            Code::Cancelled,
            Code::Unknown,
            Code::InvalidArgument,
            Code::DeadlineExceeded,
            Code::NotFound,
            Code::AlreadyExists,
            Code::PermissionDenied,
            Code::ResourceExhausted,
            Code::FailedPrecondition,
            Code::Aborted,
            Code::OutOfRange,
            Code::Unimplemented,
            Code::Internal,
            Code::Unavailable,
            Code::DataLoss,
            Code::Unauthenticated,
        ];
        ALL.get(n as usize).copied().unwrap_or(Code::Unknown)
    }

    /// gRPC's number for the code.
    pub fn as_u32(self) -> u32 {
        self as u32
    }
}

/// An RPC's failure: a [`Code`], a message for people, optional
/// `details` for programs (any encoding: a serialized message, say) and
/// metadata (trailers). What a handler returns as its error, and what a
/// client's call fails with.
#[derive(Clone, PartialEq, Eq)]
pub struct Status {
    code: Code,
    message: String,
    details: Bytes,
    metadata: Metadata,
}

impl Status {
    /// A status with `code` and `message`.
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            details: Bytes::new(),
            metadata: Metadata::new(),
        }
    }

    /// [`Code::InvalidArgument`].
    pub fn invalid_argument(message: impl Into<String>) -> Self {
        Self::new(Code::InvalidArgument, message)
    }

    /// [`Code::NotFound`].
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(Code::NotFound, message)
    }

    /// [`Code::PermissionDenied`].
    pub fn permission_denied(message: impl Into<String>) -> Self {
        Self::new(Code::PermissionDenied, message)
    }

    /// [`Code::Unauthenticated`].
    pub fn unauthenticated(message: impl Into<String>) -> Self {
        Self::new(Code::Unauthenticated, message)
    }

    /// [`Code::Unavailable`]: the request did not run.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(Code::Unavailable, message)
    }

    /// [`Code::Internal`].
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(Code::Internal, message)
    }

    /// [`Code::Unimplemented`].
    pub fn unimplemented(message: impl Into<String>) -> Self {
        Self::new(Code::Unimplemented, message)
    }

    /// [`Code::DeadlineExceeded`].
    pub fn deadline_exceeded(message: impl Into<String>) -> Self {
        Self::new(Code::DeadlineExceeded, message)
    }

    /// [`Code::Cancelled`].
    pub fn cancelled(message: impl Into<String>) -> Self {
        Self::new(Code::Cancelled, message)
    }

    /// Adds details for programs (e.g. an encoded error message).
    pub fn with_details(mut self, details: impl Into<Bytes>) -> Self {
        self.details = details.into();
        self
    }

    /// Adds metadata (trailers).
    pub fn with_metadata(mut self, metadata: Metadata) -> Self {
        self.metadata = metadata;
        self
    }

    /// The status code.
    pub fn code(&self) -> Code {
        self.code
    }

    /// The message for people.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Details for programs (empty if none).
    pub fn details(&self) -> &Bytes {
        &self.details
    }

    /// The metadata (trailers).
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// Whether the request certainly did not run, so that sending it again
    /// cannot execute it twice ([`Code::Unavailable`]).
    pub fn did_not_run(&self) -> bool {
        self.code == Code::Unavailable
    }

    /// A status for any error a tower stack returns: a [`Status`] as it
    /// is; tower's timeout as [`Code::DeadlineExceeded`]; load shedding
    /// and a balancer without endpoints as [`Code::Unavailable`] (nothing
    /// was sent); an SMT error by [`From<smt::Error>`]; anything else as
    /// [`Code::Unknown`].
    pub fn from_error(error: BoxError) -> Self {
        let error = match error.downcast::<Status>() {
            Ok(status) => return *status,
            Err(e) => e,
        };
        let error = match error.downcast::<smt::Error>() {
            Ok(e) => return Self::from(*e),
            Err(e) => e,
        };
        if error.is::<tower::timeout::error::Elapsed>() {
            return Self::deadline_exceeded("the call's timeout passed (tower timeout layer)");
        }
        if error.is::<tower::load_shed::error::Overloaded>() {
            return Self::unavailable("shed by a load-shed layer: the request did not run");
        }
        if error.is::<tower::balance::error::Discover>() {
            return Self::unavailable(format!("no server to call: {error}"));
        }
        Self::new(Code::Unknown, error.to_string())
    }
}

impl fmt::Debug for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Status");
        d.field("code", &self.code).field("message", &self.message);
        if !self.details.is_empty() {
            d.field("details", &self.details);
        }
        if !self.metadata.is_empty() {
            d.field("metadata", &self.metadata);
        }
        d.finish()
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.code, self.message)
    }
}

impl std::error::Error for Status {}

/// SMT's errors as statuses: [`Code::Unavailable`] only where the request
/// did not run.
impl From<smt::Error> for Status {
    fn from(error: smt::Error) -> Self {
        let code = match &error {
            smt::Error::Rpc(e) => rpc_code(e),
            smt::Error::Timeout { .. } => Code::DeadlineExceeded,
            smt::Error::Handshake(e) => handshake_code(e),
            smt::Error::Send(e) => send_code(e),
            smt::Error::TooManyCalls { .. } => Code::ResourceExhausted,
            smt::Error::Closed => Code::Cancelled,
            _ => Code::Internal,
        };
        Self::new(code, error.to_string())
    }
}

/// A sent RPC's failure: did the request run?
fn rpc_code(error: &RpcError) -> Code {
    match error {
        // Refused unexecuted; never delivered; nothing at the address.
        RpcError::Overloaded
        | RpcError::PeerLostRequest
        | RpcError::Unreachable
        | RpcError::IdSpaceExhausted => Code::Unavailable,
        RpcError::Aborted => Code::Cancelled,
        RpcError::PeerMisbehaved => Code::Internal,
        // Abandoned, a silent peer, a session that ended: it may have run.
        _ => Code::Unknown,
    }
}

/// No session: nothing was sent.
fn handshake_code(error: &HandshakeError) -> Code {
    match error {
        HandshakeError::BadCertificate(_)
        | HandshakeError::WrongName(_)
        | HandshakeError::BadTicket(_) => Code::Unauthenticated,
        HandshakeError::NotConfigured => Code::FailedPrecondition,
        _ => Code::Unavailable,
    }
}

fn send_code(error: &SendError) -> Code {
    match error {
        SendError::MessageTooLarge { .. } => Code::ResourceExhausted,
        _ => Code::FailedPrecondition,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_keep_grpcs_numbers_and_unknown_numbers_are_unknown() {
        for n in 0..17 {
            assert_eq!(Code::from_u32(n).as_u32(), n);
        }
        assert_eq!(Code::Unavailable.as_u32(), 14);
        assert_eq!(Code::from_u32(99), Code::Unknown);
    }

    #[test]
    fn only_requests_that_did_not_run_are_unavailable() {
        let of = |e: RpcError| Status::from(smt::Error::Rpc(e)).code();
        assert_eq!(of(RpcError::Overloaded), Code::Unavailable);
        assert_eq!(of(RpcError::Abandoned), Code::Unknown);
        assert_eq!(of(RpcError::Timeout), Code::Unknown);
        let timeout = smt::Error::Timeout {
            after: std::time::Duration::from_millis(5),
        };
        assert_eq!(Status::from(timeout).code(), Code::DeadlineExceeded);
    }

    #[test]
    fn tower_errors_map_by_type() {
        let elapsed: BoxError = tower::timeout::error::Elapsed::new().into();
        assert_eq!(Status::from_error(elapsed).code(), Code::DeadlineExceeded);
        let shed: BoxError = tower::load_shed::error::Overloaded::new().into();
        assert_eq!(Status::from_error(shed).code(), Code::Unavailable);
        let inner: BoxError = Status::not_found("k").into();
        assert_eq!(Status::from_error(inner), Status::not_found("k"));
    }
}
