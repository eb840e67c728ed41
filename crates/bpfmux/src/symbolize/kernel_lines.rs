//! Source lines of kernel addresses from the running kernel's vmlinux:
//! [`KernelLines`].

use std::cell::RefCell;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use blazesym::symbolize::source::{Elf, Source};
use blazesym::symbolize::{Input, Symbolizer};
use object::{Object, ObjectSymbol};

use super::user::{source_lines, SourceLines};
use crate::normalize::{kernel_build_id, read_build_id, BuildId};

/// Why a vmlinux cannot give the running kernel's source lines.
#[derive(Debug, thiserror::Error)]
pub enum KernelLinesError {
    /// The file could not be read.
    #[error("{}", path.display())]
    Read {
        /// The vmlinux.
        path: PathBuf,
        /// What reading it said.
        #[source]
        source: io::Error,
    },
    /// The file is not a kernel image this module can use.
    #[error("{}: {why}", path.display())]
    NotKernel {
        /// The vmlinux.
        path: PathBuf,
        /// What is missing.
        why: String,
    },
    /// The file is another kernel's.
    #[error(
        "{} is not the running kernel's vmlinux: its build ID is {file}, the running kernel's {running}",
        path.display()
    )]
    OtherKernel {
        /// The vmlinux.
        path: PathBuf,
        /// Its build ID.
        file: BuildId,
        /// The running kernel's.
        running: BuildId,
    },
    /// The running kernel's build ID is not known.
    #[error("the running kernel's build ID: {0} (/sys/kernel/notes)")]
    RunningKernel(String),
    /// No usable vmlinux in the usual places.
    #[error("no vmlinux of the running kernel with DWARF found: {tried}")]
    NotFound {
        /// Each place looked at, and why it did not serve.
        tried: String,
    },
}

/// Source lines of kernel addresses: file, line and inlined calls, from a
/// vmlinux with DWARF (a kernel built with `CONFIG_DEBUG_INFO`, or the
/// distribution's debug package).
///
/// kallsyms names functions but knows nothing of source lines. The vmlinux
/// that was linked into the running kernel does, and two checks keep its
/// answers true: its GNU build ID must be the one the running kernel
/// reports (`/sys/kernel/notes`), and every address is moved by the
/// distance between where the kernel runs and where the file places it
/// (KASLR), measured on `_text`. A line is kept only where the DWARF
/// function at the address is the one kallsyms names (up to the compiler's
/// `.isra.0`-style suffixes), so a gap between functions never borrows a
/// neighbour's line.
///
/// ```no_run
/// use bpfmux::symbolize::{KernelLines, KernelSymbolizer, SymResult};
///
/// let ksyms = KernelSymbolizer::load()?;
/// let lines = KernelLines::find()?; // or KernelLines::open("path/to/vmlinux")
/// let ksyms = ksyms.with_lines(lines.into());
/// if let Some(addr) = ksyms.function_addresses(&[("do_sys_openat2", None)])[0] {
///     if let SymResult::Symbol(s) = &ksyms.symbolize(&[addr + 4])[0].result {
///         println!("{}+{:#x} {:?}:{:?}", s.name, s.offset, s.file, s.line);
///     }
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// Shared between threads freely: each thread that looks lines up keeps
/// its own parse of the file's DWARF (blazesym's symbolizer stays on the
/// thread that made it).
#[derive(Debug)]
pub struct KernelLines {
    path: PathBuf,
    /// Where the file places `_text`.
    text: u64,
}

thread_local! {
    /// This thread's symbolizer for the vmlinux it last looked in: parsing
    /// a kernel's DWARF takes seconds, so it is kept.
    static BLAZE: RefCell<Option<(PathBuf, Symbolizer)>> = const { RefCell::new(None) };
}

