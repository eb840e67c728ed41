//! `bpfmux trace`: count, time and capture calls of many kernel functions
//! through one program, with the best attach mechanism the kernel has. The
//! run itself is the library's (`bpfmux::trace::Session`); this is its
//! arguments, the `-c` command and the signals.

mod child;
pub(super) mod inputs;
mod signals;

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use anyhow::bail;
use bpfmux::trace::{self, output, Control, Filters, Pattern};
use bpfmux::trace::{JsonLines, LiveTable, PlainText, Report, RunOptions, SelectOptions, Session};

use crate::parse::{parse_interval, parse_seconds};
use crate::progress::AttachProgress;
use child::Child;

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

--errors keeps each thread's traced calls in flight (32 deep; deeper ones are
counted and said) and prints every chain of them that ends in an error: a call
returning -errno (functions returning a signed integer) or NULL / ERR_PTR
(functions returning a pointer), with each outer call's return value and time,
and the kernel and user stacks at the failing return; sent when the outermost
traced call returns. The summary counts the chains per error.

--graph counts, on the same call stacks, each call under its path of traced
callers and prints the tree at the end: a node per function under one chain of
callers, its calls folded (vfs_read ×5000), inclusive time and exclusive time
(less the time in traced calls it made).

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
  bpfmux trace --errors -c 'cat /nonexistent' __x64_sys_openat do_sys_openat2 path_openat
                                             the chain of calls that failed, with -ENOENT
  bpfmux trace --errors 'ext4_*' --comm tar  every failing chain of ext4 calls tar makes
  bpfmux trace --graph -c 'ls /' 'vfs_*' '__x64_sys_*' 'ext4_*'
                                             the call tree of those functions for one command
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
    /// Print every chain of traced calls that ends in an error (-errno,
    /// NULL or ERR_PTR), outermost call first, with return values, times
    /// and stacks; the summary counts them per error.
    #[arg(short = 'E', long)]
    errors: bool,
    /// Print the call tree of the traced functions at the end: calls,
    /// inclusive and exclusive time per node, repeats folded (best with -c).
    #[arg(short = 'G', long)]
    graph: bool,
    #[command(flatten)]
    which: Which,
    /// JSON lines: one object per interval (or event, or error chain), then
    /// a summary.
    #[arg(long)]
    json: bool,
    /// Rows in the live table (default: the terminal's height).
    #[arg(short = 'n', long, value_name = "N")]
    top: Option<usize>,
    /// Say which functions were dropped and why (-vv: list every one).
    #[arg(short, long, action = clap::ArgAction::Count)]
    verbose: u8,
}

/// Which calls and for how long: the options `bpfmux trace` and `bpfmux
/// inject` share.
#[derive(clap::Args)]
pub(super) struct Which {
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
    /// Run this command once attached, only its process's calls count, stop
    /// when it exits. A simple command (words, '...' "..." \ quoting,
    /// NAME=value in front) is split as sh would and exec-ed directly, found
    /// through PATH, so only its own calls count (exit 127 if not found);
    /// lists, pipelines, redirections and expansions run under /bin/sh, with
    /// a note.
    #[arg(short = 'c', long, value_name = "COMMAND")]
    command: Option<String>,
}

pub(super) fn say(lines: Vec<String>) {
    lines.iter().for_each(|l| eprintln!("{l}"));
}

/// The library's lines, with `who` in front instead of `bpfmux trace`.
fn say_as(who: &str, lines: Vec<String>) {
    say(lines
        .into_iter()
        .map(|l| match l.strip_prefix("bpfmux trace:") {
            Some(rest) => format!("{who}:{rest}"),
            None => l,
        })
        .collect());
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let engine = inputs::engine(args.engine.as_deref())?;
    let mut patterns = args.patterns.clone();
    if let Some(f) = &args.from_file {
        patterns.extend(inputs::read_pattern_file(f)?);
    }
    if patterns.is_empty() {
        bail!("no patterns given");
    }
    let (patterns, excludes) = (
        inputs::patterns(&patterns)?,
        inputs::patterns(&args.excludes)?,
    );
    let shared = Shared {
        who: "bpfmux trace",
        which: &args.which,
        verbose: args.verbose,
    };
    shared.check()?;
    if args.list {
        return list(&args, &patterns, &excludes);
    }
    // Per-call events and error chains come without interval lines.
    let intervals = !args.args && !args.errors && !args.graph;
    let opts = trace::TraceOptions {
        patterns,
        excludes,
        engine,
        latency: args.latency,
        capture: args.args,
        kstack: args.stacks,
        ustack: args.stacks,
        errors: args.errors,
        graph: args.graph,
        inject: None,
        filters: Filters::default(),
    };
    execute(&shared, opts, |out| -> Box<dyn Report> {
        if args.json {
            Box::new(JsonLines::new(out, intervals))
        } else if intervals && std::io::stdout().is_terminal() {
            Box::new(LiveTable::new(out, args.latency, args.top))
        } else {
            Box::new(PlainText::new(out, args.latency, args.top, intervals))
        }
    })
}

