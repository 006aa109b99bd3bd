//! How every bench summarises its samples: one percentile (nearest rank on
//! the sorted samples, `round((n - 1) * p)`), so that a p50 means the same
//! in each figure of docs/benchmarks.md. No privilege; pure.
#![allow(dead_code)]

use std::time::Duration;

/// The `p`-th fraction (0.0..=1.0) of `samples`; zero for no samples.
pub fn percentile(samples: &[Duration], p: f64) -> Duration {
    if samples.is_empty() {
        return Duration::ZERO;
    }
    let mut sorted = samples.to_vec();
    sorted.sort();
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// The median (for an even count, the upper of the two middle samples).
pub fn p50(samples: &[Duration]) -> Duration {
    percentile(samples, 0.5)
}

/// Milliseconds, for printing.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
