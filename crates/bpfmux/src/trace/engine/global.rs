//! This series' global-trampoline backend for tracing_multi: the same link
//! as upstream's with `link_create.flags = BPF_F_TRACING_MULTI_GLOBAL`, so
//! the kernel runs every function through one shared trampoline and a
//! per-function metadata lookup instead of building a trampoline each.
//! Chosen only when the feature probe saw the kernel accept that flag.
//!
//! The exit side is fsession.multi where the series' fsession patch is in
//! the kernel, else an fexit.multi link next to the entry one (see
//! [`super::tracing_multi`]), which every series kernel accepts.

use std::os::fd::{AsRawFd, BorrowedFd};

use libbpf_rs::libbpf_sys;

use super::tracing_multi::TracingMulti;
use super::{Breakdown, Control, Engine, EngineKind, Refused, Targets};
use crate::features::KernelBtf;
use crate::sys::bpf;
use crate::trace::program::TraceObject;

/// Functions the exit probe attaches to: test stubs every kernel with
/// BPF has, never called outside BPF selftests.
const PROBE_TARGETS: &[&str] = &["bpf_fentry_test1", "bpf_fentry_test2"];

/// Why the global backend cannot take an fexit.multi program here (`None`:
/// it can): such a link with the global flag on one function.
pub fn exit_unavailable(btf: &KernelBtf) -> Option<String> {
    let Some((target, id)) = btf.first_func(PROBE_TARGETS) else {
        return Some(format!(
            "no function to probe fexit.multi on (looked for {PROBE_TARGETS:?})"
        ));
    };
    let step = format!("fexit.multi link with BPF_F_TRACING_MULTI_GLOBAL on {target}");
    let prog = match bpf::load_trivial_prog(
        libbpf_sys::BPF_PROG_TYPE_TRACING,
        bpf::BPF_TRACE_FEXIT_MULTI,
        0,
    ) {
        Ok(p) => p,
        Err(e) => return Some(format!("loading an fexit.multi program: {e}")),
    };
    match bpf::link_create_tracing_multi(
        prog.as_raw_fd(),
        bpf::BPF_TRACE_FEXIT_MULTI,
        bpf::BPF_F_TRACING_MULTI_GLOBAL,
        &[id],
        None,
    ) {
        Ok(_link) => None,
        Err(e) => Some(format!("{step}: {e}")),
    }
}

pub struct Global(TracingMulti);

impl Global {
    pub fn new() -> Self {
        Self(TracingMulti::new(true))
    }
}

impl Engine for Global {
    fn kind(&self) -> EngineKind {
        EngineKind::Global
    }

    fn attach(
        &mut self,
        obj: &TraceObject,
        targets: &Targets<'_>,
        ctl: Control<'_>,
    ) -> anyhow::Result<Vec<Refused>> {
        self.0.attach(obj, targets, ctl)
    }

    fn detach(&mut self, progress: &(dyn Fn(usize) + Sync)) {
        self.0.detach(progress)
    }

    fn programs(&self) -> Vec<BorrowedFd<'_>> {
        self.0.programs()
    }

    fn links(&self) -> usize {
        self.0.links()
    }

    fn breakdown(&self) -> Breakdown {
        self.0.breakdown()
    }
}
