//! How a requester waits for its pages (as Yoon & Moon, CoNEXT 2025,
//! § 5.2, compare them).
//!
//! - **Busy-wait** (DiLOS): issue the fetch, then poll its completion
//!   without sleeping until the page is there; the endpoint polls its
//!   socket (`busy_poll`) and the engine's completion queue is polled in
//!   the same loop. No other request is served meanwhile (between polls
//!   the core is offered to other threads, which on a shared machine
//!   include the memory node's; see `docs/remote-memory.md` § 5).
//! - **Yield** (Adios): issue the fetch and go on with other work (other
//!   faults, other requests); completions are picked up between pieces of
//!   that work, and when there is none the requester sleeps on its file
//!   descriptors instead of spinning.
//!
//! Both drive the same [`Pipeline`](crate::Pipeline); only the waiting
//! differs.

use std::fmt;
use std::str::FromStr;

/// A requester's way of waiting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Requester {
    /// Spin on the socket and the completion queue until the page is
    /// there (DiLOS's way).
    BusyWait,
    /// Do other work meanwhile; sleep on file descriptors when there is
    /// none (Adios's way).
    Yield,
}

impl Requester {
    /// Every way, in the order the experiment reports them.
    pub const ALL: [Requester; 2] = [Requester::BusyWait, Requester::Yield];

    /// Whether its endpoint spins on the socket.
    pub fn busy_poll(self) -> bool {
        self == Requester::BusyWait
    }

    /// The name on command lines and in reports (`busy-wait`, `yield`).
    pub fn name(self) -> &'static str {
        match self {
            Requester::BusyWait => "busy-wait",
            Requester::Yield => "yield",
        }
    }
}

impl fmt::Display for Requester {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Requester {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "busy" | "busy-wait" | "dilos" => Ok(Requester::BusyWait),
            "yield" | "adios" => Ok(Requester::Yield),
            _ => Err(format!("unknown requester {s:?}: busy-wait or yield")),
        }
    }
}