/// What `bpfmux trace` and `bpfmux inject` share: which calls (process,
/// task name, cgroup, or the `-c` command's process), how long, and how
/// much to say.
pub(super) struct Shared<'a> {
    /// `bpfmux trace` or `bpfmux inject`, in front of its messages.
    pub who: &'static str,
    pub which: &'a Which,
    pub verbose: u8,
}

impl Shared<'_> {
    /// The filters, checked before anything is loaded.
    pub fn check(&self) -> anyhow::Result<()> {
        let w = self.which;
        if w.command.is_some() && w.pid.is_some() {
            bail!("-c traces its own process; it cannot be combined with --pid");
        }
        if let Some(pid) = w.pid {
            inputs::check_pid(pid)?;
        }
        inputs::check_comm(w.comm.as_deref())
    }
}

/// Plans, attaches, runs until the duration, the command's end or a signal,
/// detaches and prints the summary: the run of `bpfmux trace` and `bpfmux
/// inject` (`opts.filters` comes from `shared`).
pub(super) fn execute(
    shared: &Shared<'_>,
    mut opts: trace::TraceOptions,
    report: impl FnOnce(crate::out::Stdout) -> Box<dyn Report>,
) -> anyhow::Result<()> {
    let w = shared.which;
    let cgroup_id = w.cgroup.as_deref().map(inputs::cgroup_id).transpose()?;
    signals::install()?;
    let mut child = w.command.as_deref().map(Child::spawn).transpose()?;
    opts.filters = Filters {
        tgid: w.pid.or(child.as_ref().map(|c| c.pid as u32)),
        cgroup_id,
        comm: w.comm.clone(),
    };
    let plan = trace::plan(opts)?;
    let n = plan.selection.funcs.len();
    say_as(shared.who, output::plan_lines(&plan, shared.verbose));

    let bar = AttachProgress::new(n);
    let (progress, detached) = (|k: usize| bar.inc(k), |k: usize| bar.dec(k));
    let ctl = Control {
        progress: &progress,
        cancel: &signals::STOP,
        detached: &detached,
    };
    signals::attaching(true);
    let attached = plan.attach(ctl);
    signals::attaching(false);
    bar.finish();
    let tracer = match attached {
        Ok(t) => t,
        Err(trace::Error::Interrupted(_)) => {
            // Everything attached is closed by now (Plan::attach's promise).
            drop(child);
            let sig = signals::signal();
            eprintln!(
                "{}: stopped by signal {sig} while attaching; \
                 everything attached so far was detached",
                shared.who
            );
            std::process::exit(128 + sig);
        }
        Err(e) => return Err(e.into()),
    };
    say_as(shared.who, output::attach_lines(&tracer, shared.verbose));
    if let Some(c) = child.as_mut() {
        c.release()?;
    }
    let mut report = report(crate::out::stdout());
    let interval = Duration::from_secs_f64(w.interval);
    let duration = w.duration.map(|d| Duration::from_secs_f64(d.max(0.0)));
    let mut session = Session::new(tracer, RunOptions { interval, duration });
    let mut stop = || signals::stopped() | child.as_mut().is_some_and(|c| c.exited());
    let window = session.run(&mut stop, report.as_mut());
    bar.detaching(session.tracer().nr_attached());
    session.detach(&|k| bar.dec(k));
    bar.finish();
    if let Some(e) = session.disarm_error() {
        eprintln!(
            "{}: warning: counting could not be stopped before detaching ({e}); \
             the totals include calls made while detaching",
            shared.who
        );
    }
    let mut summary = session.summary(&window?)?;
    summary.command_exit = child.as_ref().and_then(Child::exit_code);
    report.summary(&summary)?;
    say_as(shared.who, trace::report::summary_notes(&summary));
    Ok(())
}

/// `--list`: the selection only, no engine, nothing loaded.
fn list(args: &Args, patterns: &[Pattern], excludes: &[Pattern]) -> anyhow::Result<()> {
    let t0 = Instant::now();
    let needs_exit = args.latency || args.args || args.errors || args.graph;
    let sel = trace::select(patterns, excludes, SelectOptions { needs_exit })?;
    let select_time = t0.elapsed();
    let mut out = crate::out::stdout();
    for f in &sel.funcs {
        writeln!(out, "{}", f.display_name())?;
    }
    out.flush()?;
    let why = if args.verbose == 0 && !sel.dropped.is_empty() {
        " (-v: why)"
    } else {
        ""
    };
    let (k, d) = (sel.funcs.len(), sel.dropped.len());
    eprintln!("bpfmux trace: {k} functions selected, {d} dropped{why}");
    if args.verbose > 0 {
        say(output::drop_lines(&sel, args.verbose));
        say(output::select_time_lines(&sel, select_time));
    }
    Ok(())
}
