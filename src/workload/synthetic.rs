//! Synthetic lengths: token counts drawn from a distribution (`--input-tokens-dist`,
//! `--output-tokens-dist`), seeded, so a run's lengths are the same on every run and platform.
//! Each prompt is then made to its exact count by the matched-prompt sizing (`workload::items`).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

/// A length distribution, in tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Dist {
    /// `fixed:N`
    Fixed { tokens: u64 },
    /// `uniform:LO:HI`: every whole number from LO to HI (inclusive) equally likely.
    Uniform { lo: u64, hi: u64 },
    /// `normal:MEAN:STD`, rounded, clamped to at least 1.
    Normal { mean: f64, std: f64 },
    /// `lognormal:MEAN:STD`: a log-normal whose mean and standard deviation (in tokens) are MEAN
    /// and STD, rounded, clamped to at least 1.
    Lognormal { mean: f64, std: f64 },
}

impl Dist {
    /// Parses `fixed:256`, `uniform:128:512`, `normal:256:64`, `lognormal:256:128`; `flag` names
    /// the option in errors.
    pub fn parse(flag: &str, s: &str) -> Result<Dist, String> {
        let parts: Vec<&str> = s.split(':').map(str::trim).collect();
        let usage = format!("{flag} {s}: expected fixed:N, uniform:LO:HI, normal:MEAN:STD or lognormal:MEAN:STD (tokens), like uniform:128:512");
        let int = |x: &str, what: &str| -> Result<u64, String> {
            match x.parse::<u64>() {
                Ok(n) if n >= 1 => Ok(n),
                _ => Err(format!(
                    "{flag} {s}: {what} must be a whole number of tokens, at least 1 (got {x:?})"
                )),
            }
        };
        let num = |x: &str, what: &str, min: f64| -> Result<f64, String> {
            match x.parse::<f64>() {
                Ok(v) if v.is_finite() && v >= min => Ok(v),
                _ => Err(format!(
                    "{flag} {s}: {what} must be a number ≥ {min} (got {x:?})"
                )),
            }
        };
        match parts.as_slice() {
            ["fixed", n] => Ok(Dist::Fixed {
                tokens: int(n, "N")?,
            }),
            ["uniform", lo, hi] => {
                let (lo, hi) = (int(lo, "LO")?, int(hi, "HI")?);
                if lo > hi {
                    return Err(format!(
                        "{flag} {s}: LO {lo} is above HI {hi}; write uniform:{hi}:{lo}"
                    ));
                }
                Ok(Dist::Uniform { lo, hi })
            }
            ["normal", m, sd] => Ok(Dist::Normal {
                mean: num(m, "MEAN", 1.0)?,
                std: num(sd, "STD", 0.0)?,
            }),
            ["lognormal", m, sd] => Ok(Dist::Lognormal {
                mean: num(m, "MEAN", 1.0)?,
                std: num(sd, "STD", 0.0)?,
            }),
            _ => Err(usage),
        }
    }

    /// One draw.
    pub fn sample(&self, rng: &mut ChaCha8Rng) -> u64 {
        let round =
            |x: f64| (x.round().max(1.0)).min(crate::workload::prompt::MAX_TOKENS as f64) as u64;
        match *self {
            Dist::Fixed { tokens } => tokens,
            Dist::Uniform { lo, hi } => rng.gen_range(lo..=hi),
            Dist::Normal { mean, std } => round(mean + std * std_normal(rng)),
            Dist::Lognormal { mean, std } => {
                let s2 = (1.0 + (std / mean).powi(2)).ln();
                let mu = mean.ln() - s2 / 2.0;
                round((mu + s2.sqrt() * std_normal(rng)).exp())
            }
        }
    }

    /// `n` draws from `seed` (the stream depends on the seed and `salt`, which keeps the input
    /// and output lengths independent).
    pub fn draws(&self, n: usize, seed: u64, salt: u64) -> Vec<u64> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ salt);
        (0..n).map(|_| self.sample(&mut rng)).collect()
    }
}

/// Salt of the input lengths' stream.
pub const INPUT_SALT: u64 = 0x696e_7075_7400_0001;
/// Salt of the output lengths' stream.
pub const OUTPUT_SALT: u64 = 0x6f75_7470_7574_0002;

/// A standard normal draw (Box–Muller).
fn std_normal(rng: &mut ChaCha8Rng) -> f64 {
    let u1: f64 = rng.gen_range(f64::MIN_POSITIVE..1.0);
    let u2: f64 = rng.gen::<f64>();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distributions_parse_and_refuse_with_the_fix() {
        let p = |s| Dist::parse("--input-tokens-dist", s);
        assert_eq!(p("fixed:256"), Ok(Dist::Fixed { tokens: 256 }));
        assert_eq!(p("uniform:128:512"), Ok(Dist::Uniform { lo: 128, hi: 512 }));
        assert_eq!(
            p("normal:256:64"),
            Ok(Dist::Normal {
                mean: 256.0,
                std: 64.0
            })
        );
        assert!(matches!(p("lognormal:256:128"), Ok(Dist::Lognormal { .. })));
        assert!(p("uniform:512:128")
            .unwrap_err()
            .contains("write uniform:128:512"));
        assert!(p("fixed:0").unwrap_err().contains("at least 1"));
        assert!(p("gamma:1:2").unwrap_err().contains("expected fixed:N"));
        assert!(p("normal:256").unwrap_err().contains("expected fixed:N"));
    }

    #[test]
    fn draws_are_seeded_bounded_and_near_their_moments() {
        let u = Dist::Uniform { lo: 10, hi: 20 };
        let a = u.draws(1000, 7, INPUT_SALT);
        assert_eq!(a, u.draws(1000, 7, INPUT_SALT));
        assert_ne!(a, u.draws(1000, 8, INPUT_SALT));
        assert!(a.iter().all(|&x| (10..=20).contains(&x)));
        assert!(a.contains(&10) && a.contains(&20));
        let mean = |v: &[u64]| v.iter().sum::<u64>() as f64 / v.len() as f64;
        let n = Dist::Normal {
            mean: 256.0,
            std: 64.0,
        }
        .draws(20_000, 1, 0);
        assert!((mean(&n) - 256.0).abs() < 3.0, "{}", mean(&n));
        let l = Dist::Lognormal {
            mean: 256.0,
            std: 128.0,
        }
        .draws(20_000, 1, 0);
        assert!((mean(&l) - 256.0).abs() < 6.0, "{}", mean(&l));
        // Clamped at 1.
        assert!(Dist::Normal {
            mean: 1.0,
            std: 50.0
        }
        .draws(1000, 1, 0)
        .iter()
        .all(|&x| x >= 1));
        assert_eq!(Dist::Fixed { tokens: 5 }.draws(3, 0, 0), vec![5, 5, 5]);
    }
}
