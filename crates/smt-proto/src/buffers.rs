//! Spare byte buffers, so a steady stream of messages reuses the buffers of
//! the messages before it instead of allocating and freeing per message:
//! sealed messages, reassembly and delivered data.
//!
//! Buffers are kept by size class (powers of two from [`MIN_CLASS`] to
//! [`MAX_CLASS`] bytes, each with 1/32 more room: a message of a
//! power-of-two length plus its record headers and tags still fits the
//! class of its length instead of taking one twice as large); a buffer
//! taken for `len` bytes has the capacity of `len`'s class, so it returns
//! to the same class. The pool holds at most
//! [`MAX_POOLED_BYTES`] in total and [`MAX_PER_CLASS`] buffers per class:
//! what a flood or a burst of large messages leaves behind goes back to the
//! allocator instead of staying pooled.
//!
//! A large buffer the pool does not keep (at least [`FREE_LATER_MIN`]
//! bytes) is not freed by the core call that is done with it if the driver
//! collects them ([`Released`], `Endpoint::take_released`): freeing
//! hundreds of megabytes unmaps them page by page, and a driver that calls
//! the core under a lock would neither receive nor answer meanwhile.

/// Smallest class: anything smaller is rounded up to it.
pub(crate) const MIN_CLASS: usize = 256;
/// Largest pooled class: a 1 MiB message with its record overhead (whose
/// buffers, freed, the allocator would hand back to the kernel and fault
/// in again for the next one); larger buffers are allocated exactly and
/// freed when done.
pub(crate) const MAX_CLASS: usize = 2 << 20;
const CLASSES: usize = (MAX_CLASS / MIN_CLASS).trailing_zeros() as usize + 1;
/// Total bytes the pool may hold: enough for a few 1 MiB messages each
/// way in flight (each a 1 MiB class buffer), so a steady stream of them
/// takes no fresh memory.
pub(crate) const MAX_POOLED_BYTES: usize = 16 << 20;
/// Buffers per class: bounds the bookkeeping of the small classes.
pub(crate) const MAX_PER_CLASS: usize = 1024;
/// Smallest buffer (or shared message) a collecting driver frees instead
/// of the core ([`Released`]). Buffers this large are mapped pages of their
/// own (glibc's mmap threshold is at most 32 MiB, and the pool keeps the
/// classes up to [`MAX_CLASS`]), and freeing one unmaps every page it
/// touched: the 256 MiB wire buffer of a finished response took 57–328 ms
/// (median 198) to free on a loaded two-core VM, inside the call that
/// handled the client's ACK, under a threaded driver's engine lock.
/// Below a megabyte a free costs well under a millisecond, and handing
/// such buffers out would only add bookkeeping to the small-message path.
pub(crate) const FREE_LATER_MIN: usize = 1 << 20;
/// Bytes [`Released`] may hold when its driver stopped collecting it, at
/// least: on the next release beyond the limit, what it holds is freed in
/// that core call (the newest buffer is still handed out). The limit is
/// this or four of the largest messages, whichever is more
/// ([`released_limit`]): one finished RPC releases its wire buffer and its
/// data, twice its length, in one call, and a driver that collects after
/// every turn must never meet the limit (with 256 MiB alone, a 256 MiB
/// response's wire buffer was freed in the call that released its data).
/// One that forgets holds at most the limit plus one message's buffers,
/// not every large message it ever sent.
pub(crate) const MAX_RELEASED_BYTES: usize = 256 << 20;

/// The bytes [`Released`] may hold uncollected when messages may be
/// `max_message_len` bytes long (see [`MAX_RELEASED_BYTES`]).
pub(crate) fn released_limit(max_message_len: u64) -> usize {
    let four = usize::try_from(max_message_len)
        .unwrap_or(usize::MAX)
        .saturating_mul(4);
    four.max(MAX_RELEASED_BYTES)
}

/// Spare buffers by size class, and the large buffers waiting for the
/// driver to free them. See the module docs.
#[derive(Debug, Default)]
pub(crate) struct BufferPool {
    classes: [Vec<Vec<u8>>; CLASSES],
    pooled_bytes: usize,
    /// Large buffers done with, for the driver to free; `None` until it
    /// asks to collect them (then they are freed where they are released).
    released: Option<Released>,
    /// Bytes `released` may hold ([`released_limit`]).
    released_limit: usize,
}

