//! Scoping as the kernel runs it: trace.bpf.c's kprobe entry point, loaded
//! as a plain kprobe program, on a uprobe of a function of this test binary
//! (these hosts take uprobes, not kprobes or trampolines), counts the calls
//! child processes make from cgroups and pid namespaces made here. The
//! helpers and the map are the same on every engine; the guest checks
//! (tests/guest/trace/check.py, `scope-*`) run them on kernel functions.
//! Skipped, saying so, where the host lacks what a case needs (BPF for us,
//! uprobe events, a cgroup v2 we may write, unshare).

use std::ffi::CString;
use std::io::{self, BufRead, BufReader, Write};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use libbpf_rs::libbpf_sys;

use super::*;
use crate::trace::events::Reader;
use crate::trace::program::{Entry, Filters, ObjectConfig, TraceObject};
use crate::trace::Error;

/// The children's body: how many calls to make (not set: the test of that
/// name does nothing).
const CALLS_ENV: &str = "BPFMUX_SCOPING_CALLS";
/// What a child says once it waits for its go.
const READY: &str = "bpfmux-scoping-worker-ready";

/// The probed function.
#[no_mangle]
#[inline(never)]
pub extern "C" fn bpfmux_scoping_probe_target(x: u64) -> u64 {
    std::hint::black_box(x.wrapping_add(1))
}

/// Not a test of its own: the body of the child processes the tests start
/// (this binary again, with `CALLS_ENV` set). Says `READY`, waits for a
/// line on standard input, then calls the probed function that often.
#[test]
fn scoping_child() {
    let Some(n) = std::env::var(CALLS_ENV)
        .ok()
        .and_then(|n| n.parse::<u64>().ok())
    else {
        return;
    };
    let mut out = io::stdout().lock();
    writeln!(out, "{READY}").unwrap();
    out.flush().unwrap();
    let mut line = String::new();
    io::stdin().lock().read_line(&mut line).unwrap();
    for i in 0..n {
        std::hint::black_box(bpfmux_scoping_probe_target(std::hint::black_box(i)));
    }
}

/// A child process of this binary, waiting for its go.
struct Worker {
    child: Child,
    stdin: Option<ChildStdin>,
    _stdout: BufReader<ChildStdout>,
}

