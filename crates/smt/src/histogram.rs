//! Durations in fine log-scale buckets ([`LatencyHistogram`]), and the
//! one definition of a quantile the workspace uses ([`quantile`]): of a
//! histogram's buckets here, of sorted samples in the benchmarks, the
//! hostile-network runs and the CLI's reports alike.
//!
//! Why six buckets per doubling: a quantile read from a bucket is off by
//! at most the bucket's width, and with bounds growing by 2^(1/6) that is
//! at most 12.25 % of the true value (factor-2 buckets were off by up to
//! 100 %: a true 107 ms p99 read as "≤ 131 ms"). Every sixth bound is a
//! power of two microseconds, so the factor-2 bounds of earlier versions
//! are all still there.

use std::fmt;
use std::time::Duration;

/// Bounds per doubling of the duration.
const PER_DOUBLING: usize = 6;

/// Doublings covered above 1 µs: up to 2^25 µs ≈ 33.6 s.
const DOUBLINGS: usize = 25;

/// 2^(j/6) for j in 0..6.
const STEPS: [f64; PER_DOUBLING] = [
    1.0,
    1.122_462_048_309_373,
    1.259_921_049_894_873_2,
    std::f64::consts::SQRT_2,
    1.587_401_051_968_199_4,
    1.781_797_436_280_678_5,
];

/// The upper bounds of the bounded buckets in nanoseconds: 1 µs × 2^(i/6),
/// rounded to the nanosecond.
const BOUNDS: [u64; LatencyHistogram::BOUNDED] = bounds();

const fn bounds() -> [u64; LatencyHistogram::BOUNDED] {
    let mut out = [0u64; LatencyHistogram::BOUNDED];
    let mut i = 0;
    while i < LatencyHistogram::BOUNDED {
        let micros = (1u64 << (i / PER_DOUBLING)) as f64 * STEPS[i % PER_DOUBLING];
        // Positive and below 2^36: the cast rounds half up exactly.
        out[i] = (micros * 1000.0 + 0.5) as u64;
        i += 1;
    }
    out
}

/// A histogram of durations (round trips, handler latencies) in
/// log-scale buckets: bucket `i` counts the durations above the previous
/// bound and at most 1 µs × 2^(i/6) (1 µs, 1.12 µs, 1.26 µs … 2^25 µs ≈
/// 33.6 s), and one more bucket those longer. A bucket's upper bound is
/// at most [`LatencyHistogram::MAX_ERROR`] above any duration in it (from
/// 1 µs up), so quantiles read from it are that close.
///
/// Recording is a binary search over 151 bounds: no allocation, no
/// floating point. 1.2 KB, fixed.
#[derive(Clone, PartialEq, Eq)]
pub struct LatencyHistogram {
    buckets: [u64; LatencyHistogram::BUCKETS],
    /// The sum of every duration recorded, in nanoseconds.
    sum_nanos: u64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self {
            buckets: [0; Self::BUCKETS],
            sum_nanos: 0,
        }
    }
}

impl fmt::Debug for LatencyHistogram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let filled: Vec<_> = self
            .filled()
            .map(|(bound, n)| (bound.map(|b| b.as_nanos()), n))
            .collect();
        f.debug_struct("LatencyHistogram")
            .field("count", &self.count())
            .field("sum", &self.sum())
            .field("filled_buckets_by_bound_nanos", &filled)
            .finish()
    }
}

impl LatencyHistogram {
    /// Buckets with an upper bound (1 µs to 2^25 µs, six per doubling).
    pub const BOUNDED: usize = DOUBLINGS * PER_DOUBLING + 1;
    /// Every bucket: the bounded ones and the overflow.
    pub const BUCKETS: usize = Self::BOUNDED + 1;
    /// The largest ratio between a bucket's upper bound and a duration it
    /// counts, less one (for durations of 1 µs and more): 2^(1/6) − 1.
    pub const MAX_ERROR: f64 = 0.1225;

    /// The upper bound of bucket `i` (`None` for the overflow bucket).
    pub fn bound(i: usize) -> Option<Duration> {
        BOUNDS.get(i).map(|&n| Duration::from_nanos(n))
    }

    /// Counts one duration.
    pub fn record(&mut self, d: Duration) {
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.buckets[Self::bucket_of(nanos)] += 1;
        self.sum_nanos = self.sum_nanos.saturating_add(nanos);
    }

