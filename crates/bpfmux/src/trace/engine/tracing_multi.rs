//! Upstream tracing_multi (Linux 7.2+): one program, one link over the BTF
//! ids of many functions; the kernel still builds a trampoline per function
//! but batches the ftrace updates. With `global` set (the `global` engine)
//! the link asks for this series' global-trampoline backend instead
//! (`link_create.flags = BPF_F_TRACING_MULTI_GLOBAL`): the kernel runs every
//! function through one shared trampoline and a per-function metadata
//! lookup instead of building a trampoline each. It is chosen only when the
//! feature probe saw the kernel accept that flag.
//!
//! A link's ids must all belong to the program's attach BTF, so functions
//! are grouped by BTF object (vmlinux, each module), one program copy each.
//!
//! The exit side: fsession.multi (one program, one link) upstream and on
//! series kernels whose global backend has it; on older series kernels a
//! second link with an fexit.multi program, paired with the entry through
//! per-thread call stacks in the BPF program ([`ExitSide::Pair`]), which
//! every series kernel accepts ([`crate::features::fexit_multi_global`]
//! probes it).

use std::collections::BTreeMap;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use super::{
    attach_bisect, At, AttachError, Breakdown, Control, Engine, EngineKind, ExitSide, Refused,
    Targets,
};
use crate::sys::bpf;
use crate::trace::btf::module_btf_fd;
use crate::trace::pattern::Scope;
use crate::trace::program::{Entry, TraceObject};

/// The links of one batch, entry first: they close in this order, so no
/// exit runs without its entry having had the chance to record it.
type Batch = Vec<OwnedFd>;

pub struct TracingMulti {
    global: bool,
    // Declared before `progs`: links close first.
    links: Vec<Batch>,
    progs: Vec<OwnedFd>,
    breakdown: Breakdown,
}

impl TracingMulti {
    pub fn new(global: bool) -> Self {
        Self {
            global,
            links: Vec::new(),
            progs: Vec::new(),
            breakdown: Breakdown::default(),
        }
    }

    /// (entry point, attach type) of each program, entry first.
    fn programs_for(exit: ExitSide, inject: bool) -> Vec<(Entry, u32)> {
        if inject {
            return vec![(Entry::MultiFmodRet, bpf::BPF_MODIFY_RETURN_MULTI)];
        }
        match exit {
            ExitSide::None => vec![(Entry::MultiEntry, bpf::BPF_TRACE_FENTRY_MULTI)],
            ExitSide::Session => vec![(Entry::MultiSession, bpf::BPF_TRACE_FSESSION_MULTI)],
            ExitSide::Pair => vec![
                (Entry::MultiEntry, bpf::BPF_TRACE_FENTRY_MULTI),
                (Entry::MultiExit, bpf::BPF_TRACE_FEXIT_MULTI),
            ],
        }
    }
}

impl Engine for TracingMulti {
    fn probe_programs(
        &self,
        obj: &TraceObject,
        t: &Targets<'_>,
    ) -> Result<Vec<OwnedFd>, AttachError> {
        super::probe_load(obj, &Self::programs_for(t.exit, t.inject), t, false, true)
    }

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
        ctl: Control<'_>,
    ) -> Result<Vec<Refused>, AttachError> {
        let kinds = Self::programs_for(t.exit, t.inject);
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
        let mut bd = Breakdown::default();
        if by_scope.len() > 1 {
            bd.split.push(format!(
                "one link per BTF object ({}): a tracing_multi link takes functions of its \
                 program's attach BTF only",
                by_scope
                    .keys()
                    .map(|s| s.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        for (scope, idx) in by_scope {
            let btf_fd = match scope {
                Scope::Vmlinux => None,
                Scope::Module(m) => {
                    Some(module_btf_fd(m).at_with(|| format!("finding BTF of module {m}"))?)
                }
            };
            let mut scope_progs = Vec::new();
            for &(entry, attach_type) in &kinds {
                let prog = bd
                    .load(|| {
                        obj.load_prog(entry, attach_type, btf_fd.as_ref().map(|f| f.as_fd()), 0)
                    })
                    .at_with(|| {
                        format!("loading the {} {entry:?} program for {scope}", self.kind())
                    })?;
                scope_progs.push((prog, attach_type));
            }
            let mut attach = |chunk: &[usize]| {
                let ids: Vec<u32> = chunk.iter().map(|&i| t.funcs[i].btf_id).collect();
                let cookies: Vec<u64> = chunk.iter().map(|&i| t.cookies[i]).collect();
                // Exit first, entry last: every entry recorded has its exit.
                let mut batch = Vec::with_capacity(scope_progs.len());
                for (prog, attach_type) in scope_progs.iter().rev() {
                    batch.push(bpf::link_create_tracing_multi(
                        prog.as_raw_fd(),
                        *attach_type,
                        flags,
                        &ids,
                        Some(&cookies),
                    )?);
                }
                batch.reverse();
                Ok(batch)
            };
            let (l, r) = attach_bisect(&idx, &mut attach, ctl, &mut bd)
                .at_with(|| format!("tracing_multi link on {} functions of {scope}", idx.len()))?;
            links.extend(l);
            refused.extend(r);
            progs.extend(scope_progs.into_iter().map(|(p, _)| p));
        }
        // A try of the exit side made an entry and an exit link.
        bd.links = links.iter().map(Vec::len).sum();
        self.breakdown = bd;
        self.links = links;
        self.progs = progs;
        Ok(refused)
    }

    fn detach(&mut self, progress: &(dyn Fn(usize) + Sync)) {
        self.links.clear();
        self.progs.clear();
        progress(std::mem::take(&mut self.breakdown.link_funcs));
    }

    fn programs(&self) -> Vec<BorrowedFd<'_>> {
        self.progs.iter().map(|p| p.as_fd()).collect()
    }

    fn links(&self) -> usize {
        self.links.iter().map(Vec::len).sum()
    }

    fn breakdown(&self) -> Breakdown {
        self.breakdown.clone()
    }
}
