//! Per-path congestion feedback, computed for every packet as it leaves
//! its path's queue, and the hook that will write it into the packet.
//!
//! Seed 004 (MTP § 3.1.3) has devices append `(pathlet, traffic class,
//! feedback)` to a list in each packet, which the receiver echoes in its
//! acknowledgements so the sender keeps a window per pathlet and class.
//! SMT's header has no such list yet (issue #25 item 3: an optional,
//! authenticated-where-it-must-be extension, built on the protocol core's
//! refactor). Until then the forwarder computes the feedback and hands it
//! to a [`FeedbackSink`], whose default only counts it; the extension's
//! writer will be a sink that appends [`PathFeedback`] to the packet.

use crate::meta::Meta;

/// What one path says about itself as a packet leaves its queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathFeedback {
    /// The pathlet (this forwarder's path index).
    pub path: u8,
    /// The packet's traffic class on that path.
    pub class: u8,
    /// Bytes and packets still queued behind it.
    pub queue_bytes: u32,
    pub queue_packets: u32,
    /// ECN-style congestion mark: the queue held more than the marking
    /// threshold when the packet arrived (DCTCP, RFC 8257 § 3.1).
    pub ce: bool,
}

/// Where path feedback goes. Called once per packet as it leaves its
/// queue, with the packet's bytes, which it may change (the future
/// extension appends to them; nothing today does).
pub trait FeedbackSink: Send {
    fn feedback(&mut self, meta: &Meta, feedback: &PathFeedback, packet: &mut Vec<u8>);
}

/// The default sink: leaves the packet as it is (the protocol has no
/// place for the feedback yet); the forwarder's statistics count marks
/// and queue occupancy per path.
#[derive(Clone, Copy, Debug, Default)]
pub struct CountMarks;

impl FeedbackSink for CountMarks {
    fn feedback(&mut self, _: &Meta, _: &PathFeedback, _: &mut Vec<u8>) {}
}
