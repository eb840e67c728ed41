//! Capture-time normalization: code addresses of a process turned into
//! *(file, file offset)* while the process is there, so that they can be
//! symbolized later — after it exited, its file was deleted, or from another
//! mount namespace (see
//! [`UserSymbolizer::symbolize_captured`](crate::symbolize::UserSymbolizer::symbolize_captured)).
//!
//! A [`CaptureCache`] remembers, per process, the executable mappings it
//! has seen (range, file offset, which file). An address inside one of them
//! is normalized without a system call (a *cache hit*); the others go to a
//! [`Normalizer`] (PROCMAP_QUERY, or the text maps file where the kernel
//! lacks it), and the mappings it finds are remembered. Each distinct file
//! is opened once, when it is first seen, and kept open (up to
//! [`MAX_KEPT_FILES`]): symbolization reads that descriptor, so the file's
//! name does not need to resolve any more.
//!
//! # When cached mappings are dropped
//!
//! Cached mappings are right only for the address space they were read
//! from. A process that execs gets a new one, and so does a pid reused by a
//! new process. The cache checks, once per process and *round*
//! ([`CaptureCache::new_round`]; a caller that reads stacks in batches
//! starts a round per batch), that the address space is still the one its
//! mappings came from — one system call per process and round, never per
//! address:
//! - It opened `/proc/<pid>/maps` *before* reading the mappings. That
//!   descriptor stays tied to the address space it was opened on (see
//!   `kept_maps`): once that one is gone (exec, exit, pid reuse) a read of
//!   it returns nothing, or `ESRCH`.
//! - A process that has not exec'd since it was forked may share its
//!   parent's address space (vfork), and a descriptor opened then would go
//!   on showing the parent's after the exec. For such a process the check
//!   is its `PF_FORKNOEXEC` flag instead (`/proc/<pid>/stat`): the exec
//!   clears it.
//!
//! A process that exec'd starts afresh; one that is gone (or whose maps
//! cannot be read) is dropped, and its addresses that were not cached
//! become [`Place::Unknown`] (counted in [`CaptureStats::failures`]).
//!
//! # Processes gone before their stack was read
//!
//! A process that exits within moments of a call leaves no mappings to
//! ask. For those, the kernel can record a stack as each frame's file
//! build ID and file offset instead of its address (`BPF_F_STACK_BUILD_ID`
//! stack maps); [`CaptureCache::from_build_ids`] turns such frames into
//! the same [`Place::File`]s, the file found by its build ID among the
//! files seen so far and the *candidates* the caller names
//! ([`CaptureCache::add_candidates`]: the traced command's executable, the
//! tool's own libraries), or else known by its build ID alone (an address
//! here; a recording keeps the build ID and offset, which `bpfmux report`
//! names from a debuginfod server that has the file itself). Those in a
//! file found here are counted in [`CaptureStats::by_build_id`].
//!
//! Not noticed: a process that unmaps a file and maps another one at the
//! same addresses without an exec (`dlclose`, then `dlopen` of another
//! library that lands in the same range). Noticing that would take a system
//! call per address, which is what the cache is there to save.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::kept_maps::{forked_without_exec, least_recently_used};
use super::{
    open_mapped_file, read_build_id, Backend, BuildId, Mapping, Normalizer, Options, VmaFilter,
};

/// Processes whose mappings are kept at most (each holds a descriptor of
/// its maps file); the least recently used goes first. With the kept files
/// and the normalizer's own maps descriptors (128), a cache holds at most
/// 512 descriptors, half the usual soft limit.
pub const MAX_PROCESSES: usize = 128;

/// Distinct files kept open at most. Files seen past this many are found
/// again by name when symbolized (if the name still leads to the same
/// inode).
pub const MAX_KEPT_FILES: usize = 256;

/// A file a captured frame is in: an index into the [`CaptureCache`]'s files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileId(u32);

/// One captured address and where it was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    /// The address as captured.
    pub addr: u64,
    /// Where it was when it was normalized.
    pub place: Place,
}

