//! The handle table: what a C program holds is a number, never a pointer.
//!
//! A handle is a slot index (low 32 bits, plus one) and the slot's
//! generation (high 32 bits). Closing a handle empties its slot and bumps
//! the generation, so a closed handle, a stale copy of it, zero, or any
//! made-up number is refused with `SMT_ERR_HANDLE` instead of reaching
//! freed memory, even after the slot is reused.
//!
//! Each open endpoint sits behind its own mutex, taken with `try_lock`: a
//! second thread calling while one is inside a call on the same handle
//! gets `SMT_ERR_BUSY` at once (it would otherwise wait behind a blocking
//! `smt_recv` indefinitely). A call that panicked poisons that mutex and the
//! handle answers `SMT_ERR_INTERNAL` until it is closed.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};

use crate::error::{Failure, SMT_ERR_BUSY, SMT_ERR_HANDLE, SMT_ERR_INTERNAL};

/// A handle as C sees it (`smt_handle`, a `uint64_t`). Zero is never
/// valid.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Handle(pub u64);

/// Slots of open objects of type `T`, addressed by [`Handle`].
#[derive(Debug)]
pub struct Table<T> {
    slots: Mutex<Slots<T>>,
}

/// An open object; `None` once closed (a thread that found the entry just
/// before it was closed sees that).
type Entry<T> = Arc<Mutex<Option<T>>>;

#[derive(Debug)]
struct Slots<T> {
    slots: Vec<Slot<T>>,
    free: Vec<usize>,
}

#[derive(Debug)]
struct Slot<T> {
    generation: u32,
    entry: Option<Entry<T>>,
}

impl<T> Table<T> {
    pub const fn new() -> Self {
        Self {
            slots: Mutex::new(Slots {
                slots: Vec::new(),
                free: Vec::new(),
            }),
        }
    }

    /// Stores `value` and returns its new handle.
    pub fn insert(&self, value: T) -> Handle {
        let mut s = self.lock();
        let index = match s.free.pop() {
            Some(i) => i,
            None => {
                s.slots.push(Slot {
                    generation: 1,
                    entry: None,
                });
                s.slots.len() - 1
            }
        };
        let slot = &mut s.slots[index];
        slot.entry = Some(Arc::new(Mutex::new(Some(value))));
        Handle(u64::from(slot.generation) << 32 | (index as u64 + 1))
    }

    /// Runs `f` on the object behind `handle`, locked for this thread;
    /// `SMT_ERR_HANDLE` when it is not open, `SMT_ERR_BUSY` when another
    /// thread is inside a call on it.
    pub fn with<R>(
        &self,
        handle: Handle,
        f: impl FnOnce(&mut T) -> Result<R, Failure>,
    ) -> Result<R, Failure> {
        let entry = self.entry(handle)?;
        let mut guard = try_lock(&entry)?;
        match guard.as_mut() {
            Some(value) => f(value),
            None => Err(not_open(handle)),
        }
    }

    /// Closes `handle` (later calls with it get `SMT_ERR_HANDLE`) and hands
    /// its object to `f`, unless another thread is inside a call on it
    /// (`SMT_ERR_BUSY`, and the handle stays open). A handle whose call
    /// panicked can still be closed.
    pub fn remove<R>(&self, handle: Handle, f: impl FnOnce(T) -> R) -> Result<R, Failure> {
        let entry = self.entry(handle)?;
        let mut guard = match entry.try_lock() {
            Ok(guard) => guard,
            Err(TryLockError::WouldBlock) => return Err(busy()),
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
        };
        let value = guard.take().ok_or_else(|| not_open(handle))?;
        self.free(handle);
        drop(guard);
        Ok(f(value))
    }

    fn entry(&self, handle: Handle) -> Result<Entry<T>, Failure> {
        let s = self.lock();
        let index = s.index(handle)?;
        // NOTE(unwrap): `index` found an entry in this slot.
        Ok(s.slots[index].entry.clone().expect("open slot"))
    }

    /// Empties `handle`'s slot for reuse under a new generation.
    fn free(&self, handle: Handle) {
        let mut s = self.lock();
        if let Ok(index) = s.index(handle) {
            let slot = &mut s.slots[index];
            slot.entry = None;
            slot.generation = slot.generation.wrapping_add(1).max(1);
            s.free.push(index);
        }
    }

    fn lock(&self) -> MutexGuard<'_, Slots<T>> {
        // The table's own lock guards plain bookkeeping that no panic can
        // leave half-done: a poisoned lock is still consistent.
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<T> Slots<T> {
    /// The slot index of an open `handle`.
    fn index(&self, handle: Handle) -> Result<usize, Failure> {
        let generation = (handle.0 >> 32) as u32;
        let index = (handle.0 & u64::from(u32::MAX)) as usize;
        index
            .checked_sub(1)
            .filter(|&i| {
                self.slots
                    .get(i)
                    .is_some_and(|s| s.generation == generation && s.entry.is_some())
            })
            .ok_or_else(|| not_open(handle))
    }
}

fn not_open(handle: Handle) -> Failure {
    Failure::new(
        SMT_ERR_HANDLE,
        format!(
            "handle {:#x} is not open (closed already, or never returned by smt_open)",
            handle.0
        ),
    )
}

const BUSY: &str = "another thread is inside a call on this handle: a handle is used by one \
                    thread at a time (use one handle per thread, or one event loop with smt_fd \
                    and non-blocking smt_recv)";

fn busy() -> Failure {
    Failure::new(SMT_ERR_BUSY, BUSY)
}

fn try_lock<T>(entry: &Mutex<Option<T>>) -> Result<MutexGuard<'_, Option<T>>, Failure> {
    match entry.try_lock() {
        Ok(guard) => Ok(guard),
        Err(TryLockError::WouldBlock) => Err(busy()),
        Err(TryLockError::Poisoned(_)) => Err(Failure::new(
            SMT_ERR_INTERNAL,
            "an earlier call on this handle failed inside libsmt (a bug); only smt_close \
             works on it now",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_handle_stays_closed_after_its_slot_is_reused() {
        let table = Table::new();
        let first = table.insert(1u32);
        assert_eq!(table.remove(first, |v| v).unwrap(), 1);
        let second = table.insert(2u32);
        assert_ne!(first, second, "same slot, new generation");
        assert_eq!(
            table.with(first, |v| Ok(*v)).unwrap_err().code,
            SMT_ERR_HANDLE
        );
        assert_eq!(table.with(second, |v| Ok(*v)).unwrap(), 2);
        for bogus in [0, u64::MAX, 1, second.0 + 1] {
            let e = table.with(Handle(bogus), |v| Ok(*v)).unwrap_err();
            assert_eq!(e.code, SMT_ERR_HANDLE, "{bogus:#x}");
        }
    }

    #[test]
    fn a_second_thread_is_told_the_handle_is_busy() {
        let table = Table::new();
        let h = table.insert(0u32);
        let e = table.with(h, |_| table.with(h, |_| Ok(()))).unwrap_err();
        assert_eq!(e.code, SMT_ERR_BUSY);
        let e = table.with(h, |_| table.remove(h, |_| ())).unwrap_err();
        assert_eq!(e.code, SMT_ERR_BUSY, "close waits for no one: it refuses");
        assert!(table.remove(h, |_| ()).is_ok());
    }
}
