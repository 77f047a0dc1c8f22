//! Transmit counters, named after the Linux mlx5 driver's ethtool
//! statistics where it has one for the event, and why a descriptor was
//! dropped.
//!
//! mlx5 keeps these per send queue and sums them for `ethtool -S`; the
//! engine does the same ([`TxCounters::add`]).

use std::fmt;

use crate::descriptor::ContextId;

/// Declares a counter struct with one `u64` per name, plus the code that
/// walks all of them, so a new counter cannot be left out of a sum.
macro_rules! counters {
    ($(#[$sdoc:meta])* $ty:ident { $($(#[$doc:meta])* $name:ident,)* }) => {
        $(#[$sdoc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        #[non_exhaustive]
        pub struct $ty {
            $($(#[$doc])* pub $name: u64,)*
        }

        impl $ty {
            /// Adds another queue's (or context's) counters to these.
            pub fn add(&mut self, other: &$ty) {
                $(self.$name += other.$name;)*
            }

            /// (name, value) pairs in declaration order, for printing.
            pub fn named(&self) -> Vec<(&'static str, u64)> {
                vec![$((stringify!($name), self.$name),)*]
            }
        }

        impl fmt::Display for $ty {
            /// One `name: value` per line, zeros left out.
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                for (name, value) in self.named() {
                    if value != 0 {
                        writeln!(f, "{name}: {value}")?;
                    }
                }
                Ok(())
            }
        }
    };
}

counters! {
    /// Transmit-side counters of one queue, or of all queues summed.
    ///
    /// The first group carries mlx5's names and meanings as far as the
    /// model has the event; the rest are the model's own (mlx5 has no
    /// counter for them because its driver never posts such
    /// descriptors).
    TxCounters {
    /// Packets (after TSO) with TLS payload the engine encrypted.
    tx_tls_encrypted_packets,
    /// TLS payload bytes the engine encrypted (record headers and tags
    /// included, as mlx5 counts the skb's payload).
    tx_tls_encrypted_bytes,
    /// Flow contexts created.
    tx_tls_ctx,
    /// Flow contexts destroyed.
    tx_tls_del,
    /// Out-of-order segments handled: resyncs that put a context back in
    /// step.
    tx_tls_ooo,
    /// Chunks of a record's start replayed to rebuild GCM state, at most
    /// [`DUMP_CHUNK`](crate::DUMP_CHUNK) bytes each (mlx5: one DUMP WQE per
    /// MTU-sized fragment).
    tx_tls_dump_packets,
    /// Bytes in those chunks.
    tx_tls_dump_bytes,
    /// Bytes resynchronised: for each resync, the offset into the record
    /// it restarts at.
    tx_tls_resync_bytes,
    /// Segments dropped because their context could not be synchronised:
    /// the resync before them lacked the record's start.
    tx_tls_drop_no_sync_data,
    /// Model only: descriptors naming a context the table does not hold.
    tx_tls_drop_no_ctx,
    /// Model only: segments in which the context did not find a TLS 1.3
    /// record header where it expected one; the context needs a resync.
    tx_tls_drop_bad_framing,
    /// Model only: create-context descriptors refused because the table
    /// was full.
    tx_tls_ctx_full,
    /// Model only: descriptors that make no sense (an empty or oversized
    /// segment, a zero MSS, a create for a slot in use, a resync whose
    /// prefix is not the record's start).
    tx_tls_drop_bad_desc,
    }
}

counters! {
    /// Receive-side counters (the kTLS offload paper's RX offload), named after mlx5's
    /// `rx_tls_*` ethtool statistics.
    RxCounters {
    /// Packets the engine decrypted (and whose records' tags it checked)
    /// and marked: software skips their decryption.
    rx_tls_decrypted_packets,
    /// TLS payload bytes of those packets.
    rx_tls_decrypted_bytes,
    /// Receive contexts created.
    rx_tls_ctx,
    /// Receive contexts destroyed.
    rx_tls_del,
    /// Packets that carried a resync request: the engine had lost its
    /// place and found what looks like a record header at the packet's
    /// start.
    rx_tls_resync_req_pkt,
    /// Resync requests the host answered with the record's sequence
    /// number (mlx5: the async request ended with the tracked position).
    rx_tls_resync_req_end,
    /// Resync requests abandoned: the engine lost the candidate record's
    /// framing (another stream or a gap came first), or the host could
    /// not tell the record's sequence number.
    rx_tls_resync_req_skip,
    /// Resync answers that put the context back in sync.
    rx_tls_resync_res_ok,
    /// Resync answers for a request the engine no longer tracked.
    rx_tls_resync_res_skip,
    /// Records the engine could not verify (bad tag) or whose framing it
    /// lost (no record header where one was due); their packets are handed
    /// up as received.
    rx_tls_err,
    /// Model only: packets that did not continue the context's stream
    /// (a gap, reordering, another stream) and made it lose sync.
    rx_tls_ooo,
    }
}

impl TxCounters {
    /// Every descriptor dropped, for any reason.
    pub fn drops(&self) -> u64 {
        self.tx_tls_drop_no_sync_data
            + self.tx_tls_drop_no_ctx
            + self.tx_tls_drop_bad_framing
            + self.tx_tls_ctx_full
            + self.tx_tls_drop_bad_desc
    }

    /// Counts one drop under the counter its reason belongs to.
    pub(crate) fn count_drop(&mut self, reason: &DropReason) {
        let counter = match reason {
            DropReason::NoContext(_) => &mut self.tx_tls_drop_no_ctx,
            DropReason::TableFull => &mut self.tx_tls_ctx_full,
            DropReason::NoSyncData => &mut self.tx_tls_drop_no_sync_data,
            DropReason::BadFraming => &mut self.tx_tls_drop_bad_framing,
            DropReason::BadDescriptor(_) => &mut self.tx_tls_drop_bad_desc,
        };
        *counter += 1;
    }
}

/// Why the engine dropped a descriptor. Software (or whoever wrote the
/// queue) is at fault; the engine counts the drop and goes on.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DropReason {
    /// No context in that slot.
    NoContext(ContextId),
    /// A create-context descriptor found the table full.
    TableFull,
    /// The segment's context is unsynchronised: its last resync came
    /// without the record's start, or it lost the framing earlier.
    NoSyncData,
    /// Where the context expected a record header the segment had bytes
    /// that are not one; nothing of the segment is sent.
    BadFraming,
    /// The descriptor is malformed; the text says how.
    BadDescriptor(&'static str),
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoContext(ctx) => write!(f, "no flow context in slot {ctx:?}"),
            Self::TableFull => f.write_str("the flow-context table is full"),
            Self::NoSyncData => f.write_str("context unsynchronised (no record start)"),
            Self::BadFraming => f.write_str("no TLS record header where one was due"),
            Self::BadDescriptor(why) => write!(f, "malformed descriptor: {why}"),
        }
    }
}
