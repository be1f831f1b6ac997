//! Level shifts in a series: binary segmentation with Welch's t-test, as Apache Otava (Hunter)
//! tests its e-divisive candidates, with each point's own interval as a floor on its noise.
//!
//! Why written here: the maintained change-point crates found (`changepoint`, `augurs`) model a
//! bare sequence of numbers (BOCPD, PELT on a cost) and offer no way to weigh a point by its
//! interval or to demand a number of points on each side; the method below is ~100 lines and
//! every parameter is one the docs can name (`docs/history.md`).
//!
//! The method: within a segment, every split with at least `min_points` on each side is scored
//! by Welch's t of the two sides' means, where each side's variance is the larger of the points'
//! spread and the mean square of the points' own standard errors (the half-width of a point's
//! 95 % interval / 1.96): runs whose medians were each uncertain cannot make a shift look sure.
//! The best split is kept when its two-sided p-value is below `alpha` and the two sides'
//! medians differ by at least `min_effect` (relative); both halves are then searched again.

use crate::metrics::stats::median_ranks;

/// Detection parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    /// Points required on each side of a change.
    pub min_points: usize,
    /// Smallest relative change of the median that counts (0.05: 5 %).
    pub min_effect: f64,
    /// Largest two-sided p-value of the Welch t-test that counts.
    pub alpha: f64,
}

impl Default for Params {
    fn default() -> Params {
        Params {
            min_points: 5,
            min_effect: 0.05,
            alpha: 0.001,
        }
    }
}

/// One point's value and its standard error (0 when the point has no interval).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Obs {
    pub value: f64,
    pub se: f64,
}

impl Obs {
    /// A point with its 95 % interval `[lo, hi]`.
    pub fn with_interval(value: f64, lo: Option<f64>, hi: Option<f64>) -> Obs {
        let se = match (lo, hi) {
            (Some(l), Some(h)) if h >= l => (h - l) / 2.0 / 1.96,
            _ => 0.0,
        };
        Obs { value, se }
    }
}

/// A median of a segment with the order-statistic interval of that median.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Level {
    pub median: f64,
    pub lo: f64,
    pub hi: f64,
    pub points: usize,
}

/// A change: `index` is the first point after it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Change {
    pub index: usize,
    pub before: Level,
    pub after: Level,
    /// (after − before) / before of the medians.
    pub relative: f64,
    pub p_value: f64,
}

/// The change points of a series, in order.
pub fn detect(obs: &[Obs], p: &Params) -> Vec<Change> {
    let mut cuts = Vec::new();
    split(obs, 0, obs.len(), p, &mut cuts);
    cuts.sort_by_key(|c| c.0);
    // Each change's levels span the segments on either side of it (up to the neighbouring cuts).
    let bounds: Vec<usize> = std::iter::once(0)
        .chain(cuts.iter().map(|c| c.0))
        .chain(std::iter::once(obs.len()))
        .collect();
    cuts.iter()
        .enumerate()
        .map(|(i, &(index, p_value))| {
            let before = level(&obs[bounds[i]..index]);
            let after = level(&obs[index..bounds[i + 2]]);
            Change {
                index,
                before,
                after,
                relative: (after.median - before.median)
                    / before.median.abs().max(f64::MIN_POSITIVE),
                p_value,
            }
        })
        .collect()
}

fn split(obs: &[Obs], lo: usize, hi: usize, p: &Params, out: &mut Vec<(usize, f64)>) {
    let m = p.min_points.max(2);
    if hi - lo < 2 * m {
        return;
    }
    let mut best: Option<(usize, f64, f64)> = None;
    for k in lo + m..=hi - m {
        let (t, pv) = welch(&obs[lo..k], &obs[k..hi]);
        if best.is_none_or(|b| t.abs() > b.1.abs()) {
            best = Some((k, t, pv));
        }
    }
    let Some((k, _, pv)) = best else { return };
    let (a, b) = (level(&obs[lo..k]).median, level(&obs[k..hi]).median);
    let effect = (b - a).abs() / a.abs().max(f64::MIN_POSITIVE);
    if pv < p.alpha && effect >= p.min_effect {
        out.push((k, pv));
        split(obs, lo, k, p, out);
        split(obs, k, hi, p, out);
    }
}

fn level(obs: &[Obs]) -> Level {
    let mut v: Vec<f64> = obs.iter().map(|o| o.value).collect();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    let r = median_ranks(n);
    Level {
        median,
        lo: v[r.lo - 1],
        hi: v[r.hi - 1],
        points: n,
    }
}

fn mean_var(obs: &[Obs]) -> (f64, f64) {
    let n = obs.len() as f64;
    let mean = obs.iter().map(|o| o.value).sum::<f64>() / n;
    let spread = obs.iter().map(|o| (o.value - mean).powi(2)).sum::<f64>() / (n - 1.0);
    let own = obs.iter().map(|o| o.se * o.se).sum::<f64>() / n;
    (mean, spread.max(own))
}

