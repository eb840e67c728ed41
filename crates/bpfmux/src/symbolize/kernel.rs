//! Kernel addresses → `function+offset [module]` from /proc/kallsyms.

use std::io;
use std::path::PathBuf;

use super::{SymResult, Symbol, Symbolized};

#[derive(Debug, thiserror::Error)]
pub enum KallsymsError {
    #[error("reading /proc/kallsyms: {0}")]
    Read(#[from] io::Error),
    #[error(
        "/proc/kallsyms shows no addresses (kernel.kptr_restrict hides them; \
         run as root with kptr_restrict <= 1)"
    )]
    AddressesHidden,
}

struct KSym {
    addr: u64,
    name: String,
    module: Option<String>,
}

/// Sorted text symbols of the running kernel and its modules.
pub struct KernelSymbolizer {
    syms: Vec<KSym>,
}

impl KernelSymbolizer {
    pub fn load() -> Result<Self, KallsymsError> {
        Self::parse(&std::fs::read_to_string("/proc/kallsyms")?)
    }

    /// Parses kallsyms text (`addr type name [module]`), keeping functions.
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
            if !matches!(ty, "t" | "T" | "w" | "W") {
                continue;
            }
            let module = it
                .next()
                .map(|m| m.trim_matches(|c| c == '[' || c == ']').to_string());
            syms.push(KSym {
                addr,
                name: name.to_string(),
                module,
            });
        }
        if !any_nonzero {
            return Err(KallsymsError::AddressesHidden);
        }
        syms.sort_by_key(|s| s.addr);
        Ok(Self { syms })
    }

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
        // Before the first symbol, or past the last one (no end is known).
        if i == 0 || i == self.syms.len() {
            return SymResult::Unmapped;
        }
        let s = &self.syms[i - 1];
        SymResult::Symbol(Symbol {
            name: s.name.clone(),
            offset: addr - s.addr,
            file: None,
            line: None,
            module: s.module.as_ref().map(PathBuf::from),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
ffffffff81000000 T _stext
ffffffff81001000 t do_one
ffffffff81002000 D some_data
ffffffff81003000 T do_two
ffffffffc0001000 t mod_fn\t[mymod]
ffffffffc0002000 T last
";

    #[test]
    fn resolves_function_offsets_and_modules() {
        let k = KernelSymbolizer::parse(TEXT).unwrap();
        let r = k.symbolize(&[0xffffffff81001010, 0xffffffff81002010, 0xffffffffc0001004]);
        let SymResult::Symbol(s) = &r[0].result else {
            panic!()
        };
        assert_eq!((s.name.as_str(), s.offset), ("do_one", 0x10));
        // Data symbols are skipped: still inside do_one.
        let SymResult::Symbol(s) = &r[1].result else {
            panic!()
        };
        assert_eq!((s.name.as_str(), s.offset), ("do_one", 0x1010));
        let SymResult::Symbol(s) = &r[2].result else {
            panic!()
        };
        assert_eq!(s.module.as_deref(), Some(std::path::Path::new("mymod")));
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
