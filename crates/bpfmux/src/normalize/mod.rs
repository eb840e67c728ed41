//! Address normalization: for a process and a batch of addresses, find the
//! mapping covering each address, its file offset, and the backing file's
//! ELF build ID.
//!
//! Two ways to learn a process's VMAs, same results (a test proves it):
//! - `PROCMAP_QUERY` ioctl (Linux 6.11+): a `COVERING_OR_NEXT_VMA` walk over
//!   the sorted addresses, one query per distinct VMA touched, with the
//!   permission / file-backed filters done by the kernel;
//! - the text `/proc/<pid>/maps`, parsed in one pass, used automatically when
//!   the ioctl is missing (ENOTTY).
//!
//! A [`Normalizer`] keeps, per pid, the open maps file (`keep_maps_open`:
//! results stay live, it saves the open/close) and caches VMAs it has seen
//! and build IDs per file (`cache`). Both are on by default and opt-out.
//! Cached VMAs go stale when the process maps or unmaps memory; call
//! [`Normalizer::forget`] when that matters, or turn caching off.
//!
//! [`capture`] normalizes addresses as a tracer captures them, caching each
//! process's mappings as long as its address space is the same, so that
//! they can be symbolized after the process exited.

mod build_id;
pub mod capture;
mod error;
mod kept_maps;
mod mapping;
pub mod procmap_query;
mod text_maps;
mod walk;

use std::collections::HashMap;
use std::fs::File;
use std::path::PathBuf;

pub use build_id::kernel_build_id;
pub use build_id::read as read_build_id;
pub use build_id::{MappedImage, ReadAt};
pub use error::NormalizeError;
pub use mapping::{
    display_name, escape_name, BuildId, Mapping, Normalized, NormalizedAddr, Perms, Resolved,
    BUILD_ID_MAX,
};

pub(crate) use mapping::hex as serialize_hex;
pub(crate) use mapping::opt_path_text;

use kept_maps::KeptMaps;
use procmap_query::{QueryBuf, Want};

/// How to read the process's VMAs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Backend {
    /// `PROCMAP_QUERY`, falling back to text on kernels without it.
    #[default]
    Auto,
    /// `PROCMAP_QUERY` only; an error on kernels without it.
    ProcmapQuery,
    /// Text `/proc/<pid>/maps` only.
    Text,
}

/// How a [`Normalizer`] reads VMAs and what it keeps.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Where VMAs come from.
    pub backend: Backend,
    /// Report the ELF build ID of each file-backed mapping.
    pub build_ids: bool,
    /// Keep VMAs and build IDs per pid across calls. Cached VMAs go stale
    /// when the process maps or unmaps memory (see [`Normalizer::forget`]).
    pub cache: bool,
    /// Keep `/proc/<pid>/maps` open per pid across calls. Results stay live
    /// (every call still asks the kernel, or re-reads the text); it only
    /// saves the open and close. See `kept_maps` for why this is safe.
    pub keep_maps_open: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            backend: Backend::Auto,
            build_ids: true,
            cache: true,
            keep_maps_open: true,
        }
    }
}

/// Which VMAs may cover an address; others count as not mapped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct VmaFilter {
    /// Only executable VMAs.
    pub exec_only: bool,
    /// Only VMAs a file backs.
    pub file_backed_only: bool,
}

impl VmaFilter {
    /// Any VMA.
    pub const ALL: Self = Self {
        exec_only: false,
        file_backed_only: false,
    };
    /// Code: what stack addresses point into.
    pub const EXEC: Self = Self {
        exec_only: true,
        file_backed_only: false,
    };

    fn query_flags(self) -> u64 {
        let mut f = 0;
        if self.exec_only {
            f |= procmap_query::VMA_EXECUTABLE;
        }
        if self.file_backed_only {
            f |= procmap_query::FILE_BACKED_VMA;
        }
        f
    }

    fn accepts(self, exec: bool, file_backed: bool) -> bool {
        (!self.exec_only || exec) && (!self.file_backed_only || file_backed)
    }
}

/// Identifies a backing file for build-ID caching.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct FileKey {
    dev_major: u32,
    dev_minor: u32,
    inode: u64,
}

impl FileKey {
    fn of(m: &Mapping) -> Self {
        Self {
            dev_major: m.dev_major,
            dev_minor: m.dev_minor,
            inode: m.inode,
        }
    }
}

