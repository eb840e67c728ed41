//! A trace run from attach to summary: the event loop that reads the
//! counters every interval, the per-call events as they come and the user
//! stacks as they appear (normalized then, see [`super::stacks`]), the
//! detach, and the summary with its stacks symbolized.
//!
//! ```text
//! TraceOptions ──plan()──▶ Plan ──attach(Control)──▶ Tracer
//!                                                       │ Session::new(tracer, RunOptions)
//!                                                       ▼
//!        Report ◀──event/interval── Session::run(stop, report)   (counting)
//!                                   Session::detach(progress)    (nothing left attached)
//!        Report ◀──summary───────── Session::summary(&window)    (totals, stacks)
//! ```

use std::cell::RefCell;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::errors::{ChainRecord, ErrorTally, Resolver, RetClass};
use super::events::{self, Event, EventKind, FuncStats};
use super::graph;
use super::output;
use super::recording;
use super::report::{Interval, Report};
use super::stacks::{self, Mechanism, Stack, UserStacks};
use super::summary::{
    ms, AttachBreakdown, FilterTotals, FunctionTotals, Lost, Skipped, StackSummary, Summary,
    TOP_STACKS,
};
use super::{Error, Tracer};
use crate::symbolize::debuginfod::Debuginfod;
use crate::symbolize::{DebuginfodAnswer, KallsymsError, KernelLines, KernelSymbolizer};
use crate::sys::sched::Unpreempted;

/// How long a run lasts, how often it reports, and how it names kernel
/// frames.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Time between [`Report::interval`] calls.
    pub interval: Duration,
    /// Stop after this long; `None`: only when the caller's `stop` says so.
    pub duration: Option<Duration>,
    /// Source lines for kernel frames of stacks and error chains (see
    /// [`crate::symbolize::KernelLines`]); `None`: names only.
    pub kernel_lines: Option<Arc<KernelLines>>,
    /// Where debug files of user frames' binaries with no DWARF here come
    /// from (see [`crate::symbolize::UserSymbolizer::with_debuginfod`]).
    pub debuginfod: Option<Debuginfod>,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(1),
            duration: None,
            kernel_lines: None,
            debuginfod: None,
        }
    }
}

/// What [`Session::run`] counted: the traced window.
#[derive(Clone, Copy, Debug, Default)]
pub struct Window {
    /// From the start of the run to its stop.
    pub elapsed: Duration,
    /// Per-call events delivered to the report.
    pub events: usize,
    /// Error chains delivered to the report.
    pub chains: usize,
}

/// An attached [`Tracer`] and how to run it.
pub struct Session {
    tracer: Tracer,
    run: RunOptions,
    detach_time: Duration,
    errors: ErrorTally,
    ustacks: UserStacks,
    /// The stack counts, read once after the detach.
    read_stacks: Option<events::Stacks>,
    /// The kernel symbol table and the tracer's own frames in kernel
    /// stacks.
    kernel: KernelNames,
    /// Why map reads during the run could not be kept unpreempted, on an
    /// engine whose programs a preempted map read turns away (see
    /// [`crate::sys::sched`]).
    preemptible_reads: Option<String>,
    /// Where the run is recorded ([`Session::record_to`]).
    recording: Option<recording::Writer>,
}

impl Session {
    /// A session over an attached tracer (see [`super::Plan::attach`]).
    /// Files the run reads as it goes (/proc/kallsyms) are opened here:
    /// create the session before a traced command starts, so that its
    /// calls of traced functions do not meet this process's own.
    pub fn new(tracer: Tracer, run: RunOptions) -> Self {
        let during_run = !tracer.opts.user_stacks_at_end;
        // Now, while the trampolines are attached and in kallsyms.
        let kernel = if tracer.opts.kstack || tracer.opts.errors {
            KernelNames::start(tracer.selection.funcs.clone(), run.kernel_lines.clone())
        } else {
            KernelNames::default()
        };
        let mut ustacks = UserStacks::new(during_run).with_debuginfod(run.debuginfod.clone());
        ustacks.add_candidates(tracer.stack_files.iter().cloned());
        Self {
            tracer,
            run,
            detach_time: Duration::ZERO,
            errors: ErrorTally::default(),
            ustacks,
            read_stacks: None,
            kernel,
            preemptible_reads: None,
            recording: None,
        }
    }

