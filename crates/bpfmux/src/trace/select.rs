//! Patterns → the set of functions to attach to.
//!
//! Globs are matched against the FUNCs in kernel BTF (vmlinux, and loaded
//! modules unless the pattern names one), then kept only if ftrace can
//! attach them (listed once in available_filter_functions), the name is not
//! shared by several text symbols (a name would attach to an arbitrary one),
//! the prototype suits a trampoline, and the kernel does not refuse the
//! function for tracing programs. Each drop keeps its reason for `-v`.
//!
//! Exact names skip the text listings altogether (no available_filter_functions,
//! no kallsyms): only the BTF lookup runs (through a name index when there
//! are many), and the kernel itself says no at attach time if it cannot
//! trace one. A name that is not in BTF at all is an error (a typo, or a
//! module not loaded); a known function that cannot be traced is dropped
//! like a glob match, marked `exact` so the user is warned about it.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::time::{Duration, Instant};

use super::btf::{BtfError, KernelBtfs, Proto};
use super::listings::{self, ListingError, Seen};
use super::pattern::{Pattern, Scope};
use crate::features::KernelBtf;

/// The verifier's `btf_id_deny`: never attachable by a tracing program.
const DENIED: &[&str] = &[
    "___migrate_enable",
    "migrate_disable",
    "migrate_enable",
    "rcu_read_unlock_strict",
    "preempt_count_add",
    "preempt_count_sub",
    "__rcu_read_lock",
    "__rcu_read_unlock",
];

/// Not on the verifier's list, but called by a trampoline's own exit path:
/// upstream's per-function trampoline leaves its programs with
/// rcu_read_unlock(), which calls rcu_read_unlock_special() when a grace
/// period waits on this CPU; a program there makes that call enter the
/// trampoline again, whose exit calls it again, until the stack guard page
/// (seen on 7.3.4, fentry and tracing_multi; the series' global backend
/// guards against it, and kprobes use ftrace's recursion guard).
const REENTERS: &[&str] = &["rcu_read_unlock_special"];

/// The verifier's `noreturn_deny`: no exit probe (fexit/fsession) on these.
const NO_RETURN: &[&str] = &[
    "__ia32_sys_exit",
    "__ia32_sys_exit_group",
    "__kunit_abort",
    "kunit_try_catch_throw",
    "__module_put_and_kthread_exit",
    "__x64_sys_exit",
    "__x64_sys_exit_group",
    "do_exit",
    "do_group_exit",
    "kthread_complete_and_exit",
    "make_task_dead",
];

/// A function to attach to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Func {
    /// Where it lives.
    pub scope: Scope,
    /// Its name.
    pub name: String,
    /// FUNC id in the BTF of `scope`.
    pub btf_id: u32,
    /// Its prototype, for arguments and the return value.
    pub proto: Proto,
    /// Named exactly on the command line (a warning when it is dropped).
    pub exact: bool,
    /// Symbol address from kallsyms, checked against the ftrace call site
    /// (glob matches only; exact names go to the kernel by name).
    pub addr: Option<u64>,
}

#[cfg(test)]
impl Func {
    /// A vmlinux function named exactly, of `params` returning `ret`.
    pub(crate) fn test(
        name: &str,
        params: Vec<super::btf::Param>,
        ret: super::btf::ValueKind,
    ) -> Func {
        Func {
            scope: Scope::Vmlinux,
            name: name.into(),
            btf_id: 1,
            proto: Proto {
                params,
                ret,
                ret_format: Default::default(),
            },
            exact: true,
            addr: None,
        }
    }
}

impl Func {
    /// `name` for vmlinux, `module:name` otherwise.
    pub fn display_name(&self) -> String {
        match &self.scope {
            Scope::Vmlinux => self.name.clone(),
            Scope::Module(m) => format!("{m}:{}", self.name),
        }
    }
}

/// What the kernel said when it refused a function at attach: its errno
/// (when it gave one) and its words, a verifier log's tail included.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct KernelRefusal {
    /// The errno, e.g. `libc::EINVAL`.
    pub errno: Option<i32>,
    /// What it said, as text.
    pub message: String,
}

impl KernelRefusal {
    pub(crate) fn of(e: &std::io::Error, errno: Option<i32>) -> Self {
        Self {
            errno,
            message: e.to_string(),
        }
    }
}

