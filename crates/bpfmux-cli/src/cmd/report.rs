//! `bpfmux report FILE`: a recording (`bpfmux trace --record FILE`) printed
//! as the run printed it, its frames named where it is read. The reading
//! and naming are the library's (`bpfmux::trace::recording`); the printing
//! is the run's own report forms, fed the same summary and error chains.

use std::path::PathBuf;

use bpfmux::symbolize::debuginfod::Kind;
use bpfmux::trace::recording::{Found, RecordingError, Replay, SymbolSources};
use bpfmux::trace::{JsonLines, PlainText, Report};

use super::trace::notes_to;

/// Print a recording made by `bpfmux trace --record FILE`: its error chains,
/// then the totals, histograms, call graph and stacks, as the run printed
/// them.
#[derive(clap::Args)]
#[command(after_help = "\
User frames are named where the report runs: from the binary at the path the
process mapped, if it is there with the recorded build ID, else from its debug
file by build ID (DIR/.build-id/xx/yyyy.debug, DIR from --debug-dir, default
/usr/lib/debug), else from the debuginfod servers in DEBUGINFOD_URLS (its debug
file, else the file itself; also the debug file of a binary found here without
DWARF); frames of a file found nowhere print as addresses, with a warning
naming the file, its build ID and what each place answered. Kernel frames are
named from the kernel symbols the recording carries, whatever kernel runs here.
Error chains print with the time of day they came (in this machine's time zone).

debuginfod: DEBUGINFOD_URLS (servers, space-separated), DEBUGINFOD_CACHE_PATH
(default ~/.cache/debuginfod_client, shared with elfutils' client),
DEBUGINFOD_TIMEOUT (seconds to connect and to answer, default 90),
DEBUGINFOD_MAXSIZE (bytes). A server that cannot be reached is asked once.

Examples:
  bpfmux trace --stacks --errors --record run.jsonl.gz -c 'cat /nope' do_sys_openat2
  bpfmux report run.jsonl.gz                  the chains, totals and stacks again
  bpfmux report --json run.jsonl.gz           as --json printed them
  bpfmux report --debug-dir ./debug run.jsonl.gz
                                             debug files from ./debug/.build-id/
  DEBUGINFOD_URLS=http://127.0.0.1:8002 bpfmux report run.jsonl.gz
                                             files not here from a debuginfod server
  bpfmux report -v run.jsonl.gz              also where each file's frames were named from")]
pub struct Args {
    /// The recording.
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// JSON lines: each error chain, then the summary.
    #[arg(long)]
    json: bool,
    /// Rows of the totals table (default: all).
    #[arg(short = 'n', long, value_name = "N")]
    top: Option<usize>,
    /// Look for debug files by build ID below DIR/.build-id/ (repeatable;
    /// default /usr/lib/debug).
    #[arg(long, value_name = "DIR")]
    debug_dir: Vec<PathBuf>,
    /// Ask no debuginfod server, whatever DEBUGINFOD_URLS says.
    #[arg(long)]
    no_debuginfod: bool,
    /// Say where each file's frames were named from, and more of the run.
    #[arg(short, long, action = clap::ArgAction::Count)]
    verbose: u8,
}

const WHO: &str = "bpfmux report";

pub fn run(args: Args) -> anyhow::Result<()> {
    // An I/O error names the file already; the others say what is wrong
    // with its content.
    let replay = Replay::open(&args.file).map_err(|e| match e {
        RecordingError::Io { .. } => anyhow::Error::new(e),
        e => anyhow::Error::new(e).context(args.file.display().to_string()),
    })?;
    let h = &replay.header;
    let when = h.created_local();
    let here = bpfmux::trace::recording::Host::this();
    let kernel = match (&h.host.kernel_build_id, &here.kernel_build_id) {
        (Some(a), Some(b)) if a == b => "the kernel running here",
        _ => "another kernel than this one",
    };
    eprintln!(
        "{WHO}: {}: recorded on {} at {when}, Linux {} ({kernel}); {} functions with engine {}",
        args.file.display(),
        h.host.hostname,
        h.host.kernel_release,
        h.functions.len(),
        h.engine,
    );
    let mut sources = SymbolSources::default();
    if !args.debug_dir.is_empty() {
        sources.debug_dirs.clone_from(&args.debug_dir);
    }
    sources.debuginfod = crate::debuginfod::client(WHO, args.no_debuginfod);
    let resolved = replay.resolve(&sources);
    let mut tally = crate::debuginfod::Tally::default();
    for o in &resolved.objects {
        let name = o.path.as_deref().unwrap_or("(unnamed file)");
        let id = o.build_id.as_deref().unwrap_or("none");
        match &o.found {
            Found::Missing(why) => eprintln!(
                "{WHO}: warning: {name} (build ID {id}): not found here, its frames are \
                 addresses ({why})"
            ),
            Found::Binary(p) if args.verbose > 0 => {
                eprintln!("  {name} (build ID {id}): named from {}", p.display());
            }
            Found::DebugFile(p) if args.verbose > 0 => {
                eprintln!(
                    "  {name} (build ID {id}): named from its debug file {}",
                    p.display()
                );
            }
            Found::Debuginfod(f, kind) => {
                tally.add(f);
                if args.verbose > 0 {
                    let what = match kind {
                        Kind::Debuginfo => "its debug file",
                        Kind::Executable => "the file",
                    };
                    let from = f.server.as_deref().unwrap_or("debuginfod's cache");
                    eprintln!(
                        "  {name} (build ID {id}): named from {what} from {from}, {}",
                        f.file.display()
                    );
                }
            }
            _ => {}
        }
    }
    tally.tell(WHO);
    let notes = notes_to(std::io::stderr(), WHO, args.verbose);
    let out = crate::out::stdout();
    let fields = replay.fields();
    if args.json {
        let mut r = JsonLines::new(out, false).with_notes(notes);
        for (c, at) in &resolved.chains {
            r.recorded_chain(c, *at)?;
        }
        r.summary_with(&resolved.summary, fields)?;
    } else {
        let latency = resolved.summary.latency;
        let mut r = PlainText::new(out, latency, args.top, false).with_notes(notes);
        for (c, at) in &resolved.chains {
            r.recorded_chain(c, *at)?;
        }
        r.summary(&resolved.summary)?;
    }
    Ok(())
}
