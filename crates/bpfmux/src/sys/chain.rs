//! The series' XDP chain-call commands (kernel/README.md, "XDP chain
//! calls"): BPF_PROG_CHAIN_ADD links program A to program B keyed by A's
//! return code (or any code), BPF_PROG_CHAIN_GET lists A's entries.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// Series UAPI (kernel/README.md): bpf commands after upstream 7.3's last
/// (BPF_PROG_ASSOC_STRUCT_OPS = 38).
pub const BPF_PROG_CHAIN_ADD: libc::c_long = 39;
pub const BPF_PROG_CHAIN_GET: libc::c_long = 41;
/// `flags`: the entry matches every return code without an exact entry.
pub const BPF_F_CHAIN_WILDCARD: u32 = 1;
/// The kernel refuses longer chains (BPF_PROG_CHAIN_MAX_DEPTH) with E2BIG.
pub const MAX_DEPTH: usize = 16;
/// Return values an XDP program has names for (XDP_ABORTED..XDP_REDIRECT):
/// a first guess at how many entries a chain has.
const XDP_ACTIONS: usize = 5;

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

/// The entries of `prog`'s chain: exact ones by return value, then the
/// wildcard.
pub fn chain_get(prog: BorrowedFd<'_>) -> io::Result<Vec<ChainEntry>> {
    let mut entries = vec![ChainEntry::default(); XDP_ACTIONS + 1];
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attr_matches_union_member_layout() {
        // prog_fd, retval, next_prog_fd, flags, entries (aligned u64), count
        assert_eq!(std::mem::size_of::<ChainAttr>(), 32);
        assert_eq!(std::mem::offset_of!(ChainAttr, entries), 16);
        assert_eq!(std::mem::offset_of!(ChainAttr, count), 24);
        assert_eq!(std::mem::size_of::<ChainEntry>(), 12);
    }
}
