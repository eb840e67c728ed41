//! `bpfmux trace`: count, time and capture calls of many kernel functions
//! through one program, with the best attach mechanism the kernel has.

use std::ffi::CString;
use std::io::{IsTerminal, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use bpfmux::symbolize::{KernelSymbolizer, SymResult, UserSymbolizer};
use bpfmux::trace::engine::{Control, EngineKind, ExitSide, Interrupted};
use bpfmux::trace::events::{self, Event, FuncStats};
use bpfmux::trace::output;
use bpfmux::trace::pattern::Pattern;
use bpfmux::trace::program::Filters;
use bpfmux::trace::select::{self as selection, SelectOptions};
use bpfmux::trace::{self, TraceOptions, Tracer};
use serde_json::json;

use crate::cmdline::{self, NeedsShell};
use crate::input::{read_text, MAX_TEXT_FILE};
use crate::parse::{parse_interval, parse_seconds};
use crate::progress::AttachProgress;

/// Trace kernel functions: one BPF program on every function the patterns
/// match, attached with the fastest mechanism this kernel offers.
#[derive(clap::Args)]
#[command(after_help = "\
Patterns: exact names (vfs_read), globs (vfs_*, tcp_?endmsg, ext4_[rw]*),
module-qualified (nf_conntrack:nf_ct_*, vmlinux:ksys_*). Globs keep only
functions ftrace can attach and a trampoline can take, with unique names;
-v says what was dropped and why. Exact names skip that work and go to the
kernel directly. A function the kernel refuses to attach is skipped with a
warning naming it and the rest is attached (an unknown name is an error).

Counting starts once every function is attached and stops before detaching.
Ctrl-C (or SIGTERM) stops tracing, or abandons an attach in progress; either
way everything attached is detached before bpfmux exits (status 130/143 when
the attach was abandoned). A second Ctrl-C exits at once; the kernel then
detaches what is left, since nothing is pinned. -v also says where the
selection and the attach spent their time.

Engines (default: the first one the kernel accepts, by probing):
  global         this series' global trampoline (tracing_multi + BPF_F_TRACING_MULTI_GLOBAL)
  tracing-multi  upstream tracing_multi link (Linux 7.2+)
  kprobe-multi   kprobe.multi / kprobe.session link (Linux 5.18+ / 6.10+)
  fentry-each    one fentry (+fexit) program per function, loaded in parallel

Examples:
  bpfmux trace 'vfs_*'                       live call counts of every vfs_ function
  bpfmux trace 'vfs_*' -x 'vfs_fsync*' -d 10 ten seconds, without the fsync ones
  bpfmux trace --latency 'tcp_*'             per-function latency (avg, max, histograms)
  bpfmux trace --args vfs_read vfs_write     each call with arguments and return value
  bpfmux trace --stacks __x64_sys_openat --comm bash
                                             who calls it, kernel and user stacks
  bpfmux trace -c 'ls -l /' 'ksys_*' --json  trace one command, JSON lines out
  bpfmux trace --engine fentry-each 'ext4_*' force an engine (error if unavailable)
  bpfmux trace --list 'tcp_*'                the functions a pattern selects, no attach
  bpfmux trace -f funcs.txt -d 5             patterns from a file, one per line")]
pub struct Args {
    /// Functions to trace (exact names, globs, module:glob).
    #[arg(value_name = "PATTERN", required_unless_present = "from_file")]
    patterns: Vec<String>,
    /// Read more patterns from this file, one per line ('#' starts a
    /// comment; '-' reads standard input).
    #[arg(short = 'f', long, value_name = "FILE")]
    from_file: Option<std::path::PathBuf>,
    /// Print the functions the patterns select (one per line, `module:name`
    /// for modules) and exit without attaching.
    #[arg(short = 'L', long)]
    list: bool,
    /// Leave out functions matching this pattern (repeatable).
    #[arg(short = 'x', long = "exclude", value_name = "PATTERN")]
    excludes: Vec<String>,
    /// Attach mechanism (default: best available).
    #[arg(short, long, value_name = "ENGINE")]
    engine: Option<String>,
    /// Measure per-function latency (entry and exit of every call).
    #[arg(short, long)]
    latency: bool,
    /// Print every call of the exactly named functions with its arguments
    /// and return value.
    #[arg(short, long)]
    args: bool,
    /// Count kernel and user stacks per call site, print the busiest at the end.
    #[arg(short, long)]
    stacks: bool,
    /// Only calls made by this process.
    #[arg(short, long)]
    pid: Option<u32>,
    /// Only calls made by tasks with this name (comm, at most 15 bytes).
    #[arg(long)]
    comm: Option<String>,
    /// Only calls made in this cgroup v2 directory (e.g. /sys/fs/cgroup/foo).
    #[arg(long, value_name = "PATH")]
    cgroup: Option<std::path::PathBuf>,
    /// Stop after this many seconds (default: Ctrl-C, or the end of -c).
    #[arg(short, long, value_name = "SECONDS", value_parser = parse_seconds)]
    duration: Option<f64>,
    /// Seconds between updates.
    #[arg(short, long, default_value_t = 1.0, value_name = "SECONDS", value_parser = parse_interval)]
    interval: f64,
    /// Run this command once attached, trace only its process, stop when it
    /// exits. A simple command (words, '...' "..." \ quoting, NAME=value in
    /// front) is split as sh would and exec-ed directly, found through PATH,
    /// so only its own calls count (exit 127 if not found); lists, pipelines,
    /// redirections and expansions run under /bin/sh, with a note.
    #[arg(short = 'c', long, value_name = "COMMAND")]
    command: Option<String>,
    /// JSON lines: one object per interval (or event), then a summary.
    #[arg(long)]
    json: bool,
    /// Rows in the live table (default: the terminal's height).
    #[arg(short = 'n', long, value_name = "N")]
    top: Option<usize>,
    /// Say which functions were dropped and why (-vv: list every one).
    #[arg(short, long, action = clap::ArgAction::Count)]
    verbose: u8,
}

/// Set by the first SIGINT/SIGTERM/SIGHUP: stop tracing, or abandon the attach.
static STOP: AtomicBool = AtomicBool::new(false);
/// Which signal set STOP.
static STOP_SIGNAL: AtomicI32 = AtomicI32::new(0);

/// Set while attaching: a signal then gets an answer at once, since the
/// link being created can take seconds to come back.
static ATTACHING: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(sig: libc::c_int) {
    STOP_SIGNAL.store(sig, Ordering::Relaxed);
    STOP.store(true, Ordering::Relaxed);
    if ATTACHING.load(Ordering::Relaxed) {
        const MSG: &[u8] =
            b"\nbpfmux trace: stopping: the attach is abandoned and what it attached \
            is detached (a second signal exits at once)\n";
        // SAFETY: write(2) is async-signal-safe; the buffer is static.
        unsafe { libc::write(2, MSG.as_ptr() as *const libc::c_void, MSG.len()) };
    }
}

const STOP_SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// Blocks (or unblocks) the stop signals in the calling thread. The main
/// thread blocks them while attaching: it can sit for seconds in one
/// link_create, and a signal waits for its thread to leave the kernel. The
/// thread [`install_signal_handlers`] starts takes them meanwhile.
fn mask_stop_signals(block: bool) {
    // SAFETY: a local, emptied set; pthread_sigmask on the calling thread.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in STOP_SIGNALS {
            libc::sigaddset(&mut set, sig);
        }
        let how = if block {
            libc::SIG_BLOCK
        } else {
            libc::SIG_UNBLOCK
        };
        libc::pthread_sigmask(how, &set, std::ptr::null_mut());
    }
}

