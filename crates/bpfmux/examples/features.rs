//! What this kernel offers, each row found by a real probe (a load or an
//! attach), never by version number; then one typed query.
//!
//! `cargo run --example features` (as root for meaningful answers).

use bpfmux::features::{self, Feature, KernelBtf, Status};

fn main() {
    features::quiet_libbpf();
    for row in features::probe_all() {
        println!(
            "{:22} {:14} {:14} {}",
            row.feature, row.origin, row.status, row.detail
        );
    }
    // One feature by itself, as engine selection asks.
    let btf = KernelBtf::load();
    let p = features::probe(Feature::KprobeMulti, &btf);
    let verdict = if p.status == Status::Yes {
        "can trace with kprobe.multi"
    } else {
        "cannot trace with kprobe.multi"
    };
    println!("\nthis process {verdict} ({})", p.detail);
}
