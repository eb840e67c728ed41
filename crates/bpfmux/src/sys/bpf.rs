//! Raw `bpf(2)` calls for UAPI newer than the vendored libbpf.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

use libbpf_rs::libbpf_sys;

/// `BPF_TRACE_FENTRY_MULTI` in Linux 7.2+ UAPI (absent from libbpf 1.7).
pub const BPF_TRACE_FENTRY_MULTI: u32 = 59;
/// `BPF_TRACE_FEXIT_MULTI` in Linux 7.2+ UAPI.
pub const BPF_TRACE_FEXIT_MULTI: u32 = 60;
/// `BPF_TRACE_FSESSION_MULTI` in Linux 7.3 UAPI.
pub const BPF_TRACE_FSESSION_MULTI: u32 = 61;
/// Series UAPI (kernel/README.md): fmod_ret programs on a tracing multi-link.
pub const BPF_MODIFY_RETURN_MULTI: u32 = 62;
/// This series: `link_create.flags` bit selecting the global-trampoline
/// backend for a tracing_multi link (stock kernels reject it with EINVAL).
pub const BPF_F_TRACING_MULTI_GLOBAL: u32 = 1 << 0;
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

/// Creates a tracing_multi link for `prog_fd` on the BTF FUNC `ids` (of the
/// program's attach BTF), cookies optional (paired by index); `flags` is
/// `link_create.flags` (0, or [`BPF_F_TRACING_MULTI_GLOBAL`]).
pub fn link_create_tracing_multi(
    prog_fd: i32,
    attach_type: u32,
    flags: u32,
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
        flags,
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

/// Where a kprobe.multi link goes: names (the kernel resolves them) or
/// function symbol addresses (the kernel matches cookies by those).
pub enum KprobeTargets<'a> {
    Syms(&'a [std::ffi::CString]),
    Addrs(&'a [u64]),
}

/// Creates a kprobe.multi (or, with `attach_type` BPF_TRACE_KPROBE_SESSION,
/// kprobe.session) link with one cookie per target.
pub fn link_create_kprobe_multi(
    prog_fd: i32,
    attach_type: u32,
    targets: KprobeTargets<'_>,
    cookies: &[u64],
) -> io::Result<OwnedFd> {
    let mut sym_ptrs: Vec<*const libc::c_char>;
    let mut km = libbpf_sys::bpf_link_create_opts__bindgen_ty_1__bindgen_ty_2::default();
    let cnt = match targets {
        KprobeTargets::Syms(s) => {
            sym_ptrs = s.iter().map(|c| c.as_ptr()).collect();
            km.syms = sym_ptrs.as_mut_ptr();
            s.len()
        }
        KprobeTargets::Addrs(a) => {
            km.addrs = a.as_ptr() as *const libc::c_ulong;
            a.len()
        }
    };
    if cookies.len() != cnt {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "one cookie per target",
        ));
    }
    km.cnt = cnt as u32;
    km.cookies = cookies.as_ptr();
    let mut opts = libbpf_sys::bpf_link_create_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_link_create_opts>() as _,
        ..Default::default()
    };
    opts.__bindgen_anon_1.kprobe_multi = km;
    // SAFETY: opts and the arrays it points to outlive the call.
    let fd = unsafe { libbpf_sys::bpf_link_create(prog_fd, 0, attach_type, &opts) };
    if fd < 0 {
        return Err(io::Error::from_raw_os_error(-fd));
    }
    // SAFETY: the kernel just returned this descriptor to us.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Attaches a loaded fentry/fexit program (its target fixed at load) with
/// `cookie` for bpf_get_attach_cookie().
pub fn link_create_tracing(prog_fd: i32, attach_type: u32, cookie: u64) -> io::Result<OwnedFd> {
    let mut opts = libbpf_sys::bpf_link_create_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_link_create_opts>() as _,
        ..Default::default()
    };
    opts.__bindgen_anon_1.tracing =
        libbpf_sys::bpf_link_create_opts__bindgen_ty_1__bindgen_ty_4 { cookie };
    // SAFETY: valid opts for the call.
    let fd = unsafe { libbpf_sys::bpf_link_create(prog_fd, 0, attach_type, &opts) };
    if fd < 0 {
        return Err(io::Error::from_raw_os_error(-fd));
    }
    // SAFETY: the kernel just returned this descriptor to us.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}
