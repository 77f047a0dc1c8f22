//! Freshness of a ClientHello0 (RFC 8446 §8.2, applied to SMT's 0-RTT): the
//! client stamps its hello with its clock; the server accepts the hello only
//! if that time is close to its own clock and not from before its start.
//!
//! Why both rules: the replay cache lives in memory. Within one server run
//! it refuses a repeated client random, and the window bounds how long it
//! must remember one. Across a restart it remembers nothing, so the server
//! refuses every hello stamped before it started: no replay of a flight sent
//! to its previous run can be accepted, even if it was handed the same
//! ticket and static key.
//!
//! **Clock assumption.** Client and server clocks differ by at most
//! `max_clock_skew` (datacenter NTP keeps them within a few milliseconds,
//! PTP within microseconds; the default allows 100 ms — raise it if your
//! clocks are looser). A hello sent before the restart then carries
//! a time before `started + max_clock_skew`, which is refused. The price: for
//! up to twice the skew after a start, hellos from clients whose clock runs
//! behind are refused too (the client falls back to a full handshake or
//! retries). `window` covers the skew plus the hello's time in flight
//! (retransmissions included); it must be at least `max_clock_skew`.

use std::time::{Duration, SystemTime};

use crate::TicketError;

/// The server's freshness policy for ClientHello0s. See the module docs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Freshness {
    started: SystemTime,
    window: Duration,
    max_clock_skew: Duration,
}

impl Freshness {
    /// Default distance allowed between a hello's time and the server's
    /// clock (either way).
    pub const DEFAULT_WINDOW: Duration = Duration::from_secs(10);
    /// Default bound on the difference between client and server clocks.
    pub const DEFAULT_MAX_CLOCK_SKEW: Duration = Duration::from_millis(100);

    /// The default policy for a server (its replay cache) that started at
    /// `started`.
    pub fn new(started: SystemTime) -> Self {
        Self {
            started,
            window: Self::DEFAULT_WINDOW,
            max_clock_skew: Self::DEFAULT_MAX_CLOCK_SKEW,
        }
    }

    /// The same policy with another window and skew bound;
    /// [`TicketError::InvalidInput`] if the window is shorter than the skew
    /// (a hello from a client behind by the skew would never be fresh).
    pub fn with_limits(
        self,
        window: Duration,
        max_clock_skew: Duration,
    ) -> Result<Self, TicketError> {
        if window < max_clock_skew {
            return Err(TicketError::InvalidInput(format!(
                "freshness window {window:?} is shorter than the clock skew bound {max_clock_skew:?}"
            )));
        }
        Ok(Self {
            window,
            max_clock_skew,
            ..self
        })
    }

    /// When the server (its replay cache) started.
    pub fn started(&self) -> SystemTime {
        self.started
    }

    /// The freshness window.
    pub fn window(&self) -> Duration {
        self.window
    }

    /// Checks a hello's `client_time` (unix ms) at `now`; returns until when
    /// (unix seconds) its random must stay in the replay cache: past that,
    /// the hello is stale anyway.
    pub(crate) fn check(&self, client_time: u64, now: SystemTime) -> Result<u64, TicketError> {
        let now_ms = unix_millis(now);
        let window = millis(self.window);
        if client_time > now_ms.saturating_add(window)
            || client_time.saturating_add(window) < now_ms
        {
            return Err(TicketError::NotFresh {
                client_time,
                now: now_ms,
            });
        }
        let earliest = unix_millis(self.started).saturating_add(millis(self.max_clock_skew));
        if client_time < earliest {
            return Err(TicketError::SentBeforeStart {
                client_time,
                earliest,
            });
        }
        // One second of margin for the cache's whole-second buckets.
        Ok(client_time.saturating_add(window) / 1000 + 2)
    }
}

/// `t` in unix milliseconds (0 before 1970).
pub fn unix_millis(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH).map_or(0, millis)
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const START_MS: u64 = 1_750_000_000_000;

    fn at_ms(ms: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_millis(ms)
    }

    fn policy() -> Freshness {
        Freshness::new(at_ms(START_MS))
    }

    #[test]
    fn a_hello_within_the_window_is_fresh() {
        let now = START_MS + 60_000;
        assert!(policy().check(now, at_ms(now)).is_ok());
        assert!(policy().check(now - 10_000, at_ms(now)).is_ok());
        assert!(policy().check(now + 10_000, at_ms(now)).is_ok());
    }

    #[test]
    fn a_hello_outside_the_window_is_refused() {
        let now = START_MS + 60_000;
        for t in [now - 10_001, now + 10_001, 0, u64::MAX] {
            assert!(
                matches!(
                    policy().check(t, at_ms(now)),
                    Err(TicketError::NotFresh { .. })
                ),
                "{t}"
            );
        }
    }

    #[test]
    fn a_hello_from_before_the_start_plus_skew_is_refused() {
        let now = START_MS + 500;
        for t in [START_MS - 1, START_MS, START_MS + 99] {
            assert!(
                matches!(
                    policy().check(t, at_ms(now)),
                    Err(TicketError::SentBeforeStart { .. })
                ),
                "{t}"
            );
        }
        assert!(policy().check(START_MS + 100, at_ms(now)).is_ok());
    }

    #[test]
    fn the_cache_keeps_a_random_past_the_window() {
        let t = START_MS + 60_000;
        let expiry = policy().check(t, at_ms(t)).unwrap();
        assert!(expiry * 1000 > t + 10_000);
    }

    #[test]
    fn a_window_shorter_than_the_skew_is_refused() {
        let p = policy().with_limits(Duration::from_millis(10), Duration::from_millis(20));
        assert!(matches!(p, Err(TicketError::InvalidInput(_))));
    }
}
