//! Converting recorded clock values to nanoseconds of CLOCK_MONOTONIC.

use serde::Serialize;
use trace::meta::Clock;
use trace::ClockSource;

/// `ns = base_ns + (ticks - base_ticks) * 1e9 / hz`, from the run's first calibration point
/// and its calibrated rate (docs/methodology.md, "Clocks").
#[derive(Debug, Clone, Copy, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Conversion {
    pub base_ticks: u64,
    pub base_ns: u64,
    pub hz: u64,
}

impl Conversion {
    /// The identity, for streams already in nanoseconds.
    pub fn nanoseconds() -> Conversion {
        Conversion {
            base_ticks: 0,
            base_ns: 0,
            hz: 1_000_000_000,
        }
    }

    pub fn from_meta(clock: &Clock) -> Conversion {
        match (clock.source, clock.calibration.first()) {
            (ClockSource::Tsc, Some(p)) if clock.hz > 0 => Conversion {
                base_ticks: p.ticks,
                base_ns: p.monotonic_ns,
                hz: clock.hz,
            },
            _ => Conversion::nanoseconds(),
        }
    }

    #[inline]
    pub fn ns(&self, ticks: u64) -> u64 {
        let delta = ticks as i128 - self.base_ticks as i128;
        let ns = self.base_ns as i128 + delta * 1_000_000_000 / self.hz.max(1) as i128;
        ns.clamp(0, u64::MAX as i128) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trace::meta::ClockPoint;

    #[test]
    fn ticks_to_ns() {
        let c = Conversion::from_meta(&Clock {
            source: ClockSource::Tsc,
            hz: 2_000_000_000,
            calibration: vec![ClockPoint {
                ticks: 1_000,
                monotonic_ns: 5_000,
            }],
        });
        assert_eq!(c.ns(1_000), 5_000);
        assert_eq!(c.ns(3_000), 6_000);
        assert_eq!(c.ns(0), 4_500);
        assert_eq!(Conversion::nanoseconds().ns(42), 42);
    }
}
