//! X25519 keys: the server's long-term (static) key and a pool of
//! pre-generated ephemeral keys (the SMT paper §4.5.1, "key pre-generation").

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError, TryLockError};
use std::thread::Thread;

use aws_lc_rs::agreement::{self, PrivateKey, UnparsedPublicKey, X25519};
use aws_lc_rs::encoding::{AsBigEndian, Curve25519SeedBin};

use crate::schedule::Secret;
use crate::TicketError;

/// Length of an X25519 public key (a key share) and of a private key.
pub const KEY_SHARE_LEN: usize = 32;

/// The server's long-term X25519 key pair, whose public half the ticket
/// publishes. `Debug` shows the public key only.
pub struct StaticKey(KeyPair);

impl StaticKey {
    /// A fresh key from the operating system's CSPRNG.
    pub fn generate() -> Self {
        Self(KeyPair::generate())
    }

    /// The key whose private scalar is `private` (as [`StaticKey::to_bytes`]
    /// returned it).
    pub fn from_bytes(private: &[u8; KEY_SHARE_LEN]) -> Result<Self, TicketError> {
        let key = PrivateKey::from_private_key(&X25519, private)
            .map_err(|_| TicketError::InvalidInput("not an X25519 private key".to_owned()))?;
        Ok(Self(KeyPair::from_private(key)))
    }

    /// The private scalar, for storing the key. Treat it as the secret it
    /// is: whoever holds it can read every 0-RTT flight sent under any
    /// ticket carrying this key.
    pub fn to_bytes(&self) -> [u8; KEY_SHARE_LEN] {
        // NOTE(unwrap): an X25519 key always serialises to 32 bytes.
        let seed: Curve25519SeedBin<'_> = self.0.private.as_be_bytes().expect("X25519 key");
        seed.as_ref().try_into().expect("X25519 keys are 32 bytes")
    }

    /// The public key share the ticket carries.
    pub fn public_key(&self) -> [u8; KEY_SHARE_LEN] {
        self.0.public
    }

    pub(crate) fn agree(&self, peer: &[u8; KEY_SHARE_LEN]) -> Option<Secret> {
        self.0.agree(peer)
    }
}

impl fmt::Debug for StaticKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StaticKey")
            .field("public", &Hex(&self.0.public))
            .finish_non_exhaustive()
    }
}

/// A one-use X25519 key pair from a [`KeyPool`]. `Debug` shows the public
/// key only.
pub struct EphemeralKey(KeyPair);

impl EphemeralKey {
    /// A fresh key from the operating system's CSPRNG.
    pub fn generate() -> Self {
        Self(KeyPair::generate())
    }

    /// The public key share that goes on the wire.
    pub fn public_key(&self) -> [u8; KEY_SHARE_LEN] {
        self.0.public
    }

    pub(crate) fn agree(&self, peer: &[u8; KEY_SHARE_LEN]) -> Option<Secret> {
        self.0.agree(peer)
    }
}

impl fmt::Debug for EphemeralKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EphemeralKey")
            .field("public", &Hex(&self.0.public))
            .finish_non_exhaustive()
    }
}

/// Pre-generated ephemeral keys, so a handshake does not pay for key
/// generation on its critical path (the SMT paper §4.5.1; Table 2's S2.1/C1.1).
///
/// [`KeyPool::new`] fills the pool; [`KeyPool::refill`] tops it up and is
/// meant to run off the hot path (a background thread, an idle loop, a
/// timer). [`KeyPool::take`] never blocks: it pops a key if the pool's lock
/// is free and a key is there, and otherwise generates one inline, counting
/// it in [`PoolStats::generated_inline`] so an undersized pool shows.
///
/// The pool is `Sync`: share it in an `Arc` between the handshakes that take
/// keys and the thread that refills it. A refill thread that registers with
/// [`KeyPool::unpark_when_low`] is unparked when a take leaves the pool
/// half empty, so it can sleep instead of polling.
pub struct KeyPool {
    target: usize,
    keys: Mutex<Vec<EphemeralKey>>,
    taken: AtomicU64,
    generated_inline: AtomicU64,
    pregenerated: AtomicU64,
    /// The refill thread to unpark at the low-water mark.
    refiller: OnceLock<Thread>,
    /// Set when the refiller was unparked, cleared by a refill: one
    /// unpark (a futex wake) per refill, not one per take.
    refill_asked: AtomicBool,
}

/// What a [`KeyPool`] has done so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Keys handed out by [`KeyPool::take`].
    pub taken: u64,
    /// Of those, keys generated inline because the pool was empty or busy.
    pub generated_inline: u64,
    /// Keys generated ahead of time by [`KeyPool::new`] and
    /// [`KeyPool::refill`].
    pub pregenerated: u64,
    /// Keys waiting in the pool now.
    pub available: usize,
}

/// How many keys [`KeyPool::refill`] generates between two visits to the
/// lock, so takers see new keys early and never wait long.
const REFILL_BATCH: usize = 32;

