//! Engines: the mechanisms that hang the trace program on the function set.
//! All of them load entry points of the same BPF object (see
//! [`super::program`]) and pass each function's index as the attach cookie,
//! so the maps fill the same way whichever engine runs.
//!
//! | engine | kernel mechanism | exit side (latency, return values) |
//! |---|---|---|
//! | `global` | this series: tracing_multi link on the global trampoline | fsession.multi where the kernel has it on this backend, else a second link, fexit.multi |
//! | `tracing-multi` | upstream 7.2+ tracing_multi link (one trampoline per function, one link) | fsession.multi |
//! | `kprobe-multi` | kprobe.multi link (fprobe) | kprobe.session |
//! | `fentry-each` | one fentry program per function, loaded in parallel | one fexit program per function |
//!
//! The automatic choice takes the first one the running kernel accepts, by
//! probing it (never by version).
//!
//! Arguments of per-call events ([`crate::trace::TraceOptions::capture`]):
//!
//! | engine | at the entry | at the exit (a filter on the return value) |
//! |---|---|---|
//! | `global`, `tracing-multi`, `fentry-each` | every argument slot the trampoline saved (`bpf_get_func_arg`, up to 12: the 7th and later, passed on the stack, too) | the same |
//! | `kprobe-multi` | the six argument registers, then six 8-byte slots read from the stack above the return address (`pt_regs->sp + 8`, `bpf_probe_read_kernel`) | none (kprobe.session's exit has no arguments) |
//!
//! Every engine reads the strings of up to two `char *` arguments at the
//! entry (`bpf_probe_read_user_str` for a pointer below the kernel half of
//! the address space, `bpf_probe_read_kernel_str` above it), each up to
//! [`crate::trace::TraceOptions::string_size`] bytes.
//!
//! Attaching is cancellable ([`Control::cancel`], set by a signal handler):
//! engines look at the flag before every link or program, and an
//! interrupted attach returns [`AttachError::Interrupted`] with nothing
//! left attached.

mod fentry_each;
mod kprobe_multi;
mod tracing_multi;

use std::fmt;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::btf::module_btf_fd;
use super::pattern::Scope;
use super::program::{Entry, TraceObject};
use super::select::{Func, KernelRefusal};
use crate::features::{self, Feature, KernelBtf, Status};

/// The mechanism that attaches the trace program (`--engine`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EngineKind {
    /// The series' global trampoline: a tracing_multi link with `BPF_F_TRACING_MULTI_GLOBAL`.
    Global,
    /// Upstream's tracing_multi link (Linux 7.2+).
    TracingMulti,
    /// A kprobe.multi link (kprobe.session for exits).
    KprobeMulti,
    /// One fentry (and fexit) program per function.
    FentryEach,
}

impl EngineKind {
    /// In order of preference.
    pub const ALL: [EngineKind; 4] = [
        EngineKind::Global,
        EngineKind::TracingMulti,
        EngineKind::KprobeMulti,
        EngineKind::FentryEach,
    ];

