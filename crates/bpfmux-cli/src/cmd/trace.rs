//! `bpfmux trace`: count, time and capture calls of many kernel functions
//! through one program, with the best attach mechanism the kernel has. The
//! run itself is the library's (`bpfmux::trace::Session`); this is its
//! arguments, the `-c` command and the signals.

mod child;
pub(super) mod exports;
pub(super) mod inputs;
mod record;
mod signals;

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::bail;
use bpfmux::trace::recorder::Trigger;
use bpfmux::trace::{self, CgroupMatch, Control, Detail, Filters, Hint, Notes, Pattern, Summary};
use bpfmux::trace::{EngineKind, SelectError, SelectOptions};
use bpfmux::trace::{JsonLines, LiveTable, PlainText, Recording, Report, RunOptions, Session};

use crate::parse::{parse_interval, parse_seconds};
use crate::progress::AttachProgress;
use child::Child;
use exports::{ExportArgs, Exports};

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

--args prints every call of the traced functions (exact names or globs, at most
256 functions: a larger set is an error naming both numbers) with every argument
and the return value, each as its BTF type says: integers with their sign and
size, enums by name, bools, pointers in hex (NULL, ERR_PTR(-EINVAL), <symbol> when
they point into kernel code), function pointers as symbols, `char *` arguments
(kernel or user memory, by the pointer) as quoted strings read at the call: at
most 2 per call, each up to --args-size bytes with its NUL (default 64; \"...\"...
when cut); a struct passed by value as its 8-byte slots. Return values print
the same way, with the errno a -4095..-1 return of a signed function carries
(-2 ENOENT), ERR_PTR(-EINVAL) or NULL for a pointer. Every engine reads all
arguments at the entry, the 7th and later (passed on the stack) too: the
trampoline engines from the program's context (up to 12 slots), kprobe-multi
from the stack above the return address; only trampoline engines read them again
at the exit (--args with a filter on ret, errno or latency).

--args-depth N (1 to 3) also prints the struct (or union) each pointer argument points
at, after the pointer, as its fields: `how=0xffff888004a1bd40 {flags=32768,
mode=0, resolve=0}`, read by the program at the call (user or kernel memory by
the pointer, as strings). Fields print by their BTF types (integers, bitfields,
enums by name, bools, pointers, char arrays as strings, embedded structs two
levels deep, arrays of scalars); N=2 and 3 follow the pointer fields of what was
read to the structs they point at, breadth first (1: the arguments' only). A call reads at most 8 structs
and --args-size bytes of them in all (default 64): a struct cut there ends in
`...`; one that cannot be read prints `(unreadable: EFAULT)`. Without
--args-depth pointers print as addresses only.

--errors keeps each thread's traced calls in flight (32 deep; deeper ones are
counted and said) and prints every chain of them that ends in an error: a call
returning -errno (functions returning a signed integer) or NULL / ERR_PTR
(functions returning a pointer), with each outer call's return value and time,
and the kernel and user stacks at the failing return; sent when the outermost
traced call returns. The summary counts the chains per error.

A NULL return is often a normal answer (nothing queued, no such entry), and BTF
says only that a function returns a pointer, not what its NULL means. So by
default (--null explained) a chain that ends in NULL is printed only when a
traced caller above it in the chain returned an errno: the NULL explains a
failure that was reported. Chains that end in NULL with no such caller are left
out and counted at the end; --null all prints them too. Chains ending in an
errno are always printed.

--record-last N (with --errors) is an error recorder for runs left on, '*'
included: instead of printing each chain it keeps the last N of each errno (the
failing call's, as the summary counts them; --record-by function: of each
failing function), and writes them out, oldest
first, each as --errors prints it, under a head line with the date and time,
what triggered the dump and the counts: on SIGUSR1 (kill -USR1 PID: bpfmux says
its PID once attached; signals between two turns of its loop, 100 ms, make one
dump), right after each chain in which a call returned a --record-on error (the
failing call, or a caller passing an error on; a frequent one makes a dump each
time), and at exit (-d, Ctrl-C, SIGTERM, the end of -c).
Memory stays bounded however long it runs: at most N chains for each of at most
1024 keys (past that, the key that failed least recently goes, counted in the
dumps), each dump saying how much it holds. Dumps go to standard output, or are
appended to --record-out FILE; with --json each is one JSON line
{\"type\":\"recorded\",...}, and the summary carries the last as \"recorded\" (on
standard output only there). The summary still counts every chain per error.

--filter EXPR records only the calls the expression passes, decided in the BPF
program before anything is counted or sent:
  values   ret, errno (-ret for a -4095..-1 return of a signed or pointer
           function, else 0), latency (with a unit: ns, us, ms, s), and an
           argument of the traced function by its BTF name (any of its 12
           argument slots, the 7th and later on the stack too: integers,
           enums, bools, pointers, `char *` strings; signed types compare
           signed)
  tests    value CMP literal (== != < <= > >=), value & MASK [CMP literal],
           or a value alone (not zero); literals: 4096, 0x80, -1, EINVAL, 1ms,
           true, false, \"a string\" (\\\" and \\\\ inside)
  strings  a `char *` argument == or != a string (equal or not), or ^= one
           (starts with): filename == \"/etc/passwd\", filename ^= \"/etc/\".
           Read in the kernel at the call (user or kernel memory, by the
           pointer, as --args does); literals of up to 63 bytes (64 compared
           with the NUL), at most 4 different ones per filter; NULL or
           unreadable equals and starts with nothing. A string compared with
           a number, a number with a string argument, < or > on strings are
           errors; a string argument alone tests it is not NULL.
  logic    !, &&, || and parentheses
Tests on arguments only are decided at the entry (every engine); with ret,
errno or latency the calls are counted, and their stacks and --args entry
events taken, when they return. An argument tested in one || or ! with ret,
errno or latency (or --args with such a filter) is read at the exit, which
kprobe-multi cannot. A function that lacks an argument the filter names never
passes (a warning names it); a name no selected function has is an error.
--min-latency DUR adds `&& latency >= DUR`. With --errors the filter chooses
the failing calls that start a chain; with --graph the calls counted under
their path (callers are shown either way). The summary says how many calls
the filter passed of those it saw. An error points at the offending token;
nothing is attached then.

