//! One fentry program per function (plus one fexit when the exit side is
//! needed), every kernel with trampolines (5.5+). This is what bpftrace and
//! retsnoop do for fentry, and it is slow: a verifier run and a trampoline
//! update per function. Loads and attaches run on several threads (the
//! verifier work spreads over CPUs, trampoline updates serialize in the
//! kernel anyway). A function the kernel refuses is dropped, not fatal.
//! Functions are taken in an order that starts with a sample spread over
//! the whole set, so a kernel that refuses everything is told apart from a
//! list that starts with refused names.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use libbpf_rs::libbpf_sys;

use super::{
    is_fatal, nothing_attaches, spread_sample, At, AttachError, Breakdown, Control, Engine,
    EngineKind, Refused, Targets,
};
use crate::sys::bpf;
use crate::trace::btf::module_btf_fd;
use crate::trace::pattern::Scope;
use crate::trace::program::{Entry, TraceObject};
use crate::trace::select::KernelRefusal;

/// Programs and links of one function: links first so they close first.
struct Attached {
    _links: Vec<OwnedFd>,
    progs: Vec<OwnedFd>,
}

pub struct FentryEach {
    attached: Vec<Attached>,
    breakdown: Breakdown,
}

impl FentryEach {
    pub fn new() -> Self {
        Self {
            attached: Vec::new(),
            breakdown: Breakdown::default(),
        }
    }
}

/// Closes every function's links and programs on worker threads, calling
/// `progress(1)` per function: a per-function trampoline update each, which
/// overlap in part in the kernel (RCU waits), so this beats one thread.
fn close_all(attached: Vec<Attached>, progress: &(dyn Fn(usize) + Sync)) {
    let queue = Mutex::new(attached);
    std::thread::scope(|s| {
        for _ in 0..workers() {
            s.spawn(|| loop {
                // A poisoned lock only means another closer panicked.
                let next = queue.lock().unwrap_or_else(|p| p.into_inner()).pop();
                let Some(a) = next else { return };
                drop(a);
                progress(1);
            });
        }
    });
}

fn workers() -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    (cpus * 2).clamp(2, 16)
}

/// Nanoseconds spent loading and linking, summed over the workers.
#[derive(Default)]
struct Clocks {
    loads: AtomicUsize,
    load_ns: AtomicU64,
    link_ns: AtomicU64,
}

impl Clocks {
    fn add(&self, which: &AtomicU64, since: Instant) {
        which.fetch_add(since.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }
}

fn attach_one(
    obj: &TraceObject,
    t: &Targets<'_>,
    i: usize,
    btf_fd: Option<BorrowedFd<'_>>,
    clocks: &Clocks,
) -> Result<Attached, io::Error> {
    let f = &t.funcs[i];
    let kinds = kinds(t);
    let mut progs = Vec::new();
    for (entry, attach_type) in &kinds {
        let t0 = Instant::now();
        clocks.loads.fetch_add(1, Ordering::Relaxed);
        let prog = obj
            .load_prog(*entry, *attach_type, btf_fd, f.btf_id)
            .map_err(|e| match e.errno() {
                Some(errno) => io::Error::new(
                    io::Error::from_raw_os_error(errno).kind(),
                    LoadFailed(errno, e.to_string()),
                ),
                None => io::Error::other(e.to_string()),
            });
        clocks.add(&clocks.load_ns, t0);
        progs.push(prog?);
    }
    // Exit first, entry last, so every entry recorded has its exit; the
    // links are kept entry first, which is the order they close in.
    let mut links = Vec::with_capacity(progs.len());
    for (prog, (_, attach_type)) in progs.iter().zip(&kinds).rev() {
        let t0 = Instant::now();
        let link = bpf::link_create_tracing(prog.as_raw_fd(), *attach_type, t.cookies[i]);
        clocks.add(&clocks.link_ns, t0);
        links.push(link?);
    }
    links.reverse();
    Ok(Attached {
        _links: links,
        progs,
    })
}

/// (entry point, attach type) of each program a function gets.
fn kinds(t: &Targets<'_>) -> Vec<(Entry, u32)> {
    if t.inject {
        return vec![(Entry::FmodRet, libbpf_sys::BPF_MODIFY_RETURN)];
    }
    let mut kinds = vec![(Entry::Fentry, libbpf_sys::BPF_TRACE_FENTRY)];
    if t.exit.needed() {
        kinds.push((Entry::Fexit, libbpf_sys::BPF_TRACE_FEXIT));
    }
    kinds
}

/// A load error that keeps its errno for the fatal check.
#[derive(Debug)]
struct LoadFailed(i32, String);

impl std::fmt::Display for LoadFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.1)
    }
}

