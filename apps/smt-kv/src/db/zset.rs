//! Sorted set values: members with scores, ordered by score and then by
//! member bytes, as Redis orders them.
//!
//! Two indexes of the same pairs: member → score (lookups) and an ordered
//! set of (score, member) (ranges, pops). Member bytes are shared between
//! the two (`Bytes` is reference counted).

use std::cmp::Ordering;
use std::collections::{BTreeSet, HashMap};

use bytes::Bytes;

/// A score: a float that is never NaN (commands refuse NaN before it gets
/// here), and never `-0`: Redis 7.0 keeps a small sorted set's scores as
/// text in a listpack, which stores "-0" as the integer 0, so a score of
/// `-0` reads back as `0`.
#[derive(Clone, Copy, Debug)]
pub struct Score(f64);

impl Score {
    /// `None` for NaN; `-0` becomes `0`.
    pub fn new(value: f64) -> Option<Self> {
        let value = if value == 0.0 { 0.0 } else { value };
        (!value.is_nan()).then_some(Self(value))
    }

    /// The score as a float (never NaN).
    pub fn get(self) -> f64 {
        self.0
    }
}

impl PartialEq for Score {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Score {}

impl PartialOrd for Score {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Score {
    fn cmp(&self, other: &Self) -> Ordering {
        // Never NaN (see `new`), so the partial order is total.
        self.0.partial_cmp(&other.0).unwrap_or(Ordering::Equal)
    }
}

/// A sorted set value.
#[derive(Debug, Default)]
pub struct ZSet {
    scores: HashMap<Bytes, Score, foldhash::fast::RandomState>,
    order: BTreeSet<(Score, Bytes)>,
}

impl ZSet {
    /// Number of members.
    pub fn len(&self) -> usize {
        self.scores.len()
    }

    /// Whether it has no member (the key is then removed).
    pub fn is_empty(&self) -> bool {
        self.scores.is_empty()
    }

    /// The score of `member`, if it is in the set.
    pub fn score(&self, member: &[u8]) -> Option<Score> {
        self.scores.get(member).copied()
    }

    /// Sets `member`'s score; `true` if the member is new.
    pub fn insert(&mut self, member: &[u8], score: Score) -> bool {
        if let Some(old) = self.scores.get_mut(member) {
            // `scores` and `order` hold the same pairs: `take` finds it,
            // and the member's bytes move over instead of being copied.
            let key = self.order.take(&(*old, Bytes::copy_from_slice(member)));
            let bytes = key.map_or_else(|| Bytes::copy_from_slice(member), |(_, m)| m);
            *old = score;
            self.order.insert((score, bytes));
            return false;
        }
        let bytes = Bytes::copy_from_slice(member);
        self.scores.insert(bytes.clone(), score);
        self.order.insert((score, bytes));
        true
    }

    /// Removes `member`; `true` if it was there.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        let Some((bytes, score)) = self.scores.remove_entry(member) else {
            return false;
        };
        self.order.remove(&(score, bytes));
        true
    }

    /// Removes and returns the lowest (`max` false) or highest member.
    pub fn pop(&mut self, max: bool) -> Option<(Bytes, Score)> {
        let (score, member) = if max {
            self.order.pop_last()?
        } else {
            self.order.pop_first()?
        };
        self.scores.remove(&member);
        Some((member, score))
    }

    /// Members ranked `first..=last` (positions already inside the set),
    /// counted from the lowest score, or from the highest with `rev`.
    /// The walk starts at the nearer end of the order (the set has no
    /// rank index): it costs the distance from that end plus the count.
    pub fn range(&self, first: usize, last: usize, rev: bool) -> Vec<(&Bytes, Score)> {
        let count = last + 1 - first;
        let from_end = self.len().saturating_sub(last + 1);
        let pairs = self.order.iter().map(|(s, m)| (m, *s));
        if first <= from_end {
            return match rev {
                false => pairs.skip(first).take(count).collect(),
                true => pairs.rev().skip(first).take(count).collect(),
            };
        }
        let mut near: Vec<_> = match rev {
            false => pairs.rev().skip(from_end).take(count).collect(),
            true => pairs.skip(from_end).take(count).collect(),
        };
        near.reverse();
        near
    }

    /// Bytes held, roughly (for INFO): members plus 8 per score.
    pub fn bytes(&self) -> usize {
        self.scores.keys().map(|m| m.len() + 8).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: f64) -> Score {
        Score::new(v).unwrap()
    }

    #[test]
    fn ranges_read_the_same_from_either_end() {
        let mut z = ZSet::default();
        for i in 0..50u32 {
            z.insert(format!("m{i:02}").as_bytes(), s(f64::from(i % 7)));
        }
        let all: Vec<Bytes> = z
            .range(0, 49, false)
            .into_iter()
            .map(|(m, _)| m.clone())
            .collect();
        for (first, last) in [(0, 0), (0, 49), (3, 10), (40, 49), (49, 49), (20, 30)] {
            let fwd: Vec<Bytes> = z
                .range(first, last, false)
                .into_iter()
                .map(|(m, _)| m.clone())
                .collect();
            assert_eq!(fwd, all[first..=last], "{first}..={last}");
            let rev: Vec<Bytes> = z
                .range(first, last, true)
                .into_iter()
                .map(|(m, _)| m.clone())
                .collect();
            let want: Vec<Bytes> = all
                .iter()
                .rev()
                .skip(first)
                .take(last + 1 - first)
                .cloned()
                .collect();
            assert_eq!(rev, want, "rev {first}..={last}");
        }
    }

    #[test]
    fn ordered_by_score_then_member_and_updates_move_members() {
        let mut z = ZSet::default();
        assert!(z.insert(b"b", s(1.0)));
        assert!(z.insert(b"a", s(1.0)));
        assert!(z.insert(b"c", s(0.5)));
        assert!(!z.insert(b"c", s(2.0)));
        let names =
            |v: Vec<(&Bytes, Score)>| v.into_iter().map(|(m, _)| m.clone()).collect::<Vec<_>>();
        assert_eq!(names(z.range(0, 2, false)), [&b"a"[..], b"b", b"c"]);
        assert_eq!(names(z.range(0, 0, true)), [&b"c"[..]]);
        assert_eq!(names(z.range(2, 2, false)), [&b"c"[..]]);
        assert_eq!(names(z.range(1, 2, true)), [&b"b"[..], b"a"]);
        assert_eq!(z.pop(false).map(|(m, _)| m), Some(Bytes::from_static(b"a")));
        assert!(z.remove(b"c"));
        assert!(!z.remove(b"c"));
        assert_eq!(z.len(), 1);
        assert_eq!(z.score(b"b").map(Score::get), Some(1.0));
        assert!(Score::new(f64::NAN).is_none());
        assert_eq!(s(-0.0), s(0.0));
    }
}