    /// The smallest bucket whose bound holds `nanos`.
    fn bucket_of(nanos: u64) -> usize {
        BOUNDS.partition_point(|&bound| bound < nanos)
    }

    /// How many durations each bucket counted (not cumulative).
    pub fn buckets(&self) -> &[u64; Self::BUCKETS] {
        &self.buckets
    }

    /// The buckets that counted something: each one's upper bound (`None`
    /// for the overflow bucket) and count, shortest first.
    pub fn filled(&self) -> impl Iterator<Item = (Option<Duration>, u64)> + '_ {
        self.buckets
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(i, n)| (Self::bound(i), *n))
    }

    /// Durations recorded.
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// Their sum.
    pub fn sum(&self) -> Duration {
        Duration::from_nanos(self.sum_nanos)
    }

    /// Their mean (`None` when nothing was recorded).
    pub fn mean(&self) -> Option<Duration> {
        let n = self.count();
        (n > 0).then(|| Duration::from_nanos(self.sum_nanos / n))
    }

    /// An upper bound on the `q`-quantile (0.5: the median, 0.99: p99), by
    /// the rank [`quantile`] uses: the bound of the bucket that holds it,
    /// at most [`LatencyHistogram::MAX_ERROR`] above the true value. `None`
    /// when nothing was recorded or the quantile is in the overflow
    /// bucket.
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        let rank = rank(q, usize::try_from(self.count()).ok()?)?;
        let mut seen = 0u64;
        let i = self.buckets.iter().position(|&b| {
            seen += b;
            seen >= rank as u64
        })?;
        Self::bound(i)
    }

    /// Adds `other`'s durations to these (e.g. several endpoints' or
    /// shards' into one).
    pub fn merge(&mut self, other: &Self) {
        for (mine, theirs) in self.buckets.iter_mut().zip(other.buckets.iter()) {
            *mine += theirs;
        }
        self.sum_nanos = self.sum_nanos.saturating_add(other.sum_nanos);
    }

    // Only the serde form of `Stats` rebuilds a histogram.
    #[cfg_attr(not(feature = "serde"), allow(dead_code))]
    /// Adds `n` durations to the bucket that holds `d` (`None`: the
    /// overflow bucket); how a serialised form is read back.
    pub(crate) fn add_bucket(&mut self, d: Option<Duration>, n: u64) {
        let i = d.map_or(Self::BOUNDED, |d| {
            Self::bucket_of(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        });
        self.buckets[i] = self.buckets[i].saturating_add(n);
    }

    // Only the serde form of `Stats` rebuilds a histogram.
    #[cfg_attr(not(feature = "serde"), allow(dead_code))]
    /// Sets the sum (how a serialised form is read back).
    pub(crate) fn set_sum(&mut self, sum: Duration) {
        self.sum_nanos = u64::try_from(sum.as_nanos()).unwrap_or(u64::MAX);
    }
}

/// The `q`-quantile of `sorted` (ascending) by nearest rank: the smallest
/// sample with at least a fraction `q` of the samples at or below it
/// (`q` = 0.5: the median, 0.99: p99; 0 gives the smallest, 1 the
/// largest). `None` for no samples. The workspace's one definition:
/// [`LatencyHistogram::quantile`] ranks the same way.
pub fn quantile<T: Copy>(sorted: &[T], q: f64) -> Option<T> {
    let rank = rank(q, sorted.len())?;
    sorted.get(rank - 1).copied()
}