    /// Names files whose build IDs the frames of processes gone before their
    /// stacks were read may have (e.g. the program of the command the run
    /// traces): see [`crate::normalize::capture::CaptureCache::add_candidates`].
    pub fn add_stack_files(&mut self, paths: impl IntoIterator<Item = PathBuf>) {
        self.ustacks.add_candidates(paths);
    }

    /// What debuginfod answered for the files of user frames so far.
    pub fn debuginfod_answers(&self) -> &[DebuginfodAnswer] {
        self.ustacks.debuginfod_answers()
    }

    /// Records the run to `w` (see [`recording`]): its header now, error
    /// chains as they come, stacks and the summary at
    /// [`Session::finish_recording`].
    pub fn record_to(&mut self, mut w: recording::Writer) -> Result<(), Error> {
        w.header(&self.tracer)?;
        self.recording = Some(w);
        Ok(())
    }

    /// Ends the recording, if there is one: every stack counted, `summary`
    /// (from [`Session::summary`]) and the caller's own summary `fields`.
    pub fn finish_recording(
        &mut self,
        summary: &Summary,
        fields: &[(String, serde_json::Value)],
    ) -> Result<Option<recording::Written>, Error> {
        let Some(w) = self.recording.take() else {
            return Ok(None);
        };
        let t = &self.tracer;
        let read = if t.opts.kstack || t.opts.ustack {
            if self.read_stacks.is_none() {
                self.read_stacks = Some(events::read_stacks(t.object())?);
            }
            self.read_stacks.as_ref()
        } else {
            None
        };
        let (ksyms, mech) = self.kernel.get();
        Ok(Some(w.finish(
            t,
            read,
            &mut self.ustacks,
            (ksyms, mech),
            summary,
            fields,
        )?))
    }

    /// The attached set: engine, functions, attach times.
    pub fn tracer(&self) -> &Tracer {
        &self.tracer
    }

