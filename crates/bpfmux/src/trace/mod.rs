//! `bpfmux trace`: one program on many kernel functions.
//!
//! The data path, top-down:
//! 1. [`Pattern`]: what the user typed → patterns (exact names, globs,
//!    `module:glob`).
//! 2. [`select()`]: patterns → the function set (kernel BTF ∩ ftrace's
//!    attachable functions, minus denied and ambiguous ones, each drop with
//!    its [`DropReason`]).
//! 3. [`plan`]: the selection and an [`EngineKind`], chosen by probing the
//!    kernel ([`crate::features`]) or forced.
//! 4. [`Plan::attach`]: the BPF object with maps sized for the set, then
//!    the links (all or nothing per link; refused functions isolated by
//!    bisection and skipped with a warning; cancellable through
//!    [`Control`], and nothing stays attached after an error or a cancel).
//! 5. [`Session::run`]: counters every interval, per-call events as they
//!    come, told to a [`Report`]: [`LiveTable`], [`PlainText`] or
//!    [`JsonLines`].
//! 6. [`Session::detach`], then [`Session::summary`]: a serializable
//!    [`Summary`] with the busiest stacks symbolized.
//!
//! With [`TraceOptions::capture`] every call of the traced functions (at
//! most [`MAX_CAPTURED_FUNCTIONS`]) is an [`Event`]: all its arguments, the
//! 7th and later (stack-passed) too, strings of `char *` arguments read at
//! the call, and its return value; [`output`] prints them by their BTF
//! types ([`Format`]: enums by name, strings quoted, symbols, errnos).
//! With [`TraceOptions::pointee_depth`] the program also reads the structs
//! that pointer arguments point at (and, deeper, those their pointer fields
//! point at), printed as their fields.
//!
//! With [`TraceOptions::filter`] only the calls a filter passes are
//! recorded, decided in the BPF program ([`filter`]: a small expression
//! language on arguments, the return value, errno and latency).
//!
//! With [`TraceOptions::errors`] the programs keep each thread's calls in
//! flight and report every chain of them that ends in an error
//! ([`errors`]); a [`Recording`] keeps the last of them per errno or
//! failing function in bounded memory and writes them out when asked
//! ([`recorder`]). With [`TraceOptions::inject`] fmod_ret programs make calls
//! fail instead ([`inject`]); the rest of the path is the same. With
//! [`TraceOptions::graph`] they count calls per path of traced callers: the
//! call tree in the summary ([`graph`]).
//!
//! [`output`] has the text forms the reports write; [`notes`] what a run
//! says about itself (plan, attach, times, losses), with the caller's prefix;
//! [`export`] the files other tools load: folded stacks, flame graphs, pprof
//! profiles of the stacks or the call graph, and Chrome trace timelines of
//! per-call events.

mod btf;
mod engine;
pub mod errors;
mod events;
pub mod export;
pub mod filter;
pub mod graph;
pub mod inject;
mod listings;
pub mod notes;
pub mod output;
mod pattern;
mod pointee;
mod program;
pub mod recorder;
pub mod recording;
pub mod report;
pub mod scoping;
mod select;
pub mod selfpath;
pub mod session;
pub mod stacks;
pub mod summary;

use std::io;
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use crate::sys::bpf_ops;
use engine::{AttachError, Engine, Targets};
use events::Reader;
use program::{ObjectConfig, TraceObject};

pub use btf::{ArgPlace, BtfError, Enumerators, Format, Param, Proto, ValueKind};
pub use engine::{Breakdown, ChooseError, Control, EngineKind, ExitSide, UnknownEngine};
pub use events::{
    Event, EventKind, EventString, FuncStats, Hist, Snapshot, MAX_ARGS, MAX_DEREFS, MAX_STRINGS,
    MAX_STRING_SIZE,
};
pub use listings::ListingError;
pub use notes::{Detail, Hint, Hints, Notes};
pub use pattern::{Pattern, PatternError, Scope};
pub use pointee::{Pointees, MAX_DEPTH as MAX_POINTEE_DEPTH};
pub use program::Filters;
pub use recorder::{RecordBy, RecordOptions, Recorder, Recording};
pub use report::{Interval, JsonLines, LiveTable, PlainText, Report, Tee};
pub use scoping::{CgroupFilter, CgroupMatch, PidNamespace, ScopingError};
pub use select::{
    describe_dropped, select, DropReason, Dropped, Func, KernelRefusal, SelectError, SelectOptions,
    Selection,
};
pub use selfpath::SelfPath;
pub use session::{RunOptions, Session, Window};
pub use stacks::{FrameName, Stack, StackFrame};
pub use summary::Summary;

/// Milliseconds, rounded to the microsecond.
pub(crate) fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