/// Where a captured address was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// In a mapping of `file`, at `offset` in the file.
    File {
        /// See [`CaptureCache::file`].
        file: FileId,
        /// Offset in the file.
        offset: u64,
    },
    /// In the vDSO, `offset` bytes into its image of `size` bytes.
    Vdso {
        /// Offset in the image.
        offset: u64,
        /// The image's size (a vDSO of another ABI has another size).
        size: u64,
    },
    /// In an executable mapping no file backs (JIT code, `[anon:…]`).
    Anonymous,
    /// No executable mapping covered it.
    Unmapped,
    /// Not normalized: the process was gone (or its maps unreadable) before
    /// the address was read.
    Unknown,
}

/// A frame of a user stack as the kernel recorded it with a
/// `BPF_F_STACK_BUILD_ID` stack map.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BuildIdFrame {
    /// In a file with this build ID, at this file offset.
    File {
        /// The file's build ID (as the kernel read it).
        build_id: BuildId,
        /// Offset in the file.
        offset: u64,
    },
    /// Only the address (no file, or its build ID could not be read).
    Addr(u64),
}

/// What a [`CaptureCache`] did, counted per address.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaptureStats {
    /// Addresses the kernel was asked about: their mapping was not cached.
    pub normalized: u64,
    /// Addresses found in a cached mapping, without a system call.
    pub cache_hits: u64,
    /// Addresses not normalized: the process was gone (or its maps
    /// unreadable) before they were read.
    pub failures: u64,
    /// Times a process's cached mappings were dropped because its address
    /// space changed (an exec, or the pid reused).
    pub invalidations: u64,
    /// Of the failures, addresses placed from the build ID and file offset
    /// the kernel recorded, in a file found here
    /// ([`CaptureCache::from_build_ids`]; those in a file known by its
    /// build ID alone stay failures).
    #[serde(default)]
    pub by_build_id: u64,
}

impl CaptureStats {
    /// Cache hits among the addresses normalized, 0 to 1 (`None` before any).
    pub fn hit_rate(&self) -> Option<f64> {
        let n = self.normalized + self.cache_hits;
        (n > 0).then(|| self.cache_hits as f64 / n as f64)
    }
}

/// A file seen at capture, kept open for symbolization.
#[derive(Debug)]
pub struct CapturedFile {
    name: Option<PathBuf>,
    /// Device and inode, as its mapping showed them.
    pub(crate) dev: (u32, u32),
    pub(crate) inode: u64,
    build_id: Option<BuildId>,
    /// `Err`: why it is not kept open.
    kept: Result<File, String>,
}

impl CapturedFile {
    /// The name the process mapped it by (as its maps file shows it).
    pub fn name(&self) -> Option<&Path> {
        self.name.as_deref()
    }

    /// Its ELF build ID, when it has one and could be read at capture.
    pub fn build_id(&self) -> Option<BuildId> {
        self.build_id
    }

    /// A path that opens this file now: the descriptor kept since capture
    /// (`/proc/self/fd/N`), or else its name, if that is still the same
    /// inode. `Err`: why neither works.
    pub fn path(&self) -> Result<PathBuf, String> {
        use std::os::unix::fs::MetadataExt;
        let why = match &self.kept {
            Ok(f) => return Ok(PathBuf::from(format!("/proc/self/fd/{}", f.as_raw_fd()))),
            Err(why) => why,
        };
        match &self.name {
            Some(n) if std::fs::metadata(n).is_ok_and(|m| m.is_file() && m.ino() == self.inode) => {
                Ok(n.clone())
            }
            _ => Err(format!("{why}, and its name no longer leads to it")),
        }
    }
}

/// Whether two build IDs are the same, one of them maybe zero-padded (the
/// kernel's stack maps hold 20 bytes whatever the ID's length).
fn same_build_id(a: &BuildId, b: &BuildId) -> bool {
    fn trim(b: &[u8]) -> &[u8] {
        &b[..b.iter().rposition(|&x| x != 0).map_or(0, |i| i + 1)]
    }
    trim(a.as_bytes()) == trim(b.as_bytes())
}

/// A cached executable mapping of a process.
#[derive(Clone, Copy, Debug)]
struct Range {
    start: u64,
    end: u64,
    /// File offset of `start`.
    offset: u64,
    kind: RangeKind,
}

