//! An ELF file's own symbol tables, for the addresses DWARF does not name
//! well: `.symtab` and `.dynsym` (plus the detached debug file's `.symtab`,
//! found by build ID or `.gnu_debuglink`), and PLT stubs named `name@plt`
//! the way objdump does.
//!
//! Lookup rules: the smallest sized function symbol whose range covers the
//! address wins (ties: global, then weak, then local; fewer leading
//! underscores; name order). A PLT stub comes next. A size-0 function
//! symbol names only its own address, when nothing sized covers it: what
//! follows it is not known to be its code (padding after the last sized
//! function used to come out as `__restore_rt+0xc2d34`), so an address no
//! sized symbol covers has no name, as with llvm-symbolizer.

use std::path::{Path, PathBuf};

use memmap2::Mmap;
use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, RelocationFlags, SymbolKind};

/// Where detached debug files live, by build ID (Debian's `*-dbg` and
/// `*-dbgsym` packages): `<dir>/.build-id/ab/cdef….debug`.
const DEBUG_DIR: &str = "/usr/lib/debug";

/// An ELF file whose symbols could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ElfTableError {
    /// Reading the file failed.
    #[error("reading {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// What reading it said.
        source: std::io::Error,
    },
    /// The file is no ELF the parser accepts.
    #[error("parsing ELF {path}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        source: object::Error,
    },
}

/// What kind of thing a name from the table is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryKind {
    /// A function symbol (sized, or a size-0 one at its own address).
    Function,
    /// A synthesized `name@plt` stub.
    Plt,
}

/// The entry an address falls in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hit {
    /// The symbol's name.
    pub name: String,
    /// Address minus the entry's start.
    pub offset: u64,
    /// A symbol or a PLT stub.
    pub kind: EntryKind,
}

#[derive(Debug)]
struct Entry {
    start: u64,
    size: u64,
    /// Lower is preferred among entries of the same size.
    rank: (u8, usize),
    name: String,
}

/// What a PLT stub calls: a named import, or one of the image's own ifuncs
/// (named after its resolver once every symbol table is in).
#[derive(Debug)]
enum PltTarget {
    Named(String),
    Ifunc { resolver: u64 },
}

#[derive(Debug)]
struct ZeroSize {
    start: u64,
    name: String,
}

/// Symbol tables of one ELF image, ready for lookups by file offset.
#[derive(Debug, Default)]
pub struct ElfTable {
    /// Sized function symbols and PLT stubs, by start.
    sized: Vec<Entry>,
    max_size: u64,
    plt: Vec<Entry>,
    plt_targets: Vec<(u64, u64, PltTarget)>,
    zero_size: Vec<ZeroSize>,
    /// PT_LOAD segments: (file offset, file size, virtual address).
    segments: Vec<(u64, u64, u64)>,
}

/// The PT_LOAD segments of an image: (file offset, file size, virtual
/// address), those with bytes in the file.
fn segments(obj: &object::File) -> Vec<(u64, u64, u64)> {
    obj.segments()
        .filter_map(|s| {
            let (off, size) = s.file_range();
            (size > 0).then_some((off, size, s.address()))
        })
        .collect()
}

/// The PT_LOAD segments of the ELF file at `path` (see [`ElfTable::vaddr`]):
/// what turns its file offsets into the virtual addresses its debug file
/// knows them by.
pub fn load_segments(path: &Path) -> Result<Vec<(u64, u64, u64)>, ElfTableError> {
    let data = map_file(path)?;
    let obj = object::File::parse(&*data).map_err(|source| ElfTableError::Parse {
        path: path.into(),
        source,
    })?;
    Ok(segments(&obj))
}

/// A PT_LOAD segment with bytes in the file: (file offset, file size,
/// virtual address).
pub type Segment = (u64, u64, u64);

/// The virtual address of file offset `off` in PT_LOAD `segments` (file
/// offset, file size, virtual address), if one holds it.
pub fn vaddr_in(segments: &[Segment], off: u64) -> Option<u64> {
    segments
        .iter()
        .find(|&&(o, size, _)| (o..o.saturating_add(size)).contains(&off))
        .map(|&(o, _, v)| off - o + v)
}

