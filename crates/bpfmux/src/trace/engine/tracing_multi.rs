//! Upstream tracing_multi (Linux 7.2+): one program, one link over the BTF
//! ids of many functions; the kernel still builds a trampoline per function
//! but batches the ftrace updates. With `global` set the link asks for this
//! series' global-trampoline backend instead (`BPF_F_TRACING_MULTI_GLOBAL`).
//!
//! A link's ids must all belong to the program's attach BTF, so functions
//! are grouped by BTF object (vmlinux, each module), one program copy each.

use std::collections::BTreeMap;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use anyhow::Context as _;

use super::{attach_bisect, Engine, EngineKind, Progress, Refused, Targets};
use crate::sys::bpf;
use crate::trace::btf::module_btf_fd;
use crate::trace::pattern::Scope;
use crate::trace::program::{Entry, TraceObject};

pub struct TracingMulti {
    global: bool,
    // Declared before `progs`: links close first.
    links: Vec<OwnedFd>,
    progs: Vec<OwnedFd>,
}

impl TracingMulti {
    pub fn new(global: bool) -> Self {
        Self {
            global,
            links: Vec::new(),
            progs: Vec::new(),
        }
    }
}

impl Engine for TracingMulti {
    fn kind(&self) -> EngineKind {
        if self.global {
            EngineKind::Global
        } else {
            EngineKind::TracingMulti
        }
    }

    fn attach(
        &mut self,
        obj: &TraceObject,
        t: &Targets<'_>,
        progress: Progress<'_>,
    ) -> anyhow::Result<Vec<Refused>> {
        let (entry, attach_type) = if t.needs_exit {
            (Entry::MultiSession, bpf::BPF_TRACE_FSESSION_MULTI)
        } else {
            (Entry::MultiEntry, bpf::BPF_TRACE_FENTRY_MULTI)
        };
        let flags = if self.global {
            bpf::BPF_F_TRACING_MULTI_GLOBAL
        } else {
            0
        };
        let mut by_scope: BTreeMap<&Scope, Vec<usize>> = BTreeMap::new();
        for (i, f) in t.funcs.iter().enumerate() {
            by_scope.entry(&f.scope).or_default().push(i);
        }
        let mut refused = Vec::new();
        let mut links = Vec::new();
        let mut progs = Vec::new();
        for (scope, idx) in by_scope {
            let btf_fd = match scope {
                Scope::Vmlinux => None,
                Scope::Module(m) => {
                    Some(module_btf_fd(m).with_context(|| format!("finding BTF of module {m}"))?)
                }
            };
            let prog = obj
                .load_prog(entry, attach_type, btf_fd.as_ref().map(|f| f.as_fd()), 0)
                .with_context(|| format!("loading the {} program for {scope}", self.kind()))?;
            let prog_fd = prog.as_raw_fd();
            let mut attach = |chunk: &[usize]| {
                let ids: Vec<u32> = chunk.iter().map(|&i| t.funcs[i].btf_id).collect();
                let cookies: Vec<u64> = chunk.iter().map(|&i| t.cookies[i]).collect();
                bpf::link_create_tracing_multi(prog_fd, attach_type, flags, &ids, Some(&cookies))
            };
            let (l, r) = attach_bisect(&idx, &mut attach, progress).with_context(|| {
                format!("tracing_multi link on {} functions of {scope}", idx.len())
            })?;
            links.extend(l);
            refused.extend(r);
            progs.push(prog);
        }
        self.links = links;
        self.progs = progs;
        Ok(refused)
    }

    fn detach(&mut self) {
        self.links.clear();
        self.progs.clear();
    }

    fn programs(&self) -> Vec<BorrowedFd<'_>> {
        self.progs.iter().map(|p| p.as_fd()).collect()
    }

    fn links(&self) -> usize {
        self.links.len()
    }
}