impl fmt::Display for KernelRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Why a function was left out.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum DropReason {
    /// Not in available_filter_functions: notrace, inlined everywhere, init.
    NotInFtrace,
    /// Several functions share the name (ftrace or kallsyms count).
    Ambiguous(u32),
    /// The prototype does not suit a trampoline.
    NotTraceable(String),
    /// On the verifier's deny list for tracing programs.
    Denied,
    /// Called from the trampoline's own exit: tracing it recurses.
    Reenters,
    /// Never returns, and an exit probe was asked for.
    NoReturn,
    /// Passes a struct by value that pushes arguments onto the stack, and
    /// the engine's exit side (the global trampoline calling the function)
    /// cannot pass those on.
    StructArgsOnStack,
    /// The kernel refused it at attach time (found by bisection).
    AttachRefused(KernelRefusal),
    /// Error injection asked for, and the kernel does not allow it here
    /// (not on its error-injection list, or not with an errno).
    NotInjectable(String),
    /// Run by the tracer itself (a glob match on the path from its
    /// programs and trampoline, [`super::selfpath`]): tracing it only
    /// re-enters the tracer, which the recursion guard turns away.
    SelfPath(super::selfpath::Reached),
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DropReason::NotInFtrace => {
                f.write_str("not in available_filter_functions (notrace, inlined or init code)")
            }
            DropReason::Ambiguous(n) => write!(f, "name shared by {n} kernel functions"),
            DropReason::NotTraceable(why) => write!(f, "not traceable by a trampoline: {why}"),
            DropReason::Denied => f.write_str("refused by the kernel for tracing programs"),
            DropReason::Reenters => {
                f.write_str("called by the trampoline's own exit path (would recurse without end)")
            }
            DropReason::NoReturn => f.write_str("never returns (no exit probe possible)"),
            DropReason::StructArgsOnStack => f.write_str(
                "a struct passed by value pushes arguments onto the stack, which the global \
                 trampoline cannot pass on when it calls the function for an exit probe",
            ),
            DropReason::AttachRefused(e) => write!(f, "refused at attach: {e}"),
            DropReason::NotInjectable(why) => write!(f, "no error injection: {why}"),
            DropReason::SelfPath(r) => write!(
                f,
                "run by the tracer's own path ({r}): its calls would only re-enter the tracer"
            ),
        }
    }
}

/// A function left out, with why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dropped {
    /// Where it lives.
    pub scope: Scope,
    /// Its name.
    pub name: String,
    /// Why it was left out.
    pub reason: DropReason,
    /// Named exactly by the user: always worth a warning.
    pub exact: bool,
}

impl Dropped {
    /// `name` for vmlinux, `module:name` otherwise.
    pub fn display_name(&self) -> String {
        match &self.scope {
            Scope::Vmlinux => self.name.clone(),
            Scope::Module(m) => format!("{m}:{}", self.name),
        }
    }
}

