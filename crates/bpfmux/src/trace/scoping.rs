//! Which tasks a trace covers, beyond a process ID in the initial pid
//! namespace: a cgroup v2 directory (with every cgroup below it, or that
//! one only), and a pid namespace (process IDs as it numbers them, or every
//! process of it). Checked here, before anything is loaded; decided per call
//! in the BPF program (`pass_filters` in trace.bpf.c):
//!
//! - [`CgroupMatch::Subtree`]: `bpf_current_task_under_cgroup` against the
//!   cgroup's directory, held in a `BPF_MAP_TYPE_CGROUP_ARRAY`. The kernel
//!   compares the task's cgroup with the target's place in the hierarchy,
//!   so no level has to be worked out here (a cgroup namespace or a cgroup2
//!   mount of a sub-hierarchy would make one read from a path wrong).
//! - [`CgroupMatch::Exact`]: `bpf_get_current_cgroup_id` equal to the
//!   directory's inode number (the cgroup v2 id).
//! - [`PidNamespace`]: `bpf_get_ns_current_pid_tgid` with the namespace's
//!   device and inode number: it fails for a task whose own pid namespace
//!   (the one its process ID was made in, its innermost) is another, and
//!   gives the task's IDs in that namespace otherwise.
//!
//! The helpers are in the kernel's tracing helper set
//! (`bpf_tracing_func_proto`, which kprobe programs and fentry/fexit ones,
//! `.multi` and session ones too, fall back to) since Linux 4.9
//! (`bpf_current_task_under_cgroup`) and 5.7 (`bpf_get_ns_current_pid_tgid`):
//! every engine has them on every kernel bpfmux runs on.

use std::ffi::CString;
use std::fmt;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// `statfs` f_type of a cgroup v2 file system.
const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;
/// `statfs` f_type of a cgroup v1 hierarchy.
const CGROUP_SUPER_MAGIC: i64 = 0x0027_e0eb;
/// `statfs` f_type of nsfs (the files under /proc/PID/ns/).
const NSFS_MAGIC: i64 = 0x6e73_6673;
/// `ioctl(fd, NS_GET_NSTYPE)`: `_IO(0xb7, 0x3)`.
const NS_GET_NSTYPE: libc::c_ulong = 0xb703;

/// Why a cgroup or a pid namespace cannot scope a trace. Each message
/// starts with what was given (a path, a process ID): a caller puts its
/// option's name in front.
#[derive(Debug, thiserror::Error)]
pub enum ScopingError {
    /// The path could not be read (missing, no permission, ...).
    #[error("{}: {source}", path.display())]
    Io {
        /// The path as given.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: io::Error,
    },
    /// Not a directory of a cgroup v2 file system.
    #[error("{}: not a cgroup v2 directory ({})", path.display(), where_v2(v2_mount.as_deref()))]
    NotCgroup2 {
        /// The path as given.
        path: PathBuf,
        /// Where cgroup v2 is mounted, if it is.
        v2_mount: Option<PathBuf>,
    },
    /// A directory of a cgroup v1 hierarchy: bpfmux follows cgroup v2 only.
    #[error(
        "{}: a cgroup v1 hierarchy, not a cgroup v2 directory ({})",
        path.display(),
        where_v2(v2_mount.as_deref())
    )]
    CgroupV1 {
        /// The path as given.
        path: PathBuf,
        /// Where cgroup v2 is mounted, if it is.
        v2_mount: Option<PathBuf>,
    },
    /// The cgroup's directory is gone, or another one has its path now.
    #[error("{}: the cgroup (id {id}) was removed", path.display())]
    CgroupGone {
        /// The path as given.
        path: PathBuf,
        /// Its id when it was checked.
        id: u64,
    },
    /// Not a namespace file (those under /proc/PID/ns/, or a bind mount of
    /// one).
    #[error("{}: not a namespace file (e.g. /proc/PID/ns/pid)", path.display())]
    NotNamespace {
        /// The path as given.
        path: PathBuf,
    },
    /// A namespace of another type.
    #[error("{}: a {kind} namespace, not a pid namespace (e.g. /proc/PID/ns/pid)", path.display())]
    NotPidNamespace {
        /// The path as given.
        path: PathBuf,
        /// Its type (`net`, `mnt`, ...).
        kind: &'static str,
    },
    /// The namespace file system's device number does not fit the kernel's
    /// 32-bit device numbers (cannot happen on Linux as it is).
    #[error("{}: its device number {dev:#x} has no kernel encoding", path.display())]
    DeviceNumber {
        /// The path as given.
        path: PathBuf,
        /// The device as `stat` gave it.
        dev: u64,
    },
    /// No process with this ID in the namespace.
    #[error(
        "{pid}: no process with this ID in pid namespace {ns} (a thread ID is not a process ID)"
    )]
    NoSuchProcessInNamespace {
        /// The process ID as the namespace numbers it.
        pid: u32,
        /// The namespace (`pid:[INODE]`).
        ns: String,
    },
    /// No process with this ID (here).
    #[error("{pid}: no such process")]
    NoSuchProcess {
        /// The process ID.
        pid: u32,
    },
}

