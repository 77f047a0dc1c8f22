//! Anti-replay for the first flight (the SMT paper §6.1 non-replayability,
//! applied to 0-RTT): the client randoms the server accepted, kept until
//! their hellos would be refused as stale anyway (the freshness window,
//! [`Freshness`](crate::Freshness)) or their ticket expires.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::sync::{Mutex, PoisonError};

use crate::message::CLIENT_RANDOM_LEN;
use crate::TicketError;

/// Remembers the client random of every accepted ClientHello0 until the
/// hello leaves the freshness window (or its ticket's `not_after`, if
/// sooner), and refuses a hello whose random it has seen.
///
/// Entries live in buckets keyed by their expiry (unix seconds); a whole
/// bucket is dropped once `now` reaches it. A stale hello, or one under an
/// expired ticket, is refused anyway, so nothing older is needed.
///
/// Memory is bounded: at most `capacity` randoms are held (16 bytes of each,
/// roughly 20 to 40 bytes an entry with the hash table's slack). When the
/// cache is full the server **fails closed**: it refuses new hellos with
/// [`TicketError::ReplayCacheFull`] until entries expire, rather than forget
/// a random and risk accepting a replay. A client refused that way falls
/// back to a full handshake. Size the cache for the peak hello rate times
/// the freshness window.
///
/// The cache lives in memory: a restarted server has forgotten every random,
/// so it refuses hellos stamped before its start (see
/// [`Freshness`](crate::Freshness) and
/// [`ZeroRttServer`](crate::ZeroRttServer)).
pub struct ReplayCache {
    capacity: usize,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Expiry (unix seconds) → the randoms that expire then.
    buckets: BTreeMap<u64, HashSet<u128>>,
    len: usize,
    stats: ReplayStats,
}

/// What a [`ReplayCache`] has decided so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplayStats {
    /// Hellos whose random was new and is now remembered.
    pub accepted: u64,
    /// Hellos refused as replays.
    pub replayed: u64,
    /// Hellos refused because the cache was full.
    pub refused_full: u64,
    /// Entries dropped because their ticket expired.
    pub expired: u64,
}

impl ReplayCache {
    /// A cache holding at most `capacity` randoms.
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            inner: Mutex::new(Inner::default()),
        }
    }

    /// Records `client_random` until `expires_at` (unix seconds), or refuses
    /// it: [`TicketError::Replayed`] if it is already held,
    /// [`TicketError::ReplayCacheFull`] if there is no room. Entries that
    /// expired by `now` are dropped first. Bounded work: one hash lookup
    /// plus one step per expired bucket.
    pub(crate) fn check_and_insert(
        &self,
        client_random: &[u8; CLIENT_RANDOM_LEN],
        expires_at: u64,
        now: u64,
    ) -> Result<(), TicketError> {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner.expire(now);
        let key = short_key(client_random);
        if inner.buckets.values().any(|bucket| bucket.contains(&key)) {
            inner.stats.replayed += 1;
            return Err(TicketError::Replayed);
        }
        if inner.len >= self.capacity {
            inner.stats.refused_full += 1;
            return Err(TicketError::ReplayCacheFull);
        }
        inner.buckets.entry(expires_at).or_default().insert(key);
        inner.len += 1;
        inner.stats.accepted += 1;
        Ok(())
    }

    /// Randoms held now.
    pub fn len(&self) -> usize {
        self.lock().len
    }

    /// Whether no random is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The most randoms the cache holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Counters.
    pub fn stats(&self) -> ReplayStats {
        self.lock().stats
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Inner {
    fn expire(&mut self, now: u64) {
        while let Some(entry) = self.buckets.first_entry() {
            if *entry.key() > now {
                return;
            }
            let gone = entry.remove().len();
            self.len -= gone;
            self.stats.expired += gone as u64;
        }
    }
}

impl fmt::Debug for ReplayCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = self.lock();
        f.debug_struct("ReplayCache")
            .field("capacity", &self.capacity)
            .field("len", &inner.len)
            .field("buckets", &inner.buckets.len())
            .field("stats", &inner.stats)
            .finish()
    }
}

/// The first 16 bytes of the random: with 128 random bits, two honest
/// hellos collide with probability about n²/2¹²⁹ — negligible — and half the
/// memory goes.
fn short_key(client_random: &[u8; CLIENT_RANDOM_LEN]) -> u128 {
    let mut head = [0; 16];
    head.copy_from_slice(&client_random[..16]);
    u128::from_be_bytes(head)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn random(n: u8) -> [u8; 32] {
        [n; 32]
    }

    #[test]
    fn a_repeat_is_refused_until_its_ticket_expires() {
        let cache = ReplayCache::new(10);
        assert!(cache.check_and_insert(&random(1), 100, 50).is_ok());
        assert_eq!(
            cache.check_and_insert(&random(1), 100, 60),
            Err(TicketError::Replayed)
        );
        assert_eq!(cache.len(), 1);
        assert!(cache.check_and_insert(&random(1), 200, 100).is_ok());
        let stats = cache.stats();
        assert_eq!((stats.accepted, stats.replayed, stats.expired), (2, 1, 1));
    }

    #[test]
    fn a_full_cache_fails_closed_then_recovers_as_entries_expire() {
        let cache = ReplayCache::new(2);
        cache.check_and_insert(&random(1), 100, 0).unwrap();
        cache.check_and_insert(&random(2), 150, 0).unwrap();
        assert_eq!(
            cache.check_and_insert(&random(3), 150, 10),
            Err(TicketError::ReplayCacheFull)
        );
        assert_eq!(
            cache.check_and_insert(&random(1), 100, 10),
            Err(TicketError::Replayed)
        );
        assert!(cache.check_and_insert(&random(3), 150, 100).is_ok());
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.stats().refused_full, 1);
    }

    #[test]
    fn buckets_expire_in_order() {
        let cache = ReplayCache::new(100);
        for (n, expiry) in [(1, 10), (2, 20), (3, 20), (4, 30)] {
            cache.check_and_insert(&random(n), expiry, 0).unwrap();
        }
        cache.check_and_insert(&random(9), 40, 20).unwrap();
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.stats().expired, 3);
    }
}
