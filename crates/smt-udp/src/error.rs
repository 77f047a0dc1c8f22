//! Why a socket could not be opened, worded so the fix is obvious.

use std::{error, fmt, io, net::SocketAddr};

use crate::Mode;

/// [`Socket::bind`](crate::Socket::bind) failed. All of these are the environment's doing (a
/// missing privilege, a taken address) or an unusual kernel error; none is the peer's.
#[derive(Debug)]
#[non_exhaustive]
pub enum SocketError {
    /// The process lacks a privilege: `CAP_NET_RAW` for raw IP, or `CAP_NET_BIND_SERVICE` for a
    /// UDP port below 1024.
    PermissionDenied {
        /// The mode that was asked for.
        mode: Mode,
        /// The kernel's `EPERM`/`EACCES`.
        source: io::Error,
    },
    /// Another socket is already bound to this address and port.
    AddrInUse(SocketAddr, io::Error),
    /// Any other failure to create, configure or bind the socket.
    Io(io::Error),
}

impl SocketError {
    /// Sorts a failure of `socket(2)` or `bind(2)` for `addr` in `mode`.
    pub(crate) fn classify(error: io::Error, mode: Mode, addr: SocketAddr) -> Self {
        match error.kind() {
            io::ErrorKind::PermissionDenied => Self::PermissionDenied {
                mode,
                source: error,
            },
            io::ErrorKind::AddrInUse => Self::AddrInUse(addr, error),
            _ => Self::Io(error),
        }
    }
}

impl fmt::Display for SocketError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::PermissionDenied {
                mode: mode @ Mode::RawIp { .. },
                source,
            } => write!(
                f,
                "cannot open a {mode} socket ({source}): raw IP needs CAP_NET_RAW \
                 (run as root or `setcap cap_net_raw+ep <binary>`), or use UDP mode"
            ),
            Self::PermissionDenied {
                mode: Mode::Udp,
                source,
            } => write!(
                f,
                "cannot bind the UDP socket ({source}): ports below 1024 need \
                 CAP_NET_BIND_SERVICE (run as root or `setcap cap_net_bind_service+ep <binary>`), \
                 or use a port of 1024 or above"
            ),
            Self::AddrInUse(addr, _) => write!(
                f,
                "address {addr} is already in use by another socket: stop the other process, \
                 pick another port, or use port 0 to let the system choose"
            ),
            Self::Io(e) => write!(f, "cannot set up the socket: {e}"),
        }
    }
}

impl error::Error for SocketError {
    fn source(&self) -> Option<&(dyn error::Error + 'static)> {
        match self {
            Self::PermissionDenied { source, .. } => Some(source),
            Self::AddrInUse(_, source) | Self::Io(source) => Some(source),
        }
    }
}

impl From<io::Error> for SocketError {
    fn from(error: io::Error) -> Self {
        Self::Io(error)
    }
}