/// The file offset of virtual address `vaddr` in PT_LOAD `segments` (file
/// offset, file size, virtual address), if one holds it in the file.
pub fn offset_in(segments: &[Segment], vaddr: u64) -> Option<u64> {
    segments
        .iter()
        .find(|&&(_, size, v)| (v..v.saturating_add(size)).contains(&vaddr))
        .map(|&(o, _, v)| vaddr - v + o)
}

/// Whether the parsed image has DWARF (a non-empty `.debug_info`).
fn has_dwarf(obj: &object::File) -> bool {
    obj.section_by_name(".debug_info")
        .is_some_and(|s| s.size() > 0)
}

/// Whether the ELF file at `path` has DWARF of its own.
pub fn file_has_dwarf(path: &Path) -> bool {
    map_file(path)
        .ok()
        .and_then(|d| object::File::parse(&*d).ok().map(|o| has_dwarf(&o)))
        .unwrap_or(false)
}

/// The build ID (hex) and PT_LOAD segments of the ELF file at `path`, a
/// file a process maps as `name` below `root`, when it needs a debug file
/// from elsewhere: it has a build ID, no DWARF of its own, and no debug
/// file installed here (by build ID or `.gnu_debuglink`, as
/// [`ElfTable::load_seen_as`] looks for them).
pub fn needs_debug_file(path: &Path, root: &Path, name: &Path) -> Option<(String, Vec<Segment>)> {
    let data = map_file(path).ok()?;
    let obj = object::File::parse(&*data).ok()?;
    if has_dwarf(&obj)
        || debug_file(&obj).is_some()
        || !linked_debug_files(&obj, root, name).is_empty()
    {
        return None;
    }
    let id = obj.build_id().ok()??;
    (id.len() >= 2).then(|| {
        let hex = id.iter().map(|b| format!("{b:02x}")).collect();
        (hex, segments(&obj))
    })
}

impl ElfTable {
    /// Reads `path` (any path that opens the file, e.g. under
    /// `/proc/PID/map_files`) and, when installed, its debug file. Files
    /// are mapped, not read: only the pages of the headers and symbol
    /// tables are touched, whatever the file's size.
    pub fn load(path: &Path) -> Result<Self, ElfTableError> {
        Self::load_seen_as(path, Path::new("/"), path)
    }

    /// [`Self::load`] of a file a process maps as `name`, an absolute path
    /// below `root` (its `/proc/PID/root`). The debug file is the one named
    /// by the build ID (`/usr/lib/debug/.build-id/…`), or else the one its
    /// `.gnu_debuglink` names, looked for as gdb does: next to `name`, in
    /// `.debug/` there, and below `/usr/lib/debug` plus `name`'s directory
    /// (accepted when its build ID, or else its CRC, matches).
    pub fn load_seen_as(path: &Path, root: &Path, name: &Path) -> Result<Self, ElfTableError> {
        let data = map_file(path)?;
        let parse_err = |source| ElfTableError::Parse {
            path: path.into(),
            source,
        };
        let obj = object::File::parse(&*data).map_err(parse_err)?;
        let mut table = Self::parse(&data).map_err(parse_err)?;
        // Same addresses; only the symbols are new. A broken or mismatched
        // debug file just adds nothing.
        let by_id = debug_file(&obj).map(|p| (p, None));
        let linked = linked_debug_files(&obj, root, name);
        for (p, crc) in by_id.into_iter().chain(linked) {
            let Ok(d) = map_file(&p) else { continue };
            let Ok(dobj) = object::File::parse(&*d) else {
                continue;
            };
            if crc.is_none_or(|crc| same_image(&obj, &dobj, &d, crc)) {
                table.add_symbols(&dobj);
                break;
            }
        }
        table.finish();
        Ok(table)
    }

    /// Parses an in-memory image (a file's contents, or a vDSO copied out
    /// of a process).
    pub fn parse(data: &[u8]) -> Result<Self, object::Error> {
        let obj = object::File::parse(data)?;
        let mut t = Self {
            segments: segments(&obj),
            ..Self::default()
        };
        t.add_symbols(&obj);
        t.add_plt(data);
        Ok(t)
    }

    /// Parses an image and sorts it for lookups (what [`Self::load`] does
    /// without the debug file).
    pub fn from_image(data: &[u8]) -> Result<Self, object::Error> {
        let mut t = Self::parse(data)?;
        t.finish();
        Ok(t)
    }

