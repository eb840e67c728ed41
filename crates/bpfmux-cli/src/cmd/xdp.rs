//! `bpfmux xdp`: several XDP programs on one interface, chained by return
//! code.

use std::io::Write;

use anyhow::{bail, Result};
use bpfmux::xdp::{self, ActionSet, AttachOptions, EngineChoice, Mode, ProgSpec, SetView};

/// Run several XDP programs on one interface, in order, chained by return code.
#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  bpfmux xdp attach eth0 fw.o                    one program, attached as it is
  bpfmux xdp attach eth0 fw.o:xdp_filter count.o several: fw runs first; count runs
                                                 when fw returns XDP_PASS (the default)
  bpfmux xdp attach eth0 a.o b.o c.o --chain-on pass,tx
                                                 every program continues on PASS or TX
  bpfmux xdp attach eth0 a.o b.o --chain-on drop --chain-on none
                                                 one --chain-on per program, in order
  bpfmux xdp list                                what runs where (any engine)
  bpfmux xdp detach eth0                         remove the set and its pins

Attaching to an interface that already has a bpfmux set replaces the whole set
atomically: every packet runs either the old set or the new one. Programs named
again (same object file, unchanged) keep running with their maps.")]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand)]
enum Command {
    Attach(AttachArgs),
    List(ListArgs),
    Detach(DetachArgs),
}

/// Attach a set of XDP programs to an interface (replacing bpfmux's set there).
#[derive(clap::Args)]
struct AttachArgs {
    /// Interface, e.g. eth0.
    iface: String,
    /// Programs in run order: OBJECT.o, or OBJECT.o:NAME where NAME is the
    /// program's function name or its ELF section.
    #[arg(required = true, value_name = "PROG.o[:section]")]
    progs: Vec<String>,
    /// Return codes after which the next program runs: aborted, drop, pass,
    /// tx, redirect, a number, none or any. Once: for every program; or once
    /// per program, in order. Default: pass.
    #[arg(long, value_name = "ACTIONS")]
    chain_on: Vec<String>,
    /// Where the kernel runs the set.
    #[arg(long, value_enum, default_value_t = ModeArg::Auto)]
    mode: ModeArg,
    /// Mechanism for several programs: auto picks kernel chain calls when
    /// the kernel has them, else bpfmux's freplace dispatcher.
    #[arg(long, value_enum, default_value_t = EngineArg::Auto)]
    engine: EngineArg,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum ModeArg {
    Auto,
    Native,
    Generic,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum EngineArg {
    Auto,
    Dispatcher,
    KernelChain,
}

/// Show the XDP sets bpfmux attached in this network namespace.
#[derive(clap::Args)]
struct ListArgs {
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Detach bpfmux's set from an interface and remove its pins.
#[derive(clap::Args)]
struct DetachArgs {
    /// Interface, e.g. eth0.
    #[arg(required_unless_present = "stale", conflicts_with = "stale")]
    iface: Option<String>,
    /// Instead: remove the state of sets whose interface is gone.
    #[arg(long)]
    stale: bool,
}

pub fn run(args: Args) -> Result<()> {
    match args.command {
        Command::Attach(a) => attach(a),
        Command::List(a) => list(a),
        Command::Detach(a) => detach(a),
    }
}

fn chain_sets(given: &[String], n: usize) -> Result<Vec<ActionSet>> {
    let parsed = given
        .iter()
        .map(|s| s.parse::<ActionSet>().map_err(anyhow::Error::from))
        .collect::<Result<Vec<_>>>()?;
    Ok(match parsed.len() {
        0 => vec![ActionSet::DEFAULT; n],
        1 => vec![parsed[0]; n],
        k if k == n => parsed,
        k => bail!("{k} --chain-on for {n} programs: give one for all, or one per program"),
    })
}

fn attach(a: AttachArgs) -> Result<()> {
    let chain_on = chain_sets(&a.chain_on, a.progs.len())?;
    let specs = a
        .progs
        .iter()
        .zip(chain_on)
        .map(|(p, c)| ProgSpec::parse(p, c))
        .collect::<Result<Vec<_>>>()?;
    let opts = AttachOptions {
        mode: match a.mode {
            ModeArg::Auto => Mode::Auto,
            ModeArg::Native => Mode::Native,
            ModeArg::Generic => Mode::Generic,
        },
        engine: match a.engine {
            EngineArg::Auto => EngineChoice::Auto,
            EngineArg::Dispatcher => EngineChoice::Dispatcher,
            EngineArg::KernelChain => EngineChoice::KernelChain,
        },
    };
    let report = xdp::attach(&a.iface, &specs, &opts)?;
    let mut out = crate::out::stdout();
    if a.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?;
        return Ok(());
    }
    match report.replaced {
        Some(old) => writeln!(
            out,
            "replaced the set on {} (old head program {old}; {} of {} programs kept running)",
            a.iface,
            report.kept,
            specs.len()
        )?,
        None => writeln!(out, "attached to {}", a.iface)?,
    }
    print_view(&mut out, &report.view)?;
    Ok(())
}

fn list(a: ListArgs) -> Result<()> {
    let listing = xdp::list()?;
    let mut out = crate::out::stdout();
    if a.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&listing)?)?;
        return Ok(());
    }
    if listing.sets.is_empty() {
        writeln!(
            out,
            "no XDP sets attached by bpfmux in this network namespace"
        )?;
    }
    for v in &listing.sets {
        print_view(&mut out, v)?;
    }
    for f in &listing.foreign {
        writeln!(
            out,
            "{} (ifindex {}): XDP program {} (not attached by bpfmux)",
            f.ifname, f.ifindex, f.prog_id
        )?;
    }
    Ok(())
}

