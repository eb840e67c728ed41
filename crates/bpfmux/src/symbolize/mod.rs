//! Symbolization: user addresses (normalized by [`crate::normalize`], then
//! looked up in the ELF/DWARF by blazesym) and kernel addresses (kallsyms;
//! file:line and inlined calls from the running kernel's vmlinux, where
//! there is one: [`KernelLines`]).
//! `bpfmux trace` will print stacks through this module.

pub mod debuginfod;
mod demangle;
pub mod elf_table;
mod kernel;
mod kernel_lines;
mod user;
mod vdso;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use kernel::{KallsymsError, KernelSpan, KernelSymbolizer};
pub use kernel_lines::{vmlinux_places, KernelLines, KernelLinesError};
pub use user::{DebuginfodAnswer, UserSymbolizeError, UserSymbolizer};

/// ` at FILE:LINE` (` at FILE` without a line), or nothing without a
/// file: how `bpfmux sym` and stacks write where an address is.
pub fn at_source(file: Option<&Path>, line: Option<u32>) -> String {
    match (file, line) {
        (Some(f), Some(l)) => format!(" at {}:{l}", crate::normalize::display_name(f)),
        (Some(f), None) => format!(" at {}", crate::normalize::display_name(f)),
        _ => String::new(),
    }
}

/// A resolved symbol.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Symbol {
    /// The function's (or object's) name, demangled.
    pub name: String,
    /// Offset of the address from the symbol's start.
    pub offset: u64,
    /// (`symbol_kind` in JSON: `kind` says which [`SymResult`] this is.)
    #[serde(rename = "symbol_kind")]
    pub kind: SymbolKind,
    /// Source file and line, where DWARF has them (with inlined calls:
    /// the line of the outermost call). Paths are text in JSON as
    /// [`crate::normalize::display_name`] writes them.
    #[serde(serialize_with = "crate::normalize::opt_path_text")]
    pub file: Option<PathBuf>,
    /// See `file`.
    pub line: Option<u32>,
    /// Binary or kernel module the symbol is in (`None`: vmlinux).
    #[serde(serialize_with = "crate::normalize::opt_path_text")]
    pub module: Option<PathBuf>,
    /// Functions inlined at this address, outermost first; each frame's
    /// file and line are where the address is within that function.
    pub inlined: Vec<InlinedFrame>,
}

/// What a [`Symbol`] names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SymbolKind {
    /// A function.
    Function,
    /// A PLT stub, named `function@plt`.
    Plt,
    /// A data object (kernel `d`/`b`/`r` symbols).
    Data,
}

/// A function inlined at an address.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct InlinedFrame {
    /// The inlined function.
    pub name: String,
    /// Where the address is within it, when DWARF says.
    #[serde(serialize_with = "crate::normalize::opt_path_text")]
    pub file: Option<PathBuf>,
    /// See `file`.
    pub line: Option<u32>,
}

/// What one address resolved to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum SymResult {
    /// A symbol covers it.
    Symbol(Symbol),
    /// Mapped, but no symbol covers it (stripped binary, JIT code, vdso...).
    NoSymbol {
        /// The mapped file.
        #[serde(serialize_with = "crate::normalize::opt_path_text")]
        module: Option<PathBuf>,
        /// The address's offset in it.
        #[serde(serialize_with = "crate::normalize::serialize_hex")]
        file_offset: u64,
        /// Why there is no symbol.
        reason: String,
    },
    /// Not in any (executable) mapping / not a kernel text address.
    Unmapped,
}

/// One address and what it resolved to.
#[derive(Clone, Debug, Serialize)]
pub struct Symbolized {
    /// (`"0x…"` in JSON, as `bpfmux maps` writes addresses.)
    #[serde(serialize_with = "crate::normalize::serialize_hex")]
    pub addr: u64,
    /// Symbol, no symbol (with why), or unmapped.
    pub result: SymResult,
}
