//! One program needs no mechanism at all: load it as XDP and let the link
//! run it. No call, no branch, no trampoline (so this also works where the
//! kernel refuses freplace).

use std::os::fd::AsFd;
use std::path::Path;

use crate::xdp::{invalid, Context, Result};

use super::{Built, Engine, Previous};
use crate::sys::bpf_ops;
use crate::xdp::program::{self, LoadAs, Resolved};
use crate::xdp::state::{ProgRecord, SetRecord};
use crate::xdp::EngineKind;

pub struct Direct;

impl Engine for Direct {
    fn kind(&self) -> EngineKind {
        EngineKind::Direct
    }

    fn unavailable(&self, n: usize) -> Option<String> {
        (n != 1).then(|| format!("runs exactly one program, not {n}"))
    }

    fn build(&self, set: &[Resolved], _previous: Option<Previous<'_>>) -> Result<Built> {
        let [res] = set else {
            invalid!("the direct engine runs exactly one program");
        };
        let prog = program::load(res, LoadAs::Xdp)?;
        let info = bpf_ops::prog_info(prog.as_fd()).context("program info")?;
        let head = prog.try_clone().context("duplicate program descriptor")?;
        Ok(Built {
            head,
            pins: vec![("prog-0".into(), prog)],
            progs: vec![ProgRecord {
                name: res.origin.program.clone(),
                prog_id: info.id,
                chain_on: res.spec.chain_on,
                origin: res.origin.clone(),
            }],
            kept: 0,
        })
    }

    fn check(&self, record: &SetRecord, _generation: &Path) -> Vec<String> {
        match record.progs.as_slice() {
            [p] if p.prog_id == record.head_prog_id => vec![],
            [p] => vec![format!(
                "link runs program {} but the set's program is {}",
                record.head_prog_id, p.prog_id
            )],
            ps => vec![format!("direct set with {} programs", ps.len())],
        }
    }
}
