//! `bpfmux sym`: addresses → function+offset (file:line with DWARF).

use std::io::Write;

use std::path::PathBuf;

use anyhow::{bail, Context};
use bpfmux::normalize::display_name;
use bpfmux::symbolize::{
    at_source, KernelLines, KernelSymbolizer, SymResult, SymbolKind, Symbolized, UserSymbolizer,
};

use crate::input::Addrs;
use crate::out::JsonArray;

/// Symbolize user addresses of a process, offsets in an ELF file, or kernel
/// addresses.
#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("target").required(true).args(["pid", "kernel", "file"])))]
#[command(after_help = "\
Each answer is function+offset, with file:line where DWARF has it; calls
inlined at the address follow on lines of their own (`inlined NAME at
FILE:LINE`, outermost first). Without usable DWARF the ELF symbol tables
answer (.symtab, .dynsym, the debug file's .symtab), PLT stubs as NAME@plt;
[vdso] addresses are looked up in the process's vDSO image. The legacy
[vsyscall] page is not a mapping of the process (see bpfmux maps --help):
its addresses are unmapped. Kernel functions get file:line and inlined
calls with --vmlinux: the running kernel's vmlinux with DWARF (its build
ID must be the one in /sys/kernel/notes; KASLR is accounted for), given
or found ('auto': /usr/lib/debug/.build-id/, /usr/lib/debug/boot/,
/lib/modules/RELEASE/build/, /boot/). Kernel data objects are marked
(data); a BPF program (bpf_prog_TAG_NAME [bpf]) names only its own code,
by the length the kernel gives for it, and an address past that is
unmapped.
File names that are not UTF-8 show each such byte as \\xNN, in the text and
the JSON output alike.

Addresses are hexadecimal (0x7f3a12345678 or 7f3a12345678). With none, or
with '-', they are read from standard input (whitespace-separated, '#'
comments, lines of at most 64 KiB) and answered in batches as they come, so
any number works; when the input pauses (50 ms), what has come is answered,
so a caller can write one address and wait for its answer. With --json each
answer is one line of the array ('[', then '  {...}', then ', {...}'), and a
run that fails prints nothing, or the answers so far in a closed array, on
standard output and the error on standard error. A process that exits
meanwhile keeps the answers given; later ones come from the mappings
already read, where they cover the address, and are named from the files
already looked up (kept open), as they were while it lived.

