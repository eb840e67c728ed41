//! What normalization returns: mappings (VMAs) and per-address results.

use std::borrow::Cow;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Serialize, Serializer};

/// VMA permissions as shown in `/proc/<pid>/maps` (`r-xp`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Perms {
    /// `r`.
    pub read: bool,
    /// `w`.
    pub write: bool,
    /// `x`.
    pub exec: bool,
    /// `VM_MAYSHARE`: `s` instead of `p` in the text file.
    pub shared: bool,
}

impl fmt::Display for Perms {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = |on: bool, ch: char| if on { ch } else { '-' };
        write!(
            f,
            "{}{}{}{}",
            c(self.read, 'r'),
            c(self.write, 'w'),
            c(self.exec, 'x'),
            if self.shared { 's' } else { 'p' }
        )
    }
}

impl Serialize for Perms {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Longest build ID the kernel reports (`BUILD_ID_SIZE_MAX`); our own ELF
/// reader applies the same limit.
pub const BUILD_ID_MAX: usize = 20;

/// An ELF build ID (raw bytes; shown as hex). Stored inline: copying one
/// into every mapping of a batch costs no allocation.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct BuildId {
    len: u8,
    bytes: [u8; BUILD_ID_MAX],
}

impl BuildId {
    /// `None` if `b` is empty or longer than [`BUILD_ID_MAX`].
    pub fn new(b: &[u8]) -> Option<Self> {
        if b.is_empty() || b.len() > BUILD_ID_MAX {
            return None;
        }
        let mut bytes = [0; BUILD_ID_MAX];
        bytes[..b.len()].copy_from_slice(b);
        Some(Self {
            len: b.len() as u8,
            bytes,
        })
    }

    /// The ID's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

impl fmt::Display for BuildId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.as_bytes()
            .iter()
            .try_for_each(|b| write!(f, "{b:02x}"))
    }
}

impl fmt::Debug for BuildId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BuildId({self})")
    }
}

impl Serialize for BuildId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// A raw path as `/proc/<pid>/maps` shows it: each '\n' as `\012`
/// (fs/proc/task_mmu.c prints paths with seq_file_path(..., "\n")). Both
/// backends report names in this form, so they agree on every name.
pub fn escape_name(raw: &[u8]) -> PathBuf {
    use std::os::unix::ffi::OsStringExt;
    if !raw.contains(&b'\n') {
        return PathBuf::from(std::ffi::OsString::from_vec(raw.to_vec()));
    }
    let mut out = Vec::with_capacity(raw.len() + 8);
    for &b in raw {
        if b == b'\n' {
            out.extend_from_slice(b"\\012");
        } else {
            out.push(b);
        }
    }
    PathBuf::from(std::ffi::OsString::from_vec(out))
}

/// The paths a name as shown may stand for: itself, and with `\012` read
/// back as '\n' when it has one (the escape is ambiguous).
pub fn unescaped_candidates(name: &std::path::Path) -> Vec<PathBuf> {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    const ESC: &[u8] = b"\\012";
    let b = name.as_os_str().as_bytes();
    let mut out = vec![name.to_path_buf()];
    if b.windows(ESC.len()).any(|w| w == ESC) {
        let mut raw = Vec::with_capacity(b.len());
        let mut i = 0;
        while i < b.len() {
            if b[i..].starts_with(ESC) {
                raw.push(b'\n');
                i += ESC.len();
            } else {
                raw.push(b[i]);
                i += 1;
            }
        }
        out.push(PathBuf::from(std::ffi::OsString::from_vec(raw)));
    }
    out
}

/// A name as text: each byte that is not part of valid UTF-8 is written
/// `\xNN` (two lowercase hex digits); everything else is kept. File names
/// are bytes, JSON strings are Unicode: this is how `--json` output (and
/// `bpfmux sym`'s text) shows names that are not UTF-8.
pub fn display_name(name: &Path) -> Cow<'_, str> {
    use std::fmt::Write as _;
    use std::os::unix::ffi::OsStrExt;
    let mut rest = name.as_os_str().as_bytes();
    let mut out = String::new();
    loop {
        match std::str::from_utf8(rest) {
            Ok(s) if out.is_empty() => return Cow::Borrowed(s),
            Ok(s) => {
                out.push_str(s);
                return Cow::Owned(out);
            }
            Err(e) => {
                let (ok, bad) = rest.split_at(e.valid_up_to());
                // The first `valid_up_to` bytes are UTF-8.
                out.push_str(std::str::from_utf8(ok).unwrap_or_default());
                let n = e.error_len().unwrap_or(bad.len());
                for b in &bad[..n] {
                    let _ = write!(out, "\\x{b:02x}");
                }
                rest = &bad[n..];
            }
        }
    }
}

