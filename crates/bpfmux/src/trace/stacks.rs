//! Stacks the programs recorded: [`Stack`]s of [`StackFrame`]s, kernel
//! frames symbolized with kallsyms, user frames from what was normalized
//! while the run went on, and as lines people read ([`StackFrame::line`]);
//! and [`UserStackTotals`], how that went.
//!
//! # User stacks are normalized as they are captured
//!
//! A user frame is an address in a process; naming it needs that process's
//! mappings, which are gone once it exits — and most of what a tracer runs
//! for a command exits before the run's end. So each user stack is
//! normalized ([`crate::normalize::capture`]: file and file offset per
//! frame, the process's mappings cached while its address space stays the
//! same) the first time it is seen while the run goes on, and symbolized
//! from that when it is printed, whether the process is still there or not.
//!
//! How soon after a stack is first counted it is normalized: the programs
//! only add it to the `stacks` and `stack_counts` maps, and the session
//! reads the keys that are new on every turn of its loop, which turns at
//! least every 100 ms, and at once when per-call events or error chains
//! arrive. Reading the keys costs one system call per 1,024 of them plus
//! one per new stack; normalizing a new stack, one system call per mapping
//! not cached yet (none for a stack in mappings already seen) and one per
//! process and turn to check that its address space did not change. So
//! that a map of tens of thousands of stacks cannot make the loop do
//! nothing else, scans are spaced so that reading the keys takes at most a
//! tenth of its time (the normalization of new stacks is not put off).
//! Error chains name their user stack: it is normalized as the chain
//! arrives, before it is printed. A process that exits sooner than that
//! after a stack is counted cannot be asked any more: for it, the programs
//! also record each process's user stack the first time they see it by
//! build ID and file offset per frame (the `ustacks_bid` map), and its
//! frames are placed from that ([`CaptureCache::from_build_ids`]), the
//! files looked for among those this process and the traced one map at
//! attach (and the `-c` program: [`super::Session::add_stack_files`]); what
//! the kernel could not read a build ID for stays an address, counted in
//! [`CaptureStats::failures`] less [`CaptureStats::by_build_id`].
//!
//! # Kernel stacks start at the traced function
//!
//! A program takes its kernel stack where it runs: under the code that ran
//! it, which differs per engine. The global trampoline adds its thunk and
//! callers (`bpf_global_thunks_*`, `bpf_global_caller_run`,
//! `bpf_global_caller_N`) above the return address into the traced
//! function, and, for each traced caller, its caller frame between the
//! caller's body and its entry, so that caller comes twice
//! (`do_sys_openat2+0x7e`, `bpf_global_caller_3+0x115`,
//! `do_sys_openat2+0x5`); per-function trampolines add the program and the
//! trampoline (`bpf_prog_*`, `bpf_trampoline_*`) and, taken at a return,
//! start at the caller; kprobes start at the function's own address, or at
//! a return at the caller. `Mechanism` holds the address ranges of that
//! code, read from kallsyms while everything is attached (trampolines
//! leave kallsyms when they are detached), and `kernel_frames` makes
//! every engine's stack of a call the same: it drops the frames in those
//! ranges (JIT code, trampolines and return trampolines wherever they are;
//! the C glue that runs programs — ftrace, fprobe, kprobe, rethook and
//! stack helpers — only above the first frame kept), drops a frame at the
//! entry of the function of the frame kept before it when mechanism frames
//! came between (the duplicated caller), and makes the first frame the
//! traced function at its address (`name+0x0`): the frame that was at its
//! entry (a trampoline's return address, a kprobe's address) is replaced
//! by it, and it is added where the stack starts at the caller.

use std::collections::HashMap;
use std::ops::Range;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::events::{self, StackKey};
use super::program::TraceObject;
use super::select::Func;
use super::{ms, Error, Tracer};
use crate::normalize::capture::{
    exec_files, BuildIdFrame, CaptureCache, CaptureStats, Frame, Place,
};
use crate::symbolize::debuginfod::Debuginfod;
use crate::symbolize::{
    at_source, DebuginfodAnswer, KernelSymbolizer, SymResult, Symbol, UserSymbolizer,
};

/// Larger than any kernel function: the address is not in the symbol.
const MAX_SYMBOL_OFFSET: u64 = 1 << 20;

/// Reading the keys takes at most 1 part in this many of the loop's time.
const SCAN_SHARE: u32 = 10;

/// Error chains' user stacks kept normalized at most (apart from those the
/// scans keep, which the `stack_counts` map bounds): the cache is emptied
/// when it is full. A chain's stack is printed as the chain comes, so what
/// this saves is only normalizing a repeated stack again; without a bound a
/// long run would keep one entry per process that ever failed.
pub(crate) const CHAIN_STACKS_KEPT: usize = 4096;

/// How user stacks were normalized in a run: in the summary.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct UserStackTotals {
    /// Whether stacks were normalized as they were captured, while the run
    /// went on (`false`: only at its end, with the processes still there).
    pub during_run: bool,
    /// Distinct user stacks (per process) normalized.
    pub stacks: u64,
    /// Of those, first read at the end of the run.
    pub at_end: u64,
    /// Per address: asked of the kernel, found in the cache, not
    /// normalized because the process was gone; processes whose cached
    /// mappings were dropped because they exec'd.
    #[serde(flatten)]
    pub addresses: CaptureStats,
    /// Cache hits among the addresses normalized, 0 to 1.
    pub hit_rate: Option<f64>,
    /// Scans of the stack counts while the run went on.
    pub scans: u64,
    /// Time the scans and the normalization of what they found took, in
    /// milliseconds.
    pub capture_ms: f64,
}

