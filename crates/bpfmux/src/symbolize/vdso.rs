//! The vDSO of a process: not a file, so its symbols come from the image
//! itself, copied out of the process's memory (`/proc/PID/mem`, which needs
//! the same ptrace access as reading its maps for build IDs).

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use super::elf_table::ElfTable;
use crate::normalize::Mapping;

/// The kernel's vDSO is a few pages; refuse anything claiming more.
const MAX_VDSO: u64 = 1 << 20;

pub const NAME: &str = "[vdso]";

pub fn is_vdso(m: &Mapping) -> bool {
    m.is_vdso()
}

/// The symbol table of `pid`'s vDSO mapping `m`.
pub fn table(pid: u32, m: &Mapping) -> io::Result<ElfTable> {
    let len = m.end - m.start;
    if len > MAX_VDSO {
        return Err(io::Error::other(format!("[vdso] of {len} bytes")));
    }
    let mem = File::open(format!("/proc/{pid}/mem"))?;
    let mut image = vec![0u8; len as usize];
    mem.read_exact_at(&mut image, m.start)?;
    ElfTable::from_image(&image).map_err(io::Error::other)
}
