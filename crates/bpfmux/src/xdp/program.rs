//! The user's XDP programs: `PROG.o[:section]` specs, finding the program in
//! its object before anything touches the kernel, and loading it either as a
//! plain XDP program or as an extension (freplace) of a dispatcher slot.

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use super::{invalid, Context, Result};
use libbpf_rs::libbpf_sys;
use libbpf_rs::{AsRawLibbpf, ObjectBuilder, OpenObject, ProgramType};
use serde::{Deserialize, Serialize};

use super::action::ActionSet;

/// One program of a set, as the user named it.
#[derive(Clone, Debug)]
pub struct ProgSpec {
    /// The BPF object file.
    pub object: PathBuf,
    /// Program (function) name or ELF section; None = the object's only
    /// XDP program.
    pub section: Option<String>,
    /// Return codes after which the next program runs.
    pub chain_on: ActionSet,
}

impl ProgSpec {
    /// Parses `PATH[:SECTION]`. A path that exists as given wins over a
    /// split at its last ':' (so paths with colons still work).
    pub fn parse(s: &str, chain_on: ActionSet) -> Result<Self> {
        if s.is_empty() {
            invalid!("empty program spec (expected PROG.o[:section])");
        }
        let whole_is_a_file = Path::new(s).exists();
        let (object, section) = match s.rsplit_once(':') {
            Some((path, sec)) if !whole_is_a_file && !sec.contains('/') => {
                if sec.is_empty() {
                    invalid!("'{s}': empty section after ':' (expected PROG.o[:section])");
                }
                (PathBuf::from(path), Some(sec.to_string()))
            }
            _ => (PathBuf::from(s), None),
        };
        Ok(Self {
            object,
            section,
            chain_on,
        })
    }

    /// `OBJECT` or `OBJECT:PROGRAM`, as given.
    pub fn display(&self) -> String {
        match &self.section {
            Some(sec) => format!("{}:{sec}", self.object.display()),
            None => self.object.display().to_string(),
        }
    }
}

/// Which object file a loaded program came from, precise enough to tell
/// whether a later attach names the very same program (then it is kept
/// running instead of being loaded again).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Origin {
    /// Absolute path of the object.
    pub object: PathBuf,
    /// The program's function name in the object.
    pub program: String,
    /// ELF section of the program.
    pub section: String,
    /// The object's size when loaded (a change means a new program).
    pub size: u64,
    /// Its modification time, in nanoseconds.
    pub mtime_ns: u128,
}

/// A spec checked against its object file: the program exists and is XDP.
#[derive(Clone, Debug)]
pub struct Resolved {
    pub spec: ProgSpec,
    pub origin: Origin,
}

/// Largest BPF object file `bpfmux xdp` reads: far above any real XDP object (tens of KiB),
/// small enough that a wrong path (a disk image, `/dev/zero`) fails at once.
const MAX_OBJECT_BYTES: u64 = 64 << 20;

fn open(path: &Path) -> Result<OpenObject> {
    let len = std::fs::metadata(path)
        .with_context(|| format!("BPF object {}", path.display()))?
        .len();
    if len > MAX_OBJECT_BYTES {
        invalid!(
            "{} is not a BPF object: {} bytes, more than the {} MiB limit",
            path.display(),
            len,
            MAX_OBJECT_BYTES >> 20
        );
    }
    let mut magic = [0u8; 4];
    let is_elf = std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic))
        .is_ok()
        && magic == *b"\x7fELF";
    if !is_elf {
        invalid!("{} is not a BPF object (not an ELF file)", path.display());
    }
    ObjectBuilder::default()
        .open_file(path)
        .with_context(|| format!("open BPF object {}", path.display()))
}