/// User stacks, each normalized once per process (see the module docs),
/// and the symbolizer that names their frames.
pub(crate) struct UserStacks {
    cache: CaptureCache,
    usyms: UserSymbolizer,
    /// (process, stack id) → its frames.
    captured: HashMap<(u32, u32), Vec<Frame>>,
    /// The same for error chains' stacks, at most [`CHAIN_STACKS_KEPT`].
    chain_stacks: HashMap<(u32, u32), Vec<Frame>>,
    /// Chains' stacks normalized (and not since moved to `captured`).
    chain_normalized: u64,
    during_run: bool,
    at_end: u64,
    scans: u64,
    capture_time: Duration,
    next_scan: Option<Instant>,
    keys: Vec<StackKey>,
}

impl UserStacks {
    /// `during_run`: read stacks as the run goes on ([`Self::scan`]); else
    /// scans do nothing and stacks are normalized when first asked for.
    pub fn new(during_run: bool) -> Self {
        Self {
            cache: CaptureCache::default(),
            usyms: UserSymbolizer::default(),
            captured: HashMap::new(),
            chain_stacks: HashMap::new(),
            chain_normalized: 0,
            during_run,
            at_end: 0,
            scans: 0,
            capture_time: Duration::ZERO,
            next_scan: None,
            keys: Vec::new(),
        }
    }

    /// Names files with no DWARF and no debug file here from the debug
    /// files `client` gives (see [`UserSymbolizer::with_debuginfod`]).
    pub fn with_debuginfod(mut self, client: Option<Debuginfod>) -> Self {
        self.usyms = std::mem::take(&mut self.usyms).with_debuginfod(client);
        self
    }

    /// What debuginfod answered so far.
    pub fn debuginfod_answers(&self) -> &[DebuginfodAnswer] {
        self.usyms.debuginfod_answers()
    }

    /// Starts a round of the cache: the next stack of each process checks
    /// first that its cached mappings are still those of its address space
    /// (see [`crate::normalize::capture`]). Once per turn of the loop, and
    /// before the summary's stacks.
    pub fn new_round(&mut self) {
        self.cache.new_round();
    }

    /// Normalizes the stacks counted since the last scan, unless reading
    /// the keys already took its share of the time (see the module docs);
    /// `last`: the run's last scan, done whatever the share.
    pub fn scan(&mut self, obj: &TraceObject, last: bool) -> Result<(), Error> {
        let t0 = Instant::now();
        if !self.during_run || (!last && self.next_scan.is_some_and(|t| t0 < t)) {
            return Ok(());
        }
        self.scans += 1;
        let mut keys = std::mem::take(&mut self.keys);
        keys.clear();
        let read = events::stack_keys(obj, &mut keys);
        // Only the keys' reading is spaced out: it costs the same whether
        // anything is new or not. New stacks are normalized at once.
        self.next_scan = Some(t0 + t0.elapsed() * SCAN_SHARE);
        let done = read.and_then(|()| {
            keys.iter()
                .filter_map(|k| Some((k.tgid, k.ustack?)))
                .try_for_each(|(tgid, id)| self.capture(obj, tgid, id))
        });
        self.keys = keys;
        self.capture_time += t0.elapsed();
        done
    }

    /// Normalizes user stack `id` of process `tgid` now, unless it was.
    pub fn capture(&mut self, obj: &TraceObject, tgid: u32, id: u32) -> Result<(), Error> {
        if self.captured.contains_key(&(tgid, id)) {
            return Ok(());
        }
        if let Some(frames) = self.chain_stacks.remove(&(tgid, id)) {
            self.chain_normalized -= 1;
            self.captured.insert((tgid, id), frames);
            return Ok(());
        }
        let addrs = events::stack_addrs(obj, id)?;
        let frames = self.normalize(tgid, &addrs, || {
            events::ustack_build_ids(obj, tgid, id).ok().flatten()
        });
        self.captured.insert((tgid, id), frames);
        Ok(())
    }

    /// `addrs` of `tgid` normalized; where the process was gone, placed
    /// from the stack the programs recorded by build ID (`bids`, asked
    /// only then: see [`CaptureCache::from_build_ids`]).
    fn normalize(
        &mut self,
        tgid: u32,
        addrs: &[u64],
        bids: impl FnOnce() -> Option<Vec<BuildIdFrame>>,
    ) -> Vec<Frame> {
        let mut frames = self.cache.normalize(tgid, addrs);
        if frames.iter().any(|f| f.place == Place::Unknown) {
            if let Some(bids) = bids() {
                self.cache.from_build_ids(&mut frames, &bids);
            }
        }
        frames
    }

    /// Files that frames recorded by build ID may be in (see
    /// [`CaptureCache::add_candidates`]).
    pub fn add_candidates(&mut self, paths: impl IntoIterator<Item = PathBuf>) {
        self.cache.add_candidates(paths);
    }

    /// The frames of user stack `id` of `tgid`, symbolized; `addrs` are
    /// its addresses, for a stack not normalized yet (it is now: counted as
    /// read at the end).
    pub fn frames(&mut self, tgid: u32, id: u32, addrs: &[u64]) -> Vec<StackFrame> {
        self.normalized(tgid, id, addrs);
        let Some(frames) = self.captured.get(&(tgid, id)) else {
            return Vec::new();
        };
        symbolized(&mut self.usyms, &self.cache, frames)
    }

    /// The normalized frames of user stack `id` of `tgid` (normalized now
    /// from `addrs` if it was not: counted as read at the end).
    pub(crate) fn normalized(&mut self, tgid: u32, id: u32, addrs: &[u64]) -> &[Frame] {
        if !self.captured.contains_key(&(tgid, id)) {
            self.at_end += 1;
            let frames = self.cache.normalize(tgid, addrs);
            self.captured.insert((tgid, id), frames);
        }
        self.captured.get(&(tgid, id)).map_or(&[], Vec::as_slice)
    }

    /// The normalized frames of an error chain's user stack, as
    /// [`Self::chain_lines`] left them (`None`: not normalized).
    pub(crate) fn chain_frames(&self, tgid: u32, id: u32) -> Option<&[Frame]> {
        let key = (tgid, id);
        self.captured
            .get(&key)
            .or_else(|| self.chain_stacks.get(&key))
            .map(Vec::as_slice)
    }

