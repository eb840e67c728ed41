//! `bpfmux xdp`: several XDP programs on one interface, chained by return
//! code.

use std::io::Write;

use anyhow::{bail, Result};
use bpfmux::xdp::libxdp::LibxdpError;
use bpfmux::xdp::{self, ActionSet, ActionSetError, AttachOptions, EngineChoice, Mode, ProgSpec};
use bpfmux::xdp::{Problem, Refusal, SetView};

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
        .map(|s| {
            s.parse::<ActionSet>().map_err(|e| match e {
                ActionSetError::StandsAlone(word) => anyhow::anyhow!(
                    "'{word}' stands alone: give it as the whole --chain-on value, not in a list"
                ),
                e => e.into(),
            })
        })
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
        .collect::<Result<Vec<_>, _>>()?;
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
    let mut report = xdp::attach(&a.iface, &specs, &opts).map_err(in_our_words)?;
    for w in &report.warnings {
        eprintln!("bpfmux: warning: {w}");
    }
    let mut out = crate::out::stdout();
    if a.json {
        our_problems(&mut report.view);
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
    let mut listing = xdp::list()?;
    let mut out = crate::out::stdout();
    if a.json {
        listing.sets.iter_mut().for_each(our_problems);
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
    let r = xdp::detach(&iface, a.force).map_err(in_our_words)?;
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
            writeln!(out, "  problem: {}", problem_words(p))?;
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
        writeln!(out, "  problem: {}", problem_words(p))?;
    }
    Ok(())
}

/// `text`, its closing parenthesis replaced by `more` and one.
fn before_paren(text: &str, more: &str) -> String {
    format!("{}{more})", text.strip_suffix(')').unwrap_or(text))
}

/// A problem [`xdp::list`] found, with the command that deals with it.
fn problem_words(p: &Problem) -> String {
    let text = p.to_string();
    match p {
        Problem::Leftover => before_paren(&text, "; `bpfmux xdp detach --stale` removes it"),
        Problem::InterfaceGone => {
            format!("{text} (`bpfmux xdp detach --stale` removes the state)")
        }
        Problem::NotInDispatcher { iface, .. } | Problem::DispatcherGone { iface } => before_paren(
            &text,
            &format!(" `bpfmux xdp detach {iface}` forgets the set"),
        ),
        _ => text,
    }
}

/// The set's problems in the CLI's words, for its JSON.
fn our_problems(v: &mut SetView) {
    for p in &mut v.problems {
        *p = Problem::Other(problem_words(p));
    }
}

/// One link of an error chain in the CLI's words: a refusal with the
/// option or command that gets past it.
fn link_words(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    // A step's source is the library's error in a box.
    let inner = e
        .downcast_ref::<xdp::Error>()
        .or_else(|| e.downcast_ref::<Box<xdp::Error>>().map(|b| &**b));
    let (refusal, libxdp) = match inner {
        Some(xdp::Error::Refused(r)) => (Some(r), None),
        Some(xdp::Error::Libxdp(l)) => (None, Some(l)),
        _ => (e.downcast_ref::<Refusal>(), e.downcast_ref::<LibxdpError>()),
    };
    if let Some(r) = refusal {
        let text = r.to_string();
        return Some(match r {
            Refusal::NeverRuns { .. } => text.replacen(
                "continues on no return code;",
                "continues on no return code (--chain-on none);",
                1,
            ),
            Refusal::NoNativeXdp { .. } => format!("{text}; try --mode generic"),
            Refusal::LibxdpRuns {
                iface,
                prog_id,
                programs,
            } => format!(
                "{iface} runs libxdp's dispatcher (program {prog_id}: {programs}); add to it with \
                 --engine libxdp (auto does), or remove it first: xdp-loader unload {iface} \
                 --all (or bpfmux xdp detach {iface} --force)"
            ),
            Refusal::OursInLibxdp { iface } => format!(
                "bpfmux's set on {iface} runs in libxdp's dispatcher; use --engine libxdp \
                 (or auto), or `bpfmux xdp detach {iface}` first"
            ),
            Refusal::NotInLibxdp { iface, engine } => format!(
                "the set on {iface} runs on the {engine} engine, not in libxdp's dispatcher; \
                 `bpfmux xdp detach {iface}` first, then attach with --engine libxdp"
            ),
            Refusal::StateUnreadable { iface, detail } => format!(
                "the state of {iface} is unreadable ({detail}); run `bpfmux xdp detach {iface}` \
                 first"
            ),
            Refusal::LibxdpFull {
                iface, replaced, ..
            } if *replaced > 0 => {
                format!("{text}; `bpfmux xdp detach {iface}` first frees bpfmux's")
            }
            Refusal::OnlyTheirs { iface, .. } => {
                format!("{text} (or bpfmux xdp detach {iface} --force)")
            }
            Refusal::NoChainSlot { .. } => {
                format!("{text} (use --engine dispatcher, or remove other chains)")
            }
            Refusal::Frags { .. } => text.replacen(
                "is not supported yet",
                "is not supported by bpfmux xdp yet",
                1,
            ),
            _ => text,
        });
    }
    match libxdp? {
        e @ LibxdpError::NoDispatcher => Some(format!(
            "{e}. One program attaches without a dispatcher with --engine auto"
        )),
        e @ LibxdpError::NeedsTrampolines { .. } => Some(before_paren(
            &e.to_string(),
            "; a single program attaches without it with --engine auto",
        )),
        _ => None,
    }
}

