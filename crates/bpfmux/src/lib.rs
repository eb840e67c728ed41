//! bpfmux: attach BPF at scale.
//!
//! - [`features`]: what the running kernel offers, found by real probes.
//! - [`normalize`]: process addresses → mappings + file offsets + build IDs,
//!   via `PROCMAP_QUERY` with a text `/proc/<pid>/maps` fallback.
//! - [`symbolize`]: normalized user addresses and kernel addresses → symbols.
//! - [`trace`]: one program on many kernel functions (`bpfmux trace`).
//! - [`xdp`]: several XDP programs on one interface, chained by return code.
//!
//! # A trace, from patterns to summary
//!
//! ```text
//!  TraceOptions ─ trace::plan() ──▶ Plan ───── Plan::attach(Control) ──▶ Tracer
//!  (patterns, engine,    selection + engine,     links made; counting     │
//!   filters, latency,    nothing loaded          starts once all are in   │
//!   errors, graph,         │ Report::planned(&plan)  Report::attached(&tracer)
//!   inject)                                                                │
//!                                                                          ▼
//!  RunOptions ─────────────────────────────────────────▶ Session::new(tracer, run)
//!  (interval, duration)                                                    │
//!        ┌──── Report::event / error_chain / interval ◀── Session::run(stop, report)
//!        │                                                                 │
//!        │                                            Session::detach(progress)
//!        │                                            (counting stops first)
//!        │                                                                 │
//!        └──── Report::summary(&Summary) ◀──────── Session::summary(&window)
//!                                                   (totals, stacks symbolized,
//!                                                    errors per errno, call graph)
//! ```
//!
//! Every [`trace::Report`] form can carry [`trace::Notes`]: what the run
//! says about itself (the plan, the attach, times and losses at the end) as
//! lines on a writer of their own. The library's text names no program: the
//! caller gives the prefix and, through [`trace::Hint`], its own words for
//! how to see more or how to stop.
//!
//! An error or a cancel at any step leaves nothing attached: [`trace::Plan::attach`]
//! detaches what it made before it returns the error, and dropping a
//! [`trace::Tracer`] or [`trace::Session`] closes every link.
//!
//! After the summary, [`trace::export`] writes what other tools load: folded
//! stacks, flame graphs and pprof profiles of [`trace::Session::stacks`] or
//! the summary's call graph, and (a [`trace::Report`] beside the run's own,
//! through [`trace::Tee`]) a Chrome trace timeline of per-call events.
//!
//! The examples (`cargo run --example NAME`) show one capability each:
//! `features` (what this kernel offers), `symbolize_self` (normalize and
//! symbolize this process's own stack), `export_profiles` (every output of
//! `trace::export` from a made-up run), `trace_counts` (count the calls of a
//! glob; root on a kernel with fentry or kprobes) and `xdp_chain` (two XDP
//! programs on one interface; root).

mod bpf;
pub mod features;
pub mod normalize;
pub mod symbolize;
mod sys;
pub mod trace;
pub mod xdp;

/// An error and its sources in one line, `outer: inner: ...`: what a
/// message embeds when it quotes an error it does not carry as a source.
pub(crate) fn error_text(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut next = e.source();
    while let Some(s) = next {
        text.push_str(": ");
        text.push_str(&s.to_string());
        next = s.source();
    }
    text
}