    /// The cache the frames were normalized with (their files).
    pub(crate) fn cache(&self) -> &CaptureCache {
        &self.cache
    }

    /// [`Self::frames`] as lines: `name+0xoff`, or the address.
    pub fn lines(&mut self, tgid: u32, id: u32, addrs: &[u64]) -> Vec<String> {
        frames_text(&self.frames(tgid, id, addrs))
    }

    /// The lines of user stack `id` of `tgid` for an error chain, as it
    /// comes: normalized now unless it was, and kept (in a cache of at most
    /// [`CHAIN_STACKS_KEPT`]) for the next chain of the same stack.
    pub fn chain_lines(&mut self, obj: &TraceObject, tgid: u32, id: u32) -> Vec<String> {
        self.capture_chain(obj, tgid, id);
        self.chain_lines_with(tgid, id, Vec::new, || None)
    }

    /// Normalizes user stack `id` of `tgid` for an error chain unless it
    /// was: a session does it for a turn's chains before it waits for the
    /// kernel's names, so that a process exiting meanwhile keeps its frames.
    pub fn capture_chain(&mut self, obj: &TraceObject, tgid: u32, id: u32) {
        // A stack that cannot be read shows as nothing, as before.
        self.capture_chain_with(
            tgid,
            id,
            || events::stack_addrs(obj, id).unwrap_or_default(),
            || events::ustack_build_ids(obj, tgid, id).ok().flatten(),
        );
    }

    /// [`Self::capture_chain`], the stack's addresses from `addrs` when
    /// they are needed.
    fn capture_chain_with(
        &mut self,
        tgid: u32,
        id: u32,
        addrs: impl FnOnce() -> Vec<u64>,
        bids: impl FnOnce() -> Option<Vec<BuildIdFrame>>,
    ) {
        let key = (tgid, id);
        if self.captured.contains_key(&key) || self.chain_stacks.contains_key(&key) {
            return;
        }
        if self.chain_stacks.len() >= CHAIN_STACKS_KEPT {
            self.chain_stacks.clear();
        }
        let frames = self.normalize(tgid, &addrs(), bids);
        self.chain_normalized += 1;
        self.chain_stacks.insert(key, frames);
    }

    /// [`Self::chain_lines`], the stack's addresses from `addrs` when
    /// they are needed.
    fn chain_lines_with(
        &mut self,
        tgid: u32,
        id: u32,
        addrs: impl FnOnce() -> Vec<u64>,
        bids: impl FnOnce() -> Option<Vec<BuildIdFrame>>,
    ) -> Vec<String> {
        let key = (tgid, id);
        if self.captured.contains_key(&key) {
            return self.lines(tgid, id, &[]);
        }
        self.capture_chain_with(tgid, id, addrs, bids);
        let Some(frames) = self.chain_stacks.get(&key) else {
            return Vec::new();
        };
        frames_text(&symbolized(&mut self.usyms, &self.cache, frames))
    }

    /// What was normalized, and how.
    pub fn totals(&self) -> UserStackTotals {
        let addresses = self.cache.stats();
        UserStackTotals {
            during_run: self.during_run,
            stacks: self.captured.len() as u64 + self.chain_normalized,
            at_end: self.at_end,
            addresses,
            hit_rate: addresses.hit_rate(),
            scans: self.scans,
            capture_ms: ms(self.capture_time),
        }
    }
}

/// The files user frames recorded by build ID may be in, read now: those
/// this process and the traced one (`tgid`; with -c, its program comes
/// later, from the caller) map executable.
pub(crate) fn candidate_files(tgid: Option<u32>) -> Vec<PathBuf> {
    let mut files = exec_files("self");
    if let Some(t) = tgid {
        files.extend(exec_files(&t.to_string()));
    }
    files
}

/// Normalized frames, symbolized: the innermost at its address, every
/// caller one byte back ([`caller_place`]).
pub(crate) fn symbolized(
    usyms: &mut UserSymbolizer,
    cache: &CaptureCache,
    frames: &[Frame],
) -> Vec<StackFrame> {
    let lookup: Vec<Frame> = frames
        .iter()
        .enumerate()
        .map(|(i, f)| Frame {
            addr: f.addr,
            place: caller_place(i, f.place),
        })
        .collect();
    let results = usyms.symbolize_captured(cache, &lookup);
    frames
        .iter()
        .zip(results)
        .enumerate()
        .map(|(i, (f, r))| StackFrame::new(f.addr, r.map(|r| at_frame(i, r))))
        .collect()
}

/// Where frame `i` of a user stack (innermost first) is looked up: the
/// innermost where it is, a caller's return address one byte back, in
/// the call it returns from (the line of the call, the function of the
/// call even when the call is the last instruction of its function).
pub(crate) fn caller_place(i: usize, place: Place) -> Place {
    match place {
        Place::File { file, offset } if i > 0 && offset > 0 => Place::File {
            file,
            offset: offset - 1,
        },
        Place::Vdso { offset, size } if i > 0 && offset > 0 => Place::Vdso {
            offset: offset - 1,
            size,
        },
        other => other,
    }
}

/// The offset frame `i` of a user stack is looked up at (see
/// [`caller_place`]).
pub(crate) fn caller_offset(i: usize, offset: u64) -> u64 {
    if i > 0 {
        offset.saturating_sub(1)
    } else {
        offset
    }
}

/// What frame `i` was looked up as, said of its own address again: a
/// caller's offsets one byte further (see [`caller_place`]).
pub(crate) fn at_frame(i: usize, r: SymResult) -> SymResult {
    if i == 0 {
        return r;
    }
    match r {
        SymResult::Symbol(mut s) => {
            s.offset += 1;
            SymResult::Symbol(s)
        }
        SymResult::NoSymbol {
            module,
            file_offset,
            reason,
        } => SymResult::NoSymbol {
            module,
            file_offset: file_offset + 1,
            reason,
        },
        SymResult::Unmapped => SymResult::Unmapped,
    }
}

