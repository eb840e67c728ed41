//! `bpfmux features`: the kernel feature table.

use std::io::Write;

use bpfmux::features::{self, Status};

/// Probe what the running kernel offers (load/attach attempts, not versions).
#[derive(clap::Args)]
#[command(after_help = "\
Every row is decided by trying: loading a small program, attaching it to a
test function, reading an enum from kernel BTF. A row says yes; no (with the
error the kernel gave); not permitted (the kernel has it, this process may not
use it here, e.g. the host's refusal of fentry); or error (the probe could not
decide).
`bpfmux trace` picks its engine from the same probes.

Examples:
  bpfmux features                         the table: feature, status, detail
  bpfmux features --json | jq '.features[] | select(.status == \"yes\") | .name'
                                          the names of what this kernel has
  bpfmux features --verbose               the same, with libbpf's own messages")]
pub struct Args {
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Let libbpf print its own diagnostics to stderr.
    #[arg(long)]
    verbose: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    if !args.verbose {
        features::quiet_libbpf();
    }
    let rows = features::probe_all();
    let mut out = crate::out::stdout();
    if args.json {
        let kernel = kernel_release();
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(
                &serde_json::json!({ "kernel": kernel, "features": rows })
            )?
        )?;
        return Ok(());
    }
    writeln!(out, "kernel {}", kernel_release())?;
    let w = rows
        .iter()
        .map(|r| r.feature.name().len())
        .max()
        .unwrap_or(0);
    writeln!(
        out,
        "{:w$}  {:13}  {:14}  DETAIL",
        "FEATURE", "ORIGIN", "STATUS"
    )?;
    for r in &rows {
        let status = match r.status {
            Status::Yes => "yes".to_string(),
            ref s => s.to_string(),
        };
        writeln!(
            out,
            "{:w$}  {:13}  {:14}  {}",
            r.feature.name(),
            r.origin,
            status,
            r.detail
        )?;
    }
    Ok(())
}

fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}
