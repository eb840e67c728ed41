//! Progress of a long attach. A bar on a terminal; on anything else (a log file,
//! a pipe, a CI console) plain lines, because an attach of tens of thousands of
//! functions can take minutes and a silent log cannot tell slow from stuck.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// Below this many functions an attach is quick enough to need no progress.
const SHOW_ABOVE: usize = 100;
/// Without a terminal: a line every tenth of the work, and at least this often.
const LINE_EVERY: Duration = Duration::from_secs(30);

pub enum AttachProgress {
    Hidden,
    Bar(ProgressBar),
    Lines {
        total: usize,
        done: AtomicUsize,
        /// When the first function was attached: the times printed leave out the
        /// maps' setup before it, so they never overstate how long attaching took.
        start: OnceLock<Instant>,
        /// When the last line was printed and at which count.
        last: Mutex<(Instant, usize)>,
    },
}

impl AttachProgress {
    pub fn new(total: usize) -> Self {
        if total <= SHOW_ABOVE {
            return Self::Hidden;
        }
        if std::io::stderr().is_terminal() {
            let b = ProgressBar::new(total as u64);
            b.set_style(
                ProgressStyle::with_template("attaching {bar:40} {pos}/{len} functions {elapsed}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            return Self::Bar(b);
        }
        let now = Instant::now();
        Self::Lines {
            total,
            done: AtomicUsize::new(0),
            start: OnceLock::new(),
            last: Mutex::new((now, 0)),
        }
    }

    /// `k` more functions attached (called from the engines' worker threads).
    pub fn inc(&self, k: usize) {
        match self {
            Self::Hidden => {}
            Self::Bar(b) => b.inc(k as u64),
            Self::Lines {
                total,
                done,
                start,
                last,
            } => {
                let start = start.get_or_init(Instant::now);
                let n = done.fetch_add(k, Ordering::Relaxed) + k;
                // A poisoned lock only means another thread panicked mid-print.
                let mut last = last.lock().unwrap_or_else(|p| p.into_inner());
                let step = (*total / 10).max(1);
                if n >= last.1 + step || n == *total || last.0.elapsed() >= LINE_EVERY {
                    eprintln!(
                        "bpfmux trace: attaching: {n}/{total} functions, {:.1} s after the first",
                        start.elapsed().as_secs_f64()
                    );
                    *last = (Instant::now(), n);
                }
            }
        }
    }

    /// The attach is over (done or abandoned): clear the bar.
    pub fn finish(&self) {
        if let Self::Bar(b) = self {
            b.finish_and_clear();
        }
    }

    /// Say that detaching starts, where a bar would not have been seen either:
    /// detaching as many functions takes about as long as attaching them.
    pub fn detaching(&self, n: usize) {
        if let Self::Lines { .. } = self {
            eprintln!("bpfmux trace: detaching {n} functions");
        }
    }
}