/// One-shot handlers (SA_RESETHAND): the first signal asks for a clean stop,
/// a second one of the same kind kills the process, and the kernel closes
/// the links with the descriptors (nothing is pinned). A thread that only
/// sleeps is there to run the handler while the main thread blocks them.
fn install_signal_handlers() -> anyhow::Result<()> {
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(|| loop {
            std::thread::park();
        })
        .context("starting the signal thread")?;
    for sig in STOP_SIGNALS {
        // SAFETY: a zeroed sigaction plus handler and flags is valid; the
        // handler only stores to atomics (async-signal-safe).
        let r = unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as libc::sighandler_t;
            sa.sa_flags = libc::SA_RESETHAND | libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut())
        };
        if r != 0 {
            return Err(std::io::Error::last_os_error()).context("installing signal handlers");
        }
    }
    Ok(())
}

/// A command forked before attaching, held at a pipe until we are ready,
/// so its own calls are all traced and only its process is.
struct Child {
    pid: libc::pid_t,
    go: Option<OwnedFd>,
    status: Option<i32>,
}

impl Child {
    fn spawn(cmd: &str) -> anyhow::Result<Self> {
        // Everything the child needs is made here, before the fork: after
        // it, the child only reads the pipe and calls execve.
        let prog = cmdline::prepare(cmd)?;
        match &prog.shell {
            None => {}
            Some(NeedsShell::List(what)) => eprintln!(
                "bpfmux trace: note: -c runs a shell list or pipeline ({what}); only the \
                 shell's own process is traced (use --comm or --cgroup for its children)"
            ),
            Some(NeedsShell::Syntax(what)) => eprintln!(
                "bpfmux trace: note: -c uses shell syntax ({what}), so {} starts the command \
                 and its own startup calls are counted too (quote the characters, or give a \
                 plain command, to count only the command's calls)",
                cmdline::SHELL
            ),
        }
        let ptrs = |v: &[CString]| -> Vec<*const libc::c_char> {
            v.iter()
                .map(|a| a.as_ptr())
                .chain(std::iter::once(std::ptr::null()))
                .collect()
        };
        let (argv, envp) = (ptrs(&prog.argv), ptrs(&prog.env));
        let script_argv = (!prog.script_argv.is_empty()).then(|| ptrs(&prog.script_argv));
        let failed = format!(
            "bpfmux trace: -c: cannot execute {}\n",
            prog.path.to_string_lossy()
        );
        let mut fds = [0; 2];
        // SAFETY: fds has room for two descriptors.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(std::io::Error::last_os_error()).context("pipe for -c");
        }
        // SAFETY: the pipe descriptors are ours.
        let (rd, wr) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: the child only calls async-signal-safe functions (close,
        // read, execve, write, _exit) before exec.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(std::io::Error::last_os_error()).context("fork for -c");
        }
        if pid == 0 {
            // SAFETY: see above; everything was prepared before fork.
            unsafe {
                libc::close(wr.as_raw_fd());
                let mut b = 0u8;
                // EOF without a byte: the tracer gave up; do not run.
                if libc::read(rd.as_raw_fd(), &mut b as *mut u8 as *mut libc::c_void, 1) != 1 {
                    libc::_exit(127);
                }
                libc::execve(prog.path.as_ptr(), argv.as_ptr(), envp.as_ptr());
                let err = *libc::__errno_location();
                // A file the kernel cannot run (a script without #!): the
                // shell reads it, as execvp does.
                if let (libc::ENOEXEC, Some(sa)) = (err, &script_argv) {
                    libc::execve(sa[0], sa.as_ptr(), envp.as_ptr());
                }
                // Only if the file changed since the lookup.
                libc::write(2, failed.as_ptr() as *const libc::c_void, failed.len());
                libc::_exit(if err == libc::ENOENT { 127 } else { 126 });
            }
        }
        drop(rd);
        Ok(Self {
            pid,
            go: Some(wr),
            status: None,
        })
    }

    fn release(&mut self) -> anyhow::Result<()> {
        if let Some(w) = self.go.take() {
            // SAFETY: valid descriptor, one byte from a valid buffer.
            let n = unsafe { libc::write(w.as_raw_fd(), b"g".as_ptr() as *const libc::c_void, 1) };
            if n != 1 {
                return Err(std::io::Error::last_os_error()).context("starting the -c command");
            }
        }
        Ok(())
    }

    fn exited(&mut self) -> bool {
        if self.status.is_some() {
            return true;
        }
        let mut st = 0;
        // SAFETY: our own child; WNOHANG does not block.
        let r = unsafe { libc::waitpid(self.pid, &mut st, libc::WNOHANG) };
        if r == self.pid {
            self.status = Some(st);
        }
        self.status.is_some()
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if self.status.is_none() {
            // Not started or still running on an error path: don't leave it.
            // SAFETY: signalling and reaping our own child.
            unsafe {
                libc::kill(self.pid, libc::SIGKILL);
                libc::waitpid(self.pid, std::ptr::null_mut(), 0);
            }
        }
    }
}