    fn add_symbols(&mut self, obj: &object::File) {
        let syms = obj.symbols().chain(obj.dynamic_symbols());
        for s in syms {
            // Defined in a section (object's is_definition leaves out ifuncs).
            if s.kind() != SymbolKind::Text || s.section_index().is_none() {
                continue;
            }
            let Ok(name) = s.name() else { continue };
            if name.is_empty() {
                continue;
            }
            if s.size() == 0 {
                self.zero_size.push(ZeroSize {
                    start: s.address(),
                    name: name.to_string(),
                });
                continue;
            }
            // object's is_global() is true for weak symbols too.
            let binding = if s.is_weak() {
                1
            } else if s.is_global() {
                0
            } else {
                2
            };
            let underscores = name.bytes().take_while(|&b| b == b'_').count();
            self.sized.push(Entry {
                start: s.address(),
                size: s.size(),
                rank: (binding, underscores),
                name: name.to_string(),
            });
        }
    }

    /// x86-64 PLT stubs: each `.plt`, `.plt.sec` and `.plt.got` entry holds
    /// an indirect `jmp *slot(%rip)` (`ff 25 disp32`); the relocation of
    /// that GOT slot names the function (a dynamic one, or the IRELATIVE
    /// relocations of a static executable's `.rela.plt`).
    fn add_plt(&mut self, data: &[u8]) {
        // x86-64 only: 64-bit, little endian.
        let Ok(obj) = object::read::elf::ElfFile64::<object::LittleEndian>::parse(data) else {
            return;
        };
        if obj.architecture() != object::Architecture::X86_64 {
            return;
        }
        let mut slots = std::collections::HashMap::new();
        let dynsyms: Vec<_> = obj.dynamic_symbols().collect();
        for (slot, r) in obj.dynamic_relocations().into_iter().flatten() {
            let RelocationFlags::Elf { r_type } = r.flags() else {
                continue;
            };
            let name = match (r_type, r.target()) {
                (
                    object::elf::R_X86_64_JUMP_SLOT | object::elf::R_X86_64_GLOB_DAT,
                    object::RelocationTarget::Symbol(idx),
                ) => dynsyms
                    .get(idx.0.wrapping_sub(1))
                    .filter(|s| s.index() == idx)
                    .or_else(|| dynsyms.iter().find(|s| s.index() == idx))
                    .and_then(|s| s.name().ok())
                    .filter(|n| !n.is_empty())
                    .map(|n| PltTarget::Named(n.to_string())),
                // An ifunc the image calls itself (objdump: *ABS*+0x…@plt).
                (object::elf::R_X86_64_IRELATIVE, _) => Some(PltTarget::Ifunc {
                    resolver: r.addend() as u64,
                }),
                _ => None,
            };
            if let Some(n) = name {
                slots.insert(slot, n);
            }
        }
        // A static executable has no dynamic relocations: its ifunc slots
        // are filled by IRELATIVE entries of `.rela.plt` (tied to
        // `.symtab`), which the loop above does not see.
        slots.extend(
            irelative_slots(&obj).map(|(slot, resolver)| (slot, PltTarget::Ifunc { resolver })),
        );
        for sec in obj.sections() {
            if !matches!(sec.name(), Ok(".plt" | ".plt.sec" | ".plt.got")) {
                continue;
            }
            let Ok(data) = sec.data() else { continue };
            // Where the section gives no entry size (`.plt.got` of older
            // linkers, a static executable's `.plt`), 8-byte stubs are
            // `jmp *slot(%rip)` back to back (one alone in the section).
            let jmp = [0xff, 0x25];
            let entsize = match sec.elf_section_header().sh_entsize.get(obj.endian()) {
                8 => 8,
                16 => 16,
                _ if data.starts_with(&jmp)
                    && (data.len() == 8 || data.get(8..10) == Some(&jmp)) =>
                {
                    8
                }
                _ => 16,
            };
            for (k, entry) in data.chunks_exact(entsize).enumerate() {
                let at = sec.address() + (k * entsize) as u64;
                let Some(slot) = jump_slot(entry, at) else {
                    continue;
                };
                if let Some(target) = slots.remove(&slot) {
                    self.plt_targets.push((at, entsize as u64, target));
                }
            }
        }
    }

