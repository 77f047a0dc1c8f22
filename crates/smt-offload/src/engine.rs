//! The deterministic engine: transmit queues as in-memory rings, read one
//! descriptor at a time in an order a [`Scheduler`] picks, on the caller's
//! thread. No clock, no threads, no randomness of its own.
//!
//! Call order: [`Engine::post`] descriptors to queues, then [`Engine::run`]
//! (or [`Engine::step`] queue by queue), then [`Engine::poll_wire`] for the
//! segments that left and [`Engine::counters`] for what happened.

use std::collections::VecDeque;
use std::fmt;

use crate::counters::{DropReason, TxCounters};
use crate::descriptor::{QueueId, TxDescriptor, WireSegment};
use crate::nic::process;
use crate::schedule::Scheduler;
use crate::table::ContextTable;

/// Size of the engine: queues and context-table slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EngineConfig {
    /// Transmit queues, numbered from 0.
    pub queues: u16,
    /// Flow contexts the NIC can hold at once.
    pub context_capacity: usize,
}

/// What one step did with the descriptor it read.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// A segment went out; [`Engine::poll_wire`] returns it.
    Sent,
    /// A control descriptor took effect.
    Applied,
    /// The descriptor was dropped and counted.
    Dropped(DropReason),
}

/// The offload engine driven step by step by its caller.
#[derive(Debug)]
pub struct Engine {
    table: ContextTable,
    queues: Vec<VecDeque<TxDescriptor>>,
    counters: Vec<TxCounters>,
    wire: VecDeque<WireSegment>,
}

impl Engine {
    /// An engine with empty queues and an empty context table.
    pub fn new(config: EngineConfig) -> Self {
        let queues = usize::from(config.queues);
        Self {
            table: ContextTable::new(config.context_capacity),
            queues: (0..queues).map(|_| VecDeque::new()).collect(),
            counters: vec![TxCounters::default(); queues],
            wire: VecDeque::new(),
        }
    }

    /// Appends `desc` to `queue`. Bounded work.
    pub fn post(&mut self, queue: QueueId, desc: TxDescriptor) -> Result<(), PostError> {
        let queues = self.queues.len();
        let ring = self
            .queues
            .get_mut(queue.index())
            .ok_or(PostError::NoSuchQueue { queue, queues })?;
        ring.push_back(desc);
        Ok(())
    }

    /// Reads and applies the next descriptor of `queue`; `None` if the
    /// queue is empty or does not exist. Work bounded by one segment.
    pub fn step(&mut self, queue: QueueId) -> Option<Outcome> {
        let desc = self.queues.get_mut(queue.index())?.pop_front()?;
        let counters = &mut self.counters[queue.index()];
        Some(match process(&self.table, queue, desc, counters) {
            Ok(Some(segment)) => {
                self.wire.push_back(segment);
                Outcome::Sent
            }
            Ok(None) => Outcome::Applied,
            Err(reason) => Outcome::Dropped(reason),
        })
    }

    /// Steps until every queue is empty, asking `scheduler` which queue to
    /// read each time. Returns the number of steps.
    pub fn run(&mut self, scheduler: &mut dyn Scheduler) -> usize {
        let mut ready = Vec::with_capacity(self.queues.len());
        let mut steps = 0;
        loop {
            self.ready_queues(&mut ready);
            let Some(&last) = ready.last() else {
                return steps;
            };
            let queue = ready.get(scheduler.pick(&ready)).copied().unwrap_or(last);
            self.step(queue);
            steps += 1;
        }
    }

    /// Steps `queue` alone until it is empty.
    pub fn drain(&mut self, queue: QueueId) {
        while self.step(queue).is_some() {}
    }

    /// The next segment that left the NIC, oldest first.
    pub fn poll_wire(&mut self) -> Option<WireSegment> {
        self.wire.pop_front()
    }

    /// Counters of all queues summed.
    pub fn counters(&self) -> TxCounters {
        let mut sum = TxCounters::default();
        for queue in &self.counters {
            sum.add(queue);
        }
        sum
    }

    /// Counters of one queue.
    pub fn queue_counters(&self, queue: QueueId) -> Option<&TxCounters> {
        self.counters.get(queue.index())
    }

    /// Flow contexts installed now.
    pub fn contexts_live(&self) -> usize {
        self.table.live()
    }

    /// Most flow contexts installed at once so far.
    pub fn contexts_peak(&self) -> usize {
        self.table.peak()
    }

    /// Whether every queue is empty.
    pub fn is_idle(&self) -> bool {
        self.queues.iter().all(VecDeque::is_empty)
    }

    fn ready_queues(&self, out: &mut Vec<QueueId>) {
        out.clear();
        let ready = self
            .queues
            .iter()
            .enumerate()
            .filter(|(_, q)| !q.is_empty());
        // NOTE: at most u16::MAX queues exist (EngineConfig::queues).
        out.extend(ready.map(|(i, _)| QueueId(i as u16)));
    }
}

/// The caller posted to a queue the engine does not have.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PostError {
    /// `queue` is not below the number of queues.
    NoSuchQueue {
        /// The queue asked for.
        queue: QueueId,
        /// Queues the engine has.
        queues: usize,
    },
    /// The threaded engine's worker for that queue has stopped.
    Stopped(QueueId),
}

impl fmt::Display for PostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoSuchQueue { queue, queues } => write!(
                f,
                "queue {} does not exist: the engine has {queues} queues (0..{queues})",
                queue.0
            ),
            Self::Stopped(queue) => write!(f, "the worker of queue {} has stopped", queue.0),
        }
    }
}

impl std::error::Error for PostError {}