    /// The name `--engine` takes and the summary prints.
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Global => "global",
            EngineKind::TracingMulti => "tracing-multi",
            EngineKind::KprobeMulti => "kprobe-multi",
            EngineKind::FentryEach => "fentry-each",
        }
    }

    /// The `bpfmux features` probes that must say yes.
    pub fn required_features(self, needs_exit: bool) -> &'static [Feature] {
        match (self, needs_exit) {
            // The exit side on the global backend is probed by
            // [`EngineKind::exit_side`].
            (EngineKind::Global, _) => &[Feature::GlobalTrampoline],
            (EngineKind::TracingMulti, _) => &[Feature::TracingMulti],
            (EngineKind::KprobeMulti, false) => &[Feature::KprobeMulti],
            (EngineKind::KprobeMulti, true) => &[Feature::KprobeMulti, Feature::KprobeSession],
            (EngineKind::FentryEach, false) => &[Feature::Fentry],
            (EngineKind::FentryEach, true) => &[Feature::Fentry, Feature::Fexit],
        }
    }

    /// Whether this engine's programs are turned away while any BPF program
    /// or map read holds the CPU-wide `bpf_prog_active` (kprobes do; the
    /// trampolines guard each program on its own): then a map read of ours
    /// that is preempted makes them skip the calls of whatever runs in its
    /// place, so the session reads maps unpreempted (in `SCHED_FIFO`).
    pub fn guard_is_cpu_wide(self) -> bool {
        self == EngineKind::KprobeMulti
    }

    /// The probes that must say yes for error injection (fmod_ret), or why
    /// this engine does not inject.
    pub fn inject_features(self) -> Result<&'static [Feature], &'static str> {
        match self {
            EngineKind::Global => Ok(&[Feature::GlobalTrampoline, Feature::FmodRetMulti]),
            EngineKind::TracingMulti => Ok(&[Feature::TracingMulti, Feature::FmodRetMulti]),
            EngineKind::KprobeMulti => Err("error injection through kprobe.multi \
                 (bpf_override_return) is not implemented; fmod_ret engines: global, \
                 tracing-multi (fmod_ret.multi), fentry-each (fmod_ret)"),
            EngineKind::FentryEach => Ok(&[Feature::FmodRet]),
        }
    }

    /// How this engine sees exits on this kernel, or why it cannot.
    fn exit_side(self, needs_exit: bool, btf: &KernelBtf) -> Result<ExitSide, String> {
        if !needs_exit {
            return Ok(ExitSide::None);
        }
        match self {
            EngineKind::Global => {
                // fsession.multi on the global backend came with a later
                // patch of the series than fexit.multi: take it when there.
                let session = features::probe(Feature::FsessionMultiGlobal, btf);
                if session.status == Status::Yes {
                    return Ok(ExitSide::Session);
                }
                let fexit = features::fexit_multi_global(btf);
                match fexit.status {
                    Status::Yes => Ok(ExitSide::Pair),
                    _ => Err(format!(
                        "{}: {} ({}); {}",
                        Feature::FsessionMultiGlobal,
                        session.status,
                        session.detail,
                        fexit.detail
                    )),
                }
            }
            // fsession.multi came with 7.3; tracing_multi alone (7.2) lacks it.
            EngineKind::TracingMulti => btf
                .enum_value("bpf_attach_type", "BPF_TRACE_FSESSION_MULTI")
                .map(|_| ExitSide::Session)
                .ok_or_else(|| "BPF_TRACE_FSESSION_MULTI not in this kernel's BTF".into()),
            EngineKind::KprobeMulti => Ok(ExitSide::Session),
            EngineKind::FentryEach => Ok(ExitSide::Pair),
        }
    }

    /// Entry points this engine loads for `exit`, or for error injection.
    pub fn entries(self, exit: ExitSide, inject: bool) -> Vec<Entry> {
        if inject {
            return match self {
                EngineKind::Global | EngineKind::TracingMulti => vec![Entry::MultiFmodRet],
                _ => vec![Entry::FmodRet],
            };
        }
        match (self, exit) {
            (EngineKind::Global | EngineKind::TracingMulti, ExitSide::None) => {
                vec![Entry::MultiEntry]
            }
            (EngineKind::Global | EngineKind::TracingMulti, ExitSide::Session) => {
                vec![Entry::MultiSession]
            }
            (EngineKind::Global | EngineKind::TracingMulti, ExitSide::Pair) => {
                vec![Entry::MultiEntry, Entry::MultiExit]
            }
            (EngineKind::KprobeMulti, ExitSide::None) => vec![Entry::KprobeEntry],
            (EngineKind::KprobeMulti, _) => vec![Entry::KprobeSession],
            (EngineKind::FentryEach, ExitSide::None) => vec![Entry::Fentry],
            (EngineKind::FentryEach, _) => vec![Entry::Fentry, Entry::Fexit],
        }
    }
}

/// How an engine sees a function's exit (latencies and return values need
/// it). Chosen with the engine, by probing the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExitSide {
    /// Not needed: entry programs only.
    None,
    /// One session program runs at entry and at exit; the kernel pairs the
    /// two runs (fsession.multi, kprobe.session).
    Session,
    /// An entry and an exit program; per-thread call stacks in the BPF
    /// program pair them (fentry + fexit, fentry.multi + fexit.multi).
    Pair,
}

impl ExitSide {
    /// Whether exits are seen at all.
    pub fn needed(self) -> bool {
        self != ExitSide::None
    }
}

impl fmt::Display for EngineKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is no [`EngineKind`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown engine {0:?} (one of: global, tracing-multi, kprobe-multi, fentry-each)")]
pub struct UnknownEngine(pub String);

impl FromStr for EngineKind {
    type Err = UnknownEngine;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        EngineKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| UnknownEngine(s.to_string()))
    }
}

