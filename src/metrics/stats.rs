//! Statistics over successful samples: nearest-rank percentiles and a distribution-free interval
//! of the median whose coverage is exact.
//!
//! The interval is a pair of order statistics `(x_(l), x_(u))`, `u = n + 1 − l`, symmetric about
//! the median. For any continuous distribution it covers the population median with probability
//! exactly `1 − 2·BinomCDF(l − 1; n, ½)`, so its coverage is stated, never assumed. `l` is the
//! largest rank that keeps that coverage at or above 95 %; such a rank exists from 6 samples on.
//! Below 6 no pair of order statistics reaches 95 %: the interval is then the range
//! `[min, max]`, with its own coverage `1 − 2·½ⁿ` (93.75 % at 5, 50 % at 2), and it is called a
//! range, not a 95 % CI. No bootstrap is used: with the few samples a bake-off takes per arm a
//! percentile bootstrap of the median claims 95 % while covering less (with 2 samples it spans
//! the two values, a 50 % interval).

use serde::Serialize;

/// The coverage the interval of the median aims at.
pub const TARGET_COVERAGE: f64 = 0.95;

/// The smallest sample size whose order-statistic interval of the median reaches 95 % coverage
/// (the tests below check it against the exact binomial; `evidence::result::MIN_N_FOR_95`, which
/// validation reads, is the same number, checked in `tests/it/decide.rs`).
pub const MIN_N_FOR_95: usize = 6;

/// How a median interval was formed.
pub const METHOD_ORDER_STATISTIC: &str = "order-statistic";
/// The range `[min, max]`: too few samples for a 95 % order-statistic interval.
pub const METHOD_RANGE: &str = "range";

/// Nearest rank: sort, rank = ceil(p·n/100), 1-based. `sorted` must be ascending and non-empty.
pub fn nearest_rank(sorted: &[f64], p: f64) -> f64 {
    let n = sorted.len();
    // p·n/100 in floating point can land a hair above a whole number (99.9 % of 1000 is
    // 999.0000000000001): a rank within rounding error of a whole number is that number, or
    // ceil would skip to the next rank.
    let x = p * n as f64 / 100.0;
    let whole = x.round();
    let rank = if (x - whole).abs() <= 1e-9 * whole.max(1.0) {
        whole
    } else {
        x.ceil()
    };
    sorted[(rank as usize).clamp(1, n) - 1]
}

/// The ranks of a median interval and what they cover.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MedianRanks {
    /// 1-based ranks `(l, u)` of the interval's ends, `u = n + 1 − l`.
    pub lo: usize,
    pub hi: usize,
    /// Exact coverage of the population median: `1 − 2·BinomCDF(l − 1; n, ½)`.
    pub coverage: f64,
    /// [`METHOD_ORDER_STATISTIC`] when `coverage >= 95 %`, [`METHOD_RANGE`] below.
    pub method: &'static str,
}