#[derive(Clone, Copy, Debug)]
enum RangeKind {
    File(FileId),
    Vdso,
    Anonymous,
}

impl Range {
    fn place(&self, addr: u64) -> Place {
        let offset = addr - self.start + self.offset;
        match self.kind {
            RangeKind::File(file) => Place::File { file, offset },
            RangeKind::Vdso => Place::Vdso {
                offset,
                size: self.end - self.start,
            },
            RangeKind::Anonymous => Place::Anonymous,
        }
    }
}

/// How the cache notices that a process's address space is another one.
enum Pin {
    /// `/proc/<pid>/maps`, opened before the mappings were read.
    Maps(File),
    /// Not exec'd since it was forked: its `PF_FORKNOEXEC` flag.
    ForkedNoExec,
}

impl Pin {
    /// Taken before `pid`'s mappings are read. `Err`: it is gone already.
    fn take(pid: u32) -> io::Result<Self> {
        match forked_without_exec(pid) {
            Some(true) => Ok(Pin::ForkedNoExec),
            Some(false) => File::open(format!("/proc/{pid}/maps")).map(Pin::Maps),
            None => Err(io::Error::from_raw_os_error(libc::ESRCH)),
        }
    }

    /// Whether `pid`'s address space is still the one the pin was taken on.
    fn holds(&self, pid: u32) -> bool {
        match self {
            // One byte of the first line: the kernel reads nothing for an
            // address space that is gone.
            Pin::Maps(f) => f.read_at(&mut [0u8; 1], 0).is_ok_and(|n| n == 1),
            Pin::ForkedNoExec => forked_without_exec(pid) == Some(true),
        }
    }
}

/// What the cache keeps about one process.
struct Process {
    pin: Pin,
    /// Sorted by start, not overlapping.
    ranges: Vec<Range>,
    /// The round its pin was last found holding.
    checked: u64,
    last_used: u64,
}

impl Process {
    fn find(&self, addr: u64) -> Option<&Range> {
        let i = self.ranges.partition_point(|r| r.end <= addr);
        self.ranges.get(i).filter(|r| r.start <= addr)
    }

    /// Adds `r`, dropping cached ranges it overlaps (they were unmapped).
    fn insert(&mut self, r: Range) {
        self.ranges.retain(|o| o.end <= r.start || r.end <= o.start);
        let i = self.ranges.partition_point(|o| o.start < r.start);
        self.ranges.insert(i, r);
    }
}

/// Normalizes code addresses of processes as they are captured, caching
/// each process's executable mappings (see the module docs).
pub struct CaptureCache {
    normalizer: Normalizer,
    processes: HashMap<u32, Process>,
    files: Vec<CapturedFile>,
    by_inode: HashMap<(u32, u32, u64), FileId>,
    kept_files: usize,
    /// The file of each build ID asked of [`Self::from_build_ids`].
    by_build_id: HashMap<BuildId, FileId>,
    /// Files that may have build IDs asked for, and theirs once read.
    candidates: Vec<(PathBuf, Option<Option<BuildId>>)>,
    round: u64,
    clock: u64,
    stats: CaptureStats,
}

impl Default for CaptureCache {
    fn default() -> Self {
        Self::new(Backend::Auto)
    }
}

impl CaptureCache {
    /// A cache whose misses read VMAs with `backend`.
    pub fn new(backend: Backend) -> Self {
        Self {
            // Caching is done here, where it can be checked against the
            // address space; build IDs are read once per file, not per
            // process, from the descriptor kept for it.
            normalizer: Normalizer::new(Options {
                backend,
                build_ids: false,
                cache: false,
                keep_maps_open: true,
            }),
            processes: HashMap::new(),
            files: Vec::new(),
            by_inode: HashMap::new(),
            kept_files: 0,
            by_build_id: HashMap::new(),
            candidates: Vec::new(),
            round: 1,
            clock: 0,
            stats: CaptureStats::default(),
        }
    }

    /// Starts a round: the next address of each process first checks that
    /// the process's address space is the one its mappings came from.
    pub fn new_round(&mut self) {
        self.round += 1;
    }

