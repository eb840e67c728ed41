//! kprobe.multi (fprobe, 5.18+) for counts, kprobe.session (6.10+) when the
//! exit side is needed: one program, one link over all functions. Targets
//! go by symbol address when selection found one for every function (the
//! kernel then resolves no names), by name otherwise (exact names).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use libbpf_rs::libbpf_sys;

use super::{
    attach_bisect, At, AttachError, Breakdown, Control, Engine, EngineKind, Refused, Targets,
};
use crate::sys::bpf::{self, KprobeTargets};
use crate::trace::program::{Entry, TraceObject};

pub struct KprobeMulti {
    links: Vec<OwnedFd>,
    prog: Option<OwnedFd>,
    breakdown: Breakdown,
}

impl KprobeMulti {
    pub fn new() -> Self {
        Self {
            links: Vec::new(),
            prog: None,
            breakdown: Breakdown::default(),
        }
    }
}

impl KprobeMulti {
    /// The program and its attach type: a session when exits are seen.
    fn program_for(t: &Targets<'_>) -> (Entry, u32) {
        if t.exit.needed() {
            (Entry::KprobeSession, libbpf_sys::BPF_TRACE_KPROBE_SESSION)
        } else {
            (Entry::KprobeEntry, libbpf_sys::BPF_TRACE_KPROBE_MULTI)
        }
    }
}

impl Engine for KprobeMulti {
    fn kind(&self) -> EngineKind {
        EngineKind::KprobeMulti
    }

    fn probe_programs(
        &self,
        obj: &TraceObject,
        t: &Targets<'_>,
    ) -> Result<Vec<OwnedFd>, AttachError> {
        super::probe_load(obj, &[Self::program_for(t)], t, false, false)
    }

    fn attach(
        &mut self,
        obj: &TraceObject,
        t: &Targets<'_>,
        ctl: Control<'_>,
    ) -> Result<Vec<Refused>, AttachError> {
        let (entry, attach_type) = Self::program_for(t);
        let mut bd = Breakdown::default();
        let prog = bd
            .load(|| obj.load_prog(entry, attach_type, None, 0))
            .at("loading the kprobe program")?;
        let prog_fd = prog.as_raw_fd();
        let by_addr = t.funcs.iter().all(|f| f.addr.is_some());
        let names: Vec<CString> = if by_addr {
            Vec::new()
        } else {
            t.funcs
                .iter()
                .map(|f| {
                    CString::new(f.name.as_str())
                        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
                        .at("function name with NUL")
                })
                .collect::<Result<_, _>>()?
        };
        let mut attach = |chunk: &[usize]| {
            let cookies: Vec<u64> = chunk.iter().map(|&i| t.cookies[i]).collect();
            if by_addr {
                let addrs: Vec<u64> = chunk
                    .iter()
                    .map(|&i| t.funcs[i].addr.unwrap_or(0))
                    .collect();
                bpf::link_create_kprobe_multi(
                    prog_fd,
                    attach_type,
                    KprobeTargets::Addrs(&addrs),
                    &cookies,
                )
            } else {
                let syms: Vec<CString> = chunk.iter().map(|&i| names[i].clone()).collect();
                bpf::link_create_kprobe_multi(
                    prog_fd,
                    attach_type,
                    KprobeTargets::Syms(&syms),
                    &cookies,
                )
            }
        };
        let all: Vec<usize> = (0..t.funcs.len()).collect();
        let (links, refused) = attach_bisect(&all, &mut attach, ctl, &mut bd).at_with(|| {
            format!(
                "kprobe.{} link on {} functions",
                if t.exit.needed() { "session" } else { "multi" },
                all.len()
            )
        })?;
        self.links = links;
        self.prog = Some(prog);
        self.breakdown = bd;
        Ok(refused)
    }

    fn detach(&mut self, progress: &(dyn Fn(usize) + Sync)) {
        self.links.clear();
        self.prog = None;
        progress(std::mem::take(&mut self.breakdown.link_funcs));
    }

    fn programs(&self) -> Vec<BorrowedFd<'_>> {
        self.prog.iter().map(|p| p.as_fd()).collect()
    }

    fn links(&self) -> usize {
        self.links.len()
    }

    fn breakdown(&self) -> Breakdown {
        self.breakdown.clone()
    }
}
