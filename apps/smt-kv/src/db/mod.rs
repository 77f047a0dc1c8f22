//! The database: one keyspace of strings, hashes, lists, sets and sorted
//! sets, with expiry.
//!
//! ```text
//! keys    key → Entry { value, slot, expires_at }   (keyed fast hash)
//! slots   slot → key                                  (SCAN's order)
//! expiry  (deadline ms, slot), ordered                (keys with a TTL)
//! ```
//!
//! **SCAN cursors** are slot numbers. A key keeps its slot for its whole
//! life, and freed slots are reused, so a key present from the first to
//! the last call of a scan is returned exactly once (Redis promises at
//! least once), and the cursor is the next slot to look at.
//!
//! **Expiry** is lazy (a read of an expired key deletes it) and active: the
//! event loop calls [`Db::expire_due`] every turn with a budget, and it
//! walks the ordered deadlines, so keys nobody reads again do not hold
//! memory, and a million keys expiring at once cost a thousand per turn
//! instead of one long stall.
//!
//! **Collections** (hashes, lists, sets, sorted sets) exist only while
//! they hold something, as in Redis: a command that empties one calls
//! [`Db::drop_if_empty`].

pub mod glob;
pub mod hash;
pub mod list;
pub mod set;
pub mod zset;

use std::collections::{BTreeSet, HashMap};

use bytes::Bytes;

pub use hash::Hash;
pub use list::{End, List};
pub use set::Set;
pub use zset::{Score, ZSet};

/// Milliseconds since the Unix epoch (Redis's clock for TTLs).
pub type UnixMs = u64;

/// A stored value.
#[derive(Debug)]
pub enum Value {
    /// A string (bytes).
    Str(Vec<u8>),
    /// A hash: fields to values.
    Hash(Hash),
    /// A list.
    List(List),
    /// A set of members.
    Set(Set),
    /// A sorted set: members with scores.
    ZSet(ZSet),
}

impl Value {
    /// The name `SCAN ... TYPE` and `TYPE` use.
    pub fn type_name(&self) -> &'static [u8] {
        match self {
            Self::Str(_) => b"string",
            Self::Hash(_) => b"hash",
            Self::List(_) => b"list",
            Self::Set(_) => b"set",
            Self::ZSet(_) => b"zset",
        }
    }

    /// A collection with nothing left in it (never a string).
    fn is_empty_collection(&self) -> bool {
        match self {
            Self::Str(_) => false,
            Self::Hash(h) => h.is_empty(),
            Self::List(l) => l.is_empty(),
            Self::Set(s) => s.is_empty(),
            Self::ZSet(z) => z.is_empty(),
        }
    }
}

/// A collection type: how to find it in a [`Value`] and make an empty one.
pub trait Collection: Default {
    /// The collection `value` holds, if it is of this type.
    fn of(value: &mut Value) -> Option<&mut Self>;
    /// Wraps the collection as a stored value.
    fn into_value(self) -> Value;
}

macro_rules! collection {
    ($type:ident) => {
        impl Collection for $type {
            fn of(value: &mut Value) -> Option<&mut Self> {
                match value {
                    Value::$type(c) => Some(c),
                    _ => None,
                }
            }

            fn into_value(self) -> Value {
                Value::$type(self)
            }
        }
    };
}

collection!(Hash);
collection!(List);
collection!(Set);
collection!(ZSet);

#[derive(Debug)]
struct Entry {
    value: Value,
    slot: u32,
    expires_at: Option<UnixMs>,
}

impl Entry {
    fn expired(&self, now: UnixMs) -> bool {
        self.expires_at.is_some_and(|t| t <= now)
    }
}

/// What to do with a key's TTL when its value is replaced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ttl {
    /// No TTL (a plain `SET`).
    Clear,
    /// Keep whatever TTL the key had (`SET ... KEEPTTL`).
    Keep,
    /// Expire at this time.
    At(UnixMs),
}

/// The keyspace.
#[derive(Debug, Default)]
pub struct Db {
    keys: HashMap<Bytes, Entry, foldhash::fast::RandomState>,
    slots: Vec<Option<Bytes>>,
    free_slots: Vec<u32>,
    expiry: BTreeSet<(UnixMs, u32)>,
}