    /// What it did so far.
    pub fn stats(&self) -> CaptureStats {
        self.stats
    }

    /// How often its normalizer went to the kernel so far.
    pub fn kernel_calls(&self) -> super::KernelCalls {
        self.normalizer.kernel_calls()
    }

    /// The file of a [`Place::File`].
    pub fn file(&self, id: FileId) -> Option<&CapturedFile> {
        self.files.get(id.0 as usize)
    }

    /// Normalizes code addresses of process `pid` (only executable
    /// mappings count), in order. Never fails: an address that cannot be
    /// normalized is [`Place::Unknown`] and counted in
    /// [`CaptureStats::failures`].
    ///
    /// ```
    /// use bpfmux::normalize::capture::{CaptureCache, Place};
    ///
    /// fn code() {}
    /// let addr = code as *const () as u64;
    /// let mut cache = CaptureCache::default();
    /// let frames = cache.normalize(std::process::id(), &[addr, addr + 1]);
    /// let Place::File { file, offset } = frames[0].place else { panic!("{frames:?}") };
    /// assert!(cache.file(file).unwrap().path().is_ok());
    /// assert!(matches!(frames[1].place, Place::File { offset: o, .. } if o == offset + 1));
    /// ```
    pub fn normalize(&mut self, pid: u32, addrs: &[u64]) -> Vec<Frame> {
        self.clock += 1;
        let mut out: Vec<Frame> = addrs
            .iter()
            .map(|&addr| Frame {
                addr,
                place: Place::Unknown,
            })
            .collect();
        self.check(pid);
        // Indices into `addrs` of the addresses no cached mapping covers.
        let mut misses: Vec<usize> = Vec::new();
        match self.processes.get_mut(&pid) {
            Some(p) => {
                p.last_used = self.clock;
                for (i, f) in out.iter_mut().enumerate() {
                    match p.find(f.addr) {
                        Some(r) => f.place = r.place(f.addr),
                        None => misses.push(i),
                    }
                }
            }
            None => misses.extend(0..addrs.len()),
        }
        self.stats.cache_hits += (addrs.len() - misses.len()) as u64;
        if misses.is_empty() {
            return out;
        }
        if !self.processes.contains_key(&pid) && !self.start(pid) {
            self.stats.failures += misses.len() as u64;
            return out;
        }
        let asked: Vec<u64> = misses.iter().map(|&i| addrs[i]).collect();
        match self.normalizer.normalize(pid, &asked, VmaFilter::EXEC) {
            Ok(n) => {
                self.stats.normalized += asked.len() as u64;
                let ranges: Vec<Range> = n.mappings.iter().map(|m| self.range(pid, m)).collect();
                if let Some(p) = self.processes.get_mut(&pid) {
                    for r in &ranges {
                        p.insert(*r);
                    }
                }
                for (&i, a) in misses.iter().zip(&n.addrs) {
                    out[i].place = a
                        .resolved
                        .and_then(|r| ranges.get(r.mapping))
                        .map_or(Place::Unmapped, |r| r.place(a.addr));
                }
            }
            Err(_) => {
                self.stats.failures += asked.len() as u64;
                self.drop_process(pid);
            }
        }
        out
    }

    /// Names files that frames given by build ID may be in (see the module
    /// docs): each is read only when a build ID is not found otherwise.
    pub fn add_candidates(&mut self, paths: impl IntoIterator<Item = PathBuf>) {
        for p in paths {
            if !self.candidates.iter().any(|(c, _)| *c == p) {
                self.candidates.push((p, None));
            }
        }
    }

    /// Places the [`Place::Unknown`] frames of `frames` from `bid`, the same
    /// stack as the kernel recorded it by build ID and file offset (innermost
    /// first, as `frames`; frames past its end stay unknown).
    pub fn from_build_ids(&mut self, frames: &mut [Frame], bid: &[BuildIdFrame]) {
        for (f, b) in frames.iter_mut().zip(bid) {
            if f.place != Place::Unknown {
                continue;
            }
            if let BuildIdFrame::File { build_id, offset } = *b {
                let file = self.file_by_build_id(build_id);
                f.place = Place::File { file, offset };
                // Named here only if the file is: else it stays a failure
                // (an address now; its build ID kept for a recording).
                if self.files[file.0 as usize].name.is_some() {
                    self.stats.by_build_id += 1;
                }
            }
        }
    }

