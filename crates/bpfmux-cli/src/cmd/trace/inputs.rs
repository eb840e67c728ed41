//! `bpfmux trace`'s inputs, read and checked before anything is loaded:
//! patterns (`-f FILE` too), `--cgroup`, `--pid`, `--comm`.

use std::ffi::CString;
use std::os::unix::fs::MetadataExt;

use anyhow::{bail, Context as _};
use bpfmux::trace::{EngineKind, Pattern};

use crate::input::{read_text, MAX_TEXT_FILE};

/// The cgroup v2 id of a cgroup directory: the inode number of it.
pub fn cgroup_id(p: &std::path::Path) -> anyhow::Result<u64> {
    const CGROUP2_SUPER_MAGIC: libc::c_long = 0x6367_7270;
    let meta = std::fs::metadata(p).with_context(|| format!("--cgroup {}", p.display()))?;
    let c = CString::new(p.as_os_str().as_encoded_bytes())?;
    // SAFETY: statfs fills the zeroed struct from a NUL-terminated path.
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    let on_cgroup2 = unsafe { libc::statfs(c.as_ptr(), &mut fs) } == 0
        && fs.f_type as libc::c_long == CGROUP2_SUPER_MAGIC;
    if !meta.is_dir() || !on_cgroup2 {
        bail!(
            "--cgroup {}: not a cgroup v2 directory (e.g. /sys/fs/cgroup/system.slice)",
            p.display()
        );
    }
    Ok(meta.ino())
}

/// `--pid`: a running process, by its process ID (the BPF filter compares
/// the thread group ID; 0 there means no filter at all).
pub fn check_pid(pid: u32) -> anyhow::Result<()> {
    if pid == 0 {
        bail!("--pid 0 is not a process (omit --pid to trace every process)");
    }
    let status = match std::fs::read_to_string(format!("/proc/{pid}/status")) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!("--pid {pid}: no such process")
        }
        Err(e) => return Err(e).with_context(|| format!("--pid {pid}: reading its status")),
    };
    let tgid = status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse::<u32>().ok());
    match tgid {
        Some(t) if t != pid => {
            bail!("--pid {pid} is a thread of process {t}; --pid takes a process ID (--pid {t})")
        }
        _ => Ok(()),
    }
}

/// `--comm`: a task name the kernel can have.
pub fn check_comm(comm: Option<&str>) -> anyhow::Result<()> {
    match comm {
        Some("") => bail!("--comm: empty task name (omit --comm to trace every task)"),
        Some(c) if c.len() > 15 => bail!("--comm: a task name has at most 15 bytes"),
        _ => Ok(()),
    }
}

/// `--engine NAME`, when given.
pub fn engine(name: Option<&str>) -> anyhow::Result<Option<EngineKind>> {
    Ok(name.map(str::parse::<EngineKind>).transpose()?)
}

/// Patterns as typed.
pub fn patterns(v: &[String]) -> anyhow::Result<Vec<Pattern>> {
    v.iter()
        .map(|s| s.parse::<Pattern>().map_err(anyhow::Error::from))
        .collect()
}

/// Patterns of a file (or stdin for "-"): one per line, '#' comments; a
/// line repeated is kept once (a list may repeat names a million times).
pub fn read_pattern_file(path: &std::path::Path) -> anyhow::Result<Vec<String>> {
    let text = read_text(path, MAX_TEXT_FILE).context("reading patterns")?;
    let mut seen = std::collections::HashSet::new();
    Ok(text
        .lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty() && seen.insert(*l))
        .map(str::to_string)
        .collect())
}