/// VMAs and build IDs remembered about one process while `cache` is on.
#[derive(Default)]
struct PidCache {
    /// Known VMAs per filter, sorted by start. `complete` when read from the
    /// text file (every matching VMA is known, so misses are unmapped).
    vmas: HashMap<VmaFilter, KnownVmas>,
    build_ids: HashMap<FileKey, Option<BuildId>>,
}

#[derive(Default)]
struct KnownVmas {
    sorted: Vec<Mapping>,
    complete: bool,
}

/// How often a [`Normalizer`] went to the kernel, since it was made: what
/// tests and benchmarks use to check the work per call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelCalls {
    /// `/proc/<pid>/maps` opened.
    pub opens: u64,
    /// `PROCMAP_QUERY` ioctls.
    pub queries: u64,
    /// Of those, queries that asked for a build ID.
    pub build_id_queries: u64,
    /// Whole text maps files read.
    pub text_reads: u64,
}

/// Normalizes addresses of processes, keeping what it may per pid
/// (see the module docs).
pub struct Normalizer {
    opts: Options,
    calls: KernelCalls,
    /// Set once the kernel answered ENOTTY: don't ask again.
    procmap_unsupported: bool,
    last_backend: Option<Backend>,
    qbuf: QueryBuf,
    text: Vec<u8>,
    kept: KeptMaps,
    pids: HashMap<u32, PidCache>,
}

impl Default for Normalizer {
    fn default() -> Self {
        Self::new(Options::default())
    }
}

impl Normalizer {
    /// A normalizer with these options.
    pub fn new(opts: Options) -> Self {
        Self {
            opts,
            calls: KernelCalls::default(),
            procmap_unsupported: false,
            last_backend: None,
            qbuf: QueryBuf::default(),
            text: Vec::new(),
            kept: KeptMaps::default(),
            pids: HashMap::new(),
        }
    }

    /// Its options.
    pub fn options(&self) -> Options {
        self.opts
    }

    /// How often it went to the kernel so far.
    pub fn kernel_calls(&self) -> KernelCalls {
        self.calls
    }

    /// Backend the last successful call used (`ProcmapQuery` or `Text`).
    pub fn last_backend(&self) -> Option<Backend> {
        self.last_backend
    }

    /// Keeps `maps`, a `/proc/<pid>/maps` descriptor opened after `pid` was
    /// found to have exec'd since its fork, as if a call had opened it: the
    /// next call reads it instead of opening the file (and reading `stat`)
    /// again. Without `keep_maps_open`, it is closed.
    pub(crate) fn keep_maps(&mut self, pid: u32, maps: File) {
        if self.opts.keep_maps_open {
            self.kept.put(pid, maps);
        }
    }

    /// Drops everything kept about `pid`: the open maps file, cached VMAs
    /// and build IDs (e.g. after it exits or remaps memory).
    pub fn forget(&mut self, pid: u32) {
        self.kept.forget(pid);
        self.pids.remove(&pid);
    }

    /// Normalizes `addrs` (any order, duplicates allowed) of process `pid`.
    ///
    /// ```
    /// use bpfmux::normalize::{Normalizer, VmaFilter};
    ///
    /// fn code() {}
    /// let addr = code as *const () as u64;
    /// let n = Normalizer::default().normalize(std::process::id(), &[addr], VmaFilter::EXEC)?;
    /// let m = n.mapping_of(0).expect("this code is mapped");
    /// assert!(m.perms.exec && m.contains(addr));
    /// assert_eq!(n.addrs[0].resolved.unwrap().file_offset, m.file_offset(addr));
    /// # Ok::<(), bpfmux::normalize::NormalizeError>(())
    /// ```
    pub fn normalize(
        &mut self,
        pid: u32,
        addrs: &[u64],
        filter: VmaFilter,
    ) -> Result<Normalized, NormalizeError> {
        self.run(pid, filter, |n, pid, source| {
            walk::normalize(addrs, source, n, pid)
        })
    }

    /// Every VMA of `pid` that passes `filter`, in address order.
    pub fn mappings(
        &mut self,
        pid: u32,
        filter: VmaFilter,
    ) -> Result<Vec<Mapping>, NormalizeError> {
        self.run(pid, filter, |n, pid, source| walk::all(source, n, pid))
    }

