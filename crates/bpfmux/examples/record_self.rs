//! Write a recording (`bpfmux report FILE` reads it) of one stack of this
//! very process, without tracing anything: the library's writer, as a tool
//! of one's own would use it. Its user frames are two of this program's
//! functions and libc's getpid (the two callers a few bytes in, where a
//! return address would be), normalized while the process runs; its
//! kernel frames the entry points of getpid as this kernel's kallsyms has
//! them (read as root), a few bytes in.
//!
//! `cargo run --example record_self -- self.jsonl.gz`, then
//! `bpfmux report self.jsonl.gz` (after this process is gone).

use bpfmux::normalize::capture::CaptureCache;
use bpfmux::symbolize::{KernelSymbolizer, SymResult};
use bpfmux::trace::recording::{Header, Host, RecordedOptions, Writer, FORMAT, VERSION};
use bpfmux::trace::summary::{FunctionTotals, Summary};
use bpfmux::trace::{EngineKind, ExitSide, FuncStats};

#[inline(never)]
fn leaf() -> u64 {
    leaf as *const () as u64
}

#[inline(never)]
fn caller() -> u64 {
    caller as *const () as u64 + 4
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn run() -> anyhow::Result<()> {
    let path = std::env::args().nth(1).unwrap_or("self.jsonl.gz".into());
    let ksyms = KernelSymbolizer::load()?;
    // A kernel address a few bytes into each entry point, where kallsyms has it.
    let kallsyms = std::fs::read_to_string("/proc/kallsyms")?;
    let kernel: Vec<u64> = ["__x64_sys_getpid", "x64_sys_call", "do_syscall_64"]
        .iter()
        .filter_map(|want| {
            kallsyms.lines().find_map(|l| {
                let mut it = l.split_whitespace();
                let (a, _, name) = (it.next()?, it.next()?, it.next()?);
                (name == *want).then(|| u64::from_str_radix(a, 16).ok().map(|a| a + 0x9))?
            })
        })
        .filter(|&a| matches!(ksyms.symbolize(&[a])[0].result, SymResult::Symbol(_)))
        .collect();
    let mut cache = CaptureCache::default();
    let user = cache.normalize(
        std::process::id(),
        &[leaf(), caller(), libc::getpid as *const () as u64 + 1],
    );
    let mut w = Writer::create(path.as_ref())?;
    w.write_header(&Header {
        format: FORMAT.into(),
        version: VERSION,
        bpfmux: env!("CARGO_PKG_VERSION").into(),
        created_unix_s: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_secs(),
        host: Host::this(),
        engine: EngineKind::KprobeMulti,
        exit_side: ExitSide::None,
        options: RecordedOptions {
            stacks: true,
            patterns: vec!["__x64_sys_getpid".into()],
            ..Default::default()
        },
        functions: vec!["__x64_sys_getpid".into()],
    })?;
    let pid = std::process::id();
    w.write_stack(
        ("__x64_sys_getpid", pid, 1),
        &kernel,
        &user,
        &cache,
        Some(&ksyms),
    )?;
    // The summary a run of one second that counted one call would give.
    let mut summary: Summary = serde_json::from_value(serde_json::json!({
        "engine": "kprobe-multi", "exit_side": "none", "functions_attached": 1,
        "functions_dropped": 0, "skipped": [], "links": 1, "select_ms": 0.0,
        "prepare_ms": 0.0, "attach_ms": 0.0, "detach_ms": 0.0,
        "attach_breakdown": {"program_loads": 0, "load_ms": 0.0, "links": 0,
            "link_functions": 0, "link_ms": 0.0, "refused_tries": 0, "refused_ms": 0.0,
            "split": []},
        "elapsed_s": 1.0, "events": 0,
        "lost": {"events": 0, "chains": 0, "graph": 0, "stacks": 0, "nesting": 0,
            "recursion_misses": 0},
        "functions": [],
    }))?;
    let one = FuncStats {
        calls: 1,
        ..Default::default()
    };
    summary.functions = vec![FunctionTotals::new("__x64_sys_getpid", &one, None)];
    let n = w.write_end(&summary, &[])?;
    println!(
        "{path}: {} stack, {} files, {} kernel symbols",
        n.stacks, n.objects, n.kernel_symbols
    );
    Ok(())
}
