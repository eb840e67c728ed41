//! `bpfmux trace`'s outputs for other tools (the library's
//! `trace::export`): `--folded`, `--flamegraph` and `--pprof` of the stacks
//! (`--stacks`) or the call graph (`--graph`), and `--chrome-trace`, a
//! timeline of per-call events. Each goes to a file, or to standard output
//! (`-`, one of them at most), the report's own output then not written.
//! Files are created before anything is attached (a path that cannot be
//! written fails first), written at the end; the timeline as calls return.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};
use bpfmux::trace::export::{self, chrome::ChromeTrace, Profile};
use bpfmux::trace::{self, Report, Session, Stack, Summary, Tee};

/// The options, as `bpfmux trace` takes them.
#[derive(clap::Args, Default)]
pub struct ExportArgs {
    /// With --stacks or --graph: write folded stacks to FILE ('-': standard
    /// output), "frame;frame;frame count" lines as flamegraph.pl and inferno
    /// read them (values: calls per stack; exclusive ns per call path).
    #[arg(long, value_name = "FILE")]
    folded: Option<PathBuf>,
    /// With --stacks or --graph: write a flame graph SVG to FILE.
    #[arg(long, value_name = "FILE")]
    flamegraph: Option<PathBuf>,
    /// With --stacks or --graph: write a pprof profile to FILE (gzipped
    /// profile.proto: go tool pprof, Parca, Pyroscope).
    #[arg(long, value_name = "FILE")]
    pprof: Option<PathBuf>,
    /// Write a Chrome trace-event timeline to FILE (Perfetto UI,
    /// chrome://tracing): a slice per call, with its arguments and return
    /// value as --args prints them, from per-call events (turned on as with
    /// --args, on at most 256 functions; printed only with --args).
    #[arg(long, value_name = "FILE")]
    chrome_trace: Option<PathBuf>,
    /// Record the run to FILE (gzipped when it ends in .gz): error chains,
    /// stacks, the call graph, counts and histograms, with user frames as
    /// file + offset + build ID and the kernel symbols they need; `bpfmux
    /// report FILE` prints them later, here or on another machine.
    #[arg(long = "record", value_name = "FILE")]
    recording: Option<PathBuf>,
}

/// Where an output goes.
enum Target {
    Stdout(crate::out::Stdout),
    File(BufWriter<File>),
}

impl Write for Target {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Target::Stdout(o) => o.write(buf),
            Target::File(f) => f.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Target::Stdout(o) => o.flush(),
            Target::File(f) => f.flush(),
        }
    }
}

/// An output opened: its option and file for messages, and its writer.
struct Opened<W> {
    what: String,
    out: W,
}

/// What the profile outputs are made of.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Source {
    Stacks,
    Graph,
}

/// The outputs of one run, opened.
#[derive(Default)]
pub struct Exports {
    source: Option<Source>,
    folded: Option<Opened<Target>>,
    flamegraph: Option<Opened<Target>>,
    pprof: Option<Opened<Target>>,
    chrome: Option<Opened<ChromeTrace<Target>>>,
    stdout: bool,
    /// The report prints per-call events too (--args).
    print_events: bool,
    /// --record's file, created.
    recording: Option<trace::recording::Writer>,
}

/// `-` or a file, created now.
fn open(option: &str, path: &Path, stdout: &mut bool) -> anyhow::Result<Opened<Target>> {
    if path == Path::new("-") {
        if *stdout {
            bail!("{option} -: another output already writes to standard output");
        }
        *stdout = true;
        return Ok(Opened {
            what: format!("{option} (standard output)"),
            out: Target::Stdout(crate::out::stdout()),
        });
    }
    let what = format!("{option} {}", path.display());
    let f = File::create(path).with_context(|| what.clone())?;
    Ok(Opened {
        what,
        out: Target::File(BufWriter::new(f)),
    })
}

