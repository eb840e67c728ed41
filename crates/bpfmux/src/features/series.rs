//! This series' kernel additions, each probed for real: load a trivial
//! program of the attach type and create the link the feature is about on
//! one function (stock kernels reject BPF_F_TRACING_MULTI_GLOBAL, like any
//! link_create.flags for tracing_multi, with EINVAL, and do not know
//! BPF_MODIFY_RETURN_MULTI).

use std::os::fd::{AsFd, AsRawFd};

use super::btf::{KernelBtf, FENTRY_TARGETS, FMOD_RET_TARGET};
use super::Probe;
use crate::sys::bpf;
use crate::sys::chain::{chain_get, BPF_PROG_CHAIN_GET};

/// A tracing_multi link of a trivial program of `attach_type` (named
/// `type_name` in the kernel's enum bpf_attach_type, `fallback` if the BTF
/// lacks the name) on the first of `targets`, with link_create `flags`.
fn multi_link(
    btf: &KernelBtf,
    (type_name, fallback): (&str, u32),
    targets: &[&str],
    flags: u32,
    what: &str,
) -> Probe {
    if !btf.available() {
        return Probe::error("vmlinux BTF unavailable; cannot probe");
    }
    let Some((target, id)) = btf.first_func(targets) else {
        return Probe::error(format!(
            "no probe target in vmlinux BTF (looked for {targets:?})"
        ));
    };
    let attach_type = btf
        .enum_value("bpf_attach_type", type_name)
        .and_then(|v| u32::try_from(v).ok())
        .unwrap_or(fallback);
    let prog = match bpf::load_trivial_prog(
        libbpf_rs::libbpf_sys::BPF_PROG_TYPE_TRACING,
        attach_type,
        0,
    ) {
        Ok(fd) => fd,
        Err(e) => return Probe::from_io(&format!("load a {type_name} program"), &e),
    };
    let what = format!("{what} on {target}");
    match bpf::link_create_tracing_multi(prog.as_raw_fd(), attach_type, flags, &[id], None) {
        Ok(_link) => Probe::yes(what),
        Err(e) => Probe::from_io(&what, &e),
    }
}

pub fn global_trampoline(btf: &KernelBtf) -> Probe {
    multi_link(
        btf,
        ("BPF_TRACE_FENTRY_MULTI", bpf::BPF_TRACE_FENTRY_MULTI),
        FENTRY_TARGETS,
        bpf::BPF_F_TRACING_MULTI_GLOBAL,
        "tracing_multi link with BPF_F_TRACING_MULTI_GLOBAL",
    )
}

/// fmod_ret.multi (BPF_MODIFY_RETURN_MULTI), on an error-injectable function.
pub fn fmod_ret_multi(btf: &KernelBtf) -> Probe {
    if btf.available()
        && btf
            .enum_value("bpf_attach_type", "BPF_MODIFY_RETURN_MULTI")
            .is_none()
    {
        return Probe::no("BPF_MODIFY_RETURN_MULTI not in kernel enum bpf_attach_type");
    }
    multi_link(
        btf,
        ("BPF_MODIFY_RETURN_MULTI", bpf::BPF_MODIFY_RETURN_MULTI),
        &[FMOD_RET_TARGET],
        0,
        "fmod_ret.multi link",
    )
}

/// fexit.multi on the global backend: the exit side on series kernels
/// before its fsession patch.
pub fn fexit_multi_global(btf: &KernelBtf) -> Probe {
    multi_link(
        btf,
        ("BPF_TRACE_FEXIT_MULTI", bpf::BPF_TRACE_FEXIT_MULTI),
        FENTRY_TARGETS,
        bpf::BPF_F_TRACING_MULTI_GLOBAL,
        "fexit.multi link with BPF_F_TRACING_MULTI_GLOBAL",
    )
}

/// fsession.multi on the global backend (the series' later fsession patch).
pub fn fsession_multi_global(btf: &KernelBtf) -> Probe {
    multi_link(
        btf,
        ("BPF_TRACE_FSESSION_MULTI", bpf::BPF_TRACE_FSESSION_MULTI),
        FENTRY_TARGETS,
        bpf::BPF_F_TRACING_MULTI_GLOBAL,
        "fsession.multi link with BPF_F_TRACING_MULTI_GLOBAL",
    )
}

/// XDP chain calls, the same detection `bpfmux xdp` uses to pick its
/// engine. Both must hold: the running kernel's
/// BTF names BPF_PROG_CHAIN_GET with the value bpfmux uses, and the kernel
/// lists the (empty) chain of a real XDP program (stock kernels answer
/// EINVAL, "unknown command").
pub fn xdp_chain_calls(btf: &KernelBtf) -> Probe {
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
    let prog = match bpf::load_trivial_prog(
        libbpf_rs::libbpf_sys::BPF_PROG_TYPE_XDP,
        libbpf_rs::libbpf_sys::BPF_XDP,
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
