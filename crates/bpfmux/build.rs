//! Compiles the BPF C programs under `src/bpf/` with clang and generates
//! libbpf-rs skeletons for them. New engines add a `*.bpf.c` file here and a
//! line to `PROGRAMS`; the loader code lives next to the C source.

use std::env;
use std::path::{Path, PathBuf};

use libbpf_cargo::SkeletonBuilder;

/// (C source stem under src/bpf/, skeleton module name)
const PROGRAMS: &[&str] = &["probes", "trace"];

/// BPF C kept next to its loader outside src/bpf/: (source, skeleton name).
const PROGRAMS_ELSEWHERE: &[(&str, &str)] = &[("src/xdp/dispatcher.bpf.c", "xdp_dispatcher")];

fn main() {
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let clang = env::var_os("BPFMUX_CLANG").unwrap_or_else(|| "clang".into());
    println!("cargo:rerun-if-env-changed=BPFMUX_CLANG");
    println!("cargo:rerun-if-changed=src/bpf/bpfmux_types.h");
    println!("cargo:rerun-if-changed=src/bpf/trace.h");

    let sources = PROGRAMS
        .iter()
        .map(|n| (format!("src/bpf/{n}.bpf.c"), *n))
        .chain(PROGRAMS_ELSEWHERE.iter().map(|(s, n)| (s.to_string(), *n)));
    for (src, name) in sources {
        println!("cargo:rerun-if-changed={src}");
        let skel = out_dir.join(format!("{name}.skel.rs"));
        SkeletonBuilder::new()
            .source(&src)
            // Kept for loaders that open the object themselves (trace). Named
            // after the source, as libbpf-cargo names the skeleton after it.
            .obj(out_dir.join(object_name(&src)))
            .clang(&clang)
            // -O2 -g -target bpf are added by libbpf-cargo; the include path
            // is for our small hand-written kernel type header.
            .clang_args(["-Wall", "-Werror", "-Isrc/bpf"])
            .build_and_generate(&skel)
            .unwrap_or_else(|e| panic!("building BPF program {src}: {e:#}"));
    }
}

/// `dir/name.bpf.c` → `name.bpf.o`.
fn object_name(src: &str) -> std::ffi::OsString {
    Path::new(src)
        .with_extension("o")
        .file_name()
        .unwrap_or_default()
        .to_owned()
}
