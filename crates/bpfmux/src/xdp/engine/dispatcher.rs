//! bpfmux's own XDP dispatcher (see dispatcher.bpf.c): a fresh dispatcher
//! per set, configured through frozen read-only data, each user program
//! loaded as an extension (freplace) of one slot. Works on any kernel with
//! BPF trampolines (6.12, stock 7.3, ours).

use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use crate::xdp::{invalid, AtStep as _, Context, Error, Result};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::OpenObject;

use super::{Built, Engine, Previous};
use crate::sys::bpf_ops;
use crate::xdp::action::ActionSet;
use crate::xdp::program::{self, LoadAs, Resolved};
use crate::xdp::state::{ProgRecord, SetRecord};
use crate::xdp::EngineKind;

/// Slots in dispatcher.bpf.c (BPFMUX_XDP_SLOTS).
pub const SLOTS: usize = 16;

#[allow(
    clippy::all,
    dead_code,
    missing_docs,
    unused_imports,
    unsafe_op_in_unsafe_fn
)]
mod skel {
    include!(concat!(env!("OUT_DIR"), "/xdp_dispatcher.skel.rs"));
}

pub struct Dispatcher;

fn slot_func(i: usize) -> String {
    format!("bpfmux_slot{i}")
}

/// Loads a dispatcher whose slot i chains on `chain_on[i]`; only
/// `chain_on.len()` slots are used.
pub fn load_dispatcher(chain_on: &[ActionSet]) -> Result<OwnedFd> {
    if chain_on.len() > SLOTS {
        invalid!("at most {SLOTS} programs per interface");
    }
    let mut obj = MaybeUninit::<OpenObject>::uninit();
    let mut open = skel::DispatcherSkelBuilder::default()
        .open(&mut obj)
        .context("open dispatcher object")?;
    let rodata = open
        .maps
        .rodata_data
        .as_deref_mut()
        .context("dispatcher object has no .rodata")?;
    rodata.cfg.nr_slots = chain_on.len() as u32;
    for (i, set) in chain_on.iter().enumerate() {
        rodata.cfg.chain_on[i] = set.0;
    }
    let loaded = open.load().context("load the XDP dispatcher")?;
    loaded
        .progs
        .bpfmux_xdp_dispatcher
        .as_fd()
        .try_clone_to_owned()
        .context("duplicate dispatcher descriptor")
}

