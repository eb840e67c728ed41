//! The kernel chain-call engine: the series' BPF_PROG_CHAIN_* commands link
//! program A to program B keyed by A's return code (or any code), and the
//! kernel calls B when A returns it. No dispatcher, no trampoline.
//!
//! Detection is real (see [`detect`]); the attach path is not wired yet and
//! says so, so `auto` keeps choosing the dispatcher until it is.
//!
//! TODO(lead, issue 7 kernel half): wire `build` once the kernel lands:
//! 1. load every program of the set as plain XDP (`program::load(res,
//!    LoadAs::Xdp)`), pins `prog-<i>`;
//! 2. for i in 0..n-1: for each action `a` in `set[i].spec.chain_on`
//!    `chain_add(prog_i, a, prog_{i+1}, 0)`, or one `chain_add(prog_i, 0,
//!    prog_{i+1}, BPF_F_CHAIN_WILDCARD)` when the set is `ActionSet::ANY`;
//!    on error drop everything (entries must go with the programs: confirm
//!    the kernel removes a program's entries when it is freed, else
//!    `chain_del` them here);
//! 3. head = prog_0; `check` compares `chain_get` per (prog, action) with
//!    the record. Programs of a live set can't be reused across sets if
//!    their entries point at the old successors: load fresh ones.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::path::Path;

use anyhow::Result;
use libbpf_rs::libbpf_sys;

use super::engine::{Built, Engine, EngineKind, Previous};
use super::program::Resolved;
use super::state::SetRecord;
use crate::features::{KernelBtf, Probe};

/// Series UAPI (kernel/README.md): bpf commands after upstream 7.3's last
/// (BPF_PROG_ASSOC_STRUCT_OPS = 38).
pub const BPF_PROG_CHAIN_ADD: libc::c_long = 39;
pub const BPF_PROG_CHAIN_DEL: libc::c_long = 40;
pub const BPF_PROG_CHAIN_GET: libc::c_long = 41;
/// `flags`: the entry matches every return code (`retval` ignored).
pub const BPF_F_CHAIN_WILDCARD: u32 = 1;

/// `union bpf_attr` for the three chain commands.
#[repr(C)]
#[derive(Default)]
struct ChainAttr {
    prog_fd: u32,
    retval: u32,
    next_prog_fd: u32,
    flags: u32,
}

fn chain_cmd(
    cmd: libc::c_long,
    prog: BorrowedFd<'_>,
    retval: u32,
    next: Option<BorrowedFd<'_>>,
    flags: u32,
) -> io::Result<i64> {
    let attr = ChainAttr {
        prog_fd: prog.as_raw_fd() as u32,
        retval,
        next_prog_fd: next.map_or(0, |f| f.as_raw_fd() as u32),
        flags,
    };
    // SAFETY: attr is a valid prefix of union bpf_attr for these commands.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            &attr as *const ChainAttr,
            std::mem::size_of::<ChainAttr>(),
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(rc)
}

/// `prog` returning `retval` (any code with BPF_F_CHAIN_WILDCARD) continues
/// with `next`.
pub fn chain_add(
    prog: BorrowedFd<'_>,
    retval: u32,
    next: BorrowedFd<'_>,
    flags: u32,
) -> io::Result<()> {
    chain_cmd(BPF_PROG_CHAIN_ADD, prog, retval, Some(next), flags).map(drop)
}

pub fn chain_del(prog: BorrowedFd<'_>, retval: u32, flags: u32) -> io::Result<()> {
    chain_cmd(BPF_PROG_CHAIN_DEL, prog, retval, None, flags).map(drop)
}

/// The entry for (`prog`, `retval`); the return value is what the kernel
/// answers (ENOENT: no entry).
pub fn chain_get(prog: BorrowedFd<'_>, retval: u32, flags: u32) -> io::Result<i64> {
    chain_cmd(BPF_PROG_CHAIN_GET, prog, retval, None, flags)
}

/// Does this kernel have chain calls? Both must hold: the running kernel's
/// BTF names BPF_PROG_CHAIN_GET with the value bpfmux uses, and the kernel
/// accepts the command on a real XDP program (stock kernels answer EINVAL,
/// "unknown command"; ours answers with the entry or ENOENT).
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
    match chain_get(prog.as_fd(), 2 /* XDP_PASS */, 0) {
        Ok(_) => Probe::yes("BPF_PROG_CHAIN_GET answered for an XDP program"),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
            Probe::yes("BPF_PROG_CHAIN_GET answered ENOENT (no entry) for an XDP program")
        }
        Err(e) => Probe::from_io("BPF_PROG_CHAIN_GET on an XDP program", &e),
    }
}

pub struct KernelChain;

/// What `attach` says until the engine is wired (and on kernels without it).
pub const NOT_AVAILABLE: &str = "kernel chain calls not available on this kernel";

impl Engine for KernelChain {
    fn kind(&self) -> EngineKind {
        EngineKind::KernelChain
    }

    fn unavailable(&self, _n: usize) -> Option<String> {
        let probe = detect(&KernelBtf::load());
        Some(match probe.status {
            crate::features::Status::Yes => format!(
                "{NOT_AVAILABLE}: the kernel has them ({}), but this bpfmux's kernel-chain \
                 engine is not wired yet",
                probe.detail
            ),
            _ => format!("{NOT_AVAILABLE} ({})", probe.detail),
        })
    }

    fn build(&self, _set: &[Resolved], _previous: Option<Previous<'_>>) -> Result<Built> {
        anyhow::bail!("{NOT_AVAILABLE}")
    }

    fn check(&self, _record: &SetRecord, _generation: &Path) -> Vec<String> {
        vec![format!("{NOT_AVAILABLE}: cannot check a kernel-chain set")]
    }
}
