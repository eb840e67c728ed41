//! The tracer's own path: the kernel functions that run because bpfmux
//! traces, which a glob must not select.
//!
//! Tracing runs kernel code: the trampoline or probe handler that calls a
//! program, the helpers and map operations the program calls, and what
//! those call (ring buffer, hash map and LRU code, stack walking, locks).
//! When a glob selects those functions too, each of their calls made from
//! inside a program enters a trampoline only to be turned away by the
//! kernel's recursion guard: on `'*'` that is most calls of the kernel
//! (about a hundred million in a few seconds), and the guard turns away the
//! calls of the workload that happen to nest in them as well.
//!
//! The set is derived from the running kernel, not listed by hand:
//!
//! 1. **Seeds**: the JIT code of the programs the attach will load (loaded
//!    once beforehand, as the engine would load them),
//!    whose direct calls are the helpers and map functions the verifier
//!    chose for this kernel, and the mechanism's entry code by name.
//! 2. **Closure**: the direct calls and jumps (`call`/`jmp`/`jcc` with a
//!    32-bit displacement, including tail calls) in the kernel text of
//!    each function reached, read from `/proc/kcore`, followed breadth
//!    first. A displacement counts only when it lands exactly on the start
//!    of a function (or on its `__pfx_`/`__cfi_` padding), which rejects
//!    stray byte patterns. Cold parts (`.cold`) and the scheduler's entry
//!    points are not followed: they run on error paths and on preemption,
//!    not on the tracer's path.
//!
//! Functions named exactly are kept (the user asked for them); only glob
//! matches are left out, each with the seed it was reached from.

use std::collections::VecDeque;
use std::fmt;
use std::os::fd::BorrowedFd;
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;

use crate::sys::bpf_ops;
use crate::sys::kcore::Kcore;

/// Functions reached from more than this many calls deep are not followed.
const MAX_DEPTH: u8 = 12;
/// Text read per function at most (a function's extent is up to the next
/// symbol; the largest kernel functions are a few KiB).
const MAX_FUNC_BYTES: u64 = 64 << 10;

/// Entry points the walk does not enter: scheduling (a helper re-enabling
/// preemption may schedule, which is no part of the tracer's path) and the
/// warning/oops machinery of cold paths.
const NOT_FOLLOWED: &[&str] = &[
    "schedule",
    "__schedule",
    "preempt_schedule",
    "preempt_schedule_notrace",
    "preempt_schedule_common",
    "preempt_schedule_thunk",
    "preempt_schedule_notrace_thunk",
    "__warn_printk",
    "_printk",
    "printk",
    "__warn",
    "report_bug",
    "panic",
    "__stack_chk_fail",
    "__ubsan_handle_out_of_bounds",
];

/// Why the set could not be derived.
#[derive(Debug, thiserror::Error)]
pub enum SelfPathError {
    /// `/proc/kallsyms` could not be read or showed no addresses.
    #[error("reading /proc/kallsyms: {0}")]
    Kallsyms(std::io::Error),
    /// `/proc/kcore` could not be opened (not root, lockdown, no
    /// CONFIG_PROC_KCORE).
    #[error("opening /proc/kcore to follow the calls of the tracer's own path: {0}")]
    Kcore(std::io::Error),
}

/// A function on the tracer's path, and how it was found.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Reached {
    /// The seed it was reached from: a program (`bpf program`) or a
    /// mechanism function.
    pub seed: String,
    /// Calls from the seed (1: called by the seed itself).
    pub depth: u8,
}

/// The functions on the tracer's own path.
#[derive(Clone, Debug, Default)]
pub struct SelfPath {
    reached: FxHashMap<String, Reached>,
    /// Functions whose text was scanned.
    pub scanned: usize,
    /// How long deriving took.
    pub time: Duration,
}

impl SelfPath {
    /// Whether `name` (a vmlinux or module function) is on the path.
    pub fn get(&self, name: &str) -> Option<&Reached> {
        self.reached.get(name)
    }

    /// How many functions are on the path.
    pub fn len(&self) -> usize {
        self.reached.len()
    }

    /// Whether nothing was found.
    pub fn is_empty(&self) -> bool {
        self.reached.is_empty()
    }

