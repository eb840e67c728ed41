//! `bpfmux sym`: addresses → function+offset (file:line with DWARF).

use anyhow::bail;
use bpfmux::symbolize::{KernelSymbolizer, SymResult, Symbolized, UserSymbolizer};

use crate::addr::parse_addr;

/// Symbolize user addresses of a process or kernel addresses.
#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("target").required(true).args(["pid", "kernel"])))]
pub struct Args {
    /// Process whose addresses these are.
    #[arg(long)]
    pid: Option<u32>,
    /// The addresses are kernel addresses (resolved via /proc/kallsyms).
    #[arg(long)]
    kernel: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// Addresses (hex).
    #[arg(value_parser = parse_addr, required = true)]
    addrs: Vec<u64>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let out = match (args.pid, args.kernel) {
        (Some(pid), false) => UserSymbolizer::default().symbolize(pid, &args.addrs)?,
        (None, true) => KernelSymbolizer::load()?.symbolize(&args.addrs),
        _ => bail!("give exactly one of --pid PID or --kernel"),
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        for s in &out {
            println!("{}", line(s));
        }
    }
    Ok(())
}

fn line(s: &Symbolized) -> String {
    match &s.result {
        SymResult::Symbol(sym) => {
            let module = sym
                .module
                .as_ref()
                .map(|m| format!(" [{}]", m.display()))
                .unwrap_or_default();
            let src = match (&sym.file, sym.line) {
                (Some(f), Some(l)) => format!(" at {}:{l}", f.display()),
                (Some(f), None) => format!(" at {}", f.display()),
                _ => String::new(),
            };
            format!("{:#x}  {}+{:#x}{src}{module}", s.addr, sym.name, sym.offset)
        }
        SymResult::NoSymbol {
            module,
            file_offset,
            reason,
        } => {
            let module = module
                .as_ref()
                .map(|m| m.display().to_string())
                .unwrap_or_default();
            format!(
                "{:#x}  ?? ({module} file+{file_offset:#x}: {reason})",
                s.addr
            )
        }
        SymResult::Unmapped => format!("{:#x}  unmapped", s.addr),
    }
}
