//! Upstream tracing_multi (Linux 7.2+): a TRACING program with expected
//! attach type BPF_TRACE_FENTRY_MULTI, loaded without an attach BTF id (the
//! kernel points it at `bpf_multi_func`), then a TRACING_MULTI link over BTF
//! FUNC ids. Raw syscalls: libbpf 1.7 predates this UAPI.

use std::os::fd::AsRawFd;

use super::btf::{KernelBtf, FENTRY_TARGETS};
use super::Probe;
use crate::sys::bpf;

pub fn probe(btf: &KernelBtf) -> Probe {
    // Prefer the value the kernel itself declares; fall back to 7.3's.
    let attach_type = btf
        .enum_value("bpf_attach_type", "BPF_TRACE_FENTRY_MULTI")
        .and_then(|v| u32::try_from(v).ok())
        .unwrap_or(bpf::BPF_TRACE_FENTRY_MULTI);
    let ids: Vec<u32> = FENTRY_TARGETS
        .iter()
        .filter_map(|n| btf.func_id(n))
        .collect();
    if ids.is_empty() {
        return Probe::error(format!(
            "no probe target in vmlinux BTF (looked for {FENTRY_TARGETS:?})"
        ));
    }
    let prog = match bpf::load_trivial_prog(
        libbpf_rs::libbpf_sys::BPF_PROG_TYPE_TRACING,
        attach_type,
        0,
    ) {
        Ok(fd) => fd,
        Err(e) => {
            return Probe::from_io(
                &format!("load TRACING prog, expected_attach_type {attach_type}"),
                &e,
            )
        }
    };
    let cookies: Vec<u64> = (1..=ids.len() as u64).collect();
    match bpf::link_create_tracing_multi(prog.as_raw_fd(), attach_type, 0, &ids, Some(&cookies)) {
        Ok(_link) => Probe::yes(format!("tracing_multi link on {} functions", ids.len())),
        Err(e) => Probe::from_io("BPF_LINK_CREATE tracing_multi", &e),
    }
}