/// What a run asks of an engine.
#[derive(Clone, Copy, Debug, Default)]
pub struct Needs {
    /// The exit side of each call (latency, return values, a filter on them).
    pub exit: bool,
    /// Arguments read at a function's exit (a filter testing one with the
    /// return value, errno or latency; arguments captured with such a filter).
    pub args_at_exit: bool,
    /// Error injection (fmod_ret), no exit side.
    pub inject: bool,
}

/// How an engine would run here (its exit side), or why it cannot, from
/// the probes it needs and what it can do.
pub fn check(kind: EngineKind, need: Needs, btf: &KernelBtf) -> Result<ExitSide, String> {
    let (needs_exit, inject) = (need.exit, need.inject);
    if need.args_at_exit && kind == EngineKind::KprobeMulti {
        return Err(
            "kprobe.session reads no arguments at a function's exit, which the \
                    filter needs (an argument tested in one `||` or `!` with ret, errno or \
                    latency, or arguments captured with a filter on those); engines that \
                    read them there: global, tracing-multi, fentry-each"
                .into(),
        );
    }
    let mut why = Vec::new();
    let needed = if inject {
        kind.inject_features().map_err(str::to_string)?
    } else {
        kind.required_features(needs_exit)
    };
    for &f in needed {
        let p = features::probe(f, btf);
        if p.status != Status::Yes {
            why.push(format!("{f}: {} ({})", p.status, p.detail));
        }
    }
    if !why.is_empty() {
        return Err(why.join("; "));
    }
    if inject {
        return Ok(ExitSide::None);
    }
    kind.exit_side(needs_exit, btf)
}

/// Why no engine was chosen.
#[derive(Debug, thiserror::Error)]
pub enum ChooseError {
    /// The engine asked for does not work here (`why`: the probes' answers).
    #[error("engine {kind} is not available on this kernel: {why}")]
    Unavailable {
        /// The engine asked for.
        kind: EngineKind,
        /// What its probes said.
        why: String,
    },
    /// No engine works here: one line per engine, with why.
    #[error("no engine is available on this kernel:\n{0}")]
    None(String),
}

/// What [`choose`] picked.
pub struct Choice {
    pub kind: EngineKind,
    pub exit: ExitSide,
    /// Better engines this kernel lacks, with the probes' reasons.
    pub skipped: Vec<(EngineKind, String)>,
}

/// The requested engine if it works here, or the first that does; with the
/// reasons the better ones were passed over. `btf` is vmlinux BTF, which
/// the caller selects functions with too: one parse per run.
pub fn choose(
    requested: Option<EngineKind>,
    need: Needs,
    btf: &KernelBtf,
) -> Result<Choice, ChooseError> {
    features::quiet_libbpf();
    if let Some(kind) = requested {
        return match check(kind, need, btf) {
            Ok(exit) => Ok(Choice {
                kind,
                exit,
                skipped: Vec::new(),
            }),
            Err(why) => Err(ChooseError::Unavailable { kind, why }),
        };
    }
    let mut skipped = Vec::new();
    for kind in EngineKind::ALL {
        match check(kind, need, btf) {
            Ok(exit) => {
                return Ok(Choice {
                    kind,
                    exit,
                    skipped,
                })
            }
            Err(why) => skipped.push((kind, why)),
        }
    }
    let text = skipped
        .iter()
        .map(|(k, w)| format!("  {k}: {w}"))
        .collect::<Vec<_>>()
        .join("\n");
    Err(ChooseError::None(text))
}

/// What to attach: functions with their cookies (same order and length).
pub struct Targets<'a> {
    pub funcs: &'a [Func],
    pub cookies: &'a [u64],
    pub exit: ExitSide,
    /// Error injection: fmod_ret programs instead of entry/exit ones.
    pub inject: bool,
}

/// A function the kernel would not attach (index into the targets).
#[derive(Clone, Debug)]
pub struct Refused {
    pub index: usize,
    pub error: KernelRefusal,
}

/// Why an engine's attach stopped; nothing it made stays attached.
#[derive(Debug)]
pub(crate) enum AttachError {
    /// [`Control::cancel`] was set.
    Interrupted,
    /// The kernel (or the system) said no at `step`.
    Step { step: String, source: io::Error },
    /// The kernel said no at no step of the engine's own.
    Io(io::Error),
    /// What cannot happen did (a worker thread panicked).
    Broken(String),
}