/// A stack the programs counted: the traced function, the process, how
/// often, and its frames, symbolized.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stack {
    /// The traced function: `name`, or `module:name`.
    pub function: String,
    /// The process (thread group) that made the calls.
    pub pid: u32,
    /// Calls of `function` through this stack.
    pub count: u64,
    /// Kernel frames, innermost first: the traced function, then its
    /// callers, without the tracer's own frames (see the module docs).
    pub kernel: Vec<StackFrame>,
    /// User frames, innermost first (as captured).
    pub user: Vec<StackFrame>,
}

/// One frame of a [`Stack`]: its address and what it is known to be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StackFrame {
    /// The address as captured.
    pub addr: u64,
    /// What it resolved to.
    pub name: FrameName,
}

/// What a [`StackFrame`]'s address resolved to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrameName {
    /// A symbol covers it (with the functions inlined there, and file and
    /// line where DWARF has them).
    Symbol(Symbol),
    /// In this file, but no symbol covers it.
    File(PathBuf),
    /// A kernel address past the end of any function kallsyms names as
    /// bpfmux reads it: most likely JIT code (BPF programs, trampolines).
    Jit,
    /// Only the address is known (not mapped, not normalized, no symbols).
    Unknown,
}

impl StackFrame {
    /// From a symbolizer's answer (`None`: the address only).
    pub(crate) fn new(addr: u64, r: Option<SymResult>) -> Self {
        let name = match r {
            // Past the end of any real function: JIT code (BPF programs and
            // trampolines) has no kallsyms entry bpfmux reads.
            Some(SymResult::Symbol(s)) if s.offset > MAX_SYMBOL_OFFSET => FrameName::Jit,
            Some(SymResult::Symbol(s)) => FrameName::Symbol(s),
            Some(SymResult::NoSymbol {
                module: Some(m), ..
            }) => FrameName::File(m),
            _ => FrameName::Unknown,
        };
        Self { addr, name }
    }

    /// The start of the function it is in and its offset there, for a
    /// frame a symbol names.
    fn function_offset(&self) -> Option<(u64, u64)> {
        match &self.name {
            FrameName::Symbol(s) => Some((self.addr.checked_sub(s.offset)?, s.offset)),
            _ => None,
        }
    }

    /// `name+0xoff`, or the address when it has no symbol (`0x… [bpf/jit?]`
    /// for [`FrameName::Jit`]).
    pub fn line(&self) -> String {
        let addr = self.addr;
        match &self.name {
            FrameName::Symbol(s) => format!("{}+{:#x}", s.name, s.offset),
            FrameName::Jit => format!("{addr:#x} [bpf/jit?]"),
            FrameName::File(_) | FrameName::Unknown => format!("{addr:#x}"),
        }
    }
}

/// The first `max` stacks of `read` (busiest first), symbolized with
/// `ksyms` (one kernel symbol table for them all) and starting at the
/// traced function (see [`kernel_frames`]); user frames from what
/// `ustacks` normalized (now, for a stack it has not seen).
pub(crate) fn symbolize(
    t: &Tracer,
    read: &events::Stacks,
    ustacks: &mut UserStacks,
    ksyms: Option<&KernelSymbolizer>,
    mech: &Mechanism,
    max: usize,
) -> Vec<Stack> {
    ustacks.new_round();
    let addrs = |id: Option<u32>| id.and_then(|i| read.addrs.get(&i)).map_or(&[][..], |a| a);
    read.counts
        .iter()
        .take(max)
        .map(|(k, count)| Stack {
            function: t
                .selection
                .funcs
                .get(k.func)
                .map_or_else(|| format!("#{}", k.func), |f| f.display_name()),
            pid: k.tgid,
            count: *count,
            kernel: kernel_frames(ksyms, mech, Some(k.func), addrs(k.kstack)),
            user: match k.ustack.filter(|&id| !addrs(Some(id)).is_empty()) {
                Some(id) => ustacks.frames(k.tgid, id, addrs(Some(id))),
                None => Vec::new(),
            },
        })
        .collect()
}

/// Frames as lines ([`StackFrame::line`]).
pub(crate) fn lines(frames: &[StackFrame]) -> Vec<String> {
    frames.iter().map(StackFrame::line).collect()
}

/// Frames as lines: [`StackFrame::line`], and where DWARF gave source
/// lines (a user file's, or the kernel's vmlinux: see
/// [`crate::symbolize::KernelLines`]), `at FILE:LINE` after it, preceded
/// by the calls inlined at the address, innermost first, as frames of
/// their own (`NAME (inlined) at FILE:LINE`): the stack as the source
/// reads it.
pub(crate) fn frames_text(frames: &[StackFrame]) -> Vec<String> {
    let mut out = Vec::with_capacity(frames.len());
    for f in frames {
        let FrameName::Symbol(s) = &f.name else {
            out.push(f.line());
            continue;
        };
        for i in s.inlined.iter().rev() {
            out.push(format!(
                "{} (inlined){}",
                i.name,
                at_source(i.file.as_deref(), i.line)
            ));
        }
        out.push(format!(
            "{}{}",
            f.line(),
            at_source(s.file.as_deref(), s.line)
        ));
    }
    out
}

/// How far into a function a frame can be and still be its entry: a
/// kprobe's address (0, or 4 past an `endbr64`), a trampoline's return
/// address (5 or 9: past the call that replaced the entry's `nop`).
const ENTRY_WINDOW: u64 = 16;

/// Where a frame in the [`Mechanism`]'s code is dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Part {
    /// JIT code, trampolines, return trampolines: wherever it is (a traced
    /// caller's trampoline sits between that caller's frames).
    Anywhere,
    /// C code that runs programs or takes their stacks: only above the
    /// first frame kept (below it, it would be a real caller).
    Leading,
}