/// Explains the one refusal users will meet: kernels (or LSMs) that forbid
/// trampolines refuse extension programs with EPERM.
fn explain(e: Error, what: &str) -> Error {
    // EPERM only: the verifier's refusals are EACCES, a different story.
    let mut chain: Option<&(dyn std::error::Error + 'static)> = Some(&e);
    let mut eperm = false;
    while let Some(c) = chain {
        // An `Os` error stands in the chain as itself (a step's source in a box).
        let ours = c
            .downcast_ref::<Error>()
            .or_else(|| c.downcast_ref::<Box<Error>>().map(|b| &**b));
        let io = c.downcast_ref::<std::io::Error>().or(match ours {
            Some(Error::Os(io)) => Some(io),
            _ => None,
        });
        if let Some(io) = io {
            eperm |= io.raw_os_error() == Some(libc::EPERM)
                // libbpf-rs keeps the errno only in its message
                || (io.get_ref().is_some_and(|i| i.is::<libbpf_rs::Error>())
                    && c.to_string().ends_with("(os error 1)"));
        }
        chain = c.source();
    }
    if eperm {
        e.at_step(format!(
            "{what}: the kernel refused freplace (EPERM); the dispatcher needs BPF \
             trampolines (refused under some lockdown/LSM policies). A single program \
             attaches without them"
        ))
    } else {
        e.at_step(what.to_string())
    }
}

/// An extension program of the live set that is the same program as `res`
/// (same object file, unchanged, same function): it is kept running.
fn reusable(prev: &Previous<'_>, res: &Resolved, taken: &mut [bool]) -> Option<OwnedFd> {
    if prev.record.engine != EngineKind::Dispatcher {
        return None;
    }
    let (j, rec) = prev
        .record
        .progs
        .iter()
        .enumerate()
        .find(|(j, p)| !taken[*j] && p.origin == res.origin)?;
    let fd = bpf_ops::get_pinned(&prev.generation.join(format!("prog-{j}"))).ok()?;
    let id = bpf_ops::prog_info(fd.as_fd()).ok()?.id;
    (id == rec.prog_id).then(|| {
        taken[j] = true;
        fd
    })
}

impl Engine for Dispatcher {
    fn kind(&self) -> EngineKind {
        EngineKind::Dispatcher
    }

    fn unavailable(&self, n: usize) -> Option<String> {
        (n > SLOTS).then(|| format!("{n} programs, the dispatcher has {SLOTS} slots"))
    }

    fn build(&self, set: &[Resolved], previous: Option<Previous<'_>>) -> Result<Built> {
        let chain_on: Vec<ActionSet> = set.iter().map(|r| r.spec.chain_on).collect();
        let head = load_dispatcher(&chain_on)?;
        let mut pins = vec![("head".to_string(), head.try_clone()?)];
        let mut progs = vec![];
        let mut kept = 0;
        let mut taken = vec![false; previous.as_ref().map_or(0, |p| p.record.progs.len())];
        for (i, res) in set.iter().enumerate() {
            let func = slot_func(i);
            let btf_id = bpf_ops::prog_btf_func_id(head.as_fd(), &func)
                .with_context(|| format!("find {func} in the loaded dispatcher"))?;
            let reused = previous.as_ref().and_then(|p| reusable(p, res, &mut taken));
            let prog = match reused {
                Some(fd) => {
                    kept += 1;
                    fd
                }
                None => program::load(
                    res,
                    LoadAs::Extension {
                        target: &head,
                        func: &func,
                    },
                )
                .map_err(|e| explain(e, &format!("program {} for slot {i}", res.spec.display())))?,
            };
            let link =
                bpf_ops::link_create_freplace(prog.as_fd(), head.as_fd(), btf_id).map_err(|e| {
                    explain(
                        Error::Os(e),
                        &format!("attach {} to dispatcher slot {i}", res.spec.display()),
                    )
                })?;
            let id = bpf_ops::prog_info(prog.as_fd())?.id;
            progs.push(ProgRecord {
                name: res.origin.program.clone(),
                prog_id: id,
                chain_on: res.spec.chain_on,
                origin: res.origin.clone(),
            });
            pins.push((format!("prog-{i}"), prog));
            pins.push((format!("link-{i}"), link));
        }
        Ok(Built {
            head,
            pins,
            progs,
            kept,
        })
    }

    fn check(&self, record: &SetRecord, generation: &Path) -> Vec<String> {
        let mut problems = vec![];
        let head = match bpf_ops::prog_fd_by_id(record.head_prog_id) {
            Ok(fd) => fd,
            Err(e) => return vec![format!("dispatcher {}: {e}", record.head_prog_id)],
        };
        for (i, p) in record.progs.iter().enumerate() {
            let path = generation.join(format!("link-{i}"));
            let info = match bpf_ops::get_pinned(&path).and_then(|l| bpf_ops::link_info(l.as_fd()))
            {
                Ok(info) => info,
                Err(e) => {
                    problems.push(format!("slot {i}: {}: {e}", path.display()));
                    continue;
                }
            };
            let want_btf = bpf_ops::prog_btf_func_id(head.as_fd(), &slot_func(i)).ok();
            if info.prog_id != p.prog_id
                || info.target_obj_id != record.head_prog_id
                || Some(info.target_btf_id) != want_btf
            {
                problems.push(format!(
                    "slot {i}: link runs program {} on program {} function {}, expected {} on {}",
                    info.prog_id,
                    info.target_obj_id,
                    info.target_btf_id,
                    p.prog_id,
                    record.head_prog_id
                ));
            }
        }
        problems
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eperm_anywhere_in_the_chain_is_explained() {
        let eperm = || Error::Os(std::io::Error::from_raw_os_error(libc::EPERM));
        let said = |e: Error| crate::error_text(&explain(e, "program p for slot 0"));
        assert!(said(eperm()).contains("refused freplace (EPERM)"));
        let deeper = eperm().at_step("load".into()).at_step("outer".into());
        assert!(said(deeper).contains("refused freplace (EPERM)"));
        let boxed = Error::At {
            step: "outer".into(),
            source: Box::new(eperm()),
        };
        assert!(said(boxed).contains("refused freplace (EPERM)"));
        let eacces = Error::Os(std::io::Error::from_raw_os_error(libc::EACCES));
        assert!(said(eacces).starts_with("program p for slot 0: "));
    }
}
