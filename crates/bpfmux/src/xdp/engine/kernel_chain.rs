//! The kernel chain-call engine: the series' BPF_PROG_CHAIN_* commands link
//! program A to program B keyed by A's return code (or any code), and the
//! kernel calls B when A returns it (kernel/README.md, "XDP chain calls").
//! No dispatcher, no trampoline, no tail call: the XDP link runs the first
//! program and the kernel follows the entries.
//!
//! A set of n programs becomes n plain XDP programs and, for each program but
//! the last, one entry per action of its `--chain-on` set (one wildcard entry
//! for `any`) naming the next one. The entries belong to the programs: when a
//! program is freed the kernel drops its entries, so a failed build leaves
//! nothing behind once its descriptors are closed, and a replaced set goes
//! away with its pins.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use crate::xdp::{AtStep as _, Context, Error, Result};

use super::{Built, Engine, Previous};
use crate::features::{self, Feature};
use crate::sys::bpf_ops;
use crate::sys::chain::{chain_add, chain_get, ChainEntry, BPF_F_CHAIN_WILDCARD, MAX_DEPTH};
use crate::xdp::action::{action_name, ActionSet};
use crate::xdp::program::{self, LoadAs, Resolved};
use crate::xdp::state::{ProgRecord, SetRecord};
use crate::xdp::EngineKind;

/// The kernel follows chains of at most this many programs.
pub const MAX_PROGS: usize = MAX_DEPTH;

/// What the kernel's refusals of an entry mean for the user, where the
/// errno alone does not say it.
fn explain_add_error(err: io::Error) -> Error {
    let why = match err.raw_os_error() {
        Some(libc::ENOSPC) => return crate::xdp::Refusal::NoChainSlot { source: err }.into(),
        Some(libc::EOPNOTSUPP) => {
            "chains need JIT-compiled programs (is net.core.bpf_jit_enable 0?)"
        }
        _ => return err.into(),
    };
    err.at_step(why.to_string())
}

/// The entries program i must own to continue on `chain_on` with the next
/// program (id `next_id`), in BPF_PROG_CHAIN_GET order.
fn entries_for(chain_on: ActionSet, next_id: u32) -> Vec<ChainEntry> {
    if chain_on == ActionSet::ANY {
        return vec![ChainEntry {
            retval: 0,
            flags: BPF_F_CHAIN_WILDCARD,
            next_prog_id: next_id,
        }];
    }
    chain_on
        .actions()
        .map(|a| ChainEntry {
            retval: a,
            flags: 0,
            next_prog_id: next_id,
        })
        .collect()
}

fn show(e: &ChainEntry) -> String {
    let on = if e.flags & BPF_F_CHAIN_WILDCARD != 0 {
        "any".to_string()
    } else {
        action_name(e.retval)
    };
    format!("{on} -> {}", e.next_prog_id)
}

pub struct KernelChain;

/// What `attach --engine kernel-chain` says on kernels without chain calls.
pub const NOT_AVAILABLE: &str = "kernel chain calls not available on this kernel";

impl Engine for KernelChain {
    fn kind(&self) -> EngineKind {
        EngineKind::KernelChain
    }

    fn unavailable(&self, n: usize) -> Option<String> {
        if n > MAX_PROGS {
            return Some(format!(
                "{n} programs, the kernel follows chains of at most {MAX_PROGS}"
            ));
        }
        let probe = features::probe(Feature::XdpChainCalls, &features::KernelBtf::load());
        match probe.status {
            features::Status::Yes => None,
            _ => Some(format!("{NOT_AVAILABLE} ({})", probe.detail)),
        }
    }