    /// The file of `id`: one seen, else a candidate with that build ID
    /// (opened and kept), else one known by its build ID alone.
    fn file_by_build_id(&mut self, id: BuildId) -> FileId {
        if let Some(&f) = self.by_build_id.get(&id) {
            return f;
        }
        let seen = self
            .files
            .iter()
            .position(|f| f.build_id.is_some_and(|b| same_build_id(&b, &id)));
        let f = match seen {
            Some(i) => FileId(i as u32),
            None => self.candidate_file(id).unwrap_or_else(|| {
                self.push_file(CapturedFile {
                    name: None,
                    dev: (0, 0),
                    inode: 0,
                    build_id: Some(id),
                    kept: Err(
                        "the process was gone, and no file seen here has its build ID".into(),
                    ),
                })
            }),
        };
        self.by_build_id.insert(id, f);
        f
    }

    /// The candidate file with build ID `id`, opened and added.
    fn candidate_file(&mut self, id: BuildId) -> Option<FileId> {
        use std::os::unix::fs::MetadataExt;
        for (path, known) in &mut self.candidates {
            if known.is_none() {
                *known = Some(
                    File::open(&*path)
                        .ok()
                        .and_then(|f| read_build_id(&f).ok().flatten()),
                );
            }
            if !known.flatten().is_some_and(|b| same_build_id(&b, &id)) {
                continue;
            }
            let Ok(file) = File::open(&*path) else {
                continue;
            };
            let Ok(meta) = file.metadata() else {
                continue;
            };
            let dev = meta.dev();
            let key = (libc::major(dev), libc::minor(dev), meta.ino());
            if let Some(&f) = self.by_inode.get(&key) {
                return Some(f);
            }
            let name = Some(path.clone());
            let kept = if self.kept_files >= MAX_KEPT_FILES {
                Err(format!("more than {MAX_KEPT_FILES} files seen"))
            } else {
                Ok(file)
            };
            self.kept_files += usize::from(kept.is_ok());
            let f = self.push_file(CapturedFile {
                name,
                dev: (key.0, key.1),
                inode: key.2,
                build_id: Some(id),
                kept,
            });
            self.by_inode.insert(key, f);
            return Some(f);
        }
        None
    }

    fn push_file(&mut self, f: CapturedFile) -> FileId {
        let id = FileId(self.files.len() as u32);
        self.files.push(f);
        id
    }

    /// Drops what is kept about `pid` (its mappings; the files stay).
    pub fn forget(&mut self, pid: u32) {
        self.drop_process(pid);
    }

    fn drop_process(&mut self, pid: u32) {
        self.processes.remove(&pid);
        self.normalizer.forget(pid);
    }

    /// Once per round: drops `pid`'s mappings if its address space changed.
    fn check(&mut self, pid: u32) {
        let round = self.round;
        let Some(p) = self.processes.get_mut(&pid) else {
            return;
        };
        if p.checked == round {
            return;
        }
        if p.pin.holds(pid) {
            p.checked = round;
            return;
        }
        self.stats.invalidations += 1;
        self.drop_process(pid);
    }

    /// Pins `pid` before its first mappings are read; false if it is gone.
    fn start(&mut self, pid: u32) -> bool {
        let Ok(pin) = Pin::take(pid) else {
            return false;
        };
        // The pin is the maps file the normalizer reads: it gets a copy of
        // the descriptor instead of opening the file again.
        if let Pin::Maps(maps) = &pin {
            if let Ok(copy) = maps.try_clone() {
                self.normalizer.keep_maps(pid, copy);
            }
        }
        if self.processes.len() >= MAX_PROCESSES {
            if let Some(old) = least_recently_used(&self.processes, |p| p.last_used) {
                self.drop_process(old);
            }
        }
        self.processes.insert(
            pid,
            Process {
                pin,
                ranges: Vec::new(),
                checked: self.round,
                last_used: self.clock,
            },
        );
        true
    }

