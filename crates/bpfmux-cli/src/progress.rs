//! Progress of a long attach, and of the detach that follows it (or undoes
//! an abandoned one). A bar on a terminal; on anything else (a log file, a
//! pipe, a CI console) whole plain lines, because an attach of tens of
//! thousands of functions can take minutes and a silent log cannot tell slow
//! from stuck.

use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// Below this many functions an attach is quick enough to need no progress.
const SHOW_ABOVE: usize = 100;
/// Without a terminal: a line every tenth of the work, and at least this often.
const LINE_EVERY: Duration = Duration::from_secs(30);

#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Attaching,
    Detaching,
}

impl Phase {
    fn verb(self) -> &'static str {
        match self {
            Phase::Attaching => "attaching",
            Phase::Detaching => "detaching",
        }
    }
}

struct State {
    phase: Phase,
    total: usize,
    done: usize,
    /// Functions attached so far (what an abandoned attach has to undo).
    attached: usize,
    /// When the phase's first function was done: the times printed leave out
    /// the setup before it, so they never overstate how long the work took.
    start: Option<Instant>,
    /// When the last line was printed and at which count.
    last: (Instant, usize),
}

pub struct AttachProgress {
    /// None: too small to show.
    bar: Option<ProgressBar>,
    show: bool,
    state: Mutex<State>,
}

fn style(verb: &str) -> ProgressStyle {
    ProgressStyle::with_template(&format!(
        "{verb} {{bar:40}} {{pos}}/{{len}} functions {{elapsed}}"
    ))
    .unwrap_or_else(|_| ProgressStyle::default_bar())
}

impl AttachProgress {
    pub fn new(total: usize) -> Self {
        let show = total > SHOW_ABOVE;
        let bar = (show && std::io::stderr().is_terminal()).then(|| {
            let b = ProgressBar::new(total as u64);
            b.set_style(style("attaching"));
            b
        });
        Self {
            bar,
            show,
            state: Mutex::new(State {
                phase: Phase::Attaching,
                total,
                done: 0,
                attached: 0,
                start: None,
                last: (Instant::now(), 0),
            }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A poisoned lock only means another thread panicked mid-print.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `k` more functions attached (called from the engines' worker threads).
    pub fn inc(&self, k: usize) {
        let mut st = self.state();
        st.attached += k;
        if st.phase == Phase::Attaching {
            self.step(&mut st, k);
        }
    }

    /// `k` more functions detached. The first call after an abandoned
    /// attach starts the detach phase over what had been attached.
    pub fn dec(&self, k: usize) {
        let mut st = self.state();
        if st.phase == Phase::Attaching {
            let n = st.attached;
            self.begin_detach(&mut st, n);
        }
        self.step(&mut st, k);
    }

    /// Detaching `n` functions starts (normal end of a trace).
    pub fn detaching(&self, n: usize) {
        let mut st = self.state();
        self.begin_detach(&mut st, n);
    }

    fn begin_detach(&self, st: &mut State, n: usize) {
        if st.phase == Phase::Detaching {
            return;
        }
        *st = State {
            phase: Phase::Detaching,
            total: n,
            done: 0,
            attached: st.attached,
            start: None,
            last: (Instant::now(), 0),
        };
        match &self.bar {
            Some(b) => {
                b.reset();
                b.set_length(n as u64);
                b.set_style(style("detaching"));
            }
            None if self.show => eprintln!("bpfmux trace: detaching {n} functions"),
            None => {}
        }
    }

    fn step(&self, st: &mut State, k: usize) {
        let start = *st.start.get_or_insert_with(Instant::now);
        st.done += k;
        if let Some(b) = &self.bar {
            b.set_position(st.done as u64);
            return;
        }
        if !self.show {
            return;
        }
        let (n, total) = (st.done, st.total);
        let step = (total / 10).max(1);
        if n >= st.last.1 + step || n == total || st.last.0.elapsed() >= LINE_EVERY {
            eprintln!(
                "bpfmux trace: {}: {n}/{total} functions, {:.1} s after the first",
                st.phase.verb(),
                start.elapsed().as_secs_f64()
            );
            st.last = (Instant::now(), n);
        }
    }

    /// A phase is over (done or abandoned): clear the bar.
    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