impl AttachError {
    /// This error, at `step` (the outer step first, as in `step: inner`).
    pub(crate) fn at(self, step: impl fmt::Display) -> Self {
        match self {
            AttachError::Io(source) => AttachError::Step {
                step: step.to_string(),
                source,
            },
            AttachError::Step {
                step: inner,
                source,
            } => AttachError::Step {
                step: format!("{step}: {inner}"),
                source,
            },
            AttachError::Broken(m) => AttachError::Broken(format!("{step}: {m}")),
            AttachError::Interrupted => AttachError::Interrupted,
        }
    }
}

impl From<io::Error> for AttachError {
    fn from(e: io::Error) -> Self {
        AttachError::Io(e)
    }
}

impl From<super::program::LoadError> for AttachError {
    fn from(e: super::program::LoadError) -> Self {
        AttachError::Io(e.into())
    }
}

/// Names the step an engine's result failed at ([`AttachError::at`]).
pub(crate) trait At<T> {
    fn at(self, step: impl fmt::Display) -> Result<T, AttachError>;
    fn at_with<S: fmt::Display>(self, step: impl FnOnce() -> S) -> Result<T, AttachError>;
}

impl<T, E: Into<AttachError>> At<T> for Result<T, E> {
    fn at(self, step: impl fmt::Display) -> Result<T, AttachError> {
        self.map_err(|e| e.into().at(step))
    }

    fn at_with<S: fmt::Display>(self, step: impl FnOnce() -> S) -> Result<T, AttachError> {
        self.map_err(|e| e.into().at(step()))
    }
}

/// How an attach reports progress and learns that it should stop.
#[derive(Clone, Copy)]
pub struct Control<'a> {
    /// Called with the number of functions just attached.
    pub progress: &'a (dyn Fn(usize) + Sync),
    /// Set (by a signal handler) to abandon the attach.
    pub cancel: &'a AtomicBool,
    /// Called with the number of functions just detached again, while an
    /// abandoned or failed attach is undone (it can take as long as the
    /// attach did: one trampoline update per function for fentry-each).
    pub detached: &'a (dyn Fn(usize) + Sync),
}

impl Control<'_> {
    /// Whether the attach should be abandoned.
    pub fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }
}

/// Where an engine's attach time went (`-v`, the summary JSON, the bench),
/// so the kernel's share can be told from ours.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Breakdown {
    /// Program loads (the verifier), with their total time; fentry-each
    /// loads on several threads, so its total can exceed the wall time.
    pub loads: usize,
    /// Time spent loading programs.
    pub load_time: Duration,
    /// Links the kernel created, the functions they cover and the time
    /// their creation took (for the kernel: BTF checks, trampolines, text
    /// patching).
    pub links: usize,
    /// Functions the links cover.
    pub link_funcs: usize,
    /// Time spent creating links.
    pub link_time: Duration,
    /// Link creations the kernel refused while isolating functions it will
    /// not attach (a batch is all-or-nothing), and the time they cost.
    pub refused_tries: usize,
    /// Time those refused tries took.
    pub refused_time: Duration,
    /// Why the set took more than one link (empty with one link).
    pub split: Vec<String>,
}

impl Breakdown {
    /// Times one link creation of `funcs` functions.
    pub(crate) fn link<L>(
        &mut self,
        funcs: usize,
        f: impl FnOnce() -> io::Result<L>,
    ) -> io::Result<L> {
        let t0 = Instant::now();
        let r = f();
        match &r {
            Ok(_) => {
                self.links += 1;
                self.link_funcs += funcs;
                self.link_time += t0.elapsed();
            }
            Err(_) => {
                self.refused_tries += 1;
                self.refused_time += t0.elapsed();
            }
        }
        r
    }

    /// Times one program load.
    pub(crate) fn load<P, E>(&mut self, f: impl FnOnce() -> Result<P, E>) -> Result<P, E> {
        let t0 = Instant::now();
        let r = f();
        self.loads += 1;
        self.load_time += t0.elapsed();
        r
    }
}

pub trait Engine: Send {
    fn kind(&self) -> EngineKind;

