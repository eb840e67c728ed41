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
//! after a stack is counted cannot be asked any more: its frames stay
//! addresses, counted in [`CaptureStats::failures`].

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::events::{self, StackKey};
use super::program::TraceObject;
use super::{ms, Error, Tracer};
use crate::normalize::capture::{CaptureCache, CaptureStats, Frame};
use crate::symbolize::{KernelSymbolizer, SymResult, Symbol, UserSymbolizer};

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
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
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
        self.captured
            .insert((tgid, id), self.cache.normalize(tgid, &addrs));
        Ok(())
    }

    /// The frames of user stack `id` of `tgid`, symbolized; `addrs` are
    /// its addresses, for a stack not normalized yet (it is now: counted as
    /// read at the end).
    pub fn frames(&mut self, tgid: u32, id: u32, addrs: &[u64]) -> Vec<StackFrame> {
        if !self.captured.contains_key(&(tgid, id)) {
            self.at_end += 1;
            let frames = self.cache.normalize(tgid, addrs);
            self.captured.insert((tgid, id), frames);
        }
        let Some(frames) = self.captured.get(&(tgid, id)) else {
            return Vec::new();
        };
        symbolized(&mut self.usyms, &self.cache, frames)
    }

    /// [`Self::frames`] as lines: `name+0xoff`, or the address.
    pub fn lines(&mut self, tgid: u32, id: u32, addrs: &[u64]) -> Vec<String> {
        lines(&self.frames(tgid, id, addrs))
    }

    /// The lines of user stack `id` of `tgid` for an error chain, as it
    /// comes: normalized now unless it was, and kept (in a cache of at most
    /// [`CHAIN_STACKS_KEPT`]) for the next chain of the same stack.
    pub fn chain_lines(&mut self, obj: &TraceObject, tgid: u32, id: u32) -> Vec<String> {
        // A stack that cannot be read shows as nothing, as before.
        self.chain_lines_with(tgid, id, || {
            events::stack_addrs(obj, id).unwrap_or_default()
        })
    }

    /// [`Self::chain_lines`], the stack's addresses from `addrs` when
    /// they are needed.
    fn chain_lines_with(
        &mut self,
        tgid: u32,
        id: u32,
        addrs: impl FnOnce() -> Vec<u64>,
    ) -> Vec<String> {
        let key = (tgid, id);
        if self.captured.contains_key(&key) {
            return self.lines(tgid, id, &[]);
        }
        if !self.chain_stacks.contains_key(&key) {
            if self.chain_stacks.len() >= CHAIN_STACKS_KEPT {
                self.chain_stacks.clear();
            }
            let frames = self.cache.normalize(tgid, &addrs());
            self.chain_normalized += 1;
            self.chain_stacks.insert(key, frames);
        }
        let Some(frames) = self.chain_stacks.get(&key) else {
            return Vec::new();
        };
        lines(&symbolized(&mut self.usyms, &self.cache, frames))
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

/// Normalized frames, symbolized.
fn symbolized(
    usyms: &mut UserSymbolizer,
    cache: &CaptureCache,
    frames: &[Frame],
) -> Vec<StackFrame> {
    let results = usyms.symbolize_captured(cache, frames);
    frames
        .iter()
        .zip(results)
        .map(|(f, r)| StackFrame::new(f.addr, r))
        .collect()
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
    /// Kernel frames, innermost first (as captured).
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
    fn new(addr: u64, r: Option<SymResult>) -> Self {
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
/// `ksyms` (one kernel symbol table for them all); user frames from what
/// `ustacks` normalized (now, for a stack it has not seen).
pub(crate) fn symbolize(
    t: &Tracer,
    read: &events::Stacks,
    ustacks: &mut UserStacks,
    ksyms: Option<&KernelSymbolizer>,
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
            kernel: kernel_frames(ksyms, addrs(k.kstack)),
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

/// Kernel frames, symbolized (addresses only without a symbol table).
pub(crate) fn kernel_frames(ksyms: Option<&KernelSymbolizer>, kernel: &[u64]) -> Vec<StackFrame> {
    match ksyms {
        Some(k) => k
            .symbolize(kernel)
            .into_iter()
            .map(|s| StackFrame::new(s.addr, Some(s.result)))
            .collect(),
        None => kernel.iter().map(|&a| StackFrame::new(a, None)).collect(),
    }
}

/// Kernel frames as lines (addresses without a symbol table).
pub(crate) fn kernel_lines(ksyms: Option<&KernelSymbolizer>, kernel: &[u64]) -> Vec<String> {
    lines(&kernel_frames(ksyms, kernel))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_without_symbols_are_addresses() {
        assert_eq!(kernel_lines(None, &[0x10, 0x20]), ["0x10", "0x20"]);
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
            let lines = u.chain_lines_with(me, id, || vec![addr]);
            assert!(lines[0].contains("chain_marker+0x0"), "{lines:?}");
            assert!(u.chain_stacks.len() <= CHAIN_STACKS_KEPT);
        }
        // Asked again while kept: not normalized again (no addresses).
        let again = u.chain_lines_with(me, n - 1, Vec::new);
        assert!(again[0].contains("chain_marker"), "{again:?}");
        assert_eq!(u.totals().stacks, u64::from(n));
        assert!(u.captured.is_empty());
    }
}