/// Why a trace could not be planned, attached or run: what a caller can
/// act on is its own variant; the rest is what the kernel said, with the
/// step it was said at.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No engine works here, or not the one asked for.
    #[error(transparent)]
    Engine(#[from] ChooseError),
    /// A name in no kernel BTF, or nothing left to trace.
    #[error(transparent)]
    Select(#[from] SelectError),
    /// Error injection cannot be set up (a function the kernel does not
    /// allow it on, the list unreadable, ...).
    #[error(transparent)]
    Inject(#[from] inject::InjectError),
    /// The filter does not fit the functions (an argument none of them
    /// has, a value out of its range, ...): where, and why.
    #[error(transparent)]
    Filter(#[from] filter::FilterError),
    /// The cgroup or pid namespace to trace cannot be used (see
    /// [`scoping`]); checked when the options are made, and again for a
    /// cgroup when the programs are given it.
    #[error(transparent)]
    Scoping(#[from] scoping::ScopingError),
    /// [`Control::cancel`] was set before the attach was done; nothing stays
    /// attached.
    #[error("interrupted while attaching (everything attached so far was detached)")]
    Interrupted,
    /// The recording ([`recording`]) could not be written.
    #[error(transparent)]
    Recording(#[from] recording::RecordingError),
    /// The [`Report`] could not be written (its writer's error, as it was).
    #[error(transparent)]
    Report(io::Error),
    /// A step that asked the kernel (or the system) failed: a load, a link,
    /// a map read, ... (`step`, outermost first, e.g. `attaching with
    /// engine global: tracing_multi link on 523 functions of vmlinux`), and
    /// what it said (`source`: its errno, where it gave one).
    #[error("{step}")]
    Kernel {
        /// What was being done.
        step: String,
        /// What the kernel or the system said.
        #[source]
        source: io::Error,
    },
    /// The options cannot be met as given: a filter the programs cannot
    /// express, more functions than the maps can index.
    #[error("{0}")]
    Options(&'static str),
    /// Per-call events ([`TraceOptions::capture`]) asked for on more
    /// functions than [`MAX_CAPTURED_FUNCTIONS`].
    #[error(
        "per-call events on {functions} functions: at most {cap} (a set this large sends \
         events faster than they can be read); narrow the patterns, or count the calls \
         without per-call events"
    )]
    TooManyToCapture {
        /// Functions selected.
        functions: usize,
        /// The most that capture.
        cap: usize,
    },
    /// What cannot happen did: the embedded BPF object lacks a map or a
    /// section the library expects, a worker thread panicked.
    #[error("{0}")]
    Broken(String),
}

impl Error {
    /// An engine's attach error, at `step`.
    pub(crate) fn attach(e: AttachError, step: &str) -> Self {
        match e.at(step) {
            AttachError::Interrupted => Error::Interrupted,
            AttachError::Step { step, source } => Error::Kernel { step, source },
            AttachError::Io(source) => Error::Kernel {
                step: step.to_string(),
                source,
            },
            AttachError::Broken(m) => Error::Broken(m),
        }
    }
}

/// An error a step can fail with, as the `io::Error` [`Error::Kernel`]
/// carries: its text and source kept, its errno too where it has one.
pub(crate) trait IntoIo {
    fn into_io(self) -> io::Error;
}

impl IntoIo for io::Error {
    fn into_io(self) -> io::Error {
        self
    }
}

impl IntoIo for libbpf_rs::Error {
    fn into_io(self) -> io::Error {
        io::Error::other(self)
    }
}

impl IntoIo for std::num::TryFromIntError {
    fn into_io(self) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidInput, self)
    }
}

/// Names the step a result failed at: [`Error::Kernel`].
pub(crate) trait Step<T> {
    fn step(self, step: &str) -> Result<T, Error>;
    fn with_step(self, step: impl FnOnce() -> String) -> Result<T, Error>;
}

impl<T, E: IntoIo> Step<T> for Result<T, E> {
    fn step(self, step: &str) -> Result<T, Error> {
        self.with_step(|| step.to_string())
    }

    fn with_step(self, step: impl FnOnce() -> String) -> Result<T, Error> {
        self.map_err(|e| Error::Kernel {
            step: step(),
            source: e.into_io(),
        })
    }
}

/// Bit in the attach cookie: this function emits per-call events (trace.h).
const COOKIE_CAPTURE: u64 = 1 << 32;

/// The most functions whose every call is sent as events
/// ([`TraceOptions::capture`]): a larger set (a glob over a subsystem)
/// sends events faster than they can be read and printed.
pub const MAX_CAPTURED_FUNCTIONS: usize = 256;
/// Bytes read of each string argument by default
/// ([`TraceOptions::string_size`]), the NUL included.
pub const DEFAULT_STRING_SIZE: usize = 64;

/// What to trace and how.
#[derive(Clone, Debug, Default)]
pub struct TraceOptions {
    /// Functions to trace.
    pub patterns: Vec<Pattern>,
    /// Functions to leave out.
    pub excludes: Vec<Pattern>,
    /// `None`: the best engine this kernel has.
    pub engine: Option<EngineKind>,
    /// Measure each call's latency (histograms per function).
    pub latency: bool,
    /// Every call's arguments (all of them, up to 12 slots: stack-passed
    /// ones too) and return value, as events: on at most
    /// [`MAX_CAPTURED_FUNCTIONS`] functions.
    pub capture: bool,
    /// With `capture`: the bound of each string read from a `char *`
    /// argument, in bytes with the NUL (1 to [`MAX_STRING_SIZE`], rounded
    /// up to a multiple of 8; `None`: [`DEFAULT_STRING_SIZE`]). At most
    /// [`MAX_STRINGS`] strings per call are read. With `pointee_depth`,
    /// also the bytes of all the structs read per call together.
    pub string_size: Option<usize>,
    /// With `capture`: read the structs that pointer arguments point at, to
    /// this depth (1: those of the arguments; 2: also those their pointer
    /// fields point at; at most [`MAX_POINTEE_DEPTH`]; 0: none), at most
    /// [`MAX_DEREFS`] structs and the `string_size` bound of bytes per call,
    /// and print them as their fields.
    pub pointee_depth: u8,
    /// Count kernel stacks per call site.
    pub kstack: bool,
    /// Count user stacks per call site.
    pub ustack: bool,
    /// Normalize user stacks only at the end of the run, with the files of
    /// the processes still there then (a process gone by then shows
    /// addresses), as the tracer did before it normalized them as they are
    /// captured (see [`stacks`]); for comparing the two. Error chains' user
    /// stacks are normalized as they arrive either way.
    pub user_stacks_at_end: bool,
    /// Keep glob matches on the tracer's own path ([`selfpath`]), which
    /// are otherwise left out at attach.
    pub keep_self_path: bool,
    /// Report every chain of traced calls that ends in an error (see
    /// [`errors`]).
    pub errors: bool,
    /// With `errors`: which NULL returns make a chain (default: only those
    /// under a traced caller that returned an errno; see [`errors`]).
    pub null_returns: errors::NullReturns,
    /// Count calls and their time per path of traced callers: the call
    /// graph (see [`graph`]), in the summary.
    pub graph: bool,
    /// Make calls fail instead of tracing them (see [`inject`]): fmod_ret
    /// programs, on the functions of the kernel's error-injection list.
    pub inject: Option<inject::Injection>,
    /// Which calls count (process, pid namespace, cgroup, task name).
    pub filters: Filters,
    /// Which calls are recorded, by their arguments, return value, errno
    /// and latency (see [`filter`]).
    pub filter: Option<filter::Filter>,
}

impl TraceOptions {
    /// Latency and return values need the exit side of each call (so does
    /// a filter on them).
    pub fn needs_exit(&self) -> bool {
        self.latency
            || self.capture
            || self.errors
            || self.graph
            || self.filter.as_ref().is_some_and(filter::Filter::needs_exit)
    }

    /// Arguments must be read at a function's exit: the filter tests one
    /// with the return value, errno or latency, or arguments are captured
    /// with a filter decided at the exit (their entry event is sent then).
    pub fn args_at_exit(&self) -> bool {
        self.filter
            .as_ref()
            .is_some_and(|f| f.reads_args_at_exit() || (self.capture && f.needs_exit()))
    }
}

/// Step 1–3 done: the function set and the engine, nothing loaded yet.
pub struct Plan {
    /// What was asked.
    pub opts: TraceOptions,
    /// The functions, and those dropped with why.
    pub selection: Selection,
    /// The engine chosen.
    pub engine: EngineKind,
    /// How the engine sees exits on this kernel.
    pub exit: ExitSide,
    /// Better engines this kernel lacks, with the probes' reasons.
    pub skipped_engines: Vec<(EngineKind, String)>,
    /// How long the selection took.
    pub select_time: Duration,
    /// The filter in the program's form for the selection.
    pub filter: Option<filter::CompiledFilter>,
    /// The pointee reads of each function (`pointee_depth`; empty without).
    pub pointees: Pointees,
}

/// Steps 1–3: selects the functions and chooses the engine (probing the
/// kernel unless `opts.engine` forces one). Nothing is loaded yet.
pub fn plan(opts: TraceOptions) -> Result<Plan, Error> {
    let needs_exit = opts.needs_exit();
    if opts.inject.is_some() && (needs_exit || opts.kstack || opts.ustack) {
        return Err(inject::InjectError::Combined.into());
    }
    if opts.inject.is_some() && opts.filter.is_some() {
        return Err(Error::Options(
            "a filter does not apply to error injection (it chooses calls by chance and count)",
        ));
    }
    if opts
        .string_size
        .is_some_and(|n| n == 0 || n > MAX_STRING_SIZE)
    {
        return Err(Error::Options(
            "the bound of a captured string is 1 to 1024 bytes",
        ));
    }
    if opts.pointee_depth > MAX_POINTEE_DEPTH {
        return Err(Error::Options("the depth of pointee reads is 0 to 3"));
    }
    if opts.pointee_depth > 0 && !opts.capture {
        return Err(Error::Options(
            "pointee reads come with per-call events (capture)",
        ));
    }
    // One vmlinux BTF parse for the engine probes and the selection, with
    // the listings globs need read meanwhile.
    let t0 = Instant::now();
    let pending = select::start_listings(&opts.patterns);
    let btf = crate::features::KernelBtf::load();
    let btf_time = t0.elapsed();
    let need = engine::Needs {
        exit: needs_exit,
        args_at_exit: opts.args_at_exit(),
        inject: opts.inject.is_some(),
    };
    let choice = engine::choose(opts.engine, need, &btf)?;
    // Read before selecting: an unreadable list fails fast.
    let injectable = opts
        .inject
        .as_ref()
        .map(|_| inject::read_rules())
        .transpose()?;
    let t1 = Instant::now();
    let mut selection = select::select_in(
        &btf,
        pending,
        btf_time,
        &opts.patterns,
        &opts.excludes,
        SelectOptions {
            needs_exit,
            // The global trampoline calls the function itself for exits and
            // fmod_ret, from 8-byte argument slots.
            calls_with_slots: choice.kind == EngineKind::Global
                && (needs_exit || opts.inject.is_some()),
        },
    )?;
    if let Some(rules) = &injectable {
        inject::restrict(&mut selection, rules)?;
        if selection.funcs.is_empty() {
            let dropped = std::mem::take(&mut selection.dropped);
            return Err(SelectError::AllDropped { dropped }.into());
        }
    }
    if opts.capture {
        check_capture(selection.funcs.len())?;
    }
    // Names resolve per function: nothing is loaded before they do.
    let filter = opts
        .filter
        .as_ref()
        .map(|f| f.compile(&selection.funcs, choice.kind != EngineKind::KprobeMulti))
        .transpose()?;
    let pointees = if opts.pointee_depth > 0 {
        plan_pointees(&btf, &selection.funcs, &opts)?
    } else {
        Pointees::default()
    };
    Ok(Plan {
        opts,
        selection,
        engine: choice.kind,
        exit: choice.exit,
        skipped_engines: choice.skipped,
        select_time: btf_time + t1.elapsed(),
        filter,
        pointees,
    })
}

/// The pointee reads of each function, from its BTF object (vmlinux or its
/// module's).
fn plan_pointees(
    btf: &crate::features::KernelBtf,
    funcs: &[Func],
    opts: &TraceOptions,
) -> Result<Pointees, Error> {
    let mut btfs = btf::KernelBtfs::borrow_vmlinux(btf).map_err(SelectError::from)?;
    for f in funcs {
        if let Some(m) = f.scope.module() {
            btfs.load_module(m).map_err(SelectError::from)?;
        }
    }
    let budget = byte_bound(opts);
    let plans = funcs
        .iter()
        .map(|f| {
            btfs.get(&f.scope)
                .map_or_else(pointee::FuncPlan::default, |b| {
                    pointee::plan(b, f.btf_id, opts.pointee_depth, budget)
                })
        })
        .collect();
    Ok(Pointees {
        funcs: plans,
        budget,
    })
}

/// Whether per-call events ([`TraceOptions::capture`]) can be sent for a
/// set of `functions` functions: [`Error::TooManyToCapture`] above
/// [`MAX_CAPTURED_FUNCTIONS`]. [`plan`] checks it on the selection.
pub fn check_capture(functions: usize) -> Result<(), Error> {
    if functions > MAX_CAPTURED_FUNCTIONS {
        return Err(Error::TooManyToCapture {
            functions,
            cap: MAX_CAPTURED_FUNCTIONS,
        });
    }
    Ok(())
}

/// Bytes of each string buffer of an entry event: the bound, rounded up
/// to a multiple of 8 (0 when no function has a string argument).
fn string_buffer(opts: &TraceOptions, funcs: &[Func]) -> u32 {
    if !opts.capture || !funcs.iter().any(|f| events::has_strings(&f.proto)) {
        return 0;
    }
    byte_bound(opts)
}

/// The `string_size` bound, rounded up to a multiple of 8: the bytes of
/// each string, and of all pointees of a call.
fn byte_bound(opts: &TraceOptions) -> u32 {
    let n = opts
        .string_size
        .unwrap_or(DEFAULT_STRING_SIZE)
        .clamp(1, MAX_STRING_SIZE);
    n.next_multiple_of(8) as u32
}

/// Attached and counting.
pub struct Tracer {
    /// What was asked.
    pub opts: TraceOptions,
    /// The functions, and those dropped (refused at attach too).
    pub selection: Selection,
    /// Same length as `selection.funcs`: false for functions the kernel refused.
    pub attached: Vec<bool>,
    /// The engine that attached them.
    pub engine: EngineKind,
    /// How it sees exits.
    pub exit: ExitSide,
    /// Better engines this kernel lacks, with why.
    pub skipped_engines: Vec<(EngineKind, String)>,
    /// How long the selection took.
    pub select_time: Duration,
    /// Creating the maps and relocating (before any program load).
    pub prepare_time: Duration,
    /// Loading programs and creating links.
    pub attach_time: Duration,
    /// Where `attach_time` went.
    pub breakdown: Breakdown,
    /// Why counting could not be stopped before detaching (the summary then
    /// includes calls made while detaching).
    pub disarm_error: Option<String>,
    /// Recursion misses read just before the programs were closed.
    misses_at_detach: Option<u64>,
    /// The tracer's own path, left out of the glob matches.
    pub self_path: SelfPathOutcome,
    /// The files of this process and the traced one at attach: where user
    /// frames recorded by build ID are looked for ([`stacks`]).
    stack_files: Vec<std::path::PathBuf>,
    /// The filter, as compiled for the selection.
    filter: Option<filter::CompiledFilter>,
    /// The pointee reads of each function, to describe what they brought.
    pointees: Pointees,
    links: usize,
    // Declared before `obj`: programs and links go before the maps.
    backend: Box<dyn Engine>,
    obj: TraceObject,
    reader: Reader,
}

/// What became of the tracer's own path ([`selfpath`]) at attach.
#[derive(Debug, Default)]
pub enum SelfPathOutcome {
    /// Every function was named exactly, or they were asked to be kept
    /// ([`TraceOptions::keep_self_path`]).
    #[default]
    NotNeeded,
    /// Derived; the glob matches on it were left out.
    Derived {
        /// The functions found.
        path: SelfPath,
        /// Glob matches left out.
        left_out: usize,
    },
    /// Could not be derived (why): glob matches on the path stay
    /// selected, and the recursion guard turns their nested calls away.
    Failed(String),
}

/// Derives the tracer's own path when globs selected something, from one
/// probe copy of each program; `Some(indexes)` of the functions to attach
/// when any is left out.
fn derive_self_path(
    backend: &dyn Engine,
    obj: &TraceObject,
    all: &Targets<'_>,
    kind: EngineKind,
    keep: bool,
) -> Result<(SelfPathOutcome, Option<Vec<usize>>), Error> {
    if keep || all.funcs.iter().all(|f| f.exact) {
        return Ok((SelfPathOutcome::NotNeeded, None));
    }
    let progs = backend
        .probe_programs(obj, all)
        .map_err(|e| Error::attach(e, "loading the programs to find the tracer's own path"))?;
    let fds: Vec<_> = progs.iter().map(AsFd::as_fd).collect();
    let path = match SelfPath::derive(&fds, kind.mechanism_prefixes()) {
        Ok(p) => p,
        Err(e) => return Ok((SelfPathOutcome::Failed(e.to_string()), None)),
    };
    let keep: Vec<usize> = (0..all.funcs.len())
        .filter(|&i| all.funcs[i].exact || path.get(&all.funcs[i].name).is_none())
        .collect();
    let left_out = all.funcs.len() - keep.len();
    let keep = (left_out > 0).then_some(keep);
    Ok((SelfPathOutcome::Derived { path, left_out }, keep))
}

impl Plan {
    /// What the programs are built with for this plan.
    fn object_config(&self) -> ObjectConfig {
        let (opts, pointees) = (&self.opts, &self.pointees);
        let kprobe = self.engine == EngineKind::KprobeMulti;
        ObjectConfig {
            nr_funcs: self.selection.funcs.len(),
            latency: opts.latency,
            capture: opts.capture,
            str_size: string_buffer(opts, &self.selection.funcs),
            deref_size: if pointees.is_empty() {
                0
            } else {
                pointees.budget
            },
            derefs: if pointees.is_empty() {
                Vec::new()
            } else {
                pointees
                    .funcs
                    .iter()
                    .zip(&self.selection.funcs)
                    .map(|(p, f)| p.descriptors(&f.proto, kprobe))
                    .collect()
            },
            kstack: opts.kstack,
            ustack: opts.ustack,
            pair_entry_exit: self.exit == ExitSide::Pair,
            errors: opts.errors,
            graph: opts.graph,
            inject: opts.inject.clone(),
            filters: opts.filters.clone(),
            filter: self.filter.as_ref().map(filter::CompiledFilter::code),
        }
    }

    /// Leaves the glob matches on the tracer's own path ([`selfpath`]) out
    /// of the selection, as an attach would, without attaching anything:
    /// loads the programs once to read their code. What `--list` shows.
    pub fn leave_out_self_path(&mut self) -> Result<SelfPathOutcome, Error> {
        let obj = TraceObject::load(
            &self.object_config(),
            &self.engine.entries(self.exit, self.opts.inject.is_some()),
        )?;
        let cookies = vec![0; self.selection.funcs.len()];
        let all = Targets {
            funcs: &self.selection.funcs,
            cookies: &cookies,
            exit: self.exit,
            inject: self.opts.inject.is_some(),
        };
        let backend = engine::new_engine(self.engine);
        let (outcome, _) = derive_self_path(
            backend.as_ref(),
            &obj,
            &all,
            self.engine,
            self.opts.keep_self_path,
        )?;
        if let SelfPathOutcome::Derived { path, .. } = &outcome {
            let sel = &mut self.selection;
            let (off, on): (Vec<Func>, Vec<Func>) = std::mem::take(&mut sel.funcs)
                .into_iter()
                .partition(|f| f.exact || path.get(&f.name).is_none());
            sel.funcs = off;
            sel.dropped.extend(on.into_iter().filter_map(|f| {
                Some(Dropped {
                    reason: DropReason::SelfPath(path.get(&f.name)?.clone()),
                    scope: f.scope,
                    name: f.name,
                    exact: false,
                })
            }));
        }
        Ok(outcome)
    }

    /// Loads and attaches. On error, or when `ctl.cancel` is set before it
    /// is done ([`Error::Interrupted`]), nothing stays attached.
    pub fn attach(self, ctl: Control<'_>) -> Result<Tracer, Error> {
        let cfg = self.object_config();
        let Plan {
            opts,
            mut selection,
            engine: kind,
            exit,
            skipped_engines,
            select_time,
            filter,
            pointees,
        } = self;
        let n = selection.funcs.len();
        let capture = opts.capture;
        let kprobe = kind == EngineKind::KprobeMulti;
        let ret_class = opts.errors || filter.as_ref().is_some_and(|f| f.errno);
        let t0 = Instant::now();
        let obj = TraceObject::load(&cfg, &kind.entries(exit, opts.inject.is_some()))?;
        let prepare_time = t0.elapsed();
        let cookies: Vec<u64> = selection
            .funcs
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let capture = if capture {
                    COOKIE_CAPTURE | events::capture_bits(&f.proto, kprobe)
                } else {
                    0
                };
                let ret = if ret_class {
                    errors::RetClass::of(f.proto.ret).cookie_bits()
                } else {
                    0
                };
                i as u64 | capture | ret
            })
            .collect();
        let all = Targets {
            funcs: &selection.funcs,
            cookies: &cookies,
            exit,
            inject: opts.inject.is_some(),
        };
        let mut backend = engine::new_engine(kind);
        // Glob matches the tracer's own path runs are left out; indexes
        // and cookies stay those of the selection.
        let (self_path, keep) =
            derive_self_path(backend.as_ref(), &obj, &all, kind, opts.keep_self_path)?;
        let kept_funcs: Vec<Func>;
        let kept_cookies: Vec<u64>;
        let targets = match &keep {
            None => all,
            Some(keep) => {
                kept_funcs = keep.iter().map(|&i| selection.funcs[i].clone()).collect();
                kept_cookies = keep.iter().map(|&i| cookies[i]).collect();
                Targets {
                    funcs: &kept_funcs,
                    cookies: &kept_cookies,
                    ..all
                }
            }
        };
        // Where user frames recorded by build ID may be (see `stacks`): read
        // before attaching, while the traced process is surely there.
        let stack_files = if opts.ustack || opts.errors {
            stacks::candidate_files(opts.filters.tgid)
        } else {
            Vec::new()
        };
        let t1 = Instant::now();
        let mut refused = backend
            .attach(&obj, &targets, ctl)
            .map_err(|e| Error::attach(e, &format!("attaching with engine {kind}")))?;
        let attach_time = t1.elapsed();
        if let Some(keep) = &keep {
            for r in &mut refused {
                r.index = keep[r.index];
            }
        }
        // A cancel that came while the last link was being made still
        // abandons the attach (a link over many functions takes seconds).
        if ctl.cancelled() {
            backend.detach(ctl.detached);
            return Err(Error::Interrupted);
        }
        // Counting starts now that every link is in place.
        obj.arm()?;
        // Refused functions (named exactly or not) are skipped: the caller
        // warns about each, the rest stays attached (what retsnoop does).
        let mut attached = vec![true; n];
        if let SelfPathOutcome::Derived { path, .. } = &self_path {
            for (i, f) in selection.funcs.iter().enumerate() {
                if let Some(r) = path.get(&f.name).filter(|_| !f.exact) {
                    attached[i] = false;
                    selection.dropped.push(Dropped {
                        scope: f.scope.clone(),
                        name: f.name.clone(),
                        reason: DropReason::SelfPath(r.clone()),
                        exact: false,
                    });
                }
            }
        }
        for r in &refused {
            attached[r.index] = false;
            let f = &selection.funcs[r.index];
            selection.dropped.push(Dropped {
                scope: f.scope.clone(),
                name: f.name.clone(),
                reason: DropReason::AttachRefused(r.error.clone()),
                exact: f.exact,
            });
        }
        let reader = Reader::new(n, opts.latency)?;
        Ok(Tracer {
            self_path,
            stack_files,
            breakdown: backend.breakdown(),
            disarm_error: None,
            misses_at_detach: None,
            filter,
            pointees,
            links: backend.links(),
            opts,
            selection,
            attached,
            engine: kind,
            exit,
            skipped_engines,
            select_time,
            prepare_time,
            attach_time,
            backend,
            obj,
            reader,
        })
    }
}

