//! Message-size distributions for the mixed workload, and the seeded
//! random numbers that sample them.
//!
//! The tables are condensed by hand from the CDFs of Homa's workloads W3
//! (all RPCs in a Google datacenter) and W4 (a Facebook Hadoop cluster) as
//! published in the Homa paper and its artifact (HomaModule `util/dist.cc`):
//! a handful of (size, cumulative fraction) points, sampled with log-linear
//! interpolation between them. Sizes above 1 MiB are truncated to 1 MiB
//! (W3: 0.03 % of messages, W4: 2.8 %), so every system handles the same
//! largest message as the other workloads.

/// The largest message of any workload.
pub const MAX_MESSAGE: usize = 1 << 20;

/// A named size distribution.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SizeDist {
    /// The name on the command line and in records (`W3`, `W4`).
    pub name: &'static str,
    points: &'static [(usize, f64)],
}

/// Homa W3: mostly small RPCs (half ≤ 256 B), a long tail to megabytes.
pub const W3: SizeDist = SizeDist {
    name: "W3",
    points: &[
        (8, 0.0),
        (32, 0.097),
        (64, 0.155),
        (128, 0.352),
        (256, 0.498),
        (512, 0.785),
        (1024, 0.863),
        (2048, 0.909),
        (4096, 0.935),
        (8192, 0.964),
        (16384, 0.985),
        (32768, 0.990),
        (65536, 0.993),
        (131072, 0.997),
        (262144, 0.9985),
        (524288, 0.9995),
        (MAX_MESSAGE, 1.0),
    ],
};

/// Homa W4: mid-sized messages, most bytes in messages of 100 KB and up.
pub const W4: SizeDist = SizeDist {
    name: "W4",
    points: &[
        (53, 0.0),
        (217, 0.0149),
        (300, 0.052),
        (326, 0.1375),
        (376, 0.2026),
        (480, 0.2639),
        (600, 0.4591),
        (800, 0.5762),
        (1042, 0.6097),
        (1664, 0.6673),
        (7830, 0.7082),
        (31946, 0.7212),
        (51046, 0.816),
        (81565, 0.8717),
        (133013, 0.907),
        (288520, 0.9535),
        (470507, 0.9628),
        (940700, 0.9721),
        // Everything above is truncated to 1 MiB.
        (MAX_MESSAGE - 1, 0.9721),
        (MAX_MESSAGE, 1.0),
    ],
};

impl SizeDist {
    /// The distribution called `name` ("w3", "W4").
    pub fn by_name(name: &str) -> Option<Self> {
        [W3, W4]
            .into_iter()
            .find(|d| d.name.eq_ignore_ascii_case(name))
    }

    /// The size at cumulative fraction `u` in [0, 1).
    pub fn quantile(&self, u: f64) -> usize {
        let pts = self.points;
        let i = pts
            .iter()
            .position(|&(_, f)| f > u)
            .unwrap_or(pts.len() - 1);
        if i == 0 {
            return pts[0].0;
        }
        let ((s0, f0), (s1, f1)) = (pts[i - 1], pts[i]);
        let t = ((u - f0) / (f1 - f0)).clamp(0.0, 1.0);
        let log = (s0 as f64).ln() + t * ((s1 as f64).ln() - (s0 as f64).ln());
        (log.exp().round() as usize).clamp(1, MAX_MESSAGE)
    }

    /// The mean size, by numerical integration over the quantiles.
    pub fn mean(&self) -> f64 {
        let n = 100_000;
        (0..n)
            .map(|i| self.quantile((i as f64 + 0.5) / n as f64) as f64)
            .sum::<f64>()
            / n as f64
    }
}

/// The seeded generator for workload sizes and arrival gaps: the
/// simulator's SplitMix64.
pub use smt_relay::SplitMix64 as Rng;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_monotonic_and_bounded() {
        for d in [W3, W4] {
            let mut last = 0;
            for i in 0..1000 {
                let s = d.quantile(i as f64 / 1000.0);
                assert!(s >= last && s <= MAX_MESSAGE, "{} at {i}: {s}", d.name);
                last = s;
            }
        }
    }

    #[test]
    fn medians_match_the_published_cdfs() {
        // W3: half the messages are at most ~256 B; W4: ~650 B.
        assert!((200..=300).contains(&W3.quantile(0.5)));
        assert!((600..=700).contains(&W4.quantile(0.5)));
        assert!(W4.mean() > 10.0 * W3.mean());
    }
}
