//! The learning-rate schedule: linear warm-up to the peak, then cosine decay to the
//! floor at the last step (as Llama and most open pretraining runs use).

use serde::{Deserialize, Serialize};

/// Warm-up plus cosine decay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Schedule {
    /// Peak learning rate: 3e-4 (Llama 7B).
    pub lr: f64,
    /// Floor, reached at `total_steps`: a tenth of the peak (Llama).
    pub min_lr: f64,
    /// Steps of linear warm-up from 0: 2,000 (Llama).
    pub warmup_steps: u64,
    /// Steps of the whole run.
    pub total_steps: u64,
}

impl Default for Schedule {
    fn default() -> Self {
        Schedule {
            lr: 3e-4,
            min_lr: 3e-5,
            warmup_steps: 2000,
            total_steps: 100_000,
        }
    }
}

impl Schedule {
    /// The learning rate of step `step` (0-based).
    pub fn lr_at(&self, step: u64) -> f64 {
        if step < self.warmup_steps {
            return self.lr * (step + 1) as f64 / self.warmup_steps as f64;
        }
        let span = self.total_steps.saturating_sub(self.warmup_steps).max(1);
        let done = ((step - self.warmup_steps) as f64 / span as f64).min(1.0);
        let cosine = 0.5 * (1.0 + (std::f64::consts::PI * done).cos());
        self.min_lr + (self.lr - self.min_lr) * cosine
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warm_up_then_cosine_to_the_floor() {
        let s = Schedule {
            lr: 1.0,
            min_lr: 0.1,
            warmup_steps: 10,
            total_steps: 110,
        };
        assert!((s.lr_at(0) - 0.1).abs() < 1e-12);
        assert!((s.lr_at(9) - 1.0).abs() < 1e-12);
        assert!((s.lr_at(10) - 1.0).abs() < 1e-12);
        assert!(
            (s.lr_at(60) - 0.55).abs() < 1e-12,
            "half way: {}",
            s.lr_at(60)
        );
        assert!((s.lr_at(110) - 0.1).abs() < 1e-12);
        assert!((s.lr_at(500) - 0.1).abs() < 1e-12);
        let mut last = f64::INFINITY;
        for step in 10..=110 {
            assert!(s.lr_at(step) <= last);
            last = s.lr_at(step);
        }
    }
}
