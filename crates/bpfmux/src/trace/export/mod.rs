//! Outputs other tools load: a run's stacks or call graph as folded stacks
//! ([`folded`], the `frame;frame;frame count` lines of flamegraph.pl and
//! inferno), a flame graph SVG (`flamegraph`, drawn by the `inferno`
//! crate; cargo feature `flamegraph`), a pprof `profile.proto` ([`pprof`],
//! gzip-compressed, what `go tool pprof`, Parca and Pyroscope read); and
//! per-call events as a Chrome trace-event timeline ([`chrome`], what the
//! Perfetto UI and `chrome://tracing` open).
//!
//! The three stack formats are written from one [`Profile`]: samples, each
//! a path of frames from the root with its values, made from what every
//! engine reports alike (the [`Stack`]s of [`super::Session::stacks`] or
//! the summary's call graph), so a file does not depend on the engine that
//! recorded it:
//!
//! - [`Profile::from_stacks`]: one sample per stack and process, its frames
//!   the user frames (outermost first), then the kernel frames, then the
//!   traced function, unless the innermost kernel frame is already in it;
//!   one value, the calls (`calls`/`count`). The programs count calls per
//!   stack, not their time: a stack profile has no latency, also with
//!   latencies measured (those are per function).
//! - [`Profile::from_graph`]: one sample per node of the call graph, its
//!   frames the path of traced calls from the outermost; two values, the
//!   calls and the node's exclusive time (`time`/`nanoseconds`), so that a
//!   function's cumulative time in pprof, and its width in a flame graph,
//!   is its inclusive time.
//!
//! Timelines need the time of each call, which only per-call events carry:
//! the counters, latency histograms and call graph are added up in the
//! programs, call by call, and no call's own time reaches user space. So
//! [`chrome::ChromeTrace`] is a [`super::Report`] that makes a slice of
//! every exit event with a duration (arguments from its entry event).
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::fs::File;
//! use std::sync::atomic::AtomicBool;
//! use std::time::Duration;
//! use bpfmux::trace::{self, export, Control, RunOptions, Session};
//!
//! let opts = trace::TraceOptions {
//!     patterns: vec!["vfs_read".parse()?],
//!     kstack: true,
//!     ustack: true,
//!     ..Default::default()
//! };
//! let (quiet, cancel) = (|_: usize| {}, AtomicBool::new(false));
//! let ctl = Control { progress: &quiet, cancel: &cancel, detached: &quiet };
//! let tracer = trace::plan(opts)?.attach(ctl)?;
//! let run = RunOptions { duration: Some(Duration::from_secs(5)), ..Default::default() };
//! let mut session = Session::new(tracer, run);
//! let mut report = trace::PlainText::new(std::io::stdout(), false, None, false);
//! session.run(&mut || false, &mut report)?;
//! session.detach(&quiet);
//! let profile = export::Profile::from_stacks(&session.stacks()?);
//! export::folded::write(&mut File::create("vfs_read.folded")?, &profile)?;
//! export::pprof::write(File::create("vfs_read.pb.gz")?, &profile)?;
//! # Ok(())
//! # }
//! ```

pub mod chrome;
#[cfg(feature = "flamegraph")]
pub mod flamegraph;
pub mod folded;
pub mod pprof;

use std::borrow::Cow;
use std::io;
use std::path::Path;

use super::graph::GraphNode;
use super::stacks::{FrameName, Stack, StackFrame};

/// Why an output could not be written.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A flame graph needs at least one sample with a value above 0 (the
    /// file then holds the drawing library's own message saying so).
    #[error("nothing to draw: no stack with a value above 0")]
    Empty,
    /// The writer's error, as it was.
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// What a sample value measures, as pprof names it: `calls`/`count`,
/// `time`/`nanoseconds`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ValueType {
    /// What is measured.
    pub kind: &'static str,
    /// In what unit.
    pub unit: &'static str,
}

/// Calls, counted.
pub const CALLS: ValueType = ValueType {
    kind: "calls",
    unit: "count",
};

/// Time, in nanoseconds.
pub const TIME_NS: ValueType = ValueType {
    kind: "time",
    unit: "nanoseconds",
};

/// Samples with a path of frames each, from what a run recorded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Profile {
    /// What each of a sample's values measures, in order.
    pub sample_types: Vec<ValueType>,
    /// The value one-value formats (folded stacks, flame graphs) show:
    /// an index into `sample_types`.
    pub main: usize,
    /// The samples.
    pub samples: Vec<Sample>,
    /// How long the run lasted, when known (pprof shows it).
    pub duration_ns: Option<u64>,
}

/// One path of frames and what was measured on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sample {
    /// Frames, outermost (the root) first.
    pub frames: Vec<Frame>,
    /// One per [`Profile::sample_types`].
    pub values: Vec<u64>,
    /// The process, when the sample is one process's.
    pub pid: Option<u32>,
}

