//! Sleeping until the socket (or a wake-up) is ready: the one place in
//! this crate that calls libc directly (with `refill.rs`).
//!
//! Why `ppoll` and not `mio::Poll`: a thread that drives the engine waits
//! on the socket *without* holding the engine's lock, and several threads
//! may take turns doing so. Level-triggered `ppoll` on a duplicate of the
//! socket's descriptor needs no registration, keeps no state between
//! waits and cannot miss an edge another thread consumed. Its timeout is a
//! `timespec`, so protocol deadlines are not rounded to milliseconds.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// What a wait reported.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Readiness {
    pub readable: bool,
    pub writable: bool,
    /// The wake-up descriptor fired (see [`WakeFd`]).
    pub woken: bool,
    /// The socket polled as failed: its error queue holds ICMP reports
    /// (also reported as readable).
    pub failed: bool,
    /// The alarm went off (see [`wait_or_alarm`]).
    pub alarm: bool,
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
    poll_three(Some(socket), want_write, [wake, None], timeout)
}

/// Waits as [`wait`] does, until the socket, `wake` or `alarm` (an
/// [`Alarm`]'s descriptor) is ready. The sleeper's deadline is the alarm,
/// armed across sleeps, instead of a timeout armed at each; `timeout` is
/// for a deadline due already (zero arms no timer) or an alarm that could
/// not be set.
pub(crate) fn wait_or_alarm(
    socket: BorrowedFd<'_>,
    want_write: bool,
    wake: Option<BorrowedFd<'_>>,
    alarm: Option<BorrowedFd<'_>>,
    timeout: Option<Duration>,
) -> io::Result<Readiness> {
    poll_three(Some(socket), want_write, [wake, alarm], timeout)
}

/// Waits until `wake` or `alarm` is readable (no socket: a sleeper fed
/// by another thread), or `timeout` passes.
pub(crate) fn wait_for_wake(
    wake: BorrowedFd<'_>,
    alarm: Option<BorrowedFd<'_>>,
    timeout: Option<Duration>,
) -> io::Result<Readiness> {
    poll_three(None, false, [Some(wake), alarm], timeout)
}