/// Serializes a path as [`display_name`] shows it (serde's own `Path`
/// serializer fails on names that are not UTF-8).
pub(crate) fn path_text<S: Serializer>(p: &Path, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&display_name(p))
}

/// [`path_text`] for optional paths.
pub(crate) fn opt_path_text<S: Serializer>(p: &Option<PathBuf>, s: S) -> Result<S::Ok, S::Error> {
    match p {
        Some(p) => path_text(p, s),
        None => s.serialize_none(),
    }
}

/// One VMA of a process, as the kernel reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Mapping {
    /// First address.
    #[serde(serialize_with = "hex")]
    pub start: u64,
    /// Exclusive.
    #[serde(serialize_with = "hex")]
    pub end: u64,
    /// Read, write, execute, shared.
    pub perms: Perms,
    /// File offset of `start` (0 for anonymous mappings).
    #[serde(serialize_with = "hex")]
    pub offset: u64,
    /// Device of the backing file (0 for anonymous mappings).
    pub dev_major: u32,
    /// See `dev_major`.
    pub dev_minor: u32,
    /// Inode of the backing file (0 for anonymous mappings).
    pub inode: u64,
    /// Backing file path (with " (deleted)" if unlinked), or a special name
    /// like `[heap]`, `[vdso]`, `[anon:name]`; `None` for plain anonymous.
    /// As the text maps file shows it: a newline is `\012` ([`escape_name`]).
    /// In JSON, bytes that are not UTF-8 are `\xNN` ([`display_name`]).
    #[serde(serialize_with = "opt_path_text")]
    pub name: Option<PathBuf>,
    /// ELF build ID of the backing file, when asked for and present.
    pub build_id: Option<BuildId>,
}

impl Mapping {
    /// Whether a file backs this VMA (the kernel prints dev/inode only then).
    pub fn is_file_backed(&self) -> bool {
        self.inode != 0 || self.dev_major != 0 || self.dev_minor != 0
    }

    /// Whether this is the vDSO (not a file: its image is in the process's
    /// memory only).
    pub(crate) fn is_vdso(&self) -> bool {
        self.name
            .as_deref()
            .is_some_and(|n| n.as_os_str() == "[vdso]")
    }

    /// Whether `addr` is in `[start, end)`.
    pub fn contains(&self, addr: u64) -> bool {
        self.start <= addr && addr < self.end
    }

    /// File offset of `addr`, which must lie inside this mapping.
    pub fn file_offset(&self, addr: u64) -> u64 {
        addr - self.start + self.offset
    }
}

/// Normalization result for one input address.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NormalizedAddr {
    /// The address as given.
    #[serde(serialize_with = "hex")]
    pub addr: u64,
    /// `None`: no mapping matching the filter covers this address.
    pub resolved: Option<Resolved>,
}

/// Where an address is: its mapping and the offset in the mapping's file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Resolved {
    /// Index into [`Normalized::mappings`].
    pub mapping: usize,
    /// The address's offset in the mapped file.
    #[serde(serialize_with = "hex")]
    pub file_offset: u64,
}

/// Addresses of one process, normalized. `addrs` is in input order;
/// `mappings` holds each mapping that covers at least one of them, by start.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Normalized {
    /// Each mapping that covers at least one address, by start.
    pub mappings: Vec<Mapping>,
    /// The addresses, in input order.
    pub addrs: Vec<NormalizedAddr>,
}

impl Normalized {
    /// The mapping of the `i`th address, if one covers it.
    pub fn mapping_of(&self, i: usize) -> Option<&Mapping> {
        let r = self.addrs.get(i)?.resolved?;
        self.mappings.get(r.mapping)
    }
}

/// A number as a `0x…` string in JSON: 64-bit addresses do not survive
/// JSON tools that read numbers as doubles (jq, JavaScript).
pub(crate) fn hex<S: Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&format_args!("{v:#x}"))
}
