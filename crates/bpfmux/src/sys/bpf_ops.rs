//! The bpf(2) operations on programs, links and pins that bpfmux needs (the
//! XDP engines, trace's recursion counts), as small safe functions over
//! libbpf's low-level API: owned descriptors in, owned descriptors out, errno
//! kept in the returned `io::Error` so callers can explain refusals.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::Path;

use libbpf_rs::libbpf_sys;

/// libbpf returns `-errno` (or -1 with errno set, for fd-returning calls
/// with older conventions); turn both into an `io::Error`.
fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        let errno = if rc == -1 {
            io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EPERM)
        } else {
            -rc
        };
        return Err(io::Error::from_raw_os_error(errno));
    }
    Ok(rc)
}

fn owned(rc: libc::c_int) -> io::Result<OwnedFd> {
    let fd = check(rc)?;
    // SAFETY: the kernel just handed us this descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains NUL"))
}

/// What the kernel says about a loaded program.
#[derive(Clone, Debug)]
pub struct ProgInfo {
    pub id: u32,
    pub btf_id: u32,
    /// Runs the kernel's recursion guard skipped.
    pub recursion_misses: u64,
}

pub fn prog_info(fd: BorrowedFd<'_>) -> io::Result<ProgInfo> {
    let mut info = libbpf_sys::bpf_prog_info::default();
    let mut len = std::mem::size_of_val(&info) as u32;
    // SAFETY: info is a writable bpf_prog_info of `len` bytes.
    check(unsafe { libbpf_sys::bpf_prog_get_info_by_fd(fd.as_raw_fd(), &mut info, &mut len) })?;
    Ok(ProgInfo {
        id: info.id,
        btf_id: info.btf_id,
        recursion_misses: info.recursion_misses,
    })
}

/// Ids of every loaded program, in id order.
pub fn prog_ids() -> io::Result<Vec<u32>> {
    let mut ids = Vec::new();
    let mut id = 0;
    loop {
        let mut next = 0;
        // SAFETY: plain syscall wrapper writing one u32.
        match check(unsafe { libbpf_sys::bpf_prog_get_next_id(id, &mut next) }) {
            Ok(_) => {
                ids.push(next);
                id = next;
            }
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(ids),
            Err(e) => return Err(e),
        }
    }
}

/// Start address and length of each function of a program's JIT image
/// (the main one first, then its subprograms, as kallsyms lists them):
/// empty when the program is not JIT-compiled or the kernel hides
/// addresses from this process (`kernel.kptr_restrict`).
pub fn jited_funcs(fd: BorrowedFd<'_>) -> io::Result<Vec<(u64, u32)>> {
    let mut info = libbpf_sys::bpf_prog_info::default();
    let mut len = std::mem::size_of_val(&info) as u32;
    // SAFETY: info is a writable bpf_prog_info of `len` bytes.
    check(unsafe { libbpf_sys::bpf_prog_get_info_by_fd(fd.as_raw_fd(), &mut info, &mut len) })?;
    let n = info.nr_jited_ksyms.min(info.nr_jited_func_lens);
    if n == 0 {
        return Ok(Vec::new());
    }
    let mut addrs = vec![0u64; n as usize];
    let mut lens = vec![0u32; n as usize];
    let mut info = libbpf_sys::bpf_prog_info {
        nr_jited_ksyms: n,
        jited_ksyms: addrs.as_mut_ptr() as u64,
        nr_jited_func_lens: n,
        jited_func_lens: lens.as_mut_ptr() as u64,
        ..Default::default()
    };
    let mut len = std::mem::size_of_val(&info) as u32;
    // SAFETY: info is a writable bpf_prog_info of `len` bytes; the kernel
    // writes at most `n` entries to each of the two arrays it points to.
    check(unsafe { libbpf_sys::bpf_prog_get_info_by_fd(fd.as_raw_fd(), &mut info, &mut len) })?;
    Ok(addrs
        .into_iter()
        .zip(lens)
        .filter(|&(a, l)| a != 0 && l != 0)
        .collect())
}

/// What the kernel says about a link; only the fields bpfmux reads.
#[derive(Clone, Debug)]
pub struct LinkInfo {
    pub id: u32,
    pub prog_id: u32,
    /// XDP links: the interface, 0 once the interface is gone.
    pub xdp_ifindex: u32,
    /// Tracing links (freplace): the program and BTF function replaced.
    pub target_obj_id: u32,
    pub target_btf_id: u32,
}

pub fn link_info(fd: BorrowedFd<'_>) -> io::Result<LinkInfo> {
    let mut info = libbpf_sys::bpf_link_info::default();
    let mut len = std::mem::size_of_val(&info) as u32;
    // SAFETY: info is a writable bpf_link_info of `len` bytes.
    check(unsafe { libbpf_sys::bpf_link_get_info_by_fd(fd.as_raw_fd(), &mut info, &mut len) })?;
    let (xdp_ifindex, target_obj_id, target_btf_id) = match info.type_ {
        // SAFETY: the union member matching the link type.
        libbpf_sys::BPF_LINK_TYPE_XDP => (unsafe { info.__bindgen_anon_1.xdp.ifindex }, 0, 0),
        libbpf_sys::BPF_LINK_TYPE_TRACING => {
            // SAFETY: as above.
            let t = unsafe { info.__bindgen_anon_1.tracing };
            (0, t.target_obj_id, t.target_btf_id)
        }
        _ => (0, 0, 0),
    };
    Ok(LinkInfo {
        id: info.id,
        prog_id: info.prog_id,
        xdp_ifindex,
        target_obj_id,
        target_btf_id,
    })
}

