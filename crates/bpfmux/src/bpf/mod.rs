//! BPF programs compiled from the C sources in this directory.
//!
//! build.rs compiles each `<name>.bpf.c` with clang (`-target bpf -O2 -g`)
//! and generates a libbpf-rs skeleton; this module includes them. Engines
//! added later (`trace`, `xdp`) put their C source and loader here too.

#[allow(
    clippy::all,
    dead_code,
    missing_docs,
    unused_imports,
    unsafe_op_in_unsafe_fn
)]
pub mod probes {
    include!(concat!(env!("OUT_DIR"), "/probes.skel.rs"));
}

/// `bpfmux trace`: the program body every trace engine attaches.
#[allow(
    clippy::all,
    dead_code,
    missing_docs,
    unused_imports,
    unsafe_op_in_unsafe_fn
)]
pub mod trace {
    include!(concat!(env!("OUT_DIR"), "/trace.skel.rs"));

    /// The compiled object, for loaders that load program copies themselves.
    pub fn object_bytes() -> &'static [u8] {
        include_bytes!(concat!(env!("OUT_DIR"), "/trace.bpf.o"))
    }
}
