//! Round-robin timing: every contender runs in short blocks, in turn, so
//! load from other processes on the machine hits all of them alike.

use std::time::{Duration, Instant};

/// How long to measure.
#[derive(Clone, Copy)]
pub struct Budget {
    /// Rounds of blocks; each contender gets one block per round.
    pub rounds: usize,
    pub block: Duration,
}

impl Budget {
    pub fn new(quick: bool) -> Self {
        if quick {
            Self {
                rounds: 5,
                block: Duration::from_millis(10),
            }
        } else {
            Self {
                rounds: 30,
                block: Duration::from_millis(60),
            }
        }
    }
}

/// Median nanoseconds per call of each contender.
pub fn medians(calls: &mut [&mut dyn FnMut()], budget: Budget) -> Vec<f64> {
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); calls.len()];
    // Warm-up: page cache, allocator, branch predictors.
    for c in calls.iter_mut() {
        let t = Instant::now();
        while t.elapsed() < budget.block * 2 {
            c();
        }
    }
    for _ in 0..budget.rounds {
        for (i, c) in calls.iter_mut().enumerate() {
            let t0 = Instant::now();
            while t0.elapsed() < budget.block {
                let t = Instant::now();
                c();
                samples[i].push(t.elapsed().as_nanos() as f64);
            }
        }
    }
    samples.into_iter().map(median).collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}
