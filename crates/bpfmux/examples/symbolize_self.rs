//! Normalize and symbolize addresses of this very process: two of its own
//! functions and one of libc, as a stack sampler would see them.
//!
//! `cargo run --example symbolize_self` (no privileges needed).

use bpfmux::normalize::{Normalizer, VmaFilter};
use bpfmux::symbolize::{SymResult, UserSymbolizer};

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
    let pid = std::process::id();
    let addrs = [leaf(), caller(), libc::getpid as *const () as u64];

    // Step 1: address → mapping, file offset, build ID.
    let mut normalizer = Normalizer::default();
    let norm = normalizer.normalize(pid, &addrs, VmaFilter::EXEC)?;
    for a in &norm.addrs {
        match &a.resolved {
            Some(r) => {
                let m = &norm.mappings[r.mapping];
                let file = m.name.as_deref().unwrap_or(std::path::Path::new("?"));
                let id = m.build_id.as_ref().map(|b| {
                    b.as_bytes()
                        .iter()
                        .map(|x| format!("{x:02x}"))
                        .collect::<String>()
                });
                println!(
                    "{:#x}: {} + {:#x} (build ID {})",
                    a.addr,
                    file.display(),
                    r.file_offset,
                    id.as_deref().unwrap_or("none")
                );
            }
            None => println!("{:#x}: not in an executable mapping", a.addr),
        }
    }

    // Step 2: symbols (the symbolizer normalizes again, with its own cache).
    let mut symbolizer = UserSymbolizer::default();
    for s in symbolizer.symbolize(pid, &addrs)? {
        match s.result {
            SymResult::Symbol(sym) => println!("{:#x}: {}+{:#x}", s.addr, sym.name, sym.offset),
            other => println!("{:#x}: {other:?}", s.addr),
        }
    }
    Ok(())
}
