//! Summaries of repeated measurements (DESIGN §4: min, median, mean, max, standard deviation).

use serde::{Deserialize, Serialize};

/// Min, median, mean, max and sample standard deviation of repeated measurements.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
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

#[cfg(test)]
mod tests {
    use super::Spread;

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