    /// Counts until `stop` returns true (asked every 100 ms at most) or the
    /// run's duration is over, reporting each interval's numbers, every
    /// per-call event and every error chain to `report`. `stop` is called on
    /// every turn, so it can reap a child process as it goes. User stacks
    /// are normalized on every turn as they appear (see [`super::stacks`]).
    pub fn run(
        &mut self,
        stop: &mut dyn FnMut() -> bool,
        report: &mut dyn Report,
    ) -> Result<Window, Error> {
        let t = &self.tracer;
        let funcs = &t.selection.funcs;
        let start = Instant::now();
        let interval = self.run.interval;
        let deadline = self.run.duration.map(|d| start + d);
        let mut prev: Vec<FuncStats> = vec![FuncStats::default(); funcs.len()];
        let mut next_tick = start + interval;
        let mut last_tick = start;
        let (mut events, mut chains) = (0usize, 0usize);
        let pending: RefCell<Vec<Event>> = RefCell::new(Vec::new());
        let pending_chains: RefCell<Vec<ChainRecord>> = RefCell::new(Vec::new());
        let ring = t.rings(
            |e: Event| pending.borrow_mut().push(e),
            |c: ChainRecord| pending_chains.borrow_mut().push(c),
        )?;
        let mut resolver = Resolver;
        let tally = &mut self.errors;
        let ustacks = &mut self.ustacks;
        let kernel = &mut self.kernel;
        let recording = &mut self.recording;
        let nulls = t.opts.null_returns;
        // Map reads (stacks, chains' stacks, counts) unpreempted where a
        // preempted one would make the programs skip calls.
        let guard = t.engine.guard_is_cpu_wide();
        let refused: RefCell<Option<String>> = RefCell::new(None);
        let unpreempted = || -> Option<Unpreempted> {
            if !guard {
                return None;
            }
            Unpreempted::enter()
                .map_err(|e| {
                    refused
                        .borrow_mut()
                        .get_or_insert_with(|| format!("SCHED_FIFO refused: {e}"));
                })
                .ok()
        };
        let class = |i: usize| funcs.get(i).map(|f| RetClass::of(f.proto.ret));
        // What came since the last turn; then the user stacks counted since.
        let mut deliver = |report: &mut dyn Report, last: bool| -> Result<(), Error> {
            ustacks.new_round();
            for mut e in pending.borrow_mut().drain(..) {
                if let Some(f) = funcs.get(e.func) {
                    if e.kind == EventKind::Entry && e.args.iter().any(|&a| (a as i64) < -4095) {
                        if let (Some(k), _) = kernel.get() {
                            events::name_symbols(&mut e, &f.proto, k);
                        }
                    }
                    events += 1;
                    report.event(&e, f).map_err(Error::Report)?;
                }
            }
            // Chains' stacks and the stack scan read maps.
            let reading = unpreempted();
            // NULL-only chains are counted and left out before their
            // stacks are symbolized.
            let admitted: Vec<ChainRecord> = pending_chains
                .borrow_mut()
                .drain(..)
                .filter(|c| tally.admit(nulls, c, class))
                .collect();
            // User frames first: the kernel's names may still be read on
            // their thread (seconds under emulation), and a process that
            // exits meanwhile could no longer be normalized.
            if t.opts.ustack {
                ustacks.scan(t.object(), last)?;
            }
            for c in &admitted {
                if let Some(id) = c.ustack {
                    ustacks.capture_chain(t.object(), c.tgid, id);
                }
            }
            for c in admitted {
                let names = kernel.get();
                if let Some(chain) = resolver.resolve(&c, funcs, t.object(), ustacks, names) {
                    chains += 1;
                    tally.add(&chain);
                    if let Some(w) = recording.as_mut() {
                        w.chain(&c, &chain, t.object(), ustacks, names)?;
                    }
                    report.error_chain(&chain).map_err(Error::Report)?;
                }
            }
            drop(reading);
            Ok(())
        };
        loop {
            let now = Instant::now();
            // `stop` first and always: it may reap a child.
            let done = stop() | deadline.is_some_and(|d| now >= d);
            if done {
                break;
            }
            let wait = next_tick
                .min(deadline.unwrap_or(next_tick))
                .saturating_duration_since(now)
                .min(Duration::from_millis(100));
            match &ring {
                // EINTR on a signal is fine: `stop` is asked next. What it
                // left unread is read now, so that everything sent so far
                // is reported before the turn (a dump asked for then holds it).
                Some(r) => {
                    let _ = r.poll(wait);
                    let _ = r.consume();
                }
                None => std::thread::sleep(wait),
            }
            deliver(report, false)?;
            report.turn().map_err(Error::Report)?;
            if Instant::now() >= next_tick {
                let reading = unpreempted();
                let snap = t.snapshot()?;
                drop(reading);
                let secs = last_tick.elapsed().as_secs_f64();
                last_tick = Instant::now();
                next_tick += interval;
                let rows = output::rows(funcs, &t.attached, &prev, &snap.stats, false);
                report
                    .interval(&Interval {
                        elapsed: start.elapsed(),
                        secs,
                        rows: &rows,
                        functions: t.nr_attached(),
                        engine: t.engine,
                    })
                    .map_err(Error::Report)?;
                prev = snap.stats;
            }
        }
        if let Some(r) = &ring {
            let _ = r.consume();
        }
        deliver(report, true)?;
        self.preemptible_reads = refused.into_inner();
        Ok(Window {
            elapsed: start.elapsed(),
            events,
            chains,
        })
    }