fn where_v2(mount: Option<&Path>) -> String {
    match mount {
        Some(m) => format!("cgroup v2 is mounted at {}", m.display()),
        None => "cgroup v2 is not mounted: mount -t cgroup2 none /sys/fs/cgroup".into(),
    }
}

fn io_error(path: &Path) -> impl FnOnce(io::Error) -> ScopingError + '_ {
    move |source| ScopingError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Which tasks of a cgroup count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CgroupMatch {
    /// Tasks of the cgroup and of every cgroup below it (a container's
    /// cgroup with its sub-cgroups).
    #[default]
    Subtree,
    /// Tasks of that cgroup only.
    Exact,
}

/// A cgroup v2 directory the trace is limited to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CgroupFilter {
    path: PathBuf,
    id: u64,
    matching: CgroupMatch,
}

impl CgroupFilter {
    /// The cgroup whose directory is `path`, checked: a directory of a
    /// cgroup v2 file system (the errors say why not, and where cgroup v2
    /// is mounted).
    pub fn new(path: &Path, matching: CgroupMatch) -> Result<Self, ScopingError> {
        let meta = std::fs::metadata(path).map_err(io_error(path))?;
        let fs_type = statfs_type(path).map_err(io_error(path))?;
        if fs_type == CGROUP2_SUPER_MAGIC && meta.is_dir() {
            return Ok(Self {
                path: path.to_path_buf(),
                id: meta.ino(),
                matching,
            });
        }
        let v2_mount = cgroup2_mount();
        let path = path.to_path_buf();
        Err(if fs_type == CGROUP_SUPER_MAGIC {
            ScopingError::CgroupV1 { path, v2_mount }
        } else {
            ScopingError::NotCgroup2 { path, v2_mount }
        })
    }

    /// The directory as given.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The cgroup v2 id (the directory's inode number), what
    /// `bpf_get_current_cgroup_id` returns for a task in it.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The cgroup alone, or with the cgroups below it.
    pub fn matching(&self) -> CgroupMatch {
        self.matching
    }

    /// The directory opened for the kernel (`BPF_MAP_TYPE_CGROUP_ARRAY`
    /// takes a descriptor of it), checked to be the cgroup [`Self::new`]
    /// saw.
    pub(crate) fn open_dir(&self) -> Result<OwnedFd, ScopingError> {
        let gone = || ScopingError::CgroupGone {
            path: self.path.clone(),
            id: self.id,
        };
        let dir = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY)
            .open(&self.path)
            .map_err(|e| match e.kind() {
                io::ErrorKind::NotFound => gone(),
                _ => io_error(&self.path)(e),
            })?;
        let meta = dir.metadata().map_err(io_error(&self.path))?;
        if meta.ino() != self.id {
            return Err(gone());
        }
        Ok(dir.into())
    }
}

/// A file system's type (`statfs` f_type) by a path on it.
fn statfs_type(path: &Path) -> io::Result<i64> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // SAFETY: all zeros is a valid statfs; the path is NUL-terminated.
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(c.as_ptr(), &mut fs) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fs.f_type as i64)
}

/// A file system's type (`fstatfs` f_type) by an open file on it.
fn fstatfs_type(f: &File) -> io::Result<i64> {
    // SAFETY: all zeros is a valid statfs; the descriptor is open.
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstatfs(f.as_raw_fd(), &mut fs) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fs.f_type as i64)
}

/// Where cgroup v2 is mounted here (its first mount), if it is.
pub(crate) fn cgroup2_mount() -> Option<PathBuf> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .ok()
        .and_then(|m| cgroup2_mounts(&m).into_iter().next())
}