/// The functions the patterns select, and those dropped.
#[derive(Debug, Default)]
pub struct Selection {
    /// To attach, in attach order (their index is their attach cookie).
    pub funcs: Vec<Func>,
    /// Left out, with why.
    pub dropped: Vec<Dropped>,
    /// Whether the text listings were read (false: exact names only).
    pub read_listings: bool,
    /// Where the time went, in order (`-v`): BTF parsing, matching names,
    /// reading the listings, classifying.
    pub phases: Vec<(&'static str, Duration)>,
    /// The listings' reads, on threads of their own during the phases.
    pub listing_times: [(&'static str, Duration); 2],
}

impl Selection {
    /// Drop counts by reason kind, for the `-v` summary.
    pub fn drop_summary(&self) -> BTreeMap<String, usize> {
        let mut m = BTreeMap::new();
        for d in &self.dropped {
            let key = match &d.reason {
                DropReason::NotTraceable(_) => "not traceable by a trampoline".to_string(),
                DropReason::AttachRefused(_) => "refused by the kernel at attach".to_string(),
                DropReason::NotInjectable(_) => "no error injection".to_string(),
                DropReason::SelfPath(_) => "run by the tracer's own path".to_string(),
                DropReason::Ambiguous(_) => "name shared by several kernel functions".to_string(),
                r => r.to_string(),
            };
            *m.entry(key).or_default() += 1;
        }
        m
    }
}

/// Why no function set came out.
#[derive(Debug, thiserror::Error)]
pub enum SelectError {
    /// Nothing to select from.
    #[error("no patterns given")]
    NoPatterns,
    /// Kernel BTF could not be read.
    #[error(transparent)]
    Btf(#[from] BtfError),
    /// An ftrace or kallsyms listing could not be read.
    #[error(transparent)]
    Listing(#[from] ListingError),
    /// A `module:` pattern names no loaded module.
    #[error("module {0:?} has no BTF in /sys/kernel/btf (not loaded?)")]
    NoModule(String),
    /// An exact name that no kernel BTF has.
    #[error("unknown function {0:?}: not in kernel BTF")]
    Unknown(String),
    /// A glob that matches nothing.
    #[error("pattern {0:?} matches no kernel function")]
    NoMatch(String),
    #[error("no traceable function left after filtering ({} matched, all dropped{})",
        .dropped.len(), describe_dropped(.dropped, None))]
    /// Every match was dropped; `dropped` says why for each.
    AllDropped {
        /// The functions matched, each with its reason.
        dropped: Vec<Dropped>,
    },
}

/// `: ` and a few of the dropped functions with their reasons, for an error
/// message (empty when none were); when more were dropped than shown, the
/// caller's `more` says how to see them all (`... 3 more; MORE`).
pub fn describe_dropped(d: &[Dropped], more: Option<&str>) -> String {
    const SHOWN: usize = 5;
    if d.is_empty() {
        return String::new();
    }
    let mut s: Vec<String> = d
        .iter()
        .take(SHOWN)
        .map(|d| format!("{}: {}", d.display_name(), d.reason))
        .collect();
    if d.len() > SHOWN {
        let hint = more.map_or(String::new(), |m| format!("; {m}"));
        s.push(format!("... {} more{hint}", d.len() - SHOWN));
    }
    format!(": {}", s.join("; "))
}

/// The patterns in order, each only where it first appears.
fn first_of_each(patterns: &[Pattern]) -> Vec<&Pattern> {
    let mut seen = std::collections::HashSet::new();
    patterns.iter().filter(|p| seen.insert(*p)).collect()
}

/// Above this many exact names, one pass over BTF builds a name index
/// instead of a lookup per name (libbpf's search is linear).
const EXACT_INDEX_FROM: usize = 16;

/// What the engine will need: exit probes are refused on `__noreturn` functions.
#[derive(Clone, Copy, Debug, Default)]
pub struct SelectOptions {
    /// Exits will be probed: drop functions that never return.
    pub needs_exit: bool,
    /// The engine calls the function itself (the global trampoline's exit
    /// side and fmod_ret) and passes on only 8-byte argument slots: drop
    /// functions whose struct arguments push others onto the stack.
    pub calls_with_slots: bool,
}

/// Resolves patterns against kernel BTF (and, for globs, ftrace's and
/// kallsyms' listings): what a trampoline can attach to, with a reason for
/// each function left out. Exact names need only a BTF lookup.
pub fn select(
    patterns: &[Pattern],
    excludes: &[Pattern],
    opts: SelectOptions,
) -> Result<Selection, SelectError> {
    let t0 = Instant::now();
    let pending = start_listings(patterns);
    let btf = KernelBtf::load();
    select_in(&btf, pending, t0.elapsed(), patterns, excludes, opts)
}

/// Globs need the kernel's listings, which it generates slowly: started
/// before vmlinux BTF is parsed, they are read meanwhile.
pub(crate) fn start_listings(patterns: &[Pattern]) -> Option<listings::Pending> {
    patterns
        .iter()
        .any(|p| !p.is_exact())
        .then(listings::Pending::start)
}

/// [`select`] on vmlinux BTF the caller parsed already (`btf_time` it took,
/// counted in the BTF phase), with the listings it started.
pub(crate) fn select_in(
    btf: &KernelBtf,
    pending: Option<listings::Pending>,
    btf_time: Duration,
    patterns: &[Pattern],
    excludes: &[Pattern],
    opts: SelectOptions,
) -> Result<Selection, SelectError> {
    if patterns.is_empty() {
        return Err(SelectError::NoPatterns);
    }
    // A pattern given again selects nothing more: each is matched once,
    // however often a list repeats it (every glob is tried on every
    // function, and every exact name builds its record).
    let patterns = first_of_each(patterns);
    let excludes = first_of_each(excludes);
    let mut phase = Instant::now();
    let mut phases = Vec::new();
    let mut spent = btf_time;
    let mut lap = |name: &'static str| {
        phases.push((name, phase.elapsed() + spent));
        spent = Duration::ZERO;
        phase = Instant::now();
    };
    let mut btfs = KernelBtfs::borrow_vmlinux(btf)?;
    // Module BTF is loaded only where a pattern may reach into modules.
    let modules = KernelBtfs::module_names();
    for p in &patterns {
        match &p.scope {
            Some(Scope::Module(m)) => {
                if !modules.contains(m) {
                    return Err(SelectError::NoModule(m.clone()));
                }
                btfs.load_module(m)?;
            }
            None if !p.is_exact() => {
                for m in &modules {
                    btfs.load_module(m)?;
                }
            }
            _ => {}
        }
    }

    lap("BTF");
    let excluded = |scope: &Scope, name: &str| excludes.iter().any(|x| x.matches(scope, name));
    let mut exact: Vec<Func> = Vec::new();
    let mut exact_dropped: Vec<Dropped> = Vec::new();
    let mut candidates: Vec<Candidate> = Vec::new();
    let exact_count = patterns.iter().filter(|p| p.is_exact()).count();
    let index = (exact_count >= EXACT_INDEX_FROM).then(|| btfs.vmlinux().func_index());
    for p in patterns.iter().filter(|p| p.is_exact()) {
        match find_exact(&mut btfs, &modules, p, index.as_ref(), opts)? {
            Ok(f) if !excluded(&f.scope, &f.name) => exact.push(f),
            Ok(_) => {}
            Err(d) if !excluded(&d.scope, &d.name) => exact_dropped.push(d),
            Err(_) => {}
        }
    }
    let globs: Vec<&Pattern> = patterns.iter().copied().filter(|p| !p.is_exact()).collect();
    let mut glob_hits = vec![0usize; globs.len()];
    for obj in btfs.objects() {
        obj.for_each_func(|id, name| {
            let mut hit = false;
            for (i, g) in globs.iter().enumerate() {
                if g.matches(&obj.scope, name) {
                    glob_hits[i] += 1;
                    hit = true;
                }
            }
            if hit && !excluded(&obj.scope, name) {
                candidates.push(Candidate {
                    scope: obj.scope.clone(),
                    name: name.to_string(),
                    btf_id: id,
                    // Filled below for the functions the listings keep.
                    proto: Err(String::new()),
                });
            }
        });
    }
    if let Some(i) = glob_hits.iter().position(|&n| n == 0) {
        return Err(SelectError::NoMatch(globs[i].to_string()));
    }

    lap("match");
    let mut sel = Selection::default();
    if let (false, Some(pending)) = (candidates.is_empty(), pending) {
        let texts = pending.wait()?;
        lap("waiting for listings");
        let index = listings::Index::new(candidates.iter().map(|c| (&c.scope, c.name.as_str())));
        let seen = listings::count(&texts, &index);
        drop(index);
        sel.read_listings = true;
        lap("counting");
        // Prototypes only where classify() will look at them.
        for obj in btfs.objects() {
            for (c, s) in candidates.iter_mut().zip(&seen) {
                if c.scope == obj.scope && s.ftrace == 1 && s.kallsyms <= 1 {
                    if let Some(p) = obj.func_proto(c.btf_id) {
                        c.proto = p;
                    }
                }
            }
        }
        lap("prototypes");
        sel.listing_times = [
            ("reading available_filter_functions", texts.ftrace_time),
            ("reading kallsyms", texts.kallsyms_time),
        ];
        let (kept, dropped) = classify(candidates, &seen, opts);
        sel.funcs = kept;
        sel.dropped = dropped;
    }
    merge_exact(&mut sel.funcs, exact);
    // A name both globbed and given exactly is dropped once, as exact.
    sel.dropped.retain(|d| {
        !exact_dropped
            .iter()
            .any(|e| e.scope == d.scope && e.name == d.name)
    });
    sel.dropped.extend(exact_dropped);
    lap("classify");
    sel.phases = phases;
    if sel.funcs.is_empty() {
        return Err(SelectError::AllDropped {
            dropped: sel.dropped,
        });
    }
    Ok(sel)
}

/// A glob hit before the listings are consulted.
#[derive(Clone, Debug)]
pub struct Candidate {
    pub scope: Scope,
    pub name: String,
    pub btf_id: u32,
    pub proto: Result<Proto, String>,
}

/// The FUNC a pattern names exactly: `Ok(Ok(func))`, `Ok(Err(dropped))`
/// when it exists but cannot be traced, an error when no BTF has it.
/// `index` maps vmlinux FUNC names to ids (when there are many names).
fn find_exact(
    btfs: &mut KernelBtfs<'_>,
    modules: &[String],
    p: &Pattern,
    index: Option<&HashMap<String, u32>>,
    opts: SelectOptions,
) -> Result<Result<Func, Dropped>, SelectError> {
    let scopes: Vec<Scope> = match &p.scope {
        Some(s) => vec![s.clone()],
        None => std::iter::once(Scope::Vmlinux)
            .chain(modules.iter().map(|m| Scope::Module(m.clone())))
            .collect(),
    };
    for scope in scopes {
        if let Scope::Module(m) = &scope {
            btfs.load_module(m)?;
        }
        let Some(obj) = btfs.get(&scope) else {
            continue;
        };
        let id = match (&scope, index) {
            (Scope::Vmlinux, Some(ix)) => ix.get(&p.name).copied(),
            _ => obj.find_func(&p.name),
        };
        let Some(f) = id.and_then(|id| obj.func(id)) else {
            continue;
        };
        let dropped = |reason| Dropped {
            scope: scope.clone(),
            name: f.name.clone(),
            reason,
            exact: true,
        };
        let proto = match f.proto.clone() {
            Ok(p) => p,
            Err(why) => return Ok(Err(dropped(DropReason::NotTraceable(why)))),
        };
        if DENIED.contains(&f.name.as_str()) {
            return Ok(Err(dropped(DropReason::Denied)));
        }
        if REENTERS.contains(&f.name.as_str()) {
            return Ok(Err(dropped(DropReason::Reenters)));
        }
        if opts.needs_exit && NO_RETURN.contains(&f.name.as_str()) {
            return Ok(Err(dropped(DropReason::NoReturn)));
        }
        if opts.calls_with_slots && proto.struct_args_on_stack() {
            return Ok(Err(dropped(DropReason::StructArgsOnStack)));
        }
        return Ok(Ok(Func {
            scope,
            name: f.name,
            btf_id: f.id,
            proto,
            exact: true,
            addr: None,
        }));
    }
    Err(SelectError::Unknown(p.to_string()))
}

/// Keeps what ftrace can attach unambiguously and a trampoline can take.
/// `seen[i]` is what the listings say about `candidates[i]`.
pub fn classify(
    candidates: Vec<Candidate>,
    seen: &[Seen],
    opts: SelectOptions,
) -> (Vec<Func>, Vec<Dropped>) {
    let mut kept = Vec::new();
    let mut dropped = Vec::new();
    for (c, &s) in candidates.into_iter().zip(seen) {
        let reason = if s.ftrace == 0 {
            Some(DropReason::NotInFtrace)
        } else if s.ftrace > 1 || s.kallsyms > 1 {
            Some(DropReason::Ambiguous(s.ftrace.max(s.kallsyms)))
        } else if let Err(why) = &c.proto {
            Some(DropReason::NotTraceable(why.clone()))
        } else if DENIED.contains(&c.name.as_str()) {
            Some(DropReason::Denied)
        } else if REENTERS.contains(&c.name.as_str()) {
            Some(DropReason::Reenters)
        } else if opts.needs_exit && NO_RETURN.contains(&c.name.as_str()) {
            Some(DropReason::NoReturn)
        } else if opts.calls_with_slots && c.proto.as_ref().is_ok_and(Proto::struct_args_on_stack) {
            Some(DropReason::StructArgsOnStack)
        } else {
            None
        };
        match (reason, c.proto) {
            (None, Ok(proto)) => kept.push(Func {
                scope: c.scope,
                name: c.name,
                btf_id: c.btf_id,
                proto,
                exact: false,
                addr: s.symbol_addr(),
            }),
            (reason, proto) => dropped.push(Dropped {
                scope: c.scope,
                name: c.name,
                reason: reason
                    .unwrap_or_else(|| DropReason::NotTraceable(proto.err().unwrap_or_default())),
                exact: false,
            }),
        }
    }
    (kept, dropped)
}

/// Exact names join the glob set (marked exact); the result is sorted by
/// (scope, name) and has no duplicates.
pub fn merge_exact(funcs: &mut Vec<Func>, exact: Vec<Func>) {
    // Tens of thousands of exact names (a list from a file) are common:
    // look them up by key, not by a scan each.
    let mut at: HashMap<(Scope, String), usize> = funcs
        .iter()
        .enumerate()
        .map(|(i, f)| ((f.scope.clone(), f.name.clone()), i))
        .collect();
    for e in exact {
        match at.get(&(e.scope.clone(), e.name.clone())) {
            Some(&i) => funcs[i].exact = true,
            None => {
                at.insert((e.scope.clone(), e.name.clone()), funcs.len());
                funcs.push(e);
            }
        }
    }
    funcs.sort_by(|a, b| (&a.scope, &a.name).cmp(&(&b.scope, &b.name)));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::btf::{Param, ValueKind};

    #[test]
    fn repeated_patterns_count_once_in_order() {
        let p: Vec<Pattern> = ["vfs_*", "ksys_read", "vfs_*", "m:f*", "ksys_read", "vfs_*"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        let once: Vec<String> = first_of_each(&p).iter().map(|p| p.to_string()).collect();
        assert_eq!(once, ["vfs_*", "ksys_read", "m:f*"]);
    }

    fn proto(n: usize) -> Proto {
        Proto {
            params: (0..n)
                .map(|i| Param {
                    name: format!("a{i}"),
                    kind: ValueKind::Unsigned(64),
                    slots: 1,
                    format: Default::default(),
                })
                .collect(),
            ret: ValueKind::Signed(32),
            ret_format: Default::default(),
        }
    }

    fn cand(name: &str, p: Result<Proto, String>) -> Candidate {
        Candidate {
            scope: Scope::Vmlinux,
            name: name.into(),
            btf_id: name.len() as u32,
            proto: p,
        }
    }

    /// What the listings say about each of `c`, from (name, ftrace, kallsyms)
    /// entries; a candidate without an entry is in neither listing.
    fn seen(c: &[Candidate], entries: &[(&str, u32, u32)]) -> Vec<Seen> {
        c.iter()
            .map(|c| {
                entries.iter().find(|e| e.0 == c.name).map_or_else(
                    Seen::default,
                    |&(_, ftrace, kallsyms)| Seen {
                        ftrace,
                        ftrace_addr: Some(0x1004),
                        kallsyms,
                        ksym_addr: Some(0x1000),
                    },
                )
            })
            .collect()
    }

    #[test]
    fn drops_with_reasons() {
        let c = vec![
            cand("ok", Ok(proto(2))),
            cand("notrace", Ok(proto(1))),
            cand("dup_ftrace", Ok(proto(1))),
            cand("dup_ksym", Ok(proto(1))),
            cand("varargs", Err("variadic".into())),
            cand("migrate_disable", Ok(proto(0))),
            cand("rcu_read_unlock_special", Ok(proto(0))),
            cand("do_exit", Ok(proto(1))),
        ];
        let s = seen(
            &c,
            &[
                ("ok", 1, 1),
                ("dup_ftrace", 2, 2),
                ("dup_ksym", 1, 3),
                ("varargs", 1, 1),
                ("migrate_disable", 1, 1),
                ("rcu_read_unlock_special", 1, 1),
                ("do_exit", 1, 1),
            ],
        );
        let (kept, dropped) = classify(c.clone(), &s, SelectOptions::default());
        let names: Vec<_> = kept.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["ok", "do_exit"]);
        assert_eq!(kept[0].addr, Some(0x1000));
        let why: HashMap<_, _> = dropped
            .iter()
            .map(|d| (d.name.as_str(), d.reason.clone()))
            .collect();
        assert_eq!(why["notrace"], DropReason::NotInFtrace);
        assert_eq!(why["dup_ftrace"], DropReason::Ambiguous(2));
        assert_eq!(why["dup_ksym"], DropReason::Ambiguous(3));
        assert_eq!(why["varargs"], DropReason::NotTraceable("variadic".into()));
        assert_eq!(why["migrate_disable"], DropReason::Denied);
        assert_eq!(why["rcu_read_unlock_special"], DropReason::Reenters);

        // An exit probe cannot go on a function that never returns.
        let (kept, dropped) = classify(
            c,
            &s,
            SelectOptions {
                needs_exit: true,
                ..Default::default()
            },
        );
        assert_eq!(kept.len(), 1);
        assert!(dropped
            .iter()
            .any(|d| d.name == "do_exit" && d.reason == DropReason::NoReturn));
    }

    /// `n` one-slot arguments after one struct of 16 bytes passed by value.
    fn proto_with_struct(n: usize) -> Proto {
        let mut p = proto(n);
        p.params.insert(
            0,
            Param {
                name: "optval".into(),
                kind: ValueKind::Aggregate,
                slots: 2,
                format: Default::default(),
            },
        );
        p
    }

    #[test]
    fn struct_args_past_six_slots_drop_only_where_the_engine_calls() {
        // sockptr_t (16 bytes) + 4 others = 6 slots: fits; + 5 others = 7: does not.
        let c = vec![
            cand("fits", Ok(proto_with_struct(4))),
            cand("spills", Ok(proto_with_struct(5))),
            cand("plain", Ok(proto(12))),
        ];
        let s = seen(&c, &[("fits", 1, 1), ("spills", 1, 1), ("plain", 1, 1)]);
        let (kept, _) = classify(
            c.clone(),
            &s,
            SelectOptions {
                needs_exit: true,
                ..Default::default()
            },
        );
        assert_eq!(kept.len(), 3, "upstream's trampolines take them all");
        let opts = SelectOptions {
            needs_exit: true,
            calls_with_slots: true,
        };
        let (kept, dropped) = classify(c, &s, opts);
        let names: Vec<_> = kept.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["fits", "plain"]);
        assert_eq!(dropped.len(), 1);
        assert_eq!(dropped[0].name, "spills");
        assert_eq!(dropped[0].reason, DropReason::StructArgsOnStack);
        assert!(dropped[0].reason.to_string().contains("global trampoline"));
    }

    #[test]
    fn exact_names_merge_sorted_without_duplicates() {
        let f = |scope: Scope, name: &str, exact| Func {
            scope,
            name: name.into(),
            btf_id: 1,
            proto: proto(1),
            exact,
            addr: None,
        };
        let mut funcs = vec![
            f(Scope::Vmlinux, "vfs_write", false),
            f(Scope::Vmlinux, "vfs_read", false),
        ];
        merge_exact(
            &mut funcs,
            vec![
                f(Scope::Vmlinux, "vfs_read", true),
                f(Scope::Module("m".into()), "a", true),
                f(Scope::Vmlinux, "ksys_read", true),
            ],
        );
        let got: Vec<_> = funcs.iter().map(|f| (f.display_name(), f.exact)).collect();
        assert_eq!(
            got,
            [
                ("ksys_read".to_string(), true),
                ("vfs_read".to_string(), true),
                ("vfs_write".to_string(), false),
                ("m:a".to_string(), true),
            ]
        );
    }

    #[test]
    fn drop_summary_groups_reasons() {
        let sel = Selection {
            funcs: vec![],
            dropped: vec![
                Dropped {
                    scope: Scope::Vmlinux,
                    name: "a".into(),
                    reason: DropReason::Ambiguous(2),
                    exact: false,
                },
                Dropped {
                    scope: Scope::Vmlinux,
                    name: "b".into(),
                    reason: DropReason::Ambiguous(3),
                    exact: false,
                },
                Dropped {
                    scope: Scope::Vmlinux,
                    name: "c".into(),
                    reason: DropReason::NotInFtrace,
                    exact: false,
                },
            ],
            read_listings: true,
            phases: vec![],
            listing_times: Default::default(),
        };
        let s = sel.drop_summary();
        assert_eq!(s["name shared by several kernel functions"], 2);
        assert_eq!(s.len(), 2);
    }
}