    /// Stops counting and detaches everything (see [`Tracer::detach`]);
    /// `progress` hears how many functions each step detached.
    pub fn detach(&mut self, progress: &(dyn Fn(usize) + Sync)) -> Duration {
        // The symbol table must be read while the trampolines are still in
        // kallsyms (their names come last in it): wait for its thread.
        self.kernel.wait();
        self.detach_time = self.tracer.detach(progress);
        self.detach_time
    }

    /// Why counting could not be stopped before detaching, if it could not
    /// (the totals then include calls made while detaching).
    pub fn disarm_error(&self) -> Option<&str> {
        self.tracer.disarm_error.as_deref()
    }

    /// Every stack counted (the summary has the busiest [`TOP_STACKS`]),
    /// busiest first, symbolized as the summary's are: what stack profiles
    /// are made of ([`super::export`]). Empty when stacks were not counted.
    /// Call it after [`Session::detach`], and before [`Session::summary`]
    /// for the summary's user stack totals to count the stacks normalized
    /// only now (with [`super::TraceOptions::user_stacks_at_end`]).
    pub fn stacks(&mut self) -> Result<Vec<Stack>, Error> {
        self.stacks_up_to(usize::MAX)
    }

    /// The first `max` stacks, busiest first (the counts read once).
    fn stacks_up_to(&mut self, max: usize) -> Result<Vec<Stack>, Error> {
        let t = &self.tracer;
        if !(t.opts.kstack || t.opts.ustack) {
            return Ok(Vec::new());
        }
        let read = match &mut self.read_stacks {
            Some(r) => r,
            r @ None => r.insert(events::read_stacks(t.object())?),
        };
        let (ksyms, mech) = self.kernel.get();
        Ok(stacks::symbolize(
            t,
            read,
            &mut self.ustacks,
            ksyms,
            mech,
            max,
        ))
    }

    /// Totals since attach, the busiest stacks symbolized (when stacks were
    /// counted; user frames from what was normalized as they were captured,
    /// or now for stacks not seen before), times and losses. Call it after
    /// [`Session::detach`].
    pub fn summary(&mut self, window: &Window) -> Result<Summary, Error> {
        let t = &self.tracer;
        let snap = t.snapshot()?;
        let zero = vec![FuncStats::default(); t.selection.funcs.len()];
        let rows = output::rows(&t.selection.funcs, &t.attached, &zero, &snap.stats, true);
        let injecting = t.opts.inject.is_some();
        let functions = rows
            .iter()
            .map(|r| FunctionTotals {
                injected: injecting.then_some(r.total.injected),
                ..FunctionTotals::new(
                    &r.name,
                    &r.total,
                    snap.hist.as_ref().map(|h| &h[r.index][..]),
                )
            })
            .collect();
        let stacks = if t.opts.kstack || t.opts.ustack {
            let top = self.stacks_up_to(TOP_STACKS)?;
            Some(top.iter().map(StackSummary::from).collect())
        } else {
            None
        };
        let t = &self.tracer;
        let user_stacks = (t.opts.ustack || t.opts.errors).then(|| self.ustacks.totals());
        let b = &t.breakdown;
        Ok(Summary {
            kind: "summary",
            engine: t.engine,
            exit_side: t.exit,
            functions_attached: t.nr_attached(),
            functions_dropped: t.selection.dropped.len(),
            skipped: t
                .warnings()
                .map(|d| Skipped {
                    function: d.display_name(),
                    reason: d.reason.to_string(),
                })
                .collect(),
            links: t.nr_links(),
            select_ms: ms(t.select_time),
            prepare_ms: ms(t.prepare_time),
            attach_ms: ms(t.attach_time),
            detach_ms: ms(self.detach_time),
            attach_breakdown: AttachBreakdown {
                program_loads: b.loads,
                load_ms: ms(b.load_time),
                links: b.links,
                link_functions: b.link_funcs,
                link_ms: ms(b.link_time),
                refused_tries: b.refused_tries,
                refused_ms: ms(b.refused_time),
                split: b.split.clone(),
            },
            elapsed_s: window.elapsed.as_secs_f64(),
            events: window.events,
            errors: t.opts.errors.then(|| self.errors.totals()),
            null_only_chains_left_out: t.opts.errors.then(|| self.errors.null_only_left_out()),
            graph: if t.opts.graph {
                Some(graph::build(
                    &graph::read_paths(t.object())?,
                    &t.selection.funcs,
                ))
            } else {
                None
            },
            injected: injecting.then(|| snap.stats.iter().map(|s| s.injected).sum()),
            lost: Lost {
                events: snap.lost_events,
                chains: snap.lost_chains,
                graph: snap.lost_graph,
                stacks: snap.lost_stacks,
                nesting: snap.lost_depth,
                recursion_misses: t.recursion_misses(),
            },
            preemptible_reads: self.preemptible_reads.clone(),
            filter: t.filter().map(|f| FilterTotals {
                expression: f.text().to_string(),
                seen: snap.stats.iter().map(|s| s.filter_seen).sum(),
                passed: snap.stats.iter().map(|s| s.calls).sum(),
                functions_never_passed: f.lacking().len(),
            }),
            functions,
            stacks,
            user_stacks,
            latency: snap.hist.is_some(),
        })
    }
}