    fn finish(&mut self) {
        let key = |e: &Entry| (e.start, e.size, e.rank, e.name.clone());
        self.sized.sort_by_key(key);
        self.sized
            .dedup_by(|a, b| a.start == b.start && a.size == b.size && a.name == b.name);
        self.max_size = self.sized.iter().map(|e| e.size).max().unwrap_or(0);
        for (start, size, target) in std::mem::take(&mut self.plt_targets) {
            let name = match target {
                PltTarget::Named(n) => n,
                // The preferred symbol starting at the resolver.
                PltTarget::Ifunc { resolver } => {
                    let i = self.sized.partition_point(|e| e.start < resolver);
                    self.sized[i..]
                        .iter()
                        .take_while(|e| e.start == resolver)
                        .min_by_key(|e| e.rank)
                        .map_or_else(|| format!("*ABS*+{resolver:#x}"), |e| e.name.clone())
                }
            };
            self.plt.push(Entry {
                start,
                size,
                rank: (0, 0),
                name: format!("{name}@plt"),
            });
        }
        self.plt.sort_by_key(|e| e.start);
        self.zero_size
            .sort_by(|a, b| (a.start, &a.name).cmp(&(b.start, &b.name)));
    }

    /// The virtual address of file offset `off`, if a PT_LOAD maps it.
    pub fn vaddr(&self, off: u64) -> Option<u64> {
        vaddr_in(&self.segments, off)
    }

    /// The name for file offset `off`.
    pub fn lookup_offset(&self, off: u64) -> Option<Hit> {
        self.lookup(self.vaddr(off)?)
    }

    /// The name for virtual address `addr` (rules in the module doc).
    pub fn lookup(&self, addr: u64) -> Option<Hit> {
        let hit = |e: &Entry, kind| Hit {
            name: e.name.clone(),
            offset: addr - e.start,
            kind,
        };
        // Candidates start at most max_size below `addr`.
        let end = self.sized.partition_point(|e| e.start <= addr);
        let best = self.sized[..end]
            .iter()
            .rev()
            .take_while(|e| addr - e.start < self.max_size)
            .filter(|e| addr - e.start < e.size)
            .min_by_key(|e| (e.size, e.rank, &e.name));
        if let Some(e) = best {
            return Some(hit(e, EntryKind::Function));
        }
        let i = self.plt.partition_point(|e| e.start <= addr);
        if let Some(e) = i.checked_sub(1).map(|i| &self.plt[i]) {
            if addr - e.start < e.size {
                return Some(hit(e, EntryKind::Plt));
            }
        }
        let i = self.zero_size.partition_point(|u| u.start < addr);
        let u = self.zero_size.get(i).filter(|u| u.start == addr)?;
        Some(Hit {
            name: u.name.clone(),
            offset: 0,
            kind: EntryKind::Function,
        })
    }
}

/// (GOT slot, resolver) of every IRELATIVE relocation in an allocated
/// RELA section.
fn irelative_slots<'a>(
    obj: &'a object::read::elf::ElfFile64<'a, object::LittleEndian>,
) -> impl Iterator<Item = (u64, u64)> + 'a {
    use object::read::elf::{Rela as _, SectionHeader as _};
    let e = obj.endian();
    obj.elf_section_table()
        .iter()
        .filter(move |h| {
            h.sh_type(e) == object::elf::SHT_RELA && h.sh_flags(e).contains(object::elf::SHF_ALLOC)
        })
        .filter_map(move |h| {
            h.data_as_array::<object::elf::Rela64<_>, _>(e, obj.data())
                .ok()
        })
        .flatten()
        .filter(move |r| r.r_type(e, false) == object::elf::R_X86_64_IRELATIVE)
        .map(move |r| (r.r_offset(e), r.r_addend(e) as u64))
}

/// The GOT slot an x86-64 PLT entry at `at` jumps through, if it holds
/// `jmp *disp32(%rip)` (`ff 25`, possibly after `endbr64` and a `bnd`).
fn jump_slot(entry: &[u8], at: u64) -> Option<u64> {
    let i = entry.windows(2).position(|w| w == [0xff, 0x25])?;
    let disp = entry.get(i + 2..i + 6)?;
    let disp = i32::from_le_bytes(disp.try_into().ok()?);
    let next = at + (i + 6) as u64;
    Some(next.wrapping_add_signed(i64::from(disp)))
}