    /// Attaches every target it can. Returns the functions the kernel
    /// refused (the rest stay attached); an error (a cancel too) means
    /// nothing is attached.
    fn attach(
        &mut self,
        obj: &TraceObject,
        targets: &Targets<'_>,
        ctl: Control<'_>,
    ) -> Result<Vec<Refused>, AttachError>;

    /// Detaches everything (links first, then programs), calling
    /// `progress` with the number of functions each step detached.
    fn detach(&mut self, progress: &(dyn Fn(usize) + Sync));

    /// The loaded programs, for run statistics (recursion misses).
    fn programs(&self) -> Vec<BorrowedFd<'_>>;

    /// Number of links the attached state uses.
    fn links(&self) -> usize;

    /// Loads one copy of each program an attach of `targets` would load,
    /// attached to nothing: the tracer's own path is derived from their
    /// code ([`super::selfpath`]). Dropping them unloads them.
    fn probe_programs(
        &self,
        obj: &TraceObject,
        targets: &Targets<'_>,
    ) -> Result<Vec<OwnedFd>, AttachError>;

    /// Where the last attach's time went.
    fn breakdown(&self) -> Breakdown;
}

/// One copy of each of `kinds`, for the first of `t`'s functions (a
/// vmlinux one when there is one): with its BTF id when `per_function`
/// (fentry-each), through its module's BTF when it is a module's
/// (`with_btf`: the tracing program types).
fn probe_load(
    obj: &TraceObject,
    kinds: &[(Entry, u32)],
    t: &Targets<'_>,
    per_function: bool,
    with_btf: bool,
) -> Result<Vec<OwnedFd>, AttachError> {
    let Some(f) = t
        .funcs
        .iter()
        .find(|f| f.scope == Scope::Vmlinux)
        .or_else(|| t.funcs.first())
    else {
        return Ok(Vec::new());
    };
    let btf_fd = match &f.scope {
        Scope::Module(m) if with_btf => {
            Some(module_btf_fd(m).at_with(|| format!("finding BTF of module {m}"))?)
        }
        _ => None,
    };
    let id = if per_function { f.btf_id } else { 0 };
    kinds
        .iter()
        .map(|&(entry, attach_type)| {
            obj.load_prog(entry, attach_type, btf_fd.as_ref().map(AsFd::as_fd), id)
                .at_with(|| format!("loading a {entry:?} program to read its code"))
        })
        .collect()
}

impl EngineKind {
    /// Name prefixes of the code that runs a program for this engine, the
    /// seeds of the tracer's own path ([`super::selfpath`]) besides the
    /// programs: the global trampoline's C runner, the per-function
    /// trampolines' enter/exit calls, the fprobe handlers of kprobe.multi.
    pub fn mechanism_prefixes(self) -> &'static [&'static str] {
        match self {
            EngineKind::Global => &["bpf_global_caller", "bpf_global_exit"],
            EngineKind::TracingMulti | EngineKind::FentryEach => &[
                "__bpf_prog_enter",
                "__bpf_prog_exit",
                "__bpf_tramp_enter",
                "__bpf_tramp_exit",
            ],
            EngineKind::KprobeMulti => &[
                "kprobe_multi_link_",
                "fprobe_fgraph_entry",
                "fprobe_ftrace_entry",
                "fprobe_return",
            ],
        }
    }
}

pub fn new_engine(kind: EngineKind) -> Box<dyn Engine> {
    match kind {
        EngineKind::Global => Box::new(tracing_multi::TracingMulti::new(true)),
        EngineKind::TracingMulti => Box::new(tracing_multi::TracingMulti::new(false)),
        EngineKind::KprobeMulti => Box::new(kprobe_multi::KprobeMulti::new()),
        EngineKind::FentryEach => Box::new(fentry_each::FentryEach::new()),
    }
}

/// Errors no bisection can get around: the kernel refuses us (or we ran
/// out of descriptors), not a function.
fn is_fatal(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EPERM | libc::EACCES | libc::EMFILE | libc::ENFILE)
    )
}

/// After this many single-function failures with no success at all, the
/// failure may be the kernel's rather than the functions': a few functions
/// spread over the whole set are then tried alone, and if none attaches
/// either, the attach fails as a whole.
const FATAL_AFTER_SINGLES: usize = 8;