/// The glue functions dropped above the first frame kept: what calls a
/// kprobe's, fprobe's or ftrace handler's programs, and the stack helpers.
const GLUE_PREFIXES: &[&str] = &[
    "fprobe_",
    "__fprobe_",
    "kprobe_",
    "kretprobe_",
    "__kretprobe_",
    "rethook_",
    "arch_rethook_",
    "function_graph_enter",
    "ftrace_",
    "arch_ftrace_",
    "__bpf_prog_enter",
    "__bpf_prog_exit",
    "__bpf_tramp_",
    "bpf_trace_run",
    "__bpf_trace_run",
    "trace_call_bpf",
    "bpf_get_stack",
    "__bpf_get_stack",
    "bpf_get_stackid",
    "get_perf_callchain",
    "perf_callchain_kernel",
    "optimized_callback",
    "optprobe_template_",
    "asm_exc_int3",
    "exc_int3",
    "do_int3",
];

/// The entry and return trampolines of ftrace, fgraph and rethook, in the
/// kernel image: dropped wherever they are, as JIT code is.
const TRAMPOLINES: &[&str] = &[
    "ftrace_caller",
    "ftrace_regs_caller",
    "ftrace_call",
    "ftrace_regs_call",
    "ftrace_caller_op_ptr",
    "ftrace_regs_caller_op_ptr",
    "ftrace_caller_end",
    "ftrace_regs_caller_end",
    "ftrace_regs_caller_jmp",
    "ftrace_regs_caller_ret",
    "ftrace_epilogue",
    "ftrace_stub",
    "ftrace_stub_graph",
    "ftrace_graph_caller",
    "return_to_handler",
    "arch_rethook_trampoline",
    "__kretprobe_trampoline",
    "kretprobe_trampoline",
];

/// The tracer's own kernel code, by address range (from kallsyms while
/// everything is attached: see the module docs), and the traced
/// functions' addresses.
#[derive(Debug, Default)]
pub(crate) struct Mechanism {
    /// Sorted by start, not overlapping.
    ranges: Vec<(Range<u64>, Part)>,
    /// By index in the selection: the function's address, if known.
    traced: Vec<Option<u64>>,
}

impl Mechanism {
    /// The mechanism's ranges in `ksyms`, and the addresses of `funcs`.
    pub fn new(ksyms: &KernelSymbolizer, funcs: &[Func]) -> Self {
        let ranges = ksyms.function_extents(Self::part);
        let wanted: Vec<_> = funcs
            .iter()
            .map(|f| (f.name.as_str(), f.scope.module()))
            .collect();
        let traced = ksyms
            .function_addresses(&wanted)
            .into_iter()
            .zip(funcs)
            .map(|(a, f)| f.addr.or(a))
            .collect();
        Self { ranges, traced }
    }

    /// What part of the mechanism function `name` of `module` is, if any.
    fn part(name: &str, module: Option<&str>) -> Option<Part> {
        match module {
            // BPF programs, trampolines, dispatchers, the global
            // trampoline's thunk pages; ftrace's and kprobes' JIT pages.
            Some("bpf" | "__builtin__ftrace" | "__builtin__kprobes") => Some(Part::Anywhere),
            Some(_) => None,
            None if name.starts_with("bpf_global_") || TRAMPOLINES.contains(&name) => {
                Some(Part::Anywhere)
            }
            None if GLUE_PREFIXES.iter().any(|p| name.starts_with(p)) => Some(Part::Leading),
            None => None,
        }
    }

    /// The part of the mechanism `addr` is in, if any.
    fn find(&self, addr: u64) -> Option<Part> {
        let i = self.ranges.partition_point(|(r, _)| r.start <= addr);
        let (r, part) = self.ranges.get(i.checked_sub(1)?)?;
        r.contains(&addr).then_some(*part)
    }
}

/// Kernel frames, symbolized (addresses only without a symbol table);
/// with a symbol table, the [`Mechanism`]'s frames dropped, a traced
/// caller's duplicated frame collapsed and, for the stack of a call of
/// the selection's function `func`, that function first (see the module
/// docs).
pub(crate) fn kernel_frames(
    ksyms: Option<&KernelSymbolizer>,
    mech: &Mechanism,
    func: Option<usize>,
    kernel: &[u64],
) -> Vec<StackFrame> {
    let Some(k) = ksyms else {
        return kernel.iter().map(|&a| StackFrame::new(a, None)).collect();
    };
    let mut out: Vec<StackFrame> = Vec::with_capacity(kernel.len() + 1);
    // The function of the last frame kept, and whether mechanism frames
    // were dropped since.
    let mut last: Option<u64> = None;
    let mut gap = false;
    // Return addresses but for a kprobe's own frame, which the traced
    // function's entry replaces below (named exactly).
    for s in k.symbolize_returns(kernel) {
        match mech.find(s.addr) {
            Some(Part::Anywhere) => {
                gap = true;
                continue;
            }
            Some(Part::Leading) if out.is_empty() => {
                gap = true;
                continue;
            }
            _ => {}
        }
        let frame = StackFrame::new(s.addr, Some(s.result));
        let entry = frame.function_offset();
        if let (true, Some(prev), Some((start, off))) = (gap, last, entry) {
            if prev == start && off <= ENTRY_WINDOW {
                // The caller again, at its entry, under its trampoline.
                gap = false;
                continue;
            }
        }
        gap = false;
        last = entry.map(|(start, _)| start);
        out.push(frame);
    }
    let traced = func.and_then(|i| mech.traced.get(i).copied().flatten());
    if let Some(addr) = traced {
        let first = StackFrame::new(addr, k.symbolize(&[addr]).pop().map(|s| s.result));
        match out.first().and_then(StackFrame::function_offset) {
            Some((start, off)) if start == addr && off <= ENTRY_WINDOW => out[0] = first,
            _ => out.insert(0, first),
        }
    }
    out
}