fn parse_patterns(v: &[String]) -> anyhow::Result<Vec<Pattern>> {
    v.iter()
        .map(|s| s.parse::<Pattern>().map_err(anyhow::Error::from))
        .collect()
}

/// Patterns of a file (or stdin for "-"): one per line, '#' comments; a
/// line repeated is kept once (a list may repeat names a million times).
fn read_pattern_file(path: &std::path::Path) -> anyhow::Result<Vec<String>> {
    let text = read_text(path, MAX_TEXT_FILE).context("reading patterns")?;
    let mut seen = std::collections::HashSet::new();
    Ok(text
        .lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty() && seen.insert(*l))
        .map(str::to_string)
        .collect())
}

fn terminal_rows() -> usize {
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ fills a winsize.
    let r = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut ws) };
    if r == 0 && ws.ws_row > 4 {
        ws.ws_row as usize - 4
    } else {
        20
    }
}

fn clock() -> String {
    let mut t: libc::time_t = 0;
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: time and localtime_r write into our locals.
    unsafe {
        libc::time(&mut t);
        libc::localtime_r(&t, &mut tm);
    }
    format!("{:02}:{:02}:{:02}", tm.tm_hour, tm.tm_min, tm.tm_sec)
}

/// The cgroup v2 id of a cgroup directory: the inode number of it.
fn cgroup_id(p: &std::path::Path) -> anyhow::Result<u64> {
    const CGROUP2_SUPER_MAGIC: libc::c_long = 0x6367_7270;
    let meta = std::fs::metadata(p).with_context(|| format!("--cgroup {}", p.display()))?;
    let c = CString::new(p.as_os_str().as_encoded_bytes())?;
    // SAFETY: statfs fills the zeroed struct from a NUL-terminated path.
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    let on_cgroup2 = unsafe { libc::statfs(c.as_ptr(), &mut fs) } == 0
        && fs.f_type as libc::c_long == CGROUP2_SUPER_MAGIC;
    if !meta.is_dir() || !on_cgroup2 {
        bail!(
            "--cgroup {}: not a cgroup v2 directory (e.g. /sys/fs/cgroup/system.slice)",
            p.display()
        );
    }
    Ok(meta.ino())
}