impl KeyPool {
    /// A pool of `size` keys, generated now (start-up cost: about 30 µs a
    /// key). `size` 0 makes a pool that always generates inline.
    pub fn new(size: usize) -> Self {
        let pool = Self {
            target: size,
            keys: Mutex::new(Vec::with_capacity(size)),
            taken: AtomicU64::new(0),
            generated_inline: AtomicU64::new(0),
            pregenerated: AtomicU64::new(0),
            refiller: OnceLock::new(),
            refill_asked: AtomicBool::new(false),
        };
        pool.refill();
        pool
    }

    /// Registers `thread` (the one calling [`KeyPool::refill`]) to be
    /// unparked when a take leaves fewer than half the pool's keys (or
    /// finds none). Only the first registration counts; returns whether
    /// this one did.
    pub fn unpark_when_low(&self, thread: Thread) -> bool {
        self.refiller.set(thread).is_ok()
    }

    /// Unparks the registered refiller if `left` keys are below the
    /// low-water mark and it has not been asked since its last refill.
    fn ask_refill_if_low(&self, left: usize) {
        if left >= self.target.div_ceil(2) {
            return;
        }
        if let Some(thread) = self.refiller.get() {
            if !self.refill_asked.swap(true, Ordering::AcqRel) {
                thread.unpark();
            }
        }
    }

    /// One key, never blocking: from the pool if it has one and its lock is
    /// free, generated inline otherwise (and counted).
    pub fn take(&self) -> EphemeralKey {
        self.taken.fetch_add(1, Ordering::Relaxed);
        let (pooled, left) = match self.keys.try_lock() {
            Ok(mut keys) => (keys.pop(), keys.len()),
            Err(TryLockError::Poisoned(poisoned)) => {
                let mut keys = poisoned.into_inner();
                (keys.pop(), keys.len())
            }
            // Busy: the refiller holds the lock, so it is running.
            Err(TryLockError::WouldBlock) => (None, self.target),
        };
        self.ask_refill_if_low(left);
        pooled.unwrap_or_else(|| {
            self.generated_inline.fetch_add(1, Ordering::Relaxed);
            EphemeralKey::generate()
        })
    }

    /// Tops the pool up to its size and returns how many keys it generated:
    /// at most the pool's size, even while others keep taking. Generation
    /// happens outside the lock, in batches; call this off the hot path.
    pub fn refill(&self) -> usize {
        // Cleared first: a take that empties the pool during this refill
        // asks again, so the refiller comes back for it.
        self.refill_asked.store(false, Ordering::Release);
        let missing = self.target.saturating_sub(self.available());
        let mut generated = 0;
        while generated < missing {
            let batch: Vec<_> = (0..(missing - generated).min(REFILL_BATCH))
                .map(|_| EphemeralKey::generate())
                .collect();
            generated += batch.len();
            self.pregenerated
                .fetch_add(batch.len() as u64, Ordering::Relaxed);
            let mut keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
            keys.extend(batch);
            keys.truncate(self.target);
        }
        generated
    }

    /// Keys waiting in the pool.
    pub fn available(&self) -> usize {
        self.keys
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// The size [`KeyPool::refill`] restores.
    pub fn size(&self) -> usize {
        self.target
    }

    /// Counters, for monitoring how often the hot path had to generate.
    pub fn stats(&self) -> PoolStats {
        PoolStats {
            taken: self.taken.load(Ordering::Relaxed),
            generated_inline: self.generated_inline.load(Ordering::Relaxed),
            pregenerated: self.pregenerated.load(Ordering::Relaxed),
            available: self.available(),
        }
    }
}

impl fmt::Debug for KeyPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyPool")
            .field("size", &self.target)
            .field("stats", &self.stats())
            .finish()
    }
}

/// Whether X25519 with `share` yields a non-zero secret, that is, `share`
/// is not a low-order point. Any clamped scalar decides it; a fixed one does.
pub(crate) fn is_usable_share(share: &[u8; KEY_SHARE_LEN]) -> bool {
    // NOTE(unwrap): 32 bytes are always an X25519 private key.
    let probe = PrivateKey::from_private_key(&X25519, &[0x5c; KEY_SHARE_LEN]).expect("X25519 key");
    KeyPair::from_private(probe).agree(share).is_some()
}

/// An X25519 private key and its public key, computed once.
struct KeyPair {
    private: PrivateKey,
    public: [u8; KEY_SHARE_LEN],
}

impl KeyPair {
    fn generate() -> Self {
        // NOTE(unwrap): X25519 generation fails only if the system RNG does,
        // which no cryptographic library can recover from.
        Self::from_private(PrivateKey::generate(&X25519).expect("X25519 key generation failed"))
    }

    fn from_private(private: PrivateKey) -> Self {
        // NOTE(unwrap): an X25519 private key always has a 32-byte public key.
        let public = private
            .compute_public_key()
            .expect("X25519 public key")
            .as_ref()
            .try_into()
            .expect("X25519 public keys are 32 bytes");
        Self { private, public }
    }

