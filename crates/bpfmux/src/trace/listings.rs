//! The kernel's text listings a glob needs: which functions ftrace can
//! attach to (`available_filter_functions[_addrs]`) and how many text
//! symbols share a name (`/proc/kallsyms`). Only names of interest are
//! counted, so parsing 200k kallsyms lines allocates for a few hundred.

use rustc_hash::FxHashMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::pattern::Scope;

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

/// A kernel listing (ftrace's attachable functions, kallsyms) that could
/// not be read. The underlying error is the `source` (shown once by `{:#}`
/// chains).
#[derive(Debug, thiserror::Error)]
pub enum ListingError {
    #[error(
        "tracefs is not mounted at {} or {} (mount -t tracefs nodev {}); \
         or give exact function names, which need no listing",
        TRACEFS[0], TRACEFS[1], TRACEFS[0]
    )]
    /// No tracefs to read the listing from.
    TracefsNotMounted,
    #[error(
        "tracefs at {dir} has no available_filter_functions (a kernel without \
         dynamic ftrace?); give exact function names, which need no listing"
    )]
    /// tracefs without available_filter_functions.
    NoFtraceList {
        /// The tracefs directory.
        dir: PathBuf,
    },
    #[error(
        "not permitted to read {path} (tracefs is readable by root only; \
         run as root, or give exact function names, which need no listing)"
    )]
    /// Not permitted to read the listing.
    FtraceListDenied {
        /// The file.
        path: PathBuf,
        /// What reading it said.
        source: io::Error,
    },
    #[error(
        "the kernel refuses to list traceable functions ({path}, e.g. kernel \
         lockdown or a security module); give exact function names, which need no listing"
    )]
    /// The kernel refused the listing.
    FtraceListRefused {
        /// The file.
        path: PathBuf,
        /// What reading it said.
        source: io::Error,
    },
    #[error("reading {path}")]
    /// Another read error.
    Read {
        /// The file.
        path: PathBuf,
        /// What reading it said.
        source: io::Error,
    },
}

/// Candidates by (scope, name), looked up per listing line without
/// allocating: a name maps to its first candidate, `next` chains the others
/// with the same name (other modules).
pub struct Index<'a> {
    first: FxHashMap<&'a str, u32>,
    next: Vec<u32>,
    modules: Vec<Option<&'a str>>,
}

const NONE: u32 = u32::MAX;

impl<'a> Index<'a> {
    /// Candidate `i` is the `i`-th item; counts come back in that order.
    pub fn new<I: IntoIterator<Item = (&'a Scope, &'a str)>>(cands: I) -> Self {
        let mut first: FxHashMap<&str, u32> = FxHashMap::default();
        let mut next = Vec::new();
        let mut modules = Vec::new();
        for (i, (scope, name)) in cands.into_iter().enumerate() {
            let prev = first.insert(name, i as u32).unwrap_or(NONE);
            next.push(prev);
            modules.push(scope.module());
        }
        Self {
            first,
            next,
            modules,
        }
    }

    pub fn len(&self) -> usize {
        self.next.len()
    }

    /// The candidate named `name` in `module` (`None`: vmlinux).
    fn find(&self, name: &str, module: Option<&str>) -> Option<usize> {
        let mut i = *self.first.get(name)?;
        while i != NONE {
            if self.modules[i as usize] == module {
                return Some(i as usize);
            }
            i = self.next[i as usize];
        }
        None
    }
}

/// The raw text of both listings.
pub struct Texts {
    ftrace: String,
    with_addrs: bool,
    kallsyms: String,
    /// How long reading each took (on threads of their own, overlapping).
    pub ftrace_time: Duration,
    pub kallsyms_time: Duration,
}

/// Listings being read on other threads (the kernel generates them slowly:
/// seconds under emulation), so the caller can parse BTF meanwhile.
pub struct Pending(std::thread::JoinHandle<Result<Texts, ListingError>>);

impl Pending {
    pub fn start() -> Self {
        Self(std::thread::spawn(read_texts))
    }

