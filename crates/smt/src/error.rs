//! Errors of the SMT API, sorted by who can fix them.

use std::fmt;
use std::io;
use std::time::Duration;

pub use smt_proto::{HandshakeError, RpcError, SendError};
pub use smt_udp::SocketError;

/// Everything an SMT call can fail with.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The socket could not be opened (permissions, address in use…).
    Socket(SocketError),
    /// An I/O error from the operating system.
    Io(io::Error),
    /// The request could not be sent as asked (no session, too large…);
    /// the message says what to change.
    Send(SendError),
    /// The RPC was sent but did not complete (timeout, peer lost it…).
    Rpc(RpcError),
    /// No session could be established with the peer (bad certificate,
    /// wrong name, timeout…).
    Handshake(HandshakeError),
    /// The endpoint has been closed.
    Closed,
    /// The call's own deadline passed before its response was complete
    /// ([`crate::CallOptions::timeout`],
    /// [`crate::EndpointConfig::call_timeout`]). The RPC was aborted at
    /// both ends; the server may have executed the request.
    Timeout {
        /// The timeout the call had.
        after: Duration,
    },
    /// A [`crate::LocalEndpoint`] already has
    /// [`crate::EndpointConfig::max_outstanding_calls`] calls outstanding
    /// (the caller's to fix: poll until some end, or raise the limit).
    TooManyCalls {
        /// The configured limit.
        max: usize,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Socket(e) => write!(f, "{e}"),
            Self::Io(e) => write!(f, "I/O error: {e}"),
            Self::Send(e) => write!(f, "cannot send: {e}"),
            Self::Rpc(e) => write!(f, "RPC failed: {e}"),
            Self::Handshake(e) => write!(f, "{e}"),
            Self::Closed => f.write_str("the SMT endpoint is closed"),
            Self::Timeout { after } => write!(
                f,
                "no response within the call's timeout of {after:?}: the call was abandoned \
                 and the server told so (the request may have run; give the call more time \
                 with CallOptions::timeout or EndpointConfig::call_timeout if the server is \
                 just slow)"
            ),
            Self::TooManyCalls { max } => write!(
                f,
                "{max} calls are already outstanding: poll the endpoint until some end, or \
                 raise EndpointConfig::max_outstanding_calls"
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Socket(e) => Some(e),
            Self::Io(e) => Some(e),
            Self::Send(e) => Some(e),
            Self::Rpc(e) => Some(e),
            Self::Handshake(e) => Some(e),
            Self::Closed | Self::Timeout { .. } | Self::TooManyCalls { .. } => None,
        }
    }
}

impl From<SocketError> for Error {
    fn from(e: SocketError) -> Self {
        Self::Socket(e)
    }
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        Self::Io(e)
    }
}

impl From<SendError> for Error {
    fn from(e: SendError) -> Self {
        Self::Send(e)
    }
}

impl From<RpcError> for Error {
    fn from(e: RpcError) -> Self {
        Self::Rpc(e)
    }
}