/// `--pid`: a running process, by its process ID (the BPF filter compares
/// the thread group ID; 0 there means no filter at all).
fn check_pid(pid: u32) -> anyhow::Result<()> {
    if pid == 0 {
        bail!("--pid 0 is not a process (omit --pid to trace every process)");
    }
    let status = match std::fs::read_to_string(format!("/proc/{pid}/status")) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!("--pid {pid}: no such process")
        }
        Err(e) => return Err(e).with_context(|| format!("--pid {pid}: reading its status")),
    };
    let tgid = status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse::<u32>().ok());
    match tgid {
        Some(t) if t != pid => {
            bail!("--pid {pid} is a thread of process {t}; --pid takes a process ID (--pid {t})")
        }
        _ => Ok(()),
    }
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if args.command.is_some() && args.pid.is_some() {
        bail!("-c traces its own process; it cannot be combined with --pid");
    }
    let engine = args
        .engine
        .as_deref()
        .map(|e| e.parse::<EngineKind>().map_err(anyhow::Error::msg))
        .transpose()?;
    let cgroup_id = args.cgroup.as_deref().map(cgroup_id).transpose()?;
    if let Some(pid) = args.pid {
        check_pid(pid)?;
    }
    match args.comm.as_deref() {
        Some("") => bail!("--comm: empty task name (omit --comm to trace every task)"),
        Some(c) if c.len() > 15 => bail!("--comm: a task name has at most 15 bytes"),
        _ => {}
    }
    let mut patterns = args.patterns.clone();
    if let Some(f) = &args.from_file {
        patterns.extend(read_pattern_file(f)?);
    }
    if patterns.is_empty() {
        bail!("no patterns given");
    }
    if args.list {
        return list(&args, &patterns);
    }
    install_signal_handlers()?;
    let mut child = args.command.as_deref().map(Child::spawn).transpose()?;
    let opts = TraceOptions {
        patterns: parse_patterns(&patterns)?,
        excludes: parse_patterns(&args.excludes)?,
        engine,
        latency: args.latency,
        capture: args.args,
        kstack: args.stacks,
        ustack: args.stacks,
        filters: Filters {
            tgid: args.pid.or(child.as_ref().map(|c| c.pid as u32)),
            cgroup_id,
            comm: args.comm.clone(),
        },
    };

    let plan = trace::plan(opts)?;
    let sel = &plan.selection;
    let n = sel.funcs.len();
    eprintln!(
        "bpfmux trace: {n} function{} with engine {}{}",
        if n == 1 { "" } else { "s" },
        plan.engine,
        if sel.dropped.is_empty() {
            String::new()
        } else {
            format!(
                ", {} dropped{}",
                sel.dropped.len(),
                if args.verbose == 0 { " (-v: why)" } else { "" }
            )
        }
    );
    if args.verbose > 0 {
        for (k, why) in &plan.skipped_engines {
            eprintln!("  engine {k} not used: {why}");
        }
        match plan.exit {
            ExitSide::None => {}
            ExitSide::Session => {
                eprintln!("  exits: one session program (entry and exit paired by the kernel)")
            }
            ExitSide::Pair => eprintln!(
                "  exits: separate entry and exit programs (paired by per-thread call stacks)"
            ),
        }
        report_drops(&sel.dropped, args.verbose);
        report_select_time(sel, plan.select_time);
    }

    let bar = AttachProgress::new(n);
    let progress = |k: usize| bar.inc(k);
    let detached = |k: usize| bar.dec(k);
    let ctl = Control {
        progress: &progress,
        cancel: &STOP,
        detached: &detached,
    };
    ATTACHING.store(true, Ordering::Relaxed);
    mask_stop_signals(true);
    let attached = plan.attach(ctl);
    mask_stop_signals(false);
    ATTACHING.store(false, Ordering::Relaxed);
    let mut tracer = match attached {
        Ok(t) => t,
        Err(e) if e.chain().any(|c| c.is::<Interrupted>()) => {
            // Everything attached is closed by now (Plan::attach's promise).
            bar.finish();
            drop(child);
            let sig = STOP_SIGNAL.load(Ordering::Relaxed);
            eprintln!(
                "bpfmux trace: stopped by signal {sig} while attaching; \
                 everything attached so far was detached"
            );
            std::process::exit(128 + sig);
        }
        Err(e) => {
            bar.finish();
            return Err(e);
        }
    };
    bar.finish();
    let warnings: Vec<_> = tracer.warnings().collect();
    let shown = if args.verbose > 1 { usize::MAX } else { 10 };
    for d in warnings.iter().take(shown) {
        eprintln!(
            "bpfmux trace: warning: skipped {}: {}",
            d.display_name(),
            d.reason
        );
    }
    if warnings.len() > shown {
        eprintln!(
            "bpfmux trace: warning: ... {} more skipped (-vv lists all)",
            warnings.len() - shown
        );
    }
    eprintln!(
        "bpfmux trace: attached {} functions in {:.1} ms ({} link{}, engine {}); Ctrl-C to stop",
        tracer.nr_attached(),
        tracer.attach_time.as_secs_f64() * 1e3,
        tracer.nr_links(),
        if tracer.nr_links() == 1 { "" } else { "s" },
        tracer.engine
    );
    if args.verbose > 0 {
        report_attach_time(&tracer);
    }
    if let Some(c) = child.as_mut() {
        c.release()?;
    }
    let result = trace_loop(&args, &tracer, child.as_mut());
    bar.detaching(tracer.nr_attached());
    let detach = tracer.detach(&|k| bar.dec(k));
    bar.finish();
    if let Some(e) = &tracer.disarm_error {
        eprintln!(
            "bpfmux trace: warning: counting could not be stopped before detaching ({e}); \
             the totals include calls made while detaching"
        );
    }
    let loop_out = result?;
    summarize(&args, &tracer, detach, loop_out, child.as_ref())
}