    pub fn wait(self) -> Result<Texts, ListingError> {
        self.0.join().unwrap_or_else(|_| {
            Err(ListingError::Read {
                path: "/proc/kallsyms".into(),
                source: io::Error::other("listing reader panicked"),
            })
        })
    }
}

/// Reads both listings, the two files on two threads.
pub fn read_texts() -> Result<Texts, ListingError> {
    let path = Path::new("/proc/kallsyms");
    let ((ftrace, ftrace_time), ksyms) = std::thread::scope(|s| {
        let k = s.spawn(|| {
            let t0 = Instant::now();
            (fs::read_to_string(path), t0.elapsed())
        });
        let t0 = Instant::now();
        ((read_ftrace_list(), t0.elapsed()), k.join())
    });
    let (ksyms, kallsyms_time) = match ksyms {
        Ok((r, t)) => (Ok(r), t),
        Err(e) => (Err(e), Duration::ZERO),
    };
    let (ftrace, with_addrs) = ftrace?;
    let kallsyms = ksyms
        .unwrap_or_else(|_| Err(io::Error::other("kallsyms reader panicked")))
        .map_err(|source| ListingError::Read {
            path: path.into(),
            source,
        })?;
    Ok(Texts {
        ftrace,
        with_addrs,
        kallsyms,
        ftrace_time,
        kallsyms_time,
    })
}

/// What the listings say about each candidate of `index`, in its order.
pub fn count(texts: &Texts, index: &Index<'_>) -> Vec<Seen> {
    let mut seen = vec![Seen::default(); index.len()];
    count_ftrace(&texts.ftrace, texts.with_addrs, index, &mut seen);
    count_kallsyms(&texts.kallsyms, index, &mut seen);
    seen
}

/// The plain list: the kernel writes it a third faster than the `_addrs`
/// variant (6.5+), and the addresses add nothing for a name that both
/// listings hold once (kallsyms gives the address). The `_addrs` variant is
/// read only where the plain one is missing.
fn read_ftrace_list() -> Result<(String, bool), ListingError> {
    read_ftrace_list_in(TRACEFS)
}

/// [`read_ftrace_list`] over other directories (tests).
fn read_ftrace_list_in(dirs: &[&str]) -> Result<(String, bool), ListingError> {
    let mut mounted = None;
    for dir in dirs {
        for (file, with_addrs) in [
            ("available_filter_functions", false),
            ("available_filter_functions_addrs", true),
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
                Err(e) if e.kind() != io::ErrorKind::NotFound => {
                    return Err(ListingError::Read { path, source: e })
                }
                Err(_) => {}
            }
        }
        if mounted.is_none() && is_tracefs(Path::new(dir)) {
            mounted = Some(PathBuf::from(dir));
        }
    }
    Err(match mounted {
        Some(dir) => ListingError::NoFtraceList { dir },
        None => ListingError::TracefsNotMounted,
    })
}

/// Whether `dir` is a tracefs mount (an empty directory where it is not
/// mounted, e.g. /sys/kernel/tracing in a container).
fn is_tracefs(dir: &Path) -> bool {
    const TRACEFS_MAGIC: libc::c_long = 0x7472_6163;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: statfs fills the zeroed struct from a NUL-terminated path.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    (unsafe { libc::statfs(c.as_ptr(), &mut st) }) == 0
        && st.f_type as libc::c_long == TRACEFS_MAGIC
}

fn module_of(field: Option<&str>) -> Option<&str> {
    field.map(|m| m.trim_matches(|c| c == '[' || c == ']'))
}

/// Lines `name [mod]`, or `addr name [mod]` with `with_addrs`.
pub fn count_ftrace(text: &str, with_addrs: bool, index: &Index<'_>, seen: &mut [Seen]) {
    for line in text.lines() {
        let mut it = line.split_ascii_whitespace();
        let addr = if with_addrs {
            it.next().and_then(|a| u64::from_str_radix(a, 16).ok())
        } else {
            None
        };
        let Some(name) = it.next() else { continue };
        if let Some(i) = index.find(name, module_of(it.next())) {
            seen[i].ftrace += 1;
            seen[i].ftrace_addr = addr;
        }
    }
}