/// Kernel frames as lines (addresses without a symbol table), as
/// [`kernel_frames`] makes them and [`frames_text`] writes them.
pub(crate) fn kernel_lines(
    ksyms: Option<&KernelSymbolizer>,
    mech: &Mechanism,
    func: Option<usize>,
    kernel: &[u64],
) -> Vec<String> {
    frames_text(&kernel_frames(ksyms, mech, func, kernel))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn frames_without_symbols_are_addresses() {
        let m = Mechanism::default();
        assert_eq!(
            kernel_lines(None, &m, Some(0), &[0x10, 0x20]),
            ["0x10", "0x20"]
        );
    }

    /// A kernel of the functions the stacks below go through; the global
    /// trampoline's thunks and the programs and trampolines are JIT code
    /// (module `bpf`).
    pub(crate) const KALLSYMS: &str = "\
ffffffff81000000 T entry_SYSCALL_64_after_hwframe
ffffffff81001000 T do_syscall_64
ffffffff81002000 T __x64_sys_openat
ffffffff81003000 T do_sys_openat2
ffffffff81004000 T do_file_open
ffffffff81005000 T path_openat
ffffffff81006000 T __x64_sys_getpgid
ffffffff81006800 T walk_tree
ffffffff81007000 T bpf_global_caller_run
ffffffff81007200 T bpf_global_caller_exit
ffffffff81007400 T bpf_global_caller_1
ffffffff81007600 T bpf_global_caller_3
ffffffff81008000 T fprobe_handler
ffffffff81008200 T kprobe_multi_link_prog_run
ffffffff81008400 T kprobe_walk
ffffffff81008800 T return_to_handler
ffffffff8100a000 T _etext
ffffffffc0100000 t bpf_prog_1d3b15428cb4bc2b_trace_multi_ses\t[bpf]
ffffffffc0102000 t bpf_trampoline_6442537309\t[bpf]
ffffffffc0103000 t bpf_trampoline_6442518997\t[bpf]
ffffffffc0104000 t bpf_trampoline_6442504741\t[bpf]
ffffffffc0105000 t bpf_global_thunks_r1_1\t[bpf]
";

    /// The traced functions, in selection order.
    const TRACED: &[&str] = &[
        "__x64_sys_openat",
        "do_sys_openat2",
        "path_openat",
        "__x64_sys_getpgid",
        "walk_tree",
        "not_in_kallsyms",
    ];

    pub(crate) fn kernel() -> (KernelSymbolizer, Mechanism) {
        let k = KernelSymbolizer::parse(KALLSYMS).unwrap();
        let funcs: Vec<Func> = TRACED
            .iter()
            .map(|n| Func::test(n, vec![], super::super::btf::ValueKind::Signed(32)))
            .collect();
        let m = Mechanism::new(&k, &funcs);
        (k, m)
    }

    /// `name+0xoff` frames (as a run printed them) back to addresses.
    pub(crate) fn addrs(frames: &[&str]) -> Vec<u64> {
        frames
            .iter()
            .map(|f| {
                let (name, off) = f.split_once("+0x").unwrap();
                let line = KALLSYMS
                    .lines()
                    .find(|l| l.split_ascii_whitespace().nth(2) == Some(name))
                    .unwrap_or_else(|| panic!("{name} not in KALLSYMS"));
                let base = u64::from_str_radix(&line[..16], 16).unwrap();
                base + u64::from_str_radix(off, 16).unwrap()
            })
            .collect()
    }

    /// The stack printed for a call of `TRACED[func]` taken as `raw`.
    fn cleaned(func: usize, raw: &[&str]) -> Vec<String> {
        let (k, m) = kernel();
        kernel_lines(Some(&k), &m, Some(func), &addrs(raw))
    }

    const OPENAT: usize = 0;
    pub(crate) const PATH_OPENAT: usize = 2;
    const GETPGID: usize = 3;

    /// path_openat's failing return under __x64_sys_openat and
    /// do_sys_openat2, all three traced: what every engine prints.
    pub(crate) const PATH_OPENAT_STACK: &[&str] = &[
        "path_openat+0x0",
        "do_file_open+0xe4",
        "do_sys_openat2+0x7e",
        "__x64_sys_openat+0x6d",
        "do_syscall_64+0xdd",
        "entry_SYSCALL_64_after_hwframe+0x77",
    ];

    /// path_openat's failing return under the global trampoline, raw
    /// (see `global_engine_at_a_return`).
    pub(crate) const GLOBAL_AT_A_RETURN: &[&str] = &[
        "bpf_prog_1d3b15428cb4bc2b_trace_multi_ses+0xbad",
        "bpf_global_caller_exit+0xd4",
        "bpf_global_caller_3+0x130",
        "path_openat+0x5",
        "do_file_open+0xe4",
        "do_sys_openat2+0x7e",
        "bpf_global_caller_3+0x115",
        "do_sys_openat2+0x5",
        "__x64_sys_openat+0x6d",
        "bpf_global_caller_1+0xdd",
        "__x64_sys_openat+0x9",
        "do_syscall_64+0xdd",
        "entry_SYSCALL_64_after_hwframe+0x77",
    ];

    /// The same under per-function trampolines, raw (see
    /// `per_function_trampolines_at_a_return`).
    pub(crate) const TRAMPOLINES_AT_A_RETURN: &[&str] = &[
        "bpf_prog_1d3b15428cb4bc2b_trace_multi_ses+0xbad",
        "bpf_trampoline_6442537309+0xfa",
        "do_file_open+0xe4",
        "do_sys_openat2+0x7e",
        "bpf_trampoline_6442518997+0xa3",
        "__x64_sys_openat+0x6d",
        "bpf_trampoline_6442504741+0x93",
        "do_syscall_64+0xdd",
        "entry_SYSCALL_64_after_hwframe+0x77",
    ];

    const GETPGID_STACK: &[&str] = &[
        "__x64_sys_getpgid+0x0",
        "do_syscall_64+0xdd",
        "entry_SYSCALL_64_after_hwframe+0x77",
    ];

    /// The global trampoline at a return (a guest run's error chain): its
    /// frames above the return address into path_openat, and each traced
    /// caller twice, its body's frame and its entry's under the caller.
    #[test]
    fn global_engine_at_a_return() {
        assert_eq!(cleaned(PATH_OPENAT, GLOBAL_AT_A_RETURN), PATH_OPENAT_STACK);
    }

    /// The global trampoline at an entry (`--stacks`): the thunk and the
    /// callers above the return address into the function (+0x9: past
    /// `endbr64` and the call).
    #[test]
    fn global_engine_at_an_entry() {
        let raw = [
            "bpf_global_thunks_r1_1+0x12d5",
            "bpf_global_caller_run+0xd6",
            "bpf_global_caller_1+0x35",
            "__x64_sys_getpgid+0x9",
            "do_syscall_64+0xdd",
            "entry_SYSCALL_64_after_hwframe+0x77",
        ];
        assert_eq!(cleaned(GETPGID, &raw), GETPGID_STACK);
    }

    /// Per-function trampolines (tracing-multi and fentry-each) at a
    /// return (a guest run's error chain): the program and trampoline
    /// above the caller, path_openat itself missing, each traced caller's
    /// trampoline between it and its caller.
    #[test]
    fn per_function_trampolines_at_a_return() {
        assert_eq!(
            cleaned(PATH_OPENAT, TRAMPOLINES_AT_A_RETURN),
            PATH_OPENAT_STACK
        );
    }

    /// The same where the unwinder also gives each trampoline's return
    /// address into its function: the function's entry after its
    /// trampoline is the duplicate, and the first one the function.
    #[test]
    fn per_function_trampolines_with_return_addresses() {
        let raw = [
            "bpf_prog_1d3b15428cb4bc2b_trace_multi_ses+0xbad",
            "bpf_trampoline_6442537309+0xfa",
            "path_openat+0x9",
            "do_file_open+0xe4",
            "do_sys_openat2+0x7e",
            "bpf_trampoline_6442518997+0xa3",
            "do_sys_openat2+0x9",
            "__x64_sys_openat+0x6d",
            "bpf_trampoline_6442504741+0x93",
            "__x64_sys_openat+0x9",
            "do_syscall_64+0xdd",
            "entry_SYSCALL_64_after_hwframe+0x77",
        ];
        assert_eq!(cleaned(PATH_OPENAT, &raw), PATH_OPENAT_STACK);
    }

    /// Per-function trampolines at an entry: the caller first.
    #[test]
    fn per_function_trampolines_at_an_entry() {
        let raw = [
            "bpf_prog_1d3b15428cb4bc2b_trace_multi_ses+0x40",
            "bpf_trampoline_6442504741+0x5a",
            "do_syscall_64+0xdd",
            "entry_SYSCALL_64_after_hwframe+0x77",
        ];
        assert_eq!(cleaned(GETPGID, &raw), GETPGID_STACK);
    }

    /// kprobe-multi at an entry: the function's own address first (+0x4:
    /// the ftrace site past `endbr64`), glue above it if the unwinder
    /// gives it; at a return (the README's chain): the caller first.
    #[test]
    fn kprobe_multi() {
        let entry = [
            "__x64_sys_getpgid+0x4",
            "do_syscall_64+0xdd",
            "entry_SYSCALL_64_after_hwframe+0x77",
        ];
        assert_eq!(cleaned(GETPGID, &entry), GETPGID_STACK);
        let glue = [
            "fprobe_handler+0x40",
            "kprobe_multi_link_prog_run+0x80",
            "__x64_sys_getpgid+0x4",
            "do_syscall_64+0xdd",
            "entry_SYSCALL_64_after_hwframe+0x77",
        ];
        assert_eq!(cleaned(GETPGID, &glue), GETPGID_STACK);
        let at_return = [
            "do_file_open+0xe4",
            "do_sys_openat2+0x7e",
            "__x64_sys_openat+0x6d",
            "do_syscall_64+0xdd",
            "entry_SYSCALL_64_after_hwframe+0x77",
        ];
        assert_eq!(cleaned(PATH_OPENAT, &at_return), PATH_OPENAT_STACK);
        // A return trampoline in place of a traced caller's return address
        // is dropped wherever it is.
        let rethook = [
            "do_file_open+0xe4",
            "do_sys_openat2+0x7e",
            "return_to_handler+0x0",
            "do_syscall_64+0xdd",
            "entry_SYSCALL_64_after_hwframe+0x77",
        ];
        assert_eq!(
            cleaned(PATH_OPENAT, &rethook),
            [
                "path_openat+0x0",
                "do_file_open+0xe4",
                "do_sys_openat2+0x7e",
                "do_syscall_64+0xdd",
                "entry_SYSCALL_64_after_hwframe+0x77",
            ]
        );
    }

    /// A traced function that calls itself: the outer call's frame in its
    /// body stays (no mechanism frame before it), its entry frame under
    /// its trampoline goes; glue-named code below the first frame is a
    /// real caller and stays.
    #[test]
    fn recursion_and_glue_names_below_the_first_frame() {
        let raw = [
            "bpf_global_caller_exit+0xd4",
            "bpf_global_caller_1+0x130",
            "walk_tree+0x5",
            "walk_tree+0x40",
            "bpf_global_caller_1+0xdd",
            "walk_tree+0x5",
            "kprobe_walk+0x20",
            "do_syscall_64+0xdd",
        ];
        assert_eq!(
            cleaned(4, &raw),
            [
                "walk_tree+0x0",
                "walk_tree+0x40",
                "kprobe_walk+0x20",
                "do_syscall_64+0xdd"
            ]
        );
        // A frame deep in the traced function is not its entry: the
        // function goes before it.
        assert_eq!(
            cleaned(4, &["walk_tree+0x40", "do_syscall_64+0xdd"]),
            ["walk_tree+0x0", "walk_tree+0x40", "do_syscall_64+0xdd"]
        );
    }

    /// Without the traced function's address, or for no function, only
    /// the mechanism's frames go; a stack of nothing but them is empty.
    #[test]
    fn without_the_traced_function() {
        let raw = [
            "bpf_prog_1d3b15428cb4bc2b_trace_multi_ses+0x40",
            "bpf_trampoline_6442504741+0x5a",
            "do_syscall_64+0xdd",
        ];
        assert_eq!(cleaned(5, &raw), ["do_syscall_64+0xdd"]);
        let (k, m) = kernel();
        assert_eq!(
            kernel_lines(Some(&k), &m, None, &addrs(&raw)),
            ["do_syscall_64+0xdd"]
        );
        assert!(kernel_lines(Some(&k), &m, None, &addrs(&raw[..2])).is_empty());
        // No mechanism known (no symbol table when the session started):
        // the frames as they are.
        let none = Mechanism::default();
        assert_eq!(
            kernel_lines(Some(&k), &none, Some(OPENAT), &addrs(&raw)).len(),
            3
        );
    }

    /// A stack of this process, normalized before it is printed, names its
    /// frames; one of a process that does not exist is addresses.
    #[test]
    fn user_lines_from_captured_frames() {
        #[inline(never)]
        fn marker() {}
        let addr = marker as *const () as u64;
        let mut u = UserStacks::new(false);
        let me = std::process::id();
        let lines = u.lines(me, 1, &[addr]);
        assert!(lines[0].contains("marker+0x0"), "{lines:?}");
        assert_eq!(u.lines(u32::MAX - 1, 1, &[addr]), [format!("{addr:#x}")]);
        let t = u.totals();
        assert_eq!((t.stacks, t.at_end), (2, 2));
        assert_eq!((t.addresses.normalized, t.addresses.failures), (1, 1));
        // Asked again: the frames kept, nothing normalized again.
        assert!(u.lines(me, 1, &[])[0].contains("marker"));
        assert_eq!(u.totals().at_end, 2);
    }

    /// Callers are looked up one byte back and said of their own address:
    /// a return address just past a function's last call names that
    /// function, not the next one.
    #[test]
    fn callers_are_looked_up_one_byte_back() {
        let here = callers_are_looked_up_one_byte_back as *const () as u64;
        let frames = CaptureCache::default().normalize(std::process::id(), &[here]);
        let Place::File { file, .. } = frames[0].place else {
            panic!("{frames:?}")
        };
        let at = |offset| Place::File { file, offset };
        assert_eq!(caller_place(0, at(0x40)), at(0x40));
        assert_eq!(caller_place(1, at(0x40)), at(0x3f));
        assert_eq!(caller_place(1, at(0)), at(0));
        assert_eq!(
            caller_place(2, Place::Vdso { offset: 8, size: 2 }),
            Place::Vdso { offset: 7, size: 2 }
        );
        assert_eq!(caller_place(3, Place::Unknown), Place::Unknown);
        assert_eq!((caller_offset(0, 9), caller_offset(1, 9)), (9, 8));
        let sym = |offset| {
            SymResult::Symbol(Symbol {
                name: "f".into(),
                offset,
                kind: crate::symbolize::SymbolKind::Function,
                file: None,
                line: None,
                module: None,
                inlined: vec![],
            })
        };
        assert_eq!(at_frame(0, sym(4)), sym(4));
        assert_eq!(at_frame(1, sym(4)), sym(5));
        assert_eq!(at_frame(1, SymResult::Unmapped), SymResult::Unmapped);
    }

    /// Error chains' stacks are named as they come and kept in a cache of
    /// their own, bounded however many processes fail.
    #[test]
    fn chain_stacks_are_named_and_their_cache_bounded() {
        #[inline(never)]
        fn chain_marker() -> u64 {
            // A body of its own: not folded into another empty function.
            std::hint::black_box(0x5eed)
        }
        let addr = chain_marker as *const () as u64;
        let mut u = UserStacks::new(false);
        let me = std::process::id();
        let n = CHAIN_STACKS_KEPT as u32 + 10;
        for id in 0..n {
            let lines = u.chain_lines_with(me, id, || vec![addr], || None);
            // After the calls inlined there (black_box), with its line.
            let own = lines.iter().find(|l| !l.contains(" (inlined)"));
            assert!(
                own.is_some_and(|l| l.contains("chain_marker+0x0 at ")),
                "{lines:?}"
            );
            assert!(u.chain_stacks.len() <= CHAIN_STACKS_KEPT);
        }
        // Asked again while kept: not normalized again (no addresses).
        let again = u.chain_lines_with(me, n - 1, Vec::new, || None);
        assert!(
            again.iter().any(|l| l.contains("chain_marker")),
            "{again:?}"
        );
        assert_eq!(u.totals().stacks, u64::from(n));
        assert!(u.captured.is_empty());
    }

    #[test]
    fn exec_files_are_the_mapped_programs_and_libraries() {
        let mut c = std::process::Command::new("/bin/sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let pid = c.id().to_string();
        let mut files = Vec::new();
        // The loader maps the program first and libc a moment later.
        let has = |files: &[PathBuf], part: &str| {
            files.iter().any(|f| f.to_string_lossy().contains(part))
        };
        for _ in 0..100 {
            files = exec_files(&pid);
            if has(&files, "sleep") && has(&files, "libc") {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = c.kill();
        let _ = c.wait();
        assert!(files.iter().any(|f| f.ends_with("sleep")), "{files:?}");
        assert!(
            files.iter().any(|f| f.to_string_lossy().contains("libc")),
            "{files:?}"
        );
        assert!(exec_files("self")
            .iter()
            .any(|f| f.to_string_lossy().contains("libc")));
    }
}