--stacks counts calls per kernel and user stack. User stacks are normalized
(file and offset per frame) within 100 ms of their first call, while the
process is there, and symbolized at the end from that: a process that exited
by then is named like a live one. One that exits sooner after the call keeps
addresses (said at the end; -v gives the counts).

--graph counts, on the same call stacks, each call under its path of traced
callers and prints the tree at the end: a node per function under one chain of
callers, its calls folded (vfs_read ×5000), inclusive time and exclusive time
(less the time in traced calls it made).

--folded, --flamegraph and --pprof FILE write what --stacks or --graph counted
for other tools ('-': standard output, the usual output then not written):
folded stacks (flamegraph.pl, inferno, speedscope), a flame graph SVG, a pprof
profile (go tool pprof, Parca, Pyroscope). Of --stacks: calls per stack and
process, frames by function name, user frames outermost first, then kernel
frames, then the traced function. Of --graph: calls and exclusive time per path
of traced calls (a function's width in the flame graph, and its cum in pprof,
is its inclusive time). --chrome-trace FILE writes a timeline: a slice per call
with its arguments and return value as --args prints them, from per-call events
(as --args, at most 256 functions), the only data with a call's own time
(--latency and --graph add times up in the kernel, per function and per path).

Scoping: which tasks' calls count, decided in the kernel before anything else
(every option given must hold):
  --pid PID             one process, by its ID in the initial pid namespace
  --pid-ns NS           IDs as a pid namespace numbers them: NS is a namespace file
                        (/proc/PID/ns/pid) or a process ID whose namespace it is (a
                        container's process). --pid N --pid-ns NS: the process with ID
                        N there (bpf_get_ns_current_pid_tgid); --pid-ns alone: every
                        process whose own pid namespace it is (not those of namespaces
                        nested in it)
  --cgroup PATH         tasks of a cgroup v2 directory and of every cgroup below it (a
                        container's cgroup with its sub-cgroups; the kernel tests the
                        task's cgroup against it: bpf_current_task_under_cgroup)
  --cgroup-exact PATH   tasks of that cgroup only, none below it
  --comm NAME           tasks with that name
  -c COMMAND            the command's process
Whatever the scope, the output's process IDs (--args events, --stacks, --errors)
are those of the initial pid namespace, as the host's /proc numbers them; with
--pid and --pid-ns bpfmux says which process that is before it starts.

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
  bpfmux trace --args -c 'cat /etc/hostname' do_sys_openat2
                                             the file names cat opens, as strings
  bpfmux trace --args --args-depth 1 -c 'cat /etc/hostname' do_sys_openat2
                                             the same, with the struct open_how's fields
  bpfmux trace --args --args-depth 2 --args-size 256 vfs_read
                                             struct file's fields, and what its pointers point at
  bpfmux trace --stacks __x64_sys_openat --comm bash
                                             who calls it, kernel and user stacks
  bpfmux trace --stacks --vmlinux auto -d 5 path_openat
                                             kernel frames with file:line and inlined calls
  bpfmux trace -c 'ls -l /' 'ksys_*' --json  trace one command, JSON lines out
  bpfmux trace --errors -c 'cat /nonexistent' __x64_sys_openat do_sys_openat2 path_openat
                                             the chain of calls that failed, with -ENOENT
  bpfmux trace --errors 'ext4_*' --comm tar  every failing chain of ext4 calls tar makes
  bpfmux trace --errors --null all -d 5 '*'  every failing chain, NULL-only ones too
  bpfmux trace --errors --record-last 3 '*'  keep the last 3 chains per errno, all
                                             kernel; kill -USR1 PID prints them
  bpfmux trace --errors --record-last 5 --record-on EINVAL --record-out err.log 'vfs_*'
                                             append the last 5 per errno to err.log
                                             after each EINVAL, and at exit
  bpfmux trace --errors --record-last 1 --record-by function -d 60 'ext4_*'
                                             the latest chain of each failing function
  bpfmux trace --filter 'errno == ENOENT' -c 'cat /nope' do_sys_openat2
                                             count only the calls that fail with ENOENT
  bpfmux trace --filter 'count > 4096 && ret > 0' vfs_read vfs_write
                                             large reads and writes that succeeded
  bpfmux trace --args --filter 'filename == \"/etc/passwd\"' do_sys_openat2
                                             every open of /etc/passwd, decided in the kernel
  bpfmux trace --filter 'filename ^= \"/etc/\" && ret < 0' do_sys_openat2
                                             failed opens of files under /etc
  bpfmux trace --filter 'pgoff > 0' do_mmap  mappings at an offset (pgoff: the 7th argument)
  bpfmux trace --min-latency 10ms --latency 'ext4_*'
                                             only calls of 10 ms or more, with histograms
  bpfmux trace --errors --filter 'errno == EINVAL' 'vfs_*'
                                             only the error chains that end in EINVAL
  bpfmux trace --graph -c 'ls /' 'vfs_*' '__x64_sys_*' 'ext4_*'
                                             the call tree of those functions for one command
  bpfmux trace --stacks --flamegraph ls.svg -c 'ls -l /' __x64_sys_openat
                                             a flame graph of where ls opens files from
  bpfmux trace --stacks --folded - -d 5 vfs_read | inferno-flamegraph > read.svg
                                             folded stacks for another tool
  bpfmux trace --stacks --pprof read.pb.gz -d 10 vfs_read
                                             then: go tool pprof -top read.pb.gz
  bpfmux trace --graph --pprof ls.pb.gz -c 'ls /' 'vfs_*' '__x64_sys_*'
                                             the call tree's time, as a pprof profile
  bpfmux trace --latency --chrome-trace ls.json -c 'ls /' vfs_read vfs_getattr
                                             each call on a timeline (ui.perfetto.dev)
  bpfmux trace --cgroup /sys/fs/cgroup/system.slice/docker-ID.scope 'vfs_*'
                                             a container's calls, its sub-cgroups' too
  bpfmux trace --cgroup-exact /sys/fs/cgroup/system.slice 'vfs_*'
                                             tasks of that cgroup itself only
  bpfmux trace --pid-ns 4242 --pid 1 'tcp_*' process 1 of the pid namespace of process
                                             4242 (a container's init)
  bpfmux trace --pid-ns /proc/4242/ns/pid -d 5 'vfs_*'
                                             every process of that pid namespace
  bpfmux trace --stacks --errors --record run.jsonl.gz -c 'cat /nope' do_sys_openat2
                                             record the run; later, anywhere:
                                             bpfmux report run.jsonl.gz
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
    /// Print every call of the traced functions (at most 256) with all its
    /// arguments, formatted by their BTF types, and its return value.
    #[arg(short, long)]
    args: bool,
    /// With --args, read at most this many bytes of each `char *` argument,
    /// its NUL included, and with --args-depth of the structs of one call
    /// in all (1 to 1024, rounded up to a multiple of 8; default 64).
    #[arg(long, value_name = "BYTES", requires = "args", value_parser = clap::value_parser!(u16).range(1..=1024))]
    args_size: Option<u16>,
    /// With --args, print the structs that pointer arguments point at as
    /// their fields, read at the call: N=1 those of the arguments, 2 also
    /// those their pointer fields point at, up to 3; at most 8 structs and
    /// --args-size bytes per call (default: pointers as addresses only).
    #[arg(long, value_name = "N", requires = "args", value_parser = clap::value_parser!(u8).range(1..=3))]
    args_depth: Option<u8>,
    /// Count kernel and user stacks per call site, print the busiest at the end.
    #[arg(short, long)]
    stacks: bool,
    /// With --stacks, normalize user stacks only at the end, with the files
    /// of the processes still there then (a process gone by then shows
    /// addresses), as bpfmux did before; for comparing the two.
    #[arg(long, requires = "stacks")]
    stacks_at_end: bool,
    /// With --stacks or --errors: kernel frames with file:line and the
    /// calls inlined there, from the running kernel's vmlinux with DWARF
    /// (PATH, or 'auto': where distributions and kernel builds put it; see
    /// bpfmux sym --help). Recordings keep names only.
    #[arg(long, value_name = "PATH|auto")]
    vmlinux: Option<String>,
    /// With --stacks or --errors: ask no debuginfod server for the debug
    /// files of user frames' binaries that have no DWARF here, whatever
    /// DEBUGINFOD_URLS says (see bpfmux sym --help).
    #[arg(long)]
    no_debuginfod: bool,
    /// Keep glob matches that the tracer's own programs and trampoline run
    /// (helpers, map and ring buffer code, stack walking): left out by
    /// default, since their calls from the tracer only meet the kernel's
    /// recursion guard. -v lists what was left out.
    #[arg(long)]
    keep_self_path: bool,
    /// Print every chain of traced calls that ends in an error (-errno,
    /// NULL or ERR_PTR), outermost call first, with return values, times
    /// and stacks; the summary counts them per error.
    #[arg(short = 'E', long)]
    errors: bool,
    /// With --errors, which NULL returns make a chain: `explained` (only a
    /// NULL under a traced caller that returned an errno) or `all`.
    #[arg(long, value_name = "WHICH", value_enum, default_value_t = Nulls::Explained, requires = "errors")]
    null: Nulls,
    /// Print the call tree of the traced functions at the end: calls,
    /// inclusive and exclusive time per node, repeats folded (best with -c).
    #[arg(short = 'G', long)]
    graph: bool,
    /// Record only the calls this expression passes, decided in the kernel
    /// (e.g. 'errno == EINVAL', 'count > 4096 && latency > 1ms',
    /// 'filename ^= "/etc/"'; below).
    #[arg(short = 'F', long, value_name = "EXPR", value_parser = parse_filter)]
    filter: Option<trace::filter::Filter>,
    /// Record only the calls that take at least this long (e.g. 10ms, 1.5us;
    /// units ns, us, ms, s): `latency >= DUR` added to --filter.
    #[arg(long, value_name = "DUR", value_parser = parse_min_latency)]
    min_latency: Option<Duration>,
    #[command(flatten)]
    which: Which,
    /// JSON lines: one object per interval (or event, or error chain), then
    /// a summary.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    exports: ExportArgs,
    #[command(flatten)]
    record: record::RecordArgs,
    /// Rows in the live table (default: the terminal's height).
    #[arg(short = 'n', long, value_name = "N")]
    top: Option<usize>,
    /// Say which functions were dropped and why (-vv: list every one).
    #[arg(short, long, action = clap::ArgAction::Count)]
    verbose: u8,
}

impl Args {
    /// `--filter` and `--min-latency` as one filter.
    fn filter(&self) -> Option<trace::filter::Filter> {
        match (self.filter.clone(), self.min_latency) {
            (Some(f), Some(d)) => Some(f.and_min_latency(d)),
            (None, Some(d)) => Some(trace::filter::Filter::min_latency(d)),
            (f, None) => f,
        }
    }
}

/// `--filter`: its syntax now, its names once the functions are known.
fn parse_filter(s: &str) -> Result<trace::filter::Filter, String> {
    trace::filter::Filter::parse(s).map_err(|e| filter_error(&e))
}

/// A filter error as the CLI prints it: the message, then the expression
/// with a caret under the offending token.
fn filter_error(e: &trace::filter::FilterError) -> String {
    format!("{e}\n{}", e.pointer("  "))
}

/// `--min-latency`: a number and a unit.
fn parse_min_latency(s: &str) -> Result<Duration, String> {
    trace::filter::parse_duration(s)
        .ok_or_else(|| format!("{s:?} is not a duration (a number and a unit: 10ms, 1.5us, 2s)"))
}

/// `--null`: which NULL returns make an error chain.
#[derive(Clone, Copy, clap::ValueEnum)]
enum Nulls {
    /// Only a NULL under a traced caller that returned an errno.
    Explained,
    /// Every NULL return.
    All,
}

impl From<Nulls> for trace::errors::NullReturns {
    fn from(n: Nulls) -> Self {
        match n {
            Nulls::Explained => Self::Explained,
            Nulls::All => Self::All,
        }
    }
}

/// Which calls and for how long: the options `bpfmux trace` and `bpfmux
/// inject` share.
#[derive(clap::Args)]
pub(super) struct Which {
    /// Only calls made by this process (its ID in the initial pid
    /// namespace; with --pid-ns, its ID in that namespace).
    #[arg(short, long)]
    pid: Option<u32>,
    /// Process IDs as this pid namespace numbers them: a namespace file
    /// (/proc/PID/ns/pid) or a process ID whose namespace it is (a
    /// container's process). With --pid, that process of the namespace;
    /// alone, every process of it.
    #[arg(long, value_name = "NS", conflicts_with = "command")]
    pid_ns: Option<String>,
    /// Only calls made by tasks with this name (comm, at most 15 bytes).
    #[arg(long)]
    comm: Option<String>,
    /// Only calls made in this cgroup v2 directory or any cgroup below it
    /// (e.g. /sys/fs/cgroup/system.slice/docker-ID.scope: a container).
    #[arg(long, value_name = "PATH")]
    cgroup: Option<std::path::PathBuf>,
    /// Only calls made in this cgroup v2 directory itself, none in the
    /// cgroups below it.
    #[arg(long, value_name = "PATH", conflicts_with = "cgroup")]
    cgroup_exact: Option<std::path::PathBuf>,
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

/// Where the library's notes leave room for the CLI's own words: the
/// options that show more, the key that stops.
fn hints(h: Hint) -> Option<&'static str> {
    Some(match h {
        Hint::DropReasons => "-v: why",
        Hint::ListAll => "-vv lists all",
        Hint::Stop => "Ctrl-C to stop",
        Hint::AllNulls => "--null all shows them",
    })
}

/// The library's error, with the CLI's hint where the library leaves room
/// for one: every match dropped, more than the message lists; a filter's
/// error with the expression and a caret under the offending token.
fn with_hints(e: trace::Error) -> anyhow::Error {
    match e {
        trace::Error::Filter(e) => anyhow::anyhow!("--filter: {}", filter_error(&e)),
        e @ trace::Error::TooManyToCapture { .. } => anyhow::anyhow!("--args: {e}"),
        trace::Error::Select(SelectError::AllDropped { dropped }) => anyhow::anyhow!(
            "no traceable function left after filtering ({} matched, all dropped{})",
            dropped.len(),
            trace::describe_dropped(&dropped, Some("-v says why"))
        ),
        e => e.into(),
    }
}

/// The report forms `bpfmux trace` and `bpfmux inject` write to standard
/// output, each with the run's notes on standard error.
pub(super) enum Output {
    Json(JsonLines<crate::out::Stdout>),
    Live(LiveTable<crate::out::Stdout>),
    Plain(PlainText<crate::out::Stdout>),
}

impl Output {
    fn report(&mut self) -> &mut dyn Report {
        match self {
            Output::Json(r) => r,
            Output::Live(r) => r,
            Output::Plain(r) => r,
        }
    }

    /// The summary; in JSON with the caller's `fields` too (the exit
    /// status of `-c`'s command, the recorder's last dump).
    fn summary(
        &mut self,
        s: &Summary,
        fields: Vec<(String, serde_json::Value)>,
    ) -> std::io::Result<()> {
        match self {
            Output::Json(r) => r.summary_with(s, fields),
            other => other.report().summary(s),
        }
    }
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
    let kernel_lines = match args.vmlinux.as_deref() {
        None => None,
        Some(_) if !args.stacks && !args.errors => {
            bail!("--vmlinux gives kernel frames their source lines: use it with --stacks or --errors")
        }
        Some(v) => Some(Arc::new(super::sym::kernel_lines(v)?)),
    };
    let shared = Shared {
        who: "bpfmux trace",
        which: &args.which,
        verbose: args.verbose,
        kernel_lines,
        debuginfod: if args.stacks || args.errors {
            crate::debuginfod::client("bpfmux trace", args.no_debuginfod)
        } else {
            None
        },
    };
    let scope = shared.check()?;
    if args.list {
        return list(&args, &patterns, &excludes);
    }
    let mut exports = args.exports.open(args.stacks, args.graph, args.args)?;
    let record = args.record.open(args.json)?;
    if record.as_ref().is_some_and(record::Setup::to_stdout) && exports.takes_stdout() {
        bail!(
            "--record-last writes its dumps to standard output, which an output given '-' \
             takes: give --record-out FILE"
        );
    }
    // Per-call events and error chains come without interval lines.
    let intervals = !args.args && !args.errors && !args.graph;
    let opts = trace::TraceOptions {
        patterns,
        excludes,
        engine,
        latency: args.latency,
        capture: args.args || exports.wants_events(),
        string_size: args.args_size.map(usize::from),
        pointee_depth: args.args_depth.unwrap_or(0),
        kstack: args.stacks,
        ustack: args.stacks,
        user_stacks_at_end: args.stacks_at_end,
        keep_self_path: args.keep_self_path,
        errors: args.errors,
        null_returns: args.null.into(),
        graph: args.graph,
        inject: None,
        filters: Filters::default(),
        filter: args.filter(),
    };
    execute(&shared, scope, opts, &mut exports, record, |out, notes| {
        if args.json {
            Output::Json(JsonLines::new(out, intervals).with_notes(notes))
        } else if intervals && std::io::stdout().is_terminal() {
            Output::Live(
                LiveTable::new(out, args.latency, args.top)
                    .with_notes(notes)
                    .with_title("bpfmux trace: "),
            )
        } else {
            Output::Plain(PlainText::new(out, args.latency, args.top, intervals).with_notes(notes))
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
    /// Source lines for kernel frames (`--vmlinux`).
    pub kernel_lines: Option<Arc<bpfmux::symbolize::KernelLines>>,
    /// Debug files of user frames' binaries with no DWARF here.
    pub debuginfod: Option<bpfmux::symbolize::debuginfod::Debuginfod>,
}

/// The scope of a run as checked: the cgroup and pid namespace, the
/// process `--pid` names in that namespace.
#[derive(Default)]
pub(super) struct Scope {
    cgroup: Option<trace::CgroupFilter>,
    pid_ns: Option<trace::PidNamespace>,
    /// `--pid` of `--pid-ns`, by its ID here.
    ns_process: Option<u32>,
}

impl Shared<'_> {
    /// The filters, checked before anything is loaded.
    pub fn check(&self) -> anyhow::Result<Scope> {
        let w = self.which;
        if w.command.is_some() && w.pid.is_some() {
            bail!("-c traces its own process; it cannot be combined with --pid");
        }
        let pid_ns = w.pid_ns.as_deref().map(inputs::pid_ns).transpose()?;
        let ns_process = match (w.pid, &pid_ns) {
            (Some(pid), Some(ns)) => Some(inputs::pid_in_ns(pid, ns)?),
            (Some(pid), None) => {
                inputs::check_pid(pid)?;
                None
            }
            (None, _) => None,
        };
        inputs::check_comm(w.comm.as_deref())?;
        let cgroup = match (&w.cgroup, &w.cgroup_exact) {
            (Some(p), _) => Some(inputs::cgroup(p, CgroupMatch::Subtree)?),
            (None, Some(p)) => Some(inputs::cgroup(p, CgroupMatch::Exact)?),
            (None, None) => None,
        };
        Ok(Scope {
            cgroup,
            pid_ns,
            ns_process,
        })
    }

    /// What the run says about itself, on standard error, as `who`.
    fn notes(&self) -> Notes {
        notes_to(std::io::stderr(), self.who, self.verbose)
    }
}

/// The library's notes as `who` (`bpfmux trace`) says them, with its hints.
pub(super) fn notes_to(out: impl Write + 'static, who: &str, verbose: u8) -> Notes {
    Notes::new(out, format!("{who}: "), Detail::from_level(verbose)).with_hints(hints)
}

/// Plans, attaches, runs until the duration, the command's end or a signal,
/// detaches and prints the summary, then writes the `exports`: the run of
/// `bpfmux trace` and `bpfmux inject` (`opts.filters` comes from `shared`).
/// With `record`, error chains are recorded instead of printed, and dumped
/// on SIGUSR1, after a trigger error and at the end.
pub(super) fn execute(
    shared: &Shared<'_>,
    scope: Scope,
    mut opts: trace::TraceOptions,
    exports: &mut Exports,
    record: Option<record::Setup>,
    output: impl FnOnce(crate::out::Stdout, Notes) -> Output,
) -> anyhow::Result<()> {
    let w = shared.which;
    if let (Some(pid), Some(ns), Some(here)) = (w.pid, &scope.pid_ns, scope.ns_process) {
        eprintln!(
            "{}: --pid {pid} of pid namespace {ns} is process {here} here; \
             the output gives process IDs as the initial pid namespace numbers them",
            shared.who
        );
    }
    signals::install()?;
    if record.is_some() {
        signals::install_dump()?;
    }
    let mut child = w.command.as_deref().map(Child::spawn).transpose()?;
    opts.filters = Filters {
        tgid: w.pid.or(child.as_ref().map(|c| c.pid as u32)),
        pid_ns: scope.pid_ns,
        cgroup: scope.cgroup,
        comm: w.comm.clone(),
    };
    let plan = trace::plan(opts).map_err(|e| match e {
        // The cap on per-call events, under the option that wants them.
        e @ trace::Error::TooManyToCapture { .. } => {
            anyhow::anyhow!("{}: {e}", exports.events_option())
        }
        e => with_hints(e),
    })?;
    let n = plan.selection.funcs.len();
    let stdout = if exports.takes_stdout() {
        crate::out::nowhere()
    } else {
        crate::out::stdout()
    };
    let mut output = output(stdout, shared.notes());
    output.report().planned(&plan)?;

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
        Err(trace::Error::Interrupted) => {
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
    output.report().attached(&tracer)?;
    let interval = Duration::from_secs_f64(w.interval);
    let duration = w.duration.map(|d| Duration::from_secs_f64(d.max(0.0)));
    let run = RunOptions {
        interval,
        duration,
        kernel_lines: shared.kernel_lines.clone(),
        debuginfod: shared.debuginfod.clone(),
    };
    // The session opens what it reads during the run before the command
    // starts: the command's calls then do not meet bpfmux's own.
    let mut session = Session::new(tracer, run);
    if let Some(c) = child.as_mut() {
        session.add_stack_files(c.programs.iter().cloned());
        c.release()?;
    }
    let recording = exports.take_recording();
    let recording_path = recording.as_ref().map(|w| w.path().display().to_string());
    if let Some(w) = recording {
        session.record_to(w)?;
    }
    let mut stop = || signals::stopped() | child.as_mut().is_some_and(|c| c.exited());
    if let Some(r) = &record {
        eprintln!("{}", r.announce(shared.who));
    }
    let mut report = exports.report(output.report());
    let (window, recorded) = match record {
        Some(r) => {
            let mut rec = Recording::new(&mut *report, r.recorder, r.sink, r.json, &signals::DUMP);
            let window = session.run(&mut stop, &mut rec);
            let (recorder, sink) = rec.finish();
            (window, Some((recorder, sink, r.json)))
        }
        None => (session.run(&mut stop, &mut *report), None),
    };
    drop(report);
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
    let window = window?;
    let stacks = exports.read_stacks(&mut session)?;
    let summary = session.summary(&window)?;
    let mut fields = Vec::new();
    if let Some(c) = child.as_ref().and_then(Child::exit_code) {
        fields.push(("command_exit".to_string(), c.into()));
    }
    if let Some((recorder, mut sink, json)) = recorded {
        // The last dump, before the summary; with --json on standard
        // output it is the summary's `recorded`, not a line of its own.
        let dump = recorder.dump(Trigger::Exit, SystemTime::now());
        let in_summary = json && matches!(sink, record::Sink::Stdout(_));
        if !in_summary {
            dump.write(&mut sink, json)?;
        }
        if json {
            fields.push(("recorded".to_string(), serde_json::to_value(&dump)?));
        }
    }
    if let (Some(n), Some(p)) = (session.finish_recording(&summary, &fields)?, recording_path) {
        eprintln!(
            "{}: --record {p}: {} error chains, {} stacks, {} files and {} kernel symbols              they need (bpfmux report {p})",
            shared.who, n.chains, n.stacks, n.objects, n.kernel_symbols
        );
    }
    crate::debuginfod::tell_answers(shared.who, shared.verbose, session.debuginfod_answers());
    output.summary(&summary, fields)?;
    std::mem::take(exports).finish(shared.who, stacks, &summary)
}

/// `--list`: the selection, as an attach would make it: with globs (and
/// no --keep-self-path), the engine is chosen and the programs loaded once
/// to leave out the tracer's own path; nothing is attached.
fn list(args: &Args, patterns: &[Pattern], excludes: &[Pattern]) -> anyhow::Result<()> {
    let t0 = Instant::now();
    let needs_exit = args.latency
        || args.args
        || args.errors
        || args.graph
        || args.filter().is_some_and(|f| f.needs_exit());
    // No engine is chosen here; one named with --engine is taken at its word.
    let global = inputs::engine(args.engine.as_deref())? == Some(EngineKind::Global);
    let opts = SelectOptions {
        needs_exit,
        calls_with_slots: global && needs_exit,
    };
    let globs = patterns.iter().any(|p| !p.is_exact());
    let (sel, self_path) = if globs && !args.keep_self_path {
        // What an attach would attach: the engine is chosen and the
        // programs loaded once, to leave out the tracer's own path.
        let planned = trace::plan(trace::TraceOptions {
            patterns: patterns.to_vec(),
            excludes: excludes.to_vec(),
            engine: inputs::engine(args.engine.as_deref())?,
            latency: args.latency,
            capture: args.args,
            errors: args.errors,
            graph: args.graph,
            kstack: args.stacks,
            ustack: args.stacks,
            filter: args.filter(),
            ..Default::default()
        });
        match planned {
            Ok(mut plan) => {
                let outcome = plan.leave_out_self_path().map_err(with_hints)?;
                (plan.selection, Some(outcome))
            }
            // No engine to load the programs with: the selection alone,
            // and a warning (a listing error, if any, is said as such).
            Err(trace::Error::Engine(e)) => {
                let sel =
                    trace::select(patterns, excludes, opts).map_err(|e| with_hints(e.into()))?;
                let first = e.to_string();
                let first = first
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .trim_end_matches(':');
                let why = format!("no engine can load its programs here: {first}");
                (sel, Some(trace::SelfPathOutcome::Failed(why)))
            }
            Err(e) => return Err(with_hints(e)),
        }
    } else {
        let sel = trace::select(patterns, excludes, opts).map_err(|e| with_hints(e.into()))?;
        (sel, None)
    };
    let select_time = t0.elapsed();
    if let Some(trace::SelfPathOutcome::Failed(why)) = &self_path {
        eprintln!(
            "bpfmux trace: warning: the tracer's own path is unknown ({why}): the list \
             includes what it runs"
        );
    }
    // The filter's names and values, and --args' cap, against the functions,
    // as an attach would.
    if args.args {
        trace::check_capture(sel.funcs.len()).map_err(with_hints)?;
    }
    if let Some(f) = args.filter() {
        f.compile(&sel.funcs, true)
            .map_err(|e| anyhow::anyhow!("--filter: {}", filter_error(&e)))?;
    }
    let mut out = crate::out::stdout();
    for f in &sel.funcs {
        writeln!(out, "{}", f.display_name())?;
    }
    out.flush()?;
    notes_to(std::io::stderr(), "bpfmux trace", args.verbose).selected(&sel, select_time)?;
    Ok(())
}

#[cfg(test)]
pub(super) mod tests {
    //! The notes read, byte for byte, as they did when the library wrote
    //! them with `bpfmux trace:` in front (guest checks parse them).
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use bpfmux::trace::summary::{AttachBreakdown, Lost};
    use bpfmux::trace::{
        DropReason, Dropped, EngineKind, ExitSide, Plan, Scope, Selection, Summary,
    };

    use super::notes_to;

    fn selection(dropped: usize) -> Selection {
        Selection {
            funcs: vec![],
            dropped: (0..dropped)
                .map(|i| Dropped {
                    scope: Scope::Vmlinux,
                    name: format!("f{i}"),
                    reason: DropReason::Ambiguous(2),
                    exact: false,
                })
                .collect(),
            read_listings: true,
            phases: vec![("btf", Duration::from_millis(12))],
            listing_times: [
                ("available_filter_functions", Duration::from_millis(30)),
                ("kallsyms", Duration::from_millis(40)),
            ],
        }
    }

    fn plan(dropped: usize) -> Plan {
        Plan {
            opts: Default::default(),
            selection: selection(dropped),
            engine: EngineKind::KprobeMulti,
            exit: ExitSide::Session,
            skipped_engines: vec![(EngineKind::Global, "not this kernel".into())],
            select_time: Duration::from_micros(81_250),
            filter: None,
            pointees: Default::default(),
        }
    }

    /// What the notes wrote, through a file of the test's own.
    fn said(who: &str, verbose: u8, f: impl FnOnce(&mut bpfmux::trace::Notes)) -> String {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("bpfmux-notes-{}-{n}", std::process::id()));
        let file = std::fs::File::create(&path).expect("a scratch file");
        f(&mut notes_to(file, who, verbose));
        let text = std::fs::read_to_string(&path).expect("the scratch file");
        let _ = std::fs::remove_file(&path);
        text
    }

    #[test]
    fn plan_notes_are_what_they_were() {
        let brief = said("bpfmux trace", 0, |n| n.planned(&plan(3)).unwrap());
        assert_eq!(
            brief,
            "bpfmux trace: 0 functions with engine kprobe-multi, 3 dropped (-v: why)\n"
        );
        let none = said("bpfmux inject", 0, |n| n.planned(&plan(0)).unwrap());
        assert_eq!(
            none,
            "bpfmux inject: 0 functions with engine kprobe-multi\n"
        );
        let verbose = said("bpfmux trace", 1, |n| n.planned(&plan(22)).unwrap());
        let lines: Vec<_> = verbose.lines().collect();
        assert_eq!(
            lines[..4],
            [
                "bpfmux trace: 0 functions with engine kprobe-multi, 22 dropped",
                "  engine global not used: not this kernel",
                "  exits: one session program (entry and exit paired by the kernel)",
                "  dropped 22: name shared by several kernel functions",
            ]
        );
        assert_eq!(
            lines[4],
            "    vmlinux:f0: name shared by 2 kernel functions"
        );
        assert_eq!(lines[24], "    ... 2 more (-vv lists all)");
        assert_eq!(
            lines[25..],
            [
                "  selected in 81.2 ms (BTF + available_filter_functions + kallsyms; \
                 ms: btf 12)",
                "  meanwhile, on other threads (ms): available_filter_functions 30, kallsyms 40",
            ]
        );
        let all = said("bpfmux trace", 2, |n| n.planned(&plan(22)).unwrap());
        assert!(!all.contains("more"), "{all}");
        assert_eq!(all.lines().count(), 4 + 22 + 2);
    }

    #[test]
    fn plan_notes_name_functions_the_filter_never_passes() {
        use bpfmux::trace::{Func, Param, Proto, ValueKind};
        // One int argument, returning an int.
        let func = |name: &str, arg: &str| Func {
            scope: Scope::Vmlinux,
            name: name.into(),
            btf_id: 1,
            proto: Proto {
                params: vec![Param {
                    name: arg.into(),
                    kind: ValueKind::Signed(32),
                    slots: 1,
                    format: Default::default(),
                }],
                ret: ValueKind::Signed(32),
                ret_format: Default::default(),
            },
            exact: true,
            addr: None,
        };
        let mut p = plan(0);
        p.selection.funcs = vec![func("f", "count"), func("g", "flags")];
        let filter = bpfmux::trace::filter::Filter::parse("count > 1 && ret < 0").unwrap();
        p.filter = Some(filter.compile(&p.selection.funcs, true).unwrap());
        assert_eq!(
            said("bpfmux trace", 0, |n| n.planned(&p).unwrap()),
            "bpfmux trace: 2 functions with engine kprobe-multi\n\
             bpfmux trace: warning: the filter never passes 1 function lacking what it \
             reads: g (no argument `count`)\n"
        );
        let verbose = said("bpfmux trace", 1, |n| n.planned(&p).unwrap());
        assert_eq!(
            verbose.lines().nth(2),
            Some("  filter count > 1 && ret < 0: at entry count > 1; at exit ret < 0"),
            "{verbose}"
        );
    }

    #[test]
    fn all_dropped_says_how_to_see_why() {
        let dropped = selection(7).dropped;
        let e = super::with_hints(bpfmux::trace::SelectError::AllDropped { dropped }.into());
        let text = format!("{e:#}");
        assert!(
            text.starts_with(
                "no traceable function left after filtering (7 matched, all dropped: "
            ),
            "{text}"
        );
        assert!(text.ends_with("; ... 2 more; -v says why)"), "{text}");
    }

    #[test]
    fn list_notes_are_what_they_were() {
        let t = Duration::from_millis(5);
        let brief = said("bpfmux trace", 0, |n| n.selected(&selection(2), t).unwrap());
        assert_eq!(
            brief,
            "bpfmux trace: 0 functions selected, 2 dropped (-v: why)\n"
        );
        let brief = said("bpfmux trace", 0, |n| n.selected(&selection(0), t).unwrap());
        assert_eq!(brief, "bpfmux trace: 0 functions selected, 0 dropped\n");
        let verbose = said("bpfmux trace", 1, |n| n.selected(&selection(2), t).unwrap());
        assert!(
            verbose.starts_with(
                "bpfmux trace: 0 functions selected, 2 dropped\n  \
                 dropped 2: name shared by several kernel functions\n"
            ),
            "{verbose}"
        );
    }

    /// A run's summary: 523 functions on the global engine, 2 s, nothing
    /// counted or lost.
    pub(super) fn summary() -> Summary {
        Summary {
            kind: "summary",
            engine: EngineKind::Global,
            exit_side: ExitSide::None,
            functions_attached: 523,
            functions_dropped: 0,
            skipped: vec![],
            links: 1,
            select_ms: 1.0,
            prepare_ms: 2.0,
            attach_ms: 3.25,
            detach_ms: 4.0,
            attach_breakdown: AttachBreakdown {
                program_loads: 1,
                load_ms: 1.0,
                links: 1,
                link_functions: 523,
                link_ms: 1.0,
                refused_tries: 0,
                refused_ms: 0.0,
                split: vec![],
            },
            elapsed_s: 2.0,
            events: 0,
            injected: None,
            errors: None,
            null_only_chains_left_out: None,
            graph: None,
            lost: Lost::default(),
            preemptible_reads: None,
            filter: None,
            functions: vec![],
            stacks: None,
            user_stacks: None,
            latency: false,
        }
    }

    #[test]
    fn summary_notes_are_what_they_were() {
        let mut s = summary();
        assert_eq!(
            said("bpfmux inject", 0, |n| n.summary(&s).unwrap()),
            "bpfmux inject: engine global: attach 3.2 ms, detach 4.0 ms for 523 functions\n\
             bpfmux inject: nothing lost (ring buffers, stacks, nesting, recursion guard)\n"
        );
        s.lost.events = 7;
        assert_eq!(
            said("bpfmux trace", 0, |n| n.summary(&s).unwrap())
                .lines()
                .nth(1),
            Some(
                "bpfmux trace: not recorded: 7 events, 0 error chains (ring buffers full), \
                 0 call graph paths (map full), 0 stacks, 0 calls too deeply nested; 0 calls \
                 skipped by the kernel's recursion guard"
            )
        );
        // --filter: what it passed of what it saw.
        s.filter = Some(bpfmux::trace::summary::FilterTotals {
            expression: "errno == ESRCH".into(),
            seen: 1000,
            passed: 37,
            functions_never_passed: 0,
        });
        assert_eq!(
            said("bpfmux trace", 0, |n| n.summary(&s).unwrap())
                .lines()
                .nth(2),
            Some("bpfmux trace: filter `errno == ESRCH` passed 37 of 1000 calls")
        );
        s.filter = None;
        // --errors: NULL-only chains left out, and the option that shows them.
        s.null_only_chains_left_out = Some(1756);
        assert_eq!(
            said("bpfmux trace", 0, |n| n.summary(&s).unwrap())
                .lines()
                .nth(2),
            Some(
                "bpfmux trace: left out 1756 error chains that only ended in NULL (no traced \
                 caller failed with an errno) (--null all shows them)"
            )
        );
    }

    #[test]
    fn filter_errors_point_at_the_token_before_anything_runs() {
        use clap::Parser;

        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            trace: super::Args,
        }
        let parse = |a: &[&str]| Cli::try_parse_from([&["bpfmux"], a].concat()).map(|c| c.trace);
        let e = parse(&["--filter", "count > 1 && (ret < 0", "f"])
            .err()
            .expect("an unclosed parenthesis");
        let text = e.to_string();
        assert!(
            text.contains(
                "column 14: this `(` is never closed\n  count > 1 && (ret < 0\n               ^\n"
            ),
            "{text}"
        );
        let e = parse(&["--filter", "filename == \"/etc/passwd", "f"])
            .err()
            .expect("an unterminated string");
        let text = e.to_string();
        let caret = format!("\n{}{}\n", " ".repeat(14), "^".repeat(12));
        assert!(
            text.contains(
                "column 13: expected a closing `\"`, found the end\n  filename == \"/etc/passwd"
            ) && text.contains(&caret),
            "{text}"
        );
        let t = parse(&["--filter", "filename ^= \"/etc/\" && pgoff > 0", "f"]).unwrap();
        assert!(t.filter().is_some());
        let e = parse(&["--min-latency", "10", "f"]).err().expect("no unit");
        assert!(
            e.to_string()
                .contains("\"10\" is not a duration (a number and a unit: 10ms, 1.5us, 2s)"),
            "{e}"
        );
        // Both: one filter, the floor after the expression.
        let t = parse(&["--filter", "a > 1 || b", "--min-latency", "1.5ms", "f"]).unwrap();
        assert_eq!(
            t.filter().map(|f| f.text()),
            Some("(a > 1 || b) && latency >= 1500us".to_string())
        );
        let t = parse(&["--min-latency", "2s", "f"]).unwrap();
        assert_eq!(
            t.filter().map(|f| f.text()),
            Some("latency >= 2s".to_string())
        );
        assert!(parse(&["f"]).unwrap().filter().is_none());
        // A library error names the option and draws the caret.
        let lib = bpfmux::trace::filter::Filter::parse("cnt > 1")
            .unwrap()
            .compile(&[], true)
            .unwrap_err();
        let shown = format!("{:#}", super::with_hints(bpfmux::trace::Error::Filter(lib)));
        assert!(
            shown.starts_with("--filter: column 1: unknown argument `cnt`")
                && shown.ends_with("\n  cnt > 1\n  ^^^"),
            "{shown}"
        );
    }

    #[test]
    fn null_takes_explained_or_all_and_needs_errors() {
        use bpfmux::trace::errors::NullReturns;
        use clap::Parser;

        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            trace: super::Args,
        }
        let parse = |a: &[&str]| Cli::try_parse_from([&["bpfmux"], a].concat()).map(|c| c.trace);
        let nulls = |a: &[&str]| parse(a).map(|t| NullReturns::from(t.null));
        assert_eq!(nulls(&["--errors", "f"]).ok(), Some(NullReturns::Explained));
        assert_eq!(
            nulls(&["--errors", "--null", "all", "f"]).ok(),
            Some(NullReturns::All)
        );
        assert_eq!(
            nulls(&["--errors", "--null=explained", "f"]).ok(),
            Some(NullReturns::Explained)
        );
        assert!(parse(&["--errors", "--null", "some", "f"]).is_err());
        assert!(
            parse(&["--null", "all", "f"]).is_err(),
            "--null needs --errors"
        );
        assert!(parse(&["f"]).is_ok());
    }
    /// --args takes globs up to the library's cap; over it, the error names
    /// the count and the cap under --args' name. --args-size is 1 to 1024
    /// and goes with --args.
    #[test]
    fn args_cap_and_string_bound() {
        use clap::Parser;

        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            trace: super::Args,
        }
        let parse = |a: &[&str]| Cli::try_parse_from([&["bpfmux"], a].concat()).map(|c| c.trace);
        let e = super::with_hints(bpfmux::trace::check_capture(523).unwrap_err());
        assert!(
            e.to_string().starts_with(
                "--args: per-call events on 523 functions: at most 256 (a set this large sends \
                 events faster than they can be read)"
            ),
            "{e}"
        );
        assert!(bpfmux::trace::check_capture(256).is_ok());
        let t = parse(&["--args", "--args-size", "128", "vfs_*"]).unwrap();
        assert_eq!((t.args, t.args_size), (true, Some(128)));
        for bad in ["0", "1025"] {
            assert!(
                parse(&["--args", "--args-size", bad, "f"]).is_err(),
                "{bad}"
            );
        }
        let e = parse(&["--args-size", "64", "f"])
            .err()
            .expect("needs --args");
        assert!(e.to_string().contains("--args"), "{e}");
        // --args-depth: 1 to 3, with --args.
        let depth = |a: &[&str]| parse(a).map(|t| t.args_depth);
        assert_eq!(depth(&["--args", "f"]).ok(), Some(None));
        assert_eq!(
            depth(&["--args", "--args-depth", "1", "f"]).ok(),
            Some(Some(1))
        );
        assert_eq!(
            depth(&["--args", "--args-depth", "3", "f"]).ok(),
            Some(Some(3))
        );
        assert_eq!(
            depth(&["--args", "--args-depth=2", "f"]).ok(),
            Some(Some(2))
        );
        for bad in ["0", "4"] {
            assert!(
                depth(&["--args", "--args-depth", bad, "f"]).is_err(),
                "{bad}"
            );
        }
        assert!(depth(&["--args-depth", "1", "f"]).is_err(), "needs --args");
    }
}
