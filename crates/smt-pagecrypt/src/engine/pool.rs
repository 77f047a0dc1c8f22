//! A queue's pool of pre-made crypto contexts (Yoon & Moon, CoNEXT 2025, §3.4).

use super::ContextId;

/// Contexts `first .. first + depth`, each free or held by one request.
#[derive(Debug)]
pub(super) struct ContextPool {
    first: u32,
    free: Vec<ContextId>,
    held: Vec<bool>,
}

impl ContextPool {
    pub(super) fn new(first: u32, depth: usize) -> Self {
        Self {
            first,
            free: (0..depth as u32)
                .rev()
                .map(|i| ContextId(first + i))
                .collect(),
            held: vec![false; depth],
        }
    }

    pub(super) fn take(&mut self) -> Option<ContextId> {
        let c = self.free.pop()?;
        self.held[(c.0 - self.first) as usize] = true;
        Some(c)
    }

    /// Returns a held context; anything else is ignored.
    pub(super) fn give_back(&mut self, c: ContextId) {
        if self.holds(c) {
            self.held[(c.0 - self.first) as usize] = false;
            self.free.push(c);
        }
    }

    pub(super) fn holds(&self, c: ContextId) -> bool {
        c.0.checked_sub(self.first)
            .and_then(|i| self.held.get(i as usize))
            .copied()
            .unwrap_or(false)
    }

    pub(super) fn depth(&self) -> usize {
        self.held.len()
    }

    pub(super) fn free(&self) -> usize {
        self.free.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contexts_are_exclusive_until_given_back() {
        let mut pool = ContextPool::new(10, 2);
        let a = pool.take().unwrap();
        let b = pool.take().unwrap();
        assert_ne!(a, b);
        assert!(pool.take().is_none());
        assert!(pool.holds(a) && pool.holds(b) && !pool.holds(ContextId(9)));
        pool.give_back(a);
        pool.give_back(a);
        assert_eq!(pool.free(), 1);
        assert_eq!(pool.take(), Some(a));
    }
}