/// `ppoll` on the socket and up to two readable-only descriptors (a
/// wake-up, an alarm), readiness sorted out.
fn poll_three(
    socket: Option<BorrowedFd<'_>>,
    want_write: bool,
    [wake, alarm]: [Option<BorrowedFd<'_>>; 2],
    timeout: Option<Duration>,
) -> io::Result<Readiness> {
    let socket_events = libc::POLLIN | if want_write { libc::POLLOUT } else { 0 };
    let mut fds = [
        pollfd(socket.map_or(-1, |s| s.as_raw_fd()), socket_events),
        pollfd(wake.map_or(-1, |w| w.as_raw_fd()), libc::POLLIN),
        pollfd(alarm.map_or(-1, |a| a.as_raw_fd()), libc::POLLIN),
    ];
    // The last slot only when used: the kernel walks every entry.
    let used = if alarm.is_some() { 3 } else { 2 };
    match ppoll(&mut fds[..used], timeout) {
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
        alarm: fds[2].revents & libc::POLLIN != 0,
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

/// Wakes a thread sleeping in [`wait`]: an `eventfd`, readable while a
/// wake-up is pending. Why an eventfd and not a socket pair: a wake-up is
/// one `write` and taking it one `read`, where the pair needed a `send`
/// and two `recv`s (the second to see it empty); the threaded endpoint's
/// driver is woken up to once per batch of async calls, so the system
/// calls count per RPC.
#[derive(Debug)]
pub(crate) struct WakeFd {
    fd: OwnedFd,
}

impl WakeFd {
    pub(crate) fn new() -> io::Result<Self> {
        // SAFETY: eventfd takes no pointers; a non-negative result is a
        // fresh descriptor that nothing else owns.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just created above and is owned by no one else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Self { fd })
    }

    /// The descriptor to pass to [`wait`].
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Makes the descriptor readable. The counter cannot overflow in
    /// practice (it would take 2^64 wake-ups without a drain), and a
    /// refused write means it is readable already: nothing is lost.
    pub(crate) fn wake(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: writes 8 bytes from a live local array to a descriptor
        // this struct owns.
        let _ = unsafe { libc::write(self.fd.as_raw_fd(), one.as_ptr().cast(), one.len()) };
    }

    /// Consumes pending wake-ups (one read resets the counter).
    pub(crate) fn drain(&self) {
        let mut buf = [0u8; 8];
        // SAFETY: reads at most 8 bytes into a live local array from a
        // descriptor this struct owns; a non-blocking empty counter
        // fails with EAGAIN, which is fine.
        let _ = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    }
}

/// A monotonic timer as a descriptor (`timerfd`): readable once it
/// expires, until read or set again. Why a descriptor rather than
/// `ppoll`'s timeout: a timeout arms a kernel timer at every sleep and
/// cancels it at every wake-up. A protocol deadline (the next tick, about
/// a millisecond away) is usually the CPU's earliest timer, so each of
/// those reprograms the local APIC's deadline, and in a virtual machine
/// each reprogramming is a VM exit of several microseconds: four per round
/// trip for two endpoints sharing a CPU. A timer descriptor stays armed
/// across sleeps; it is set again only when the deadline moves earlier or
/// after it went off (see [`Alarm`]).
#[derive(Debug)]
pub(crate) struct TimerFd {
    fd: OwnedFd,
}

impl TimerFd {
    pub(crate) fn new() -> io::Result<Self> {
        // SAFETY: timerfd_create takes no pointers; a non-negative result
        // is a fresh descriptor that nothing else owns.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just created above and is owned by no one else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Self { fd })
    }

    /// Arms the timer to go off `after` from now (`None`: disarms it).
    /// Either way a pending expiry is cleared: the descriptor is not
    /// readable again until the new time.
    pub(crate) fn set(&self, after: Option<Duration>) -> io::Result<()> {
        // A zero `it_value` would disarm: a deadline due now goes off in
        // a nanosecond instead.
        let value = after.map_or(Duration::ZERO, |a| a.max(Duration::from_nanos(1)));
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: libc::time_t::try_from(value.as_secs()).unwrap_or(libc::time_t::MAX),
                // Below one billion: fits every platform's `c_long`.
                tv_nsec: value.subsec_nanos() as libc::c_long,
            },
        };
        // SAFETY: `spec` is a live local struct read by the call; a null
        // old-value pointer asks for nothing back; the descriptor is ours.
        let r =
            unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// The descriptor to pass to [`wait`].
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// The time a driver sleeps until besides the socket (the engine's next
/// deadline), kept in a timer descriptor that the sleep polls instead of
/// passed to each sleep as a timeout. A timeout arms a kernel timer per
/// sleep and cancels it per wake-up; the protocol's next deadline (its
/// tick, under a millisecond away) is usually the CPU's earliest timer, so
/// both reprogram the CPU's timer, a VM exit each in a virtual machine:
/// two `LocalEndpoint`s sharing a CPU paid four per round trip, about
/// 14 µs (`docs/benchmarks.md`). The alarm is set again only when it would
/// go off too late, or after it went off: about once per tick. Used by
/// `LocalEndpoint`, the threaded endpoint's driver (where it belongs to
/// the endpoint, whichever thread leads) and the worker shards.
#[derive(Debug)]
pub(crate) struct Alarm {
    timer: TimerFd,
    /// When it goes off; `None`: disarmed, or gone off.
    set_for: Option<Instant>,
    /// It went off and has not been set since: its descriptor stays
    /// readable until the next [`Alarm::by`] sets or disarms it.
    rang: bool,
    /// Times the timer was set (armed or disarmed): what this type saves,
    /// counted for tests and benchmarks.
    sets: u64,
    /// Times it went off ([`Alarm::went_off`]): the driver's timer
    /// wake-ups.
    rings: u64,
}

impl Alarm {
    pub(crate) fn new() -> io::Result<Self> {
        Ok(Self {
            timer: TimerFd::new()?,
            set_for: None,
            rang: false,
            sets: 0,
            rings: 0,
        })
    }

    /// Makes the alarm go off by `at` (`None`: nothing to wake up for).
    /// An alarm set earlier than needed stays: going off early costs one
    /// more turn of the driver, where setting it again at every sleep
    /// costs a timer reprogramming each. Called before every sleep on
    /// [`Alarm::fd`] (with the sleeper's deadline).
    pub(crate) fn by(&mut self, at: Option<Instant>, now: Instant) -> io::Result<()> {
        match (at, self.set_for) {
            (None, _) => self.quiet(),
            // Kept only while it is still to go off: one that went off
            // unwatched (see `for_sleep`) would end the sleep at once.
            (Some(at), Some(set)) if set <= at && set > now => Ok(()),
            (Some(at), _) => {
                self.sets += 1;
                // Setting it also clears an expiry not yet read.
                self.timer.set(Some(at.saturating_duration_since(now)))?;
                self.set_for = Some(at);
                self.rang = false;
                Ok(())
            }
        }
    }

    /// As [`Alarm::by`], for a sleeper that may leave the alarm out of its
    /// poll (`LocalEndpoint`, which polls only its own descriptors):
    /// returns whether the sleep must poll [`Alarm::fd`]. With nothing due,
    /// the timer is left as it is and not polled, where [`Alarm::by`]
    /// disarms one that went off (a system call per quiet sleep after an
    /// expiry, for a sleeper that must poll the descriptor whatever is
    /// due); an alarm still armed then may go off unwatched, and the next
    /// deadline sets it again.
    pub(crate) fn for_sleep(&mut self, at: Option<Instant>, now: Instant) -> io::Result<bool> {
        let Some(at) = at else {
            return Ok(false);
        };
        self.by(Some(at), now)?;
        Ok(true)
    }

    /// The alarm went off (its descriptor polled readable). Nothing is
    /// done to the timer now: the next [`Alarm::by`] sets it for the next
    /// deadline, which also clears the expiry, or disarms it if nothing
    /// is due. Disarming here and setting again there was two system
    /// calls per expiry where one does (each expiry, a tick or an ACK
    /// delay, is followed by a sleep with a new deadline).
    pub(crate) fn went_off(&mut self) {
        self.set_for = None;
        self.rang = true;
        self.rings += 1;
    }

    /// Disarms an alarm that went off and was not set since, so that a
    /// sleep with nothing due is not cut short by it.
    fn quiet(&mut self) -> io::Result<()> {
        if !std::mem::take(&mut self.rang) {
            return Ok(());
        }
        self.sets += 1;
        self.timer.set(None)
    }

    /// Times the timer was set since the alarm was made.
    pub(crate) fn sets(&self) -> u64 {
        self.sets
    }

    /// Times the alarm went off since it was made.
    pub(crate) fn rings(&self) -> u64 {
        self.rings
    }

    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.timer.fd()
    }

    /// A second descriptor of the same timer, to sleep on where the alarm
    /// itself sits behind a lock that the sleeper releases (the threaded
    /// driver): setting the alarm through the lock affects both.
    pub(crate) fn watch(&self) -> io::Result<OwnedFd> {
        self.timer.fd().try_clone_to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `alarm` has gone off, without sleeping.
    /// An alarm set for `now` (due already: a zero time would disarm it),
    /// slept on until it went off, and told so.
    fn alarm_gone_off(now: Instant) -> Alarm {
        let mut alarm = Alarm::new().unwrap();
        alarm.by(Some(now), now + Duration::from_secs(1)).unwrap();
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let ready = wait(socket.as_fd(), false, Some(alarm.fd()), None).unwrap();
        assert!(ready.woken);
        alarm.went_off();
        alarm
    }

    fn rung(alarm: &Alarm) -> bool {
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        wait(
            socket.as_fd(),
            false,
            Some(alarm.fd()),
            Some(Duration::ZERO),
        )
        .unwrap()
        .woken
    }

    #[test]
    fn an_alarm_is_set_again_only_to_go_off_earlier() {
        let mut alarm = Alarm::new().unwrap();
        let now = Instant::now();
        let hour = Duration::from_secs(3600);
        alarm.by(Some(now + hour), now).unwrap();
        alarm.by(Some(now + 2 * hour), now).unwrap();
        assert_eq!(alarm.set_for, Some(now + hour), "a later deadline keeps it");
        alarm.by(None, now).unwrap();
        assert_eq!(alarm.set_for, Some(now + hour), "no deadline keeps it");
        alarm.by(Some(now + hour / 2), now).unwrap();
        assert_eq!(
            alarm.set_for,
            Some(now + hour / 2),
            "an earlier one moves it"
        );
        assert!(!rung(&alarm));
    }

    #[test]
    fn an_alarm_that_went_off_is_quiet_once_set_again() {
        let now = Instant::now();
        let mut alarm = alarm_gone_off(now);
        assert_eq!(alarm.set_for, None);
        assert_eq!(alarm.sets(), 1, "going off costs no system call");
        alarm
            .by(Some(now + Duration::from_secs(3600)), now)
            .unwrap();
        assert_eq!(alarm.sets(), 2, "set once for the next deadline");
        assert!(!rung(&alarm), "set again: the next sleep is not cut short");
    }

    #[test]
    fn an_alarm_that_went_off_is_disarmed_when_nothing_is_due() {
        let now = Instant::now();
        let mut alarm = alarm_gone_off(now);
        alarm.by(None, now).unwrap();
        assert!(
            !rung(&alarm),
            "disarmed: a sleep with nothing due is not cut short"
        );
        alarm.by(None, now).unwrap();
        assert_eq!(alarm.sets(), 2, "disarmed once, not at every sleep");
    }

    #[test]
    fn a_sleeper_with_nothing_due_leaves_the_alarm_alone() {
        let now = Instant::now();
        let mut alarm = alarm_gone_off(now);
        assert_eq!(alarm.rings(), 1);
        assert!(
            !alarm.for_sleep(None, now).unwrap(),
            "nothing due: the sleep leaves the alarm out"
        );
        assert_eq!(alarm.sets(), 1, "and no system call disarms it");
        assert!(alarm
            .for_sleep(Some(now + Duration::from_secs(3600)), now)
            .unwrap());
        assert_eq!(alarm.sets(), 2, "the next deadline sets it again");
        assert!(!rung(&alarm), "which clears the old expiry");
    }

    #[test]
    fn an_alarm_that_went_off_unwatched_is_set_again() {
        let mut alarm = Alarm::new().unwrap();
        let now = Instant::now();
        let hour = Duration::from_secs(3600);
        alarm.by(Some(now + hour), now).unwrap();
        // An hour on (as a sleeper that left it out of its poll sees it):
        // kept, it would end the next sleep at once.
        let later = now + 2 * hour;
        alarm.by(Some(later + hour), later).unwrap();
        assert_eq!(alarm.set_for, Some(later + hour));
        assert_eq!(alarm.sets(), 2);
    }
}
