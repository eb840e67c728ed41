//! `bpfmux trace`'s inputs, read and checked before anything is loaded:
//! patterns (`-f FILE` too), `--cgroup`, `--cgroup-exact`, `--pid`,
//! `--pid-ns`, `--comm`.

use std::path::Path;

use anyhow::{anyhow, bail, Context as _};
use bpfmux::trace::{CgroupFilter, CgroupMatch, EngineKind, Pattern, PidNamespace};

use crate::input::{read_text, MAX_TEXT_FILE};

/// `--cgroup PATH` or `--cgroup-exact PATH`: a cgroup v2 directory.
pub fn cgroup(path: &Path, matching: CgroupMatch) -> anyhow::Result<CgroupFilter> {
    let option = match matching {
        CgroupMatch::Subtree => "--cgroup",
        CgroupMatch::Exact => "--cgroup-exact",
    };
    CgroupFilter::new(path, matching).map_err(|e| anyhow!("{option} {e}"))
}

/// `--pid-ns NS`: a namespace file, or a process ID (here) whose pid
/// namespace it is.
pub fn pid_ns(arg: &str) -> anyhow::Result<PidNamespace> {
    let ns = match arg.parse::<u32>() {
        Ok(pid) => PidNamespace::of_process(pid),
        Err(_) => PidNamespace::open(Path::new(arg)),
    };
    ns.map_err(|e| anyhow!("--pid-ns {e}"))
}

/// `--pid PID --pid-ns NS`: the process with that ID in the namespace, by
/// its ID here.
pub fn pid_in_ns(pid: u32, ns: &PidNamespace) -> anyhow::Result<u32> {
    if pid == 0 {
        bail!("--pid 0 is not a process (omit --pid to trace every process of the namespace)");
    }
    ns.process(pid).map_err(|e| anyhow!("--pid {e}"))
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