/// The library's error, its refusals in the CLI's words (as `{:#}` prints
/// a chain: each link, then `: ` and the next).
fn in_our_words(e: xdp::Error) -> anyhow::Error {
    let e = anyhow::Error::from(e);
    if !e.chain().any(|c| link_words(c).is_some()) {
        return e;
    }
    let links: Vec<String> = e
        .chain()
        .map(|c| link_words(c).unwrap_or_else(|| c.to_string()))
        .collect();
    anyhow::anyhow!("{}", links.join(": "))
}

#[cfg(test)]
mod tests {
    //! The library's refusals and problems read, byte for byte, as they did
    //! when the library wrote the CLI's hints into them.
    use std::io;

    use bpfmux::xdp::libxdp::LibxdpError;
    use bpfmux::xdp::{Problem, Refusal};

    use super::{chain_sets, in_our_words, problem_words};

    fn said(r: Refusal) -> String {
        format!("{:#}", in_our_words(r.into()))
    }

    #[test]
    fn refusals_inside_steps_are_in_our_words_too() {
        let e = bpfmux::xdp::Error::At {
            step: "attach".into(),
            source: Box::new(Refusal::OursInLibxdp { iface: "x".into() }.into()),
        };
        assert_eq!(
            format!("{:#}", in_our_words(e)),
            "attach: bpfmux's set on x runs in libxdp's dispatcher; use --engine libxdp (or \
             auto), or `bpfmux xdp detach x` first"
        );
    }

