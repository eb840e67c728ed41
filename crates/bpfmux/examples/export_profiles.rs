//! Write every output of `trace::export` from a made-up run: the stacks of
//! a program whose `main > exited_a > exited_b` makes 3 getpgid system calls
//! and `main > exited_c > exited_b` 1, the call graph of 50 sigaction
//! queries and 10 getpgid, and the per-call events of 3 getpgid calls.
//! What a trace run gives these writers comes from the kernel; here it is
//! written out, so this runs on any host (`tests/pprof-go.sh` reads its
//! profiles with `go tool pprof`).
//!
//! `cargo run --example export_profiles -- DIR` writes into DIR:
//! `stacks.folded`, `stacks.svg`, `stacks.pb.gz`, `graph.folded`,
//! `graph.svg`, `graph.pb.gz` and `calls.json` (a Chrome trace).

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use bpfmux::symbolize::{Symbol, SymbolKind};
use bpfmux::trace::export::{self, chrome::ChromeTrace, Profile};
use bpfmux::trace::graph::GraphNode;
use bpfmux::trace::{
    Event, EventKind, FrameName, Func, Proto, Report, Scope, Stack, StackFrame, ValueKind,
};

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn run() -> anyhow::Result<()> {
    let dir = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| ".".into()));
    std::fs::create_dir_all(&dir)?;
    let file = |name: &str| -> anyhow::Result<BufWriter<File>> {
        Ok(BufWriter::new(File::create(dir.join(name))?))
    };

    let stacks = Profile::from_stacks(&stacks()).with_duration_ns(2_000_000_000);
    export::folded::write(file("stacks.folded")?, &stacks)?;
    export::pprof::write(file("stacks.pb.gz")?, &stacks)?;
    let graph = Profile::from_graph(&graph()).with_duration_ns(2_000_000_000);
    export::folded::write(file("graph.folded")?, &graph)?;
    export::pprof::write(file("graph.pb.gz")?, &graph)?;
    #[cfg(feature = "flamegraph")]
    {
        export::flamegraph::write(file("stacks.svg")?, &stacks, "calls per stack")?;
        export::flamegraph::write(file("graph.svg")?, &graph, "time in traced calls")?;
    }

    let mut timeline = ChromeTrace::new(file("calls.json")?);
    let getpgid = func("__x64_sys_getpgid");
    for i in 0..3u64 {
        let at = 1_000_000 + i * 10_000;
        timeline.event(&event(EventKind::Entry, at, 0), &getpgid)?;
        timeline.event(&event(EventKind::Exit, at + 2_500, 2_500), &getpgid)?;
    }
    timeline.finish()?;
    println!("wrote {}", Path::new(&dir).display());
    Ok(())
}

fn sym(name: &str, offset: u64, module: Option<&str>) -> FrameName {
    FrameName::Symbol(Symbol {
        name: name.into(),
        offset,
        kind: SymbolKind::Function,
        file: None,
        line: None,
        module: module.map(PathBuf::from),
        inlined: vec![],
    })
}

fn stacks() -> Vec<Stack> {
    let frame = |addr, name| StackFrame { addr, name };
    let kernel = || {
        vec![
            frame(0xffff_ffff_8130_1004, sym("__x64_sys_getpgid", 0x4, None)),
            frame(0xffff_ffff_8100_40dd, sym("do_syscall_64", 0xdd, None)),
            frame(
                0xffff_ffff_8200_0077,
                sym("entry_SYSCALL_64_after_hwframe", 0x77, None),
            ),
        ]
    };
    let exe = Some("/build/guest/exited-stack");
    let user = |via: &str, addr| {
        vec![
            frame(0x40_1136, sym("exited_b", 0x16, exe)),
            frame(addr, sym(via, 0x11, exe)),
            frame(0x40_1190, sym("main", 0x30, exe)),
            frame(
                0x7f3a_1202_9d90,
                FrameName::File("/usr/lib/x86_64-linux-gnu/libc.so.6".into()),
            ),
        ]
    };
    vec![
        Stack {
            function: "__x64_sys_getpgid".into(),
            pid: 91,
            count: 3,
            kernel: kernel(),
            user: user("exited_a", 0x40_1151),
        },
        Stack {
            function: "__x64_sys_getpgid".into(),
            pid: 91,
            count: 1,
            kernel: kernel(),
            user: user("exited_c", 0x40_1171),
        },
    ]
}

fn graph() -> Vec<GraphNode> {
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
            2_400_000,
            1_950_500,
            vec![node("do_sigaction", 50, 449_500, 449_500, vec![])],
        ),
        node("__x64_sys_getpgid", 10, 38_000, 38_000, vec![]),
    ]
}

fn func(name: &str) -> Func {
    Func {
        scope: Scope::Vmlinux,
        name: name.into(),
        btf_id: 0,
        proto: Proto {
            params: vec![],
            ret: ValueKind::Signed(64),
            ret_format: Default::default(),
        },
        exact: true,
        addr: None,
    }
}

fn event(kind: EventKind, ts_ns: u64, duration_ns: u64) -> Event {
    Event {
        ts_ns,
        func: 0,
        kind,
        args: vec![],
        strings: vec![],
        symbols: Default::default(),
        pointees: Default::default(),
        ret: 91,
        duration_ns,
        tgid: 91,
        tid: 91,
        comm: "exited-stack".into(),
    }
}
