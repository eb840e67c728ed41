//! User addresses → symbols: our normalizer finds mapping + file offset,
//! blazesym reads the DWARF (with inlined calls) and ELF symbols of that
//! file. Where its answer is not usable — a DWARF entry at address 0, a
//! size-0 symbol, an offset past the symbol's end — the file's own symbol
//! tables decide ([`ElfTable`]: `.symtab`, `.dynsym`, the debug file's
//! `.symtab`, `name@plt`). The vDSO is read from the process's memory.
//!
//! A file looked up once stays open (up to [`MAX_TABLES`] of them): the
//! normalizer keeps a process's mappings, so an address of a process that
//! has exited since is still named, from the same file.
//!
//! With a [`Debuginfod`] client ([`UserSymbolizer::with_debuginfod`]), a
//! file with no DWARF of its own and no debug file installed here is named
//! from the debug file a server has for its build ID (asked once per file;
//! [`UserSymbolizer::debuginfod_answers`] says what it answered).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use blazesym::symbolize::source::{Elf, Source};
use blazesym::symbolize::{CodeInfo, Input, Sym, Symbolizer};

use super::debuginfod::{Debuginfod, Fetched, Kind};
use super::demangle::demangle;
use super::elf_table::{self, ElfTable, EntryKind, Hit};
use super::{vdso, InlinedFrame, SymResult, Symbol, SymbolKind, Symbolized};
use crate::normalize::capture::{CaptureCache, FileId, Frame, Place};
use crate::normalize::{open_mapped_file, Mapping, NormalizeError, Normalizer, VmaFilter};

/// Symbol tables and open files kept per file; dropped wholesale past
/// this many.
const MAX_TABLES: usize = 64;

/// Which image a kept [`ElfTable`] is of.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum TableKey {
    File { dev: (u32, u32), inode: u64 },
    Vdso { pid: u32 },
}

/// Why [`UserSymbolizer::symbolize`] could not look at a process.
#[derive(Debug, thiserror::Error)]
#[error("normalizing addresses of process {pid}")]
pub struct UserSymbolizeError {
    /// The process.
    pub pid: u32,
    /// What the normalizer could not read.
    #[source]
    pub source: NormalizeError,
}

/// Symbolizes code addresses of processes: normalizes them (with its own
/// [`Normalizer`]), then looks them up in each file's symbols and DWARF.
pub struct UserSymbolizer {
    normalizer: Normalizer,
    blaze: Symbolizer,
    /// `Err`: why the image could not be read or parsed (not retried).
    tables: HashMap<TableKey, Result<Arc<ElfTable>, String>>,
    /// Mapped files looked up, open: they are read as `/proc/self/fd/N`,
    /// whether their process is still there or not.
    files: HashMap<TableKey, std::fs::File>,
    debuginfod: Option<Debuginfod>,
    /// Per file: the debug file debuginfod gave and the file's PT_LOAD
    /// segments (`None`: not asked, or no answer).
    remote: HashMap<TableKey, Option<Arc<RemoteDebug>>>,
    /// What debuginfod answered, in order.
    answers: Vec<DebuginfodAnswer>,
}

/// A debug file from debuginfod, and how to place its binary's offsets.
#[derive(Debug)]
struct RemoteDebug {
    file: PathBuf,
    segments: Vec<(u64, u64, u64)>,
}

/// What debuginfod answered for a file that needed a debug file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DebuginfodAnswer {
    /// The binary, as its process maps it.
    pub name: PathBuf,
    /// Its build ID, hex.
    pub build_id: String,
    /// The debug file and where it came from, or why there is none (the
    /// file's own symbols named its frames then).
    pub result: Result<Fetched, String>,
}

impl Default for UserSymbolizer {
    fn default() -> Self {
        Self::new(Normalizer::default())
    }
}