/// Whether so many single functions were refused, with none attached,
/// that the refusal may be the kernel's: the rule both attach strategies
/// (bisection, one program per function) stop by.
pub(crate) fn nothing_attaches(attached: usize, refused: usize) -> bool {
    attached == 0 && refused >= FATAL_AFTER_SINGLES
}

/// Up to FATAL_AFTER_SINGLES elements spread evenly over `idx`.
pub(crate) fn spread_sample(idx: &[usize]) -> Vec<usize> {
    let n = idx.len();
    let k = n.min(FATAL_AFTER_SINGLES);
    (0..k).map(|i| idx[(2 * i + 1) * n / (2 * k)]).collect()
}

/// Attaches `idx` with as few links as the kernel allows: one link for the
/// whole batch, or, when it refuses, halves until each refused function is
/// isolated. A batch link is all-or-nothing in the kernel, so a failed try
/// leaves nothing behind. On error or cancel every link made so far is
/// closed. `L` is what one try holds open (a link, or an entry and an exit
/// link).
/// Each try is timed into `bd`.
pub(crate) fn attach_bisect<L>(
    idx: &[usize],
    attach: &mut dyn FnMut(&[usize]) -> io::Result<L>,
    ctl: Control<'_>,
    bd: &mut Breakdown,
) -> Result<(Vec<L>, Vec<Refused>), AttachError> {
    struct State<L> {
        links: Vec<L>,
        refused: Vec<Refused>,
        attached: usize,
        /// Functions to try alone when nothing attached for a while.
        sample: Vec<usize>,
        kernel_ok: bool,
    }
    fn go<L>(
        idx: &[usize],
        attach: &mut dyn FnMut(&[usize]) -> io::Result<L>,
        ctl: Control<'_>,
        st: &mut State<L>,
    ) -> Result<(), AttachError> {
        if idx.is_empty() {
            return Ok(());
        }
        if ctl.cancelled() {
            return Err(AttachError::Interrupted);
        }
        match attach(idx) {
            Ok(link) => {
                st.links.push(link);
                st.attached += idx.len();
                (ctl.progress)(idx.len());
                Ok(())
            }
            Err(e) if is_fatal(&e) => Err(e.into()),
            Err(e) if idx.len() == 1 => {
                st.refused.push(Refused {
                    index: idx[0],
                    error: KernelRefusal::of(&e, e.raw_os_error()),
                });
                if !st.kernel_ok && nothing_attaches(st.attached, st.refused.len()) {
                    // Does the kernel take any function at all? Each try is
                    // closed again at once: the bisection attaches for real.
                    let tried: Vec<usize> = std::mem::take(&mut st.sample)
                        .into_iter()
                        .filter(|i| !st.refused.iter().any(|r| r.index == *i))
                        .collect();
                    st.kernel_ok = tried.iter().any(|&i| attach(&[i]).is_ok());
                    if !st.kernel_ok {
                        return Err(e.into());
                    }
                }
                Ok(())
            }
            Err(_) => {
                let (a, b) = idx.split_at(idx.len() / 2);
                go(a, attach, ctl, st)?;
                go(b, attach, ctl, st)
            }
        }
    }
    let mut st = State {
        links: Vec::new(),
        refused: Vec::new(),
        attached: 0,
        sample: spread_sample(idx),
        kernel_ok: false,
    };
    let (links_before, tries_before) = (bd.links, bd.refused_tries);
    let mut timed = |chunk: &[usize]| bd.link(chunk.len(), || attach(chunk));
    if let Err(e) = go(idx, &mut timed, ctl, &mut st) {
        // Nothing half-attached: close every link made so far.
        let n = st.attached;
        drop(st);
        (ctl.detached)(n);
        return Err(e);
    }
    if !st.refused.is_empty() {
        bd.split.push(format!(
            "{} links after isolating {} function{} the kernel refused ({} refused tries)",
            bd.links - links_before,
            st.refused.len(),
            if st.refused.len() == 1 { "" } else { "s" },
            bd.refused_tries - tries_before
        ));
    }
    if st.attached == 0 {
        let e = st
            .refused
            .first()
            .map_or(String::new(), |r| r.error.to_string());
        return Err(io::Error::other(format!("the kernel refused every function ({e})")).into());
    }
    Ok((st.links, st.refused))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_follow_the_exit_side() {
        use EngineKind::*;
        for kind in [Global, TracingMulti] {
            assert_eq!(kind.entries(ExitSide::None, false), [Entry::MultiEntry]);
            assert_eq!(
                kind.entries(ExitSide::Session, false),
                [Entry::MultiSession]
            );
            assert_eq!(
                kind.entries(ExitSide::Pair, false),
                [Entry::MultiEntry, Entry::MultiExit]
            );
        }
        assert_eq!(
            KprobeMulti.entries(ExitSide::None, false),
            [Entry::KprobeEntry]
        );
        assert_eq!(
            KprobeMulti.entries(ExitSide::Session, false),
            [Entry::KprobeSession]
        );
        assert_eq!(FentryEach.entries(ExitSide::None, false), [Entry::Fentry]);
        assert_eq!(
            FentryEach.entries(ExitSide::Pair, false),
            [Entry::Fentry, Entry::Fexit]
        );
        // Error injection: fmod_ret, one link or one program per function.
        for kind in [Global, TracingMulti] {
            assert_eq!(kind.entries(ExitSide::None, true), [Entry::MultiFmodRet]);
        }
        assert_eq!(FentryEach.entries(ExitSide::None, true), [Entry::FmodRet]);
        assert!(KprobeMulti.inject_features().is_err());
    }
    use std::cell::RefCell;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::sync::atomic::AtomicUsize;

    fn dummy_fd() -> OwnedFd {
        // SAFETY: dup of stdin gives a fresh descriptor we own.
        unsafe { OwnedFd::from_raw_fd(libc::dup(0)) }
    }

    static NEVER: AtomicBool = AtomicBool::new(false);

    fn ctl(progress: &(dyn Fn(usize) + Sync)) -> Control<'_> {
        Control {
            progress,
            cancel: &NEVER,
            detached: &|_| {},
        }
    }

    /// Refuses any batch holding one of `bad`; counts the tries.
    fn refusing<'a>(
        bad: &[usize],
        tries: &'a RefCell<usize>,
    ) -> impl FnMut(&[usize]) -> io::Result<OwnedFd> + 'a {
        let bad = bad.to_vec();
        move |idx: &[usize]| {
            *tries.borrow_mut() += 1;
            if idx.iter().any(|i| bad.contains(i)) {
                Err(io::Error::from_raw_os_error(libc::EINVAL))
            } else {
                Ok(dummy_fd())
            }
        }
    }

    fn refused_indexes(r: &[Refused]) -> Vec<usize> {
        let mut v: Vec<usize> = r.iter().map(|r| r.index).collect();
        v.sort();
        v
    }

    #[test]
    fn bisect_isolates_refused_functions() {
        let bad = [3usize, 17, 18];
        let calls = RefCell::new(0);
        let mut attach = refusing(&bad, &calls);
        let all: Vec<usize> = (0..64).collect();
        let done = AtomicUsize::new(0);
        let progress = |n: usize| {
            done.fetch_add(n, Ordering::Relaxed);
        };
        let mut bd = Breakdown::default();
        let (links, refused) = attach_bisect(&all, &mut attach, ctl(&progress), &mut bd).unwrap();
        assert_eq!(refused_indexes(&refused), bad);
        assert_eq!(done.into_inner(), 61);
        assert!(links.iter().all(|l| l.as_raw_fd() >= 0));
        // Far fewer tries than one per function.
        assert!(*calls.borrow() < 40, "{} tries", calls.borrow());
        // Every try is in the breakdown, and the split is explained.
        assert_eq!(bd.links, links.len());
        assert_eq!(bd.link_funcs, 61);
        assert_eq!(bd.links + bd.refused_tries, *calls.borrow());
        assert_eq!(bd.split.len(), 1);
        assert!(
            bd.split[0].contains("isolating 3 functions"),
            "{:?}",
            bd.split
        );
    }

    #[test]
    fn attach_errors_read_as_the_kernel_said_them() {
        let link = AttachError::Io(io::Error::from_raw_os_error(libc::EINVAL)).at("link_create");
        let e = crate::trace::Error::attach(link, "attaching with engine global");
        assert_eq!(
            crate::error_text(&e),
            format!(
                "attaching with engine global: link_create: {}",
                io::Error::from_raw_os_error(libc::EINVAL)
            )
        );
        assert!(matches!(
            &e,
            crate::trace::Error::Kernel { source, .. } if source.raw_os_error() == Some(libc::EINVAL)
        ));
        // A cancel stays one, whatever the step.
        let cancelled = crate::trace::Error::attach(AttachError::Interrupted.at("a link"), "x");
        assert!(matches!(cancelled, crate::trace::Error::Interrupted));
    }

    #[test]
    fn bisect_stops_on_fatal_and_on_all_refused() {
        let mut eperm =
            |_: &[usize]| -> io::Result<OwnedFd> { Err(io::Error::from_raw_os_error(libc::EPERM)) };
        let all: Vec<usize> = (0..1000).collect();
        let e =
            attach_bisect(&all, &mut eperm, ctl(&|_| {}), &mut Breakdown::default()).unwrap_err();
        assert!(
            matches!(&e, AttachError::Io(io) if io.raw_os_error() == Some(libc::EPERM)),
            "{e:?}"
        );

        let tries = RefCell::new(0);
        let mut einval = |_: &[usize]| -> io::Result<OwnedFd> {
            *tries.borrow_mut() += 1;
            Err(io::Error::from_raw_os_error(libc::EINVAL))
        };
        assert!(attach_bisect(&all, &mut einval, ctl(&|_| {}), &mut Breakdown::default()).is_err());
        // Gave up after a handful of single failures, not 2000 tries.
        assert!(*tries.borrow() < 50, "{} tries", tries.borrow());
    }

    #[test]
    fn bisect_gets_past_many_refused_functions_at_the_start() {
        // More refused names in a row than FATAL_AFTER_SINGLES, then good ones:
        // the kernel is fine, so the rest must still attach.
        let bad: Vec<usize> = (0..12).collect();
        let tries = RefCell::new(0);
        let mut attach = refusing(&bad, &tries);
        let all: Vec<usize> = (0..40).collect();
        let (links, refused) =
            attach_bisect(&all, &mut attach, ctl(&|_| {}), &mut Breakdown::default()).unwrap();
        assert_eq!(refused_indexes(&refused), bad);
        assert!(!links.is_empty());
    }

    #[test]
    fn bisect_cancel_closes_what_it_attached() {
        /// A "link" that counts how many are open.
        struct Link<'a>(&'a std::cell::Cell<usize>);
        impl Drop for Link<'_> {
            fn drop(&mut self) {
                self.0.set(self.0.get() - 1);
            }
        }
        let open = std::cell::Cell::new(0usize);
        let made = std::cell::Cell::new(0usize);
        let cancel = AtomicBool::new(false);
        let mut attach = |idx: &[usize]| -> io::Result<Link<'_>> {
            if idx.len() > 1 {
                return Err(io::Error::from_raw_os_error(libc::EINVAL));
            }
            open.set(open.get() + 1);
            made.set(made.get() + 1);
            // Cancelled (a signal) after the third link.
            if made.get() == 3 {
                cancel.store(true, Ordering::Relaxed);
            }
            Ok(Link(&open))
        };
        let all: Vec<usize> = (0..16).collect();
        let c = Control {
            progress: &|_| {},
            cancel: &cancel,
            detached: &|_| {},
        };
        let e = attach_bisect(&all, &mut attach, c, &mut Breakdown::default())
            .err()
            .expect("cancelled");
        assert!(matches!(e, AttachError::Interrupted), "{e:?}");
        assert_eq!(made.get(), 3, "stopped at the first check after the cancel");
        assert_eq!(open.get(), 0, "every link made was closed again");
    }

    #[test]
    fn spread_sample_covers_the_set() {
        let idx: Vec<usize> = (100..164).collect();
        let s = spread_sample(&idx);
        assert_eq!(s.len(), FATAL_AFTER_SINGLES);
        assert!(s[0] < 110 && *s.last().unwrap() > 154, "{s:?}");
        assert_eq!(spread_sample(&[7]), vec![7]);
        assert!(spread_sample(&[]).is_empty());
    }

    #[test]
    fn engine_names_round_trip() {
        for k in EngineKind::ALL {
            assert_eq!(k.name().parse::<EngineKind>(), Ok(k));
        }
        assert!("fentry".parse::<EngineKind>().is_err());
        // The message names every engine, in order of preference.
        let names: Vec<_> = EngineKind::ALL.iter().map(|k| k.name()).collect();
        assert_eq!(
            UnknownEngine("x".into()).to_string(),
            format!("unknown engine \"x\" (one of: {})", names.join(", "))
        );
    }
}
