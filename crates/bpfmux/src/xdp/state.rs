//! What bpfmux has attached, kept in bpffs so that `list` and `detach` work
//! from any later process and the attachment outlives the one that made it.
//!
//! ```text
//! <bpffs>/bpfmux/xdp/                      lock (flock) for every change
//!   netns-<cookie>/<ifindex>/              one interface (ifindex is per netns)
//!     link                                 the XDP bpf_link: owns the attachment
//!     gen-<head prog id>/                  one generation of the set
//!       state                              array map: the set's description (JSON)
//!       prog-<i>, link-<i>, head ...       the engine's objects, pinned
//! ```
//!
//! A new set is written as a new generation directory, then the link is
//! switched to its head program in one bpf_link update: that update is the
//! commit. The valid generation is always the one named after the program
//! the link runs, so a crash between the steps leaves at worst an orphan
//! directory, removed by the next change.

use std::fs;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use super::{bad_state, AtStep as _, Context, Error, Result};
use libbpf_rs::{MapCore, MapFlags, MapHandle, MapType};
use serde::{Deserialize, Serialize};

use super::action::ActionSet;
use super::program::Origin;
use super::EngineKind;
use super::Mode;
use crate::sys::bpf_ops::{self, LinkInfo};

/// Bump when the record's meaning changes; older records are reported, not
/// misread.
pub const FORMAT: u32 = 1;
const BPF_FS_MAGIC: i64 = 0xcafe4a11;
/// Room for the JSON of a full set with long paths.
const STATE_VALUE_SIZE: u32 = 32 * 1024;
const STATE_MAP_NAME: &str = "bpfmux_xdp_set";

/// The set attached to one interface, as `list` shows it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SetRecord {
    /// The record's format version.
    pub format: u32,
    /// The interface's index.
    pub ifindex: u32,
    /// Interface name when the set was attached.
    pub ifname: String,
    /// Where the kernel runs the set.
    pub mode: Mode,
    /// The engine that built it.
    pub engine: EngineKind,
    /// The program the XDP link runs (dispatcher, chain head, or the one
    /// program).
    pub head_prog_id: u32,
    /// The programs, in run order.
    pub progs: Vec<ProgRecord>,
}

/// One program of a set, in run order.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ProgRecord {
    /// The program's name.
    pub name: String,
    /// Its id in the kernel.
    pub prog_id: u32,
    /// Return codes after which the next program runs.
    pub chain_on: ActionSet,
    /// Where it was loaded from.
    pub origin: Origin,
}

/// bpffs root: `$BPFMUX_BPFFS` or /sys/fs/bpf. It must really be bpffs:
/// pins on another filesystem fail with obscure errors.
pub fn bpffs_root() -> Result<PathBuf> {
    let root = std::env::var_os("BPFMUX_BPFFS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/sys/fs/bpf"));
    let c = std::ffi::CString::new(root.as_os_str().as_encoded_bytes())
        .map_err(|_| Error::Invalid("bpffs path contains NUL".into()))?;
    // SAFETY: zeroed statfs is a valid out-buffer.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: NUL-terminated path, writable buffer.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        let e = io::Error::last_os_error();
        bad_state!(
            "bpffs at {}: {e} (mount it: mount -t bpf bpf {})",
            root.display(),
            root.display()
        );
    }
    if st.f_type as i64 != BPF_FS_MAGIC {
        bad_state!(
            "{} is not a bpffs mount; bpfmux keeps its XDP state pinned there \
             (mount -t bpf bpf {}, or set BPFMUX_BPFFS to a bpffs mount)",
            root.display(),
            root.display()
        );
    }
    Ok(root)
}

/// The calling thread's network namespace cookie (never reused, unlike
/// ifindexes, which every namespace numbers from 1).
fn netns_cookie() -> Result<u64> {
    const SO_NETNS_COOKIE: libc::c_int = 71;
    // SAFETY: plain socket(2).
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error()).context("socket for the netns cookie");
    }
    // SAFETY: we own fd.
    let sock = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    let mut cookie = 0u64;
    let mut len = std::mem::size_of::<u64>() as libc::socklen_t;
    // SAFETY: valid buffer and length.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_NETNS_COOKIE,
            (&mut cookie as *mut u64).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error()).context("getsockopt(SO_NETNS_COOKIE)");
    }
    Ok(cookie)
}

/// bpfmux's XDP state for the calling thread's network namespace.
pub struct Store {
    /// `<bpffs>/bpfmux/xdp`: never removed, holds the lock.
    top: PathBuf,
    /// `<top>/netns-<cookie>`
    netns: PathBuf,
}