With --file PATH the addresses are in that ELF file, no process needed:
virtual addresses as its program headers place them (as addr2line -e takes
them), or file offsets with --file-offsets (what normalized frames keep:
bpfmux maps, a recording's user frames); answers name PATH as the binary.

A file with no DWARF and no debug file installed here (by build ID below
/usr/lib/debug/.build-id/, or by .gnu_debuglink) is named from the debug file
the debuginfod servers in DEBUGINFOD_URLS have for its build ID, when they
have one (see bpfmux report --help for the variables); --no-debuginfod asks
none.

Examples:
  bpfmux sym --pid 1234 0x55d0c0ffee00 0x7f3a12345678
  bpfmux sym --kernel ffffffff81234567
  bpfmux sym --kernel --vmlinux auto ffffffff81234567
  cut -d' ' -f2 stack.txt | bpfmux sym --pid 1234 --json
  bpfmux sym --file /usr/bin/python3.11 0x1f4e20
  bpfmux sym --file /lib/x86_64-linux-gnu/libc.so.6 --file-offsets 0x27cd0
  DEBUGINFOD_URLS=http://127.0.0.1:8002 bpfmux sym --pid 1234 0x55d0c0ffee00")]
pub struct Args {
    /// Process whose addresses these are.
    #[arg(long)]
    pid: Option<u32>,
    /// The addresses are kernel addresses (resolved via /proc/kallsyms).
    #[arg(long)]
    kernel: bool,
    /// The addresses are in this ELF file: virtual addresses as its
    /// program headers give them, or file offsets with --file-offsets.
    #[arg(long, value_name = "PATH")]
    file: Option<PathBuf>,
    /// With --file: the addresses are file offsets.
    #[arg(long, requires = "file")]
    file_offsets: bool,
    /// With --kernel: file:line and inlined calls from the running kernel's
    /// vmlinux with DWARF, PATH or found in the usual places ('auto').
    #[arg(long, value_name = "PATH|auto", conflicts_with = "pid")]
    vmlinux: Option<String>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// Ask no debuginfod server, whatever DEBUGINFOD_URLS says.
    #[arg(long, conflicts_with = "kernel")]
    no_debuginfod: bool,
    /// Addresses (hex); none or '-': read them from standard input.
    #[arg(value_name = "ADDR")]
    addrs: Vec<String>,
}

enum Target {
    User(u32, Box<UserSymbolizer>),
    File(PathBuf, Box<UserSymbolizer>),
    Kernel(KernelSymbolizer),
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let addrs = Addrs::from_args(&args.addrs, true)?;
    let user = || {
        let client = crate::debuginfod::client(WHO, args.no_debuginfod);
        Box::new(UserSymbolizer::default().with_debuginfod(client))
    };
    let mut target = match (args.pid, args.kernel, &args.file) {
        (Some(pid), false, None) => Target::User(pid, user()),
        (None, false, Some(path)) => {
            // Refused now, not once per answer.
            let meta = std::fs::metadata(path).with_context(|| path.display().to_string())?;
            if !meta.is_file() {
                bail!("{}: not a regular file", path.display());
            }
            bpfmux::symbolize::elf_table::load_segments(path)
                .with_context(|| format!("{}: not an ELF file bpfmux can read", path.display()))?;
            Target::File(path.clone(), user())
        }
        (None, true, None) => {
            let k = KernelSymbolizer::load()?;
            Target::Kernel(match args.vmlinux.as_deref() {
                None => k,
                Some(v) => k.with_lines(kernel_lines(v)?.into()),
            })
        }
        _ => bail!("give exactly one of --pid PID, --file PATH or --kernel"),
    };
    let mut out = crate::out::stdout();
    let mut json = JsonArray::default();
    let result = addrs.for_each_batch(|batch| {
        let syms = match &mut target {
            Target::User(pid, u) => u.symbolize(*pid, batch)?,
            Target::File(path, u) => {
                let results = if args.file_offsets {
                    u.symbolize_file(path, path, batch)
                } else {
                    u.symbolize_file_vaddrs(path, path, batch)
                };
                batch
                    .iter()
                    .zip(results)
                    .map(|(&addr, result)| Symbolized { addr, result })
                    .collect()
            }
            Target::Kernel(k) => k.symbolize(batch),
        };
        for s in &syms {
            if args.json {
                json.push(&mut out, s)?;
            } else {
                writeln!(out, "{}", line(s))?;
            }
        }
        out.flush()?;
        Ok(())
    });
    if let Target::User(_, u) | Target::File(_, u) = &target {
        crate::debuginfod::tell_answers(WHO, 0, u.debuginfod_answers());
    }
    if args.json {
        return json.end(&mut out, result);
    }
    result?;
    Ok(())
}

const WHO: &str = "bpfmux sym";

fn line(s: &Symbolized) -> String {
    match &s.result {
        SymResult::Symbol(sym) => {
            let module = sym
                .module
                .as_ref()
                .map(|m| format!(" [{}]", display_name(m)))
                .unwrap_or_default();
            let data = if sym.kind == SymbolKind::Data {
                " (data)"
            } else {
                ""
            };
            let mut out = format!(
                "{:#x}  {}+{:#x}{data}{}{module}",
                s.addr,
                sym.name,
                sym.offset,
                at_source(sym.file.as_deref(), sym.line)
            );
            // Inlined calls, outermost first, each where the address is in it.
            for f in &sym.inlined {
                out.push_str(&format!(
                    "\n    inlined {}{}",
                    f.name,
                    at_source(f.file.as_deref(), f.line)
                ));
            }
            out
        }
        SymResult::NoSymbol {
            module,
            file_offset,
            reason,
        } => {
            let module = module
                .as_ref()
                .map(|m| display_name(m).into_owned())
                .unwrap_or_default();
            format!(
                "{:#x}  ?? ({module} file+{file_offset:#x}: {reason})",
                s.addr
            )
        }
        SymResult::Unmapped => format!("{:#x}  unmapped", s.addr),
    }
}

/// The vmlinux a `--vmlinux PATH|auto` names, opened.
pub fn kernel_lines(arg: &str) -> Result<KernelLines, bpfmux::symbolize::KernelLinesError> {
    match arg {
        "auto" => KernelLines::find(),
        path => KernelLines::open(path),
    }
}
