//! Error chains (`bpfmux trace --errors`): which chain of traced calls led
//! to an error.
//!
//! The programs keep each thread's traced calls in flight on a fixed-depth
//! call stack (every engine: session programs and entry/exit pairs alike).
//! When a call returns an error — a negative errno from a function that
//! returns a signed integer, NULL or an `ERR_PTR` from one that returns a
//! pointer, as its BTF prototype says ([`RetClass`]) — the stack's frames
//! become the thread's *chain*, with the kernel and user stacks of that
//! moment. The exits of the outer calls fill in their return values, and
//! the exit of the outermost one sends the chain (ring buffer `chains`, one
//! `struct trace_chain_event`). Here a record becomes an [`ErrorChain`]: functions
//! named, errors decoded, stacks symbolized; [`ErrorTally`] counts them per
//! errno for the summary.
//!
//! Under one outermost call the chain is that of the latest failure outside
//! the current chain: an error its callers pass on keeps the deepest
//! failing call; an error in a later, separate subtree (a retry, say)
//! replaces it. Calls nested deeper than the stack (32) are not kept: the
//! chain says how many were left out ([`ErrorChain::overflow`]), the
//! summary counts them in `lost.nesting`.
//!
//! # When a NULL return is an error
//!
//! BTF says a function returns a pointer; it does not say what its NULL
//! means. For many functions NULL is an ordinary answer ("no such entry",
//! "nothing queued", "no driver": `cpuidle_get_cpu_driver`, `next_zone`,
//! `rcu_cblist_dequeue`, ...), and on a whole-kernel run such returns are
//! most of the chains. Whether a caller treats a NULL as a failure (checks
//! it with `IS_ERR_OR_NULL`, turns it into `-ENOMEM`) is in the caller's
//! code, which neither BTF nor the symbol tables describe, and no list of
//! "NULL means failure" functions can be derived from them. What can be
//! seen is whether a traced caller went on to fail.
//!
//! So, by default ([`NullReturns::Explained`]), a chain whose failing call
//! returned NULL is reported only when a call above it in the same chain
//! (a traced caller, whose exit was seen) returned an errno, `-errno` or
//! `ERR_PTR(-errno)`: the NULL then explains a failure someone reported.
//! A chain that ends in NULL with no such caller (a *NULL-only* chain) is
//! left out and counted ([`ErrorTally::null_only_left_out`]). Chains that
//! end in an errno are always reported. [`NullReturns::All`] reports every
//! NULL return, as before this rule.
//!
//! The rule is applied here, when a record becomes a chain, not in the BPF
//! program: the program cannot know at a NULL return whether an outer call
//! will fail, so it must take the stacks then either way, and the record
//! has every return value the rule needs. The cost of that choice: NULL-only
//! chains still take room in the ring buffer (`lost.chains` counts what did
//! not fit), but they are dropped before their stacks are symbolized.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::btf::ValueKind;
use super::events;
use super::events::u64_at;
use super::program::TraceObject;
use super::select::Func;
use super::stacks::{kernel_lines, Mechanism, UserStacks};
use crate::symbolize::KernelSymbolizer;

/// Frames a chain holds at most (`TRACE_MAX_DEPTH` in trace.h).
pub const MAX_DEPTH: usize = 32;
/// `struct trace_chain_event`: a 56-byte header and 24 bytes per frame.
pub(crate) const CHAIN_SIZE: usize = 56 + 24 * MAX_DEPTH;
/// Bits 33-34 of the attach cookie (`TRACE_COOKIE_RET_SHIFT`).
pub(crate) const COOKIE_RET_SHIFT: u32 = 33;
/// The largest errno the kernel returns (`MAX_ERRNO`).
const MAX_ERRNO: i64 = 4095;

/// How a function's return value tells a failure (`enum trace_ret_class`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetClass {
    /// `void`, unsigned, `bool`, enums: never a failure.
    None,
    /// A signed integer of 32 bits or fewer: -4095..-1 is an errno.
    Int,
    /// A signed 64-bit integer: -4095..-1 is an errno.
    Long,
    /// A pointer: NULL, or an `ERR_PTR` (-4095..-1).
    Ptr,
}