/// Lines `addr type name [mod]`; only text symbols (t/T) count.
pub fn count_kallsyms(text: &str, index: &Index<'_>, seen: &mut [Seen]) {
    for line in text.lines() {
        // Most lines are not text symbols: look at the type before splitting.
        let Some((addr, rest)) = line.split_once(' ') else {
            continue;
        };
        if !matches!(rest.as_bytes(), [b't' | b'T', b' ', ..]) {
            continue;
        }
        let mut it = rest[2..].split_ascii_whitespace();
        let Some(name) = it.next() else { continue };
        if let Some(i) = index.find(name, module_of(it.next())) {
            seen[i].kallsyms += 1;
            seen[i].ksym_addr = u64::from_str_radix(addr, 16).ok().filter(|&a| a != 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scopes(names: &[(&str, Option<&str>)]) -> Vec<(Scope, String)> {
        names
            .iter()
            .map(|(n, m)| {
                let scope = m.map_or(Scope::Vmlinux, |m| Scope::Module(m.to_string()));
                (scope, n.to_string())
            })
            .collect()
    }

    #[test]
    fn an_unmounted_tracefs_is_named_once() {
        let dir = std::env::temp_dir().join(format!("bpfmux-notracefs-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let d = dir.to_str().unwrap();
        let e = read_ftrace_list_in(&[d, "/nonexistent/tracing"]).unwrap_err();
        assert!(matches!(e, ListingError::TracefsNotMounted), "{e:?}");
        let text = e.to_string();
        assert!(
            !text.contains('\n') && !text.contains("No such file"),
            "{text}"
        );
        assert_eq!(
            text.matches("/sys/kernel/debug/tracing").count(),
            1,
            "{text}"
        );
        // The plain list is taken where it is.
        fs::write(dir.join("available_filter_functions"), "vfs_read\n").unwrap();
        let got = read_ftrace_list_in(&["/nonexistent/tracing", d]).unwrap();
        assert_eq!(got, ("vfs_read\n".to_string(), false));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn counts_ftrace_with_and_without_addrs() {
        let c = scopes(&[("vfs_read", None), ("dup", None), ("mf", Some("mymod"))]);
        let index = Index::new(c.iter().map(|(s, n)| (s, n.as_str())));
        let mut seen = vec![Seen::default(); index.len()];
        let text = "ffffffff81000010 vfs_read\nffffffff81000020 dup\nffffffff81000030 dup\n\
                    ffffffff81000040 other\nffffffffc0000010 mf [mymod]\n\
                    ffffffffc0000020 dup [mymod]\n";
        count_ftrace(text, true, &index, &mut seen);
        assert_eq!(
            (seen[0].ftrace, seen[0].ftrace_addr),
            (1, Some(0xffffffff81000010))
        );
        // dup in a module is another function than vmlinux's dup
        assert_eq!(seen[1].ftrace, 2);
        assert_eq!(seen[2].ftrace, 1);

        let mut seen = vec![Seen::default(); index.len()];
        count_ftrace("vfs_read\nmf [mymod]\n", false, &index, &mut seen);
        assert_eq!((seen[0].ftrace, seen[0].ftrace_addr), (1, None));
        assert_eq!((seen[1].ftrace, seen[2].ftrace), (0, 1));
    }

    #[test]
    fn counts_text_symbols_per_scope() {
        let c = scopes(&[("a", None), ("b", None), ("a", Some("m"))]);
        let index = Index::new(c.iter().map(|(s, n)| (s, n.as_str())));
        let mut seen = vec![Seen::default(); index.len()];
        let text = "ffffffff81000000 t a\nffffffff81000100 T a\nffffffff81000200 D b\n\
                    ffffffff81000300 T b\nffffffffc0000000 t a\t[m]\n";
        count_kallsyms(text, &index, &mut seen);
        assert_eq!(seen[0].kallsyms, 2);
        assert_eq!(seen[1].ksym_addr, Some(0xffffffff81000300));
        // the data symbol does not count
        assert_eq!(seen[1].kallsyms, 1);
        assert_eq!(seen[2].kallsyms, 1);
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
