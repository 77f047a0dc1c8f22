//! The core workloads and their records, as YCSB defines them, mapped to
//! Redis commands as YCSB's Redis binding does (a record is a hash).
//!
//! | workload | operations            | request distribution |
//! |---|---|---|
//! | A (update heavy) | 50% read, 50% update | scrambled Zipfian |
//! | B (read mostly)  | 95% read, 5% update  | scrambled Zipfian |
//! | C (read only)    | 100% read            | scrambled Zipfian |
//! | D (read latest)  | 95% read, 5% insert  | latest |
//!
//! read = `HGETALL key` (all fields), update = `HSET key fieldN value`
//! (one field, YCSB's default), insert = `HSET key field0 v0 … field9 v9`.
//! Keys are `user` followed by the FNV hash of the record number, so
//! inserts in order still scatter over the keyspace.

use super::zipf::{fnv1a64, Latest, Rng, ScrambledZipfian};

/// A YCSB core workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Workload {
    /// Update heavy: 50% reads, 50% updates, Zipfian keys.
    A,
    /// Read mostly: 95% reads, 5% updates, Zipfian keys.
    B,
    /// Read only, Zipfian keys.
    C,
    /// Read latest: 95% reads, 5% inserts, reads favour new keys.
    D,
}

impl Workload {
    /// Every workload, in order.
    pub const ALL: [Workload; 4] = [Workload::A, Workload::B, Workload::C, Workload::D];

    /// The letter, as tables and the command line name it.
    pub fn name(self) -> &'static str {
        match self {
            Self::A => "A",
            Self::B => "B",
            Self::C => "C",
            Self::D => "D",
        }
    }

    /// The share of reads; the rest are updates (A–C) or inserts (D).
    fn read_share(self) -> f64 {
        match self {
            Self::A => 0.5,
            Self::B | Self::D => 0.95,
            Self::C => 1.0,
        }
    }

    /// The workload named `s` (`a` or `A`), if any.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|w| w.name().eq_ignore_ascii_case(s))
    }
}

/// One operation to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Read all fields of this record.
    Read(u64),
    /// Record, field index.
    Update(u64, usize),
    /// Insert this new record.
    Insert(u64),
}

/// The shape of a record: `fields` fields holding `value_size` bytes in
/// all (YCSB's default record is 10 fields of 100 B, its "1 KB" value).
#[derive(Clone, Copy, Debug)]
pub struct RecordShape {
    /// Fields per record.
    pub fields: usize,
    /// Bytes of all fields together.
    pub value_size: usize,
}

impl RecordShape {
    /// Field `i`'s length: the value split as evenly as possible.
    pub fn field_len(&self, i: usize) -> usize {
        let base = self.value_size / self.fields;
        base + usize::from(i < self.value_size % self.fields)
    }
}

/// The key of record `n`.
pub fn key(n: u64) -> Vec<u8> {
    format!("user{}", fnv1a64(n)).into_bytes()
}

/// The names `field0`, `field1`, …
pub fn field_names(fields: usize) -> Vec<Vec<u8>> {
    (0..fields)
        .map(|i| format!("field{i}").into_bytes())
        .collect()
}

/// Random printable bytes to cut field values from (generating fresh
/// random bytes per operation would cost the client more than the server).
#[derive(Debug)]
pub struct ValuePool(Vec<u8>);

impl ValuePool {
    /// 64 KiB of printable bytes from `seed`.
    pub fn new(seed: u64) -> Self {
        let mut rng = Rng::new(seed);
        Self(
            (0..64 * 1024)
                .map(|_| b'!' + (rng.below(94) as u8))
                .collect(),
        )
    }

    /// `len` bytes starting somewhere random.
    pub fn value(&self, len: usize, rng: &mut Rng) -> &[u8] {
        let len = len.min(self.0.len());
        let start = rng.below((self.0.len() - len + 1) as u64) as usize;
        &self.0[start..start + len]
    }
}

/// Chooses operations for one client thread.
#[derive(Debug)]
pub struct Chooser {
    workload: Workload,
    fields: usize,
    zipf: ScrambledZipfian,
    latest: Latest,
}

impl Chooser {
    /// A chooser for `workload` over `records` existing records of
    /// `fields` fields.
    pub fn new(workload: Workload, records: u64, fields: usize) -> Self {
        Self {
            workload,
            fields,
            zipf: ScrambledZipfian::new(records),
            latest: Latest::new(records),
        }
    }

    /// The next operation. `newest` is the newest record inserted so far;
    /// `next_insert` hands out new record numbers (workload D).
    pub fn next(&mut self, rng: &mut Rng, newest: u64, next_insert: impl FnOnce() -> u64) -> Op {
        let read = rng.unit() < self.workload.read_share();
        match (self.workload, read) {
            (Workload::D, true) => Op::Read(self.latest.next(newest, rng)),
            (Workload::D, false) => Op::Insert(next_insert()),
            (_, true) => Op::Read(self.zipf.next(rng)),
            (_, false) => Op::Update(self.zipf.next(rng), rng.below(self.fields as u64) as usize),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_split_evenly_over_the_fields() {
        for size in [64, 1000, 1024, 4096] {
            let shape = RecordShape {
                fields: 10,
                value_size: size,
            };
            let total: usize = (0..10).map(|i| shape.field_len(i)).sum();
            assert_eq!(total, size);
        }
    }

    #[test]
    fn workload_mixes_have_their_read_share() {
        let mut rng = Rng::new(1);
        for (w, share) in [(Workload::A, 0.5), (Workload::B, 0.95), (Workload::C, 1.0)] {
            let mut c = Chooser::new(w, 1000, 10);
            let reads = (0..20_000)
                .filter(|_| matches!(c.next(&mut rng, 999, || 0), Op::Read(_)))
                .count() as f64
                / 20_000.0;
            assert!((reads - share).abs() < 0.02, "{w:?}: {reads}");
        }
        let mut d = Chooser::new(Workload::D, 1000, 10);
        let mut next = 1000;
        let inserts = (0..20_000)
            .filter(|_| {
                matches!(
                    d.next(&mut rng, next - 1, || {
                        next += 1;
                        next - 1
                    }),
                    Op::Insert(_)
                )
            })
            .count();
        assert!((900..1100).contains(&inserts), "{inserts}");
    }
}
