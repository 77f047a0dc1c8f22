//! The NIC's flow-context table: a bounded number of slots, shared by all
//! transmit queues.
//!
//! The table never evicts on its own, as an autonomous-offload NIC does
//! not: a context lives until a destroy descriptor frees its slot, and a
//! create finding the table full is refused. Choosing which context to
//! give up when memory runs out is the host's job
//! ([`ContextPlanner`](crate::ContextPlanner)), which can order the
//! destroy before the segments that follow it.
//!
//! Each context has its own lock, taken for one descriptor at a time: the
//! NIC applies a descriptor to a context atomically, but nothing orders
//! descriptors of different queues that name the same context.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::context::FlowContext;
use crate::counters::DropReason;
use crate::descriptor::ContextId;

/// Bounded, lockable map from slot to flow context.
#[derive(Debug)]
pub(crate) struct ContextTable {
    capacity: usize,
    slots: Mutex<Slots>,
}

#[derive(Debug, Default)]
struct Slots {
    live: HashMap<ContextId, Arc<Mutex<FlowContext>>>,
    peak: usize,
}

impl ContextTable {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            capacity,
            slots: Mutex::default(),
        }
    }

    /// Installs `context` in slot `ctx` if the slot is free and the table
    /// has room.
    pub(crate) fn create(&self, ctx: ContextId, context: FlowContext) -> Result<(), DropReason> {
        let mut slots = self.slots();
        if slots.live.contains_key(&ctx) {
            return Err(DropReason::BadDescriptor("create for a slot in use"));
        }
        if slots.live.len() >= self.capacity {
            return Err(DropReason::TableFull);
        }
        slots.live.insert(ctx, Arc::new(Mutex::new(context)));
        slots.peak = slots.peak.max(slots.live.len());
        Ok(())
    }

    /// Frees slot `ctx`.
    pub(crate) fn destroy(&self, ctx: ContextId) -> Result<(), DropReason> {
        match self.slots().live.remove(&ctx) {
            Some(_) => Ok(()),
            None => Err(DropReason::NoContext(ctx)),
        }
    }

    /// The context in slot `ctx`.
    pub(crate) fn find(&self, ctx: ContextId) -> Result<Arc<Mutex<FlowContext>>, DropReason> {
        let slots = self.slots();
        slots
            .live
            .get(&ctx)
            .cloned()
            .ok_or(DropReason::NoContext(ctx))
    }

    /// Contexts installed now.
    pub(crate) fn live(&self) -> usize {
        self.slots().live.len()
    }

    /// Most contexts installed at once so far.
    pub(crate) fn peak(&self) -> usize {
        self.slots().peak
    }

    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    fn slots(&self) -> MutexGuard<'_, Slots> {
        // A worker that panicked mid-update left no half-written entry:
        // every change is a single map operation.
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Locks one context for one descriptor.
pub(crate) fn lock(context: &Arc<Mutex<FlowContext>>) -> MutexGuard<'_, FlowContext> {
    context.lock().unwrap_or_else(PoisonError::into_inner)
}