/// The kernel symbol table and the mechanism's frames ([`Mechanism`]):
/// read on a thread of their own from the session's start, while the
/// trampolines are in kallsyms, so that the run's first turns do not wait
/// for them (seconds under emulation) and a short-lived process's user
/// stacks are normalized before it exits. Without a start, the table is
/// read at first use, with no mechanism frames known. [`Session::detach`]
/// waits for the thread: the trampolines leave kallsyms with the links.
#[derive(Default)]
struct KernelNames {
    pending: Option<std::thread::JoinHandle<(Option<KernelSymbolizer>, Mechanism)>>,
    ready: Option<(Option<KernelSymbolizer>, Mechanism)>,
}

impl KernelNames {
    fn start(funcs: Vec<super::Func>, lines: Option<Arc<KernelLines>>) -> Self {
        // Opened here, read on the thread: the open is the caller's, made
        // before the traced command runs (a traced `openat` path must not
        // meet this process's own open while a program of the run is
        // preempted on that CPU: the kernel's recursion guard would turn
        // that call away and count it).
        let file = std::fs::File::open("/proc/kallsyms");
        let pending = std::thread::spawn(move || {
            match file
                .map_err(KallsymsError::from)
                .and_then(KernelSymbolizer::read_from)
            {
                Ok(k) => {
                    let mech = Mechanism::new(&k, &funcs);
                    let k = match lines {
                        Some(l) => k.with_lines(l),
                        None => k,
                    };
                    (Some(k), mech)
                }
                Err(_) => (None, Mechanism::default()),
            }
        });
        Self {
            pending: Some(pending),
            ready: None,
        }
    }

    /// Waits for the reading thread, if one was started.
    fn wait(&mut self) {
        if self.pending.is_some() {
            self.get();
        }
    }

    /// The table (`None`: not readable) and the mechanism's frames,
    /// waiting for the reading thread the first time.
    fn get(&mut self) -> (Option<&KernelSymbolizer>, &Mechanism) {
        let pending = &mut self.pending;
        let (k, m) = self.ready.get_or_insert_with(|| match pending.take() {
            Some(h) => h.join().unwrap_or((None, Mechanism::default())),
            None => (KernelSymbolizer::load().ok(), Mechanism::default()),
        });
        (k.as_ref(), m)
    }
}