    /// Derives the set for `programs` (loaded copies of what the attach
    /// will load) run by the mechanism whose entry functions' names start
    /// with one of `mechanism` (see `EngineKind::mechanism_prefixes`), on
    /// the running kernel.
    pub fn derive(
        programs: &[BorrowedFd<'_>],
        mechanism: &[&str],
    ) -> Result<SelfPath, SelfPathError> {
        let t0 = Instant::now();
        let text = std::fs::read_to_string("/proc/kallsyms").map_err(SelfPathError::Kallsyms)?;
        let syms = Symbols::parse(&text);
        if syms.is_empty() {
            return Err(SelfPathError::Kallsyms(std::io::Error::other(
                "no addresses (kernel.kptr_restrict hides them from this process)",
            )));
        }
        let kcore = Kcore::open().map_err(SelfPathError::Kcore)?;
        let mut seeds: Vec<(u64, u64, String)> = Vec::new();
        for fd in programs {
            for (addr, len) in bpf_ops::jited_funcs(*fd).unwrap_or_default() {
                seeds.push((addr, u64::from(len), "bpf program".to_string()));
            }
        }
        for &p in mechanism {
            for i in syms.with_prefix(p) {
                seeds.push((syms.addr[i], syms.extent(i), syms.name[i].clone()));
            }
        }
        let mut out = walk(&seeds, &syms, |addr, buf| kcore.read(addr, buf).is_ok());
        out.time = t0.elapsed();
        Ok(out)
    }
}

/// Breadth-first over direct calls from `seeds` (address, length, name);
/// `read` fills a buffer with kernel text and says whether it could.
fn walk(
    seeds: &[(u64, u64, String)],
    syms: &Symbols,
    read: impl Fn(u64, &mut [u8]) -> bool,
) -> SelfPath {
    let mut reached: FxHashMap<String, Reached> = FxHashMap::default();
    let mut visited = vec![false; syms.len()];
    let mut queue: VecDeque<(u64, u64, u8, usize)> = VecDeque::new();
    let mut scanned = 0;
    for (s, (addr, len, name)) in seeds.iter().enumerate() {
        if let Some(i) = syms.exact(*addr) {
            visited[i] = true;
            // The mechanism's own functions are on the path themselves.
            if syms.name[i] == *name {
                reached.insert(
                    name.clone(),
                    Reached {
                        seed: name.clone(),
                        depth: 0,
                    },
                );
            }
        }
        queue.push_back((*addr, *len, 0, s));
    }
    let mut buf = Vec::new();
    while let Some((addr, len, depth, seed)) = queue.pop_front() {
        buf.resize(len.min(MAX_FUNC_BYTES) as usize, 0);
        if !read(addr, &mut buf) {
            continue;
        }
        scanned += 1;
        for target in branch_targets(addr, &buf) {
            let Some(i) = syms.function_at(target) else {
                continue;
            };
            if visited[i] || syms.addr[i] == addr {
                continue;
            }
            visited[i] = true;
            let name = &syms.name[i];
            if name.contains(".cold") || NOT_FOLLOWED.contains(&name.as_str()) {
                continue;
            }
            reached.insert(
                name.clone(),
                Reached {
                    seed: seeds[seed].2.clone(),
                    depth: depth + 1,
                },
            );
            if depth + 1 < MAX_DEPTH {
                queue.push_back((syms.addr[i], syms.extent(i), depth + 1, seed));
            }
        }
    }
    SelfPath {
        reached,
        scanned,
        time: Duration::ZERO,
    }
}

/// Targets of the rel32 calls, jumps and conditional jumps in `code`
/// (at kernel address `base`). Every byte offset is tried: the caller
/// keeps only targets that are function starts.
fn branch_targets(base: u64, code: &[u8]) -> impl Iterator<Item = u64> + '_ {
    let rel = |at: usize| -> Option<i64> {
        Some(i64::from(i32::from_le_bytes(
            code.get(at..at + 4)?.try_into().ok()?,
        )))
    };
    (0..code.len()).filter_map(move |i| {
        let (disp_at, next) = match code[i] {
            0xe8 | 0xe9 => (i + 1, i + 5),
            0x0f if code.get(i + 1).is_some_and(|b| (0x80..=0x8f).contains(b)) => (i + 2, i + 6),
            _ => return None,
        };
        let d = rel(disp_at)?;
        Some((base + next as u64).wrapping_add_signed(d))
    })
}

/// Text symbols by address: names, and the extent of each up to the next.
#[derive(Default)]
struct Symbols {
    addr: Vec<u64>,
    name: Vec<String>,
}

impl Symbols {
    fn parse(text: &str) -> Self {
        let mut v: Vec<(u64, &str)> = text
            .lines()
            .filter_map(|l| {
                let mut it = l.split_ascii_whitespace();
                let addr = u64::from_str_radix(it.next()?, 16).ok()?;
                let ty = it.next()?;
                let name = it.next()?;
                (addr != 0 && matches!(ty, "t" | "T" | "w" | "W")).then_some((addr, name))
            })
            .collect();
        v.sort_unstable();
        Self {
            addr: v.iter().map(|s| s.0).collect(),
            name: v.iter().map(|s| s.1.to_string()).collect(),
        }
    }

    fn len(&self) -> usize {
        self.addr.len()
    }

    fn is_empty(&self) -> bool {
        self.addr.is_empty()
    }

    /// Index of the last symbol at exactly `addr`.
    fn exact(&self, addr: u64) -> Option<usize> {
        let i = self.addr.partition_point(|&a| a <= addr);
        (i > 0 && self.addr[i - 1] == addr).then(|| i - 1)
    }

    /// The function starting at `addr`, or whose `__pfx_`/`__cfi_` padding
    /// starts there (calls may go to the padding's call thunk).
    fn function_at(&self, addr: u64) -> Option<usize> {
        let i = self.exact(addr)?;
        let name = &self.name[i];
        match name
            .strip_prefix("__pfx_")
            .or_else(|| name.strip_prefix("__cfi_"))
        {
            Some(real) => {
                let j = i + 1;
                (j < self.len() && self.name[j] == real).then_some(j)
            }
            None => Some(i),
        }
    }

