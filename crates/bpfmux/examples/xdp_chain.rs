//! Two XDP programs on one interface: the first runs, and the second runs
//! when the first returns XDP_PASS. Then the set as `bpfmux xdp list` shows
//! it, and (unless `--keep`) its removal.
//!
//! `cargo run --example xdp_chain -- IFACE A.o[:PROG] B.o[:PROG] [--keep]`
//! as root; several programs need BPF trampolines (freplace) or the series'
//! chain calls, so on a host that refuses them this fails cleanly, with the
//! interface left as it was.

use bpfmux::xdp::{self, ActionSet, AttachOptions, ProgSpec};

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn run() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let keep = args.iter().any(|a| a == "--keep");
    let args: Vec<&String> = args.iter().filter(|a| *a != "--keep").collect();
    let [iface, first, second] = args[..] else {
        anyhow::bail!("usage: xdp_chain IFACE A.o[:PROG] B.o[:PROG] [--keep]");
    };
    let pass: ActionSet = "pass".parse()?;
    let specs = [
        ProgSpec::parse(first, pass)?,
        ProgSpec::parse(second, pass)?,
    ];
    let report = xdp::attach(iface, &specs, &AttachOptions::default())?;
    let engine = report.view.set.as_ref().map(|s| s.engine.to_string());
    println!(
        "attached {} programs on {iface} (engine {})",
        specs.len(),
        engine.as_deref().unwrap_or("?")
    );
    for set in xdp::list()?.sets {
        for p in set.set.iter().flat_map(|s| &s.progs) {
            println!("  {} (id {}), next on {}", p.name, p.prog_id, p.chain_on);
        }
    }
    if !keep {
        xdp::detach(iface, false)?;
        println!("detached");
    }
    Ok(())
}