impl Worker {
    /// `calls` calls once released; in a pid namespace of its own
    /// (unshare's, where it is process 1) if `new_pid_ns`.
    fn start(calls: u64, new_pid_ns: bool) -> io::Result<Self> {
        let exe = std::env::current_exe()?;
        let mut cmd = if new_pid_ns {
            // unshare --pid --fork (short options: library strings name
            // no `--option`, tests/no_cli_names.rs).
            let mut c = Command::new("unshare");
            c.args(["-p", "-f"]).arg(&exe);
            c
        } else {
            Command::new(&exe)
        };
        let mut child = cmd
            // The one test of that name (a filter matching no other).
            .arg("trace::scoping::kernel_tests::scoping_child")
            .env("RUST_TEST_THREADS", "1")
            .env(CALLS_ENV, calls.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let stdin = child.stdin.take();
        let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
        let mut line = String::new();
        // The harness prints its own words around the test's, on the
        // same line too.
        while !line.contains(READY) {
            line.clear();
            if stdout.read_line(&mut line)? == 0 {
                let _ = child.kill();
                let _ = child.wait();
                return Err(io::Error::other("a worker ended before it was ready"));
            }
        }
        Ok(Self {
            child,
            stdin,
            _stdout: stdout,
        })
    }

    /// Its process ID here (of `unshare`, for a worker in a namespace).
    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn move_to(&self, cgroup: &Path) -> io::Result<()> {
        std::fs::write(cgroup.join("cgroup.procs"), self.pid().to_string())
    }

    /// Its pid namespace: the one `unshare` made for its child.
    fn pid_ns(&self) -> PidNamespace {
        PidNamespace::open(Path::new(&format!(
            "/proc/{}/ns/pid_for_children",
            self.pid()
        )))
        .expect("the worker's pid namespace")
    }

    fn go(&mut self) {
        let mut stdin = self.stdin.take().expect("released once");
        stdin.write_all(b"go\n").expect("a worker waiting");
    }

    fn wait(mut self) {
        let st = self.child.wait().expect("a worker's exit");
        assert!(st.success(), "a worker failed: {st}");
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if self.stdin.is_some() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A cgroup made for a test, removed (after its tasks) on drop.
struct TempCgroup(PathBuf);

impl TempCgroup {
    fn new(path: PathBuf) -> io::Result<Self> {
        std::fs::create_dir(&path)?;
        Ok(Self(path))
    }
}

impl Drop for TempCgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// The file offset of the probed function in this binary.
fn probe_offset(exe: &Path) -> u64 {
    let addr = bpfmux_scoping_probe_target as *const () as usize as u64;
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    for line in maps.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 6 || Path::new(f[5]) != exe {
            continue;
        }
        let (start, end) = f[0].split_once('-').unwrap();
        let (start, end) = (
            u64::from_str_radix(start, 16).unwrap(),
            u64::from_str_radix(end, 16).unwrap(),
        );
        if (start..end).contains(&addr) {
            return addr - start + u64::from_str_radix(f[2], 16).unwrap();
        }
    }
    panic!("the probed function's mapping in /proc/self/maps");
}

/// A uprobe event on `exe` at `offset` running `prog` (every process).
fn attach_uprobe(prog: BorrowedFd<'_>, exe: &Path, offset: u64) -> io::Result<OwnedFd> {
    const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;
    const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;
    const PERF_EVENT_IOC_SET_BPF: libc::c_ulong = 0x4004_2408;
    let ty: u32 = std::fs::read_to_string("/sys/bus/event_source/devices/uprobe/type")?
        .trim()
        .parse()
        .map_err(io::Error::other)?;
    let path = CString::new(exe.as_os_str().as_bytes()).map_err(io::Error::other)?;
    // SAFETY: all zeros is a valid attribute set.
    let mut attr: libbpf_sys::perf_event_attr = unsafe { std::mem::zeroed() };
    attr.type_ = ty;
    attr.size = std::mem::size_of::<libbpf_sys::perf_event_attr>() as u32;
    attr.__bindgen_anon_3.config1 = path.as_ptr() as u64;
    attr.__bindgen_anon_4.config2 = offset;
    // SAFETY: a valid attribute set; the path lives through the call.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const _,
            -1,
            0,
            -1,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this descriptor.
    let ev = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    // SAFETY: ioctls on an open perf event descriptor.
    unsafe {
        if libc::ioctl(
            ev.as_raw_fd(),
            PERF_EVENT_IOC_SET_BPF as _,
            prog.as_raw_fd(),
        ) < 0
            || libc::ioctl(ev.as_raw_fd(), PERF_EVENT_IOC_ENABLE as _, 0) < 0
        {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(ev)
}

/// Why a case cannot run on this host, or its count: the calls the
/// program counted while `workers` ran with `filters`.
fn count(filters: Filters, workers: Vec<Worker>) -> Result<u64, String> {
    let cfg = ObjectConfig {
        nr_funcs: 1,
        filters,
        ..Default::default()
    };
    let obj = TraceObject::load(&cfg, &[Entry::KprobeEntry]).map_err(|e| match e {
        Error::Kernel { step, source } => format!("{step}: {source}"),
        e => panic!("{}", crate::error_text(&e)),
    })?;
    // Expected attach type 0: a kprobe (or uprobe) perf event program.
    let prog = match obj.load_prog(Entry::KprobeEntry, 0, None, 0) {
        Ok(p) => p,
        Err(e) if matches!(e.errno(), Some(libc::EPERM | libc::ENOSYS)) => {
            return Err(format!("no kprobe program for us: {e}"))
        }
        Err(e) => panic!("the verifier refused the scoping filters: {e}"),
    };
    let exe = std::env::current_exe().unwrap();
    let _link = attach_uprobe(std::os::fd::AsFd::as_fd(&prog), &exe, probe_offset(&exe))
        .map_err(|e| format!("no uprobe event: {e}"))?;
    obj.arm().unwrap();
    let mut workers = workers;
    for w in &mut workers {
        w.go();
    }
    for w in workers {
        w.wait();
    }
    obj.disarm().unwrap();
    let snap = Reader::new(1, false).unwrap().snapshot(&obj).unwrap();
    Ok(snap.stats[0].calls)
}

/// --cgroup counts the cgroup's subtree: a worker in a child cgroup and
/// one in the cgroup itself, not one in a sibling or outside;
/// --cgroup-exact only the one in the cgroup itself.
#[test]
fn cgroup_subtree_and_exact_in_the_kernel() {
    let Some(v2) = cgroup2_mount() else {
        eprintln!("skipped: cgroup v2 is not mounted here");
        return;
    };
    let base = v2.join(format!("bpfmux-scoping-{}", std::process::id()));
    let (parent, child, sibling) = match (|| {
        let parent = TempCgroup::new(base.clone())?;
        let child = TempCgroup::new(base.join("child"))?;
        let sibling = TempCgroup::new(base.with_extension("sibling"))?;
        io::Result::Ok((parent, child, sibling))
    })() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("skipped: cannot make cgroups under {}: {e}", v2.display());
            return;
        }
    };
    let workers = || {
        let w = [
            (7, Some(&child.0)),
            (3, Some(&parent.0)),
            (5, Some(&sibling.0)),
            (11, None),
        ]
        .into_iter()
        .map(|(calls, cg)| {
            let w = Worker::start(calls, false)?;
            if let Some(cg) = cg {
                w.move_to(cg)?;
            }
            Ok(w)
        })
        .collect::<io::Result<Vec<_>>>();
        w.expect("workers in their cgroups")
    };
    for (matching, want) in [(CgroupMatch::Subtree, 7 + 3), (CgroupMatch::Exact, 3)] {
        let filters = Filters {
            cgroup: Some(CgroupFilter::new(&parent.0, matching).unwrap()),
            ..Default::default()
        };
        match count(filters, workers()) {
            Ok(n) => assert_eq!(n, want, "{matching:?}: calls counted"),
            Err(why) => {
                eprintln!("skipped: {why}");
                return;
            }
        }
    }
    // The child cgroup alone, both ways.
    for matching in [CgroupMatch::Subtree, CgroupMatch::Exact] {
        let filters = Filters {
            cgroup: Some(CgroupFilter::new(&child.0, matching).unwrap()),
            ..Default::default()
        };
        assert_eq!(count(filters, workers()), Ok(7), "child, {matching:?}");
    }
    // A cgroup removed after the check is said so, not traced as nothing.
    let gone = CgroupFilter::new(&sibling.0, CgroupMatch::Subtree).unwrap();
    drop(sibling);
    let cfg = ObjectConfig {
        nr_funcs: 1,
        filters: Filters {
            cgroup: Some(gone),
            ..Default::default()
        },
        ..Default::default()
    };
    let e = TraceObject::load(&cfg, &[Entry::KprobeEntry]).err();
    assert!(
        matches!(e, Some(Error::Scoping(ScopingError::CgroupGone { .. }))),
        "{e:?}"
    );
    drop(child);
    drop(parent);
}

/// --pid-ns: process 1 of one new pid namespace counts, process 1 of
/// another and a process of ours do not; the namespace alone counts its
/// processes; our own namespace with a process ID of ours counts that one
/// (the device number as the kernel encodes it).
#[test]
fn pid_namespace_in_the_kernel() {
    let start = || {
        let a = Worker::start(7, true)?;
        let b = Worker::start(5, true)?;
        let ours = Worker::start(11, false)?;
        io::Result::Ok((a.pid_ns(), ours.pid(), vec![a, b, ours]))
    };
    let (ns, _, workers) = match start() {
        Ok(w) => w,
        Err(e) => {
            eprintln!("skipped: cannot start workers in new pid namespaces: {e}");
            return;
        }
    };
    // The namespace's process 1 is the worker's process, by its ID here.
    let here = ns.process(1).expect("process 1 of the worker's namespace");
    let status = std::fs::read_to_string(format!("/proc/{here}/status")).unwrap();
    assert_eq!(innermost_nspid(&status), Some(1));
    let filters = Filters {
        tgid: Some(1),
        pid_ns: Some(ns),
        ..Default::default()
    };
    match count(filters, workers) {
        Ok(n) => assert_eq!(n, 7, "process 1 of namespace A: calls counted"),
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    }
    let (ns, _, workers) = start().unwrap();
    let filters = Filters {
        pid_ns: Some(ns),
        ..Default::default()
    };
    assert_eq!(count(filters, workers), Ok(7), "namespace A alone");
    let (ns, _, workers) = start().unwrap();
    let filters = Filters {
        tgid: Some(2),
        pid_ns: Some(ns),
        ..Default::default()
    };
    assert_eq!(count(filters, workers), Ok(0), "process 2 of namespace A");
    let (_, ours, workers) = start().unwrap();
    let filters = Filters {
        tgid: Some(ours),
        pid_ns: Some(PidNamespace::open(Path::new("/proc/self/ns/pid")).unwrap()),
        ..Default::default()
    };
    assert_eq!(
        count(filters, workers),
        Ok(11),
        "our worker in our namespace"
    );
}

/// Both scoping tests at once, with a process and a task name too, in both
/// kprobe entry points the engines load (kprobe.multi, kprobe.session),
/// through the running kernel's verifier with their attach types (these
/// hosts load no trampoline program: the guest checks load those).
#[test]
fn scoped_programs_pass_the_verifier() {
    let Some(v2) = cgroup2_mount() else {
        eprintln!("skipped: cgroup v2 is not mounted here");
        return;
    };
    let own = PidNamespace::open(Path::new("/proc/self/ns/pid")).unwrap();
    for matching in [CgroupMatch::Subtree, CgroupMatch::Exact] {
        let cfg = ObjectConfig {
            nr_funcs: 2,
            latency: true,
            filters: Filters {
                tgid: Some(1),
                pid_ns: Some(own.clone()),
                cgroup: Some(CgroupFilter::new(&v2, matching).unwrap()),
                comm: Some("x".into()),
            },
            ..Default::default()
        };
        let entries = [
            (Entry::KprobeEntry, libbpf_sys::BPF_TRACE_KPROBE_MULTI),
            (Entry::KprobeSession, libbpf_sys::BPF_TRACE_KPROBE_SESSION),
        ];
        for (entry, attach) in entries {
            let obj = match TraceObject::load(&cfg, &[entry]) {
                Ok(o) => o,
                Err(Error::Kernel { step, source }) => {
                    eprintln!("skipped: {step}: {source}");
                    return;
                }
                Err(e) => panic!("{}", crate::error_text(&e)),
            };
            match obj.load_prog(entry, attach, None, 0) {
                Ok(_) => {}
                Err(e) if matches!(e.errno(), Some(libc::EPERM | libc::ENOSYS)) => {
                    eprintln!("skipped: no kprobe program for us: {e}");
                    return;
                }
                Err(e) => panic!("{entry:?}, {matching:?}: the verifier said {e}"),
            }
        }
    }
}
