//! Errors a user can cause by pointing the normalizer at the wrong process.

use std::io;

/// Why a process's addresses could not be normalized.
#[derive(Debug, thiserror::Error)]
pub enum NormalizeError {
    /// No such process.
    #[error("process {pid} does not exist")]
    NoSuchProcess {
        /// The process.
        pid: u32,
    },
    /// Not permitted to read its memory map.
    #[error(
        "not permitted to read the memory map of process {pid} \
         (needs ptrace read access: same user and dumpable, or CAP_SYS_PTRACE)"
    )]
    PermissionDenied {
        /// The process.
        pid: u32,
    },
    /// It has no address space (exited, zombie, kernel thread).
    #[error("process {pid} has no address space (it exited, is a zombie, or is a kernel thread)")]
    NoAddressSpace {
        /// The process.
        pid: u32,
    },
    /// [`super::Backend::ProcmapQuery`] asked for on a kernel without it.
    #[error("PROCMAP_QUERY is not supported by this kernel (needs Linux 6.11+)")]
    ProcmapQueryUnsupported,
    /// A line of the text maps file that does not parse.
    #[error("malformed line in /proc/{pid}/maps: {line:?}")]
    Parse {
        /// The process.
        pid: u32,
        /// The line.
        line: String,
    },
    /// Another error opening, reading or querying the maps file.
    #[error("{what} /proc/{pid}/maps")]
    Io {
        /// The process.
        pid: u32,
        /// The step: opening, reading, querying.
        what: &'static str,
        /// What the kernel said.
        #[source]
        source: io::Error,
    },
}

impl NormalizeError {
    /// Classifies an errno from opening, reading or querying the maps file.
    pub(crate) fn from_io(pid: u32, what: &'static str, e: io::Error) -> Self {
        match e.raw_os_error() {
            Some(libc::ENOENT) => Self::NoSuchProcess { pid },
            Some(libc::EACCES | libc::EPERM) => Self::PermissionDenied { pid },
            Some(libc::ESRCH) => Self::NoAddressSpace { pid },
            Some(libc::ENOTTY) => Self::ProcmapQueryUnsupported,
            _ => Self::Io {
                pid,
                what,
                source: e,
            },
        }
    }
}