    // Programs of the live set are not reused: their entries name their
    // current successors, and changing them in place would let packets see
    // a half-changed chain. The new set is loaded and linked beside the old
    // one, and the caller swaps the link's head atomically.
    fn build(&self, set: &[Resolved], _previous: Option<Previous<'_>>) -> Result<Built> {
        let mut fds: Vec<OwnedFd> = Vec::with_capacity(set.len());
        let mut progs = Vec::with_capacity(set.len());
        for res in set {
            let fd = program::load(res, LoadAs::Xdp)?;
            let info = bpf_ops::prog_info(fd.as_fd()).context("program info")?;
            progs.push(ProgRecord {
                name: res.origin.program.clone(),
                prog_id: info.id,
                chain_on: res.spec.chain_on,
                origin: res.origin.clone(),
            });
            fds.push(fd);
        }
        // On an error below, dropping `fds` frees the programs and with them
        // every entry added so far.
        for i in 0..set.len().saturating_sub(1) {
            for e in entries_for(progs[i].chain_on, progs[i + 1].prog_id) {
                chain_add(fds[i].as_fd(), e.retval, fds[i + 1].as_fd(), e.flags)
                    .map_err(explain_add_error)
                    .with_context(|| {
                        format!(
                            "chain program {i} ({}) on {} to program {} ({})",
                            progs[i].name,
                            show(&e),
                            i + 1,
                            progs[i + 1].name
                        )
                    })?;
            }
        }
        let head = fds[0].try_clone().context("duplicate program descriptor")?;
        let pins = fds
            .into_iter()
            .enumerate()
            .map(|(i, fd)| (format!("prog-{i}"), fd))
            .collect();
        Ok(Built {
            head,
            pins,
            progs,
            kept: 0,
        })
    }

    fn check(&self, record: &SetRecord, _generation: &Path) -> Vec<String> {
        let mut problems = vec![];
        match record.progs.first() {
            Some(p) if p.prog_id == record.head_prog_id => {}
            Some(p) => problems.push(format!(
                "link runs program {} but the chain starts with {}",
                record.head_prog_id, p.prog_id
            )),
            None => return vec!["kernel-chain set without programs".into()],
        }
        for (i, p) in record.progs.iter().enumerate() {
            let want = match record.progs.get(i + 1) {
                Some(next) => entries_for(p.chain_on, next.prog_id),
                None => vec![],
            };
            let got = match bpf_ops::prog_fd_by_id(p.prog_id).and_then(|fd| chain_get(fd.as_fd())) {
                Ok(got) => got,
                Err(e) => {
                    problems.push(format!("program {i} (id {}): {e}", p.prog_id));
                    continue;
                }
            };
            if got != want {
                let list = |v: &[ChainEntry]| {
                    if v.is_empty() {
                        "none".to_string()
                    } else {
                        v.iter().map(show).collect::<Vec<_>>().join(", ")
                    }
                };
                problems.push(format!(
                    "program {i} (id {}): kernel chain entries {}, expected {}",
                    p.prog_id,
                    list(&got),
                    list(&want)
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
    fn add_errors_say_what_the_kernel_means() {
        let full = crate::error_text(&explain_add_error(io::Error::from_raw_os_error(
            libc::ENOSPC,
        )));
        assert!(
            full.contains("48") && full.contains("none is free"),
            "{full}"
        );
        let interp = crate::error_text(&explain_add_error(io::Error::from_raw_os_error(
            libc::EOPNOTSUPP,
        )));
        assert!(interp.contains("JIT"), "{interp}");
        let other = crate::error_text(&explain_add_error(io::Error::from_raw_os_error(
            libc::ELOOP,
        )));
        assert_eq!(other, io::Error::from_raw_os_error(libc::ELOOP).to_string());
    }

    #[test]
    fn entries_follow_chain_on() {
        let pass_tx = ActionSet((1 << 2) | (1 << 3));
        let e = entries_for(pass_tx, 7);
        assert_eq!(
            e.iter().map(|e| (e.retval, e.flags)).collect::<Vec<_>>(),
            vec![(2, 0), (3, 0)]
        );
        let any = entries_for(ActionSet::ANY, 7);
        assert_eq!(any.len(), 1);
        assert_eq!(any[0].flags, BPF_F_CHAIN_WILDCARD);
        assert!(entries_for(ActionSet(0), 7).is_empty());
    }
}