    /// X25519 with `peer`, or `None` if `peer` is a low-order point (the
    /// shared secret would be all zeros and bind nothing).
    fn agree(&self, peer: &[u8; KEY_SHARE_LEN]) -> Option<Secret> {
        let peer = UnparsedPublicKey::new(&X25519, peer);
        let shared = agreement::agree(&self.private, peer, (), |shared| {
            let bytes: [u8; 32] = shared.try_into().map_err(|_| ())?;
            Ok(Secret::new(bytes))
        })
        .ok()?;
        // aws-lc already refuses an all-zero result; checked again so the
        // property does not rest on a library detail.
        (!shared.is_zero()).then_some(shared)
    }
}

/// Lower-case hex for `Debug` output of public values.
pub(crate) struct Hex<'a>(pub &'a [u8]);

impl fmt::Debug for Hex<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The registered refiller is unparked once when a take leaves the
    /// pool below half, not at every take after, and again after a refill.
    #[test]
    fn a_pool_below_half_unparks_its_refiller_once_per_refill() {
        let pool = std::sync::Arc::new(KeyPool::new(4));
        let (woke, wakes) = std::sync::mpsc::channel();
        let refiller = std::thread::spawn(move || {
            std::thread::park();
            let _ = woke.send(());
        });
        assert!(pool.unpark_when_low(refiller.thread().clone()));
        assert!(
            !pool.unpark_when_low(std::thread::current()),
            "one refiller"
        );
        let _ = (pool.take(), pool.take());
        assert!(!pool.refill_asked.load(Ordering::Acquire), "2 of 4 left");
        let _ = pool.take();
        assert!(pool.refill_asked.load(Ordering::Acquire), "1 of 4 left");
        // Generous: only a lost unpark fails this, not a slow machine.
        let woken = wakes.recv_timeout(std::time::Duration::from_secs(60));
        assert!(woken.is_ok(), "the refiller was unparked");
        let _ = (pool.take(), pool.take());
        assert_eq!(pool.stats().generated_inline, 1);
        assert_eq!(pool.refill(), 4);
        assert!(!pool.refill_asked.load(Ordering::Acquire));
        refiller.join().expect("refiller");
    }

    #[test]
    fn both_sides_agree_and_low_order_points_are_refused() {
        let a = StaticKey::generate();
        let b = EphemeralKey::generate();
        let ab = a.agree(&b.public_key()).unwrap();
        let ba = b.agree(&a.public_key()).unwrap();
        assert_eq!(ab.as_bytes(), ba.as_bytes());
        assert!(a.agree(&[0; 32]).is_none());
        let mut one = [0; 32];
        one[0] = 1;
        assert!(a.agree(&one).is_none());
        assert!(!is_usable_share(&[0; 32]));
        assert!(!is_usable_share(&one));
        assert!(is_usable_share(&a.public_key()));
    }

    #[test]
    fn static_key_round_trips_through_bytes() {
        let key = StaticKey::generate();
        let again = StaticKey::from_bytes(&key.to_bytes()).unwrap();
        assert_eq!(key.public_key(), again.public_key());
    }

    #[test]
    fn debug_shows_only_the_public_key() {
        let key = StaticKey::generate();
        let shown = format!("{key:?}");
        let private = hex::encode(key.to_bytes());
        assert!(!shown.contains(&private[..16]), "{shown}");
        assert!(shown.contains(&hex::encode(key.public_key())));
    }

    #[test]
    fn pool_hands_out_pregenerated_keys_then_generates_inline() {
        let pool = KeyPool::new(2);
        assert_eq!(pool.available(), 2);
        let a = pool.take();
        let b = pool.take();
        let c = pool.take();
        assert_ne!(a.public_key(), b.public_key());
        assert_ne!(b.public_key(), c.public_key());
        let stats = pool.stats();
        assert_eq!(
            (
                stats.taken,
                stats.generated_inline,
                stats.pregenerated,
                stats.available
            ),
            (3, 1, 2, 0)
        );
        assert_eq!(pool.refill(), 2);
        assert_eq!(pool.refill(), 0);
        assert_eq!(pool.stats().pregenerated, 4);
    }

    #[test]
    fn takers_and_a_refiller_share_one_pool() {
        let pool = std::sync::Arc::new(KeyPool::new(16));
        let takers: Vec<_> = (0..3)
            .map(|_| {
                let pool = pool.clone();
                std::thread::spawn(move || {
                    (0..50)
                        .map(|_| pool.take().public_key())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for _ in 0..20 {
            assert!(pool.refill() <= 16);
        }
        let mut keys: Vec<_> = takers.into_iter().flat_map(|t| t.join().unwrap()).collect();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), 150, "every key handed out once");
        let stats = pool.stats();
        assert_eq!(stats.taken, 150);
        assert!(stats.available <= 16);
    }

    #[test]
    fn take_does_not_wait_for_a_held_lock() {
        let pool = KeyPool::new(4);
        let held = pool.keys.lock().unwrap();
        let key = pool.take();
        drop(held);
        assert_eq!(pool.stats().generated_inline, 1);
        assert_eq!(pool.available(), 4);
        drop(key);
    }
}