/// Held while changing state; released on drop (close).
pub struct Lock(#[allow(dead_code)] fs::File);

impl Store {
    pub fn open() -> Result<Self> {
        let top = bpffs_root()?.join("bpfmux").join("xdp");
        let netns = top.join(format!("netns-{}", netns_cookie()?));
        Ok(Self { top, netns })
    }

    /// Exclusive lock over every bpfmux XDP change on this machine.
    pub fn lock(&self) -> Result<Lock> {
        fs::create_dir_all(&self.top).with_context(|| format!("create {}", self.top.display()))?;
        let dir =
            fs::File::open(&self.top).with_context(|| format!("open {}", self.top.display()))?;
        // SAFETY: valid descriptor.
        if unsafe { libc::flock(dir.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(io::Error::last_os_error())
                .with_context(|| format!("lock {}", self.top.display()));
        }
        Ok(Lock(dir))
    }

    pub fn iface(&self, ifindex: u32) -> IfaceDir {
        IfaceDir {
            path: self.netns.join(ifindex.to_string()),
            ifindex,
        }
    }

    /// Interfaces of this namespace that have bpfmux state, by ifindex.
    pub fn ifaces(&self) -> Result<Vec<IfaceDir>> {
        let rd = match fs::read_dir(&self.netns) {
            Ok(rd) => rd,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(vec![]),
            Err(e) => return Err(e).with_context(|| format!("read {}", self.netns.display())),
        };
        let mut out = vec![];
        for ent in rd {
            let ent = ent?;
            if let Some(ifindex) = ent.file_name().to_str().and_then(|s| s.parse().ok()) {
                out.push(self.iface(ifindex));
            }
        }
        out.sort_by_key(|d| d.ifindex);
        Ok(out)
    }

    /// Removes the namespace directory once it holds nothing.
    pub fn tidy(&self) {
        let _ = fs::remove_dir(&self.netns);
    }

    /// Interfaces with bpfmux state in every network namespace, including
    /// namespaces that are gone (their links are defunct).
    pub fn ifaces_everywhere(&self) -> Result<Vec<IfaceDir>> {
        let rd = match fs::read_dir(&self.top) {
            Ok(rd) => rd,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(vec![]),
            Err(e) => return Err(e).with_context(|| format!("read {}", self.top.display())),
        };
        let mut out = vec![];
        for ns in rd {
            let ns = ns?.path();
            if !ns.is_dir() {
                continue;
            }
            for ent in fs::read_dir(&ns).with_context(|| format!("read {}", ns.display()))? {
                let ent = ent?;
                if let Some(ifindex) = ent.file_name().to_str().and_then(|s| s.parse().ok()) {
                    out.push(IfaceDir {
                        path: ent.path(),
                        ifindex,
                    });
                }
            }
        }
        Ok(out)
    }

    /// Removes empty namespace directories (of any namespace).
    pub fn tidy_everywhere(&self) {
        if let Ok(rd) = fs::read_dir(&self.top) {
            for ns in rd.flatten() {
                let _ = fs::remove_dir(ns.path());
            }
        }
    }
}

/// One interface's state directory.
pub struct IfaceDir {
    pub path: PathBuf,
    pub ifindex: u32,
}

/// bpfmux's part of a libxdp dispatcher: the record of the programs bpfmux
/// added (libxdp's own pins under `<bpffs>/xdp` hold the programs).
const LIBXDP_STATE: &str = "libxdp-state";

/// The committed state of an interface.
pub struct Current {
    pub link: OwnedFd,
    pub link_info: LinkInfo,
    /// The generation's record; an error when it is missing or unreadable.
    pub record: Result<SetRecord>,
    pub generation: PathBuf,
}

impl IfaceDir {
    pub fn link_path(&self) -> PathBuf {
        self.path.join("link")
    }

    pub fn generation_path(&self, head_prog_id: u32) -> PathBuf {
        self.path.join(format!("gen-{head_prog_id}"))
    }

    /// The committed state, or None when nothing is pinned here.
    pub fn current(&self) -> Result<Option<Current>> {
        let link_path = self.link_path();
        let link = match bpf_ops::get_pinned(&link_path) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("open {}", link_path.display())),
        };
        let link_info = bpf_ops::link_info(link.as_fd())
            .with_context(|| format!("link info of {}", link_path.display()))?;
        let generation = self.generation_path(link_info.prog_id);
        let record = read_record(&generation);
        Ok(Some(Current {
            link,
            link_info,
            record,
            generation,
        }))
    }

    /// Removes every generation directory but `keep` (crash leftovers and
    /// superseded sets). Unpinning drops the kernel objects nothing else
    /// holds: old dispatchers, their freplace links, replaced programs.
    pub fn prune(&self, keep: Option<&Path>) -> Result<()> {
        let rd = match fs::read_dir(&self.path) {
            Ok(rd) => rd,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e).with_context(|| format!("read {}", self.path.display())),
        };
        for ent in rd {
            let p = ent?.path();
            let is_gen = p
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("gen-"));
            if is_gen && Some(p.as_path()) != keep {
                fs::remove_dir_all(&p).with_context(|| format!("remove {}", p.display()))?;
            }
        }
        Ok(())
    }

    /// The record of bpfmux's programs in libxdp's dispatcher here; None
    /// when bpfmux added none.
    pub fn libxdp_record(&self) -> Option<Result<SetRecord>> {
        let path = self.path.join(LIBXDP_STATE);
        path.exists().then(|| read_state(&path))
    }

    /// Records (or re-records) bpfmux's programs in libxdp's dispatcher:
    /// written beside the old record, then renamed over it, so a failure
    /// leaves the old one.
    pub fn write_libxdp_record(&self, record: &SetRecord) -> Result<()> {
        fs::create_dir_all(&self.path)
            .with_context(|| format!("create {}", self.path.display()))?;
        let path = self.path.join(LIBXDP_STATE);
        let new = self.path.join(format!("{LIBXDP_STATE}-new")); // bpffs refuses names with dots
        let _ = fs::remove_file(&new); // a crash leftover
        write_state(&new, record)?;
        fs::rename(&new, &path).map_err(|e| {
            let _ = fs::remove_file(&new);
            e.at_step(format!("rename {} to {}", new.display(), path.display()))
        })
    }

    /// Removes the interface's whole directory (after detach).
    pub fn remove(&self) -> Result<()> {
        match fs::remove_dir_all(&self.path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                Err(e).with_context(|| format!("remove {}", self.path.display()))
            }
            _ => Ok(()),
        }
    }
}

