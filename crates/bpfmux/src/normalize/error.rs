//! Errors a user can cause by pointing the normalizer at the wrong process.

use std::io;

#[derive(Debug, thiserror::Error)]
pub enum NormalizeError {
    #[error("process {pid} does not exist")]
    NoSuchProcess { pid: u32 },
    #[error(
        "not permitted to read the memory map of process {pid} \
         (needs ptrace read access: same user and dumpable, or CAP_SYS_PTRACE)"
    )]
    PermissionDenied { pid: u32 },
    #[error("process {pid} has no address space (it exited, is a zombie, or is a kernel thread)")]
    NoAddressSpace { pid: u32 },
    #[error("PROCMAP_QUERY is not supported by this kernel (needs Linux 6.11+)")]
    ProcmapQueryUnsupported,
    #[error("malformed line in /proc/{pid}/maps: {line:?}")]
    Parse { pid: u32, line: String },
    #[error("{what} /proc/{pid}/maps")]
    Io {
        pid: u32,
        what: &'static str,
        #[source]
        source: io::Error,
    },
}

impl NormalizeError {
    /// Classifies an errno from opening, reading or querying the maps file.
    pub(crate) fn from_io(pid: u32, what: &'static str, e: io::Error) -> Self {
        match e.raw_os_error() {
            Some(libc::ENOENT) => Self::NoSuchProcess { pid },
            Some(libc::EACCES) | Some(libc::EPERM) => Self::PermissionDenied { pid },
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
