//! Errors of the SMT API, sorted by who can fix them.

use std::fmt;
use std::io;
use std::time::Duration;

pub use smt_proto::{HandshakeError, RpcError, SendError};
pub use smt_udp::SocketError;

/// Everything an SMT call can fail with, sorted by who can fix it:
///
/// | blame | variants |
/// |---|---|
/// | the caller (the message says what to change) | [`Error::Config`], [`Error::Send`], [`Error::TooManyCalls`], [`Error::Closed`] |
/// | the peer, or the network between | [`Error::Handshake`], [`Error::Rpc`], [`Error::Timeout`] |
/// | this machine | [`Error::Socket`], [`Error::Io`] |
///
/// Malformed or forged packets are no error: the endpoint drops them and
/// counts them ([`crate::stats::Counters::drops`]).
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    // ---- the caller's ----
    /// A configuration that cannot work, refused before a socket is
    /// opened: which setting, what is wrong and what to do.
    Config(ConfigError),
    /// The request could not be sent as asked (no session, too large…);
    /// the message says what to change.
    Send(SendError),
    /// A [`crate::LocalEndpoint`] already has
    /// [`crate::EndpointConfig::max_outstanding_calls`] calls outstanding
    /// (the caller's to fix: poll until some end, or raise the limit).
    TooManyCalls {
        /// The configured limit.
        max: usize,
    },
    /// The endpoint has been closed.
    Closed,
    // ---- the peer's, or the network's ----
    /// No session could be established with the peer (bad certificate,
    /// wrong name, timeout…).
    Handshake(HandshakeError),
    /// The RPC was sent but did not complete (timeout, peer lost it…).
    Rpc(RpcError),
    /// The call's own deadline passed before its response was complete
    /// ([`crate::CallOptions::timeout`],
    /// [`crate::EndpointConfig::call_timeout`]). The RPC was aborted at
    /// both ends; the server may have executed the request.
    Timeout {
        /// The timeout the call had.
        after: Duration,
    },
    // ---- this machine's ----
    /// The socket could not be opened (permissions, address in use…).
    Socket(SocketError),
    /// An I/O error from the operating system.
    Io(io::Error),
}

/// A configuration value that cannot work ([`Error::Config`]): the
/// setting at fault, as its getter is named (`EndpointConfig::mtu`,
/// `ProtocolConfig::rpc_idle_timeout`…), and what is wrong with it and
/// what to do.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConfigError {
    setting: &'static str,
    problem: String,
}

impl ConfigError {
    pub(crate) fn new(setting: &'static str, problem: impl Into<String>) -> Self {
        Self {
            setting,
            problem: problem.into(),
        }
    }

    /// The setting at fault, e.g. `"EndpointConfig::max_outstanding_calls"`
    /// (`"ProtocolConfig"` when several protocol settings disagree).
    pub fn setting(&self) -> &'static str {
        self.setting
    }

    /// What is wrong with it and what to do, to follow the setting's name.
    pub fn problem(&self) -> &str {
        &self.problem
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid SMT configuration: {} {}",
            self.setting, self.problem
        )
    }
}

impl std::error::Error for ConfigError {}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Config(e) => write!(f, "{e}"),
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
            Self::Config(e) => Some(e),
            Self::Socket(e) => Some(e),
            Self::Io(e) => Some(e),
            Self::Send(e) => Some(e),
            Self::Rpc(e) => Some(e),
            Self::Handshake(e) => Some(e),
            Self::Closed | Self::Timeout { .. } | Self::TooManyCalls { .. } => None,
        }
    }
}

impl From<ConfigError> for Error {
    fn from(e: ConfigError) -> Self {
        Self::Config(e)
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
