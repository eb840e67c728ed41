//! The kernel's text listings a glob needs: which functions ftrace can
//! attach to (`available_filter_functions[_addrs]`) and how many text
//! symbols share a name (`/proc/kallsyms`). Only names of interest are
//! counted, so parsing 200k kallsyms lines allocates for a few hundred.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::pattern::Scope;

/// A candidate function, as the listings key it.
pub type Key = (Scope, String);

const TRACEFS: &[&str] = &["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// Per candidate: entries in the ftrace list (with the address of the last
/// one, when the `_addrs` variant exists) and text symbols in kallsyms (with
/// the address of the last one).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Seen {
    pub ftrace: u32,
    /// The ftrace call site: the function's address, or a few bytes after
    /// it when the function starts with an ENDBR instruction.
    pub ftrace_addr: Option<u64>,
    pub kallsyms: u32,
    pub ksym_addr: Option<u64>,
}

/// Most bytes between a function's symbol and its ftrace call site
/// (x86 ENDBR64 is 4; leave room for other layouts).
const MAX_FENTRY_OFFSET: u64 = 16;

impl Seen {
    /// The function's symbol address, when kallsyms and ftrace agree on it.
    /// kprobe.multi needs the symbol address: the kernel looks cookies up by
    /// it, not by the ftrace call site.
    pub fn symbol_addr(&self) -> Option<u64> {
        let (k, f) = (self.ksym_addr?, self.ftrace_addr);
        match f {
            Some(f) if !(k..=k + MAX_FENTRY_OFFSET).contains(&f) => None,
            _ => Some(k),
        }
    }
}

/// The underlying error is the `source` (shown once by `{:#}` chains).
#[derive(Debug, thiserror::Error)]
pub enum ListingError {
    #[error(
        "no available_filter_functions under {dirs:?} (is tracefs mounted? \
         mount -t tracefs nodev /sys/kernel/tracing)"
    )]
    NoFtraceList {
        dirs: Vec<PathBuf>,
        source: io::Error,
    },
    #[error(
        "not permitted to read {path} (tracefs is readable by root only; \
         run as root, or give exact function names, which need no listing)"
    )]
    FtraceListDenied { path: PathBuf, source: io::Error },
    #[error(
        "the kernel refuses to list traceable functions ({path}: EPERM, e.g. kernel \
         lockdown or a security module); give exact function names, which need no listing"
    )]
    FtraceListRefused { path: PathBuf, source: io::Error },
    #[error("reading {path}")]
    Read { path: PathBuf, source: io::Error },
}

/// Reads both listings, counting only `candidates`.
pub fn read(candidates: &HashMap<Key, usize>) -> Result<HashMap<Key, Seen>, ListingError> {
    let mut seen: HashMap<Key, Seen> = HashMap::with_capacity(candidates.len());
    // The kernel generates both texts slowly (seconds under emulation):
    // read kallsyms on a second thread meanwhile.
    let path = Path::new("/proc/kallsyms");
    let (ftrace, ksyms) = std::thread::scope(|s| {
        let k = s.spawn(|| fs::read_to_string(path));
        let f = read_ftrace_list();
        (f, k.join())
    });
    let (text, with_addrs) = ftrace?;
    count_ftrace(&text, with_addrs, candidates, &mut seen);
    let ksyms = ksyms
        .unwrap_or_else(|_| Err(io::Error::other("kallsyms reader panicked")))
        .map_err(|source| ListingError::Read {
            path: path.into(),
            source,
        })?;
    count_kallsyms(&ksyms, candidates, &mut seen);
    Ok(seen)
}

/// The `_addrs` variant (6.5+) when present: the same lines with an address.
fn read_ftrace_list() -> Result<(String, bool), ListingError> {
    let mut last = None;
    for dir in TRACEFS {
        for (file, with_addrs) in [
            ("available_filter_functions_addrs", true),
            ("available_filter_functions", false),
        ] {
            let path = Path::new(dir).join(file);
            match fs::read_to_string(&path) {
                Ok(t) => return Ok((t, with_addrs)),
                // A tracefs that is there but closed to us: say so, rather
                // than what the next directory (absent) answers.
                Err(e) if e.raw_os_error() == Some(libc::EACCES) => {
                    return Err(ListingError::FtraceListDenied { path, source: e })
                }
                Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
                    return Err(ListingError::FtraceListRefused { path, source: e })
                }
                Err(e) => last = Some(e),
            }
        }
    }
    Err(ListingError::NoFtraceList {
        dirs: TRACEFS.iter().map(PathBuf::from).collect(),
        source: last.unwrap_or_else(|| io::Error::from(io::ErrorKind::NotFound)),
    })
}

fn scope_of(module: Option<&str>) -> Scope {
    match module {
        None => Scope::Vmlinux,
        Some(m) => Scope::Module(m.trim_matches(|c| c == '[' || c == ']').to_string()),
    }
}

