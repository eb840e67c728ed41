//! Kernel addresses → `function+offset [module]` (or a data object) from
//! /proc/kallsyms.
//!
//! kallsyms has no sizes: a symbol is taken to run to the next one. Two
//! exceptions keep that honest: section end markers (`_etext`, `_edata`,
//! `_end`, `__stop_*`...) cover nothing, so the gap after kernel text is
//! not `_etext+0x…`; and the last symbol before another module (or of all)
//! covers at most [`MAX_LAST_SPAN`] bytes instead of nothing or everything.
//! BPF programs (`bpf_prog_<tag>_<name> [bpf]`) are the exception with
//! sizes: the kernel says how long each function of a JIT image is, so an
//! address past a program's code (the rest of its allocation, a gap before
//! the next program) is not named after it.

use std::collections::HashMap;
use std::io;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use super::kernel_lines::KernelLines;
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
    /// Its length, where known (BPF programs' functions).
    len: Option<u64>,
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
    /// Source lines of vmlinux functions, and where the running kernel's
    /// `_text` is ([`KernelSymbolizer::with_lines`]).
    lines: Option<(Arc<KernelLines>, u64)>,
}

impl KernelSymbolizer {
    /// Reads /proc/kallsyms (root, or `kernel.kptr_restrict` 0, to see
    /// addresses), and the length of each loaded BPF program's code where
    /// the kernel tells this process (`bpf(2)` program info; without it,
    /// a program is taken to run to the next symbol, as others are).
    pub fn load() -> Result<Self, KallsymsError> {
        Self::read_from(std::fs::File::open("/proc/kallsyms")?)
    }

    /// As [`KernelSymbolizer::load`], from /proc/kallsyms opened earlier:
    /// the symbols are those of the time of the read (the kernel lists
    /// them as they are read), so a tracer can open the file before it
    /// attaches and read it afterwards, on another thread, without opening
    /// a file while its programs run.
    pub fn read_from(mut file: std::fs::File) -> Result<Self, KallsymsError> {
        use std::io::Read;
        let mut text = String::new();
        file.read_to_string(&mut text)?;
        let mut k = Self::parse(&text)?;
        k.bound_bpf_functions(&bpf_functions());
        Ok(k)
    }

    /// Gives the BPF program functions (`bpf_prog_*` of module `bpf`)
    /// starting at each `(address, length)` of `funcs` that length.
    fn bound_bpf_functions(&mut self, funcs: &[(u64, u32)]) {
        for &(addr, len) in funcs {
            let i = self.syms.partition_point(|s| s.addr < addr);
            for s in self.syms[i..].iter_mut().take_while(|s| s.addr == addr) {
                if s.module.as_deref() == Some("bpf") && s.name.starts_with("bpf_prog_") {
                    s.len = Some(u64::from(len));
                }
            }
        }
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
                len: None,
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
        Ok(Self { syms, lines: None })
    }

    /// Each address's function and offset, in input order (with file,
    /// line and inlined calls for vmlinux functions, given
    /// [`KernelSymbolizer::with_lines`]).
    pub fn symbolize(&self, addrs: &[u64]) -> Vec<Symbolized> {
        self.symbolize_back(addrs, 0)
    }

    /// As [`KernelSymbolizer::symbolize`], for the callers' frames of a
    /// stack: each address is a return address, so its source line is
    /// that of the call before it, looked up one byte back (as debuggers
    /// do); names and offsets are the address's own.
    pub fn symbolize_returns(&self, addrs: &[u64]) -> Vec<Symbolized> {
        self.symbolize_back(addrs, 1)
    }