/// Finds the spec's program in its object without loading anything.
pub fn resolve(spec: &ProgSpec) -> Result<Resolved> {
    let path = &spec.object;
    let meta = std::fs::metadata(path).with_context(|| format!("BPF object {}", path.display()))?;
    if !meta.is_file() {
        invalid!("BPF object {}: not a regular file", path.display());
    }
    let abs =
        std::fs::canonicalize(path).with_context(|| format!("BPF object {}", path.display()))?;
    let obj = open(path)?;
    let progs: Vec<(String, String, ProgramType)> = obj
        .progs()
        .map(|p| {
            (
                p.name().to_string_lossy().into_owned(),
                p.section().to_string_lossy().into_owned(),
                p.prog_type(),
            )
        })
        .collect();
    let list = || {
        let all: Vec<String> = progs
            .iter()
            .map(|(n, s, _)| format!("{n} (section {s})"))
            .collect();
        if all.is_empty() {
            "no programs".to_string()
        } else {
            all.join(", ")
        }
    };
    let (name, section, ty) = match &spec.section {
        Some(want) => {
            let by_name: Vec<_> = progs.iter().filter(|(n, _, _)| n == want).collect();
            let by_section: Vec<_> = progs.iter().filter(|(_, s, _)| s == want).collect();
            match (by_name.as_slice(), by_section.as_slice()) {
                ([one], _) | ([], [one]) => (*one).clone(),
                ([], []) => invalid!(
                    "no program or section '{want}' in {} (it has: {})",
                    path.display(),
                    list()
                ),
                _ => invalid!(
                    "section '{want}' of {} holds several programs; name one: {}",
                    path.display(),
                    by_section
                        .iter()
                        .map(|(n, _, _)| n.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }
        }
        None => {
            let xdp: Vec<_> = progs
                .iter()
                .filter(|(_, _, t)| *t == ProgramType::Xdp)
                .collect();
            match xdp.as_slice() {
                [one] => (*one).clone(),
                [] => invalid!("no XDP program in {} (it has: {})", path.display(), list()),
                _ => invalid!(
                    "{} has several XDP programs; pick one with {}:NAME (it has: {})",
                    path.display(),
                    path.display(),
                    list()
                ),
            }
        }
    };
    if ty != ProgramType::Xdp {
        invalid!(
            "program {name} in {} is a {ty:?} program (section {section}), not XDP",
            path.display()
        );
    }
    if section.starts_with("xdp.frags") || section.starts_with("xdp/frags") {
        // The dispatcher would have to be loaded with frags support too
        // and every program of the set would have to agree.
        return Err(super::Refusal::Frags {
            program: name.clone(),
            path: path.clone(),
        }
        .into());
    }
    let mtime_ns = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    Ok(Resolved {
        spec: spec.clone(),
        origin: Origin {
            object: abs,
            program: name,
            section,
            size: meta.len(),
            mtime_ns,
        },
    })
}

/// How to load a resolved program.
pub enum LoadAs<'a> {
    /// A plain XDP program (attached directly, or a kernel chain member).
    Xdp,
    /// An extension replacing global function `func` of program `target`.
    Extension { target: &'a OwnedFd, func: &'a str },
}

/// Loads only the resolved program of its object (its maps come along) and
/// returns its descriptor; the object's other programs stay unloaded.
pub fn load(res: &Resolved, how: LoadAs<'_>) -> Result<OwnedFd> {
    let path = &res.origin.object;
    let mut obj = open(path)?;
    let mut found = false;
    for mut prog in obj.progs_mut() {
        let me = prog.name().to_string_lossy() == res.origin.program.as_str();
        prog.set_autoload(me);
        if !me {
            continue;
        }
        found = true;
        if let LoadAs::Extension { target, func } = &how {
            prog.set_prog_type(ProgramType::Ext);
            // Extensions take their attach point from the target, so the
            // expected attach type (BPF_XDP from the section) must be 0.
            // SAFETY: valid program pointer from the open object.
            let rc = unsafe {
                libbpf_sys::bpf_program__set_expected_attach_type(
                    prog.as_libbpf_object().as_ptr(),
                    0,
                )
            };
            if rc != 0 {
                invalid!("set expected attach type: errno {}", -rc);
            }
            use std::os::fd::AsRawFd;
            prog.set_attach_target(target.as_fd().as_raw_fd(), Some(func.to_string()))
                .with_context(|| format!("target dispatcher function {func}"))?;
        }
    }
    if !found {
        invalid!(
            "program {} vanished from {} (file changed?)",
            res.origin.program,
            path.display()
        );
    }
    let what = match &how {
        LoadAs::Xdp => "as XDP".to_string(),
        LoadAs::Extension { func, .. } => format!("as an extension of dispatcher {func}"),
    };
    let loaded = obj.load().with_context(|| {
        format!(
            "load program {} from {} {what} (the verifier log, if any, is above)",
            res.origin.program,
            path.display()
        )
    })?;
    let prog = loaded
        .progs()
        .find(|p| p.name().to_string_lossy() == res.origin.program.as_str())
        .with_context(|| format!("loaded object lost program {}", res.origin.program))?;
    // Keep the program alive past the object: its maps stay referenced by
    // the program itself.
    prog.as_fd()
        .try_clone_to_owned()
        .context("duplicate program descriptor")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_oversized_object_is_refused_before_reading() {
        let dir = std::env::temp_dir().join(format!("bpfmux-xdp-big-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("big.o");
        // Sparse: an ELF magic and then a hole past the limit.
        let f = std::fs::File::create(&path).unwrap();
        std::io::Write::write_all(&mut &f, b"\x7fELF").unwrap();
        f.set_len(MAX_OBJECT_BYTES + 1).unwrap();
        let spec = ProgSpec {
            object: path.clone(),
            section: None,
            chain_on: ActionSet::DEFAULT,
        };
        let err = crate::error_text(&resolve(&spec).unwrap_err());
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(err.contains("MiB limit"), "{err}");
    }
}
