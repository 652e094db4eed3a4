//! Summary statistics of a set of measurements.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Stats {
    pub n: usize,
    pub min: f64,
    pub max: f64,
    pub mean: f64,
    /// Sample standard deviation (n − 1 in the denominator, as ccont's figures are); `None`
    /// for one value, where it is undefined.
    pub stdev: Option<f64>,
}

impl Stats {
    /// `None` for no values.
    pub fn of(values: &[f64]) -> Option<Stats> {
        if values.is_empty() {
            return None;
        }
        let n = values.len();
        let mean = values.iter().sum::<f64>() / n as f64;
        let stdev = (n > 1).then(|| {
            (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
        });
        Some(Stats {
            n,
            min: values.iter().copied().fold(f64::INFINITY, f64::min),
            max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            mean,
            stdev,
        })
    }

    /// Standard error of the mean: stdev / √n.
    pub fn standard_error(&self) -> Option<f64> {
        self.stdev.map(|s| s / (self.n as f64).sqrt())
    }
}

#[cfg(test)]
mod tests {
    use super::Stats;

    #[test]
    fn cconts_five_cpu_step() {
        // ccont's step 5 (cpu-increase, cmpxchg): four CPUs near 108 ns, one at 61.7 ns; its
        // stdev 20.735 is the sample standard deviation.
        let s = Stats::of(&[61.691, 108.06, 108.05, 108.055, 108.054]).unwrap();
        assert!((s.mean - 98.782).abs() < 0.001, "{s:?}");
        assert!((s.stdev.unwrap() - 20.735).abs() < 0.01, "{s:?}");
        assert_eq!((s.min, s.max), (61.691, 108.06));
        let one = Stats::of(&[8.938]).unwrap();
        assert_eq!(one.stdev, None);
        assert_eq!(one.standard_error(), None);
        assert!(Stats::of(&[]).is_none());
        let s = Stats::of(&[1.0, 3.0]).unwrap();
        assert!((s.standard_error().unwrap() - 1.0).abs() < 1e-12);
    }
}
