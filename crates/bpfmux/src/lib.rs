//! bpfmux: attach BPF at scale.
//!
//! - [`features`]: what the running kernel offers, found by real probes.
//! - [`normalize`]: process addresses → mappings + file offsets + build IDs,
//!   via `PROCMAP_QUERY` with a text `/proc/<pid>/maps` fallback.
//! - [`symbolize`]: normalized user addresses and kernel addresses → symbols.
//! - [`bpf`]: BPF C programs (compiled by build.rs) and their skeletons.
//! - [`trace`]: one program on many kernel functions (`bpfmux trace`).
//! - [`sys`]: thin wrappers over raw syscalls libbpf does not cover yet.
//! - [`xdp`]: several XDP programs on one interface, chained by return code.

pub mod bpf;
pub mod features;
pub mod normalize;
pub mod symbolize;
pub mod sys;
pub mod trace;
pub mod xdp;