impl Tracer {
    /// Functions the user should hear about even without `-v`: refused by
    /// the kernel at attach, or named exactly and dropped by the selection.
    pub fn warnings(&self) -> impl Iterator<Item = &Dropped> {
        self.selection
            .dropped
            .iter()
            .filter(|d| d.exact || matches!(d.reason, DropReason::AttachRefused(_)))
    }

    /// Functions attached (the selection less those refused).
    pub fn nr_attached(&self) -> usize {
        self.attached.iter().filter(|&&a| a).count()
    }

    /// Links while attached (kept after detach, for the summary).
    pub fn nr_links(&self) -> usize {
        self.links
    }

    /// The filter, as compiled for the selection.
    pub fn filter(&self) -> Option<&filter::CompiledFilter> {
        self.filter.as_ref()
    }

    /// Counters and histograms since attach, summed over CPUs.
    pub fn snapshot(&self) -> Result<Snapshot, Error> {
        self.reader.snapshot(&self.obj)
    }

    pub(crate) fn object(&self) -> &TraceObject {
        &self.obj
    }

    /// The ring buffers the programs write: per-call events (calling
    /// `on_event` for each) when a function captures them, error chains
    /// (`on_chain`) with [`TraceOptions::errors`]; `None` when there is
    /// neither. Poll it to receive them.
    pub(crate) fn rings<'a>(
        &'a self,
        mut on_event: impl FnMut(events::Event) + 'a,
        mut on_chain: impl FnMut(errors::ChainRecord) + 'a,
    ) -> Result<Option<libbpf_rs::RingBuffer<'a>>, Error> {
        let capture = self.opts.capture;
        if !capture && !self.opts.errors {
            return Ok(None);
        }
        let mut b = libbpf_rs::RingBufferBuilder::new();
        let events_map;
        if capture {
            events_map = self.obj.map("events")?;
            let funcs = &self.selection.funcs;
            let pointees = &self.pointees.funcs;
            let kprobe = self.engine == EngineKind::KprobeMulti;
            b.add(&events_map, move |data: &[u8]| {
                if let Some(mut e) = events::Event::parse(data) {
                    // A kprobe program's registers and stack, in the prototype's order.
                    let entry = e.kind == EventKind::Entry;
                    if let (true, true, Some(f)) = (kprobe, entry, funcs.get(e.func)) {
                        e.to_declared_order(&f.proto);
                    }
                    if let (Some((rets, area)), Some(f), Some(p)) = (
                        events::pointee_area(data),
                        funcs.get(e.func),
                        pointees.get(e.func),
                    ) {
                        e.pointees = pointee::describe(p, &f.proto, &e.args, &rets, area);
                    }
                    on_event(e);
                }
                0
            })
            .step("ring buffer for events")?;
        }
        let chains_map;
        if self.opts.errors {
            chains_map = self.obj.map("chains")?;
            b.add(&chains_map, move |data: &[u8]| {
                if let Some(c) = errors::ChainRecord::parse(data) {
                    on_chain(c);
                }
                0
            })
            .step("ring buffer for error chains")?;
        }
        Ok(Some(b.build().step("ring buffers for events")?))
    }

    /// Calls the programs skipped because one was already running on the
    /// CPU (the kernel's recursion guard): counts can be short by this much.
    /// After [`Tracer::detach`], the number when the programs were closed.
    pub fn recursion_misses(&self) -> u64 {
        if let Some(n) = self.misses_at_detach {
            return n;
        }
        self.backend
            .programs()
            .iter()
            .map(|p| bpf_ops::prog_info(*p).map_or(0, |i| i.recursion_misses))
            .sum()
    }

    /// Detaches everything, calling `progress` with the number of functions
    /// each step detached; returns how long it took.
    /// Counting stops first, so the summary covers the traced window only.
    pub fn detach(&mut self, progress: &(dyn Fn(usize) + Sync)) -> Duration {
        let t0 = Instant::now();
        // Detaching goes on even if this failed; the caller can say so.
        self.disarm_error = self.obj.disarm().err().map(|e| crate::error_text(&e));
        // The programs' statistics go with them.
        self.misses_at_detach = Some(self.recursion_misses());
        self.backend.detach(progress);
        t0.elapsed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use libbpf_rs::libbpf_sys;
    use program::Entry;

    #[test]
    fn capture_has_a_cap_that_names_both_numbers() {
        assert!(check_capture(MAX_CAPTURED_FUNCTIONS).is_ok());
        let e = check_capture(MAX_CAPTURED_FUNCTIONS + 1).unwrap_err();
        assert!(matches!(
            e,
            Error::TooManyToCapture {
                functions: 257,
                cap: 256
            }
        ));
        assert!(
            e.to_string()
                .starts_with("per-call events on 257 functions: at most 256"),
            "{e}"
        );
    }

    #[test]
    fn string_buffers_round_up_and_only_where_needed() {
        let f = |format| {
            let s = Param {
                name: "s".into(),
                kind: ValueKind::Pointer,
                slots: 1,
                format,
            };
            Func::test("f", vec![s], ValueKind::Void)
        };
        let with = [f(Format::Plain), f(Format::Str { user: false })];
        let opts = |size| TraceOptions {
            capture: true,
            string_size: size,
            ..Default::default()
        };
        assert_eq!(string_buffer(&opts(None), &with), 64);
        assert_eq!(string_buffer(&opts(Some(1)), &with), 8);
        assert_eq!(string_buffer(&opts(Some(100)), &with), 104);
        assert_eq!(string_buffer(&opts(Some(1024)), &with), 1024);
        // No string argument, or no capture: no room for strings.
        assert_eq!(string_buffer(&opts(None), &with[..1]), 0);
        let off = TraceOptions::default();
        assert_eq!(string_buffer(&off, &with), 0);
    }

    /// The kernel's ENOTSUPP (not in libc: kernel-internal, yet returned).
    const ENOTSUPP: i32 = 524;

    fn refused_here(errno: Option<i32>) -> bool {
        matches!(
            errno,
            Some(libc::EPERM | libc::ENOSYS | libc::EOPNOTSUPP | ENOTSUPP)
        )
    }

    /// Loads `entry` with `cfg` through the running kernel's verifier:
    /// `Ok(false)` when this kernel refuses us such a program at all.
    fn verify(cfg: &ObjectConfig, entry: Entry, attach: u32, btf_id: u32) -> Result<bool, String> {
        let obj = match TraceObject::load(cfg, &[entry]) {
            Ok(o) => o,
            Err(Error::Kernel { source, .. }) if refused_here(source.raw_os_error()) => {
                return Ok(false)
            }
            Err(e) => return Err(crate::error_text(&e)),
        };
        match obj.load_prog(entry, attach, None, btf_id) {
            Ok(_) => Ok(true),
            Err(e) if refused_here(e.errno()) => Ok(false),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Per-call events with every argument slot, strings and pointee reads
    /// of every bound (none, the smallest, the default, the largest), alone
    /// and with a
    /// latency or an exit filter: the kprobe programs go through the
    /// running kernel's verifier, and the trampoline ones where this
    /// kernel loads them (these hosts refuse trampolines: the guest checks
    /// load them). Skipped, saying so, where the kernel loads nothing for us.
    #[test]
    fn capturing_programs_pass_the_verifier() {
        let exit_filter = filter::Filter::parse("ret < 0").unwrap();
        let exit_code = exit_filter
            .compile(&[Func::test("f", vec![], ValueKind::Signed(32))], true)
            .unwrap()
            .code();
        let vfs_read = {
            let kb = crate::features::KernelBtf::load();
            btf::KernelBtfs::borrow_vmlinux(&kb)
                .ok()
                .and_then(|b| b.vmlinux().find_func("vfs_read"))
        };
        let mut loaded = 0;
        let mut tramp = 0;
        for str_size in [0u32, 8, 64, 1024] {
            for (latency, filter) in [(false, None), (true, None), (false, Some(&exit_code))] {
                // Pointee reads with the same budget: an argument's struct,
                // and one its pointer field points at.
                let mut reads = [0u8; program::DEREF_FUNC_SIZE];
                if str_size >= 16 {
                    reads[..8].copy_from_slice(&[1, 0, 0, 0, 0, 0, 16, 0]);
                    reads[8..16].copy_from_slice(&[0x80, 0, 8, 0, 16, 0, 8, 0]);
                }
                let cfg = ObjectConfig {
                    nr_funcs: 3,
                    latency,
                    capture: true,
                    str_size,
                    deref_size: str_size,
                    derefs: if str_size > 0 {
                        vec![reads; 3]
                    } else {
                        Vec::new()
                    },
                    filter: filter.cloned(),
                    ..Default::default()
                };
                let what = format!("strings of {str_size}, latency {latency}, filter {filter:?}");
                let kprobes = [
                    (Entry::KprobeEntry, libbpf_sys::BPF_TRACE_KPROBE_MULTI),
                    (Entry::KprobeSession, libbpf_sys::BPF_TRACE_KPROBE_SESSION),
                ];
                for (entry, attach) in kprobes {
                    match verify(&cfg, entry, attach, 0) {
                        Ok(true) => loaded += 1,
                        Ok(false) => {
                            eprintln!("skipped: this kernel loads no kprobe program for us");
                            return;
                        }
                        Err(e) => panic!("{entry:?}, {what}: the verifier said {e}"),
                    }
                }
                let Some(id) = vfs_read else { continue };
                let cfg = ObjectConfig {
                    pair_entry_exit: true,
                    ..cfg
                };
                let tramps = [
                    (Entry::Fentry, libbpf_sys::BPF_TRACE_FENTRY),
                    (Entry::Fexit, libbpf_sys::BPF_TRACE_FEXIT),
                ];
                for (entry, attach) in tramps {
                    match verify(&cfg, entry, attach, id) {
                        Ok(true) => tramp += 1,
                        Ok(false) => {}
                        Err(e) => panic!("{entry:?}, {what}: the verifier said {e}"),
                    }
                }
            }
        }
        assert_eq!(loaded, 4 * 3 * 2);
        println!("trampoline programs verified on this kernel: {tramp} of 24");
    }
}
