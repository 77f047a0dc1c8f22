//! What the engine counts.

use std::sync::atomic::{AtomicU64, Ordering};

/// Declares the counters once: the snapshot struct and its atomic twin.
macro_rules! counters {
    ($($(#[$doc:meta])* $name:ident,)*) => {
        /// The engine's counters, summed over its queues.
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        #[non_exhaustive]
        pub struct EngineCounters {
            $($(#[$doc])* pub $name: u64,)*
        }

        #[derive(Debug, Default)]
        pub(super) struct SharedCounters {
            $(pub(super) $name: AtomicU64,)*
        }

        impl SharedCounters {
            pub(super) fn snapshot(&self) -> EngineCounters {
                EngineCounters { $($name: self.$name.load(Ordering::Relaxed),)* }
            }
        }

        impl EngineCounters {
            /// (name, value) pairs in declaration order, for printing.
            pub fn named(&self) -> Vec<(&'static str, u64)> {
                vec![$((stringify!($name), self.$name),)*]
            }
        }
    };
}

counters! {
    /// Doorbells rung (posts of one chain each).
    doorbells,
    /// Configuration WQEs applied: a context's key and tweak set.
    reconfigurations,
    /// Configuration WQEs that produced no completion (unsignaled).
    unsignaled,
    /// Completions of signaled configuration WQEs.
    config_completions,
    /// Completions of data WQEs.
    data_completions,
    /// Posts refused because the queue's pool had no free context.
    pool_exhausted,
    /// Pages that failed their CRC or padding check on `Open`.
    integrity_failures,
    /// Data WQEs on a context no configuration had set.
    unconfigured,
    /// Bytes through the crypto pipeline.
    bytes,
}