    /// Picks the backend, runs `f` with a VMA source and fills in build IDs.
    fn run<T: walk::HasMappings>(
        &mut self,
        pid: u32,
        filter: VmaFilter,
        mut f: impl FnMut(&mut Self, u32, &mut walk::Source) -> Result<T, NormalizeError>,
    ) -> Result<T, NormalizeError> {
        let use_ioctl = match self.opts.backend {
            Backend::Text => false,
            Backend::ProcmapQuery => true,
            Backend::Auto => !self.procmap_unsupported,
        };
        if use_ioctl {
            match self.with_maps(pid, |n, maps| n.run_ioctl(pid, maps, filter, &mut f)) {
                Err(NormalizeError::ProcmapQueryUnsupported)
                    if self.opts.backend == Backend::Auto =>
                {
                    self.procmap_unsupported = true;
                }
                other => return other,
            }
        }
        if let Some(known) = self.take_complete_vmas(pid, filter) {
            // Everything is cached: no need to read the file at all.
            let mut source = walk::Source::Known(walk::KnownSource { known, pos: 0 });
            let result = f(self, pid, &mut source);
            return self.finish_text(pid, filter, source, result);
        }
        self.with_maps(pid, |n, maps| n.run_text(pid, maps, filter, &mut f))
    }

    /// Runs `body` with `pid`'s maps file: the kept one when there is one,
    /// else a fresh one (kept afterwards when `keep_maps_open` allows). A
    /// kept file whose address space is gone (exit, exec, pid reuse) is
    /// dropped together with everything cached, and `body` runs once more
    /// on a fresh file.
    fn with_maps<T>(
        &mut self,
        pid: u32,
        mut body: impl FnMut(&mut Self, &File) -> Result<T, NormalizeError>,
    ) -> Result<T, NormalizeError> {
        if let Some(file) = self.kept.take(pid) {
            match body(self, &file) {
                Err(NormalizeError::NoAddressSpace { .. }) => self.forget(pid),
                other => {
                    self.kept.put(pid, file);
                    return other;
                }
            }
        }
        let keep = self.opts.keep_maps_open && self.kept.may_keep(pid);
        self.calls.opens += 1;
        let file = open_maps(pid)?;
        let out = body(self, &file);
        if keep && out.is_ok() {
            self.kept.put(pid, file);
        }
        out
    }

    fn run_ioctl<T: walk::HasMappings>(
        &mut self,
        pid: u32,
        maps: &File,
        filter: VmaFilter,
        f: &mut impl FnMut(&mut Self, u32, &mut walk::Source) -> Result<T, NormalizeError>,
    ) -> Result<T, NormalizeError> {
        let known = if self.opts.cache {
            self.pids
                .get_mut(&pid)
                .and_then(|c| c.vmas.remove(&filter))
                .unwrap_or_default()
        } else {
            KnownVmas::default()
        };
        let mut ids = if self.opts.build_ids {
            self.build_id_cache_take(pid)
        } else {
            HashMap::new()
        };
        let mut source = walk::Source::Ioctl(walk::IoctlSource {
            maps,
            flags: filter.query_flags(),
            // Ask for build IDs inline (one ioctl per VMA does it all) unless
            // the cache already has some; see IoctlSource::inline_ids.
            want: Want {
                name: true,
                build_id: self.opts.build_ids && ids.is_empty(),
            },
            known,
            cache: self.opts.cache,
            inline_ids: HashMap::new(),
        });
        let result = f(self, pid, &mut source);
        let walk::Source::Ioctl(src) = source else {
            unreachable!("source kind does not change")
        };
        let mut out = match result {
            Ok(out) => out,
            Err(e) => {
                self.build_id_cache_put(pid, ids);
                return Err(e);
            }
        };
        if self.opts.build_ids {
            ids.extend(src.inline_ids);
            let filled = self.fill_build_ids_ioctl(pid, maps, out.mappings_mut(), &mut ids);
            self.build_id_cache_put(pid, ids);
            filled?;
        }
        self.last_backend = Some(Backend::ProcmapQuery);
        if self.opts.cache {
            self.pids
                .entry(pid)
                .or_default()
                .vmas
                .insert(filter, src.known);
        }
        Ok(out)
    }

    /// The cached VMA list of `pid` for `filter`, if it holds every VMA.
    fn take_complete_vmas(&mut self, pid: u32, filter: VmaFilter) -> Option<KnownVmas> {
        if !self.opts.cache {
            return None;
        }
        let vmas = &mut self.pids.get_mut(&pid)?.vmas;
        if !vmas.get(&filter)?.complete {
            return None;
        }
        vmas.remove(&filter)
    }