/// One `SCAN` call's result.
#[derive(Debug)]
pub struct ScanPage {
    /// Where the next call starts; 0 when the scan is complete.
    pub cursor: u64,
    /// The keys this call found (possibly none, even before the end).
    pub keys: Vec<Bytes>,
}

impl Db {
    /// Number of keys, counting expired ones not yet removed (as Redis's
    /// `DBSIZE` does).
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether it holds no key at all.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Keys with a TTL.
    pub fn volatile_len(&self) -> usize {
        self.expiry.len()
    }

    /// The value of `key`, unless absent or expired (an expired key is
    /// deleted here).
    pub fn get(&mut self, key: &[u8], now: UnixMs) -> Option<&Value> {
        self.expire_if_due(key, now);
        self.keys.get(key).map(|e| &e.value)
    }

    /// As [`Db::get`], for changing the value in place (its TTL stays).
    pub fn get_mut(&mut self, key: &[u8], now: UnixMs) -> Option<&mut Value> {
        self.expire_if_due(key, now);
        self.keys.get_mut(key).map(|e| &mut e.value)
    }

    /// Whether `key` exists (and has not expired).
    pub fn contains(&mut self, key: &[u8], now: UnixMs) -> bool {
        self.get(key, now).is_some()
    }

    /// Stores `value` at `key`, replacing any value of any type.
    pub fn set(&mut self, key: &[u8], value: Value, ttl: Ttl) {
        if let Some(entry) = self.keys.get_mut(key) {
            entry.value = value;
            let slot = entry.slot;
            let old = entry.expires_at;
            let new = match ttl {
                Ttl::Keep => old,
                Ttl::Clear => None,
                Ttl::At(t) => Some(t),
            };
            entry.expires_at = new;
            self.reindex_expiry(slot, old, new);
            return;
        }
        let key = Bytes::copy_from_slice(key);
        let slot = self.take_slot(key.clone());
        let expires_at = match ttl {
            Ttl::At(t) => Some(t),
            Ttl::Keep | Ttl::Clear => None,
        };
        self.reindex_expiry(slot, None, expires_at);
        self.keys.insert(
            key,
            Entry {
                value,
                slot,
                expires_at,
            },
        );
    }

    /// The collection at `key`, `None` if the key is absent; `Err` if the
    /// key holds another type.
    pub fn collection<T: Collection>(
        &mut self,
        key: &[u8],
        now: UnixMs,
    ) -> Result<Option<&mut T>, WrongType> {
        match self.get_mut(key, now) {
            None => Ok(None),
            Some(value) => T::of(value).map(Some).ok_or(WrongType),
        }
    }

    /// The collection at `key`, created empty if the key is absent (the
    /// caller must add to it, or call [`Db::drop_if_empty`]); `Err` if the
    /// key holds another type.
    pub fn collection_or_new<T: Collection>(
        &mut self,
        key: &[u8],
        now: UnixMs,
    ) -> Result<&mut T, WrongType> {
        if self.get(key, now).is_none() {
            self.set(key, T::default().into_value(), Ttl::Clear);
        }
        self.keys
            .get_mut(key)
            .and_then(|e| T::of(&mut e.value))
            .ok_or(WrongType)
    }

    /// Deletes `key` if it holds an empty collection (Redis never keeps
    /// one).
    pub fn drop_if_empty(&mut self, key: &[u8]) {
        if self
            .keys
            .get(key)
            .is_some_and(|e| e.value.is_empty_collection())
        {
            self.delete(key);
        }
    }

    /// `key`'s deadline: `None` if the key is absent (or expired),
    /// `Some(None)` if it has no TTL.
    pub fn deadline(&mut self, key: &[u8], now: UnixMs) -> Option<Option<UnixMs>> {
        self.expire_if_due(key, now);
        self.keys.get(key).map(|e| e.expires_at)
    }