/// One frame: an address and what runs there, or a traced function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// The address, when the frame is one (a call graph's frames are
    /// functions, not addresses).
    pub addr: Option<u64>,
    /// The functions at the address, the one it is in first, then those
    /// inlined there, the innermost last. Empty: no symbol covers it.
    pub functions: Vec<Function>,
    /// The file it is in, when known (a binary, a library, a kernel
    /// module).
    pub module: Option<String>,
    /// Where it was: kernel or user space.
    pub side: Side,
}

/// Where a frame runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// In the kernel (a traced function is a kernel frame).
    Kernel,
    /// In a process.
    User,
}

/// A function of a [`Frame`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Function {
    /// Its name (demangled).
    pub name: String,
    /// The source file, where DWARF says.
    pub file: Option<String>,
    /// The line in it, where DWARF says.
    pub line: Option<u32>,
}

impl Function {
    fn named(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            file: None,
            line: None,
        }
    }
}

impl Frame {
    /// A traced function, by name (`module:name` keeps only `name`, as
    /// kallsyms names it in a stack).
    fn traced(function: &str) -> Self {
        let (module, name) = match function.split_once(':') {
            Some((m, n)) => (Some(m.to_string()), n),
            None => (None, function),
        };
        Self {
            addr: None,
            functions: vec![Function::named(name)],
            module,
            side: Side::Kernel,
        }
    }

    fn of(f: &StackFrame, side: Side) -> Self {
        let text = |p: &Path| p.to_string_lossy().into_owned();
        let (functions, module) = match &f.name {
            FrameName::Symbol(s) => {
                let mut v = vec![Function {
                    name: s.name.clone(),
                    file: s.file.as_deref().map(text),
                    line: s.line,
                }];
                v.extend(s.inlined.iter().map(|i| Function {
                    name: i.name.clone(),
                    file: i.file.as_deref().map(text),
                    line: i.line,
                }));
                (v, s.module.as_deref().map(text))
            }
            FrameName::File(p) => (Vec::new(), Some(text(p))),
            FrameName::Jit | FrameName::Unknown => (Vec::new(), None),
        };
        Self {
            addr: Some(f.addr),
            functions,
            module,
            side,
        }
    }

    /// Its names, outermost first, for formats that name frames by text:
    /// each function's name; without one, `[file name]` (the last path
    /// component of its module) or `[unknown]`, as stackcollapse-perf
    /// names frames `perf script` has no symbol for.
    pub fn names(&self) -> Vec<Cow<'_, str>> {
        if !self.functions.is_empty() {
            return self
                .functions
                .iter()
                .map(|f| f.name.as_str().into())
                .collect();
        }
        vec![match &self.module {
            Some(m) => format!("[{}]", m.rsplit('/').next().unwrap_or(m)).into(),
            None => "[unknown]".into(),
        }]
    }

    /// The innermost function's name.
    fn innermost(&self) -> Option<&str> {
        self.functions.last().map(|f| f.name.as_str())
    }
}

impl Profile {
    /// Calls per stack (see the module docs): one sample per [`Stack`].
    pub fn from_stacks(stacks: &[Stack]) -> Self {
        let samples = stacks
            .iter()
            .map(|s| {
                let mut frames: Vec<Frame> = s
                    .user
                    .iter()
                    .rev()
                    .map(|f| Frame::of(f, Side::User))
                    .collect();
                frames.extend(s.kernel.iter().rev().map(|f| Frame::of(f, Side::Kernel)));
                let leaf = Frame::traced(&s.function);
                let kernel_leaf = frames.last().filter(|f| f.side == Side::Kernel);
                if kernel_leaf.and_then(Frame::innermost) != leaf.innermost() {
                    frames.push(leaf);
                }
                Sample {
                    frames,
                    values: vec![s.count],
                    pid: Some(s.pid),
                }
            })
            .collect();
        Self {
            sample_types: vec![CALLS],
            main: 0,
            samples,
            duration_ns: None,
        }
    }

    /// Calls and exclusive time per path of traced calls (see the module
    /// docs): one sample per node of the call graph.
    pub fn from_graph(roots: &[GraphNode]) -> Self {
        fn walk(n: &GraphNode, path: &mut Vec<Frame>, out: &mut Vec<Sample>) {
            path.push(Frame::traced(&n.function));
            out.push(Sample {
                frames: path.clone(),
                values: vec![n.calls, n.exclusive_ns],
                pid: None,
            });
            for c in &n.children {
                walk(c, path, out);
            }
            path.pop();
        }
        let mut samples = Vec::new();
        for r in roots {
            walk(r, &mut Vec::new(), &mut samples);
        }
        Self {
            sample_types: vec![CALLS, TIME_NS],
            main: 1,
            samples,
            duration_ns: None,
        }
    }