impl ExportArgs {
    /// Checks the options against the modes and creates the files.
    pub fn open(&self, stacks: bool, graph: bool, print_events: bool) -> anyhow::Result<Exports> {
        let profiles = [
            ("--folded", &self.folded),
            ("--flamegraph", &self.flamegraph),
            ("--pprof", &self.pprof),
        ];
        let source = match profiles.iter().find(|(_, p)| p.is_some()) {
            None => None,
            Some((o, _)) => Some(match (stacks, graph) {
                (true, false) => Source::Stacks,
                (false, true) => Source::Graph,
                (true, true) => bail!(
                    "{o} writes the stacks (--stacks) or the call graph (--graph): not both in one run"
                ),
                (false, false) => bail!("{o} needs --stacks or --graph: what the profile is of"),
            }),
        };
        if self.flamegraph.is_some() && !cfg!(feature = "flamegraph") {
            bail!(
                "--flamegraph: this bpfmux was built without its flamegraph feature \
                 (the inferno crate); --folded writes what flamegraph.pl and inferno draw"
            );
        }
        let mut stdout = false;
        let mut opened = |o: &str, p: &Option<PathBuf>| {
            p.as_deref().map(|p| open(o, p, &mut stdout)).transpose()
        };
        let folded = opened("--folded", &self.folded)?;
        let flamegraph = opened("--flamegraph", &self.flamegraph)?;
        let pprof = opened("--pprof", &self.pprof)?;
        let chrome = opened("--chrome-trace", &self.chrome_trace)?.map(|o| Opened {
            what: o.what,
            out: ChromeTrace::new(o.out),
        });
        if self.recording.as_deref() == Some(Path::new("-")) {
            bail!("--record writes a file that bpfmux report reads: give it a path, not '-'");
        }
        let recording = self
            .recording
            .as_deref()
            .map(trace::recording::Writer::create)
            .transpose()
            .context("--record")?;
        Ok(Exports {
            recording,
            source,
            folded,
            flamegraph,
            pprof,
            chrome,
            stdout,
            print_events,
        })
    }
}

impl Exports {
    /// No output (`bpfmux inject`).
    pub fn none() -> Self {
        Self::default()
    }

    /// `--record`'s writer, for the session.
    pub fn take_recording(&mut self) -> Option<trace::recording::Writer> {
        self.recording.take()
    }

    /// An output writes to standard output: the report must not.
    pub fn takes_stdout(&self) -> bool {
        self.stdout
    }

    /// The programs must send per-call events (for the timeline).
    pub fn wants_events(&self) -> bool {
        self.chrome.is_some()
    }

    /// The option that turned per-call events on, which an error about
    /// them names: `--chrome-trace` when only the timeline wants them.
    pub fn events_option(&self) -> &'static str {
        if self.chrome.is_some() && !self.print_events {
            "--chrome-trace"
        } else {
            "--args"
        }
    }

    /// The report a run tells: `main`, and the timeline when there is one
    /// (per-call events to `main` only when it prints them).
    pub fn report<'a>(&'a mut self, main: &'a mut dyn Report) -> Box<dyn Report + 'a> {
        match &mut self.chrome {
            Some(c) => Box::new(Tee::new(main, &mut c.out).events_to_first(self.print_events)),
            None => Box::new(main),
        }
    }

    /// After the detach and before the summary (whose user stack totals
    /// then count what this normalizes): every stack, when a profile of
    /// them is written.
    pub fn read_stacks(&self, session: &mut Session) -> Result<Option<Vec<Stack>>, trace::Error> {
        match self.source {
            Some(Source::Stacks) => session.stacks().map(Some),
            _ => Ok(None),
        }
    }

    /// After the summary: writes the profiles and ends the timeline,
    /// saying on standard error what each output holds (`who`: the prefix).
    pub fn finish(
        self,
        who: &str,
        stacks: Option<Vec<Stack>>,
        summary: &Summary,
    ) -> anyhow::Result<()> {
        let profile = match (self.source, stacks) {
            (Some(Source::Stacks), Some(s)) => Some(Profile::from_stacks(&s)),
            (Some(Source::Graph), _) => summary.graph.as_deref().map(Profile::from_graph),
            _ => None,
        }
        .map(|p| p.with_duration_ns((summary.elapsed_s * 1e9) as u64));
        if let Some(p) = &profile {
            let of = match self.source {
                Some(Source::Graph) => "call paths",
                _ => "stacks",
            };
            let n = p.samples.len();
            if let Some(mut o) = self.folded {
                let lines =
                    export::folded::write(&mut o.out, p).map_err(|e| io_first(e, &o.what))?;
                eprintln!("{who}: {}: {lines} folded lines of {n} {of}", o.what);
            }
            if let Some(o) = self.flamegraph {
                flamegraph(who, o, p, self.source)?;
            }
            if let Some(mut o) = self.pprof {
                export::pprof::write(&mut o.out, p).map_err(|e| io_first(e, &o.what))?;
                eprintln!("{who}: {}: a pprof profile of {n} {of}", o.what);
            }
        }
        if let Some(mut c) = self.chrome {
            c.out.finish().with_context(|| c.what.clone())?;
            let unplaced = match c.out.unplaced() {
                0 => String::new(),
                n => format!(
                    " ({n} returns without a duration left out: their calls began before the \
                     attach)"
                ),
            };
            eprintln!(
                "{who}: {}: a timeline of {} calls{unplaced}",
                c.what,
                c.out.slices()
            );
        }
        Ok(())
    }
}