impl RetClass {
    /// From the return type in the function's BTF prototype.
    pub fn of(ret: ValueKind) -> Self {
        match ret {
            ValueKind::Signed(b) if b <= 32 => RetClass::Int,
            ValueKind::Signed(_) => RetClass::Long,
            ValueKind::Pointer => RetClass::Ptr,
            _ => RetClass::None,
        }
    }

    /// The class in the attach cookie's bits.
    pub fn cookie_bits(self) -> u64 {
        let v: u64 = match self {
            RetClass::None => 0,
            RetClass::Int => 1,
            RetClass::Long => 2,
            RetClass::Ptr => 3,
        };
        v << COOKIE_RET_SHIFT
    }

    /// The register as the function meant it: a 32-bit int sign-extended.
    pub fn value(self, raw: u64) -> RetValue {
        match self {
            RetClass::Int => RetValue::Signed(i64::from(raw as u32 as i32)),
            RetClass::Long => RetValue::Signed(raw as i64),
            RetClass::Ptr if (raw as i64) < 0 && (raw as i64) >= -MAX_ERRNO => {
                RetValue::Signed(raw as i64)
            }
            _ => RetValue::Unsigned(raw),
        }
    }

    /// What the return value says went wrong, if anything (the same test
    /// as the BPF program's `is_error`).
    pub fn failure(self, raw: u64) -> Option<Failure> {
        match (self, self.value(raw)) {
            (RetClass::None, _) => None,
            (RetClass::Ptr, RetValue::Unsigned(0)) => Some(Failure::Null),
            (_, RetValue::Signed(v)) if (-MAX_ERRNO..0).contains(&v) => {
                Some(Failure::Errno(-v as i32))
            }
            _ => None,
        }
    }
}

/// Which NULL returns make an error chain ([`super::TraceOptions::null_returns`];
/// the rule is in the [module documentation](self)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NullReturns {
    /// A NULL counts only when a traced caller in the same chain returned
    /// an errno (`-errno` or `ERR_PTR(-errno)`); NULL-only chains are left
    /// out and counted.
    #[default]
    Explained,
    /// Every NULL return of a function that returns a pointer.
    All,
}

impl NullReturns {
    /// Whether the chain in `r` is reported; `class` gives the return class
    /// of a function by its index in the selection.
    pub(crate) fn keeps(self, r: &ChainRecord, class: impl Fn(usize) -> Option<RetClass>) -> bool {
        self == NullReturns::All || !null_only(r, class)
    }
}

/// The chain's failing call returned NULL and no call above it returned an
/// errno (its exit seen).
pub(crate) fn null_only(r: &ChainRecord, class: impl Fn(usize) -> Option<RetClass>) -> bool {
    let failure = |fr: &RawFrame| {
        fr.done
            .then(|| class(fr.func))
            .flatten()
            .and_then(|c| c.failure(fr.ret))
    };
    let Some(failing) = r.frames.get(r.failed) else {
        return false;
    };
    failure(failing) == Some(Failure::Null)
        && !r.frames[..r.failed]
            .iter()
            .any(|fr| matches!(failure(fr), Some(Failure::Errno(_))))
}

/// A return value: signed for integers and `ERR_PTR`s, unsigned otherwise
/// (pointers, unsigned integers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum RetValue {
    /// A signed integer, or an errno in a pointer.
    Signed(i64),
    /// An unsigned integer or a pointer.
    Unsigned(u64),
}

/// How a call failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Failure {
    /// It returned `-errno` (or `ERR_PTR(-errno)`).
    Errno(i32),
    /// A pointer-returning function returned NULL.
    Null,
}

impl Failure {
    /// `ENOENT`, `E123` for a number without a name, or `NULL`.
    pub fn name(self) -> String {
        match self {
            Failure::Errno(e) => errno_name(e).map_or_else(|| format!("E{e}"), str::to_string),
            Failure::Null => "NULL".into(),
        }
    }

    /// The errno, `None` for NULL.
    pub fn errno(self) -> Option<i32> {
        match self {
            Failure::Errno(e) => Some(e),
            Failure::Null => None,
        }
    }
}

/// One frame of a [`ChainRecord`], as the program wrote it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RawFrame {
    /// Index of the function in the selection.
    pub func: usize,
    /// Its exit was seen.
    pub done: bool,
    /// Its return register.
    pub ret: u64,
    /// From entry to exit, nanoseconds.
    pub duration_ns: u64,
}

