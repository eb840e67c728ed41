//! `bpfmux maps`: a process's mappings, or per-address normalization.

use anyhow::Context as _;
use bpfmux::normalize::{Backend, Mapping, Normalizer, Options, VmaFilter};

use crate::addr::parse_addr;

/// Show mappings of a process, or normalize addresses (mapping, file offset,
/// build ID per address) using PROCMAP_QUERY with a text fallback.
#[derive(clap::Args)]
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
    /// Addresses to normalize (hex); none: list the mappings.
    #[arg(value_parser = parse_addr)]
    addrs: Vec<u64>,
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
    if args.addrs.is_empty() {
        let maps = n.mappings(args.pid, filter).context("listing mappings")?;
        if args.json {
            println!("{}", serde_json::to_string_pretty(&maps)?);
        } else {
            for m in &maps {
                println!("{}", mapping_line(m));
            }
        }
        return Ok(());
    }
    let out = n
        .normalize(args.pid, &args.addrs, filter)
        .context("normalizing")?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    for (i, a) in out.addrs.iter().enumerate() {
        match (a.resolved, out.mapping_of(i)) {
            (Some(r), Some(m)) => println!(
                "{:#x}  file+{:#x}  {}",
                a.addr,
                r.file_offset,
                mapping_line(m)
            ),
            _ => println!("{:#x}  unmapped", a.addr),
        }
    }
    Ok(())
}

fn mapping_line(m: &Mapping) -> String {
    let name = m
        .name
        .as_ref()
        .map(|p| p.display().to_string())
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
