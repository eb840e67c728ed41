//! This series' global-trampoline backend for tracing_multi: the same link
//! as upstream's with `link_create.flags = BPF_F_TRACING_MULTI_GLOBAL`, so
//! the kernel runs every function through one shared trampoline and a
//! per-function metadata lookup instead of building a trampoline each.
//! Chosen only when the feature probe saw the kernel accept that flag.

use std::os::fd::BorrowedFd;

use super::tracing_multi::TracingMulti;
use super::{Engine, EngineKind, Progress, Refused, Targets};
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
        progress: Progress<'_>,
    ) -> anyhow::Result<Vec<Refused>> {
        self.0.attach(obj, targets, progress)
    }

    fn detach(&mut self) {
        self.0.detach()
    }

    fn programs(&self) -> Vec<BorrowedFd<'_>> {
        self.0.programs()
    }

    fn links(&self) -> usize {
        self.0.links()
    }
}
