//! Count the calls of every kernel function a glob selects, for a few
//! seconds, with the best engine this kernel has: the library's whole trace
//! lifecycle (plan → attach → run → detach → summary) in one screen.
//!
//! `cargo run --example trace_counts -- 'vfs_*' 3` as root, on a kernel that
//! lets BPF use fentry or kprobes (the project's guest: `vm/run -- ...`).

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use bpfmux::trace::{self, Control, PlainText, Report, RunOptions, Session, TraceOptions};

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn run() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let glob = args.next().unwrap_or_else(|| "vfs_*".into());
    let secs: f64 = args.next().map_or(Ok(3.0), |s| s.parse())?;

    // Which functions, and how (no engine given: the best one that probes yes).
    let opts = TraceOptions {
        patterns: vec![glob.parse()?],
        ..Default::default()
    };
    let plan = trace::plan(opts)?;
    println!(
        "{} functions with engine {}",
        plan.selection.funcs.len(),
        plan.engine
    );

    // Attach: a signal handler would set `cancel` to abandon it midway.
    let cancel = AtomicBool::new(false);
    let quiet = |_: usize| {};
    let ctl = Control {
        progress: &quiet,
        cancel: &cancel,
        detached: &quiet,
    };
    let tracer = plan.attach(ctl)?;

    // Run: a line per function called in each second, then the totals.
    let run = RunOptions {
        interval: Duration::from_secs(1),
        duration: Some(Duration::from_secs_f64(secs)),
        ..Default::default()
    };
    let mut report = PlainText::new(std::io::stdout().lock(), false, Some(20), true);
    let mut session = Session::new(tracer, run);
    let window = session.run(&mut || false, &mut report)?;
    session.detach(&quiet);
    let summary = session.summary(&window)?;
    report.summary(&summary)?;
    Ok(())
}
