//! Stacks the programs recorded, as lines people read: kernel frames
//! symbolized with kallsyms, user frames with the process's own files.

use crate::symbolize::{KernelSymbolizer, SymResult, UserSymbolizer};

/// Larger than any kernel function: the address is not in the symbol.
const MAX_SYMBOL_OFFSET: u64 = 1 << 20;

/// Kernel frames, then `--` and the user frames of process `pid`.
pub fn stack_frames(
    ksyms: Option<&KernelSymbolizer>,
    usyms: &mut UserSymbolizer,
    pid: u32,
    kernel: &[u64],
    user: &[u64],
) -> Vec<String> {
    let name = |r: &SymResult, addr: u64| match r {
        // Past the end of any real function: JIT code (BPF programs and
        // trampolines) has no kallsyms entry bpfmux reads.
        SymResult::Symbol(s) if s.offset > MAX_SYMBOL_OFFSET => format!("{addr:#x} [bpf/jit?]"),
        SymResult::Symbol(s) => format!("{}+{:#x}", s.name, s.offset),
        _ => format!("{addr:#x}"),
    };
    let mut lines = Vec::new();
    match ksyms {
        Some(k) => lines.extend(k.symbolize(kernel).iter().map(|s| name(&s.result, s.addr))),
        None => lines.extend(kernel.iter().map(|a| format!("{a:#x}"))),
    }
    if !user.is_empty() {
        lines.push("--".into());
        match usyms.symbolize(pid, user) {
            Ok(v) => lines.extend(v.iter().map(|s| name(&s.result, s.addr))),
            // The process may be gone: addresses are all we have.
            Err(_) => lines.extend(user.iter().map(|a| format!("{a:#x}"))),
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_without_symbols_are_addresses() {
        let mut u = UserSymbolizer::default();
        let f = stack_frames(None, &mut u, 0, &[0x10, 0x20], &[]);
        assert_eq!(f, ["0x10", "0x20"]);
    }
}
