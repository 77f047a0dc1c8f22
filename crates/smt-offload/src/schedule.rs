//! Who decides which transmit queue the NIC reads next.
//!
//! A NIC reads each queue in order but gives no order across queues (seed
//! 001 §3.2). The deterministic [`Engine`](crate::Engine) asks a
//! [`Scheduler`] at every step, so a test chooses the interleaving: a fixed
//! rotation, a seeded random one, or every interleaving in turn.

use crate::descriptor::QueueId;
use crate::rng::SplitMix64;

/// Chooses the queue the NIC reads its next descriptor from.
pub trait Scheduler {
    /// `ready` lists the queues holding a descriptor, in ascending order,
    /// never empty. Returns an index into `ready`; an index past the end
    /// is read as the last queue.
    fn pick(&mut self, ready: &[QueueId]) -> usize;
}

/// Takes the ready queues in turn.
#[derive(Clone, Debug, Default)]
pub struct RoundRobin {
    last: Option<QueueId>,
}

impl Scheduler for RoundRobin {
    fn pick(&mut self, ready: &[QueueId]) -> usize {
        let next = ready.iter().position(|q| Some(*q) > self.last).unwrap_or(0);
        self.last = ready.get(next).copied();
        next
    }
}

/// A uniformly random ready queue at every step, from a seed.
#[derive(Clone, Debug)]
pub struct SeededRandom {
    rng: SplitMix64,
}

impl SeededRandom {
    /// The same seed gives the same sequence of choices.
    pub fn new(seed: u64) -> Self {
        Self {
            rng: SplitMix64::new(seed),
        }
    }
}

impl Scheduler for SeededRandom {
    fn pick(&mut self, ready: &[QueueId]) -> usize {
        self.rng.below(ready.len() as u64) as usize
    }
}

/// Enumerates every interleaving of the queues' contents, one per run.
///
/// Call [`Exhaustive::next_schedule`] before each run and replay the same
/// descriptors into a fresh engine: the scheduler remembers the choices
/// made and, run after run, walks the tree of choices depth first, so the
/// number of runs is the number of distinct interleavings (for two queues
/// of `a` and `b` descriptors, (a+b)! / (a! b!)). The program between
/// runs must be deterministic; if a run offers a different number of ready
/// queues at a remembered choice, the choice is clamped and exploration
/// continues (it may then miss or repeat interleavings).
#[derive(Clone, Debug, Default)]
pub struct Exhaustive {
    /// (index chosen, queues that were ready) at each step of this run.
    path: Vec<(usize, usize)>,
    depth: usize,
    started: bool,
    runs: u64,
}

impl Exhaustive {
    /// Starts before the first interleaving.
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves to the next interleaving; `false` once all were run.
    pub fn next_schedule(&mut self) -> bool {
        self.path.truncate(self.depth);
        self.depth = 0;
        if !self.started {
            self.started = true;
            self.runs = 1;
            return true;
        }
        while let Some((chosen, options)) = self.path.pop() {
            if chosen + 1 < options {
                self.path.push((chosen + 1, options));
                self.runs += 1;
                return true;
            }
        }
        false
    }

    /// Interleavings started so far.
    pub fn runs(&self) -> u64 {
        self.runs
    }
}

impl Scheduler for Exhaustive {
    fn pick(&mut self, ready: &[QueueId]) -> usize {
        let chosen = match self.path.get_mut(self.depth) {
            Some((chosen, options)) => {
                *options = ready.len();
                (*chosen).min(ready.len() - 1)
            }
            None => {
                self.path.push((0, ready.len()));
                0
            }
        };
        self.depth += 1;
        chosen
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Drives a scheduler over queues of the given lengths and returns the
    /// order in which queues were read.
    fn interleave(s: &mut dyn Scheduler, lens: &[usize]) -> Vec<u16> {
        let mut left = lens.to_vec();
        let mut order = Vec::new();
        loop {
            let ready: Vec<QueueId> = (0..left.len())
                .filter(|&q| left[q] > 0)
                .map(|q| QueueId(q as u16))
                .collect();
            if ready.is_empty() {
                return order;
            }
            let q = ready[s.pick(&ready).min(ready.len() - 1)];
            left[q.index()] -= 1;
            order.push(q.0);
        }
    }

    #[test]
    fn exhaustive_visits_every_interleaving_once() {
        let mut ex = Exhaustive::new();
        let mut seen = std::collections::BTreeSet::new();
        while ex.next_schedule() {
            assert!(seen.insert(interleave(&mut ex, &[3, 2])));
        }
        // 5! / (3! 2!) = 10.
        assert_eq!(seen.len(), 10);
        assert_eq!(ex.runs(), 10);
        let mut three = Exhaustive::new();
        let mut n = 0;
        while three.next_schedule() {
            interleave(&mut three, &[2, 2, 1]);
            n += 1;
        }
        // 5! / (2! 2! 1!) = 30.
        assert_eq!(n, 30);
    }

    #[test]
    fn round_robin_alternates() {
        assert_eq!(
            interleave(&mut RoundRobin::default(), &[3, 1, 2]),
            [0, 1, 2, 0, 2, 0]
        );
    }

    #[test]
    fn seeded_random_repeats_per_seed() {
        let a = interleave(&mut SeededRandom::new(7), &[20, 20]);
        let b = interleave(&mut SeededRandom::new(7), &[20, 20]);
        let c = interleave(&mut SeededRandom::new(8), &[20, 20]);
        assert_eq!(a, b);
        assert_ne!(a, c);
    }
}