/// The 1-based nearest rank of the `q`-quantile among `n` samples
/// (`None` when `n` is 0).
fn rank(q: f64, n: usize) -> Option<usize> {
    if n == 0 {
        return None;
    }
    let q = if q.is_nan() { 0.5 } else { q.clamp(0.0, 1.0) };
    // Exact for every n a process can hold: f64 has 53 bits of integer.
    let rank = (q * n as f64).ceil() as usize;
    Some(rank.clamp(1, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket(d: Duration) -> usize {
        let mut h = LatencyHistogram::default();
        h.record(d);
        h.buckets().iter().position(|n| *n == 1).unwrap()
    }

    #[test]
    fn the_bounds_grow_by_at_most_twelve_and_a_half_percent() {
        assert_eq!(BOUNDS[0], 1000);
        assert_eq!(BOUNDS[LatencyHistogram::BOUNDED - 1], 1000 << DOUBLINGS);
        // A bucket holds whole nanoseconds above the previous bound.
        let mut worst: f64 = 0.0;
        for w in BOUNDS.windows(2) {
            worst = worst.max(w[1] as f64 / (w[0] + 1) as f64 - 1.0);
        }
        assert!(worst <= LatencyHistogram::MAX_ERROR, "{worst}");
        assert!(worst <= 0.125, "{worst}");
        // Every factor-2 bound of the old histogram is still a bound.
        for k in 0..=DOUBLINGS {
            assert_eq!(BOUNDS[k * PER_DOUBLING], 1000 << k);
        }
    }

    #[test]
    fn durations_fall_in_the_smallest_bucket_that_holds_them() {
        assert_eq!(bucket(Duration::ZERO), 0);
        assert_eq!(bucket(Duration::from_nanos(1000)), 0);
        assert_eq!(bucket(Duration::from_nanos(1001)), 1);
        assert_eq!(bucket(Duration::from_secs(60)), LatencyHistogram::BOUNDED);
        assert_eq!(bucket(Duration::MAX), LatencyHistogram::BOUNDED);
        for i in 0..LatencyHistogram::BOUNDED {
            let bound = LatencyHistogram::bound(i).unwrap();
            assert_eq!(bucket(bound), i, "a bound is in its own bucket");
            assert_eq!(bucket(bound + Duration::from_nanos(1)), i + 1);
        }
        assert_eq!(LatencyHistogram::bound(LatencyHistogram::BOUNDED), None);
    }

    /// Every duration from 1 µs to 30 s (in steps of 0.1 %) is read back as
    /// at most 12.25 % above itself, and never below.
    #[test]
    fn a_quantile_is_within_the_bucket_error_of_the_true_value() {
        let mut worst: f64 = 0.0;
        let mut nanos = 1000.0f64;
        while nanos < 30e9 {
            let d = Duration::from_nanos(nanos as u64);
            let mut h = LatencyHistogram::default();
            h.record(d);
            let read = h.quantile(0.99).unwrap();
            assert!(read >= d, "{read:?} < {d:?}");
            worst = worst.max(read.as_secs_f64() / d.as_secs_f64() - 1.0);
            nanos *= 1.001;
        }
        assert!(worst <= LatencyHistogram::MAX_ERROR, "{worst}");
        // The example: a true 107 ms p99 read as ≤ 131 ms before.
        let mut h = LatencyHistogram::default();
        h.record(Duration::from_millis(107));
        let p99 = h.quantile(0.99).unwrap();
        assert!(p99 < Duration::from_millis(120), "{p99:?}");
    }

    #[test]
    fn count_sum_mean_and_merge_add_up() {
        let mut h = LatencyHistogram::default();
        assert_eq!((h.count(), h.mean(), h.quantile(0.5)), (0, None, None));
        h.record(Duration::from_micros(30));
        h.record(Duration::from_millis(2));
        assert_eq!(h.count(), 2);
        assert_eq!(h.sum(), Duration::from_micros(2030));
        assert_eq!(h.mean(), Some(Duration::from_micros(1015)));
        let mut both = h.clone();
        both.merge(&h);
        assert_eq!((both.count(), both.sum()), (4, 2 * h.sum()));
        let mut back = LatencyHistogram::default();
        for (bound, n) in h.filled() {
            back.add_bucket(bound, n);
        }
        back.set_sum(h.sum());
        assert_eq!(back, h);
        h.record(Duration::from_secs(3600));
        assert_eq!(h.quantile(1.0), None, "in the overflow bucket");
    }

    #[test]
    fn quantiles_of_samples_rank_by_nearest_rank() {
        let empty: [u32; 0] = [];
        assert_eq!(quantile(&empty, 0.5), None);
        let v: Vec<u32> = (1..=100).collect();
        assert_eq!(quantile(&v, 0.0), Some(1));
        assert_eq!(quantile(&v, 0.5), Some(50));
        assert_eq!(quantile(&v, 0.99), Some(99));
        assert_eq!(quantile(&v, 0.999), Some(100));
        assert_eq!(quantile(&v, 1.0), Some(100));
        assert_eq!(quantile(&[7.5f64], 0.5), Some(7.5));
        // The histogram ranks the same way.
        let mut h = LatencyHistogram::default();
        for us in [10, 20, 30, 1000] {
            h.record(Duration::from_micros(us));
        }
        let p50 = h.quantile(0.5).unwrap();
        assert!(p50 >= Duration::from_micros(20) && p50 < Duration::from_micros(23));
    }
}