    fn symbolize_back(&self, addrs: &[u64], back: u64) -> Vec<Symbolized> {
        let mut out: Vec<Symbolized> = addrs
            .iter()
            .map(|&addr| Symbolized {
                addr,
                result: self.lookup(addr),
            })
            .collect();
        if let Some((lines, text)) = &self.lines {
            let wanted: Vec<(u64, Option<&str>)> = out
                .iter()
                .map(|s| match &s.result {
                    SymResult::Symbol(sym)
                        if sym.module.is_none() && sym.kind == SymbolKind::Function =>
                    {
                        (s.addr.wrapping_sub(back), Some(sym.name.as_str()))
                    }
                    _ => (s.addr, None),
                })
                .collect();
            let found = lines.lines(*text, &wanted);
            for (s, l) in out.iter_mut().zip(found) {
                if let (SymResult::Symbol(sym), Some((file, line, inlined))) = (&mut s.result, l) {
                    sym.file = file;
                    sym.line = line;
                    sym.inlined = inlined;
                }
            }
        }
        out
    }

    /// Names vmlinux functions with their source lines from `lines` too
    /// (see [`KernelLines`]); the addresses are moved by the distance
    /// between this table's `_text` and the file's. A table without
    /// `_text` (one made of a recording's spans) gets no lines: where its
    /// kernel ran is not known.
    pub fn with_lines(mut self, lines: Arc<KernelLines>) -> Self {
        if let Some(text) = self.function_addresses(&[("_text", None)])[0] {
            self.lines = Some((lines, text));
        }
        self
    }

    /// The vmlinux giving source lines, if any.
    pub fn lines(&self) -> Option<&KernelLines> {
        self.lines.as_ref().map(|(l, _)| &**l)
    }

    /// The extent of every function `pick` answers for (given its name
    /// and module, `None`: vmlinux), with that answer: from its address to
    /// the next symbol at a higher one (a BPF program's function: to the
    /// end of its code, where the kernel gave its length; the last symbol
    /// of a module: at most 64 KiB, as for lookups). Sorted by address.
    pub fn function_extents<T>(
        &self,
        mut pick: impl FnMut(&str, Option<&str>) -> Option<T>,
    ) -> Vec<(Range<u64>, T)> {
        let mut out = Vec::new();
        for (i, s) in self.syms.iter().enumerate() {
            if s.kind != SymbolKind::Function || s.end_marker {
                continue;
            }
            let Some(t) = pick(&s.name, s.module.as_deref()) else {
                continue;
            };
            let next = self.syms[i + 1..].iter().find(|n| n.addr > s.addr);
            let mut end = match next {
                Some(n) if n.module == s.module => n.addr,
                Some(n) => n.addr.min(s.addr.saturating_add(MAX_LAST_SPAN)),
                None => s.addr.saturating_add(MAX_LAST_SPAN),
            };
            if let Some(len) = s.len {
                end = end.min(s.addr.saturating_add(len));
            }
            out.push((s.addr..end, t));
        }
        out
    }

    /// The address of each function of `wanted` (name, module; `None`:
    /// vmlinux), in its order; `None` for one kallsyms does not list. One
    /// pass over the table, however many are wanted.
    pub fn function_addresses(&self, wanted: &[(&str, Option<&str>)]) -> Vec<Option<u64>> {
        let mut index: HashMap<(&str, Option<&str>), Vec<usize>> = HashMap::new();
        for (i, w) in wanted.iter().enumerate() {
            index.entry(*w).or_default().push(i);
        }
        let mut out = vec![None; wanted.len()];
        for s in &self.syms {
            if s.kind != SymbolKind::Function {
                continue;
            }
            if let Some(is) = index.get(&(s.name.as_str(), s.module.as_deref())) {
                for &i in is {
                    out[i].get_or_insert(s.addr);
                }
            }
        }
        out
    }

