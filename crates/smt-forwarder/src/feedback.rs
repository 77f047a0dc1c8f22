//! Per-path congestion feedback, computed for every packet as it leaves
//! its path's queue, and the hook that will write it into the packet.
//!
//! MTP (Stephens et al., HotNets 2021, § 3.1.3) has devices write `(pathlet, traffic class,
//! feedback)` into each packet, which the receiver echoes so the sender
//! keeps a window per pathlet and class. In SMT that is the PATH packet a
//! sender puts first in a datagram, with empty slots reserved
//! (`docs/protocol.md` § 4, PATH): the forwarder fills the next slot of a
//! packet that carries one ([`PathFeedback::slot`], written in place, so a
//! datagram never grows), then hands the feedback to a [`FeedbackSink`]
//! (an observer hook; the default does nothing more).

use smt_proto::wire::{PathSlot, PathletClass};

use crate::meta::Meta;

/// What one path says about itself as a packet leaves its queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathFeedback {
    /// The pathlet (this forwarder's path index).
    pub path: u8,
    /// The packet's traffic class on that path.
    pub class: u8,
    /// Bytes still queued behind it.
    pub queue_bytes: u32,
    /// Packets still queued behind it.
    pub queue_packets: u32,
    /// ECN-style congestion mark: the queue held more than the marking
    /// threshold when the packet arrived (DCTCP, RFC 8257 § 3.1).
    pub ce: bool,
}

impl PathFeedback {
    /// The PATH slot this device writes: pathlet `base + path`.
    pub fn slot(&self, base: u16) -> PathSlot {
        PathSlot {
            at: PathletClass {
                pathlet: base.wrapping_add(u16::from(self.path)),
                class: self.class,
            },
            ce: self.ce,
            queue_bytes: self.queue_bytes,
        }
    }
}

/// Where path feedback goes. Called once per packet as it leaves its
/// queue, after the forwarder wrote its PATH slot (if the packet carries
/// a PATH), with the packet's bytes.
pub trait FeedbackSink: Send {
    /// Takes one packet's feedback; may rewrite `packet` in place (it
    /// leaves as `packet` holds it on return).
    fn feedback(&mut self, meta: &Meta, feedback: &PathFeedback, packet: &mut Vec<u8>);
}

/// The default sink: leaves the packet as it is; the forwarder's
/// statistics count marks, queue occupancy and PATH slots per path.
#[derive(Clone, Copy, Debug, Default)]
pub struct CountMarks;

impl FeedbackSink for CountMarks {
    fn feedback(&mut self, _: &Meta, _: &PathFeedback, _: &mut Vec<u8>) {}
}