    /// The cached form of mapping `m` of `pid`, its file opened if new.
    fn range(&mut self, pid: u32, m: &Mapping) -> Range {
        let kind = if m.is_vdso() {
            RangeKind::Vdso
        } else if m.is_file_backed() {
            RangeKind::File(self.file_of(pid, m))
        } else {
            RangeKind::Anonymous
        };
        Range {
            start: m.start,
            end: m.end,
            offset: m.offset,
            kind,
        }
    }

    fn file_of(&mut self, pid: u32, m: &Mapping) -> FileId {
        let key = (m.dev_major, m.dev_minor, m.inode);
        if let Some(&id) = self.by_inode.get(&key) {
            return id;
        }
        let kept = if self.kept_files >= MAX_KEPT_FILES {
            Err(format!("more than {MAX_KEPT_FILES} files seen"))
        } else {
            open_mapped_file(pid, m).ok_or_else(|| "the mapped file could not be opened".into())
        };
        let build_id = kept
            .as_ref()
            .ok()
            .and_then(|f| read_build_id(f).ok().flatten());
        self.kept_files += usize::from(kept.is_ok());
        let id = FileId(self.files.len() as u32);
        self.files.push(CapturedFile {
            name: m.name.clone(),
            dev: (m.dev_major, m.dev_minor),
            inode: m.inode,
            build_id,
            kept,
        });
        self.by_inode.insert(key, id);
        id
    }
}