/// Where distributions and kernel builds put the vmlinux of kernel
/// `release`, most specific first.
pub fn vmlinux_places(release: &str, build_id: Option<&BuildId>) -> Vec<PathBuf> {
    let mut v = Vec::new();
    if let Some(id) = build_id {
        let hex = id.to_string();
        if hex.len() > 2 {
            v.push(PathBuf::from(format!(
                "/usr/lib/debug/.build-id/{}/{}.debug",
                &hex[..2],
                &hex[2..]
            )));
        }
    }
    for p in [
        format!("/usr/lib/debug/boot/vmlinux-{release}"),
        format!("/usr/lib/debug/lib/modules/{release}/vmlinux"),
        format!("/lib/modules/{release}/build/vmlinux"),
        format!("/boot/vmlinux-{release}"),
    ] {
        v.push(PathBuf::from(p));
    }
    v
}

impl KernelLines {
    /// Opens `path`, which must be the running kernel's vmlinux (same
    /// build ID) and carry DWARF.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, KernelLinesError> {
        let running = running_build_id()?;
        Self::open_for(path.as_ref(), &running)
    }

    /// The running kernel's vmlinux from the usual places
    /// ([`vmlinux_places`]): the first one that is the running kernel's
    /// and has DWARF.
    pub fn find() -> Result<Self, KernelLinesError> {
        let running = running_build_id()?;
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map_err(|e| KernelLinesError::RunningKernel(format!("its release: {e}")))?;
        let mut tried = Vec::new();
        for p in vmlinux_places(release.trim(), Some(&running)) {
            match Self::open_for(&p, &running) {
                Ok(l) => return Ok(l),
                Err(KernelLinesError::Read { source, .. })
                    if source.kind() == io::ErrorKind::NotFound =>
                {
                    tried.push(format!("{} (not there)", p.display()));
                }
                Err(e) => tried.push(crate::error_text(&e)),
            }
        }
        Err(KernelLinesError::NotFound {
            tried: tried.join("; "),
        })
    }

    fn open_for(path: &Path, running: &BuildId) -> Result<Self, KernelLinesError> {
        let read = |source| KernelLinesError::Read {
            path: path.to_path_buf(),
            source,
        };
        let not_kernel = |why: &str| KernelLinesError::NotKernel {
            path: path.to_path_buf(),
            why: why.to_string(),
        };
        let file = File::open(path).map_err(read)?;
        // The build ID first: a cheap read that turns away another
        // kernel's file before its symbols are parsed.
        let id = read_build_id(&file)
            .map_err(read)?
            .ok_or_else(|| not_kernel("no GNU build ID note (not a vmlinux?)"))?;
        if id != *running {
            return Err(KernelLinesError::OtherKernel {
                path: path.to_path_buf(),
                file: id,
                running: *running,
            });
        }
        // SAFETY: a read-only private mapping; a vmlinux is not rewritten
        // in place while it is read (a rebuild writes a new file).
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(read)?;
        let elf = object::File::parse(&*map).map_err(|e| not_kernel(&format!("not ELF: {e}")))?;
        if elf.section_by_name(".debug_info").is_none() {
            return Err(not_kernel(
                "no DWARF (.debug_info): a kernel built without CONFIG_DEBUG_INFO, or stripped",
            ));
        }
        let text = elf
            .symbols()
            .find(|s| s.name() == Ok("_text"))
            .map(|s| s.address())
            .ok_or_else(|| not_kernel("no _text symbol"))?;
        Ok(Self {
            path: path.to_path_buf(),
            text,
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where the file places `_text` (the running kernel's `_text` minus
    /// this is the KASLR offset).
    pub fn text(&self) -> u64 {
        self.text
    }

    /// The source lines of each of `addrs` (kernel addresses of a kernel
    /// whose `_text` runs at `running_text`), given the name kallsyms has
    /// for each (`None`: not a vmlinux function, looked up not at all).
    pub(super) fn lines(
        &self,
        running_text: u64,
        addrs: &[(u64, Option<&str>)],
    ) -> Vec<Option<SourceLines>> {
        let shift = running_text.wrapping_sub(self.text);
        let wanted: Vec<usize> = (0..addrs.len()).filter(|&i| addrs[i].1.is_some()).collect();
        let vaddrs: Vec<u64> = wanted
            .iter()
            .map(|&i| addrs[i].0.wrapping_sub(shift))
            .collect();
        let mut out = vec![None; addrs.len()];
        if vaddrs.is_empty() {
            return out;
        }
        BLAZE.with_borrow_mut(|kept| {
            if kept.as_ref().is_none_or(|(p, _)| *p != self.path) {
                // Names are kallsyms' (C, never mangled): no demangling.
                let blaze = Symbolizer::builder().enable_demangling(false).build();
                *kept = Some((self.path.clone(), blaze));
            }
            let Some((_, blaze)) = kept.as_ref() else {
                return;
            };
            let src = Source::Elf(Elf::new(&self.path));
            let Ok(syms) = blaze.symbolize(&src, Input::VirtOffset(&vaddrs)) else {
                return;
            };
            for (s, &i) in syms.iter().zip(&wanted) {
                let (Some(sym), Some(name)) = (s.as_sym(), addrs[i].1) else {
                    continue;
                };
                if same_function(name, &sym.name) && sym.code_info.is_some() {
                    out[i] = Some(source_lines(sym));
                }
            }
        });
        out
    }
}

/// Whether kallsyms' `ours` and DWARF's `theirs` name one function: equal
/// once the compiler's clone suffixes (`.isra.0`, `.constprop.0`,
/// `.cold`, `.llvm.123`) are left off kallsyms' name, which DWARF does not
/// carry.
fn same_function(ours: &str, theirs: &str) -> bool {
    ours == theirs || ours.split('.').next() == Some(theirs)
}

fn running_build_id() -> Result<BuildId, KernelLinesError> {
    match kernel_build_id() {
        Ok(Some(id)) => Ok(id),
        Ok(None) => Err(KernelLinesError::RunningKernel(
            "the kernel's notes hold no GNU build ID".into(),
        )),
        Err(e) => Err(KernelLinesError::RunningKernel(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clone_suffixes_name_the_same_function() {
        assert!(same_function("do_sys_openat2", "do_sys_openat2"));
        assert!(same_function("dput.part.0", "dput"));
        assert!(same_function("__x64_sys_read.cold", "__x64_sys_read"));
        assert!(!same_function("vfs_read", "vfs_readv"));
        assert!(!same_function("vfs_readv", "vfs_read"));
    }

    #[test]
    fn places_start_with_the_build_id_path() {
        let id = BuildId::new(&[0xe4, 0x85, 0x77, 0x91]).unwrap();
        let p = vmlinux_places("7.3.4-bpfmux+", Some(&id));
        assert_eq!(p[0], Path::new("/usr/lib/debug/.build-id/e4/857791.debug"));
        assert_eq!(p[1], Path::new("/usr/lib/debug/boot/vmlinux-7.3.4-bpfmux+"));
        assert!(p.contains(&PathBuf::from("/lib/modules/7.3.4-bpfmux+/build/vmlinux")));
    }

    #[test]
    fn a_missing_file_says_so() {
        let running = BuildId::new(&[1, 2, 3]).unwrap();
        let e = KernelLines::open_for(Path::new("/nonexistent/vmlinux"), &running).unwrap_err();
        assert!(
            matches!(&e, KernelLinesError::Read { source, .. } if source.kind() == io::ErrorKind::NotFound),
            "{e}"
        );
    }

    #[test]
    fn another_kernels_file_is_refused_by_build_id() {
        // This test binary's build ID is not the made-up running one.
        let me = std::env::current_exe().unwrap();
        let id = read_build_id(&File::open(&me).unwrap())
            .unwrap()
            .expect("the test binary has a build ID (Debian's linker adds one)");
        let running = BuildId::new(&[0xaa; 20]).unwrap();
        assert_ne!(id, running);
        let e = KernelLines::open_for(&me, &running).unwrap_err();
        assert!(matches!(e, KernelLinesError::OtherKernel { .. }), "{e}");
        assert!(
            e.to_string()
                .contains("is not the running kernel's vmlinux"),
            "{e}"
        );
    }
}