/// The symmetric order-statistic interval of the median of `n >= 1` samples: the narrowest
/// whose exact coverage is at least 95 %, or the range `[1, n]` when none is (n < 6).
pub fn median_ranks(n: usize) -> MedianRanks {
    assert!(n >= 1, "a median interval needs a sample");
    // BinomCDF(k; n, ½) accumulated in log space, so large n neither underflows nor overflows.
    let ln2 = std::f64::consts::LN_2;
    let mut ln_pmf = -(n as f64) * ln2;
    let mut cdf = 0.0;
    // The largest k with BinomCDF(k) <= (1 − 95 %)/2, if any; l = k + 1.
    let mut best: Option<(usize, f64)> = None;
    let tail = (1.0 - TARGET_COVERAGE) / 2.0;
    for k in 0..n.div_ceil(2) {
        cdf += ln_pmf.exp();
        if cdf > tail {
            break;
        }
        best = Some((k, cdf));
        ln_pmf += ((n - k) as f64).ln() - ((k + 1) as f64).ln();
    }
    match best {
        Some((k, cdf)) => MedianRanks {
            lo: k + 1,
            hi: n - k,
            coverage: 1.0 - 2.0 * cdf,
            method: METHOD_ORDER_STATISTIC,
        },
        None => MedianRanks {
            lo: 1,
            hi: n,
            // BinomCDF(0; n, ½) = ½ⁿ; one sample covers nothing.
            coverage: if n == 1 {
                0.0
            } else {
                1.0 - 2.0 * 0.5f64.powi(n as i32)
            },
            method: METHOD_RANGE,
        },
    }
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Distribution {
    pub n: usize,
    pub p50: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    /// The 99.9th percentile (nearest rank: the maximum below 1,000 samples).
    pub p999: f64,
    pub mean: f64,
    /// Sample standard deviation (n − 1 in the denominator; 0 for one sample).
    pub std: f64,
    pub min: f64,
    pub max: f64,
    /// The interval of the median: order statistics `median_ci_ranks` of the sorted sample. A
    /// 95 % (or better) confidence interval only when `median_ci_coverage >= 0.95`; below 6
    /// samples it is the range `[min, max]`.
    pub median_ci: [f64; 2],
    /// `order-statistic` (coverage >= 95 %) or `range` (fewer than 6 samples).
    pub median_ci_method: &'static str,
    /// The exact probability that the interval covers the population median (0.96875 for n = 6,
    /// 0.9375 for the range of 5).
    pub median_ci_coverage: f64,
    /// The 1-based ranks of the interval's ends in the sorted sample.
    pub median_ci_ranks: [usize; 2],
}

impl Distribution {
    /// The median with its interval, as the result records it (`evidence::result::Stat`).
    pub fn median_stat(&self) -> crate::evidence::result::Stat {
        crate::evidence::result::Stat {
            p50: self.p50,
            ci95: self.median_ci,
            p95: self.p95,
            n: self.n as u64,
            ci_method: crate::evidence::result::CiMethod::parse(self.median_ci_method),
            ci_coverage: Some(self.median_ci_coverage),
        }
    }

    /// None when there are no samples. NaN values are dropped. The seed is not used (the
    /// interval of the median is exact, nothing is resampled); callers keep passing it.
    pub fn from_samples(samples: &[f64], _seed: u64) -> Option<Distribution> {
        let mut v: Vec<f64> = samples.iter().copied().filter(|x| !x.is_nan()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let r = median_ranks(n);
        let mean = v.iter().sum::<f64>() / n as f64;
        Some(Distribution {
            n,
            p50: nearest_rank(&v, 50.0),
            p90: nearest_rank(&v, 90.0),
            p95: nearest_rank(&v, 95.0),
            p99: nearest_rank(&v, 99.0),
            p999: nearest_rank(&v, 99.9),
            mean,
            std: sample_std(&v, mean),
            min: v[0],
            max: v[n - 1],
            median_ci: [v[r.lo - 1], v[r.hi - 1]],
            median_ci_method: r.method,
            median_ci_coverage: r.coverage,
            median_ci_ranks: [r.lo, r.hi],
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
        // Ranks that are whole numbers stay whole despite floating point: p99.9 of 1000 is
        // rank 999, p95 of 20 rank 19, p90 of 10 rank 9, for every n up to 10 000.
        let v: Vec<f64> = (1..=10_000).map(|x| x as f64).collect();
        for n in [10usize, 20, 100, 1000, 2000, 10_000] {
            let s = &v[..n];
            for p in [50.0, 90.0, 95.0, 99.0, 99.9] {
                let exact = (p * 10.0) as usize * n;
                let rank = exact.div_ceil(1000).max(1);
                assert_eq!(nearest_rank(s, p), rank as f64, "p{p} of {n}");
            }
        }
    }

    /// C(n, k) exactly.
    fn choose(n: u128, k: u128) -> u128 {
        (0..k).fold(1u128, |acc, i| acc * (n - i) / (i + 1))
    }

    /// Exact coverage of the order statistics (l, n + 1 − l): 1 − 2·Σ_{i<l} C(n, i) / 2ⁿ, in
    /// integers.
    fn exact_coverage(n: usize, l: usize) -> f64 {
        let below: u128 = (0..l as u128).map(|i| choose(n as u128, i)).sum();
        let total = 1u128 << n;
        (total - 2 * below) as f64 / total as f64
    }

    #[test]
    fn median_intervals_state_their_exact_coverage_for_n_2_to_30() {
        for n in 2..=30usize {
            let r = median_ranks(n);
            assert_eq!(r.hi, n + 1 - r.lo, "n={n}: symmetric ranks");
            let exact = exact_coverage(n, r.lo);
            assert!(
                (r.coverage - exact).abs() < 1e-12,
                "n={n}: stated {} exact {exact}",
                r.coverage
            );
            // Rank l is the narrowest that reaches 95 %: l + 1 would not.
            if r.method == METHOD_ORDER_STATISTIC {
                assert!(n >= MIN_N_FOR_95, "n={n} labelled order-statistic (95 %)");
                assert!(exact >= 0.95, "n={n}: {exact}");
                assert!(
                    r.lo + 1 > n.div_ceil(2) || exact_coverage(n, r.lo + 1) < 0.95,
                    "n={n}: rank {} is not the narrowest",
                    r.lo
                );
            } else {
                // The range: below the n a 95 % interval needs, and never labelled 95 %.
                assert_eq!(r.method, METHOD_RANGE);
                assert!(n < MIN_N_FOR_95, "n={n}");
                assert_eq!((r.lo, r.hi), (1, n));
                assert!(exact < 0.95, "n={n}: {exact}");
            }
            // Every sample size below MIN_N_FOR_95 has no 95 % interval at all.
            assert_eq!(exact_coverage(n, 1) >= 0.95, n >= MIN_N_FOR_95, "n={n}");
        }
        assert_eq!(median_ranks(5).coverage, 0.9375);
        assert_eq!(median_ranks(6).coverage, 0.96875);
        assert_eq!((median_ranks(10).lo, median_ranks(10).hi), (2, 9));
        assert!((median_ranks(10).coverage - 1002.0 / 1024.0).abs() < 1e-12);
        assert_eq!(median_ranks(2).coverage, 0.5);
        assert_eq!(median_ranks(1).coverage, 0.0);
    }

    #[test]
    fn large_samples_agree_with_the_normal_approximation() {
        // n = 1000: ranks n/2 ∓ 1.96·√n/2 ≈ 469 and 532.
        let r = median_ranks(1000);
        assert!((468..=470).contains(&r.lo), "{r:?}");
        assert!(r.coverage >= 0.95 && r.coverage < 0.96, "{r:?}");
        let r = median_ranks(100_000);
        assert!(r.coverage >= 0.95 && r.coverage < 0.951, "{r:?}");
    }

    #[test]
    fn distribution_and_ci() {
        let samples: Vec<f64> = (0..1000).map(|i| 100.0 + (i % 21) as f64 - 10.0).collect();
        let d = Distribution::from_samples(&samples, 7).unwrap();
        assert_eq!(d.n, 1000);
        assert_eq!(d.p50, 100.0);
        assert_eq!((d.min, d.max), (90.0, 110.0));
        // p99.9 of 1000 samples is rank 999 (the 999th smallest), below the maximum.
        let ramp: Vec<f64> = (1..=1000).map(|x| x as f64).collect();
        let r = Distribution::from_samples(&ramp, 1).unwrap();
        assert_eq!((r.p99, r.p999, r.max), (990.0, 999.0, 1000.0));
        assert!((r.mean - 500.5).abs() < 1e-12);
        assert!(d.median_ci[0] <= d.p50 && d.p50 <= d.median_ci[1]);
        assert!(d.median_ci[1] - d.median_ci[0] <= 2.0);
        assert_eq!(d.median_ci_method, METHOD_ORDER_STATISTIC);
        assert!(d.median_ci_coverage >= 0.95);
        assert!(Distribution::from_samples(&[], 1).is_none());
        assert!(Distribution::from_samples(&[f64::NAN], 1).is_none());
        // Two samples: the range, 50 % coverage.
        let two = Distribution::from_samples(&[1363.2, 1355.0], 1).unwrap();
        assert_eq!(two.median_ci, [1355.0, 1363.2]);
        assert_eq!(
            (two.median_ci_method, two.median_ci_coverage),
            (METHOD_RANGE, 0.5)
        );
        // Ten samples: ranks 2 and 9.
        let ten: Vec<f64> = (1..=10).map(|x| x as f64).collect();
        let d = Distribution::from_samples(&ten, 1).unwrap();
        assert_eq!(d.median_ci, [2.0, 9.0]);
        assert_eq!(d.median_ci_ranks, [2, 9]);
    }
}
