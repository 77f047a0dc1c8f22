//! System calls a socket made, by kind: what batching and the one-datagram paths save, counted
//! so tests and benchmarks can see it without tracing the process.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Counts of a [`Socket`](crate::Socket)'s data system calls since it was bound
/// ([`Socket::calls`](crate::Socket::calls)). Failed calls count too (`WouldBlock` included);
/// a call retried after `EINTR` counts once.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Calls {
    /// `sendto` calls: one datagram each, with no control message (UDP or raw IP).
    pub sends: u64,
    /// `sendmsg` calls with a `UDP_SEGMENT` control message: several datagrams each (GSO).
    pub gso_sends: u64,
    /// Receive calls (`recvmmsg`, or `recvmsg` for [`Socket::recv_one`](crate::Socket::recv_one)
    /// and where the platform has no batch call).
    pub receives: u64,
    /// Receive calls that found nothing (`WouldBlock`).
    pub empty_receives: u64,
}

/// The live counters: relaxed atomics, since the socket's methods take `&self` and a sending
/// and a receiving thread may share it.
#[derive(Debug, Default)]
pub(crate) struct CallCounters {
    sends: AtomicU64,
    gso_sends: AtomicU64,
    receives: AtomicU64,
    empty_receives: AtomicU64,
}

impl CallCounters {
    pub(crate) fn send(&self, gso: bool) {
        match gso {
            false => self.sends.fetch_add(1, Relaxed),
            true => self.gso_sends.fetch_add(1, Relaxed),
        };
    }

    pub(crate) fn receive(&self, empty: bool) {
        self.receives.fetch_add(1, Relaxed);
        if empty {
            self.empty_receives.fetch_add(1, Relaxed);
        }
    }

    pub(crate) fn snapshot(&self) -> Calls {
        Calls {
            sends: self.sends.load(Relaxed),
            gso_sends: self.gso_sends.load(Relaxed),
            receives: self.receives.load(Relaxed),
            empty_receives: self.empty_receives.load(Relaxed),
        }
    }
}