/// Mirrors `struct trace_chain_event`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ChainRecord {
    pub ts_ns: u64,
    pub tgid: u32,
    pub tid: u32,
    pub failed: usize,
    pub overflow: u32,
    pub kstack: Option<u32>,
    pub ustack: Option<u32>,
    pub comm: String,
    /// Outermost first.
    pub frames: Vec<RawFrame>,
}

fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_ne_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}

impl ChainRecord {
    /// Decodes a ring buffer record; `None` for a short or inconsistent one.
    pub fn parse(b: &[u8]) -> Option<Self> {
        if b.len() < CHAIN_SIZE {
            return None;
        }
        let len = u32_at(b, 16) as usize;
        let failed = u32_at(b, 20) as usize;
        if len == 0 || len > MAX_DEPTH || failed >= len {
            return None;
        }
        let id = |v: u32| (v as i32 >= 0).then_some(v);
        let comm = &b[40..56];
        let end = comm.iter().position(|&c| c == 0).unwrap_or(comm.len());
        let frames = (0..len)
            .map(|i| {
                let at = 56 + i * 24;
                RawFrame {
                    func: u32_at(b, at) as usize,
                    done: u32_at(b, at + 4) != 0,
                    ret: u64_at(b, at + 8),
                    duration_ns: u64_at(b, at + 16),
                }
            })
            .collect();
        Some(Self {
            ts_ns: u64_at(b, 0),
            tgid: u32_at(b, 8),
            tid: u32_at(b, 12),
            failed,
            overflow: u32_at(b, 24),
            kstack: id(u32_at(b, 28)),
            ustack: id(u32_at(b, 32)),
            comm: String::from_utf8_lossy(&comm[..end]).into_owned(),
            frames,
        })
    }
}

/// A chain of traced calls that ended in an error, outermost call first.
#[derive(Clone, Debug, Serialize)]
pub struct ErrorChain {
    /// Always `"error"`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// When the outermost call returned, `CLOCK_MONOTONIC` nanoseconds.
    pub ts_ns: u64,
    /// The process.
    pub pid: u32,
    /// The thread.
    pub tid: u32,
    /// The thread's name.
    pub comm: String,
    /// The failing call's function (the last of `calls`).
    pub function: String,
    /// `ENOENT`, ..., or `NULL`.
    pub error: String,
    /// The errno, absent for NULL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errno: Option<i32>,
    /// From the outermost traced call to the failing one.
    pub calls: Vec<ChainCall>,
    /// Calls nested deeper than the stack keeps, left out of `calls`.
    pub overflow: u32,
    /// Kernel frames at the failing return, symbolized (`name+0xoff`),
    /// from the failing function (`name+0x0`) out, without the tracer's
    /// own frames ([`super::stacks`]).
    pub kernel_stack: Vec<String>,
    /// User frames at the failing return, symbolized (`name+0xoff`) from
    /// what was normalized when the chain arrived: the address where the
    /// process was gone by then.
    pub user_stack: Vec<String>,
}

/// One call of an [`ErrorChain`].
#[derive(Clone, Debug, Serialize)]
pub struct ChainCall {
    /// `name`, or `module:name`.
    pub function: String,
    /// What it returned; absent when its exit was not seen.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ret: Option<RetValue>,
    /// The failure its return value says, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// From entry to return; absent when its exit was not seen.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ns: Option<u64>,
}

/// Turns [`ChainRecord`]s into [`ErrorChain`]s: names, errors, stacks.
pub(crate) struct Resolver;