    #[test]
    fn refusals_are_what_they_were() {
        let eth0 = || "eth0".to_string();
        assert_eq!(
            said(Refusal::NeverRuns {
                index: 1,
                program: "c.o:c".into(),
                blocker: "b.o:b".into(),
            }),
            "program 2 (c.o:c) can never run: program 1 (b.o:b) continues on no return code \
             (--chain-on none); drop the programs after it or give it actions"
        );
        assert_eq!(
            said(Refusal::NoNativeXdp {
                iface: eth0(),
                source: io::Error::from_raw_os_error(libc::EOPNOTSUPP),
            }),
            format!(
                "the driver of eth0 has no native XDP; try --mode generic: {}",
                io::Error::from_raw_os_error(libc::EOPNOTSUPP)
            )
        );
        assert_eq!(
            said(Refusal::LibxdpRuns {
                iface: eth0(),
                prog_id: 7,
                programs: "a, b".into(),
            }),
            "eth0 runs libxdp's dispatcher (program 7: a, b); add to it with --engine libxdp \
             (auto does), or remove it first: xdp-loader unload eth0 --all (or bpfmux xdp \
             detach eth0 --force)"
        );
        assert_eq!(
            said(Refusal::OursInLibxdp { iface: eth0() }),
            "bpfmux's set on eth0 runs in libxdp's dispatcher; use --engine libxdp (or auto), \
             or `bpfmux xdp detach eth0` first"
        );
        assert_eq!(
            said(Refusal::NotInLibxdp {
                iface: eth0(),
                engine: "dispatcher".into(),
            }),
            "the set on eth0 runs on the dispatcher engine, not in libxdp's dispatcher; \
             `bpfmux xdp detach eth0` first, then attach with --engine libxdp"
        );
        assert_eq!(
            said(Refusal::StateUnreadable {
                iface: eth0(),
                detail: "bad json".into(),
            }),
            "the state of eth0 is unreadable (bad json); run `bpfmux xdp detach eth0` first"
        );
        let full = |replaced| Refusal::LibxdpFull {
            iface: eth0(),
            max: 10,
            others: 6,
            replaced,
            new: 3,
        };
        assert_eq!(
            said(full(0)),
            "libxdp's dispatcher runs at most 10 programs: eth0 has 6 of other tools, and this \
             set has 3"
        );
        assert_eq!(
            said(full(2)),
            "libxdp's dispatcher runs at most 10 programs: eth0 has 6 of other tools and \
             bpfmux's 2 (until the new set is in), and this set has 3; `bpfmux xdp detach \
             eth0` first frees bpfmux's"
        );
        assert_eq!(
            said(Refusal::OnlyTheirs {
                iface: eth0(),
                prog_id: 7,
                programs: "a".into(),
            }),
            "eth0 runs libxdp's dispatcher (program 7: a), with no program of bpfmux's; remove \
             it with xdp-loader unload eth0 --all (or bpfmux xdp detach eth0 --force)"
        );
        let enospc = io::Error::from_raw_os_error(libc::ENOSPC);
        assert_eq!(
            format!(
                "{:#}",
                in_our_words(bpfmux::xdp::Error::At {
                    step: "build the chain".into(),
                    source: Box::new(Refusal::NoChainSlot { source: enospc }.into()),
                })
            ),
            format!(
                "build the chain: each program that owns a chain holds one of the kernel XDP \
                 dispatcher's 48 slots, and none is free (use --engine dispatcher, or remove \
                 other chains): {}",
                io::Error::from_raw_os_error(libc::ENOSPC)
            )
        );
        assert_eq!(
            said(Refusal::Frags {
                program: "p".into(),
                path: "/x/p.o".into(),
            }),
            "program p in /x/p.o is an xdp.frags program; multi-buffer XDP is not supported by \
             bpfmux xdp yet"
        );
    }

    #[test]
    fn libxdp_errors_are_what_they_were() {
        let e = |l: LibxdpError| format!("{:#}", in_our_words(l.into()));
        assert!(e(LibxdpError::NoDispatcher).ends_with(
            "share the interface; it was taken off again. One program attaches without a \
             dispatcher with --engine auto"
        ));
        assert_eq!(
            e(LibxdpError::NeedsTrampolines {
                what: "add the programs to libxdp's dispatcher".into(),
                code: -95,
                message: "Operation not supported".into(),
            }),
            "add the programs to libxdp's dispatcher: Operation not supported (libxdp's \
             dispatcher needs BPF trampolines for its freplace programs, which this kernel \
             refuses; a single program attaches without it with --engine auto)"
        );
    }

    #[test]
    fn problems_and_actions_are_what_they_were() {
        let iface = || "eth0".to_string();
        assert_eq!(
            problem_words(&Problem::Leftover),
            "state without an XDP link (leftover; `bpfmux xdp detach --stale` removes it)"
        );
        assert_eq!(
            problem_words(&Problem::InterfaceGone),
            "the interface is gone (`bpfmux xdp detach --stale` removes the state)"
        );
        assert_eq!(
            problem_words(&Problem::NotInDispatcher {
                program: "a".into(),
                prog_id: 9,
                iface: iface(),
            }),
            "program a (id 9) is no longer in libxdp's dispatcher (removed by another tool? \
             `bpfmux xdp detach eth0` forgets the set)"
        );
        assert_eq!(
            problem_words(&Problem::DispatcherGone { iface: iface() }),
            "libxdp's dispatcher is gone from the interface (removed by another tool? \
             `bpfmux xdp detach eth0` forgets the set)"
        );
        let err = chain_sets(&["pass,any".into()], 1).unwrap_err();
        assert_eq!(
            err.to_string(),
            "'any' stands alone: give it as the whole --chain-on value, not in a list"
        );
        // In JSON too, as a string.
        assert_eq!(
            serde_json::to_string(&Problem::Other(problem_words(&Problem::Leftover))).unwrap(),
            "\"state without an XDP link (leftover; `bpfmux xdp detach --stale` removes it)\""
        );
    }
}
