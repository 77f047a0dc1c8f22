//! The engine's socket and deadline on a tokio runtime's reactor, for an
//! async caller that leads (feature `tokio`).
//!
//! Why: an async caller that waits for its reply on a channel needs some
//! other thread to receive for it, so every batch of replies crossed two
//! threads (the driver's, then the runtime's). A leading task instead
//! sleeps where quinn's endpoint driver does, on the runtime's reactor:
//! the socket registered once with [`AsyncFd`], the engine's deadline on
//! one [`tokio::time::Sleep`] re-armed only when the deadline moves.
#![allow(unsafe_code)]

use std::future::Future as _;
use std::os::fd::OwnedFd;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::runtime::{Handle, Id};
use tokio::time::Sleep;

/// What woke the leading task.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Woke {
    pub readable: bool,
    pub writable: bool,
    /// The socket reported an error (ICMP reports in its error queue).
    pub failed: bool,
    /// The engine's deadline passed.
    pub due: bool,
}

impl Woke {
    fn any(&self) -> bool {
        self.readable || self.writable || self.due
    }
}

/// The socket registered with one runtime's reactor, and the deadline's
/// timer on the same runtime.
pub(super) struct Reactor {
    runtime: Id,
    fd: AsyncFd<Arc<OwnedFd>>,
    timer: Pin<Box<Sleep>>,
    /// The deadline the timer is set to (`None`: not armed).
    armed: Option<Instant>,
}

impl Reactor {
    /// Registers `socket` with the current runtime's reactor. `None`
    /// outside a tokio runtime, or in one without IO or timers enabled
    /// (tokio panics there; the panic is caught and the endpoint falls
    /// back to its background thread for this runtime).
    pub(super) fn for_current_runtime(socket: Arc<OwnedFd>) -> Option<Self> {
        let handle = Handle::try_current().ok()?;
        let runtime = handle.id();
        let _entered = handle.enter();
        let built = std::panic::catch_unwind(move || {
            let interest = Interest::READABLE | Interest::WRITABLE;
            // SAFETY: the `AsyncFd` owns a reference to the `OwnedFd`, so
            // the descriptor stays open, and names the same socket, for as
            // long as the registration lives.
            let fd = unsafe { AsyncFd::register_with_interest(socket, interest) }
                .map_err(std::io::Error::from);
            let timer = Box::pin(tokio::time::sleep_until(tokio::time::Instant::now()));
            (fd, timer)
        });
        match built {
            Ok((Ok(fd), timer)) => Some(Self {
                runtime,
                fd,
                timer,
                armed: None,
            }),
            Ok((Err(e), _)) => {
                tracing::debug!("socket not registered with the tokio reactor: {e}");
                None
            }
            Err(_) => {
                tracing::warn!(
                    "tokio runtime without IO or timers: async callers wait for the background thread"
                );
                None
            }
        }
    }

    /// Whether the current task runs on this reactor's runtime.
    pub(super) fn is_current(&self) -> bool {
        Handle::try_current().is_ok_and(|h| h.id() == self.runtime)
    }

    /// Polls the socket (readable; writable too with `writable`) and the
    /// timer for `deadline`. Readiness is cleared before the caller
    /// receives, so a datagram arriving after that raises it again.
    /// `Pending` registers the task's waker with all of them; an error
    /// means the runtime's reactor is gone.
    pub(super) fn poll(
        &mut self,
        cx: &mut Context<'_>,
        deadline: Option<Instant>,
        writable: bool,
    ) -> Poll<std::io::Result<Woke>> {
        let mut woke = Woke::default();
        if let Poll::Ready(guard) = self.fd.poll_read_ready(cx) {
            let mut guard = guard?;
            woke.readable = true;
            woke.failed = guard.ready().is_error();
            guard.clear_ready();
        }
        if writable {
            if let Poll::Ready(guard) = self.fd.poll_write_ready(cx) {
                guard?.clear_ready();
                woke.writable = true;
            }
        }
        woke.due = self.poll_timer(cx, deadline);
        if woke.any() {
            Poll::Ready(Ok(woke))
        } else {
            Poll::Pending
        }
    }

    /// Re-arms the timer only when the deadline moved, then polls it.
    fn poll_timer(&mut self, cx: &mut Context<'_>, deadline: Option<Instant>) -> bool {
        let Some(deadline) = deadline else {
            self.armed = None;
            return false;
        };
        if self.armed != Some(deadline) {
            self.armed = Some(deadline);
            self.timer
                .as_mut()
                .reset(tokio::time::Instant::from_std(deadline));
        }
        if self.timer.as_mut().poll(cx).is_ready() {
            // Fired: armed again only for a new deadline.
            self.armed = None;
            return true;
        }
        false
    }
}