impl Resolver {
    /// `None` when the record names a function outside the set. The kernel
    /// stack is symbolized with `ksyms` and starts at the failing function
    /// (see [`super::stacks::kernel_frames`]); the user stack is normalized
    /// now, as the chain arrives, by `ustacks`.
    pub fn resolve(
        &mut self,
        r: &ChainRecord,
        funcs: &[Func],
        obj: &TraceObject,
        ustacks: &mut UserStacks,
        (ksyms, mech): (Option<&KernelSymbolizer>, &Mechanism),
    ) -> Option<ErrorChain> {
        let class = |f: &Func| RetClass::of(f.proto.ret);
        let mut calls = Vec::with_capacity(r.frames.len());
        for fr in &r.frames {
            let f = funcs.get(fr.func)?;
            let c = class(f);
            calls.push(ChainCall {
                function: f.display_name(),
                ret: fr.done.then(|| c.value(fr.ret)),
                error: fr
                    .done
                    .then(|| c.failure(fr.ret))
                    .flatten()
                    .map(Failure::name),
                duration_ns: fr.done.then_some(fr.duration_ns),
            });
        }
        let failing = r.frames.get(r.failed)?;
        let f = funcs.get(failing.func)?;
        let failure = class(f).failure(failing.ret)?;
        let kernel = r
            .kstack
            .and_then(|id| events::stack_addrs(obj, id).ok())
            .unwrap_or_default();
        let kernel_stack = kernel_lines(ksyms, mech, Some(failing.func), &kernel);
        let user_stack = match r.ustack {
            Some(id) => ustacks.chain_lines(obj, r.tgid, id),
            None => Vec::new(),
        };
        Some(ErrorChain {
            kind: "error",
            ts_ns: r.ts_ns,
            pid: r.tgid,
            tid: r.tid,
            comm: r.comm.clone(),
            function: f.display_name(),
            error: failure.name(),
            errno: failure.errno(),
            calls,
            overflow: r.overflow,
            kernel_stack,
            user_stack,
        })
    }
}

/// (error, failing function) pairs an [`ErrorTally`] counts apart at most;
/// chains of pairs past them are counted per error only
/// ([`ErrorTotals::other_functions`]).
pub const MAX_TALLIED_PAIRS: usize = 1 << 16;

/// Chains per error, for the summary: per error and failing function, in
/// bounded memory however long the run (at most [`MAX_TALLIED_PAIRS`]
/// pairs, and at most 4,096 errors: 1 to 4,095 and NULL).
#[derive(Clone, Debug, Default)]
pub struct ErrorTally {
    by_failure: BTreeMap<Failure, BTreeMap<String, u64>>,
    /// Per error, chains of functions past [`MAX_TALLIED_PAIRS`].
    other: BTreeMap<Failure, u64>,
    pairs: usize,
    null_only: u64,
}

impl ErrorTally {
    /// Whether the chain in `r` is to be reported under `nulls`; one that is
    /// not (a NULL-only chain) is counted here. `class` gives the return
    /// class of a function by its index in the selection.
    pub(crate) fn admit(
        &mut self,
        nulls: NullReturns,
        r: &ChainRecord,
        class: impl Fn(usize) -> Option<RetClass>,
    ) -> bool {
        let keep = nulls.keeps(r, class);
        self.null_only += u64::from(!keep);
        keep
    }

    /// NULL-only chains left out under [`NullReturns::Explained`].
    pub fn null_only_left_out(&self) -> u64 {
        self.null_only
    }

    /// Counts one chain by its failing call.
    pub fn add(&mut self, c: &ErrorChain) {
        self.add_capped(c, MAX_TALLIED_PAIRS);
    }

    /// [`Self::add`], with at most `max_pairs` pairs counted apart.
    fn add_capped(&mut self, c: &ErrorChain, max_pairs: usize) {
        let failure = match c.errno {
            Some(e) => Failure::Errno(e),
            None => Failure::Null,
        };
        let by_func = self.by_failure.entry(failure).or_default();
        if let Some(n) = by_func.get_mut(&c.function) {
            *n += 1;
        } else if self.pairs < max_pairs {
            by_func.insert(c.function.clone(), 1);
            self.pairs += 1;
        } else {
            *self.other.entry(failure).or_default() += 1;
        }
    }

    /// Per error, most chains first; per error the failing functions, most
    /// first (ties by name).
    pub fn totals(&self) -> Vec<ErrorTotals> {
        let mut out: Vec<ErrorTotals> = self
            .by_failure
            .iter()
            .map(|(f, by_func)| {
                let mut functions: Vec<FailingFunction> = by_func
                    .iter()
                    .map(|(name, &count)| FailingFunction {
                        function: name.clone(),
                        count,
                    })
                    .collect();
                functions.sort_by(|a, b| b.count.cmp(&a.count).then(a.function.cmp(&b.function)));
                let other_functions = self.other.get(f).copied().unwrap_or(0);
                ErrorTotals {
                    error: f.name(),
                    errno: f.errno(),
                    count: by_func.values().sum::<u64>() + other_functions,
                    functions,
                    other_functions,
                }
            })
            .collect();
        out.sort_by_key(|t| std::cmp::Reverse(t.count));
        out
    }
}