/// `-v`: where the attach time went, the kernel's share apart from ours.
fn report_attach_time(t: &Tracer) {
    let b = &t.breakdown;
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    eprintln!(
        "  attach: maps {:.0} ms; {} program load{} {:.0} ms; {} link{} over {} functions {:.0} ms",
        ms(t.prepare_time),
        b.loads,
        if b.loads == 1 { "" } else { "s" },
        ms(b.load_time),
        b.links,
        if b.links == 1 { "" } else { "s" },
        b.link_funcs,
        ms(b.link_time),
    );
    if b.refused_tries > 0 {
        eprintln!(
            "  attach: {} link tr{} the kernel refused {:.0} ms",
            b.refused_tries,
            if b.refused_tries == 1 { "y" } else { "ies" },
            ms(b.refused_time)
        );
    }
    for why in &b.split {
        eprintln!("  links: {why}");
    }
}

/// `-v`: how long the selection took and where the time went.
fn report_select_time(sel: &selection::Selection, total: Duration) {
    let phases: Vec<String> = sel
        .phases
        .iter()
        .map(|(name, d)| format!("{name} {:.0}", d.as_secs_f64() * 1e3))
        .collect();
    eprintln!(
        "  selected in {:.1} ms ({}; ms: {})",
        total.as_secs_f64() * 1e3,
        if sel.read_listings {
            "BTF + available_filter_functions + kallsyms"
        } else {
            "exact names: BTF lookup only"
        },
        phases.join(", ")
    );
    if sel.read_listings {
        let reads: Vec<String> = sel
            .listing_times
            .iter()
            .map(|(name, d)| format!("{name} {:.0}", d.as_secs_f64() * 1e3))
            .collect();
        eprintln!("  meanwhile, on other threads (ms): {}", reads.join(", "));
    }
}

