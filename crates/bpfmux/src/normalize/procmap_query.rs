//! The `PROCMAP_QUERY` ioctl on `/proc/<pid>/maps` (Linux 6.11+).
//!
//! One call returns the VMA covering an address (or, with
//! `COVERING_OR_NEXT_VMA`, the next one above it) that matches permission and
//! file-backing filters, plus its name and, on request, the backing file's
//! ELF build ID. Layout checked against include/uapi/linux/fs.h (7.3).

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

use super::mapping::{escape_name, BuildId, Mapping, Perms};

/// `_IOWR('f', 17, struct procmap_query)`.
pub const PROCMAP_QUERY: u64 = 0xC068_6611;

/// `query_flags`: only readable VMAs.
pub const VMA_READABLE: u64 = 0x01;
/// `query_flags`: only writable VMAs.
pub const VMA_WRITABLE: u64 = 0x02;
/// `query_flags`: only executable VMAs.
pub const VMA_EXECUTABLE: u64 = 0x04;
/// `query_flags`: only shared VMAs.
pub const VMA_SHARED: u64 = 0x08;
/// `query_flags`: the VMA covering the address, or else the next one.
pub const COVERING_OR_NEXT_VMA: u64 = 0x10;
/// `query_flags`: only file-backed VMAs.
pub const FILE_BACKED_VMA: u64 = 0x20;

/// Kernel's BUILD_ID_SIZE_MAX is 20; a larger buffer costs nothing and keeps
/// us working if that ever grows.
const BUILD_ID_BUF: usize = 64;
/// d_path() output is bounded by PATH_MAX.
pub const NAME_BUF: usize = 4096;

/// `struct procmap_query`, 104 bytes.
#[repr(C)]
#[derive(Default, Debug, Clone, Copy)]
struct RawQuery {
    size: u64,
    query_flags: u64,
    query_addr: u64,
    vma_start: u64,
    vma_end: u64,
    vma_flags: u64,
    vma_page_size: u64,
    vma_offset: u64,
    inode: u64,
    dev_major: u32,
    dev_minor: u32,
    vma_name_size: u32,
    build_id_size: u32,
    vma_name_addr: u64,
    build_id_addr: u64,
}

const _: () = assert!(std::mem::size_of::<RawQuery>() == 104);

/// Reusable buffers for the kernel to fill, so a query allocates only the
/// returned name.
pub struct QueryBuf {
    name: Box<[u8; NAME_BUF]>,
    build_id: [u8; BUILD_ID_BUF],
}

impl Default for QueryBuf {
    fn default() -> Self {
        Self {
            name: Box::new([0; NAME_BUF]),
            build_id: [0; BUILD_ID_BUF],
        }
    }
}

/// What to ask for besides the VMA itself.
#[derive(Clone, Copy, Debug)]
pub struct Want {
    /// The VMA's file name.
    pub name: bool,
    /// The file's build ID.
    pub build_id: bool,
}

/// Runs one query. `Ok(None)` means no matching VMA (ENOENT); every other
/// errno is returned as is (ENOTTY: kernel lacks the ioctl, ESRCH: the
/// address space is gone).
pub fn query(
    maps: &File,
    addr: u64,
    flags: u64,
    want: Want,
    buf: &mut QueryBuf,
) -> io::Result<Option<Mapping>> {
    let mut q = RawQuery {
        size: std::mem::size_of::<RawQuery>() as u64,
        query_flags: flags,
        query_addr: addr,
        ..Default::default()
    };
    if want.name {
        q.vma_name_size = NAME_BUF as u32;
        q.vma_name_addr = buf.name.as_mut_ptr() as u64;
    }
    if want.build_id {
        q.build_id_size = BUILD_ID_BUF as u32;
        q.build_id_addr = buf.build_id.as_mut_ptr() as u64;
    }
    // SAFETY: `q` is a correctly laid out procmap_query; the buffer pointers
    // and sizes describe live, writable memory owned by `buf`.
    let rc = unsafe {
        libc::ioctl(
            maps.as_raw_fd(),
            PROCMAP_QUERY as _,
            &mut q as *mut RawQuery,
        )
    };
    if rc < 0 {
        let err = io::Error::last_os_error();
        return match err.raw_os_error() {
            Some(libc::ENOENT) => Ok(None),
            _ => Err(err),
        };
    }

    let name = if want.name && q.vma_name_size > 0 {
        // The size includes the terminating NUL.
        let len = (q.vma_name_size as usize - 1).min(NAME_BUF);
        Some(escape_name(&buf.name[..len]))
    } else {
        None
    };
    let build_id = if want.build_id && q.build_id_size > 0 {
        // Longer than BUILD_ID_MAX: not an ID our text path would accept.
        let len = (q.build_id_size as usize).min(BUILD_ID_BUF);
        BuildId::new(&buf.build_id[..len])
    } else {
        None
    };
    Ok(Some(Mapping {
        start: q.vma_start,
        end: q.vma_end,
        perms: Perms {
            read: q.vma_flags & VMA_READABLE != 0,
            write: q.vma_flags & VMA_WRITABLE != 0,
            exec: q.vma_flags & VMA_EXECUTABLE != 0,
            shared: q.vma_flags & VMA_SHARED != 0,
        },
        offset: q.vma_offset,
        dev_major: q.dev_major,
        dev_minor: q.dev_minor,
        inode: q.inode,
        name,
        build_id,
    }))
}