/// A read-only map of the regular file at `path`.
fn map_file(path: &Path) -> Result<Mmap, ElfTableError> {
    let err = |source| ElfTableError::Read {
        path: path.into(),
        source,
    };
    let f = crate::normalize::open_regular(path).map_err(err)?;
    // SAFETY: a private read-only map, as blazesym maps the same files.
    // Another process may change the file meanwhile: that can only give
    // wrong names, or SIGBUS if it is cut short while being read.
    unsafe { Mmap::map(&f) }.map_err(err)
}

/// Where detached debug files are installed by the path of their binary
/// (`/usr/lib/debug/usr/bin/foo.debug`).
const DEBUG_DIR_BY_PATH: &str = "usr/lib/debug";

/// The installed debug file of an image, by its build ID.
fn debug_file(obj: &object::File) -> Option<PathBuf> {
    let id = obj.build_id().ok()??;
    if id.len() < 2 {
        return None;
    }
    let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
    let p = PathBuf::from(format!(
        "{DEBUG_DIR}/.build-id/{}/{}.debug",
        &hex[..2],
        &hex[2..]
    ));
    p.is_file().then_some(p)
}

/// The files the image's `.gnu_debuglink` may name (see
/// [`ElfTable::load_seen_as`]), each with the CRC it must have.
fn linked_debug_files(obj: &object::File, root: &Path, name: &Path) -> Vec<(PathBuf, Option<u32>)> {
    use std::os::unix::ffi::OsStrExt;
    let Ok(Some((link, crc))) = obj.gnu_debuglink() else {
        return Vec::new();
    };
    let link = Path::new(std::ffi::OsStr::from_bytes(link));
    // A bare file name only: nothing that climbs out of the directories.
    let dir = name.parent().and_then(|d| d.strip_prefix("/").ok());
    let (Some(dir), true) = (dir, link.file_name() == Some(link.as_os_str())) else {
        return Vec::new();
    };
    let at = root.join(dir);
    [
        at.join(link),
        at.join(".debug").join(link),
        root.join(DEBUG_DIR_BY_PATH).join(dir).join(link),
    ]
    .into_iter()
    .filter(|p| p.is_file())
    .map(|p| (p, Some(crc)))
    .collect()
}

/// Whether `debug` (the file `data`) is the debug file of `obj`: the same
/// build ID when both have one, else the CRC the debug link records.
fn same_image(obj: &object::File, debug: &object::File, data: &[u8], crc: u32) -> bool {
    match (obj.build_id(), debug.build_id()) {
        (Ok(Some(a)), Ok(Some(b))) => a == b,
        _ => crc32fast::hash(data) == crc,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jump_slots_of_the_three_plt_shapes() {
        // .plt: jmp *0x1000(%rip); push; jmp
        let plt = [
            0xff, 0x25, 0x00, 0x10, 0, 0, 0x68, 0, 0, 0, 0, 0xe9, 0, 0, 0, 0,
        ];
        assert_eq!(jump_slot(&plt, 0x2000), Some(0x2000 + 6 + 0x1000));
        // .plt.sec: endbr64; bnd jmp *-0x10(%rip)
        let sec = [
            0xf3, 0x0f, 0x1e, 0xfa, 0xf2, 0xff, 0x25, 0xf0, 0xff, 0xff, 0xff, 0x0f, 0x1f, 0x44, 0,
            0,
        ];
        assert_eq!(jump_slot(&sec, 0x3000), Some(0x3000 + 11 - 0x10));
        assert_eq!(jump_slot(&[0x90; 16], 0), None);
    }

    #[test]
    fn names_own_functions_and_the_libc_plt() {
        // This test binary: a sized function is found by its own address.
        let exe = ElfTable::load(Path::new("/proc/self/exe")).unwrap();
        let f = names_own_functions_and_the_libc_plt as *const () as u64;
        // The executable is position-independent: find our load bias from
        // a symbol we know.
        let probe = exe
            .sized
            .iter()
            .find(|e| e.name.contains("names_own_functions_and_the_libc_plt"))
            .expect("test function in .symtab");
        let bias = f - probe.start;
        let hit = exe.lookup(f - bias + 1).unwrap();
        assert!(hit.name.contains("names_own_functions_and_the_libc_plt"));
        assert_eq!((hit.offset, hit.kind), (1, EntryKind::Function));
    }
}