    /// The same, with the run's length (pprof shows it).
    pub fn with_duration_ns(mut self, ns: u64) -> Self {
        self.duration_ns = Some(ns);
        self
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::symbolize::{InlinedFrame, Symbol, SymbolKind};

    pub(crate) fn sym(name: &str, offset: u64) -> FrameName {
        FrameName::Symbol(Symbol {
            name: name.into(),
            offset,
            kind: SymbolKind::Function,
            file: None,
            line: None,
            module: None,
            inlined: vec![],
        })
    }

    pub(crate) fn frame(addr: u64, name: FrameName) -> StackFrame {
        StackFrame { addr, name }
    }

    /// Two processes calling `__x64_sys_getpgid` through two user paths
    /// (`main > a > b`, `main > c > b`), one frame of libc with no symbol,
    /// `b` with a function inlined in it; a third stack, of kprobe's kind,
    /// whose innermost kernel frame is the traced function itself.
    pub(crate) fn stacks() -> Vec<Stack> {
        let kernel = |f: &str| {
            vec![
                frame(0xffff_0010, sym(f, 0x9)),
                frame(0xffff_0020, sym("do_syscall_64", 0x80)),
                frame(0xffff_0030, FrameName::Jit),
            ]
        };
        let b_inlined = FrameName::Symbol(Symbol {
            name: "b".into(),
            offset: 4,
            kind: SymbolKind::Function,
            file: Some("/src/p.c".into()),
            line: Some(7),
            module: Some("/usr/bin/p".into()),
            inlined: vec![InlinedFrame {
                name: "helper".into(),
                file: Some("/src/h.h".into()),
                line: Some(3),
            }],
        });
        let user = |mid: &str| {
            vec![
                frame(0x1000, b_inlined.clone()),
                frame(0x2000, sym(mid, 0x10)),
                frame(0x3000, sym("main", 0x20)),
                frame(0x7f00, FrameName::File("/usr/lib/libc.so.6".into())),
            ]
        };
        vec![
            Stack {
                function: "__x64_sys_getpgid".into(),
                pid: 42,
                count: 3,
                kernel: kernel("entry_SYSCALL_64"),
                user: user("a"),
            },
            Stack {
                function: "__x64_sys_getpgid".into(),
                pid: 43,
                count: 1,
                kernel: kernel("entry_SYSCALL_64"),
                user: user("c"),
            },
            Stack {
                function: "__x64_sys_getpgid".into(),
                pid: 42,
                count: 2,
                kernel: vec![
                    frame(0xffff_0040, sym("__x64_sys_getpgid", 0x4)),
                    frame(0xffff_0020, sym("do_syscall_64", 0x80)),
                ],
                user: vec![frame(0x3000, sym("main", 0x20))],
            },
        ]
    }

    fn names(s: &Sample) -> Vec<String> {
        s.frames
            .iter()
            .flat_map(Frame::names)
            .map(Cow::into_owned)
            .collect()
    }

    #[test]
    fn stacks_become_root_first_paths_ending_in_the_traced_function() {
        let p = Profile::from_stacks(&stacks());
        assert_eq!(p.sample_types, [CALLS]);
        assert_eq!(
            names(&p.samples[0]),
            [
                "[libc.so.6]",
                "main",
                "a",
                "b",
                "helper",
                "[unknown]",
                "do_syscall_64",
                "entry_SYSCALL_64",
                "__x64_sys_getpgid"
            ]
        );
        assert_eq!((p.samples[0].values[0], p.samples[0].pid), (3, Some(42)));
        // Already the innermost kernel frame: not again.
        assert_eq!(
            names(&p.samples[2]),
            ["main", "do_syscall_64", "__x64_sys_getpgid"]
        );
        let f = &p.samples[0].frames[3];
        assert_eq!((f.addr, f.side), (Some(0x1000), Side::User));
        assert_eq!(f.functions[1].file.as_deref(), Some("/src/h.h"));
    }

    /// `rt_sigaction ×50 > do_sigaction ×50`, and a module's `m:f` once.
    pub(crate) fn graph() -> Vec<GraphNode> {
        let node = |f: &str, calls, incl, excl, children| GraphNode {
            function: f.into(),
            calls,
            inclusive_ns: incl,
            exclusive_ns: excl,
            children,
        };
        vec![
            node(
                "__x64_sys_rt_sigaction",
                50,
                2400,
                1900,
                vec![node("do_sig;action", 50, 500, 500, vec![])],
            ),
            node("m:f", 1, 10, 10, vec![]),
        ]
    }

    #[test]
    fn a_call_graph_becomes_a_sample_per_node() {
        let p = Profile::from_graph(&graph());
        assert_eq!((p.sample_types.clone(), p.main), (vec![CALLS, TIME_NS], 1));
        let got: Vec<_> = p
            .samples
            .iter()
            .map(|s| (names(s).join("/"), s.values.clone()))
            .collect();
        assert_eq!(
            got,
            [
                ("__x64_sys_rt_sigaction".into(), vec![50, 1900]),
                ("__x64_sys_rt_sigaction/do_sig;action".into(), vec![50, 500]),
                ("f".into(), vec![1, 10]),
            ]
        );
        assert_eq!(p.samples[2].frames[0].module.as_deref(), Some("m"));
    }
}