/// Chains that ended in one error.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorTotals {
    /// `ENOENT`, ..., or `NULL`.
    pub error: String,
    /// The errno, absent for NULL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errno: Option<i32>,
    /// Chains reported.
    pub count: u64,
    /// The failing calls' functions, most chains first.
    pub functions: Vec<FailingFunction>,
    /// Chains of functions not counted apart: the tally already counted
    /// [`MAX_TALLIED_PAIRS`] (error, function) pairs when they came.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub other_functions: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A function whose failure started chains.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailingFunction {
    /// `name`, or `module:name`.
    pub function: String,
    /// Chains it started.
    pub count: u64,
}

/// The symbolic name of a Linux errno (x86-64 numbering, the kernel's
/// internal ones too), `None` for a number without one.
pub fn errno_name(e: i32) -> Option<&'static str> {
    const NAMES: [&str; 134] = [
        "",
        "EPERM",
        "ENOENT",
        "ESRCH",
        "EINTR",
        "EIO",
        "ENXIO",
        "E2BIG",
        "ENOEXEC",
        "EBADF",
        "ECHILD",
        "EAGAIN",
        "ENOMEM",
        "EACCES",
        "EFAULT",
        "ENOTBLK",
        "EBUSY",
        "EEXIST",
        "EXDEV",
        "ENODEV",
        "ENOTDIR",
        "EISDIR",
        "EINVAL",
        "ENFILE",
        "EMFILE",
        "ENOTTY",
        "ETXTBSY",
        "EFBIG",
        "ENOSPC",
        "ESPIPE",
        "EROFS",
        "EMLINK",
        "EPIPE",
        "EDOM",
        "ERANGE",
        "EDEADLK",
        "ENAMETOOLONG",
        "ENOLCK",
        "ENOSYS",
        "ENOTEMPTY",
        "ELOOP",
        "",
        "ENOMSG",
        "EIDRM",
        "ECHRNG",
        "EL2NSYNC",
        "EL3HLT",
        "EL3RST",
        "ELNRNG",
        "EUNATCH",
        "ENOCSI",
        "EL2HLT",
        "EBADE",
        "EBADR",
        "EXFULL",
        "ENOANO",
        "EBADRQC",
        "EBADSLT",
        "",
        "EBFONT",
        "ENOSTR",
        "ENODATA",
        "ETIME",
        "ENOSR",
        "ENONET",
        "ENOPKG",
        "EREMOTE",
        "ENOLINK",
        "EADV",
        "ESRMNT",
        "ECOMM",
        "EPROTO",
        "EMULTIHOP",
        "EDOTDOT",
        "EBADMSG",
        "EOVERFLOW",
        "ENOTUNIQ",
        "EBADFD",
        "EREMCHG",
        "ELIBACC",
        "ELIBBAD",
        "ELIBSCN",
        "ELIBMAX",
        "ELIBEXEC",
        "EILSEQ",
        "ERESTART",
        "ESTRPIPE",
        "EUSERS",
        "ENOTSOCK",
        "EDESTADDRREQ",
        "EMSGSIZE",
        "EPROTOTYPE",
        "ENOPROTOOPT",
        "EPROTONOSUPPORT",
        "ESOCKTNOSUPPORT",
        "EOPNOTSUPP",
        "EPFNOSUPPORT",
        "EAFNOSUPPORT",
        "EADDRINUSE",
        "EADDRNOTAVAIL",
        "ENETDOWN",
        "ENETUNREACH",
        "ENETRESET",
        "ECONNABORTED",
        "ECONNRESET",
        "ENOBUFS",
        "EISCONN",
        "ENOTCONN",
        "ESHUTDOWN",
        "ETOOMANYREFS",
        "ETIMEDOUT",
        "ECONNREFUSED",
        "EHOSTDOWN",
        "EHOSTUNREACH",
        "EALREADY",
        "EINPROGRESS",
        "ESTALE",
        "EUCLEAN",
        "ENOTNAM",
        "ENAVAIL",
        "EISNAM",
        "EREMOTEIO",
        "EDQUOT",
        "ENOMEDIUM",
        "EMEDIUMTYPE",
        "ECANCELED",
        "ENOKEY",
        "EKEYEXPIRED",
        "EKEYREVOKED",
        "EKEYREJECTED",
        "EOWNERDEAD",
        "ENOTRECOVERABLE",
        "ERFKILL",
        "EHWPOISON",
    ];
    // The kernel's own, never seen by user space (include/linux/errno.h).
    const INTERNAL: [(i32, &str); 17] = [
        (512, "ERESTARTSYS"),
        (513, "ERESTARTNOINTR"),
        (514, "ERESTARTNOHAND"),
        (515, "ENOIOCTLCMD"),
        (516, "ERESTART_RESTARTBLOCK"),
        (517, "EPROBE_DEFER"),
        (518, "EOPENSTALE"),
        (519, "ENOPARAM"),
        (521, "EBADHANDLE"),
        (522, "ENOTSYNC"),
        (523, "EBADCOOKIE"),
        (524, "ENOTSUPP"),
        (525, "ETOOSMALL"),
        (526, "ESERVERFAULT"),
        (527, "EBADTYPE"),
        (528, "EJUKEBOX"),
        (529, "EIOCBQUEUED"),
    ];
    usize::try_from(e)
        .ok()
        .and_then(|i| NAMES.get(i))
        .copied()
        .filter(|n| !n.is_empty())
        .or_else(|| INTERNAL.iter().find(|(n, _)| *n == e).map(|(_, s)| *s))
}

