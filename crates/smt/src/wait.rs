//! Sleeping until the socket (or a wake-up) is ready: the one place in
//! this crate that calls libc directly.
//!
//! Why `ppoll` and not `mio::Poll`: a thread that drives the engine waits
//! on the socket *without* holding the engine's lock, and several threads
//! may take turns doing so. Level-triggered `ppoll` on a duplicate of the
//! socket's descriptor needs no registration, keeps no state between
//! waits and cannot miss an edge another thread consumed. Its timeout is a
//! `timespec`, so protocol deadlines are not rounded to milliseconds.
#![allow(unsafe_code)]

use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::time::Duration;

/// What a wait reported.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Readiness {
    pub readable: bool,
    pub writable: bool,
    /// The wake-up descriptor fired (see [`WakePipe`]).
    pub woken: bool,
    /// The socket polled as failed: its error queue holds ICMP reports
    /// (also reported as readable).
    pub failed: bool,
}

/// Waits until `socket` is readable (or writable, with `want_write`),
/// `wake` is readable, or `timeout` passes (`None`: no limit). An
/// interrupted wait reports nothing ready.
pub(crate) fn wait(
    socket: BorrowedFd<'_>,
    want_write: bool,
    wake: Option<BorrowedFd<'_>>,
    timeout: Option<Duration>,
) -> io::Result<Readiness> {
    let socket_events = libc::POLLIN | if want_write { libc::POLLOUT } else { 0 };
    let mut fds = [
        pollfd(socket.as_raw_fd(), socket_events),
        pollfd(wake.map_or(-1, |w| w.as_raw_fd()), libc::POLLIN),
    ];
    match ppoll(&mut fds, timeout) {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(Readiness::default()),
        Err(e) => return Err(e),
    }
    // Errors and hang-ups count as readable: the receive that follows
    // reports (and clears) them.
    let failed = libc::POLLERR | libc::POLLHUP;
    Ok(Readiness {
        readable: fds[0].revents & (libc::POLLIN | failed) != 0,
        writable: fds[0].revents & libc::POLLOUT != 0,
        woken: fds[1].revents & libc::POLLIN != 0,
        failed: fds[0].revents & libc::POLLERR != 0,
    })
}

/// A negative descriptor is ignored by `ppoll` (how an absent wake-up
/// descriptor is passed).
fn pollfd(fd: libc::c_int, events: libc::c_short) -> libc::pollfd {
    libc::pollfd {
        fd,
        events,
        revents: 0,
    }
}

fn ppoll(fds: &mut [libc::pollfd], timeout: Option<Duration>) -> io::Result<usize> {
    let spec = timeout.map(|t| libc::timespec {
        tv_sec: libc::time_t::try_from(t.as_secs()).unwrap_or(libc::time_t::MAX),
        // Below one billion: fits every platform's `c_long`.
        tv_nsec: t.subsec_nanos() as libc::c_long,
    });
    let spec_ptr = spec.as_ref().map_or(std::ptr::null(), std::ptr::from_ref);
    // SAFETY: `fds` is a live, exclusively borrowed array of exactly
    // `fds.len()` pollfd structs for the whole call (ppoll writes only their
    // `revents`); its descriptors are borrowed from open files by `wait`'s
    // caller or negative (ignored); `spec_ptr` is null (no timeout) or points
    // to `spec`, which outlives the call; a null signal mask leaves the mask
    // unchanged.
    let n = unsafe {
        libc::ppoll(
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            spec_ptr,
            std::ptr::null(),
        )
    };
    usize::try_from(n).map_err(|_| io::Error::last_os_error())
}

/// Wakes a thread sleeping in [`wait`]: a socket pair whose read end is
/// readable while a wake-up is pending. At most one byte is in flight:
/// `wake` writes only when the pipe was drained since.
#[derive(Debug)]
pub(crate) struct WakePipe {
    read: UnixStream,
    write: UnixStream,
}

impl WakePipe {
    pub fn new() -> io::Result<Self> {
        let (read, write) = UnixStream::pair()?;
        read.set_nonblocking(true)?;
        write.set_nonblocking(true)?;
        Ok(Self { read, write })
    }

    /// The descriptor to pass to [`wait`].
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.read.as_fd()
    }

    /// Makes the read end readable. A full pipe is readable already, so a
    /// refused write loses nothing.
    pub fn wake(&self) {
        let _ = (&self.write).write(&[1]);
    }

    /// Consumes pending wake-ups.
    pub fn drain(&self) {
        let mut buf = [0u8; 16];
        while matches!((&self.read).read(&mut buf), Ok(n) if n > 0) {}
    }
}
