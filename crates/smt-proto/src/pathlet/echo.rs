//! The receiver's side of pathlet feedback: counts what believed PATH
//! packets say per `(pathlet, class)` and turns it into PATH_ECHO
//! packets (`docs/protocol.md` § 4, PATH). Which PATH to believe (one
//! whose datagram also carried a packet accepted under the peer's keys) is
//! the endpoint's decision; this only counts.

use std::collections::BTreeMap;

use crate::wire::{Bounded, EchoEntry, PathEchoRepr, PathRepr, PathletClass, MAX_ECHO_ENTRIES};

/// Counts for one peer since its last echo.
#[derive(Clone, Debug, Default)]
pub struct EchoCounter {
    entries: BTreeMap<PathletClass, EchoEntry>,
    overflow: bool,
    /// The last sequence number sent (echoes are numbered 1, 2, 3, …).
    sequence: u32,
}

impl EchoCounter {
    /// A counter with nothing counted (as `Default`).
    pub fn new() -> Self {
        Self::default()
    }

    /// A believed PATH from a datagram of `datagram_len` bytes whose last
    /// accepted DATA packet was message `last_id` (if any).
    pub fn record(&mut self, path: &PathRepr, datagram_len: usize, last_id: Option<u64>) {
        let len = u32::try_from(datagram_len).unwrap_or(u32::MAX);
        self.overflow |= path.overflow;
        for slot in path.slots.as_slice() {
            let e = self.entries.entry(slot.at).or_insert(EchoEntry {
                at: slot.at,
                ..EchoEntry::default()
            });
            e.bytes = e.bytes.saturating_add(len);
            if slot.ce {
                e.ce_bytes = e.ce_bytes.saturating_add(len);
            }
            e.queue_bytes = slot.queue_bytes;
            if last_id.is_some() {
                e.last_id = last_id;
            }
        }
    }

    /// The most bytes counted on one entry since the last echo (to decide
    /// when to echo: after about one window's worth).
    pub fn most_bytes(&self) -> u32 {
        self.entries.values().map(|e| e.bytes).max().unwrap_or(0)
    }

    /// Whether nothing was counted since the last echo.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The next echo, with up to 16 entries (the largest counts first; the
    /// rest wait for the next echo), or `None` with nothing counted.
    pub fn take_echo(
        &mut self,
        src_port: u16,
        dst_port: u16,
        key_phase: bool,
    ) -> Option<PathEchoRepr> {
        if self.entries.is_empty() {
            return None;
        }
        let mut order: Vec<PathletClass> = self.entries.keys().copied().collect();
        order.sort_by_key(|k| std::cmp::Reverse(self.entries[k].bytes));
        let mut entries = Bounded::new();
        for k in order.into_iter().take(MAX_ECHO_ENTRIES) {
            if let Some(e) = self.entries.remove(&k) {
                entries.push(e);
            }
        }
        self.sequence = self.sequence.wrapping_add(1);
        Some(PathEchoRepr {
            src_port,
            dst_port,
            key_phase,
            sequence: self.sequence,
            overflow: std::mem::take(&mut self.overflow),
            entries,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::PathSlot;

    fn at(pathlet: u16) -> PathletClass {
        PathletClass { pathlet, class: 0 }
    }

    fn path(slots: &[(u16, bool)]) -> PathRepr {
        let mut p = PathRepr::new(1, 2, 8);
        for &(pathlet, ce) in slots {
            p.slots.push(PathSlot {
                at: at(pathlet),
                ce,
                queue_bytes: u32::from(pathlet),
            });
        }
        p
    }

    #[test]
    fn counts_bytes_and_marks_per_pathlet_and_numbers_its_echoes() {
        let mut c = EchoCounter::new();
        assert!(c.take_echo(1, 2, false).is_none());
        c.record(&path(&[(1, true), (2, false)]), 1000, Some(6));
        c.record(&path(&[(1, false)]), 500, None);
        assert_eq!(c.most_bytes(), 1500);
        let e = c.take_echo(2, 1, false).unwrap();
        assert_eq!(e.sequence, 1);
        let got = e.entries.as_slice();
        assert_eq!(got.len(), 2);
        assert_eq!(
            got[0],
            EchoEntry {
                at: at(1),
                bytes: 1500,
                ce_bytes: 1000,
                queue_bytes: 1,
                last_id: Some(6),
            }
        );
        assert_eq!((got[1].at, got[1].bytes, got[1].ce_bytes), (at(2), 1000, 0));
        assert!(c.is_empty());
        c.record(&path(&[(3, false)]), 10, None);
        assert_eq!(c.take_echo(2, 1, false).unwrap().sequence, 2);
    }

    #[test]
    fn more_than_sixteen_entries_wait_for_the_next_echo() {
        let mut c = EchoCounter::new();
        for p in 0..20u16 {
            c.record(&path(&[(p, false)]), 100 + usize::from(p), None);
        }
        let first = c.take_echo(2, 1, false).unwrap();
        assert_eq!(first.entries.len(), 16);
        assert_eq!(first.entries.as_slice()[0].at, at(19), "largest first");
        assert_eq!(c.take_echo(2, 1, false).unwrap().entries.len(), 4);
    }
}