/// The errno of a symbolic name (`ENOMEM`, `enomem`), the inverse of
/// [`errno_name`].
pub fn errno_by_name(name: &str) -> Option<i32> {
    let upper = name.to_ascii_uppercase();
    (1..=529).find(|&e| errno_name(e) == Some(upper.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_names_follow_the_kernel_numbering() {
        assert_eq!(errno_name(2), Some("ENOENT"));
        assert_eq!(errno_name(22), Some("EINVAL"));
        assert_eq!(errno_name(40), Some("ELOOP"));
        assert_eq!(errno_name(41), None);
        assert_eq!(errno_name(42), Some("ENOMSG"));
        assert_eq!(errno_name(95), Some("EOPNOTSUPP"));
        assert_eq!(errno_name(110), Some("ETIMEDOUT"));
        assert_eq!(errno_name(133), Some("EHWPOISON"));
        assert_eq!(errno_name(512), Some("ERESTARTSYS"));
        assert_eq!(errno_name(524), Some("ENOTSUPP"));
        assert_eq!(
            (errno_name(0), errno_name(-1), errno_name(600)),
            (None, None, None)
        );
        assert_eq!(Failure::Errno(300).name(), "E300");
        assert_eq!(errno_by_name("ENOMEM"), Some(12));
        assert_eq!(errno_by_name("eperm"), Some(1));
        assert_eq!(errno_by_name("ERESTARTSYS"), Some(512));
        assert_eq!((errno_by_name("ENOPE"), errno_by_name("")), (None, None));
    }

    #[test]
    fn failures_follow_the_return_type() {
        let int = RetClass::of(ValueKind::Signed(32));
        // A 32-bit int in a 64-bit register: the upper half is not the sign.
        assert_eq!(int.failure(0x0000_0000_ffff_fffe), Some(Failure::Errno(2)));
        assert_eq!(int.value(0x1234_5678_ffff_fffe), RetValue::Signed(-2));
        assert_eq!(int.failure(0), None);
        assert_eq!(int.failure(-5000i64 as u64), None);
        let long = RetClass::of(ValueKind::Signed(64));
        assert_eq!(long.failure(-12i64 as u64), Some(Failure::Errno(12)));
        assert_eq!(long.failure(0x0000_0000_ffff_fffe), None);
        let ptr = RetClass::of(ValueKind::Pointer);
        assert_eq!(ptr.failure(0), Some(Failure::Null));
        assert_eq!(ptr.failure(-2i64 as u64), Some(Failure::Errno(2)));
        assert_eq!(ptr.value(-2i64 as u64), RetValue::Signed(-2));
        assert_eq!(ptr.failure(0xffff_8880_0000_1000), None);
        for k in [ValueKind::Void, ValueKind::Unsigned(32), ValueKind::Bool] {
            assert_eq!(RetClass::of(k), RetClass::None);
            assert_eq!(RetClass::of(k).failure(-2i64 as u64), None);
            assert_eq!(RetClass::of(k).cookie_bits(), 0);
        }
        assert_eq!(RetClass::Ptr.cookie_bits(), 3 << 33);
    }

    fn record_bytes(len: u32, failed: u32) -> Vec<u8> {
        let mut b = vec![0u8; CHAIN_SIZE];
        b[0..8].copy_from_slice(&77u64.to_ne_bytes());
        b[8..12].copy_from_slice(&100u32.to_ne_bytes());
        b[12..16].copy_from_slice(&101u32.to_ne_bytes());
        b[16..20].copy_from_slice(&len.to_ne_bytes());
        b[20..24].copy_from_slice(&failed.to_ne_bytes());
        b[24..28].copy_from_slice(&3u32.to_ne_bytes());
        b[28..32].copy_from_slice(&5i32.to_ne_bytes());
        b[32..36].copy_from_slice(&(-14i32).to_ne_bytes());
        b[40..45].copy_from_slice(b"cat\0\0");
        for i in 0..(len as usize).min(MAX_DEPTH) {
            let at = 56 + i * 24;
            b[at..at + 4].copy_from_slice(&(i as u32 + 10).to_ne_bytes());
            b[at + 4..at + 8].copy_from_slice(&1u32.to_ne_bytes());
            b[at + 8..at + 16].copy_from_slice(&(-2i64 as u64).to_ne_bytes());
            b[at + 16..at + 24].copy_from_slice(&(1000 - i as u64).to_ne_bytes());
        }
        b
    }

    #[test]
    fn parses_a_chain_record() {
        let r = ChainRecord::parse(&record_bytes(3, 2)).unwrap();
        assert_eq!((r.ts_ns, r.tgid, r.tid), (77, 100, 101));
        assert_eq!((r.failed, r.overflow), (2, 3));
        assert_eq!((r.kstack, r.ustack), (Some(5), None));
        assert_eq!(r.comm, "cat");
        assert_eq!(r.frames.len(), 3);
        assert_eq!(
            r.frames[2],
            RawFrame {
                func: 12,
                done: true,
                ret: -2i64 as u64,
                duration_ns: 998
            }
        );
        assert!(ChainRecord::parse(&record_bytes(3, 2)[..100]).is_none());
        assert!(ChainRecord::parse(&record_bytes(0, 0)).is_none());
        assert!(ChainRecord::parse(&record_bytes(2, 2)).is_none());
        assert!(ChainRecord::parse(&record_bytes(33, 0)).is_none());
    }

    /// Functions 0..=2 return `long`, 3..=5 a pointer.
    fn class(i: usize) -> Option<RetClass> {
        match i {
            0..=2 => Some(RetClass::Long),
            3..=5 => Some(RetClass::Ptr),
            _ => None,
        }
    }

    /// A record of calls `(function, ret)`, outermost first, the last one
    /// failing; every exit seen.
    fn record(calls: &[(usize, i64)]) -> ChainRecord {
        ChainRecord {
            ts_ns: 1,
            tgid: 2,
            tid: 2,
            failed: calls.len() - 1,
            overflow: 0,
            kstack: None,
            ustack: None,
            comm: "t".into(),
            frames: calls
                .iter()
                .map(|&(func, ret)| RawFrame {
                    func,
                    done: true,
                    ret: ret as u64,
                    duration_ns: 10,
                })
                .collect(),
        }
    }

    /// What each rule lets through, in order, and how many it left out.
    fn sieve(nulls: NullReturns, records: &[ChainRecord]) -> (Vec<usize>, u64) {
        let mut t = ErrorTally::default();
        let kept = records
            .iter()
            .enumerate()
            .filter(|(_, r)| t.admit(nulls, r, class))
            .map(|(i, _)| i)
            .collect();
        (kept, t.null_only_left_out())
    }

    #[test]
    fn null_counts_only_under_a_caller_that_failed_with_an_errno() {
        let records = [
            // 0: a lone NULL, the outermost traced call.
            record(&[(3, 0)]),
            // 1: a NULL under an outer errno (getpgid: -ESRCH, the task lookup NULL).
            record(&[(0, -3), (4, 0)]),
            // 2: a NULL under a caller that succeeded: a normal answer.
            record(&[(0, 0), (3, 0)]),
            // 3: a NULL passed on as NULL: still nobody failed with an errno.
            record(&[(4, 0), (3, 0)]),
            // 4: an errno: always.
            record(&[(0, -2), (1, -2)]),
            // 5: an ERR_PTR above the NULL counts as an errno.
            record(&[(4, -12), (5, 0)]),
            // 6: an errno in the middle, swallowed by the outermost call.
            record(&[(0, 0), (1, -2), (3, 0)]),
        ];
        let (kept, left_out) = sieve(NullReturns::Explained, &records);
        assert_eq!((kept, left_out), (vec![1, 4, 5, 6], 3));
        let (kept, left_out) = sieve(NullReturns::All, &records);
        assert_eq!((kept, left_out), ((0..records.len()).collect(), 0));
        assert_eq!(NullReturns::default(), NullReturns::Explained);
    }

    #[test]
    fn a_caller_whose_exit_was_not_seen_explains_nothing() {
        let mut r = record(&[(0, -3), (3, 0)]);
        r.frames[0].done = false;
        assert!(null_only(&r, class));
        assert!(!NullReturns::Explained.keeps(&r, class));
        // A function outside the set (no class) neither fails nor explains.
        let r = record(&[(9, -3), (3, 0)]);
        assert!(null_only(&r, class));
        assert!(!null_only(&record(&[(9, 0)]), class));
    }

    fn chain(function: &str, errno: Option<i32>) -> ErrorChain {
        ErrorChain {
            kind: "error",
            ts_ns: 0,
            pid: 1,
            tid: 1,
            comm: "t".into(),
            function: function.into(),
            error: String::new(),
            errno,
            calls: vec![],
            overflow: 0,
            kernel_stack: vec![],
            user_stack: vec![],
        }
    }

    #[test]
    fn tally_stays_bounded_and_counts_what_it_does_not_keep_apart() {
        let mut t = ErrorTally::default();
        for i in 0..10 {
            t.add_capped(&chain(&format!("f{i}"), Some(2)), 3);
            t.add_capped(&chain("f0", Some(2)), 3);
        }
        t.add_capped(&chain("g", Some(22)), 3);
        t.add_capped(&chain("f1", Some(22)), 3);
        let totals = t.totals();
        assert_eq!(t.pairs, 3);
        assert_eq!((totals[0].error.as_str(), totals[0].count), ("ENOENT", 20));
        assert_eq!(totals[0].functions.len(), 3);
        assert_eq!(totals[0].other_functions, 7);
        assert_eq!(
            totals[0].functions[0].count, 11,
            "f0 is still counted apart"
        );
        assert_eq!((totals[1].count, totals[1].other_functions), (2, 2));
        let v = serde_json::to_value(&totals[0]).unwrap();
        assert_eq!(v["other_functions"], 7);
    }

    #[test]
    fn tally_counts_per_error_then_function() {
        let mut t = ErrorTally::default();
        for (f, e) in [
            ("path_openat", Some(2)),
            ("path_openat", Some(2)),
            ("lookup", Some(2)),
            ("kmalloc", None),
            ("vfs_read", Some(22)),
            ("vfs_write", Some(22)),
            ("vfs_write", Some(22)),
            ("vfs_read", Some(22)),
        ] {
            t.add(&chain(f, e));
        }
        let v = serde_json::to_value(t.totals()).unwrap();
        assert_eq!(
            v.to_string(),
            r#"[{"count":4,"errno":22,"error":"EINVAL","functions":[{"count":2,"function":"vfs_read"},{"count":2,"function":"vfs_write"}]},{"count":3,"errno":2,"error":"ENOENT","functions":[{"count":2,"function":"path_openat"},{"count":1,"function":"lookup"}]},{"count":1,"error":"NULL","functions":[{"count":1,"function":"kmalloc"}]}]"#
        );
    }
}