/// A generation being written; removed again (with everything pinned in
/// it) unless committed.
pub struct GenerationWriter {
    dir: PathBuf,
    committed: bool,
}

impl GenerationWriter {
    pub fn create(dir: PathBuf) -> Result<Self> {
        // A leftover with this name can only be an uncommitted crash
        // remnant (the head program id is new): clear it.
        if dir.exists() {
            fs::remove_dir_all(&dir).with_context(|| format!("remove stale {}", dir.display()))?;
        }
        fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
        Ok(Self {
            dir,
            committed: false,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn pin(&self, name: &str, fd: &OwnedFd) -> Result<()> {
        let path = self.dir.join(name);
        bpf_ops::pin(fd.as_fd(), &path).with_context(|| format!("pin {}", path.display()))
    }

    pub fn write_record(&self, record: &SetRecord) -> Result<()> {
        write_state(&self.dir.join("state"), record)
    }

    /// The generation is live: keep it.
    pub fn commit(mut self) {
        self.committed = true;
    }
}

impl Drop for GenerationWriter {
    fn drop(&mut self) {
        if !self.committed {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

pub fn read_record(generation: &Path) -> Result<SetRecord> {
    read_state(&generation.join("state"))
}

/// Writes `record` into a new one-entry array map pinned at `path`.
fn write_state(path: &Path, record: &SetRecord) -> Result<()> {
    let json = serde_json::to_vec(record).context("encode state")?;
    let mut value = vec![0u8; STATE_VALUE_SIZE as usize];
    if json.len() + 4 > value.len() {
        bad_state!("state record too large ({} bytes)", json.len());
    }
    value[..4].copy_from_slice(&(json.len() as u32).to_ne_bytes());
    value[4..4 + json.len()].copy_from_slice(&json);
    let opts = libbpf_rs::libbpf_sys::bpf_map_create_opts {
        sz: std::mem::size_of::<libbpf_rs::libbpf_sys::bpf_map_create_opts>() as _,
        ..Default::default()
    };
    let mut map = MapHandle::create(
        MapType::Array,
        Some(STATE_MAP_NAME),
        4,
        STATE_VALUE_SIZE,
        1,
        &opts,
    )
    .context("create state map")?;
    map.update(&0u32.to_ne_bytes(), &value, MapFlags::ANY)
        .context("write state map")?;
    map.pin(path)
        .with_context(|| format!("pin {}", path.display()))
}

fn read_state(path: &Path) -> Result<SetRecord> {
    let map =
        MapHandle::from_pinned_path(path).with_context(|| format!("open {}", path.display()))?;
    let value = map
        .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)
        .with_context(|| format!("read {}", path.display()))?
        .with_context(|| format!("{} is empty", path.display()))?;
    if value.len() < 4 {
        bad_state!("{}: short value", path.display());
    }
    let len = u32::from_ne_bytes([value[0], value[1], value[2], value[3]]) as usize;
    let json = value
        .get(4..4 + len)
        .with_context(|| format!("{}: bad length {len}", path.display()))?;
    let record: SetRecord =
        serde_json::from_slice(json).with_context(|| format!("decode {}", path.display()))?;
    if record.format != FORMAT {
        bad_state!(
            "{} was written by another bpfmux (format {}, this one reads {FORMAT})",
            path.display(),
            record.format
        );
    }
    Ok(record)
}
