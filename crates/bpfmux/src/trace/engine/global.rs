//! This series' global-trampoline backend for tracing_multi: the same link
//! as upstream's with `link_create.flags = BPF_F_TRACING_MULTI_GLOBAL`, so
//! the kernel runs every function through one shared trampoline and a
//! per-function metadata lookup instead of building a trampoline each.
//! Chosen only when the feature probe saw the kernel accept that flag.
//!
//! The exit side is fsession.multi where the series' fsession patch is in
//! the kernel, else an fexit.multi link next to the entry one (see
//! [`super::tracing_multi`]), which every series kernel accepts
//! ([`crate::features::fexit_multi_global`] probes it).

use std::os::fd::BorrowedFd;

use super::tracing_multi::TracingMulti;
use super::{Breakdown, Control, Engine, EngineKind, Refused, Targets};
use crate::trace::program::TraceObject;

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
