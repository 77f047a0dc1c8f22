//! Why `smt` stopped, sorted by who can fix it; each a one-line message
//! that says what to change.

use std::fmt;
use std::io;

/// Everything a command can fail with.
#[derive(Debug)]
pub enum CliError {
    /// The command line asks for something impossible or contradictory;
    /// the message names the option and what to change.
    Usage(String),
    /// A file named on the command line cannot be used: missing, a
    /// directory, too large, not what it should hold, or an output that
    /// exists already.
    File(String),
    /// The peer failed or refused: no session could be established, or
    /// calls failed.
    Peer(String),
    /// This machine failed: a socket, a thread, the operating system.
    Environment(String),
}

impl CliError {
    /// The process's exit status: 2 for usage errors (as clap's own), 1
    /// for the rest.
    pub fn exit_code(&self) -> i32 {
        match self {
            Self::Usage(_) => 2,
            Self::File(_) | Self::Peer(_) | Self::Environment(_) => 1,
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Usage(m) | Self::File(m) | Self::Peer(m) | Self::Environment(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for CliError {}

/// The library's errors by blame. A rejected configuration is the
/// command line's; so is its `Io` with `InvalidInput` (a malformed
/// address to resolve), printed here without its "I/O error:" prefix.
impl From<smt::Error> for CliError {
    fn from(e: smt::Error) -> Self {
        match e {
            smt::Error::Config(e) => Self::Usage(e.to_string()),
            smt::Error::Io(e) if e.kind() == io::ErrorKind::InvalidInput => {
                Self::Usage(e.to_string())
            }
            smt::Error::Io(e) => Self::Environment(e.to_string()),
            smt::Error::Socket(e) => Self::Environment(e.to_string()),
            smt::Error::Send(e) => Self::Usage(format!("cannot send: {e}")),
            e @ (smt::Error::Rpc(_) | smt::Error::Handshake(_)) => Self::Peer(e.to_string()),
            e => Self::Environment(e.to_string()),
        }
    }
}

/// The system's errors, for commands that use `std` directly.
impl From<io::Error> for CliError {
    fn from(e: io::Error) -> Self {
        Self::Environment(e.to_string())
    }
}