#[cfg(feature = "flamegraph")]
fn flamegraph(
    who: &str,
    mut o: Opened<Target>,
    p: &Profile,
    source: Option<Source>,
) -> anyhow::Result<()> {
    let title = match source {
        Some(Source::Graph) => "bpfmux trace --graph: time in traced calls",
        _ => "bpfmux trace --stacks: calls per stack",
    };
    match export::flamegraph::write(&mut o.out, p, title) {
        Ok(()) => eprintln!(
            "{who}: {}: a flame graph of {} samples",
            o.what,
            p.samples.len()
        ),
        Err(export::Error::Empty) => {
            eprintln!(
                "{who}: warning: {}: nothing to draw (no calls recorded)",
                o.what
            );
        }
        Err(e) => return Err(io_first(e, &o.what)),
    }
    Ok(())
}

#[cfg(not(feature = "flamegraph"))]
fn flamegraph(_: &str, _: Opened<Target>, _: &Profile, _: Option<Source>) -> anyhow::Result<()> {
    // ExportArgs::open refuses --flamegraph in such a build.
    Ok(())
}

/// A writer's error as an `io::Error` first in the chain, so that a closed
/// standard output ends the run quietly ([`crate::out::is_closed_pipe`]).
fn io_first(e: export::Error, what: &str) -> anyhow::Error {
    match e {
        export::Error::Io(e) => anyhow::Error::from(e).context(what.to_string()),
        e => anyhow::Error::from(e).context(what.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(folded: Option<&str>, chrome: Option<&str>) -> ExportArgs {
        ExportArgs {
            folded: folded.map(PathBuf::from),
            chrome_trace: chrome.map(PathBuf::from),
            ..Default::default()
        }
    }

    fn error(r: anyhow::Result<Exports>) -> String {
        format!("{:#}", r.err().expect("an error"))
    }

    #[test]
    fn profiles_need_one_source() {
        let a = args(Some("-"), None);
        assert!(error(a.open(false, false, false)).contains("--folded needs --stacks or --graph"));
        assert!(error(a.open(true, true, false)).contains("not both"));
        let e = a.open(true, false, false).unwrap();
        assert!(e.takes_stdout() && !e.wants_events());
        // A timeline alone needs neither.
        let t = std::env::temp_dir().join(format!("bpfmux-export-{}.json", std::process::id()));
        let e = args(None, t.to_str()).open(false, false, false).unwrap();
        assert!(!e.takes_stdout() && e.wants_events());
        assert!(t.exists(), "created before anything runs");
        // The cap on per-call events is said under the option that wants them.
        assert_eq!(e.events_option(), "--chrome-trace");
        let e = args(None, t.to_str()).open(false, false, true).unwrap();
        assert_eq!(e.events_option(), "--args");
        let _ = std::fs::remove_file(&t);
    }

    #[test]
    fn a_recording_goes_to_a_file() {
        let a = ExportArgs {
            recording: Some(PathBuf::from("-")),
            ..Default::default()
        };
        assert!(error(a.open(false, false, false)).contains("give it a path, not '-'"));
    }

    #[test]
    fn one_output_at_most_takes_standard_output() {
        let e = error(args(Some("-"), Some("-")).open(true, false, false));
        assert_eq!(
            e,
            "--chrome-trace -: another output already writes to standard output"
        );
    }

    /// A scratch directory of the test's own.
    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("bpfmux-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// Counts the per-call events it is told.
    #[derive(Default)]
    struct Events(usize);

    impl Report for Events {
        fn event(&mut self, _: &trace::Event, _: &trace::Func) -> io::Result<()> {
            self.0 += 1;
            Ok(())
        }
        fn error_chain(&mut self, _: &trace::errors::ErrorChain) -> io::Result<()> {
            Ok(())
        }
        fn interval(&mut self, _: &trace::Interval<'_>) -> io::Result<()> {
            Ok(())
        }
        fn summary(&mut self, _: &Summary) -> io::Result<()> {
            Ok(())
        }
    }

    /// A run's end: the profiles of its stacks in their files, and the
    /// timeline of the calls it reported, which the report itself does not
    /// print without --args.
    #[test]
    fn a_run_ends_with_its_outputs() {
        use bpfmux::symbolize::{Symbol, SymbolKind};
        use bpfmux::trace::{Event, EventKind, FrameName, Func, Proto, Scope, StackFrame};
        let d = scratch("exports");
        let a = ExportArgs {
            folded: Some(d.join("s.folded")),
            flamegraph: cfg!(feature = "flamegraph").then(|| d.join("s.svg")),
            pprof: Some(d.join("s.pb.gz")),
            chrome_trace: Some(d.join("t.json")),
            recording: None,
        };
        let mut e = a.open(true, false, false).unwrap();
        let func = Func {
            scope: Scope::Vmlinux,
            name: "__x64_sys_getpgid".into(),
            btf_id: 1,
            proto: Proto {
                params: vec![],
                ret: trace::ValueKind::Signed(64),
                ret_format: Default::default(),
            },
            exact: true,
            addr: None,
        };
        let event = |kind, ts_ns, duration_ns| Event {
            ts_ns,
            func: 0,
            kind,
            args: vec![],
            strings: vec![],
            symbols: Default::default(),
            pointees: Default::default(),
            ret: 0,
            duration_ns,
            tgid: 7,
            tid: 7,
            comm: "t".into(),
        };
        let mut main = Events::default();
        {
            let mut r = e.report(&mut main);
            r.event(&event(EventKind::Entry, 1_000, 0), &func).unwrap();
            r.event(&event(EventKind::Exit, 3_000, 2_000), &func)
                .unwrap();
        }
        assert_eq!(main.0, 0, "the events are the timeline's alone");
        let stack = Stack {
            function: "__x64_sys_getpgid".into(),
            pid: 7,
            count: 3,
            kernel: vec![StackFrame {
                addr: 0xffff_0000,
                name: FrameName::Symbol(Symbol {
                    name: "do_syscall_64".into(),
                    offset: 0x80,
                    kind: SymbolKind::Function,
                    file: None,
                    line: None,
                    module: None,
                    inlined: vec![],
                }),
            }],
            user: vec![],
        };
        e.finish("t", Some(vec![stack]), &super::super::tests::summary())
            .unwrap();
        let read = |n: &str| std::fs::read(d.join(n)).unwrap();
        assert_eq!(read("s.folded"), b"do_syscall_64;__x64_sys_getpgid 3\n");
        assert_eq!(read("s.pb.gz")[..2], [0x1f, 0x8b], "gzip");
        if cfg!(feature = "flamegraph") {
            let svg = String::from_utf8(read("s.svg")).unwrap();
            assert!(svg.contains("<title>do_syscall_64 (3 calls, 100.00%)</title>"));
        }
        let t: serde_json::Value = serde_json::from_slice(&read("t.json")).unwrap();
        let slices: Vec<_> = t["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["ph"] == "X")
            .map(|e| {
                (
                    e["name"].as_str().unwrap(),
                    e["ts"].as_f64(),
                    e["dur"].as_f64(),
                )
            })
            .collect();
        assert_eq!(slices, [("__x64_sys_getpgid", Some(1.0), Some(2.0))]);
        let _ = std::fs::remove_dir_all(&d);
    }

    /// The call graph's profile: exclusive time per path.
    #[test]
    fn a_call_graph_is_written_from_the_summary() {
        use bpfmux::trace::graph::GraphNode;
        let d = scratch("exports-graph");
        let e = ExportArgs {
            folded: Some(d.join("g.folded")),
            ..Default::default()
        }
        .open(false, true, false)
        .unwrap();
        let mut s = super::super::tests::summary();
        s.graph = Some(vec![GraphNode {
            function: "outer".into(),
            calls: 2,
            inclusive_ns: 30,
            exclusive_ns: 10,
            children: vec![GraphNode {
                function: "inner".into(),
                calls: 2,
                inclusive_ns: 20,
                exclusive_ns: 20,
                children: vec![],
            }],
        }]);
        e.finish("t", None, &s).unwrap();
        assert_eq!(
            std::fs::read_to_string(d.join("g.folded")).unwrap(),
            "outer 10\nouter;inner 20\n"
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_file_that_cannot_be_created_fails_first() {
        let e = error(args(Some("/nonexistent-dir/x.folded"), None).open(true, false, false));
        assert!(e.starts_with("--folded /nonexistent-dir/x.folded: "), "{e}");
    }
}
