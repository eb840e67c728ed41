//! `bpfmux maps`: a process's mappings, or per-address normalization.

use std::io::Write;

use anyhow::Context as _;
use bpfmux::normalize::{display_name, Backend, Mapping, Normalizer, Options, VmaFilter};

use crate::input::Addrs;
use crate::out::JsonArray;

/// Show mappings of a process, or normalize addresses (mapping, file offset,
/// build ID per address) using PROCMAP_QUERY with a text fallback.
#[derive(clap::Args)]
#[command(after_help = "\
Both backends report the same mappings. Names are shown as the kernel's
/proc/PID/maps text shows them: a newline in a file name is written \\012
(the ioctl backend's raw name is escaped the same way), \" (deleted)\" follows
an unlinked file. Names are bytes: a byte that is not part of valid UTF-8
is written \\xNN (two hex digits), in the text and the JSON output alike.
With --json a run that fails prints the error on standard error and, on
standard output, nothing or (when it fails midway) a closed array of the
answers so far. The [vsyscall] page is not a VMA of the process (the
PROCMAP_QUERY ioctl cannot return it), so neither backend lists it and its
addresses are unmapped. Build IDs of deleted and memfd files: the ioctl
backend gets them from the kernel; the text backend opens the file through
/proc/PID/map_files (CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE) or else reads
the file's first pages where the process maps them (/proc/PID/mem, which
ptrace rules allow for one's own processes).

Examples:
  bpfmux maps --pid 1234                          every mapping
  bpfmux maps --pid 1234 --exec-only 0x7f3a12345678
  bpfmux maps --pid 1234 --backend text --json
  cat addrs.txt | bpfmux maps --pid 1234 -        addresses from standard input")]
pub struct Args {
    /// Process to inspect.
    #[arg(long)]
    pid: u32,
    /// Only executable mappings count.
    #[arg(long)]
    exec_only: bool,
    /// Only file-backed mappings count.
    #[arg(long)]
    file_backed: bool,
    /// How to read the mappings.
    #[arg(long, value_enum, default_value = "auto")]
    backend: BackendArg,
    /// Skip reading ELF build IDs.
    #[arg(long)]
    no_build_ids: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// Addresses to normalize (hex; '-': read from standard input, lines of
    /// at most 64 KiB, answered in batches and whenever the input pauses);
    /// none: list the mappings.
    #[arg(value_name = "ADDR")]
    addrs: Vec<String>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum BackendArg {
    Auto,
    Ioctl,
    Text,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let mut n = Normalizer::new(Options {
        backend: match args.backend {
            BackendArg::Auto => Backend::Auto,
            BackendArg::Ioctl => Backend::ProcmapQuery,
            BackendArg::Text => Backend::Text,
        },
        build_ids: !args.no_build_ids,
        cache: false,
        // One call per run: nothing to keep open for.
        keep_maps_open: false,
    });
    let filter = VmaFilter {
        exec_only: args.exec_only,
        file_backed_only: args.file_backed,
    };
    let mut out = crate::out::stdout();
    if args.addrs.is_empty() {
        let maps = n.mappings(args.pid, filter).context("listing mappings")?;
        if args.json {
            writeln!(out, "{}", serde_json::to_string_pretty(&maps)?)?;
        } else {
            for m in &maps {
                writeln!(out, "{}", mapping_line(m))?;
            }
        }
        return Ok(());
    }
    // JSON: one array of {addr, file_offset, mapping}, written as batches
    // come (a mapping is repeated per address: batches share no indices).
    let mut json = JsonArray::default();
    let result = Addrs::from_args(&args.addrs, false)?.for_each_batch(|batch| {
        let norm = n
            .normalize(args.pid, batch, filter)
            .context("normalizing")?;
        for (i, a) in norm.addrs.iter().enumerate() {
            let m = norm.mapping_of(i);
            if args.json {
                json.push(
                    &mut out,
                    &AddrJson {
                        addr: format!("{:#x}", a.addr),
                        file_offset: a.resolved.map(|r| format!("{:#x}", r.file_offset)),
                        mapping: m,
                    },
                )?;
                continue;
            }
            match (a.resolved, m) {
                (Some(r), Some(m)) => writeln!(
                    out,
                    "{:#x}  file+{:#x}  {}",
                    a.addr,
                    r.file_offset,
                    mapping_line(m)
                )?,
                _ => writeln!(out, "{:#x}  unmapped", a.addr)?,
            }
        }
        out.flush()?;
        Ok(())
    });
    if args.json {
        return json.end(&mut out, result);
    }
    result?;
    Ok(())
}

/// One normalized address in `--json` output (numbers as `0x…` strings).
#[derive(serde::Serialize)]
struct AddrJson<'a> {
    addr: String,
    file_offset: Option<String>,
    mapping: Option<&'a Mapping>,
}

fn mapping_line(m: &Mapping) -> String {
    let name = m
        .name
        .as_ref()
        .map(|p| display_name(p).into_owned())
        .unwrap_or_default();
    let build_id = m
        .build_id
        .as_ref()
        .map(|b| format!("  build-id {b}"))
        .unwrap_or_default();
    format!(
        "{:x}-{:x} {} {:08x} {:02x}:{:02x} {:<8} {}{}",
        m.start, m.end, m.perms, m.offset, m.dev_major, m.dev_minor, m.inode, name, build_id
    )
}
