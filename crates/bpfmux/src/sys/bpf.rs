//! Raw `bpf(2)` calls for UAPI newer than the vendored libbpf.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

use libbpf_rs::libbpf_sys;

/// `BPF_TRACE_FENTRY_MULTI` in Linux 7.2+ UAPI (absent from libbpf 1.7).
pub const BPF_TRACE_FENTRY_MULTI: u32 = 59;
/// `BPF_LINK_TYPE_TRACING_MULTI` in Linux 7.2+ UAPI.
pub const BPF_LINK_TYPE_TRACING_MULTI: u32 = 15;
const BPF_LINK_CREATE: libc::c_long = 28;

/// Loads `r0 = 0; exit` as `prog_type` with the given expected attach type
/// and attach BTF id: enough for the verifier to say yes or no.
pub fn load_trivial_prog(
    prog_type: u32,
    expected_attach_type: u32,
    attach_btf_id: u32,
) -> io::Result<OwnedFd> {
    let mut insns: [libbpf_sys::bpf_insn; 2] = Default::default();
    insns[0].code = (libbpf_sys::BPF_ALU64 | libbpf_sys::BPF_MOV | libbpf_sys::BPF_K) as u8;
    insns[0].imm = 0;
    insns[1].code = (libbpf_sys::BPF_JMP | libbpf_sys::BPF_EXIT) as u8;
    let mut opts = libbpf_sys::bpf_prog_load_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_prog_load_opts>() as _,
        expected_attach_type,
        attach_btf_id,
        ..Default::default()
    };
    // SAFETY: valid instruction array, NUL-terminated strings, sized opts.
    let fd = unsafe {
        libbpf_sys::bpf_prog_load(
            prog_type,
            c"bpfmux_probe".as_ptr(),
            c"GPL".as_ptr(),
            insns.as_ptr(),
            insns.len() as _,
            &mut opts,
        )
    };
    if fd < 0 {
        return Err(io::Error::from_raw_os_error(-fd));
    }
    // SAFETY: the kernel just returned this descriptor to us.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `union bpf_attr` as used by BPF_LINK_CREATE for tracing_multi.
#[repr(C)]
#[derive(Default)]
struct LinkCreateTracingMulti {
    prog_fd: u32,
    target_fd: u32,
    attach_type: u32,
    flags: u32,
    ids: u64,
    cookies: u64,
    cnt: u32,
    _pad: u32,
}

/// Creates a tracing_multi link for `prog_fd` on the BTF FUNC `ids`
/// (vmlinux BTF), cookies optional (paired by index).
pub fn link_create_tracing_multi(
    prog_fd: i32,
    attach_type: u32,
    ids: &[u32],
    cookies: Option<&[u64]>,
) -> io::Result<OwnedFd> {
    if cookies.is_some_and(|c| c.len() != ids.len()) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "one cookie per id",
        ));
    }
    let attr = LinkCreateTracingMulti {
        prog_fd: prog_fd as u32,
        attach_type,
        ids: ids.as_ptr() as u64,
        cookies: cookies.map_or(0, |c| c.as_ptr() as u64),
        cnt: ids.len() as u32,
        ..Default::default()
    };
    // SAFETY: attr is a valid prefix of union bpf_attr; the pointers it holds
    // stay alive for the call.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_LINK_CREATE,
            &attr as *const LinkCreateTracingMulti,
            std::mem::size_of::<LinkCreateTracingMulti>(),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this descriptor to us.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}