fn detach(a: DetachArgs) -> Result<()> {
    let mut out = crate::out::stdout();
    if a.stale {
        let removed = xdp::prune_stale()?;
        writeln!(
            out,
            "removed the state of {} stale set(s){}",
            removed.len(),
            if removed.is_empty() {
                String::new()
            } else {
                format!(
                    " (ifindex {})",
                    removed
                        .iter()
                        .map(u32::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        )?;
        return Ok(());
    }
    let Some(iface) = a.iface else {
        bail!("name an interface or --stale");
    };
    let head = xdp::detach(&iface)?;
    writeln!(
        out,
        "detached from {iface} (head program {head}); no XDP program and no bpfmux pins left there"
    )?;
    Ok(())
}

fn print_view(out: &mut impl Write, v: &SetView) -> std::io::Result<()> {
    let name = v.ifname.as_deref().unwrap_or("(gone)");
    match &v.set {
        Some(s) => {
            writeln!(
                out,
                "{name} (ifindex {}): {} program{}, engine {}, {} mode{}, link {}, head program {}",
                v.ifindex,
                s.progs.len(),
                if s.progs.len() == 1 { "" } else { "s" },
                s.engine,
                s.mode,
                v.running
                    .as_deref()
                    .map_or(String::new(), |r| format!(" (running {r})")),
                v.link_id,
                s.head_prog_id
            )?;
            let w = s
                .progs
                .iter()
                .map(|p| p.name.len())
                .max()
                .unwrap_or(0)
                .max(7);
            writeln!(
                out,
                "  {:>2}  {:w$}  {:>7}  {:14}  SOURCE",
                "#", "PROGRAM", "ID", "CHAIN-ON"
            )?;
            for (i, p) in s.progs.iter().enumerate() {
                let chain = if i + 1 == s.progs.len() {
                    "-".to_string()
                } else {
                    p.chain_on.to_string()
                };
                writeln!(
                    out,
                    "  {i:>2}  {:w$}  {:>7}  {chain:14}  {}:{}",
                    p.name,
                    p.prog_id,
                    p.origin.object.display(),
                    p.origin.program
                )?;
            }
        }
        None => writeln!(out, "{name} (ifindex {}): link {}", v.ifindex, v.link_id)?,
    }
    for p in &v.problems {
        writeln!(out, "  problem: {p}")?;
    }
    Ok(())
}