    fn lookup(&self, addr: u64) -> SymResult {
        let i = self.syms.partition_point(|s| s.addr <= addr);
        let Some(s) = i.checked_sub(1).map(|k| &self.syms[k]) else {
            return SymResult::Unmapped;
        };
        if s.end_marker || s.len.is_some_and(|len| addr - s.addr >= len) {
            return SymResult::Unmapped;
        }
        let last_of_its_module = self.syms.get(i).is_none_or(|n| n.module != s.module);
        if last_of_its_module && s.len.is_none() && addr - s.addr >= MAX_LAST_SPAN {
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

/// A kernel symbol and the addresses it names: what a recording keeps of
/// the symbol table ([`KernelSymbolizer::span`]) to name its frames later,
/// on another machine ([`KernelSymbolizer::from_spans`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelSpan {
    /// Its first address.
    pub start: u64,
    /// The first address past what it names.
    pub end: u64,
    /// Its name.
    pub name: String,
    /// Its module (`None`: vmlinux).
    pub module: Option<String>,
    /// A function or a data object.
    pub kind: SymbolKind,
}

impl KernelSymbolizer {
    /// The symbol that names `addr` and the range it names, as
    /// [`KernelSymbolizer::symbolize`] decides it; `None` where it names
    /// nothing.
    pub fn span(&self, addr: u64) -> Option<KernelSpan> {
        let i = self.syms.partition_point(|s| s.addr <= addr);
        let s = &self.syms[i.checked_sub(1)?];
        if !matches!(self.lookup(addr), SymResult::Symbol(_)) {
            return None;
        }
        let mut end = self.syms.get(i).map_or(u64::MAX, |n| n.addr);
        if let Some(len) = s.len {
            end = end.min(s.addr.saturating_add(len));
        } else if self.syms.get(i).is_none_or(|n| n.module != s.module) {
            end = end.min(s.addr.saturating_add(MAX_LAST_SPAN));
        }
        Some(KernelSpan {
            start: s.addr,
            end,
            name: s.name.clone(),
            module: s.module.clone(),
            kind: s.kind,
        })
    }

    /// A symbolizer that knows only `spans` (a recording's): an address in
    /// one is named as the symbolizer they were taken from named it, any
    /// other is unmapped.
    pub fn from_spans(spans: impl IntoIterator<Item = KernelSpan>) -> Self {
        let mut syms: Vec<KSym> = spans
            .into_iter()
            .filter(|s| s.end > s.start)
            .map(|s| KSym {
                addr: s.start,
                len: Some(s.end - s.start),
                end_marker: false,
                name: s.name,
                module: s.module,
                kind: s.kind,
            })
            .collect();
        syms.sort_by_key(|s| s.addr);
        syms.dedup_by_key(|s| s.addr);
        Self { syms, lines: None }
    }
}

/// Start and length of every function of every loaded, JIT-compiled BPF
/// program the kernel shows this process; none where it refuses (no
/// CAP_SYS_ADMIN, addresses hidden). A program unloaded meanwhile is
/// skipped.
fn bpf_functions() -> Vec<(u64, u32)> {
    use crate::sys::bpf_ops;
    use std::os::fd::AsFd;
    let Ok(ids) = bpf_ops::prog_ids() else {
        return Vec::new();
    };
    ids.into_iter()
        .filter_map(|id| bpf_ops::prog_fd_by_id(id).ok())
        .flat_map(|fd| bpf_ops::jited_funcs(fd.as_fd()).unwrap_or_default())
        .collect()
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

    /// A JIT-compiled program of this process (`r0 = 0; exit`, a socket
    /// filter), named in kallsyms `bpf_prog_<tag>_bpfmux_probe`: its last
    /// byte is named after it, the byte after its code is not.
    #[test]
    fn nothing_past_a_bpf_programs_code_is_named_after_it() {
        use std::os::fd::AsFd;
        let prog = crate::sys::bpf::load_trivial_prog(
            libbpf_rs::libbpf_sys::BPF_PROG_TYPE_SOCKET_FILTER,
            0,
            0,
        )
        .expect("loading a socket filter (run as root)");
        let funcs = crate::sys::bpf_ops::jited_funcs(prog.as_fd()).unwrap();
        let &[(start, len)] = funcs.as_slice() else {
            panic!("one JIT-compiled function expected (net.core.bpf_jit_enable=1): {funcs:?}")
        };
        let k = KernelSymbolizer::load().expect("kallsyms with addresses (run as root)");
        let last = start + u64::from(len) - 1;
        let (name, offset, _) = sym(&k, last);
        assert!(
            name.starts_with("bpf_prog_") && name.ends_with("_bpfmux_probe"),
            "{name}"
        );
        assert_eq!(offset, last - start);
        let past = k.symbolize(&[start + u64::from(len)]).remove(0).result;
        match &past {
            SymResult::Symbol(s) if s.name == name => {
                panic!(
                    "{name} is {len} bytes, yet names {:#x}: {past:?}",
                    start + u64::from(len)
                )
            }
            _ => {}
        }
    }

    /// TEXT and BPF programs, a trampoline; the lengths of the program
    /// and its subprogram known, not those of the one of unknown length
    /// nor of the trampoline (the kernel gives no program length for it).
    fn with_bpf() -> KernelSymbolizer {
        let text = format!(
            "{TEXT}\
ffffffffc0100000 t bpf_prog_0123456789abcdef_first\t[bpf]
ffffffffc0100040 t bpf_prog_0123456789abcdef_F\t[bpf]
ffffffffc0100080 t bpf_prog_fedcba9876543210_unknown\t[bpf]
ffffffffc0100100 t bpf_trampoline_6442450944\t[bpf]
"
        );
        let mut k = KernelSymbolizer::parse(&text).unwrap();
        k.bound_bpf_functions(&[
            (0xffffffffc0100000, 0x14),
            (0xffffffffc0100040, 0x20),
            (0xffffffffc0100100, 0x8),
        ]);
        k
    }

    #[test]
    fn bpf_functions_end_where_their_code_ends() {
        let k = with_bpf();
        let name = |a: u64| sym(&k, a).0;
        let unmapped = |a: u64| k.symbolize(&[a])[0].result == SymResult::Unmapped;
        assert_eq!(name(0xffffffffc0100013), "bpf_prog_0123456789abcdef_first");
        assert!(unmapped(0xffffffffc0100014));
        assert!(unmapped(0xffffffffc010003f));
        assert_eq!(name(0xffffffffc010005f), "bpf_prog_0123456789abcdef_F");
        assert!(unmapped(0xffffffffc0100060));
        assert_eq!(
            name(0xffffffffc01000f0),
            "bpf_prog_fedcba9876543210_unknown"
        );
        assert_eq!(name(0xffffffffc0100110), "bpf_trampoline_6442450944");
    }

    #[test]
    fn extents_and_addresses_of_functions() {
        let k = with_bpf();
        let bpf = k.function_extents(|_, m| (m == Some("bpf")).then_some(()));
        let bpf: Vec<_> = bpf.into_iter().map(|(r, ())| r).collect();
        // To the end of the code where its length is known, else to the
        // next symbol; the last one at most MAX_LAST_SPAN.
        assert_eq!(
            bpf,
            [
                0xffffffffc0100000..0xffffffffc0100014,
                0xffffffffc0100040..0xffffffffc0100060,
                0xffffffffc0100080..0xffffffffc0100100,
                0xffffffffc0100100..0xffffffffc0100100 + MAX_LAST_SPAN
            ]
        );
        // To the next symbol, whatever it is; _etext itself is no function.
        let two = k.function_extents(|n, _| (n == "do_two" || n == "_etext").then_some(7));
        assert_eq!(two, [(0xffffffff81003000..0xffffffff81004000, 7)]);
        // The last of a module stops at the next module.
        let m = k.function_extents(|n, _| (n == "last").then_some(()));
        assert_eq!(m[0].0.end, 0xffffffffc0002000 + MAX_LAST_SPAN);
        assert_eq!(
            k.function_addresses(&[
                ("mod_fn", Some("mymod")),
                ("mod_fn", None),
                ("do_one", None),
                ("some_data", None),
            ]),
            [
                Some(0xffffffffc0001000),
                None,
                Some(0xffffffff81001000),
                None
            ]
        );
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