impl UserSymbolizer {
    /// A symbolizer normalizing with `normalizer`.
    pub fn new(normalizer: Normalizer) -> Self {
        Self {
            normalizer,
            // Names are demangled here ([`demangle`]): blazesym demangles
            // C names that only look mangled (`u8_xxx` as `_xxx`).
            blaze: Symbolizer::builder().enable_demangling(false).build(),
            tables: HashMap::new(),
            files: HashMap::new(),
            debuginfod: None,
            remote: HashMap::new(),
            answers: Vec::new(),
        }
    }

    /// Asks `client` for the debug file of a file with no DWARF and no
    /// installed debug file (by build ID or `.gnu_debuglink`); `None` asks
    /// nobody.
    pub fn with_debuginfod(mut self, client: Option<Debuginfod>) -> Self {
        self.debuginfod = client;
        self
    }

    /// What debuginfod answered so far, one answer per binary asked about
    /// (a debug file downloaded or from its cache, or why none).
    pub fn debuginfod_answers(&self) -> &[DebuginfodAnswer] {
        &self.answers
    }

    /// Its normalizer (e.g. to [`Normalizer::forget`] a process).
    pub fn normalizer(&mut self) -> &mut Normalizer {
        &mut self.normalizer
    }

    /// Symbolizes code addresses of process `pid` (only executable mappings
    /// count; anything else is reported unmapped).
    ///
    /// ```
    /// use bpfmux::symbolize::{SymResult, UserSymbolizer};
    ///
    /// #[inline(never)]
    /// fn target() {}
    /// let addr = target as *const () as u64;
    /// let s = UserSymbolizer::default().symbolize(std::process::id(), &[addr, 8])?;
    /// match &s[0].result {
    ///     SymResult::Symbol(sym) => assert!(sym.name.ends_with("target"), "{}", sym.name),
    ///     other => panic!("{other:?}"),
    /// }
    /// assert_eq!(s[1].result, SymResult::Unmapped);
    /// # Ok::<(), bpfmux::symbolize::UserSymbolizeError>(())
    /// ```
    pub fn symbolize(
        &mut self,
        pid: u32,
        addrs: &[u64],
    ) -> Result<Vec<Symbolized>, UserSymbolizeError> {
        let norm = self
            .normalizer
            .normalize(pid, addrs, VmaFilter::EXEC)
            .map_err(|source| UserSymbolizeError { pid, source })?;

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
            let offsets: Vec<u64> = items.iter().map(|&(_, off)| off).collect();
            let results = self.lookup(pid, m, &offsets);
            for ((i, _), r) in items.iter().zip(results) {
                out[*i].result = r;
            }
        }
        Ok(out)
    }

    /// Symbolizes frames normalized at capture by `cache` (see
    /// [`crate::normalize::capture`]), whether or not their processes are
    /// still there: the files are those kept since the capture. In order;
    /// `None` for a frame that was not normalized ([`Place::Unknown`]: only
    /// its address is known).
    ///
    /// Debug files named by `.gnu_debuglink` are looked for below `/`
    /// (the process's root may be gone). vDSO frames are looked up in this
    /// process's vDSO, the same image for every process of its ABI.
    pub fn symbolize_captured(
        &mut self,
        cache: &CaptureCache,
        frames: &[Frame],
    ) -> Vec<Option<SymResult>> {
        let mut out: Vec<Option<SymResult>> = vec![None; frames.len()];
        let mut by_file: BTreeMap<FileId, Vec<(usize, u64)>> = BTreeMap::new();
        let mut vdso: Vec<(usize, u64, u64)> = Vec::new();
        for (i, f) in frames.iter().enumerate() {
            match f.place {
                Place::File { file, offset } => by_file.entry(file).or_default().push((i, offset)),
                Place::Vdso { offset, size } => vdso.push((i, offset, size)),
                Place::Anonymous => {
                    out[i] = Some(SymResult::NoSymbol {
                        module: None,
                        file_offset: 0,
                        reason: "not a file-backed mapping".into(),
                    });
                }
                Place::Unmapped => out[i] = Some(SymResult::Unmapped),
                Place::Unknown => {}
            }
        }
        for (id, items) in by_file {
            let offsets: Vec<u64> = items.iter().map(|&(_, off)| off).collect();
            let results = match cache.file(id) {
                Some(file) => {
                    let module = file.name().map(Path::to_path_buf);
                    match file.path() {
                        Ok(path) => {
                            let image = Image {
                                name: file.name().unwrap_or(&path),
                                path: &path,
                                root: Path::new("/"),
                                key: TableKey::File {
                                    dev: file.dev,
                                    inode: file.inode,
                                },
                            };
                            self.lookup_file(&image, &module, &offsets)
                        }
                        Err(why) => no_symbols(&module, &offsets, &why),
                    }
                }
                None => no_symbols(&None, &offsets, "not a file of this cache"),
            };
            for ((i, _), r) in items.iter().zip(results) {
                out[*i] = Some(r);
            }
        }
        if !vdso.is_empty() {
            let table = self.own_vdso();
            let module = Some(PathBuf::from(vdso::NAME));
            for (i, off, size) in vdso {
                out[i] = Some(match &table {
                    Ok((t, own)) if *own == size => match t.lookup_offset(off) {
                        Some(hit) => from_table(hit, &module, None),
                        None => no_symbol(&module, off, "no symbol covers this offset"),
                    },
                    Ok(_) => no_symbol(&module, off, "a vDSO of another ABI than this tool's"),
                    Err(why) => no_symbol(&module, off, why),
                });
            }
        }
        out
    }

    /// Symbolizes file offsets of the ELF file at `path`, a file some
    /// process mapped as `name` (what results name as their binary): a
    /// recording's frames, read back where that file is (see
    /// [`crate::trace::recording`]). Debug files are looked for as for a
    /// live process's files, below `/`.
    pub fn symbolize_file(&mut self, path: &Path, name: &Path, offsets: &[u64]) -> Vec<SymResult> {
        let module = Some(name.to_path_buf());
        let meta = match std::fs::metadata(path) {
            Ok(m) => m,
            Err(e) => return no_symbols(&module, offsets, &format!("{}: {e}", path.display())),
        };
        let image = Image {
            path,
            root: Path::new("/"),
            name,
            key: file_key(&meta),
        };
        self.lookup_file(&image, &module, offsets)
    }

    /// [`Self::symbolize_file`] of virtual addresses as the file's program
    /// headers place them (what `addr2line -e` takes): each is turned into
    /// its file offset first; one that no PT_LOAD segment holds in the file
    /// is [`SymResult::Unmapped`].
    pub fn symbolize_file_vaddrs(
        &mut self,
        path: &Path,
        name: &Path,
        vaddrs: &[u64],
    ) -> Vec<SymResult> {
        let module = Some(name.to_path_buf());
        let segments = match elf_table::load_segments(path) {
            Ok(s) => s,
            Err(e) => return no_symbols(&module, vaddrs, &crate::error_text(&e)),
        };
        let offsets = vaddrs.iter().map(|&v| elf_table::offset_in(&segments, v));
        translated(
            vaddrs,
            offsets,
            &module,
            |_| SymResult::Unmapped,
            |known| self.symbolize_file(path, name, known),
        )
    }

    /// Symbolizes virtual addresses (as the ELF file's program headers
    /// place its code) in `debug`, a separate debug file of the binary
    /// `name` (what results name as their binary): the frames of a file
    /// that is not there any more, named from its debug file alone.
    pub fn symbolize_debug_file(
        &mut self,
        debug: &Path,
        name: &Path,
        vaddrs: &[u64],
    ) -> Vec<SymResult> {
        let module = Some(name.to_path_buf());
        let key = match std::fs::metadata(debug) {
            Ok(m) => file_key(&m),
            Err(e) => return no_symbols(&module, vaddrs, &format!("{}: {e}", debug.display())),
        };
        let src = Source::Elf(Elf::new(debug));
        let syms = match self.blaze.symbolize(&src, Input::VirtOffset(vaddrs)) {
            Ok(syms) => syms,
            Err(e) => return no_symbols(&module, vaddrs, &format!("ELF lookup failed: {e}")),
        };
        let mut out = Vec::with_capacity(vaddrs.len());
        for (s, &addr) in syms.iter().zip(vaddrs) {
            if let Some(sym) = s.as_sym().filter(|s| usable(s)) {
                out.push(from_blazesym(sym, &module));
                continue;
            }
            let table = kept_table(&mut self.tables, key.clone(), || {
                ElfTable::load(debug)
                    .map_err(|e| format!("symbol tables not readable: {}", crate::error_text(&e)))
            });
            out.push(match table.as_deref().map(|t| t.lookup(addr)) {
                Ok(Some(hit)) => {
                    let dwarf = s.as_sym().filter(|b| b.code_info.is_some());
                    from_table(hit, &module, dwarf.map(source_lines))
                }
                Ok(None) => no_symbol(&module, addr, "no symbol covers this address"),
                Err(why) => no_symbol(&module, addr, why),
            });
        }
        out
    }

    /// Symbolizes file offsets of the binary `name` in its debug file
    /// `debug`, placing them with the binary's PT_LOAD `segments` (file
    /// offset, size, virtual address): an offset no segment holds gets no
    /// symbol.
    pub fn symbolize_offsets_in_debug_file(
        &mut self,
        debug: &Path,
        segments: &[(u64, u64, u64)],
        name: &Path,
        offsets: &[u64],
    ) -> Vec<SymResult> {
        let module = Some(name.to_path_buf());
        let vaddrs = offsets
            .iter()
            .map(|&off| elf_table::vaddr_in(segments, off));
        let outside = |off| no_symbol(&module, off, "in no load segment of the file");
        translated(offsets, vaddrs, &module, outside, |known| {
            self.symbolize_debug_file(debug, name, known)
        })
    }

    /// The debug file debuginfod has for `image`, when it needs one: it
    /// has no DWARF and no debug file is installed for it. Asked once per
    /// file.
    fn remote_debug(&mut self, image: &Image<'_>) -> Option<Arc<RemoteDebug>> {
        let client = self.debuginfod.as_ref()?;
        if let Some(known) = self.remote.get(&image.key) {
            return known.clone();
        }
        let found = elf_table::needs_debug_file(image.path, image.root, image.name).and_then(
            |(id, segments)| {
                let result = client
                    .fetch(&id, Kind::Debuginfo)
                    .map_err(|e| e.to_string());
                self.answers.push(DebuginfodAnswer {
                    name: image.name.to_path_buf(),
                    build_id: id,
                    result: result.clone(),
                });
                Some(Arc::new(RemoteDebug {
                    file: result.ok()?.file,
                    segments,
                }))
            },
        );
        self.remote.insert(image.key.clone(), found.clone());
        found
    }

    /// This process's vDSO table and the size of its image.
    fn own_vdso(&mut self) -> Result<(Arc<ElfTable>, u64), String> {
        let me = std::process::id();
        let m = self
            .normalizer
            .mappings(me, VmaFilter::EXEC)
            .map_err(|e| format!("own maps not readable: {e}"))?
            .into_iter()
            .find(vdso::is_vdso)
            .ok_or("this process has no vDSO")?;
        let t = kept_table(&mut self.tables, TableKey::Vdso { pid: me }, || {
            vdso::table(me, &m).map_err(|e| format!("vDSO image not readable: {e}"))
        })?;
        Ok((t, m.end - m.start))
    }

    fn lookup(&mut self, pid: u32, m: &Mapping, offsets: &[u64]) -> Vec<SymResult> {
        if vdso::is_vdso(m) {
            let table = kept_table(&mut self.tables, TableKey::Vdso { pid }, || {
                vdso::table(pid, m).map_err(|e| format!("vDSO image not readable: {e}"))
            });
            return offsets
                .iter()
                .map(|&off| match &table {
                    Ok(t) => match t.lookup_offset(off) {
                        Some(hit) => from_table(hit, &m.name, None),
                        None => no_symbol(&m.name, off, "no symbol covers this offset"),
                    },
                    Err(why) => no_symbol(&m.name, off, why),
                })
                .collect();
        }
        if !m.is_file_backed() {
            return no_symbols(&m.name, offsets, "not a file-backed mapping");
        }
        let key = TableKey::File {
            dev: (m.dev_major, m.dev_minor),
            inode: m.inode,
        };
        let Some(path) = self.open_file(pid, m, &key) else {
            return no_symbols(&m.name, offsets, "mapped file not accessible");
        };
        // Debug files are looked for below the process's root, or ours
        // once it has gone.
        let root = PathBuf::from(format!("/proc/{pid}/root"));
        let root = if root.exists() {
            root
        } else {
            PathBuf::from("/")
        };
        let image = Image {
            path: &path,
            root: &root,
            name: m.name.as_deref().unwrap_or(&path),
            key,
        };
        self.lookup_file(&image, &m.name, offsets)
    }

    /// A path that reads the file `m` maps, `key`: the file kept open
    /// since it was first looked up, or else opened now (and kept).
    fn open_file(&mut self, pid: u32, m: &Mapping, key: &TableKey) -> Option<PathBuf> {
        use std::os::fd::AsRawFd;
        if !self.files.contains_key(key) {
            let file = open_mapped_file(pid, m)?;
            if self.files.len() >= MAX_TABLES {
                self.files.clear();
            }
            self.files.insert(key.clone(), file);
        }
        let fd = self.files.get(key)?.as_raw_fd();
        Some(PathBuf::from(format!("/proc/self/fd/{fd}")))
    }

    /// Looks up file offsets of one image: blazesym first (DWARF, ELF
    /// symbols), the image's own symbol tables where its answer is not
    /// usable. `module` is what results name as their binary.
    fn lookup_file(
        &mut self,
        image: &Image<'_>,
        module: &Option<PathBuf>,
        offsets: &[u64],
    ) -> Vec<SymResult> {
        if let Some(remote) = self.remote_debug(image) {
            return self.symbolize_offsets_in_debug_file(
                &remote.file,
                &remote.segments,
                image.name,
                offsets,
            );
        }
        let src = Source::Elf(Elf::new(image.path));
        let syms = match self.blaze.symbolize(&src, Input::FileOffset(offsets)) {
            Ok(syms) => syms,
            Err(e) => return no_symbols(module, offsets, &format!("ELF lookup failed: {e}")),
        };
        let mut out = Vec::with_capacity(offsets.len());
        for (s, &off) in syms.iter().zip(offsets) {
            if let Some(sym) = s.as_sym().filter(|s| usable(s)) {
                out.push(from_blazesym(sym, module));
                continue;
            }
            let table = kept_table(&mut self.tables, image.key.clone(), || {
                ElfTable::load_seen_as(image.path, image.root, image.name)
                    .map_err(|e| format!("symbol tables not readable: {}", crate::error_text(&e)))
            });
            let table = match table {
                Ok(t) => t,
                Err(why) => {
                    out.push(no_symbol(module, off, &why));
                    continue;
                }
            };
            out.push(match table.lookup_offset(off) {
                // The line table and inline chain still hold where only the
                // function entry was unusable.
                Some(hit) => {
                    let dwarf = s.as_sym().filter(|b| b.code_info.is_some());
                    from_table(hit, module, dwarf.map(source_lines))
                }
                None => no_symbol(module, off, "no symbol covers this offset"),
            });
        }
        out
    }
}