/// `--list`: the selection only, no engine, nothing loaded.
fn list(args: &Args, patterns: &[String]) -> anyhow::Result<()> {
    let t0 = Instant::now();
    let sel = selection::select(
        &parse_patterns(patterns)?,
        &parse_patterns(&args.excludes)?,
        SelectOptions {
            needs_exit: args.latency || args.args,
        },
    )?;
    let select_time = t0.elapsed();
    let mut out = crate::out::stdout();
    for f in &sel.funcs {
        writeln!(out, "{}", f.display_name())?;
    }
    out.flush()?;
    eprintln!(
        "bpfmux trace: {} functions selected, {} dropped{}",
        sel.funcs.len(),
        sel.dropped.len(),
        if args.verbose == 0 && !sel.dropped.is_empty() {
            " (-v: why)"
        } else {
            ""
        }
    );
    if args.verbose > 0 {
        report_drops(&sel.dropped, args.verbose);
        report_select_time(&sel, select_time);
    }
    Ok(())
}

fn report_drops(dropped: &[trace::select::Dropped], verbose: u8) {
    if dropped.is_empty() {
        return;
    }
    let mut summary: std::collections::BTreeMap<String, usize> = Default::default();
    for d in dropped {
        *summary.entry(reason_kind(&d.reason)).or_default() += 1;
    }
    for (why, k) in summary {
        eprintln!("  dropped {k}: {why}");
    }
    let limit = if verbose > 1 { usize::MAX } else { 20 };
    for d in dropped.iter().take(limit) {
        eprintln!("    {}:{}: {}", d.scope, d.name, d.reason);
    }
    if dropped.len() > limit {
        eprintln!("    ... {} more (-vv lists all)", dropped.len() - limit);
    }
}

fn reason_kind(r: &trace::select::DropReason) -> String {
    use trace::select::DropReason::*;
    match r {
        NotTraceable(_) => "not traceable by a trampoline".into(),
        AttachRefused(_) => "refused by the kernel at attach".into(),
        Ambiguous(_) => "name shared by several kernel functions".into(),
        other => other.to_string(),
    }
}

struct LoopOut {
    elapsed: Duration,
    events: usize,
}

fn trace_loop(args: &Args, t: &Tracer, mut child: Option<&mut Child>) -> anyhow::Result<LoopOut> {
    let start = Instant::now();
    let interval = Duration::from_secs_f64(args.interval);
    let deadline = args
        .duration
        .map(|d| start + Duration::from_secs_f64(d.max(0.0)));
    let live_table = !args.json && !args.args && std::io::stdout().is_terminal();
    let mut prev: Vec<FuncStats> = vec![FuncStats::default(); t.selection.funcs.len()];
    let mut next_tick = start + interval;
    let mut last_tick = start;
    let events_seen = std::cell::Cell::new(0usize);
    let funcs = &t.selection.funcs;
    let json = args.json;
    let ring = t.event_ring(|e: Event| {
        if let Some(f) = funcs.get(e.func) {
            events_seen.set(events_seen.get() + 1);
            print_event(&e, f, json);
        }
    })?;
    loop {
        let now = Instant::now();
        let mut done = STOP.load(Ordering::Relaxed) || deadline.is_some_and(|d| now >= d);
        if let Some(c) = child.as_deref_mut() {
            done |= c.exited();
        }
        if done {
            break;
        }
        let wait = next_tick
            .min(deadline.unwrap_or(next_tick))
            .saturating_duration_since(now)
            .min(Duration::from_millis(100));
        match &ring {
            // EINTR on Ctrl-C is fine: the loop checks the flag.
            Some(r) => {
                let _ = r.poll(wait);
            }
            None => std::thread::sleep(wait),
        }
        if Instant::now() >= next_tick {
            let snap = t.snapshot()?;
            let secs = last_tick.elapsed().as_secs_f64();
            last_tick = Instant::now();
            next_tick += interval;
            let rows = output::rows(funcs, &t.attached, &prev, &snap.stats, false);
            print_interval(args, t, &rows, secs, start.elapsed(), live_table)?;
            prev = snap.stats;
        }
    }
    if let Some(r) = &ring {
        let _ = r.consume();
    }
    Ok(LoopOut {
        elapsed: start.elapsed(),
        events: events_seen.get(),
    })
}

