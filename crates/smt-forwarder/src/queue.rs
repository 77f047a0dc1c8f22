//! A path's output queue: one FIFO per (traffic class, priority), deficit
//! round robin between classes, strict priority inside a class, a byte
//! limit with tail drop, and ECN-style marking above a threshold (MTP's
//! evaluation, § 5.1: 128-packet buffer, marking at 20 packets; DCTCP's rule,
//! RFC 8257 § 3.1, on the instantaneous queue).

use std::collections::VecDeque;
use std::time::Instant;

use crate::Packet;

/// Bytes a class may send per round of the deficit round robin.
const QUANTUM: u32 = 1500;

/// Queue occupancy and the mark decision for one packet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Occupancy {
    /// Bytes queued when the packet arrived (itself excluded).
    pub bytes: u64,
    /// Packets queued when the packet arrived (itself excluded).
    pub packets: u32,
    /// The queue held more than the marking threshold when the packet
    /// arrived (DCTCP's CE mark).
    pub ce: bool,
}

/// A queued packet with when it arrived and what the queue was then.
#[derive(Debug)]
pub(crate) struct Queued {
    pub packet: Packet,
    pub arrived: Instant,
    pub at_arrival: Occupancy,
}

#[derive(Debug)]
struct Class {
    /// One FIFO per priority; the last is the most urgent.
    fifos: Vec<VecDeque<Queued>>,
    deficit: u32,
}

impl Class {
    fn is_empty(&self) -> bool {
        self.fifos.iter().all(VecDeque::is_empty)
    }

    fn head_mut(&mut self) -> Option<&mut VecDeque<Queued>> {
        self.fifos.iter_mut().rev().find(|f| !f.is_empty())
    }
}

/// The output queue of one path.
#[derive(Debug)]
pub(crate) struct PathQueue {
    classes: Vec<Class>,
    /// Next class the round robin visits.
    turn: usize,
    bytes: u64,
    packets: u32,
    limit_bytes: u64,
    mark_packets: u32,
}

impl PathQueue {
    pub(crate) fn new(
        classes: usize,
        priorities: usize,
        limit_bytes: u64,
        mark_packets: u32,
    ) -> Self {
        let class = || Class {
            fifos: (0..priorities.max(1)).map(|_| VecDeque::new()).collect(),
            deficit: 0,
        };
        Self {
            classes: (0..classes.max(1)).map(|_| class()).collect(),
            turn: 0,
            bytes: 0,
            packets: 0,
            limit_bytes,
            mark_packets,
        }
    }

    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    pub(crate) fn packets(&self) -> u32 {
        self.packets
    }

    /// Queues `packet` in its class and priority (clamped to what exists),
    /// or gives it back when the queue is full (tail drop).
    pub(crate) fn push(&mut self, now: Instant, packet: Packet) -> Result<Occupancy, Packet> {
        let len = packet.bytes.len() as u64;
        if self.bytes + len > self.limit_bytes {
            return Err(packet);
        }
        let at_arrival = Occupancy {
            bytes: self.bytes,
            packets: self.packets,
            ce: self.packets > self.mark_packets,
        };
        let class = usize::from(packet.class).min(self.classes.len() - 1);
        let fifos = &mut self.classes[class].fifos;
        let prio = usize::from(packet.queue).min(fifos.len() - 1);
        fifos[prio].push_back(Queued {
            packet,
            arrived: now,
            at_arrival,
        });
        self.bytes += len;
        self.packets += 1;
        Ok(at_arrival)
    }

    /// The arrival time of the packet [`PathQueue::pop`] would return.
    pub(crate) fn next_arrival(&self) -> Option<Instant> {
        // Any non-empty class may be next; the earliest arrival among
        // the heads is a lower bound, which is all a timer needs.
        self.classes
            .iter()
            .filter_map(|c| c.fifos.iter().rev().find_map(|f| f.front()))
            .map(|q| q.arrived)
            .min()
    }

    /// The next packet to send: deficit round robin between non-empty
    /// classes, the most urgent priority first within a class.
    pub(crate) fn pop(&mut self) -> Option<Queued> {
        if self.packets == 0 {
            return None;
        }
        let n = self.classes.len();
        loop {
            let class = &mut self.classes[self.turn];
            if class.is_empty() {
                class.deficit = 0;
                self.turn = (self.turn + 1) % n;
                continue;
            }
            let len = class
                .fifos
                .iter()
                .rev()
                .find_map(|f| f.front())
                .map_or(0, |q| q.packet.bytes.len() as u32);
            if class.deficit < len {
                class.deficit += QUANTUM;
                self.turn = (self.turn + 1) % n;
                continue;
            }
            class.deficit -= len;
            let q = class.head_mut()?.pop_front()?;
            self.bytes -= q.packet.bytes.len() as u64;
            self.packets -= 1;
            return Some(q);
        }
    }
}
