//! The descriptor behind [`crate::Endpoint::ready_fd`]: readable while
//! requests wait for the application.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};

/// A readiness signal the application can poll (epoll, poll, select):
/// readable while requests wait in the queue.
pub(crate) struct Ready {
    pub read: UnixStream,
    write: UnixStream,
    /// Someone asked for the descriptor.
    in_use: AtomicBool,
}

impl Ready {
    pub(crate) fn new() -> std::io::Result<Self> {
        let (read, write) = UnixStream::pair()?;
        read.set_nonblocking(true)?;
        write.set_nonblocking(true)?;
        Ok(Self {
            read,
            write,
            in_use: AtomicBool::new(false),
        })
    }

    /// Turns the signal on (the first `ready_fd` call): until then nobody
    /// watches it, and the two system calls per request are skipped.
    pub(crate) fn enable(&self, queued: usize) {
        if !self.in_use.swap(true, Ordering::AcqRel) {
            for _ in 0..queued.max(1) {
                self.signal();
            }
        }
    }

    /// One byte per queued request; a full pipe is still readable, so a
    /// dropped byte loses no wake-up.
    pub(crate) fn notify(&self) {
        if self.in_use.load(Ordering::Acquire) {
            self.signal();
        }
    }

    /// Whether an application watches the signal (then requests must be
    /// received even while no thread waits in `accept`).
    pub(crate) fn in_use(&self) -> bool {
        self.in_use.load(Ordering::Acquire)
    }

    /// Wakes anyone polling the descriptor, so they notice the close.
    pub(crate) fn mark_closed(&self) {
        self.signal();
    }

    fn signal(&self) {
        let _ = (&self.write).write(&[1]);
    }

    pub(crate) fn consume(&self) {
        if self.in_use.load(Ordering::Acquire) {
            let _ = (&self.read).read(&mut [0u8; 1]);
        }
    }

    pub(crate) fn drain(&self) {
        let mut buf = [0u8; 64];
        while matches!((&self.read).read(&mut buf), Ok(n) if n > 0) {}
    }
}