/// Answers for `inputs` looked up as `places` (each input translated into
/// the lookup's terms, `None` where it has none): `lookup` gets the
/// translated ones, `outside` answers the others.
fn translated(
    inputs: &[u64],
    places: impl Iterator<Item = Option<u64>>,
    module: &Option<PathBuf>,
    outside: impl Fn(u64) -> SymResult,
    lookup: impl FnOnce(&[u64]) -> Vec<SymResult>,
) -> Vec<SymResult> {
    let places: Vec<Option<u64>> = places.collect();
    let known: Vec<u64> = places.iter().flatten().copied().collect();
    let mut named = lookup(&known).into_iter();
    places
        .iter()
        .zip(inputs)
        .map(|(p, &input)| match p {
            Some(_) => named
                .next()
                .unwrap_or_else(|| no_symbol(module, input, "not looked up")),
            None => outside(input),
        })
        .collect()
}

/// The key of the file `meta` describes.
fn file_key(meta: &std::fs::Metadata) -> TableKey {
    use std::os::unix::fs::MetadataExt;
    let dev = meta.dev();
    TableKey::File {
        dev: (libc::major(dev), libc::minor(dev)),
        inode: meta.ino(),
    }
}

/// An image to look offsets up in.
struct Image<'a> {
    /// A path that opens it now.
    path: &'a Path,
    /// The root its process sees (for `.gnu_debuglink` files).
    root: &'a Path,
    /// The name the process maps it by, below `root`.
    name: &'a Path,
    /// Its symbol tables' key in the kept tables.
    key: TableKey,
}

