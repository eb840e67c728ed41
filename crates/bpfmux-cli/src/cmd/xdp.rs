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
  bpfmux xdp attach eth0 a.o b.o --engine libxdp --priority 20
                                                 in libxdp's dispatcher, shared with
                                                 xdp-loader: run priorities 20 and 21
  bpfmux xdp list                                what runs where (any engine; every
                                                 program of a libxdp dispatcher)
  bpfmux xdp detach eth0                         remove the set and its pins
  bpfmux xdp detach eth0 --force                 also remove libxdp's dispatcher there,
                                                 with other tools' programs and pins

Attaching to an interface that already has a bpfmux set replaces the whole set
atomically: every packet runs either the old set or the new one. Programs named
again (same object file, unchanged) keep running with their maps.

Where libxdp's dispatcher already runs (xdp-loader, or any libxdp program),
auto adds the set to it through libxdp; other tools' programs keep running and
`xdp-loader status` lists bpfmux's programs too. Replacing a set there takes two
dispatcher swaps (new set in, then old set out): packets in between run both.")]
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
    /// Mechanism for several programs: auto picks libxdp where its
    /// dispatcher already runs, else kernel chain calls when the kernel has
    /// them, else bpfmux's freplace dispatcher. libxdp: libxdp's dispatcher
    /// (needs libxdp.so.1), which xdp-loader and other libxdp users share.
    #[arg(long, value_enum, default_value_t = EngineArg::Auto)]
    engine: EngineArg,
    /// libxdp engine: run priority of the first program, the others follow
    /// (+1, +2, ...). Lower runs first, among other tools' programs too.
    /// Default: libxdp's, 50.
    #[arg(long, value_name = "N")]
    priority: Option<u32>,
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
    Libxdp,
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
    /// Instead: remove the state of sets whose interface is gone (in
    /// libxdp's dispatcher: whose programs are all gone).
    #[arg(long)]
    stale: bool,
    /// Where libxdp's dispatcher runs: remove all of it, other tools'
    /// programs and libxdp's pins too (as xdp-loader unload IFACE --all).
    #[arg(long, conflicts_with = "stale")]
    force: bool,
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
            EngineArg::Libxdp => EngineChoice::Libxdp,
        },
        priority: a.priority,
    };
    let report = xdp::attach(&a.iface, &specs, &opts)?;
    let mut out = crate::out::stdout();
    if a.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?;
        return Ok(());
    }
    let in_libxdp = report.view.libxdp.is_some();
    match report.replaced {
        Some(_) if in_libxdp => writeln!(
            out,
            "replaced bpfmux's set in libxdp's dispatcher on {} (new set in, then the old one out)",
            a.iface
        )?,
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
        match &f.libxdp {
            Some(d) => {
                writeln!(
                    out,
                    "{} (ifindex {}): libxdp dispatcher {} ({} mode), {} program{}, none of them bpfmux's",
                    f.ifname,
                    f.ifindex,
                    d.prog_id,
                    d.mode,
                    d.components.len(),
                    if d.components.len() == 1 { "" } else { "s" }
                )?;
                print_libxdp(&mut out, d, None)?;
            }
            None => writeln!(
                out,
                "{} (ifindex {}): XDP program {} (not attached by bpfmux)",
                f.ifname, f.ifindex, f.prog_id
            )?,
        }
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
    let r = xdp::detach(&iface, a.force)?;
    let ids = |v: &[u32]| v.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
    match r.engine {
        Some(xdp::EngineKind::Libxdp) => {
            if r.removed.is_empty() {
                writeln!(
                    out,
                    "bpfmux's programs on {iface} were already gone from libxdp's dispatcher \
                     (removed by another tool); forgot the set"
                )?;
            } else {
                writeln!(
                    out,
                    "removed bpfmux's programs {} from libxdp's dispatcher on {iface}",
                    ids(&r.removed)
                )?;
            }
            if !r.already_gone.is_empty() && !r.removed.is_empty() {
                writeln!(
                    out,
                    "  (programs {} were already gone)",
                    ids(&r.already_gone)
                )?;
            }
        }
        Some(_) => writeln!(
            out,
            "detached from {iface} (head program {}); no XDP program and no bpfmux pins left there",
            r.head_prog_id
        )?,
        None => {}
    }
    if !r.forced.is_empty() || (r.engine.is_none() && a.force) {
        writeln!(
            out,
            "--force: removed libxdp's dispatcher {} from {iface} with {} program(s) of other \
             tools ({}) and its pins",
            r.head_prog_id,
            r.forced.len(),
            named(&r.forced)
        )?;
    }
    if !r.others_left.is_empty() {
        writeln!(
            out,
            "libxdp's dispatcher keeps running other tools' programs there: {}",
            named(&r.others_left)
        )?;
    }
    Ok(())
}

