//! This series' kernel additions. None exists in any kernel yet, so each
//! probe first looks for the UAPI name in the running kernel's BTF (a fact
//! about this kernel, not a version guess); only when it is there would the
//! load/attach attempt run.
//!
//! TODO(kernel issues: global-trampoline multi-link, fmod_ret.multi, XDP
//! chain calls): once the kernel slices land, replace the names below with
//! the final UAPI enumerators and add the real load/attach attempt behind
//! each "present in BTF" branch (same shape as tracing_multi.rs).

use super::btf::KernelBtf;
use super::Probe;

/// (enum, enumerator) that each addition is expected to introduce.
const GLOBAL_TRAMPOLINE: (&str, &str) = ("bpf_link_type", "BPF_LINK_TYPE_TRACING_MULTI_GLOBAL");
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
    by_btf(btf, GLOBAL_TRAMPOLINE)
}

pub fn fmod_ret_multi(btf: &KernelBtf) -> Probe {
    by_btf(btf, FMOD_RET_MULTI)
}

/// XDP chain calls: BPF_PROG_CHAIN_GET on a real XDP program, the same
/// detection `bpfmux xdp` uses to pick its engine.
pub fn xdp_chain_calls(btf: &KernelBtf) -> Probe {
    crate::xdp::kernel_chain::detect(btf)
}
