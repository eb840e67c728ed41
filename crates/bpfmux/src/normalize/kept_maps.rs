//! `/proc/<pid>/maps` descriptors kept open across calls, one per pid.
//!
//! Why: opening and closing the maps file costs about as much as three or
//! four PROCMAP_QUERY ioctls, so for a handful of addresses it is most of a
//! call. Keeping the descriptor does not make results stale: the file pins
//! the process's address space (its `mm`) at open time, and every ioctl or
//! re-read looks at that address space as it is now. When the address space
//! dies (the process exited, exec'd, or the pid was reused) the kernel
//! answers ESRCH (ioctl) or an empty read (text), and the caller drops the
//! descriptor and opens a fresh one.
//!
//! One case would pin the wrong address space: a child made with `CLONE_VM`
//! (vfork, posix_spawn) runs in its parent's address space until it execs; a
//! descriptor opened in that window goes on showing the parent's mappings
//! after the exec, because the parent keeps them alive. So a process that
//! has not exec'd since it was forked (`PF_FORKNOEXEC`) is never kept — it
//! pays the cold open on every call instead.

use std::collections::HashMap;
use std::fs::File;

/// Upper bound on kept descriptors (each also pins a small `mm_struct` of a
/// possibly dead process until we notice); least recently used goes first.
const CAPACITY: usize = 128;

/// `PF_FORKNOEXEC` in the flags field of `/proc/<pid>/stat`.
const PF_FORKNOEXEC: u64 = 0x40;

#[derive(Default)]
pub struct KeptMaps {
    entries: HashMap<u32, Entry>,
    clock: u64,
}

struct Entry {
    /// `None`: this pid may not be kept (decided once; see module doc).
    file: Option<File>,
    last_used: u64,
}

impl KeptMaps {
    /// The kept descriptor of `pid`, handed out until [`put`](Self::put)
    /// gives it back.
    pub fn take(&mut self, pid: u32) -> Option<File> {
        self.entries.get_mut(&pid)?.file.take()
    }

    pub fn put(&mut self, pid: u32, file: File) {
        self.clock += 1;
        if self.entries.len() >= CAPACITY && !self.entries.contains_key(&pid) {
            self.evict_oldest();
        }
        self.entries.insert(
            pid,
            Entry {
                file: Some(file),
                last_used: self.clock,
            },
        );
    }

    pub fn forget(&mut self, pid: u32) {
        self.entries.remove(&pid);
    }

    /// Whether a descriptor of `pid` opened after this check may be kept.
    /// Reads `/proc/<pid>/stat` once per pid; call it before opening maps
    /// (a check after the open could miss an exec in between).
    pub fn may_keep(&mut self, pid: u32) -> bool {
        if let Some(e) = self.entries.get(&pid) {
            // Present without a file: declined earlier (a kept file would
            // have been taken out by `take`, so this is the decline).
            return e.file.is_some();
        }
        if forked_without_exec(pid).unwrap_or(true) {
            self.clock += 1;
            if self.entries.len() >= CAPACITY {
                self.evict_oldest();
            }
            self.entries.insert(
                pid,
                Entry {
                    file: None,
                    last_used: self.clock,
                },
            );
            return false;
        }
        true
    }

    fn evict_oldest(&mut self) {
        if let Some(pid) = least_recently_used(&self.entries, |e| e.last_used) {
            self.entries.remove(&pid);
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }
}

/// The pid whose entry has the smallest `last_used` (the one to evict).
pub(super) fn least_recently_used<V>(
    entries: &HashMap<u32, V>,
    last_used: impl Fn(&V) -> u64,
) -> Option<u32> {
    entries
        .iter()
        .min_by_key(|(_, v)| last_used(v))
        .map(|(&pid, _)| pid)
}

/// `PF_FORKNOEXEC` of `pid`; `None` if the stat file is unreadable.
pub(super) fn forked_without_exec(pid: u32) -> Option<bool> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which is in parentheses and may itself
    // contain spaces and ')': state ppid pgrp session tty_nr tpgid flags.
    let rest = &stat[stat.rfind(')')? + 1..];
    let flags: u64 = rest.split_whitespace().nth(6)?.parse().ok()?;
    Some(flags & PF_FORKNOEXEC != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process_has_exec_d() {
        // The test binary was exec'd by cargo or a shell. (A forked child:
        // tests/normalize_real_processes.rs.)
        assert_eq!(forked_without_exec(std::process::id()), Some(false));
    }

    #[test]
    fn keeps_at_most_capacity_dropping_least_recent() {
        let mut kept = KeptMaps::default();
        for pid in 0..CAPACITY as u32 + 10 {
            kept.put(pid, File::open("/dev/null").unwrap());
        }
        assert_eq!(kept.len(), CAPACITY);
        assert!(kept.take(0).is_none(), "oldest evicted");
        assert!(kept.take(CAPACITY as u32 + 9).is_some(), "newest kept");
    }
}
