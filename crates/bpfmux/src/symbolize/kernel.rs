//! Kernel addresses → `function+offset [module]` (or a data object) from
//! /proc/kallsyms.
//!
//! kallsyms has no sizes: a symbol is taken to run to the next one. Two
//! exceptions keep that honest: section end markers (`_etext`, `_edata`,
//! `_end`, `__stop_*`...) cover nothing, so the gap after kernel text is
//! not `_etext+0x…`; and the last symbol before another module (or of all)
//! covers at most [`MAX_LAST_SPAN`] bytes instead of nothing or everything.

use std::io;
use std::path::PathBuf;

use super::{SymResult, Symbol, SymbolKind, Symbolized};

/// Why the kernel's symbols could not be read.
#[derive(Debug, thiserror::Error)]
pub enum KallsymsError {
    /// Reading /proc/kallsyms failed.
    #[error("reading /proc/kallsyms: {0}")]
    Read(#[from] io::Error),
    /// Addresses are hidden from this process (`kernel.kptr_restrict`).
    #[error(
        "/proc/kallsyms shows no addresses (kernel.kptr_restrict hides them; \
         run as root with kptr_restrict <= 1)"
    )]
    AddressesHidden,
}

/// How far the last symbol of a module (or of the kernel) reaches: more
/// than any kernel function, less than the gaps between module areas.
pub const MAX_LAST_SPAN: u64 = 64 << 10;

struct KSym {
    addr: u64,
    name: String,
    module: Option<String>,
    kind: SymbolKind,
    /// A section boundary, not an object (see [`is_end_marker`]).
    end_marker: bool,
}

/// Linker-made symbols that mark where a section ends.
fn is_end_marker(name: &str) -> bool {
    const ENDS: &[&str] = &[
        "_etext",
        "_edata",
        "_end",
        "__bss_stop",
        "_einittext",
        "__init_end",
        "__end_rodata",
        "__end_rodata_aligned",
        "__end_of_kernel_reserve",
        "__per_cpu_end",
    ];
    ENDS.contains(&name) || name.starts_with("__stop_") || name.starts_with("__end_")
}

/// Other linker markers: named only where no real symbol starts at the
/// same address.
fn is_marker(name: &str) -> bool {
    is_end_marker(name)
        || name.starts_with("__start_")
        || matches!(
            name,
            "_stext" | "_text" | "_sdata" | "__bss_start" | "_sinittext" | "__init_begin"
        )
}

/// How well a name serves for its address, among symbols at the same one
/// (higher is better): a real symbol over a linker marker, a name over its
/// `__pi_` alias (the kernel's position-independent copy of the same
/// code), then fewer leading underscores (`memset` over `__memset`).
fn preference(name: &str) -> (bool, bool, std::cmp::Reverse<usize>) {
    let underscores = name.bytes().take_while(|&b| b == b'_').count();
    (
        !is_marker(name),
        !name.starts_with("__pi_"),
        std::cmp::Reverse(underscores),
    )
}

/// Sorted text symbols of the running kernel and its modules.
pub struct KernelSymbolizer {
    syms: Vec<KSym>,
}

impl KernelSymbolizer {
    /// Reads /proc/kallsyms (root, or `kernel.kptr_restrict` 0, to see addresses).
    pub fn load() -> Result<Self, KallsymsError> {
        Self::parse(&std::fs::read_to_string("/proc/kallsyms")?)
    }

    /// Parses kallsyms text (`addr type name [module]`), keeping functions
    /// and data objects.
    pub fn parse(text: &str) -> Result<Self, KallsymsError> {
        let mut syms = Vec::new();
        let mut any_nonzero = false;
        for line in text.lines() {
            let mut it = line.split_ascii_whitespace();
            let (Some(addr), Some(ty), Some(name)) = (it.next(), it.next(), it.next()) else {
                continue;
            };
            let Ok(addr) = u64::from_str_radix(addr, 16) else {
                continue;
            };
            any_nonzero |= addr != 0;
            let kind = match ty {
                "t" | "T" | "w" | "W" => SymbolKind::Function,
                "d" | "D" | "b" | "B" | "r" | "R" | "v" | "V" => SymbolKind::Data,
                // Absolute values, undefined and debugging symbols.
                _ => continue,
            };
            let module = it
                .next()
                .map(|m| m.trim_matches(|c| c == '[' || c == ']').to_string());
            syms.push(KSym {
                addr,
                end_marker: is_end_marker(name),
                name: name.to_string(),
                module,
                kind,
            });
        }
        if !any_nonzero {
            return Err(KallsymsError::AddressesHidden);
        }
        // Per-CPU variables are offsets into each CPU's area (addresses near
        // 0), not addresses: keep nothing below the lowest function.
        let lowest_text = syms
            .iter()
            .filter(|s| s.kind == SymbolKind::Function)
            .map(|s| s.addr)
            .min()
            .unwrap_or(0);
        syms.retain(|s| s.addr >= lowest_text);
        // At one address the preferred name goes last (the lookup takes
        // the last symbol at or below an address); kallsyms order for ties.
        syms.sort_by_cached_key(|s| (s.addr, preference(&s.name)));
        Ok(Self { syms })
    }

    /// Each address's function and offset, in input order.
    pub fn symbolize(&self, addrs: &[u64]) -> Vec<Symbolized> {
        addrs
            .iter()
            .map(|&addr| Symbolized {
                addr,
                result: self.lookup(addr),
            })
            .collect()
    }