/// Welch's t of `b`'s mean against `a`'s and its two-sided p-value.
pub fn welch(a: &[Obs], b: &[Obs]) -> (f64, f64) {
    let (ma, va) = mean_var(a);
    let (mb, vb) = mean_var(b);
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let (qa, qb) = (va / na, vb / nb);
    let den = (qa + qb).sqrt();
    if den <= 1e-12 * ma.abs().max(mb.abs()).max(1e-300) {
        // Both sides exactly constant: any difference is certain, none is nothing.
        return if ma == mb {
            (0.0, 1.0)
        } else {
            (f64::INFINITY.copysign(mb - ma), 0.0)
        };
    }
    let t = (mb - ma) / den;
    let df = (qa + qb).powi(2) / (qa * qa / (na - 1.0) + qb * qb / (nb - 1.0));
    (t, student_two_sided(t, df))
}

/// P(|T| > |t|) for Student's t with `df` degrees of freedom: I_{df/(df+t²)}(df/2, 1/2).
pub fn student_two_sided(t: f64, df: f64) -> f64 {
    if !t.is_finite() {
        return 0.0;
    }
    let x = df / (df + t * t);
    inc_beta(df / 2.0, 0.5, x).clamp(0.0, 1.0)
}

fn ln_gamma(x: f64) -> f64 {
    // Lanczos (g = 7, n = 9), accurate to ~1e-15 for x > 0.
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = C[0];
    let t = x + 7.5;
    for (i, c) in C.iter().enumerate().skip(1) {
        a += c / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// The regularised incomplete beta function I_x(a, b) (continued fraction, Lentz's method).
fn inc_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let front =
        (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp();
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_cf(a, b, x) / a
    } else {
        1.0 - front * beta_cf(b, a, 1.0 - x) / b
    }
}

fn beta_cf(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 - qab * x / qap;
    if d.abs() < TINY {
        d = TINY;
    }
    d = 1.0 / d;
    let mut h = d;
    for m in 1..300 {
        let m = m as f64;
        let m2 = 2.0 * m;
        for aa in [
            m * (b - m) * x / ((qam + m2) * (a + m2)),
            -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)),
        ] {
            d = 1.0 + aa * d;
            if d.abs() < TINY {
                d = TINY;
            }
            c = 1.0 + aa / c;
            if c.abs() < TINY {
                c = TINY;
            }
            d = 1.0 / d;
            h *= d * c;
        }
        if (d * c - 1.0).abs() < 1e-15 {
            break;
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// Normal noise by Box–Muller from a seeded generator (no extra crate).
    fn noise(rng: &mut rand_chacha::ChaCha8Rng, sd: f64) -> f64 {
        let (u1, u2): (f64, f64) = (rng.gen_range(1e-12..1.0), rng.gen());
        sd * (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }

    fn series(seed: u64, step_at: Option<usize>, step: f64) -> Vec<Obs> {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        (0..30)
            .map(|i| {
                let base = if step_at.is_some_and(|s| i >= s) {
                    100.0 + step
                } else {
                    100.0
                };
                let v = base + noise(&mut rng, 1.0);
                Obs::with_interval(v, Some(v - 1.5), Some(v + 1.5))
            })
            .collect()
    }

    #[test]
    fn the_t_distribution_matches_its_tables() {
        // t = 2.228 with 10 df is the two-sided 5 % point; t = 3.169 the 1 % point.
        assert!((student_two_sided(2.228, 10.0) - 0.05).abs() < 1e-3);
        assert!((student_two_sided(3.169, 10.0) - 0.01).abs() < 1e-4);
        assert!((student_two_sided(0.0, 5.0) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn a_step_at_point_20_of_30_is_found_there() {
        for seed in 0..20 {
            let c = detect(&series(seed, Some(20), 10.0), &Params::default());
            assert_eq!(c.len(), 1, "seed {seed}: {c:?}");
            assert!(c[0].index.abs_diff(20) <= 1, "seed {seed}: {c:?}");
            assert!((c[0].relative - 0.10).abs() < 0.03, "{c:?}");
            assert!(c[0].before.lo <= c[0].before.median && c[0].before.median <= c[0].before.hi);
        }
    }

    #[test]
    fn thirty_points_of_normal_noise_give_no_change() {
        for seed in 0..50 {
            let c = detect(&series(seed, None, 0.0), &Params::default());
            assert!(c.is_empty(), "seed {seed}: {c:?}");
        }
    }

    #[test]
    fn a_shift_within_the_points_own_intervals_is_not_a_change() {
        // A 6 % step, but each point's interval is ±30 %: the runs cannot tell it apart.
        let obs: Vec<Obs> = (0..30)
            .map(|i| {
                let v = if i >= 15 { 106.0 } else { 100.0 } + (i % 3) as f64 * 0.1;
                Obs::with_interval(v, Some(v * 0.7), Some(v * 1.3))
            })
            .collect();
        assert!(detect(&obs, &Params::default()).is_empty());
        let tight: Vec<Obs> = obs
            .iter()
            .map(|o| Obs {
                value: o.value,
                se: 0.0,
            })
            .collect();
        assert_eq!(detect(&tight, &Params::default())[0].index, 15);
    }

    #[test]
    fn too_few_points_on_a_side_or_too_small_an_effect_is_no_change() {
        let p = Params::default();
        assert!(detect(&series(1, Some(27), 10.0), &p).is_empty());
        assert!(detect(&series(1, Some(15), 2.0), &p).is_empty());
        let lax = Params {
            min_effect: 0.01,
            ..p
        };
        assert_eq!(detect(&series(1, Some(15), 2.0), &lax).len(), 1);
    }
}
