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
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::Path;

use anyhow::{Context, Result};
use libbpf_rs::libbpf_sys;

use super::action::{action_name, ActionSet, ACTION_NAMES};
use super::bpf_ops;
use super::engine::{Built, Engine, EngineKind, Previous};
use super::program::{self, LoadAs, Resolved};
use super::state::{ProgRecord, SetRecord};
use crate::features::{KernelBtf, Probe, Status};

/// Series UAPI (kernel/README.md): bpf commands after upstream 7.3's last
/// (BPF_PROG_ASSOC_STRUCT_OPS = 38).
pub const BPF_PROG_CHAIN_ADD: libc::c_long = 39;
pub const BPF_PROG_CHAIN_DEL: libc::c_long = 40;
pub const BPF_PROG_CHAIN_GET: libc::c_long = 41;
/// `flags`: the entry matches every return code without an exact entry.
pub const BPF_F_CHAIN_WILDCARD: u32 = 1;
/// The kernel refuses longer chains (BPF_PROG_CHAIN_MAX_DEPTH) with E2BIG.
pub const MAX_PROGS: usize = 16;

/// `union bpf_attr`'s `prog_chain` member.
#[repr(C)]
#[derive(Default)]
struct ChainAttr {
    prog_fd: u32,
    retval: u32,
    next_prog_fd: u32,
    flags: u32,
    entries: u64,
    count: u32,
    _pad: u32,
}

/// `struct bpf_prog_chain_entry`, as BPF_PROG_CHAIN_GET reports it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChainEntry {
    /// The return value (0 for the wildcard entry).
    pub retval: u32,
    /// BPF_F_CHAIN_WILDCARD for the wildcard entry.
    pub flags: u32,
    pub next_prog_id: u32,
}

fn chain_cmd(cmd: libc::c_long, attr: &mut ChainAttr) -> io::Result<()> {
    // SAFETY: attr is a valid, writable `prog_chain` member of union bpf_attr
    // and the size passed is its size.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut ChainAttr,
            std::mem::size_of::<ChainAttr>(),
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `prog` returning `retval` (any action without an exact entry, with
/// BPF_F_CHAIN_WILDCARD) continues with `next`.
pub fn chain_add(
    prog: BorrowedFd<'_>,
    retval: u32,
    next: BorrowedFd<'_>,
    flags: u32,
) -> io::Result<()> {
    let mut attr = ChainAttr {
        prog_fd: prog.as_raw_fd() as u32,
        retval,
        next_prog_fd: next.as_raw_fd() as u32,
        flags,
        ..Default::default()
    };
    chain_cmd(BPF_PROG_CHAIN_ADD, &mut attr)
}

/// What the kernel's refusals of an entry mean for the user, where the
/// errno alone does not say it.
fn explain_add_error(err: io::Error) -> anyhow::Error {
    let why = match err.raw_os_error() {
        Some(libc::ENOSPC) => {
            "each program that owns a chain holds one of the kernel XDP dispatcher's 48 \
             slots, and none is free (use --engine dispatcher, or remove other chains)"
        }
        Some(libc::EOPNOTSUPP) => {
            "chains need JIT-compiled programs (is net.core.bpf_jit_enable 0?)"
        }
        _ => return err.into(),
    };
    anyhow::Error::new(err).context(why)
}

/// The entries of `prog`'s chain: exact ones by return value, then the
/// wildcard.
pub fn chain_get(prog: BorrowedFd<'_>) -> io::Result<Vec<ChainEntry>> {
    let mut entries = vec![ChainEntry::default(); ACTION_NAMES.len() + 1];
    loop {
        let mut attr = ChainAttr {
            prog_fd: prog.as_raw_fd() as u32,
            entries: entries.as_mut_ptr() as u64,
            count: entries.len() as u32,
            ..Default::default()
        };
        match chain_cmd(BPF_PROG_CHAIN_GET, &mut attr) {
            Ok(()) => {
                entries.truncate(attr.count as usize);
                return Ok(entries);
            }
            // More entries than we guessed: the kernel said how many.
            Err(e)
                if e.raw_os_error() == Some(libc::ENOSPC)
                    && attr.count as usize > entries.len() =>
            {
                entries.resize(attr.count as usize, ChainEntry::default());
            }
            Err(e) => return Err(e),
        }
    }
}

/// Does this kernel have chain calls? Both must hold: the running kernel's
/// BTF names BPF_PROG_CHAIN_GET with the value bpfmux uses, and the kernel
/// lists the (empty) chain of a real XDP program (stock kernels answer
/// EINVAL, "unknown command").
pub fn detect(btf: &KernelBtf) -> Probe {
    if !btf.available() {
        return Probe::error("vmlinux BTF unavailable; cannot look for the chain-call UAPI");
    }
    match btf.enum_value("bpf_cmd", "BPF_PROG_CHAIN_GET") {
        None => return Probe::no("BPF_PROG_CHAIN_GET not in kernel enum bpf_cmd"),
        Some(v) if v != BPF_PROG_CHAIN_GET => {
            return Probe::error(format!(
            "kernel has BPF_PROG_CHAIN_GET = {v}, bpfmux uses {BPF_PROG_CHAIN_GET}: UAPI mismatch"
        ))
        }
        Some(_) => {}
    }
    let prog = match crate::sys::bpf::load_trivial_prog(
        libbpf_sys::BPF_PROG_TYPE_XDP,
        libbpf_sys::BPF_XDP,
        0,
    ) {
        Ok(fd) => fd,
        Err(e) => return Probe::from_io("load an XDP program to query", &e),
    };
    match chain_get(prog.as_fd()) {
        Ok(e) if e.is_empty() => Probe::yes("BPF_PROG_CHAIN_GET lists an XDP program's chain"),
        Ok(e) => Probe::error(format!(
            "BPF_PROG_CHAIN_GET reports {} entries for a fresh program",
            e.len()
        )),
        Err(e) => Probe::from_io("BPF_PROG_CHAIN_GET on an XDP program", &e),
    }
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
        let probe = detect(&KernelBtf::load());
        match probe.status {
            Status::Yes => None,
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
        let full = format!(
            "{:#}",
            explain_add_error(io::Error::from_raw_os_error(libc::ENOSPC))
        );
        assert!(
            full.contains("48") && full.contains("--engine dispatcher"),
            "{full}"
        );
        let interp = format!(
            "{:#}",
            explain_add_error(io::Error::from_raw_os_error(libc::EOPNOTSUPP))
        );
        assert!(interp.contains("JIT"), "{interp}");
        let other = format!(
            "{:#}",
            explain_add_error(io::Error::from_raw_os_error(libc::ELOOP))
        );
        assert_eq!(other, io::Error::from_raw_os_error(libc::ELOOP).to_string());
    }

    #[test]
    fn attr_matches_union_member_layout() {
        // prog_fd, retval, next_prog_fd, flags, entries (aligned u64), count
        assert_eq!(std::mem::size_of::<ChainAttr>(), 32);
        assert_eq!(std::mem::offset_of!(ChainAttr, entries), 16);
        assert_eq!(std::mem::offset_of!(ChainAttr, count), 24);
        assert_eq!(std::mem::size_of::<ChainEntry>(), 12);
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