    fn lookup(&self, addr: u64) -> SymResult {
        let i = self.syms.partition_point(|s| s.addr <= addr);
        let Some(s) = i.checked_sub(1).map(|k| &self.syms[k]) else {
            return SymResult::Unmapped;
        };
        if s.end_marker {
            return SymResult::Unmapped;
        }
        let last_of_its_module = self.syms.get(i).is_none_or(|n| n.module != s.module);
        if last_of_its_module && addr - s.addr >= MAX_LAST_SPAN {
            return SymResult::Unmapped;
        }
        SymResult::Symbol(Symbol {
            name: s.name.clone(),
            offset: addr - s.addr,
            kind: s.kind,
            file: None,
            line: None,
            module: s.module.as_ref().map(PathBuf::from),
            inlined: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
0000000000001000 D percpu_var
ffffffff81000000 T _stext
ffffffff81000000 T startup
ffffffff81001000 t do_one
ffffffff81003000 T do_two
ffffffff81004000 T _etext
ffffffff81005000 D some_data
ffffffff81006000 A fixed_value
ffffffff81007000 B _end
ffffffffc0001000 t mod_fn\t[mymod]
ffffffffc0002000 T last\t[mymod]
";

    fn sym(k: &KernelSymbolizer, addr: u64) -> (String, u64, SymbolKind) {
        match &k.symbolize(&[addr])[0].result {
            SymResult::Symbol(s) => (s.name.clone(), s.offset, s.kind),
            other => panic!("{addr:#x}: {other:?}"),
        }
    }

    #[test]
    fn resolves_functions_data_and_modules() {
        let k = KernelSymbolizer::parse(TEXT).unwrap();
        let f = SymbolKind::Function;
        assert_eq!(sym(&k, 0xffffffff81001010), ("do_one".into(), 0x10, f));
        // The real symbol wins over the marker at the same address.
        assert_eq!(sym(&k, 0xffffffff81000004), ("startup".into(), 4, f));
        assert_eq!(
            sym(&k, 0xffffffff81005010),
            ("some_data".into(), 0x10, SymbolKind::Data)
        );
        // Absolute symbols are not objects: still inside some_data.
        assert_eq!(sym(&k, 0xffffffff81006010).0, "some_data");
        let r = k.symbolize(&[0xffffffffc0001004]);
        let SymResult::Symbol(s) = &r[0].result else {
            panic!()
        };
        assert_eq!(s.module.as_deref(), Some(std::path::Path::new("mymod")));
    }

    #[test]
    fn the_plain_name_wins_over_aliases_and_markers() {
        let k = KernelSymbolizer::parse(
            "\
ffffffff81000000 T srso_alias_untrain_ret
ffffffff81000000 T _stext
ffffffff81000000 T __pi__text
ffffffff81000100 T memset
ffffffff81000100 T __memset
ffffffff81000100 T __pi_memset
ffffffff81000200 T __pi___x86_indirect_thunk_r8
ffffffff81000200 T __x86_indirect_thunk_r8
ffffffff81000300 T __x86_indirect_thunk_array
ffffffff81000300 T __x86_indirect_thunk_rax
ffffffff81000400 T __pi_only
",
        )
        .unwrap();
        let name = |a: u64| sym(&k, a).0;
        assert_eq!(name(0xffffffff81000004), "srso_alias_untrain_ret");
        assert_eq!(name(0xffffffff81000104), "memset");
        assert_eq!(name(0xffffffff81000204), "__x86_indirect_thunk_r8");
        // A full tie keeps kallsyms order: the last one listed.
        assert_eq!(name(0xffffffff81000304), "__x86_indirect_thunk_rax");
        assert_eq!(name(0xffffffff81000404), "__pi_only");
    }

    #[test]
    fn section_ends_and_the_last_symbol() {
        let k = KernelSymbolizer::parse(TEXT).unwrap();
        // Between _etext and the next object: not "_etext+0x10".
        assert_eq!(
            k.symbolize(&[0xffffffff81004010])[0].result,
            SymResult::Unmapped
        );
        assert_eq!(
            k.symbolize(&[0xffffffff81007010])[0].result,
            SymResult::Unmapped
        );
        // The last symbol names what follows it, within MAX_LAST_SPAN.
        assert_eq!(sym(&k, 0xffffffffc0002010).0, "last");
        let past = 0xffffffffc0002000 + MAX_LAST_SPAN;
        assert_eq!(k.symbolize(&[past])[0].result, SymResult::Unmapped);
        // So does the last symbol of a module before the next module.
        let t = format!("{TEXT}ffffffffd0000000 t other\t[m2]\n");
        let k = KernelSymbolizer::parse(&t).unwrap();
        assert_eq!(sym(&k, 0xffffffffc0002010).0, "last");
        assert_eq!(k.symbolize(&[past])[0].result, SymResult::Unmapped);
    }

    #[test]
    fn out_of_range_is_unmapped() {
        let k = KernelSymbolizer::parse(TEXT).unwrap();
        assert_eq!(k.symbolize(&[0x1000])[0].result, SymResult::Unmapped);
        assert_eq!(k.symbolize(&[u64::MAX])[0].result, SymResult::Unmapped);
    }

    #[test]
    fn hidden_addresses_are_an_error() {
        let t = "0000000000000000 T _stext\n0000000000000000 T do_one\n";
        assert!(matches!(
            KernelSymbolizer::parse(t),
            Err(KallsymsError::AddressesHidden)
        ));
    }
}
