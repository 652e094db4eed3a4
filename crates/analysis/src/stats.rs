//! Summaries of repeated measurements (DESIGN §4: min, median, mean, max, standard deviation).

use serde::{Deserialize, Serialize};

/// Min, median, mean, max and sample standard deviation of repeated measurements.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, schemars::JsonSchema, Deserialize)]
pub struct Spread {
    pub n: usize,
    pub min: f64,
    pub median: f64,
    pub mean: f64,
    pub max: f64,
    /// Sample standard deviation (n − 1); 0 for a single value.
    pub stdev: f64,
}

impl Spread {
    /// As [`Spread::of`], with every figure NaN (and `n` 0) where it gives `None`: for tables
    /// that show "n/a" rather than skip the row.
    pub fn of_or_nan(values: &[f64]) -> Spread {
        Spread::of(values).unwrap_or(Spread {
            n: 0,
            min: f64::NAN,
            median: f64::NAN,
            mean: f64::NAN,
            max: f64::NAN,
            stdev: f64::NAN,
        })
    }

    /// `None` for no values or any non-finite value.
    pub fn of(values: &[f64]) -> Option<Spread> {
        if values.is_empty() || values.iter().any(|v| !v.is_finite()) {
            return None;
        }
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        let mean = v.iter().sum::<f64>() / n as f64;
        let stdev = if n > 1 {
            (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
        } else {
            0.0
        };
        Some(Spread {
            n,
            min: v[0],
            median,
            mean,
            max: v[n - 1],
            stdev,
        })
    }

    /// Coefficient of variation, % (stdev / mean).
    pub fn cov_pct(&self) -> Option<f64> {
        (self.mean != 0.0).then(|| 100.0 * self.stdev / self.mean.abs())
    }
}

/// A small deterministic generator (SplitMix64, Steele, Lea & Flood 2014): the bootstrap's
/// resamples must be the same on every run of the same data, and need no cryptographic
/// quality, so no dependency is taken for it.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in 0..n (n ≥ 1), by Lemire's multiply-shift (its bias is below 2⁻³² for the
    /// counts of rounds used here).
    pub fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }
}

/// A point estimate with its 95 % percentile-bootstrap interval. A figure that is undefined
/// (a share of a loss that is not positive, lock waits without --locks) is NaN, written `null`
/// in JSON and read back as NaN.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, schemars::JsonSchema, Deserialize)]
pub struct Interval {
    #[serde(deserialize_with = "null_as_nan")]
    #[schemars(with = "Option<f64>")]
    pub estimate: f64,
    #[serde(deserialize_with = "null_as_nan")]
    #[schemars(with = "Option<f64>")]
    pub low: f64,
    #[serde(deserialize_with = "null_as_nan")]
    #[schemars(with = "Option<f64>")]
    pub high: f64,
}

fn null_as_nan<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

impl Interval {
    pub const UNDEFINED: Interval = Interval {
        estimate: f64::NAN,
        low: f64::NAN,
        high: f64::NAN,
    };

    /// The 2.5th and 97.5th percentiles of the resampled values (non-finite ones left out:
    /// resamples where the figure is undefined). Undefined when fewer than half the resamples
    /// define it: an interval over a minority would claim more than is known.
    pub fn percentile(estimate: f64, resampled: &[f64]) -> Interval {
        Interval::percentile_at(estimate, resampled, 0.025)
    }

    /// The percentile interval widened for a bootstrap over few `units` (rounds). The plain
    /// percentile interval is too narrow for small samples: it has about the width of a
    /// z-interval with divisor n where a t-interval has t_{n−1} and n − 1 (Hesterberg 2015,
    /// "What teachers should know about the bootstrap", §4.2, which expands the tail
    /// probability instead; at 3–5 rounds the resamples' own tails are too short for that).
    /// So each side's distance from the estimate is multiplied by
    /// √(n/(n−1))·t_{0.975,n−1}/z_{0.975}: 2.7 at 3 rounds, 1.6 at 5, 1.2 at 10, → 1. One unit
    /// gives no interval.
    pub fn expanded_percentile(estimate: f64, resampled: &[f64], units: usize) -> Interval {
        if units < 2 {
            return Interval {
                estimate,
                ..Interval::UNDEFINED
            };
        }
        let plain = Interval::percentile_at(estimate, resampled, 0.025);
        if !plain.is_defined() || !estimate.is_finite() {
            return plain;
        }
        let f = small_sample_factor(units);
        Interval {
            estimate,
            low: estimate - f * (estimate - plain.low).max(0.0),
            high: estimate + f * (plain.high - estimate).max(0.0),
        }
    }