/// Lines `name [mod]`, or `addr name [mod]` with `with_addrs`.
pub fn count_ftrace(
    text: &str,
    with_addrs: bool,
    candidates: &HashMap<Key, usize>,
    seen: &mut HashMap<Key, Seen>,
) {
    for line in text.lines() {
        let mut it = line.split_ascii_whitespace();
        let addr = if with_addrs {
            it.next().and_then(|a| u64::from_str_radix(a, 16).ok())
        } else {
            None
        };
        let Some(name) = it.next() else { continue };
        let key = (scope_of(it.next()), name.to_string());
        if candidates.contains_key(&key) {
            let s = seen.entry(key).or_default();
            s.ftrace += 1;
            s.ftrace_addr = addr;
        }
    }
}

/// Lines `addr type name [mod]`; only text symbols (t/T) count.
pub fn count_kallsyms(text: &str, candidates: &HashMap<Key, usize>, seen: &mut HashMap<Key, Seen>) {
    // Compare by name first without allocating: most lines are not wanted.
    let names: HashMap<&str, ()> = candidates.keys().map(|(_, n)| (n.as_str(), ())).collect();
    for line in text.lines() {
        let mut it = line.split_ascii_whitespace();
        let (Some(addr), Some(ty), Some(name)) = (it.next(), it.next(), it.next()) else {
            continue;
        };
        if !matches!(ty, "t" | "T") || !names.contains_key(name) {
            continue;
        }
        let key = (scope_of(it.next()), name.to_string());
        if candidates.contains_key(&key) {
            let s = seen.entry(key).or_default();
            s.kallsyms += 1;
            s.ksym_addr = u64::from_str_radix(addr, 16).ok().filter(|&a| a != 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cands(names: &[(&str, Option<&str>)]) -> HashMap<Key, usize> {
        names
            .iter()
            .enumerate()
            .map(|(i, (n, m))| ((scope_of(*m), n.to_string()), i))
            .collect()
    }

    #[test]
    fn counts_ftrace_with_and_without_addrs() {
        let c = cands(&[("vfs_read", None), ("dup", None), ("mf", Some("mymod"))]);
        let mut seen = HashMap::new();
        let text = "ffffffff81000010 vfs_read\nffffffff81000020 dup\nffffffff81000030 dup\n\
                    ffffffff81000040 other\nffffffffc0000010 mf [mymod]\n";
        count_ftrace(text, true, &c, &mut seen);
        let vr = seen[&(Scope::Vmlinux, "vfs_read".into())];
        assert_eq!((vr.ftrace, vr.ftrace_addr), (1, Some(0xffffffff81000010)));
        assert_eq!(seen[&(Scope::Vmlinux, "dup".into())].ftrace, 2);
        assert_eq!(
            seen[&(Scope::Module("mymod".into()), "mf".into())].ftrace,
            1
        );
        assert!(!seen.contains_key(&(Scope::Vmlinux, "other".into())));

        let mut seen = HashMap::new();
        count_ftrace("vfs_read\nmf [mymod]\n", false, &c, &mut seen);
        let vr = seen[&(Scope::Vmlinux, "vfs_read".into())];
        assert_eq!((vr.ftrace, vr.ftrace_addr), (1, None));
    }

    #[test]
    fn counts_text_symbols_per_scope() {
        let c = cands(&[("a", None), ("b", None), ("a", Some("m"))]);
        let mut seen = HashMap::new();
        let text = "ffffffff81000000 t a\nffffffff81000100 T a\nffffffff81000200 D b\n\
                    ffffffff81000300 T b\nffffffffc0000000 t a\t[m]\n";
        count_kallsyms(text, &c, &mut seen);
        assert_eq!(seen[&(Scope::Vmlinux, "a".into())].kallsyms, 2);
        assert_eq!(
            seen[&(Scope::Vmlinux, "b".into())].ksym_addr,
            Some(0xffffffff81000300)
        );
        // the data symbol does not count
        assert_eq!(seen[&(Scope::Vmlinux, "b".into())].kallsyms, 1);
        assert_eq!(seen[&(Scope::Module("m".into()), "a".into())].kallsyms, 1);
    }
}

#[cfg(test)]
mod addr_tests {
    use super::*;

    #[test]
    fn symbol_address_must_cover_the_ftrace_site() {
        let s = |k, f| Seen {
            ftrace: 1,
            ftrace_addr: f,
            kallsyms: 1,
            ksym_addr: k,
        };
        // ENDBR: the call site is 4 bytes in.
        assert_eq!(s(Some(0x1000), Some(0x1004)).symbol_addr(), Some(0x1000));
        assert_eq!(s(Some(0x1000), Some(0x1000)).symbol_addr(), Some(0x1000));
        assert_eq!(s(Some(0x1000), None).symbol_addr(), Some(0x1000));
        // Another function's site: the names do not describe one function.
        assert_eq!(s(Some(0x1000), Some(0x2000)).symbol_addr(), None);
        assert_eq!(s(None, Some(0x1000)).symbol_addr(), None);
    }
}
