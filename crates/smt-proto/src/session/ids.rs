use super::Role;

/// Hands out message IDs for RPCs this side starts: strictly increasing,
/// never reused under one key, with this side's role bit as the low bit.
#[derive(Clone, Debug)]
pub struct IdAllocator {
    next: u64,
    limit: u64,
}

impl IdAllocator {
    /// IDs start at 2 (client) or 3 (server) and stay below `limit`.
    pub fn new(role: Role, limit: u64) -> Self {
        Self {
            next: 2 | role.id_bit(),
            limit,
        }
    }

    /// The next ID, or `None` once the space is used up.
    pub fn allocate(&mut self) -> Option<u64> {
        if self.next >= self.limit {
            return None;
        }
        let id = self.next;
        self.next += 2;
        Some(id)
    }

    /// Whether `id` (of this side's parity) has been handed out already.
    pub fn was_allocated(&self, id: u64) -> bool {
        id < self.next
    }

    /// IDs this allocator hands out in all.
    pub fn capacity(&self) -> u64 {
        self.limit / 2
    }

    /// IDs still available.
    pub fn remaining(&self) -> u64 {
        self.limit.saturating_sub(self.next).div_ceil(2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_never_repeat_and_run_out_cleanly() {
        let mut a = IdAllocator::new(Role::Server, 16);
        let ids: Vec<u64> = std::iter::from_fn(|| a.allocate()).collect();
        assert_eq!(ids, [3, 5, 7, 9, 11, 13, 15]);
        assert_eq!(a.allocate(), None);
        assert_eq!(a.remaining(), 0);
    }
}