/// The files process `pid` (a number, or `self`) maps executable, by the
/// paths its maps file shows (empty when it cannot be read).
pub(crate) fn exec_files(pid: &str) -> Vec<PathBuf> {
    let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = maps
        .lines()
        .filter_map(|l| {
            let mut f = l.splitn(6, ' ');
            let perms = f.nth(1)?;
            let path = f.nth(3)?.trim_start();
            (perms.contains('x') && path.starts_with('/') && !path.ends_with(" (deleted)"))
                .then(|| PathBuf::from(path))
        })
        .collect();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::process::{Child, Command, Stdio};

    /// A process of ours that waits for a line on its standard input, then
    /// runs `then` (in the shell): killed on drop.
    struct Waiting(Child);

    impl Waiting {
        fn start(then: &str) -> Self {
            let c = Command::new("/bin/sh")
                .args(["-c", &format!("read x; {then}")])
                .stdin(Stdio::piped())
                .spawn()
                .unwrap();
            let me = Self(c);
            // Until the shell waits in `read`, its libraries all mapped.
            for _ in 0..1000 {
                if me.waiting() && me.code_addrs().len() >= 2 {
                    return me;
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            panic!("the shell never started");
        }

        /// Sleeping (state `S`): blocked in `read` once started.
        fn waiting(&self) -> bool {
            let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid()));
            stat.ok()
                .and_then(|s| Some(s[s.rfind(')')? + 1..].split_whitespace().next()? == "S"))
                .unwrap_or(false)
        }

        fn pid(&self) -> u32 {
            self.0.id()
        }

        /// An address in each of its executable file mappings.
        fn code_addrs(&self) -> Vec<(u64, String)> {
            let maps =
                std::fs::read_to_string(format!("/proc/{}/maps", self.pid())).unwrap_or_default();
            maps.lines()
                .filter_map(|l| {
                    let f: Vec<&str> = l.split_whitespace().collect();
                    if f.len() < 6 || !f[1].contains('x') || !f[5].starts_with('/') {
                        return None;
                    }
                    let (s, e) = f[0].split_once('-')?;
                    let (s, e) = (
                        u64::from_str_radix(s, 16).ok()?,
                        u64::from_str_radix(e, 16).ok()?,
                    );
                    Some((s + (e - s) / 2, f[5].to_string()))
                })
                .collect()
        }

        fn go(&mut self) {
            let mut stdin = self.0.stdin.take().unwrap();
            writeln!(stdin, "go").unwrap();
        }
    }

    impl Drop for Waiting {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    fn file_name(c: &CaptureCache, f: &Frame) -> Option<PathBuf> {
        match f.place {
            Place::File { file, .. } => c.file(file)?.name().map(Path::to_path_buf),
            _ => None,
        }
    }

    #[test]
    fn second_address_in_a_mapping_is_a_hit_without_system_calls() {
        let w = Waiting::start("exit 0");
        let (addr, name) = w.code_addrs()[0].clone();
        let mut c = CaptureCache::default();
        let first = c.normalize(w.pid(), &[addr]);
        assert_eq!(file_name(&c, &first[0]), Some(PathBuf::from(&name)));
        assert_eq!(
            c.stats(),
            CaptureStats {
                normalized: 1,
                ..Default::default()
            }
        );
        let calls = c.kernel_calls();
        assert_eq!(calls.opens, 0, "the normalizer reads the pin's maps file");
        // Same round: no check of the pin either.
        let again = c.normalize(w.pid(), &[addr + 1, addr]);
        assert_eq!(c.kernel_calls(), calls, "a hit asks the kernel nothing");
        assert_eq!((c.stats().normalized, c.stats().cache_hits), (1, 2));
        let Place::File { offset, file } = first[0].place else {
            panic!("{first:?}")
        };
        assert_eq!(again[1].place, first[0].place);
        assert_eq!(
            again[0].place,
            Place::File {
                file,
                offset: offset + 1
            }
        );
        // A new round checks the pin (not through the normalizer) and hits.
        c.new_round();
        c.normalize(w.pid(), &[addr]);
        assert_eq!(c.kernel_calls(), calls);
        assert_eq!(c.stats().cache_hits, 3);
    }

    #[test]
    fn an_address_outside_the_cached_mappings_asks_the_kernel() {
        let w = Waiting::start("exit 0");
        let addrs = w.code_addrs();
        assert!(addrs.len() >= 2, "sh and its libc: {addrs:?}");
        let mut c = CaptureCache::default();
        c.normalize(w.pid(), &[addrs[0].0]);
        let f = c.normalize(w.pid(), &[addrs[1].0, 8]);
        assert_eq!(file_name(&c, &f[0]), Some(PathBuf::from(&addrs[1].1)));
        assert_eq!(f[1].place, Place::Unmapped);
        assert_eq!((c.stats().normalized, c.stats().cache_hits), (3, 0));
    }

    #[test]
    fn an_exec_drops_the_mappings_of_the_old_program() {
        // The shell execs sleep: same pid, another address space.
        let mut w = Waiting::start("exec sleep 30");
        let before = w.code_addrs();
        let mut c = CaptureCache::default();
        let f = c.normalize(w.pid(), &[before[0].0]);
        assert!(matches!(f[0].place, Place::File { .. }), "{f:?}");
        w.go();
        let mut after = Vec::new();
        for _ in 0..400 {
            after = w.code_addrs();
            if after.iter().any(|(_, n)| n.contains("sleep")) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let (addr, name) = after
            .iter()
            .find(|(_, n)| n.contains("sleep"))
            .cloned()
            .expect("sleep runs");
        c.new_round();
        let f = c.normalize(w.pid(), &[addr]);
        assert_eq!(c.stats().invalidations, 1);
        assert_eq!(file_name(&c, &f[0]), Some(PathBuf::from(name)));
        // An address only the old program had mapped is not answered from
        // its mappings any more.
        let old = before[0].0;
        if !after.iter().any(|(a, _)| *a == old) {
            let f = c.normalize(w.pid(), &[old]);
            assert_ne!(file_name(&c, &f[0]), Some(PathBuf::from(&before[0].1)));
        }
    }

    #[test]
    fn a_process_gone_is_a_failure_and_dropped() {
        let mut w = Waiting::start("exit 0");
        let (addr, _) = w.code_addrs()[0];
        let (other, _) = w.code_addrs()[1];
        let pid = w.pid();
        let mut c = CaptureCache::default();
        let kept = c.normalize(pid, &[addr]);
        w.go();
        w.0.wait().unwrap();
        c.new_round();
        // The cached mapping is not used: the pin says the process is gone.
        let f = c.normalize(pid, &[addr, other]);
        assert_eq!(
            f.iter().map(|f| f.place).collect::<Vec<_>>(),
            [Place::Unknown; 2]
        );
        let s = c.stats();
        assert_eq!((s.normalized, s.failures, s.invalidations), (1, 2, 1));
        assert!(!c.processes.contains_key(&pid), "dropped from the cache");
        // What was captured before stays usable: its file is kept open.
        let Place::File { file, .. } = kept[0].place else {
            panic!("{kept:?}")
        };
        assert!(c.file(file).unwrap().path().is_ok());
        // A pid that never existed fails the same way.
        let f = c.normalize(u32::MAX - 1, &[addr]);
        assert_eq!(f[0].place, Place::Unknown);
        assert_eq!(c.stats().failures, 3);
    }

    #[test]
    fn ranges_replace_the_ones_they_overlap() {
        let r = |start, end| Range {
            start,
            end,
            offset: 0,
            kind: RangeKind::Anonymous,
        };
        let mut p = Process {
            pin: Pin::ForkedNoExec,
            ranges: vec![],
            checked: 0,
            last_used: 0,
        };
        p.insert(r(0x3000, 0x4000));
        p.insert(r(0x1000, 0x2000));
        p.insert(r(0x1800, 0x3800));
        let got: Vec<_> = p.ranges.iter().map(|r| (r.start, r.end)).collect();
        assert_eq!(got, [(0x1800, 0x3800)]);
        assert!(p.find(0x1800).is_some() && p.find(0x37ff).is_some());
        assert!(p.find(0x17ff).is_none() && p.find(0x3800).is_none());
    }

    #[test]
    fn hit_rate() {
        let mut s = CaptureStats::default();
        assert_eq!(s.hit_rate(), None);
        s.normalized = 1;
        s.cache_hits = 3;
        assert_eq!(s.hit_rate(), Some(0.75));
    }

    #[test]
    fn frames_of_a_gone_process_are_placed_by_build_id() {
        let exe = PathBuf::from("/usr/bin/true");
        let id = read_build_id(&File::open(&exe).unwrap()).unwrap().unwrap();
        // The kernel's 20 bytes, zero-padded for a shorter ID.
        let mut raw = [0u8; 20];
        raw[..id.as_bytes().len()].copy_from_slice(id.as_bytes());
        let kernel_id = BuildId::new(&raw).unwrap();
        let other = BuildId::new(&[0xab; 20]).unwrap();
        let mut c = CaptureCache::default();
        c.add_candidates([PathBuf::from("/nonexistent/x"), exe.clone(), exe.clone()]);
        let unknown = |addr| Frame {
            addr,
            place: Place::Unknown,
        };
        let mut frames = [unknown(0x10), unknown(0x20), unknown(0x30), unknown(0x40)];
        let bid = [
            BuildIdFrame::File {
                build_id: kernel_id,
                offset: 0x1234,
            },
            BuildIdFrame::Addr(0x20),
            BuildIdFrame::File {
                build_id: other,
                offset: 0x99,
            },
        ];
        c.from_build_ids(&mut frames, &bid);
        let Place::File { file, offset } = frames[0].place else {
            panic!("{frames:?}")
        };
        assert_eq!(offset, 0x1234);
        let f = c.file(file).unwrap();
        assert_eq!(f.name(), Some(exe.as_path()));
        assert!(f.path().is_ok());
        // An address alone, and frames past the recorded ones, stay unknown.
        assert_eq!(frames[1].place, Place::Unknown);
        assert_eq!(frames[3].place, Place::Unknown);
        // No file here has the other build ID: known by it alone.
        let Place::File {
            file: o,
            offset: 0x99,
        } = frames[2].place
        else {
            panic!("{frames:?}")
        };
        let f = c.file(o).unwrap();
        assert_eq!((f.name(), f.build_id()), (None, Some(other)));
        assert!(f.path().is_err());
        // Only the frame in a file found here counts as placed.
        assert_eq!(c.stats().by_build_id, 1);
        // The same build ID again: the same file.
        let mut again = [unknown(0x50)];
        c.from_build_ids(&mut again, &bid[..1]);
        assert!(matches!(again[0].place, Place::File { file: f, .. } if f == file));
    }
}