fn print_event(e: &Event, f: &trace::select::Func, json: bool) {
    let mut out = crate::out::stdout();
    let _ = if json {
        writeln!(out, "{}", output::event_json(e, f))
    } else {
        writeln!(out, "{}", output::event_line(e, f))
    };
}

fn print_interval(
    args: &Args,
    t: &Tracer,
    rows: &[output::Row],
    secs: f64,
    elapsed: Duration,
    live_table: bool,
) -> anyhow::Result<()> {
    let mut out = crate::out::stdout();
    if args.json {
        if !args.args {
            writeln!(
                out,
                "{}",
                output::interval_json(elapsed.as_secs_f64(), secs, rows)
            )?;
        }
    } else if live_table {
        // Home + clear screen, then the table.
        write!(out, "\x1b[H\x1b[2J")?;
        writeln!(
            out,
            "bpfmux trace: {} functions, engine {}, {:.0} s",
            t.nr_attached(),
            t.engine,
            elapsed.as_secs_f64()
        )?;
        let max = args.top.unwrap_or_else(terminal_rows);
        for l in output::table(rows, secs, args.latency, max) {
            writeln!(out, "{l}")?;
        }
    } else if !args.args {
        for l in output::text_lines(&clock(), rows, args.latency) {
            writeln!(out, "{l}")?;
        }
    }
    out.flush()?;
    Ok(())
}

fn summarize(
    args: &Args,
    t: &Tracer,
    detach: Duration,
    lo: LoopOut,
    child: Option<&Child>,
) -> anyhow::Result<()> {
    let snap = t.snapshot()?;
    let zero = vec![FuncStats::default(); t.selection.funcs.len()];
    let rows = output::rows(&t.selection.funcs, &t.attached, &zero, &snap.stats, true);
    let misses = t.recursion_misses();
    let stacks = if args.stacks {
        Some(events::read_stacks(t.object())?)
    } else {
        None
    };
    let ms = |d: Duration| (d.as_secs_f64() * 1e6).round() / 1e3;
    if args.json {
        let mut v = json!({
            "type": "summary",
            "engine": t.engine,
            "exit_side": t.exit,
            "functions_attached": t.nr_attached(),
            "functions_dropped": t.selection.dropped.len(),
            "skipped": t.warnings().map(|d| json!({
                "function": d.display_name(),
                "reason": d.reason.to_string(),
            })).collect::<Vec<_>>(),
            "links": t.nr_links(),
            "select_ms": ms(t.select_time),
            "prepare_ms": ms(t.prepare_time),
            "attach_ms": ms(t.attach_time),
            "detach_ms": ms(detach),
            "attach_breakdown": {
                "program_loads": t.breakdown.loads,
                "load_ms": ms(t.breakdown.load_time),
                "links": t.breakdown.links,
                "link_functions": t.breakdown.link_funcs,
                "link_ms": ms(t.breakdown.link_time),
                "refused_tries": t.breakdown.refused_tries,
                "refused_ms": ms(t.breakdown.refused_time),
                "split": t.breakdown.split,
            },
            "elapsed_s": lo.elapsed.as_secs_f64(),
            "events": lo.events,
            "lost": {
                "events": snap.lost_events,
                "stacks": snap.lost_stacks,
                "nesting": snap.lost_depth,
                "recursion_misses": misses,
            },
            "functions": output::totals_json(&rows, snap.hist.as_deref()),
        });
        if let Some(s) = &stacks {
            v["stacks"] = stacks_json(t, s);
        }
        if let Some(st) = child.and_then(|c| c.status) {
            v["command_exit"] = json!(libc::WEXITSTATUS(st));
        }
        writeln!(crate::out::stdout(), "{v}")?;
    } else {
        let mut out = crate::out::stdout();
        writeln!(out, "\n{} functions called, totals:", rows.len())?;
        let max = args.top.unwrap_or(usize::MAX);
        for l in output::totals_table(&rows, lo.elapsed.as_secs_f64(), snap.hist.as_deref(), max) {
            writeln!(out, "{l}")?;
        }
        if let Some(h) = &snap.hist {
            for r in rows.iter().take(10) {
                writeln!(out, "\n{} latency:", r.name)?;
                for l in output::hist_lines(&h[r.index]) {
                    writeln!(out, "{l}")?;
                }
            }
        }
        if let Some(s) = &stacks {
            print_stacks(&mut out, t, s)?;
        }
    }
    eprintln!(
        "bpfmux trace: engine {}: attach {:.1} ms, detach {:.1} ms for {} functions",
        t.engine,
        ms(t.attach_time),
        ms(detach),
        t.nr_attached()
    );
    let lost = snap.lost_events + snap.lost_stacks + snap.lost_depth;
    if lost > 0 || misses > 0 {
        eprintln!(
            "bpfmux trace: not recorded: {} events, {} stacks, {} too deeply nested; \
             {} calls skipped by the kernel's recursion guard",
            snap.lost_events, snap.lost_stacks, snap.lost_depth, misses
        );
    }
    Ok(())
}