impl std::error::Error for LoadFailed {}

fn errno_of(e: &io::Error) -> Option<i32> {
    e.raw_os_error().or_else(|| {
        e.get_ref()
            .and_then(|inner| inner.downcast_ref::<LoadFailed>())
            .map(|l| l.0)
    })
}

/// Raises RLIMIT_NOFILE to at least `want`, the hard limit too when the
/// process may (CAP_SYS_RESOURCE: root's hard limit is often 4096).
fn raise_nofile(want: usize) -> Result<(), AttachError> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit on a local struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return Err(io::Error::last_os_error()).at("getrlimit(RLIMIT_NOFILE)");
        }
        if lim.rlim_cur >= want as libc::rlim_t {
            return Ok(());
        }
        let hard = lim.rlim_max;
        lim.rlim_cur = want as libc::rlim_t;
        lim.rlim_max = lim.rlim_max.max(lim.rlim_cur);
        if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
            let e = io::Error::last_os_error();
            if hard < want as libc::rlim_t {
                return Err(io::Error::new(
                    e.kind(),
                    format!(
                        "fentry-each needs {want} file descriptors, the hard limit is {hard} \
                         and raising it failed ({e}; raise it with ulimit -Hn, or use another \
                         engine)"
                    ),
                )
                .into());
            }
            return Err(e).at("setrlimit(RLIMIT_NOFILE)");
        }
    }
    Ok(())
}

impl Engine for FentryEach {
    fn kind(&self) -> EngineKind {
        EngineKind::FentryEach
    }

    fn probe_programs(
        &self,
        obj: &TraceObject,
        t: &Targets<'_>,
    ) -> Result<Vec<OwnedFd>, AttachError> {
        super::probe_load(obj, &kinds(t), t, true, true)
    }