pub fn prog_fd_by_id(id: u32) -> io::Result<OwnedFd> {
    // SAFETY: plain syscall wrapper.
    owned(unsafe { libbpf_sys::bpf_prog_get_fd_by_id(id) })
}

pub fn pin(fd: BorrowedFd<'_>, path: &Path) -> io::Result<()> {
    let p = c_path(path)?;
    // SAFETY: valid fd and NUL-terminated path.
    check(unsafe { libbpf_sys::bpf_obj_pin(fd.as_raw_fd(), p.as_ptr()) }).map(drop)
}

pub fn get_pinned(path: &Path) -> io::Result<OwnedFd> {
    let p = c_path(path)?;
    // SAFETY: NUL-terminated path.
    owned(unsafe { libbpf_sys::bpf_obj_get(p.as_ptr()) })
}

/// XDP link on `ifindex`; `flags` picks the mode (0 = the driver's native
/// mode if it has one, else generic).
pub fn link_create_xdp(prog: BorrowedFd<'_>, ifindex: u32, flags: u32) -> io::Result<OwnedFd> {
    let opts = libbpf_sys::bpf_link_create_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_link_create_opts>() as _,
        flags,
        ..Default::default()
    };
    // SAFETY: valid fds and sized opts.
    owned(unsafe {
        libbpf_sys::bpf_link_create(prog.as_raw_fd(), ifindex as i32, libbpf_sys::BPF_XDP, &opts)
    })
}

/// freplace link: extension program `prog` replaces the global function
/// `btf_id` of program `target`.
pub fn link_create_freplace(
    prog: BorrowedFd<'_>,
    target: BorrowedFd<'_>,
    btf_id: u32,
) -> io::Result<OwnedFd> {
    let opts = libbpf_sys::bpf_link_create_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_link_create_opts>() as _,
        target_btf_id: btf_id,
        ..Default::default()
    };
    // SAFETY: valid fds and sized opts.
    owned(unsafe {
        libbpf_sys::bpf_link_create(
            prog.as_raw_fd(),
            target.as_raw_fd(),
            // An extension's link takes its attach type from the program
            // (none: 0); the target is the fd + BTF id.
            0,
            &opts,
        )
    })
}

/// Atomically points `link` at `new` — only if it still runs `old`
/// (BPF_F_REPLACE), so a concurrent change is detected, not overwritten.
pub fn link_replace(
    link: BorrowedFd<'_>,
    new: BorrowedFd<'_>,
    old: BorrowedFd<'_>,
) -> io::Result<()> {
    let opts = libbpf_sys::bpf_link_update_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_link_update_opts>() as _,
        flags: libbpf_sys::BPF_F_REPLACE,
        old_prog_fd: old.as_raw_fd() as u32,
        ..Default::default()
    };
    // SAFETY: valid fds and sized opts.
    check(unsafe { libbpf_sys::bpf_link_update(link.as_raw_fd(), new.as_raw_fd(), &opts) })
        .map(drop)
}

/// Detaches a link now, whoever else holds it open.
pub fn link_detach(link: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: valid fd.
    check(unsafe { libbpf_sys::bpf_link_detach(link.as_raw_fd()) }).map(drop)
}

/// The XDP programs attached to an interface, per mode (0 = none).
#[derive(Clone, Copy, Debug, Default)]
pub struct XdpQuery {
    pub drv_prog_id: u32,
    pub skb_prog_id: u32,
    pub hw_prog_id: u32,
}

impl XdpQuery {
    pub fn any(&self) -> Option<u32> {
        [self.drv_prog_id, self.skb_prog_id, self.hw_prog_id]
            .into_iter()
            .find(|&id| id != 0)
    }
}

pub fn xdp_query(ifindex: u32) -> io::Result<XdpQuery> {
    let mut opts = libbpf_sys::bpf_xdp_query_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_xdp_query_opts>() as _,
        ..Default::default()
    };
    // SAFETY: sized, writable opts.
    check(unsafe { libbpf_sys::bpf_xdp_query(ifindex as i32, 0, &mut opts) })?;
    Ok(XdpQuery {
        drv_prog_id: opts.drv_prog_id,
        skb_prog_id: opts.skb_prog_id,
        hw_prog_id: opts.hw_prog_id,
    })
}

/// BTF id of the function `name` in a loaded program's own BTF (what an
/// freplace link names as its target).
pub fn prog_btf_func_id(prog: BorrowedFd<'_>, name: &str) -> io::Result<u32> {
    let info = prog_info(prog)?;
    if info.btf_id == 0 {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            "program was loaded without BTF",
        ));
    }
    let cname = CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "name contains NUL"))?;
    // SAFETY: returns an owned btf object or an error pointer/NULL.
    let btf = unsafe { libbpf_sys::btf__load_from_kernel_by_id(info.btf_id) };
    // SAFETY: plain errno read of libbpf's ERR_PTR convention.
    if btf.is_null() || unsafe { libbpf_sys::libbpf_get_error(btf as *const _) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: btf is valid until freed below.
    let id = unsafe {
        libbpf_sys::btf__find_by_name_kind(btf, cname.as_ptr(), libbpf_sys::BTF_KIND_FUNC)
    };
    // SAFETY: btf came from btf__load_from_kernel_by_id.
    unsafe { libbpf_sys::btf__free(btf) };
    if id < 0 {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no function {name} in the program's BTF"),
        ));
    }
    Ok(id as u32)
}