    /// The `tail` and 1 − `tail` quantiles of the finite resampled values.
    fn percentile_at(estimate: f64, resampled: &[f64], tail: f64) -> Interval {
        let mut v: Vec<f64> = resampled
            .iter()
            .copied()
            .filter(|x| x.is_finite())
            .collect();
        if v.is_empty() || v.len() * 2 < resampled.len() {
            return Interval {
                estimate,
                ..Interval::UNDEFINED
            };
        }
        v.sort_by(f64::total_cmp);
        let at = |q: f64| {
            // Linear interpolation between order statistics (type 7, as R and numpy).
            let h = q * (v.len() - 1) as f64;
            let (lo, hi) = (h.floor() as usize, h.ceil() as usize);
            v[lo] + (h - h.floor()) * (v[hi] - v[lo])
        };
        Interval {
            estimate,
            low: at(tail),
            high: at(1.0 - tail),
        }
    }

    pub fn is_defined(&self) -> bool {
        self.low.is_finite() && self.high.is_finite()
    }

    pub fn width(&self) -> f64 {
        self.high - self.low
    }

    pub fn contains(&self, x: f64) -> bool {
        self.low <= x && x <= self.high
    }
}

/// √(n/(n−1))·t_{0.975,n−1}/z_{0.975}: how much wider a 95 % t-interval over n values is than
/// the z-interval the plain percentile bootstrap approximates (see
/// [`Interval::expanded_percentile`]).
pub fn small_sample_factor(units: usize) -> f64 {
    // Student's t_{0.975} for 1..=30 degrees of freedom (any table, e.g. NIST/SEMATECH
    // e-Handbook 1.3.6.7.2); beyond, 1.96 + 2.4/df is within 0.002 of it.
    const T975: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    let n = units.max(2) as f64;
    let df = units.max(2) - 1;
    let t = T975.get(df - 1).copied().unwrap_or(1.96 + 2.4 / df as f64);
    (n / (n - 1.0)).sqrt() * t / 1.959_964
}

