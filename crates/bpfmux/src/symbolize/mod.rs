//! Symbolization: user addresses (normalized by [`crate::normalize`], then
//! looked up in the ELF/DWARF by blazesym) and kernel addresses (kallsyms).
//! `bpfmux trace` will print stacks through this module.

mod kernel;
mod user;

use std::path::PathBuf;

use serde::Serialize;

pub use kernel::{KallsymsError, KernelSymbolizer};
pub use user::UserSymbolizer;

/// A resolved symbol.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Symbol {
    pub name: String,
    /// Offset of the address from the symbol's start.
    pub offset: u64,
    /// Source file and line, where DWARF has them.
    pub file: Option<PathBuf>,
    pub line: Option<u32>,
    /// Binary or kernel module the symbol is in (`None`: vmlinux).
    pub module: Option<PathBuf>,
}

/// What one address resolved to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum SymResult {
    Symbol(Symbol),
    /// Mapped, but no symbol covers it (stripped binary, JIT code, vdso...).
    NoSymbol {
        module: Option<PathBuf>,
        file_offset: u64,
        reason: String,
    },
    /// Not in any (executable) mapping / not a kernel text address.
    Unmapped,
}

#[derive(Clone, Debug, Serialize)]
pub struct Symbolized {
    pub addr: u64,
    pub result: SymResult,
}