fn no_symbol(module: &Option<PathBuf>, off: u64, reason: &str) -> SymResult {
    SymResult::NoSymbol {
        module: module.clone(),
        file_offset: off,
        reason: reason.to_string(),
    }
}

fn no_symbols(module: &Option<PathBuf>, offsets: &[u64], reason: &str) -> Vec<SymResult> {
    offsets
        .iter()
        .map(|&off| no_symbol(module, off, reason))
        .collect()
}

/// The kept table of `key`, made by `load` the first time.
fn kept_table(
    tables: &mut HashMap<TableKey, Result<Arc<ElfTable>, String>>,
    key: TableKey,
    load: impl FnOnce() -> Result<ElfTable, String>,
) -> Result<Arc<ElfTable>, String> {
    if let Some(t) = tables.get(&key) {
        return t.clone();
    }
    if tables.len() >= MAX_TABLES {
        tables.clear();
    }
    let t = load().map(Arc::new);
    tables.insert(key, t.clone());
    t
}

/// Whether blazesym's answer names the address: not one of the DWARF
/// entries Debian's libc debug info places at address 0 (code never lives
/// at offset 0, the ELF header does), and a symbol with a size that covers
/// the address (a size-0 symbol covers nothing past its own address).
fn usable(s: &Sym) -> bool {
    s.addr != 0 && s.size.is_some_and(|size| s.offset < size)
}