/// The percentile bootstrap over `units` paired units (Efron & Tibshirani 1993, ch. 13):
/// `resamples` times, draw `units` indices with replacement and evaluate `statistic` on them;
/// returns, per figure the statistic gives, its values over the resamples. The statistic
/// gives the same number of figures every time (NaN where a figure is undefined).
pub fn bootstrap<F>(units: usize, resamples: usize, seed: u64, mut statistic: F) -> Vec<Vec<f64>>
where
    F: FnMut(&[usize]) -> Vec<f64>,
{
    let mut rng = SplitMix64::new(seed);
    let mut picks = vec![0usize; units];
    let mut out: Vec<Vec<f64>> = Vec::new();
    if units == 0 {
        return out;
    }
    for _ in 0..resamples {
        for p in picks.iter_mut() {
            *p = rng.below(units);
        }
        let figures = statistic(&picks);
        if out.is_empty() {
            out = vec![Vec::with_capacity(resamples); figures.len()];
        }
        for (column, x) in out.iter_mut().zip(figures) {
            column.push(x);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{bootstrap, Interval, SplitMix64, Spread};

    /// The mean of `values` at the picked indices.
    fn mean_at(values: &[f64], picks: &[usize]) -> f64 {
        picks.iter().map(|&i| values[i]).sum::<f64>() / picks.len() as f64
    }

    /// Normal-ish values around `centre` from the generator (sum of 12 uniforms − 6).
    fn noisy(n: usize, centre: f64, spread: f64, seed: u64) -> Vec<f64> {
        let mut rng = SplitMix64::new(seed);
        (0..n)
            .map(|_| {
                let z: f64 = (0..12)
                    .map(|_| (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64)
                    .sum::<f64>()
                    - 6.0;
                centre + spread * z
            })
            .collect()
    }

    #[test]
    fn the_bootstrap_interval_covers_the_truth_shrinks_with_more_rounds_and_is_repeatable() {
        let interval = |values: &[f64], seed: u64| {
            let full: Vec<usize> = (0..values.len()).collect();
            let r = bootstrap(values.len(), 2000, seed, |p| vec![mean_at(values, p)]);
            Interval::percentile(mean_at(values, &full), &r[0])
        };
        // Truth 10, noise σ = 1. Over 40 independent data sets of 8 rounds, the 95 % interval
        // misses 10 a few times at most (the percentile bootstrap under-covers a little at
        // small n: 8 rounds ≈ 90 %).
        let mut missed = 0;
        for seed in 0..40 {
            let v = noisy(8, 10.0, 1.0, 1000 + seed);
            if !interval(&v, 7).contains(10.0) {
                missed += 1;
            }
        }
        assert!(missed <= 8, "missed {missed} of 40");
        // Four times the rounds: about half the width (1/√rounds).
        let few = interval(&noisy(8, 10.0, 1.0, 1), 7);
        let many = interval(&noisy(32, 10.0, 1.0, 1), 7);
        let ratio = many.width() / few.width();
        assert!(
            (0.3..0.75).contains(&ratio),
            "{few:?} {many:?} ratio {ratio}"
        );
        // The same seed, the same interval; another seed, a slightly different one.
        let v = noisy(8, 10.0, 1.0, 3);
        assert_eq!(interval(&v, 7), interval(&v, 7));
        assert_ne!(interval(&v, 7), interval(&v, 8));
    }

    #[test]
    fn undefined_figures_give_an_undefined_interval_that_survives_json() {
        let half_nan = [1.0, f64::NAN, f64::NAN, f64::NAN];
        let i = Interval::percentile(1.0, &half_nan);
        assert!(!i.is_defined());
        let ok = Interval::percentile(2.0, &[1.0, 2.0, 3.0, f64::NAN]);
        assert!(ok.is_defined() && ok.low >= 1.0 && ok.high <= 3.0, "{ok:?}");
        let json = serde_json::to_string(&i).unwrap();
        assert_eq!(json, r#"{"estimate":1.0,"low":null,"high":null}"#);
        let back: Interval = serde_json::from_str(&json).unwrap();
        assert!(back.low.is_nan() && back.estimate == 1.0);
    }

    #[test]
    fn the_expanded_interval_widens_small_samples_as_a_t_interval_does() {
        use super::small_sample_factor;
        // 2.7 at 3 rounds, 1.6 at 5, 1.2 at 10, about 1 for many.
        assert!(
            (small_sample_factor(3) - 2.69).abs() < 0.01,
            "{}",
            small_sample_factor(3)
        );
        assert!(
            (small_sample_factor(5) - 1.58).abs() < 0.01,
            "{}",
            small_sample_factor(5)
        );
        assert!(
            (small_sample_factor(10) - 1.22).abs() < 0.01,
            "{}",
            small_sample_factor(10)
        );
        assert!((small_sample_factor(200) - 1.0).abs() < 0.02);
        // On the same resamples the expanded interval holds the plain one.
        let v = noisy(5, 10.0, 1.0, 9);
        let r = bootstrap(5, 2000, 7, |p| vec![mean_at(&v, p)]);
        let plain = Interval::percentile(10.0, &r[0]);
        let wide = Interval::expanded_percentile(10.0, &r[0], 5);
        assert!(
            wide.low < plain.low && wide.high > plain.high,
            "{plain:?} {wide:?}"
        );
        assert!(!Interval::expanded_percentile(10.0, &r[0], 1).is_defined());
        // Coverage at 5 rounds: the truth is missed in at most 3 of 40 data sets (nominal 95 %;
        // the plain percentile interval misses about 1 in 8 at this size).
        let mut missed = 0;
        for seed in 0..40 {
            let v = noisy(5, 10.0, 1.0, 2000 + seed);
            let r = bootstrap(5, 2000, 7, |p| vec![mean_at(&v, p)]);
            if !Interval::expanded_percentile(10.0, &r[0], 5).contains(10.0) {
                missed += 1;
            }
        }
        assert!(missed <= 3, "missed {missed} of 40");
    }

    #[test]
    fn the_generator_is_uniform_enough() {
        let mut rng = SplitMix64::new(42);
        let mut counts = [0u32; 5];
        for _ in 0..50_000 {
            counts[rng.below(5)] += 1;
        }
        assert!(
            counts.iter().all(|&c| (9_500..10_500).contains(&c)),
            "{counts:?}"
        );
    }

    #[test]
    fn spread_by_hand() {
        let s = Spread::of(&[4.0, 1.0, 3.0, 2.0]).unwrap();
        assert_eq!(
            (s.n, s.min, s.median, s.mean, s.max),
            (4, 1.0, 2.5, 2.5, 4.0)
        );
        // Σ(x − 2.5)² = 5, / 3.
        assert!((s.stdev - (5.0f64 / 3.0).sqrt()).abs() < 1e-12);
        let one = Spread::of(&[7.0]).unwrap();
        assert_eq!((one.median, one.stdev), (7.0, 0.0));
        assert!(Spread::of(&[]).is_none());
        assert!(Spread::of(&[1.0, f64::NAN]).is_none());
        assert!((Spread::of(&[1.0, 3.0]).unwrap().cov_pct().unwrap() - 70.710678).abs() < 1e-4);
    }
}