/// Mount points of cgroup v2 file systems in a mountinfo text (proc(5)),
/// in its order.
pub(crate) fn cgroup2_mounts(mountinfo: &str) -> Vec<PathBuf> {
    mountinfo
        .lines()
        .filter_map(|line| {
            // ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - TYPE SOURCE SUPER
            let (head, tail) = line.split_once(" - ")?;
            let fs_type = tail.split(' ').next()?;
            let mount_point = head.split(' ').nth(4)?;
            (fs_type == "cgroup2").then(|| PathBuf::from(unescape_octal(mount_point)))
        })
        .collect()
}

/// mountinfo's escapes (`\040` for a space, `\011`, `\012`, `\134`).
fn unescape_octal(s: &str) -> std::ffi::OsString {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b.get(i + 1..i + 4).filter(|d| {
            b[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)) && d[0] <= b'3'
        });
        match octal {
            Some(d) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            None => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    std::ffi::OsStr::from_bytes(&out).to_owned()
}

/// A pid namespace the trace is limited to: its processes, or one of them
/// by the process ID the namespace gives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PidNamespace {
    path: PathBuf,
    /// nsfs's device as `stat` gives it (user-space encoding).
    dev: u64,
    ino: u64,
    /// The same device as the kernel encodes it (`bpf_get_ns_current_pid_tgid`).
    kernel_dev: u64,
}

impl PidNamespace {
    /// The pid namespace of a namespace file: /proc/PID/ns/pid, or
    /// /proc/PID/ns/pid_for_children, or a bind mount of one.
    pub fn open(path: &Path) -> Result<Self, ScopingError> {
        let f = File::open(path).map_err(io_error(path))?;
        let not_ns = || ScopingError::NotNamespace {
            path: path.to_path_buf(),
        };
        if fstatfs_type(&f).map_err(io_error(path))? != NSFS_MAGIC {
            return Err(not_ns());
        }
        // SAFETY: an ioctl without an argument on an open descriptor.
        let kind = unsafe { libc::ioctl(f.as_raw_fd(), NS_GET_NSTYPE as _) };
        if kind < 0 {
            return Err(not_ns());
        }
        if kind != libc::CLONE_NEWPID {
            return Err(ScopingError::NotPidNamespace {
                path: path.to_path_buf(),
                kind: namespace_kind(kind),
            });
        }
        let meta = f.metadata().map_err(io_error(path))?;
        let kernel_dev = kernel_dev(meta.dev()).ok_or_else(|| ScopingError::DeviceNumber {
            path: path.to_path_buf(),
            dev: meta.dev(),
        })?;
        Ok(Self {
            path: path.to_path_buf(),
            dev: meta.dev(),
            ino: meta.ino(),
            kernel_dev,
        })
    }

    /// The pid namespace process `pid` (as this process's /proc numbers
    /// it) belongs to: that of a container's process, for one.
    pub fn of_process(pid: u32) -> Result<Self, ScopingError> {
        let path = PathBuf::from(format!("/proc/{pid}/ns/pid"));
        Self::open(&path).map_err(|e| match e {
            ScopingError::Io { source, .. } if source.kind() == io::ErrorKind::NotFound => {
                ScopingError::NoSuchProcess { pid }
            }
            e => e,
        })
    }

    /// The namespace file as given.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The namespace's inode number (`pid:[INODE]` in /proc/PID/ns/pid).
    pub fn inode(&self) -> u64 {
        self.ino
    }

    /// nsfs's device number as the kernel encodes it (not as `stat`
    /// gives it): what `bpf_get_ns_current_pid_tgid` compares.
    pub fn kernel_dev(&self) -> u64 {
        self.kernel_dev
    }

    /// The process whose ID in this namespace is `pid`, by its ID here (in
    /// this process's /proc): one whose own pid namespace this is, as the
    /// BPF program's test needs.
    pub fn process(&self, pid: u32) -> Result<u32, ScopingError> {
        let not_found = || ScopingError::NoSuchProcessInNamespace {
            pid,
            ns: self.to_string(),
        };
        let dir = std::fs::read_dir("/proc").map_err(io_error(Path::new("/proc")))?;
        for entry in dir.flatten() {
            let Some(here) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            // Processes that exit meanwhile, or hide their namespaces, are
            // not it.
            let Ok(ns) = std::fs::metadata(format!("/proc/{here}/ns/pid")) else {
                continue;
            };
            if (ns.dev(), ns.ino()) != (self.dev, self.ino) {
                continue;
            }
            let Ok(status) = std::fs::read_to_string(format!("/proc/{here}/status")) else {
                continue;
            };
            if innermost_nspid(&status) == Some(pid) {
                return Ok(here);
            }
        }
        Err(not_found())
    }
}