/// Width of the PROGRAM column.
fn name_width<'a>(names: impl Iterator<Item = &'a str>) -> usize {
    names.map(str::len).max().unwrap_or(0).max(7)
}

/// `name id N, ...` of a dispatcher's programs.
fn named(programs: &[xdp::libxdp::Component]) -> String {
    programs
        .iter()
        .map(|c| format!("{} id {}", c.name, c.prog_id))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The programs of a libxdp dispatcher in run order, bpfmux's with their
/// source from `set`.
fn print_libxdp(
    out: &mut impl Write,
    d: &xdp::libxdp::Dispatcher,
    set: Option<&xdp::SetRecord>,
) -> std::io::Result<()> {
    let w = name_width(d.components.iter().map(|c| c.name.as_str()));
    writeln!(
        out,
        "  {:>2}  {:w$}  {:>7}  {:>5}  {:14}  {:6}  SOURCE",
        "#", "PROGRAM", "ID", "PRIO", "CHAIN-ON", "OWNER"
    )?;
    for (i, c) in d.components.iter().enumerate() {
        let source = set
            .and_then(|s| s.progs.iter().find(|p| p.prog_id == c.prog_id))
            .map_or("-".to_string(), |p| {
                format!("{}:{}", p.origin.object.display(), p.origin.program)
            });
        writeln!(
            out,
            "  {i:>2}  {:w$}  {:>7}  {:>5}  {:14}  {:6}  {source}",
            c.name,
            c.prog_id,
            c.run_prio,
            c.chain_on.to_string(),
            if c.bpfmux { "bpfmux" } else { "other" }
        )?;
    }
    Ok(())
}

fn print_view(out: &mut impl Write, v: &SetView) -> std::io::Result<()> {
    let name = v.ifname.as_deref().unwrap_or("(gone)");
    let Some(s) = &v.set else {
        writeln!(out, "{name} (ifindex {}): link {}", v.ifindex, v.link_id)?;
        for p in &v.problems {
            writeln!(out, "  problem: {p}")?;
        }
        return Ok(());
    };
    let head = format!(
        "{name} (ifindex {}): {} program{}, engine {}, {} mode{}",
        v.ifindex,
        s.progs.len(),
        if s.progs.len() == 1 { "" } else { "s" },
        s.engine,
        s.mode,
        v.running
            .as_deref()
            .map_or(String::new(), |r| format!(" (running {r})")),
    );
    match &v.libxdp {
        Some(d) => {
            writeln!(
                out,
                "{head}, libxdp dispatcher {} running {} program{} in all",
                d.prog_id,
                d.components.len(),
                if d.components.len() == 1 { "" } else { "s" },
            )?;
            print_libxdp(out, d, Some(s))?;
        }
        None => {
            writeln!(
                out,
                "{head}, link {}, head program {}",
                v.link_id, s.head_prog_id
            )?;
            let w = name_width(s.progs.iter().map(|p| p.name.as_str()));
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
    }
    for p in &v.problems {
        writeln!(out, "  problem: {p}")?;
    }
    Ok(())
}
