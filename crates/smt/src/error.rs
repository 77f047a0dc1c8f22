//! Errors of the SMT API, sorted by who can fix them.

use std::fmt;
use std::io;

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
            Self::Closed => None,
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