const TOP_STACKS: usize = 10;
/// Larger than any kernel function: the address is not in the symbol.
const MAX_SYMBOL_OFFSET: u64 = 1 << 20;

fn symbolize_stack(
    ksyms: Option<&KernelSymbolizer>,
    usyms: &mut UserSymbolizer,
    pid: u32,
    kernel: &[u64],
    user: &[u64],
) -> Vec<String> {
    let name = |r: &SymResult, addr: u64| match r {
        // Past the end of any real function: JIT code (BPF programs and
        // trampolines) has no kallsyms entry bpfmux reads.
        SymResult::Symbol(s) if s.offset > MAX_SYMBOL_OFFSET => format!("{addr:#x} [bpf/jit?]"),
        SymResult::Symbol(s) => format!("{}+{:#x}", s.name, s.offset),
        _ => format!("{addr:#x}"),
    };
    let mut lines = Vec::new();
    match ksyms {
        Some(k) => lines.extend(
            k.symbolize(kernel)
                .iter()
                .map(|s| format!("    {}", name(&s.result, s.addr))),
        ),
        None => lines.extend(kernel.iter().map(|a| format!("    {a:#x}"))),
    }
    if !user.is_empty() {
        lines.push("    --".into());
        match usyms.symbolize(pid, user) {
            Ok(v) => lines.extend(v.iter().map(|s| format!("    {}", name(&s.result, s.addr)))),
            // The process may be gone: addresses are all we have.
            Err(_) => lines.extend(user.iter().map(|a| format!("    {a:#x}"))),
        }
    }
    lines
}

fn print_stacks(out: &mut impl Write, t: &Tracer, s: &events::Stacks) -> anyhow::Result<()> {
    let ksyms = KernelSymbolizer::load().ok();
    let mut usyms = UserSymbolizer::default();
    writeln!(out, "\nbusiest stacks:")?;
    for (k, count) in s.counts.iter().take(TOP_STACKS) {
        let f = &t.selection.funcs[k.func];
        writeln!(out, "  {} x{} (pid {})", f.display_name(), count, k.tgid)?;
        let get = |id: Option<u32>| {
            id.and_then(|i| s.addrs.get(&i))
                .cloned()
                .unwrap_or_default()
        };
        for l in symbolize_stack(
            ksyms.as_ref(),
            &mut usyms,
            k.tgid,
            &get(k.kstack),
            &get(k.ustack),
        ) {
            writeln!(out, "{l}")?;
        }
    }
    Ok(())
}

fn stacks_json(t: &Tracer, s: &events::Stacks) -> serde_json::Value {
    let ksyms = KernelSymbolizer::load().ok();
    let mut usyms = UserSymbolizer::default();
    let v: Vec<_> = s
        .counts
        .iter()
        .take(TOP_STACKS)
        .map(|(k, count)| {
            let get = |id: Option<u32>| {
                id.and_then(|i| s.addrs.get(&i))
                    .cloned()
                    .unwrap_or_default()
            };
            let (kern, user) = (get(k.kstack), get(k.ustack));
            let frames = symbolize_stack(ksyms.as_ref(), &mut usyms, k.tgid, &kern, &user);
            json!({
                "function": t.selection.funcs[k.func].display_name(),
                "count": count,
                "pid": k.tgid,
                "frames": frames.iter().map(|l| l.trim()).collect::<Vec<_>>(),
            })
        })
        .collect();
    serde_json::Value::Array(v)
}