    fn run_text<T: walk::HasMappings>(
        &mut self,
        pid: u32,
        maps: &File,
        filter: VmaFilter,
        f: &mut impl FnMut(&mut Self, u32, &mut walk::Source) -> Result<T, NormalizeError>,
    ) -> Result<T, NormalizeError> {
        let mut text = std::mem::take(&mut self.text);
        self.calls.text_reads += 1;
        let read = text_maps::read_all(maps, &mut text);
        let parsed = match read {
            Err(e) => Err(NormalizeError::from_io(pid, "reading", e)),
            // A live user process always has mappings; an empty file
            // means the address space is gone (the ioctl says ESRCH).
            Ok(()) if text.is_empty() => Err(NormalizeError::NoAddressSpace { pid }),
            // To cache, parse everything now; otherwise parse lazily and
            // stop at the last address.
            Ok(()) if self.opts.cache => walk::parse_all(&text, filter, pid).map(Some),
            Ok(()) => Ok(None),
        };
        let mut source = match parsed {
            Err(e) => {
                self.text = text;
                return Err(e);
            }
            Ok(Some(sorted)) => {
                self.text = text;
                let known = KnownVmas {
                    sorted,
                    complete: true,
                };
                walk::Source::Known(walk::KnownSource { known, pos: 0 })
            }
            Ok(None) => walk::Source::Text(walk::TextSource {
                text,
                pos: 0,
                filter,
            }),
        };
        let result = f(self, pid, &mut source);
        self.finish_text(pid, filter, source, result)
    }

    /// Text path epilogue: gives the read buffer back, keeps what was
    /// parsed, fills in build IDs.
    fn finish_text<T: walk::HasMappings>(
        &mut self,
        pid: u32,
        filter: VmaFilter,
        source: walk::Source,
        result: Result<T, NormalizeError>,
    ) -> Result<T, NormalizeError> {
        let known = match source {
            walk::Source::Text(t) => {
                self.text = t.text;
                None
            }
            walk::Source::Known(k) => self.opts.cache.then_some(k.known),
            walk::Source::Ioctl(_) => None,
        };
        let mut out = result?;
        if let Some(known) = known {
            self.pids.entry(pid).or_default().vmas.insert(filter, known);
        }
        if self.opts.build_ids {
            self.fill_build_ids_text(pid, out.mappings_mut());
        }
        self.last_backend = Some(Backend::Text);
        Ok(out)
    }

    /// The build-ID cache for `pid` (empty and per call when caching is off).
    fn build_id_cache_take(&mut self, pid: u32) -> HashMap<FileKey, Option<BuildId>> {
        if !self.opts.cache {
            return HashMap::new();
        }
        self.pids
            .get_mut(&pid)
            .map(|c| std::mem::take(&mut c.build_ids))
            .unwrap_or_default()
    }

    fn build_id_cache_put(&mut self, pid: u32, ids: HashMap<FileKey, Option<BuildId>>) {
        if self.opts.cache {
            self.pids.entry(pid).or_default().build_ids = ids;
        }
    }

    /// Asks the kernel for each distinct file's build ID once (a query at
    /// the mapping's start, without the name).
    fn fill_build_ids_ioctl(
        &mut self,
        pid: u32,
        maps: &File,
        mappings: &mut [Mapping],
        ids: &mut HashMap<FileKey, Option<BuildId>>,
    ) -> Result<(), NormalizeError> {
        let want = Want {
            name: false,
            build_id: true,
        };
        let mut last: Option<(FileKey, Option<BuildId>)> = None;
        for m in mappings.iter_mut().filter(|m| m.is_file_backed()) {
            let key = FileKey::of(m);
            // Neighbouring mappings are mostly of the same file.
            if let Some((_, id)) = last.filter(|(k, _)| *k == key) {
                m.build_id = id;
                continue;
            }
            let id = match ids.get(&key) {
                Some(id) => *id,
                None => {
                    self.calls.queries += 1;
                    self.calls.build_id_queries += 1;
                    let id = procmap_query::query(maps, m.start, 0, want, &mut self.qbuf)
                        .map_err(|e| NormalizeError::from_io(pid, "querying", e))?
                        .and_then(|v| v.build_id);
                    ids.insert(key, id);
                    id
                }
            };
            m.build_id = id;
            last = Some((key, id));
        }
        Ok(())
    }

