//! This series' kernel additions.
//!
//! The global-trampoline backend is probed for real: a tracing_multi link
//! with `BPF_F_TRACING_MULTI_GLOBAL` on one function (stock kernels reject
//! any link_create.flags there with EINVAL). The others still look for their
//! UAPI name in the running kernel's BTF first (a fact about this kernel,
//! not a version guess).
//!
//! TODO(kernel issues: fmod_ret.multi, XDP chain calls): once those slices
//! land, add the real load/attach attempt behind each "present in BTF"
//! branch (same shape as global_trampoline below).

use std::os::fd::AsRawFd;

use super::btf::{KernelBtf, FENTRY_TARGETS};
use super::Probe;
use crate::sys::bpf;

/// (enum, enumerator) that each addition is expected to introduce.
const FMOD_RET_MULTI: (&str, &str) = ("bpf_attach_type", "BPF_MODIFY_RETURN_MULTI");

fn by_btf(btf: &KernelBtf, (e, m): (&str, &str)) -> Probe {
    if !btf.available() {
        return Probe::error("vmlinux BTF unavailable; cannot look for the UAPI");
    }
    match btf.enum_value(e, m) {
        None => Probe::no(format!("{m} not in kernel enum {e} (not in this kernel)")),
        // Present but unprobed: say so rather than claim support.
        Some(v) => Probe::error(format!(
            "{m} = {v} found in kernel BTF, but bpfmux has no load/attach probe for it yet"
        )),
    }
}

pub fn global_trampoline(btf: &KernelBtf) -> Probe {
    let Some((target, id)) = btf.first_func(FENTRY_TARGETS) else {
        return Probe::error(format!(
            "no probe target in vmlinux BTF (looked for {FENTRY_TARGETS:?})"
        ));
    };
    let attach_type = btf
        .enum_value("bpf_attach_type", "BPF_TRACE_FENTRY_MULTI")
        .and_then(|v| u32::try_from(v).ok())
        .unwrap_or(bpf::BPF_TRACE_FENTRY_MULTI);
    let prog = match bpf::load_trivial_prog(
        libbpf_rs::libbpf_sys::BPF_PROG_TYPE_TRACING,
        attach_type,
        0,
    ) {
        Ok(fd) => fd,
        Err(e) => return Probe::from_io("load fentry.multi program (no tracing_multi)", &e),
    };
    match bpf::link_create_tracing_multi(
        prog.as_raw_fd(),
        attach_type,
        bpf::BPF_F_TRACING_MULTI_GLOBAL,
        &[id],
        None,
    ) {
        Ok(_link) => Probe::yes(format!(
            "tracing_multi link with BPF_F_TRACING_MULTI_GLOBAL on {target}"
        )),
        Err(e) => Probe::from_io(
            &format!("tracing_multi link with BPF_F_TRACING_MULTI_GLOBAL on {target}"),
            &e,
        ),
    }
}

pub fn fmod_ret_multi(btf: &KernelBtf) -> Probe {
    by_btf(btf, FMOD_RET_MULTI)
}

/// XDP chain calls: BPF_PROG_CHAIN_GET on a real XDP program, the same
/// detection `bpfmux xdp` uses to pick its engine.
pub fn xdp_chain_calls(btf: &KernelBtf) -> Probe {
    crate::xdp::kernel_chain::detect(btf)
}