    /// Sets or clears (`None`) the deadline of `key`, which must exist;
    /// whether it did and its deadline changed.
    pub fn set_deadline(&mut self, key: &[u8], at: Option<UnixMs>, now: UnixMs) -> bool {
        self.expire_if_due(key, now);
        let Some(entry) = self.keys.get_mut(key) else {
            return false;
        };
        let (slot, old) = (entry.slot, entry.expires_at);
        entry.expires_at = at;
        self.reindex_expiry(slot, old, at);
        old != at
    }

    /// Deletes `key`; whether it existed (and had not expired).
    pub fn remove(&mut self, key: &[u8], now: UnixMs) -> bool {
        self.expire_if_due(key, now);
        self.delete(key)
    }

    /// Deletes every key.
    pub fn flush(&mut self) {
        *self = Self::default();
    }

    /// Deletes keys whose deadline has passed, at most `budget` of them
    /// (the event loop comes back for the rest).
    pub fn expire_due(&mut self, now: UnixMs, budget: usize) -> usize {
        let mut removed = 0;
        while removed < budget {
            let Some(&(at, slot)) = self.expiry.first() else {
                break;
            };
            if at > now {
                break;
            }
            match self.slots.get(slot as usize).cloned().flatten() {
                Some(key) => {
                    self.delete(&key);
                }
                None => {
                    self.expiry.remove(&(at, slot));
                }
            }
            removed += 1;
        }
        removed
    }

    /// The earliest deadline of any key.
    pub fn next_deadline(&self) -> Option<UnixMs> {
        self.expiry.first().map(|&(at, _)| at)
    }

    /// One page of a scan from `cursor`: looks at about `count` slots (up
    /// to ten times as many when they are empty, as Redis bounds its own
    /// work) and returns the live keys for which `keep` holds.
    pub fn scan(
        &mut self,
        cursor: u64,
        count: usize,
        now: UnixMs,
        mut keep: impl FnMut(&[u8], &Value) -> bool,
    ) -> ScanPage {
        let mut keys = Vec::new();
        let mut slot = usize::try_from(cursor).unwrap_or(usize::MAX);
        let (mut found, mut looked) = (0, 0);
        while slot < self.slots.len() && found < count && looked < count.saturating_mul(10) {
            if let Some(key) = self.slots[slot].clone() {
                found += 1;
                if let Some(value) = self.get(&key, now) {
                    if keep(&key, value) {
                        keys.push(key);
                    }
                }
            }
            looked += 1;
            slot += 1;
        }
        let cursor = if slot >= self.slots.len() {
            0
        } else {
            slot as u64
        };
        ScanPage { cursor, keys }
    }

    fn expire_if_due(&mut self, key: &[u8], now: UnixMs) {
        if self.expiry.is_empty() {
            return;
        }
        if self.keys.get(key).is_some_and(|e| e.expired(now)) {
            self.delete(key);
        }
    }

    fn delete(&mut self, key: &[u8]) -> bool {
        let Some(entry) = self.keys.remove(key) else {
            return false;
        };
        self.reindex_expiry(entry.slot, entry.expires_at, None);
        self.slots[entry.slot as usize] = None;
        self.free_slots.push(entry.slot);
        true
    }

    fn take_slot(&mut self, key: Bytes) -> u32 {
        if let Some(slot) = self.free_slots.pop() {
            self.slots[slot as usize] = Some(key);
            return slot;
        }
        self.slots.push(Some(key));
        // NOTE(unwrap): a u32 slot number covers 4 billion keys, more than
        // the memory of the machines this runs on can hold.
        u32::try_from(self.slots.len() - 1).expect("more than 2^32 keys")
    }

    fn reindex_expiry(&mut self, slot: u32, old: Option<UnixMs>, new: Option<UnixMs>) {
        if old == new {
            return;
        }
        if let Some(t) = old {
            self.expiry.remove(&(t, slot));
        }
        if let Some(t) = new {
            self.expiry.insert((t, slot));
        }
    }
}