impl fmt::Display for PidNamespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pid:[{}]", self.ino)
    }
}

/// The name of a namespace type (`CLONE_NEW*`), as /proc/PID/ns names it.
fn namespace_kind(clone_flag: i32) -> &'static str {
    match clone_flag {
        libc::CLONE_NEWNS => "mnt",
        libc::CLONE_NEWCGROUP => "cgroup",
        libc::CLONE_NEWUTS => "uts",
        libc::CLONE_NEWIPC => "ipc",
        libc::CLONE_NEWUSER => "user",
        libc::CLONE_NEWPID => "pid",
        libc::CLONE_NEWNET => "net",
        0x80 => "time",
        _ => "unknown",
    }
}

/// A device number as `stat` gives it (glibc's encoding) in the kernel's
/// own encoding (`MKDEV`: 12 bits of major, 20 of minor); `None` where it
/// has none.
pub(crate) fn kernel_dev(dev: u64) -> Option<u64> {
    let major = ((dev >> 32) & 0xffff_f000) | ((dev >> 8) & 0xfff);
    let minor = ((dev >> 12) & 0xffff_ff00) | (dev & 0xff);
    (major < 1 << 12 && minor < 1 << 20).then_some((major << 20) | minor)
}

/// The process ID in the innermost pid namespace, from a /proc/PID/status
/// text: the last field of its `NSpid:` line.
pub(crate) fn innermost_nspid(status: &str) -> Option<u32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))?
        .split_whitespace()
        .last()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroup2_mount_points_from_mountinfo() {
        let text = "\
22 1 0:21 / /sys rw,nosuid shared:7 - sysfs sysfs rw
30 22 0:26 / /sys/fs/cgroup ro,nosuid shared:9 - tmpfs tmpfs ro,mode=755
31 30 0:27 / /sys/fs/cgroup/unified rw,nosuid shared:10 - cgroup2 cgroup2 rw
32 30 0:28 / /sys/fs/cgroup/cpu rw shared:11 - cgroup cgroup rw,cpu
40 1 0:40 / /mnt/with\\040space rw - cgroup2 none rw,nsdelegate
41 1 0:41 / /weird rw - cgroup2x none rw
";
        assert_eq!(
            cgroup2_mounts(text),
            [
                PathBuf::from("/sys/fs/cgroup/unified"),
                PathBuf::from("/mnt/with space")
            ]
        );
        assert!(cgroup2_mounts("").is_empty());
        assert!(cgroup2_mounts("garbage without separator\n").is_empty());
        assert_eq!(unescape_octal(r"a\134b\011c\0"), "a\\b\tc\\0");
        assert_eq!(unescape_octal(r"\777"), r"\777");
    }

    #[test]
    fn device_numbers_in_the_kernel_encoding() {
        let glibc = |major: u64, minor: u64| {
            ((major & 0xfff) << 8)
                | ((major & !0xfff) << 32)
                | (minor & 0xff)
                | ((minor & !0xff) << 12)
        };
        // nsfs: an anonymous device, major 0; minors past 255 are where the
        // two encodings part (hosts with many mounts).
        assert_eq!(kernel_dev(glibc(0, 4)), Some(4));
        assert_eq!(kernel_dev(glibc(0, 300)), Some(300));
        assert_ne!(glibc(0, 300), 300);
        assert_eq!(kernel_dev(glibc(8, 1)), Some((8 << 20) | 1));
        assert_eq!(
            kernel_dev(glibc(4095, (1 << 20) - 1)),
            Some(u64::from(u32::MAX))
        );
        assert_eq!(kernel_dev(glibc(4096, 0)), None);
        assert_eq!(kernel_dev(glibc(0, 1 << 20)), None);
    }

    #[test]
    fn innermost_pid_from_status() {
        let status =
            "Name:\ttrigger\nTgid:\t4242\nPid:\t4242\nNSpid:\t4242\t17\t1\nNStgid:\t4242\n";
        assert_eq!(innermost_nspid(status), Some(1));
        assert_eq!(innermost_nspid("NSpid:\t99\n"), Some(99));
        assert_eq!(innermost_nspid("Pid:\t99\n"), None);
        assert_eq!(innermost_nspid("NSpid:\n"), None);
    }

    #[test]
    fn namespace_kinds_by_name() {
        assert_eq!(namespace_kind(libc::CLONE_NEWNET), "net");
        assert_eq!(namespace_kind(libc::CLONE_NEWPID), "pid");
        assert_eq!(namespace_kind(0x80), "time");
        assert_eq!(namespace_kind(1), "unknown");
    }

    /// Paths that are no cgroup v2 directory say what they are, and where
    /// cgroup v2 is mounted.
    #[test]
    fn cgroup_paths_are_checked() {
        let e =
            CgroupFilter::new(Path::new("/nonexistent-bpfmux"), CgroupMatch::Subtree).unwrap_err();
        assert!(
            matches!(&e, ScopingError::Io { source, .. } if source.kind() == io::ErrorKind::NotFound),
            "{e}"
        );
        let v2 = cgroup2_mount();
        for not in ["/proc", "/etc/hostname"] {
            let e = CgroupFilter::new(Path::new(not), CgroupMatch::Exact).unwrap_err();
            assert!(matches!(e, ScopingError::NotCgroup2 { .. }), "{e}");
            let text = e.to_string();
            assert!(
                text.starts_with(&format!("{not}: not a cgroup v2 directory (cgroup v2 ")),
                "{text}"
            );
            match &v2 {
                Some(m) => assert!(text.contains(&format!("mounted at {}", m.display()))),
                None => assert!(text.contains("mount -t cgroup2")),
            }
        }
        let Some(v2) = v2 else {
            eprintln!("skipped: cgroup v2 is not mounted here");
            return;
        };
        let c = CgroupFilter::new(&v2, CgroupMatch::Subtree).unwrap();
        assert_eq!(c.id(), std::fs::metadata(&v2).unwrap().ino());
        assert_eq!(c.matching(), CgroupMatch::Subtree);
        assert!(c.open_dir().is_ok());
        // A file in a cgroup directory is not one.
        let procs = v2.join("cgroup.procs");
        let e = CgroupFilter::new(&procs, CgroupMatch::Subtree).unwrap_err();
        assert!(matches!(e, ScopingError::NotCgroup2 { .. }), "{e}");
        // A cgroup v1 hierarchy, where this host has one.
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let v1 = mounts.lines().find_map(|l| {
            let (head, tail) = l.split_once(" - ")?;
            let mount_point = head.split(' ').nth(4)?;
            tail.starts_with("cgroup ")
                .then(|| PathBuf::from(unescape_octal(mount_point)))
        });
        if let Some(v1) = v1 {
            let e = CgroupFilter::new(&v1, CgroupMatch::Subtree).unwrap_err();
            assert!(matches!(e, ScopingError::CgroupV1 { .. }), "{e}");
            assert!(
                e.to_string()
                    .contains("a cgroup v1 hierarchy, not a cgroup v2"),
                "{e}"
            );
        }
    }

    #[test]
    fn pid_namespaces_are_checked() {
        let me = PidNamespace::of_process(std::process::id()).unwrap();
        let own = PidNamespace::open(Path::new("/proc/self/ns/pid")).unwrap();
        assert_eq!(me.inode(), own.inode());
        assert_eq!(me.kernel_dev(), own.kernel_dev());
        assert!(me.to_string().starts_with("pid:["));
        // Our own process ID, in our own namespace (where bpfmux tests run:
        // their /proc is of that namespace).
        let here = std::process::id();
        assert_eq!(own.process(here).unwrap(), here);
        let e = own.process(0x7fff_ffff).unwrap_err();
        assert!(
            e.to_string().starts_with(&format!(
                "2147483647: no process with this ID in pid namespace {own}"
            )),
            "{e}"
        );
        let e = PidNamespace::open(Path::new("/proc/self/ns/net")).unwrap_err();
        assert!(
            matches!(e, ScopingError::NotPidNamespace { kind: "net", .. }),
            "{e}"
        );
        let e = PidNamespace::open(Path::new("/etc/hostname")).unwrap_err();
        assert!(matches!(e, ScopingError::NotNamespace { .. }), "{e}");
        assert_eq!(
            e.to_string(),
            "/etc/hostname: not a namespace file (e.g. /proc/PID/ns/pid)"
        );
        let e = PidNamespace::open(Path::new("/nonexistent-bpfmux")).unwrap_err();
        assert!(matches!(e, ScopingError::Io { .. }), "{e}");
        let e = PidNamespace::of_process(0x7fff_ffff).unwrap_err();
        assert_eq!(e.to_string(), "2147483647: no such process");
    }
}

#[cfg(test)]
#[path = "scoping_tests.rs"]
mod kernel_tests;
