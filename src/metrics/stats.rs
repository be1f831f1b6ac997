//! Statistics over successful samples: nearest-rank percentiles and a bootstrap CI of the median.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

/// Nearest rank: sort, rank = ceil(p·n/100), 1-based. `sorted` must be ascending and non-empty.
pub fn nearest_rank(sorted: &[f64], p: f64) -> f64 {
    let n = sorted.len();
    let rank = ((p / 100.0) * n as f64).ceil() as usize;
    sorted[rank.clamp(1, n) - 1]
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Distribution {
    pub n: usize,
    pub p50: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    pub mean: f64,
    /// Sample standard deviation (n − 1 in the denominator; 0 for one sample).
    pub std: f64,
    pub min: f64,
    pub max: f64,
    /// 95% confidence interval of the median.
    pub median_ci95: [f64; 2],
    /// How the interval was computed: `bootstrap-1000` (percentile bootstrap, 1,000 seeded
    /// resamples) up to 20,000 samples, `order-statistic` (distribution-free binomial ranks)
    /// above, where resampling would cost minutes and the two agree.
    pub median_ci_method: &'static str,
}

/// Bootstrap resamples for the median CI.
const BOOTSTRAP: usize = 1000;
/// Above this many samples the median CI uses order statistics instead of the bootstrap.
const BOOTSTRAP_MAX_N: usize = 20_000;

impl Distribution {
    /// None when there are no samples. NaN values are dropped.
    pub fn from_samples(samples: &[f64], seed: u64) -> Option<Distribution> {
        let mut v: Vec<f64> = samples.iter().copied().filter(|x| !x.is_nan()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let mean = v.iter().sum::<f64>() / n as f64;
        Some(Distribution {
            n,
            p50: nearest_rank(&v, 50.0),
            p90: nearest_rank(&v, 90.0),
            p95: nearest_rank(&v, 95.0),
            p99: nearest_rank(&v, 99.0),
            mean,
            std: sample_std(&v, mean),
            min: v[0],
            max: v[n - 1],
            median_ci95: if n <= BOOTSTRAP_MAX_N {
                median_ci(&v, seed)
            } else {
                median_ci_order_statistic(&v)
            },
            median_ci_method: if n <= BOOTSTRAP_MAX_N {
                "bootstrap-1000"
            } else {
                "order-statistic"
            },
        })
    }
}

/// Sample standard deviation of `v` around `mean` (n − 1 in the denominator; 0 for n < 2).
pub fn sample_std(v: &[f64], mean: f64) -> f64 {
    if v.len() < 2 {
        return 0.0;
    }
    let ss: f64 = v.iter().map(|x| (x - mean) * (x - mean)).sum();
    (ss / (v.len() - 1) as f64).sqrt()
}

/// Percentile bootstrap of the nearest-rank median. Resampling indices into the sorted sample
/// and taking the median of sorted indices avoids re-sorting values.
fn median_ci(sorted: &[f64], seed: u64) -> [f64; 2] {
    let n = sorted.len();
    if n == 1 {
        return [sorted[0], sorted[0]];
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut idx = vec![0usize; n];
    let mut medians = Vec::with_capacity(BOOTSTRAP);
    let k = ((0.5 * n as f64).ceil() as usize).clamp(1, n) - 1;
    for _ in 0..BOOTSTRAP {
        for i in idx.iter_mut() {
            *i = rng.gen_range(0..n);
        }
        let (_, m, _) = idx.select_nth_unstable(k);
        medians.push(sorted[*m]);
    }
    medians.sort_by(f64::total_cmp);
    [nearest_rank(&medians, 2.5), nearest_rank(&medians, 97.5)]
}

/// Distribution-free CI of the median: ranks n/2 ∓ 1.96·√n/2 (normal approximation to the
/// binomial), 1-based, clamped.
fn median_ci_order_statistic(sorted: &[f64]) -> [f64; 2] {
    let n = sorted.len() as f64;
    let half = 1.96 * n.sqrt() / 2.0;
    let lo = ((n / 2.0 - half).floor() as usize).clamp(1, sorted.len());
    let hi = ((n / 2.0 + half).ceil() as usize + 1).clamp(1, sorted.len());
    [sorted[lo - 1], sorted[hi - 1]]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_matches_definition() {
        let v: Vec<f64> = (1..=10).map(|x| x as f64).collect();
        assert_eq!(nearest_rank(&v, 50.0), 5.0);
        assert_eq!(nearest_rank(&v, 90.0), 9.0);
        assert_eq!(nearest_rank(&v, 95.0), 10.0);
        assert_eq!(nearest_rank(&v, 99.0), 10.0);
        assert_eq!(nearest_rank(&v, 0.0), 1.0);
        let v = [3.0];
        assert_eq!(nearest_rank(&v, 50.0), 3.0);
        // n = 4: p50 is rank 2, not an interpolated 2.5.
        assert_eq!(nearest_rank(&[1.0, 2.0, 3.0, 4.0], 50.0), 2.0);
    }

    #[test]
    fn distribution_and_ci() {
        let samples: Vec<f64> = (0..1000).map(|i| 100.0 + (i % 21) as f64 - 10.0).collect();
        let d = Distribution::from_samples(&samples, 7).unwrap();
        assert_eq!(d.n, 1000);
        assert_eq!(d.p50, 100.0);
        assert_eq!((d.min, d.max), (90.0, 110.0));
        assert!(d.median_ci95[0] <= d.p50 && d.p50 <= d.median_ci95[1]);
        assert!(d.median_ci95[1] - d.median_ci95[0] <= 2.0);
        // Deterministic given the seed.
        assert_eq!(d, Distribution::from_samples(&samples, 7).unwrap());
        assert!(Distribution::from_samples(&[], 1).is_none());
        assert_eq!(d.median_ci_method, "bootstrap-1000");
        // Large samples: order statistics, close to the bootstrap's answer.
        let big: Vec<f64> = (0..50_000).map(|i| (i % 1001) as f64).collect();
        let b = Distribution::from_samples(&big, 7).unwrap();
        assert_eq!(b.median_ci_method, "order-statistic");
        assert!(b.median_ci95[0] <= b.p50 && b.p50 <= b.median_ci95[1]);
        assert!(
            b.median_ci95[1] - b.median_ci95[0] <= 12.0,
            "{:?}",
            b.median_ci95
        );
        assert!(Distribution::from_samples(&[f64::NAN], 1).is_none());
    }
}