    fn attach(
        &mut self,
        obj: &TraceObject,
        t: &Targets<'_>,
        ctl: Control<'_>,
    ) -> Result<Vec<Refused>, AttachError> {
        let mut module_fds: HashMap<&Scope, OwnedFd> = HashMap::new();
        for f in t.funcs {
            if let Scope::Module(m) = &f.scope {
                if !module_fds.contains_key(&f.scope) {
                    let fd = module_btf_fd(m).at_with(|| format!("finding BTF of module {m}"))?;
                    module_fds.insert(&f.scope, fd);
                }
            }
        }
        // Two descriptors (program, link) per program: far past the usual
        // soft limit of 1024 for a few thousand functions.
        let per_func = if t.exit.needed() { 4 } else { 2 };
        raise_nofile(t.funcs.len() * per_func + 256)?;
        let all: Vec<usize> = (0..t.funcs.len()).collect();
        let first = spread_sample(&all);
        let order: Vec<usize> = first
            .iter()
            .copied()
            .chain(all.iter().copied().filter(|i| !first.contains(i)))
            .collect();
        let clocks = Clocks::default();
        let next = AtomicUsize::new(0);
        let ok_count = AtomicUsize::new(0);
        let stop = AtomicBool::new(false);
        let fatal: Mutex<Option<io::Error>> = Mutex::new(None);
        let results: Mutex<Vec<(usize, Result<Attached, io::Error>)>> =
            Mutex::new(Vec::with_capacity(t.funcs.len()));
        std::thread::scope(|s| {
            for _ in 0..workers().min(t.funcs.len()) {
                s.spawn(|| loop {
                    if stop.load(Ordering::Relaxed) || ctl.cancelled() {
                        return;
                    }
                    let Some(&i) = order.get(next.fetch_add(1, Ordering::Relaxed)) else {
                        return;
                    };
                    let btf_fd = module_fds.get(&t.funcs[i].scope).map(|f| f.as_fd());
                    let r = attach_one(obj, t, i, btf_fd, &clocks);
                    match &r {
                        Ok(_) => {
                            ok_count.fetch_add(1, Ordering::Relaxed);
                            (ctl.progress)(1);
                        }
                        Err(e) => {
                            let errno = errno_of(e).map(io::Error::from_raw_os_error);
                            let failed = results.lock().map_or(0, |r| r.len()) + 1;
                            if errno.as_ref().is_some_and(is_fatal)
                                || nothing_attaches(ok_count.load(Ordering::Relaxed), failed)
                            {
                                stop.store(true, Ordering::Relaxed);
                                if let Ok(mut f) = fatal.lock() {
                                    f.get_or_insert_with(|| {
                                        io::Error::new(
                                            e.kind(),
                                            format!("{} ({e})", t.funcs[i].display_name()),
                                        )
                                    });
                                }
                            }
                        }
                    }
                    if let Ok(mut v) = results.lock() {
                        v.push((i, r));
                    }
                });
            }
        });
        let results = results
            .into_inner()
            .map_err(|_| AttachError::Broken("a fentry-each worker panicked".into()))?;
        let fatal = fatal.into_inner().ok().flatten();
        if ctl.cancelled() || fatal.is_some() {
            // Nothing half-attached: close every link made so far.
            let made = results.into_iter().filter_map(|(_, r)| r.ok()).collect();
            close_all(made, ctl.detached);
            return Err(match fatal {
                Some(e) if !ctl.cancelled() => {
                    AttachError::Io(e).at("fentry-each: the kernel refuses fentry programs")
                }
                _ => AttachError::Interrupted,
            });
        }
        let mut refused = Vec::new();
        let mut attached = Vec::with_capacity(results.len());
        for (i, r) in results {
            match r {
                Ok(a) => attached.push(a),
                Err(e) => refused.push(Refused {
                    index: i,
                    error: KernelRefusal::of(&e, errno_of(&e)),
                }),
            }
        }
        if attached.is_empty() {
            let first = refused.first().map(|r| &r.error);
            let kind = first
                .and_then(|r| r.errno)
                .map_or(io::ErrorKind::Other, |n| {
                    io::Error::from_raw_os_error(n).kind()
                });
            let said = first.map_or(String::new(), |r| r.to_string());
            return Err(io::Error::new(
                kind,
                format!("fentry-each: the kernel refused every function ({said})"),
            )
            .into());
        }
        self.breakdown = Breakdown {
            loads: clocks.loads.into_inner(),
            load_time: Duration::from_nanos(clocks.load_ns.into_inner()),
            links: attached.iter().map(|a| a._links.len()).sum(),
            link_funcs: attached.len(),
            link_time: Duration::from_nanos(clocks.link_ns.into_inner()),
            refused_tries: refused.len(),
            refused_time: Duration::ZERO,
            split: vec![format!(
                "one program and link per function, {} workers (times summed over them)",
                workers().min(t.funcs.len())
            )],
        };
        self.attached = attached;
        Ok(refused)
    }

    fn detach(&mut self, progress: &(dyn Fn(usize) + Sync)) {
        close_all(std::mem::take(&mut self.attached), progress);
    }

    fn programs(&self) -> Vec<BorrowedFd<'_>> {
        self.attached
            .iter()
            .flat_map(|a| a.progs.iter().map(|p| p.as_fd()))
            .collect()
    }

    fn links(&self) -> usize {
        self.attached.iter().map(|a| a._links.len()).sum()
    }

    fn breakdown(&self) -> Breakdown {
        self.breakdown.clone()
    }
}