/// The key holds a value of another type (Redis's `WRONGTYPE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WrongType;

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> Value {
        Value::Str(v.as_bytes().to_vec())
    }

    #[test]
    fn expired_keys_vanish_on_read_and_in_the_active_cycle() {
        let mut db = Db::default();
        db.set(b"a", s("1"), Ttl::At(100));
        db.set(b"b", s("2"), Ttl::At(200));
        db.set(b"c", s("3"), Ttl::Clear);
        assert!(db.get(b"a", 100).is_none());
        assert_eq!(db.len(), 2);
        assert_eq!(db.next_deadline(), Some(200));
        assert_eq!(db.expire_due(250, 10), 1);
        assert_eq!(db.len(), 1);
        assert_eq!(db.next_deadline(), None);
    }

    #[test]
    fn the_active_cycle_does_at_most_its_budget_per_call() {
        let mut db = Db::default();
        for i in 0..2500 {
            db.set(format!("k{i}").as_bytes(), s("v"), Ttl::At(100 + i % 7));
        }
        db.set(b"later", s("v"), Ttl::At(10_000));
        assert_eq!(db.expire_due(500, 1000), 1000);
        assert_eq!(db.len(), 1501);
        // What is left is still due: the loop comes back without sleeping.
        assert!(db.next_deadline().is_some_and(|t| t <= 500));
        assert_eq!(db.expire_due(500, 1000), 1000);
        assert_eq!(db.expire_due(500, 1000), 500);
        assert_eq!(db.expire_due(500, 1000), 0);
        assert_eq!(db.len(), 1);
        assert_eq!(db.next_deadline(), Some(10_000));
    }

    #[test]
    fn set_clears_or_keeps_the_ttl() {
        let mut db = Db::default();
        db.set(b"a", s("1"), Ttl::At(100));
        db.set(b"a", s("2"), Ttl::Keep);
        assert_eq!(db.volatile_len(), 1);
        db.set(b"a", s("3"), Ttl::Clear);
        assert_eq!(db.volatile_len(), 0);
        assert!(db.get(b"a", 1000).is_some());
    }

    #[test]
    fn deadlines_are_read_set_and_cleared() {
        let mut db = Db::default();
        db.set(b"a", s("1"), Ttl::Clear);
        assert_eq!(db.deadline(b"a", 0), Some(None));
        assert_eq!(db.deadline(b"nope", 0), None);
        assert!(db.set_deadline(b"a", Some(500), 0));
        assert_eq!(db.volatile_len(), 1);
        assert_eq!(db.deadline(b"a", 0), Some(Some(500)));
        assert!(db.set_deadline(b"a", None, 0));
        assert!(!db.set_deadline(b"a", None, 0));
        assert_eq!(db.volatile_len(), 0);
        assert!(db.set_deadline(b"a", Some(500), 0));
        assert_eq!(db.deadline(b"a", 500), None);
        assert!(db.is_empty());
    }

    #[test]
    fn collections_are_created_on_demand_and_dropped_when_empty() {
        let mut db = Db::default();
        assert!(db.collection::<List>(b"l", 0).unwrap().is_none());
        db.collection_or_new::<List>(b"l", 0)
            .unwrap()
            .push(End::Tail, b"x");
        assert!(db.collection::<Set>(b"l", 0).is_err());
        db.drop_if_empty(b"l");
        assert_eq!(db.len(), 1);
        db.collection::<List>(b"l", 0)
            .unwrap()
            .unwrap()
            .pop(End::Head);
        db.drop_if_empty(b"l");
        assert!(db.is_empty());
    }

    #[test]
    fn a_scan_returns_every_lasting_key_once_despite_changes() {
        let mut db = Db::default();
        for i in 0..100 {
            db.set(format!("k{i}").as_bytes(), s("v"), Ttl::Clear);
        }
        let mut seen = Vec::new();
        let mut cursor = 0;
        let mut round = 0;
        loop {
            let page = db.scan(cursor, 7, 0, |_, _| true);
            seen.extend(page.keys);
            // Churn while scanning: delete one early key, add new ones.
            db.remove(format!("k{round}").as_bytes(), 0);
            db.set(format!("new{round}").as_bytes(), s("v"), Ttl::Clear);
            round += 1;
            cursor = page.cursor;
            if cursor == 0 {
                break;
            }
        }
        for i in round..100 {
            let key = format!("k{i}");
            let n = seen.iter().filter(|k| k[..] == *key.as_bytes()).count();
            assert_eq!(n, 1, "{key}");
        }
    }
}