/// Large buffers the endpoint is done with — message buffers of a megabyte
/// or more and the large messages it shared with the application — handed
/// to the driver to free (see `Endpoint::take_released`). Dropping it
/// frees them: a driver drops it once it no longer holds what keeps the
/// endpoint from answering (a lock), as freeing hundreds of megabytes takes
/// a tenth of a second or more.
#[derive(Debug, Default)]
pub struct Released {
    /// Message buffers of the endpoint's own.
    buffers: Vec<Vec<u8>>,
    /// Messages the application handed over as owned bytes (perhaps their
    /// last reference).
    shared: Vec<bytes::Bytes>,
    bytes: usize,
}

impl Released {
    /// How many buffers it holds.
    pub fn len(&self) -> usize {
        self.buffers.len() + self.shared.len()
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes its buffers span (their capacity; a shared message's
    /// length).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Makes room for `bytes` more: frees what it holds if that is `limit`
    /// or more (nobody collects it), then counts them.
    fn room_for(&mut self, bytes: usize, limit: usize) -> &mut Self {
        if self.bytes >= limit {
            *self = Released::default();
        }
        self.bytes += bytes;
        self
    }
}

/// The capacity of buffers of class `class`.
const fn class_size(class: usize) -> usize {
    let base = MIN_CLASS << class;
    base + base / 32
}

/// The smallest class holding buffers of at least `len` bytes, if pooled.
fn class_for_len(len: usize) -> Option<usize> {
    let size = len.max(MIN_CLASS).checked_next_power_of_two()?;
    let class = (size / MIN_CLASS).trailing_zeros() as usize;
    // The class below has 1/32 more than half of `size`: enough for a
    // length just past a power of two.
    let class = match class > 0 && class_size(class - 1) >= len {
        true => class - 1,
        false => class,
    };
    (class < CLASSES).then_some(class)
}

/// The class whose buffers have exactly capacity `cap`, if any.
fn class_of_capacity(cap: usize) -> Option<usize> {
    if cap < MIN_CLASS {
        return None;
    }
    let class = (cap / MIN_CLASS).ilog2() as usize;
    (class < CLASSES && class_size(class) == cap).then_some(class)
}

/// The capacity of a pooled buffer for `len` bytes; `None` if buffers
/// that large are not pooled.
pub(crate) fn pooled_capacity(len: usize) -> Option<usize> {
    class_for_len(len).map(class_size)
}

/// The capacity [`BufferPool::take`] gives a buffer for `len` bytes.
pub(crate) fn capacity_for(len: usize) -> usize {
    match class_for_len(len) {
        Some(class) => class_size(class),
        None => len,
    }
}

/// A new buffer of `len` zero bytes with [`capacity_for`]`(len)` room,
/// asked of the allocator as zeroed memory rather than zeroed here. For a
/// large buffer that is fresh pages the kernel zeroes on first touch:
/// taking it writes nothing, and its pages fault in as they are written
/// (a lazily sealed message's, record by record as its packets leave).
/// Zeroing it here was O(length) in one core call: filling the 256 MiB
/// wire buffer of a response kept a server's engine (and its lock) busy
/// for 0.2–2.6 s on a loaded two-core machine, long enough for the client
/// to count a second of silence and give up (`tests/large.rs` in `smt`).
fn fresh_zeroed(len: usize) -> Vec<u8> {
    let mut buf = vec![0; capacity_for(len)];
    buf.truncate(len);
    buf
}

impl BufferPool {
    /// An empty buffer with room for at least `len` bytes: a spare one if
    /// its class has one, else a new one of the class's size.
    #[inline]
    pub(crate) fn take(&mut self, len: usize) -> Vec<u8> {
        let mut buf = self.take_dirty(len);
        buf.clear();
        buf
    }

    /// A buffer of exactly `len` zero bytes (see [`BufferPool::take`]).
    pub(crate) fn take_zeroed(&mut self, len: usize) -> Vec<u8> {
        let Some(mut buf) = self.take_spare(len) else {
            return fresh_zeroed(len);
        };
        buf.clear();
        buf.resize(len, 0);
        buf
    }

    /// A buffer of exactly `len` bytes whose contents are whatever its last
    /// user left (zeros only where it never reached): for a caller that
    /// overwrites every byte before reading it. A spare buffer keeps its
    /// length when it returns, so one reused at the size it had costs no
    /// zero fill; [`BufferPool::take_zeroed`] was a third pass over the
    /// memory of a megabyte message.
    #[inline]
    pub(crate) fn take_filled(&mut self, len: usize) -> Vec<u8> {
        let Some(mut buf) = self.take_spare(len) else {
            return fresh_zeroed(len);
        };
        buf.resize(len, 0);
        buf
    }

    /// A spare buffer of `len`'s class as its last user left it, or a new
    /// empty one.
    fn take_dirty(&mut self, len: usize) -> Vec<u8> {
        self.take_spare(len)
            .unwrap_or_else(|| Vec::with_capacity(capacity_for(len)))
    }

    /// A spare buffer of `len`'s class as its last user left it, if any.
    fn take_spare(&mut self, len: usize) -> Option<Vec<u8>> {
        let buf = self.classes[class_for_len(len)?].pop()?;
        self.pooled_bytes -= buf.capacity();
        Some(buf)
    }

    /// Keeps `buf` for reuse if its class and the pool have room; frees it
    /// otherwise. Only buffers of exactly a class size are kept (those
    /// [`BufferPool::take`] made), so a buffer taken for `len` bytes has
    /// exactly [`capacity_for`]`(len)`: the memory limits charge what they
    /// admitted.
    /// A large buffer not kept goes to the driver to free if it collects
    /// them ([`BufferPool::collect_released`]).
    #[inline]
    pub(crate) fn give(&mut self, buf: Vec<u8>) {
        if buf.capacity() == 0 {
            // Nothing to keep or free: a buffer already taken out of its
            // message (delivered data), given back by habit.
            return;
        }
        let Some(class) = class_of_capacity(buf.capacity()) else {
            return self.free(buf);
        };
        let full = self.classes[class].len() >= MAX_PER_CLASS
            || self.pooled_bytes + buf.capacity() > MAX_POOLED_BYTES;
        if full {
            return self.free(buf);
        }
        // Not cleared: its length says how much of it is initialised, so
        // `take_filled` need not zero it again (`take` clears it).
        self.pooled_bytes += buf.capacity();
        self.classes[class].push(buf);
    }

    /// Bytes held by spare buffers.
    pub(crate) fn pooled_bytes(&self) -> usize {
        self.pooled_bytes
    }

    /// Frees `buf`, or hands it to the driver if it is large and the
    /// driver collects.
    fn free(&mut self, buf: Vec<u8>) {
        let bytes = buf.capacity();
        let limit = self.released_limit;
        if let Some(released) = self.collecting(bytes) {
            released.room_for(bytes, limit).buffers.push(buf);
        }
    }

    /// Lets go of a message the application handed over as owned bytes
    /// (the endpoint is done with it): dropped here if small, else handed
    /// to the driver if it collects — it may hold the last reference.
    pub(crate) fn release_shared(&mut self, data: bytes::Bytes) {
        let bytes = data.len();
        let limit = self.released_limit;
        if let Some(released) = self.collecting(bytes) {
            released.room_for(bytes, limit).shared.push(data);
        }
    }

    /// The list for an allocation of `bytes` bytes, if it goes there.
    fn collecting(&mut self, bytes: usize) -> Option<&mut Released> {
        self.released.as_mut().filter(|_| bytes >= FREE_LATER_MIN)
    }

    /// From now on, large buffers go to [`BufferPool::take_released`],
    /// which may hold `limit` bytes uncollected ([`released_limit`]),
    /// instead of being freed where they are released; with `None`, back
    /// to being freed, which frees what is waiting.
    pub(crate) fn collect_released(&mut self, limit: Option<usize>) {
        match limit {
            Some(limit) => {
                self.released_limit = limit;
                self.released.get_or_insert_with(Released::default);
            }
            None => self.released = None,
        }
    }

    /// Whether [`BufferPool::take_released`] would hand over anything.
    pub(crate) fn has_released(&self) -> bool {
        self.released.as_ref().is_some_and(|r| !r.is_empty())
    }

    /// The large buffers released since the last call, for the caller to
    /// free. Empty unless collecting.
    pub(crate) fn take_released(&mut self) -> Released {
        self.released
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_returned_buffer_is_reused_for_its_class() {
        let mut pool = BufferPool::default();
        let buf = pool.take(100);
        assert_eq!(buf.capacity(), class_size(0));
        let ptr = buf.as_ptr();
        pool.give(buf);
        assert_eq!(pool.pooled_bytes(), class_size(0));
        let again = pool.take(200);
        assert_eq!(again.as_ptr(), ptr);
        assert!(again.is_empty());
        assert_eq!(pool.pooled_bytes(), 0);
    }

    #[test]
    fn every_taken_buffer_fits_its_request() {
        let mut pool = BufferPool::default();
        for len in [0, 1, 255, 256, 257, 4096, 70_000, MAX_CLASS, MAX_CLASS + 1] {
            let buf = pool.take_zeroed(len);
            assert_eq!(buf.len(), len);
            pool.give(buf);
        }
        for len in [0, 1, 255, 256, 257, 4096, 70_000, MAX_CLASS] {
            assert!(pool.take(len).capacity() >= len);
        }
    }

    #[test]
    fn a_filled_buffer_reused_at_its_length_is_not_zeroed_again() {
        let mut pool = BufferPool::default();
        let mut buf = pool.take_filled(1000);
        assert_eq!(buf, vec![0; 1000], "fresh memory is zeroed");
        buf.fill(7);
        pool.give(buf);
        let again = pool.take_filled(900);
        assert_eq!(again, vec![7; 900], "kept as its last user left it");
        pool.give(again);
        let longer = pool.take_filled(1020);
        assert_eq!(&longer[..900], &[7; 900][..]);
        assert_eq!(&longer[900..], &[0; 120][..], "zeroed past what was there");
        pool.give(longer);
        assert!(pool.take(10).is_empty(), "take still gives an empty buffer");
    }

    #[test]
    fn only_class_sized_buffers_are_kept() {
        let mut pool = BufferPool::default();
        // Not a class size (a buffer the application grew): freed, so a
        // taken buffer's capacity is always what `capacity_for` says.
        pool.give(Vec::with_capacity(1000));
        pool.give(Vec::with_capacity(10));
        pool.give(Vec::with_capacity(MAX_CLASS * 2));
        assert_eq!(pool.pooled_bytes(), 0);
        pool.give(Vec::with_capacity(class_size(2)));
        assert_eq!(pool.pooled_bytes(), class_size(2));
        assert_eq!(pool.take(600).capacity(), capacity_for(600));
        for len in [0, 1, 300, 5000, MAX_CLASS] {
            assert_eq!(pool.take(len).capacity(), capacity_for(len));
        }
    }

    #[test]
    fn a_fresh_zeroed_buffer_has_its_class_capacity_and_only_zeros() {
        // Fresh buffers come from the allocator's zeroed memory
        // (`fresh_zeroed`): the same capacity, and so the same charge
        // against the memory limits, as a spare one of the class.
        let mut pool = BufferPool::default();
        for len in [0, 1, 300, 5000, MAX_CLASS, MAX_CLASS + 1, 3 << 20] {
            let filled = pool.take_filled(len);
            let zeroed = pool.take_zeroed(len);
            for buf in [&filled, &zeroed] {
                assert_eq!((buf.len(), buf.capacity()), (len, capacity_for(len)));
                assert!(buf.iter().all(|&b| b == 0), "{len} B: not all zeros");
            }
        }
    }

    #[test]
    fn a_megabyte_message_with_its_record_overhead_fits_the_megabyte_class() {
        let wire = (1 << 20) + 64 * 22;
        assert_eq!(capacity_for(wire), class_size(12));
        assert!(capacity_for(wire) < 2 << 20);
        assert_eq!(capacity_for(MAX_CLASS + 1), class_size(CLASSES - 1));
        assert_eq!(class_for_len(class_size(CLASSES - 1) + 1), None);
    }

    /// Bytes waiting in the released list (without taking them).
    fn waiting(pool: &BufferPool) -> usize {
        pool.released.as_ref().map_or(0, Released::bytes)
    }

    #[test]
    fn large_buffers_not_kept_wait_for_the_driver_when_it_collects() {
        let mut pool = BufferPool::default();
        // Not collecting (the default): freed where released.
        pool.give(Vec::with_capacity(MAX_CLASS * 2));
        pool.release_shared(bytes::Bytes::from(vec![1; FREE_LATER_MIN]));
        assert!(pool.take_released().is_empty());
        pool.collect_released(Some(MAX_RELEASED_BYTES));
        // Small ones are freed (or pooled) as before.
        pool.give(Vec::with_capacity(FREE_LATER_MIN - 1));
        pool.release_shared(bytes::Bytes::from(vec![1; 100]));
        let small = pool.take(1000);
        pool.give(small);
        assert!(pool.take_released().is_empty());
        assert_eq!(pool.pooled_bytes(), capacity_for(1000));
        // Large ones the pool does not keep wait.
        pool.give(Vec::with_capacity(FREE_LATER_MIN));
        pool.give(Vec::with_capacity(MAX_CLASS * 2));
        pool.release_shared(bytes::Bytes::from(vec![1; FREE_LATER_MIN]));
        let released = pool.take_released();
        assert_eq!(released.len(), 3);
        assert_eq!(released.bytes(), 2 * FREE_LATER_MIN + MAX_CLASS * 2);
        assert!(pool.take_released().is_empty(), "taken once");
    }

    #[test]
    fn a_large_class_buffer_the_full_pool_refuses_waits_too() {
        let mut pool = BufferPool::default();
        pool.collect_released(Some(MAX_RELEASED_BYTES));
        let largest = class_size(CLASSES - 1);
        let fit = MAX_POOLED_BYTES / largest;
        for _ in 0..fit + 2 {
            pool.give(Vec::with_capacity(largest));
        }
        assert_eq!(pool.pooled_bytes(), fit * largest);
        assert_eq!(pool.take_released().len(), 2);
    }

    #[test]
    fn what_waits_uncollected_is_bounded() {
        let mut pool = BufferPool::default();
        pool.collect_released(Some(MAX_RELEASED_BYTES));
        // Capacity only: the allocator maps these pages, nobody touches
        // them.
        let big = MAX_RELEASED_BYTES / 3;
        for _ in 0..10 {
            pool.give(Vec::with_capacity(big));
            assert!(waiting(&pool) <= MAX_RELEASED_BYTES + big);
        }
        assert!(waiting(&pool) > 0, "the newest is still handed out");
        pool.collect_released(None);
        assert_eq!(waiting(&pool), 0, "turned off: freed");
    }

    #[test]
    fn the_limit_leaves_room_for_the_largest_messages() {
        assert_eq!(released_limit(1 << 20), MAX_RELEASED_BYTES);
        assert_eq!(released_limit(256 << 20), 1 << 30);
        assert_eq!(released_limit(u64::MAX), usize::MAX);
        // A 256 MiB RPC's wire buffer and data wait together.
        let mut pool = BufferPool::default();
        pool.collect_released(Some(released_limit(256 << 20)));
        pool.give(Vec::with_capacity((256 << 20) + (1 << 20)));
        pool.give(Vec::with_capacity(256 << 20));
        assert_eq!(pool.take_released().len(), 2);
    }

    #[test]
    fn the_pool_is_bounded() {
        let mut pool = BufferPool::default();
        for _ in 0..2 * MAX_PER_CLASS {
            pool.give(Vec::with_capacity(class_size(0)));
        }
        assert_eq!(pool.pooled_bytes(), MAX_PER_CLASS * class_size(0));
        for _ in 0..100 {
            pool.give(Vec::with_capacity(class_size(CLASSES - 1)));
        }
        assert!(pool.pooled_bytes() <= MAX_POOLED_BYTES);
    }
}