    /// Bytes from symbol `i` to the next symbol at a higher address.
    fn extent(&self, i: usize) -> u64 {
        let a = self.addr[i];
        let next = self.addr[i..].iter().find(|&&b| b > a).copied();
        next.map_or(MAX_FUNC_BYTES, |n| (n - a).min(MAX_FUNC_BYTES))
    }

    fn with_prefix<'a>(&'a self, p: &'a str) -> impl Iterator<Item = usize> + 'a {
        (0..self.len()).filter(move |&i| self.name[i].starts_with(p))
    }
}

impl fmt::Display for Reached {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.depth {
            0 => write!(f, "{} itself", self.seed),
            1 => write!(f, "called by {}", self.seed),
            d => write!(f, "{d} calls from {}", self.seed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: u64 = 0xffff_ffff_8100_0000;

    /// `call target` encoded at `at` in `code` (which starts at `base`).
    fn put_call(code: &mut [u8], base: u64, at: usize, op: &[u8], target: u64) {
        code[at..at + op.len()].copy_from_slice(op);
        let next = base + (at + op.len() + 4) as u64;
        let d = (target as i64 - next as i64) as i32;
        code[at + op.len()..at + op.len() + 4].copy_from_slice(&d.to_le_bytes());
    }

    fn symbols(list: &[(u64, &str)]) -> Symbols {
        let text: String = list
            .iter()
            .map(|(a, n)| format!("{a:016x} t {n}\n"))
            .collect();
        Symbols::parse(&text)
    }

    #[test]
    fn finds_calls_jumps_and_conditional_tail_calls() {
        let mut code = vec![0x90u8; 64];
        put_call(&mut code, BASE, 0, &[0xe8], BASE + 0x1000);
        put_call(&mut code, BASE, 10, &[0xe9], BASE + 0x2000);
        put_call(&mut code, BASE, 20, &[0x0f, 0x85], BASE + 0x3000);
        let t: Vec<u64> = branch_targets(BASE, &code).collect();
        for want in [0x1000, 0x2000, 0x3000] {
            assert!(t.contains(&(BASE + want)), "{want:#x} in {t:x?}");
        }
    }

    #[test]
    fn follows_calls_to_function_starts_only() {
        // seed -> a (call) -> b (tail jump via padding); a's code also has
        // a displacement into the middle of c, which is no call.
        let syms = symbols(&[
            (BASE, "seed_fn"),
            (BASE + 0x100, "a"),
            (BASE + 0x1f0, "__pfx_b"),
            (BASE + 0x200, "b"),
            (BASE + 0x300, "c"),
            (BASE + 0x400, "end"),
        ]);
        let mut mem = vec![0x90u8; 0x400];
        put_call(&mut mem, BASE, 0x10, &[0xe8], BASE + 0x100);
        put_call(&mut mem, BASE, 0x110, &[0xe9], BASE + 0x1f0);
        put_call(&mut mem, BASE, 0x120, &[0xe8], BASE + 0x310);
        let read = |addr: u64, buf: &mut [u8]| {
            let at = (addr - BASE) as usize;
            match mem.get(at..at + buf.len()) {
                Some(src) => {
                    buf.copy_from_slice(src);
                    true
                }
                None => false,
            }
        };
        let out = walk(&[(BASE, 0x100, "seed_fn".into())], &syms, read);
        assert_eq!(out.get("a").map(|r| r.depth), Some(1));
        assert_eq!(out.get("b").map(|r| r.depth), Some(2));
        assert!(
            out.get("c").is_none(),
            "a displacement into c's middle is no call"
        );
        assert_eq!(
            out.get("seed_fn").map(|r| r.depth),
            Some(0),
            "a named seed is on the path"
        );
        assert_eq!(out.get("b").map(|r| r.seed.as_str()), Some("seed_fn"));
    }

    #[test]
    fn does_not_enter_the_scheduler_or_cold_parts() {
        let syms = symbols(&[
            (BASE, "seed_fn"),
            (BASE + 0x100, "preempt_schedule"),
            (BASE + 0x200, "seed_fn.cold"),
            (BASE + 0x300, "only_from_cold"),
            (BASE + 0x400, "end"),
        ]);
        let mut mem = vec![0x90u8; 0x400];
        put_call(&mut mem, BASE, 0x10, &[0xe8], BASE + 0x100);
        put_call(&mut mem, BASE, 0x20, &[0x0f, 0x84], BASE + 0x200);
        put_call(&mut mem, BASE, 0x210, &[0xe8], BASE + 0x300);
        let read = |addr: u64, buf: &mut [u8]| {
            let at = (addr - BASE) as usize;
            mem.get(at..at + buf.len())
                .map(|src| buf.copy_from_slice(src))
                .is_some()
        };
        let out = walk(&[(BASE, 0x100, "bpf program".into())], &syms, read);
        assert!(out.is_empty(), "{:?}", out.reached);
    }
}