fn code_location(ci: Option<&CodeInfo>) -> (Option<PathBuf>, Option<u32>) {
    ci.map_or((None, None), |ci| {
        let file = match &ci.dir {
            Some(d) => d.join(&*ci.file),
            None => PathBuf::from(&*ci.file),
        };
        (Some(file), ci.line)
    })
}

/// What DWARF says about an address: file, line, inlined calls.
pub(super) type SourceLines = (Option<PathBuf>, Option<u32>, Vec<InlinedFrame>);

pub(super) fn source_lines(sym: &Sym) -> SourceLines {
    let (file, line) = code_location(sym.code_info.as_deref());
    let inlined = sym
        .inlined
        .iter()
        .map(|f| {
            let (file, line) = code_location(f.code_info.as_ref());
            InlinedFrame {
                name: demangle(&f.name).into_owned(),
                file,
                line,
            }
        })
        .collect();
    (file, line, inlined)
}

fn from_blazesym(sym: &Sym, module: &Option<PathBuf>) -> SymResult {
    let (file, line, inlined) = source_lines(sym);
    SymResult::Symbol(Symbol {
        name: demangle(&sym.name).into_owned(),
        offset: sym.offset as u64,
        kind: SymbolKind::Function,
        file,
        line,
        module: module.clone(),
        inlined,
    })
}

/// A name from the symbol tables; the line table and inline chain still
/// hold (`lines`) where only DWARF's function entry was unusable.
fn from_table(hit: Hit, module: &Option<PathBuf>, lines: Option<SourceLines>) -> SymResult {
    let (file, line, inlined) = lines.unwrap_or_default();
    SymResult::Symbol(Symbol {
        name: demangle(&hit.name).into_owned(),
        offset: hit.offset,
        kind: match hit.kind {
            EntryKind::Function => SymbolKind::Function,
            EntryKind::Plt => SymbolKind::Plt,
        },
        file,
        line,
        module: module.clone(),
        inlined,
    })
}