    /// Text mode: read build IDs from the mapped files ourselves, once per
    /// distinct file. A file we cannot open (deleted or a memfd, without the
    /// capability `map_files/` needs) is read where the process maps it,
    /// through `/proc/PID/mem`; where that fails too it has no build ID.
    fn fill_build_ids_text(&mut self, pid: u32, mappings: &mut [Mapping]) {
        let mut ids = self.build_id_cache_take(pid);
        let mut last: Option<(FileKey, Option<BuildId>)> = None;
        // Where each file is mapped, for files that cannot be opened.
        let ranges: Vec<(FileKey, u64, u64, u64)> = mappings
            .iter()
            .filter(|m| m.is_file_backed())
            .map(|m| (FileKey::of(m), m.offset, m.start, m.end))
            .collect();
        for m in mappings.iter_mut().filter(|m| m.is_file_backed()) {
            let key = FileKey::of(m);
            if let Some((_, id)) = last.filter(|(k, _)| *k == key) {
                m.build_id = id;
                continue;
            }
            let id = *ids
                .entry(key)
                .or_insert_with(|| match open_mapped_file(pid, m) {
                    Some(f) => read_build_id(&f).ok().flatten(),
                    // Deleted or a memfd, and map_files/ is closed to us: the
                    // process's memory still holds the file's first pages.
                    None => {
                        let of_file = ranges
                            .iter()
                            .filter(|r| r.0 == key)
                            .map(|&(_, off, start, end)| (off, start, end));
                        MappedImage::open(pid, of_file)
                            .and_then(|img| read_build_id(&img))
                            .ok()
                            .flatten()
                    }
                });
            m.build_id = id;
            last = Some((key, id));
        }
        self.build_id_cache_put(pid, ids);
    }
}

fn open_maps(pid: u32) -> Result<File, NormalizeError> {
    File::open(format!("/proc/{pid}/maps")).map_err(|e| NormalizeError::from_io(pid, "opening", e))
}

/// A path that opens the file behind a mapping: `map_files/` names exactly
/// the mapped file (even if deleted, a memfd, or in another mount
/// namespace) but needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE; `root/` +
/// path is the fallback (for a name with `\012`, also read as a newline,
/// where the inode says it is the mapped file). Only regular files count:
/// the process may have put a FIFO or a device where its file was (e.g.
/// at `lib.so (deleted)`), and opening one of those can block forever.
pub fn mapped_file_path(pid: u32, m: &Mapping) -> Option<PathBuf> {
    mapped_file(pid, m).map(|(path, _)| path)
}

/// Opens the file behind a mapping (see [`mapped_file_path`]).
pub fn open_mapped_file(pid: u32, m: &Mapping) -> Option<File> {
    mapped_file(pid, m).map(|(_, file)| file)
}

/// [`mapped_file_path`] and the file it opened (each path is opened once).
fn mapped_file(pid: u32, m: &Mapping) -> Option<(PathBuf, File)> {
    use std::os::unix::fs::MetadataExt;
    if !m.is_file_backed() {
        return None;
    }
    let opened = |p: PathBuf| open_regular(&p).ok().map(|f| (p, f));
    let via_map_files = PathBuf::from(format!("/proc/{pid}/map_files/{:x}-{:x}", m.start, m.end));
    if let Some(found) = opened(via_map_files) {
        return Some(found);
    }
    let name = m.name.as_ref()?;
    let root = PathBuf::from(format!("/proc/{pid}/root"));
    let mut candidates = mapping::unescaped_candidates(name)
        .into_iter()
        .filter_map(|p| Some(root.join(p.strip_prefix("/").ok()?)));
    if let Some(found) = opened(candidates.next()?) {
        return Some(found);
    }
    candidates
        .find(|p| std::fs::metadata(p).is_ok_and(|md| md.is_file() && md.ino() == m.inode))
        .and_then(opened)
}

/// Opens `path` for reading only if it is a regular file: anything else is
/// never opened (a device's open can act; a FIFO's blocks), and the open
/// itself cannot block should a FIFO take the file's place meanwhile.
pub fn open_regular(path: &std::path::Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let not_regular = || {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{} is not a regular file", path.display()),
        )
    };
    if !std::fs::metadata(path)?.is_file() {
        return Err(not_regular());
    }
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    if !f.metadata()?.is_file() {
        return Err(not_regular());
    }
    Ok(f)
}

/// Whether this kernel implements `PROCMAP_QUERY` (checked on our own maps).
pub fn procmap_query_supported() -> std::io::Result<bool> {
    let maps = File::open("/proc/self/maps")?;
    let mut buf = QueryBuf::default();
    let want = Want {
        name: false,
        build_id: false,
    };
    match procmap_query::query(
        &maps,
        0,
        procmap_query::COVERING_OR_NEXT_VMA,
        want,
        &mut buf,
    ) {
        Ok(_) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::ENOTTY) => Ok(false),
        Err(e) => Err(e),
    }
}
