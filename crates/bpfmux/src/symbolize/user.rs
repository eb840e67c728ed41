//! User addresses → symbols: our normalizer finds mapping + file offset,
//! blazesym reads the ELF symbol table and DWARF of that file.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::Context as _;
use blazesym::symbolize::source::{Elf, Source};
use blazesym::symbolize::{Input, Symbolizer};

use super::{SymResult, Symbol, Symbolized};
use crate::normalize::{Mapping, Normalizer, VmaFilter};

pub struct UserSymbolizer {
    normalizer: Normalizer,
    blaze: Symbolizer,
}

impl Default for UserSymbolizer {
    fn default() -> Self {
        Self::new(Normalizer::default())
    }
}

impl UserSymbolizer {
    pub fn new(normalizer: Normalizer) -> Self {
        Self {
            normalizer,
            blaze: Symbolizer::new(),
        }
    }

    pub fn normalizer(&mut self) -> &mut Normalizer {
        &mut self.normalizer
    }

    /// Symbolizes code addresses of process `pid` (only executable mappings
    /// count; anything else is reported unmapped).
    pub fn symbolize(&mut self, pid: u32, addrs: &[u64]) -> anyhow::Result<Vec<Symbolized>> {
        let norm = self
            .normalizer
            .normalize(pid, addrs, VmaFilter::EXEC)
            .with_context(|| format!("normalizing addresses of process {pid}"))?;

        let mut out: Vec<Symbolized> = norm
            .addrs
            .iter()
            .map(|a| Symbolized {
                addr: a.addr,
                result: SymResult::Unmapped,
            })
            .collect();
        // One blazesym call per mapping, with all its offsets.
        let mut by_mapping: BTreeMap<usize, Vec<(usize, u64)>> = BTreeMap::new();
        for (i, a) in norm.addrs.iter().enumerate() {
            if let Some(r) = a.resolved {
                by_mapping
                    .entry(r.mapping)
                    .or_default()
                    .push((i, r.file_offset));
            }
        }
        for (mi, items) in by_mapping {
            let m = &norm.mappings[mi];
            let results = self.lookup(pid, m, &items);
            for ((i, _), r) in items.iter().zip(results) {
                out[*i].result = r;
            }
        }
        Ok(out)
    }

    fn lookup(&self, pid: u32, m: &Mapping, items: &[(usize, u64)]) -> Vec<SymResult> {
        let no_symbol = |off: u64, reason: &str| SymResult::NoSymbol {
            module: m.name.clone(),
            file_offset: off,
            reason: reason.to_string(),
        };
        let Some(path) = elf_path(pid, m) else {
            let reason = if m.is_file_backed() {
                "mapped file not accessible"
            } else {
                "not a file-backed mapping"
            };
            return items
                .iter()
                .map(|&(_, off)| no_symbol(off, reason))
                .collect();
        };
        let offsets: Vec<u64> = items.iter().map(|&(_, off)| off).collect();
        let src = Source::Elf(Elf::new(path));
        match self.blaze.symbolize(&src, Input::FileOffset(&offsets)) {
            Err(e) => items
                .iter()
                .map(|&(_, off)| no_symbol(off, &format!("ELF lookup failed: {e}")))
                .collect(),
            Ok(syms) => syms
                .into_iter()
                .zip(&offsets)
                .map(|(s, &off)| match s.as_sym() {
                    None => no_symbol(off, "no symbol covers this offset"),
                    // Some DWARF entries (seen in Debian's libc debug info)
                    // claim address 0 with no size; code never lives at
                    // offset 0 of an ELF (headers do), so don't trust them.
                    Some(sym) if sym.addr == 0 => no_symbol(off, "no symbol covers this offset"),
                    Some(sym) => {
                        let (file, line) = sym.code_info.as_ref().map_or((None, None), |ci| {
                            let file = match &ci.dir {
                                Some(d) => d.join(&*ci.file),
                                None => PathBuf::from(&*ci.file),
                            };
                            (Some(file), ci.line)
                        });
                        SymResult::Symbol(Symbol {
                            name: sym.name.to_string(),
                            offset: sym.offset as u64,
                            file,
                            line,
                            module: m.name.clone(),
                        })
                    }
                })
                .collect(),
        }
    }
}

/// A path through which this process can read the mapped file.
fn elf_path(pid: u32, m: &Mapping) -> Option<PathBuf> {
    if !m.is_file_backed() {
        return None;
    }
    let via_map_files = PathBuf::from(format!("/proc/{pid}/map_files/{:x}-{:x}", m.start, m.end));
    if std::fs::File::open(&via_map_files).is_ok() {
        return Some(via_map_files);
    }
    let name = m.name.as_ref()?;
    let rel = name.strip_prefix("/").ok()?;
    let via_root = PathBuf::from(format!("/proc/{pid}/root")).join(rel);
    std::fs::metadata(&via_root).is_ok().then_some(via_root)
}
