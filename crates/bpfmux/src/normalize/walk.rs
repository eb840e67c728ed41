//! The one address walk both backends share: sorted addresses against VMAs
//! delivered in address order by a [`Source`]. Keeping a single walk is what
//! makes the ioctl and text paths return identical results.

use std::collections::HashMap;
use std::fs::File;

use super::mapping::{BuildId, Mapping, Normalized, NormalizedAddr, Resolved};
use super::procmap_query::{self, Want};
use super::text_maps;
use super::{FileKey, KnownVmas, NormalizeError, Normalizer, VmaFilter};

/// Where VMAs come from.
pub enum Source {
    Ioctl(IoctlSource),
    /// Text maps parsed lazily, line by line, as the walk advances.
    Text(TextSource),
    /// A complete, sorted list (cached or parsed up front).
    Known(KnownSource),
}

pub struct IoctlSource {
    pub maps: File,
    pub flags: u64,
    pub want: Want,
    /// VMAs learned so far (sorted), consulted before asking the kernel.
    pub known: KnownVmas,
    pub cache: bool,
    /// Build IDs the kernel returned inline, per file. Inline asking stops
    /// once a file shows up twice: many VMAs of one file would otherwise
    /// have the kernel parse the same ELF each time.
    pub inline_ids: HashMap<FileKey, Option<BuildId>>,
}

pub struct TextSource {
    pub text: Vec<u8>,
    pub pos: usize,
    pub filter: VmaFilter,
}

pub struct KnownSource {
    pub known: KnownVmas,
    pub pos: usize,
}

/// The gate area is not a VMA of the address space: text maps prints it,
/// PROCMAP_QUERY cannot return it, so the text path drops it too.
const GATE_VMA: &[u8] = b"[vsyscall]";

impl Source {
    /// The first matching VMA with `end > addr` (covering `addr` or above
    /// it). Callers pass non-decreasing addresses.
    fn next(
        &mut self,
        addr: u64,
        n: &mut Normalizer,
        pid: u32,
    ) -> Result<Option<Mapping>, NormalizeError> {
        match self {
            Source::Ioctl(s) => {
                let known = &mut s.known.sorted;
                let i = known.partition_point(|m| m.end <= addr);
                if let Some(m) = known.get(i).filter(|m| m.start <= addr) {
                    return Ok(Some(m.clone()));
                }
                let flags = s.flags | procmap_query::COVERING_OR_NEXT_VMA;
                let vma = procmap_query::query(&s.maps, addr, flags, s.want, &mut n.qbuf)
                    .map_err(|e| NormalizeError::from_io(pid, "querying", e))?;
                if let (true, Some(v)) = (s.want.build_id, &vma) {
                    if v.is_file_backed() {
                        let key = FileKey::of(v);
                        if s.inline_ids.insert(key, v.build_id.clone()).is_some() {
                            s.want.build_id = false;
                        }
                    }
                }
                if let (true, Some(v)) = (s.cache, &vma) {
                    let j = known.partition_point(|m| m.start < v.start);
                    if known.get(j).is_none_or(|m| m.start != v.start) {
                        known.insert(j, v.clone());
                    }
                }
                Ok(vma)
            }
            Source::Text(s) => {
                while s.pos < s.text.len() {
                    let rest = &s.text[s.pos..];
                    let len = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
                    let raw = &rest[..len];
                    s.pos += len + 1;
                    if raw.is_empty() {
                        continue;
                    }
                    let line = text_maps::parse_line(raw).ok_or_else(|| NormalizeError::Parse {
                        pid,
                        line: String::from_utf8_lossy(raw).into_owned(),
                    })?;
                    if line.end <= addr
                        || !s.filter.accepts(line.perms.exec, line.is_file_backed())
                        || line.name == GATE_VMA
                    {
                        continue;
                    }
                    return Ok(Some(line.to_mapping()));
                }
                Ok(None)
            }
            Source::Known(s) => {
                let sorted = &s.known.sorted;
                s.pos += sorted[s.pos..].partition_point(|m| m.end <= addr);
                Ok(sorted.get(s.pos).cloned())
            }
        }
    }
}

/// Parses a whole text maps file into the VMAs passing `filter`.
pub fn parse_all(text: &[u8], filter: VmaFilter, pid: u32) -> Result<Vec<Mapping>, NormalizeError> {
    let mut out = Vec::new();
    for line in text_maps::lines(text) {
        let line = line.map_err(|line| NormalizeError::Parse { pid, line })?;
        if filter.accepts(line.perms.exec, line.is_file_backed()) && line.name != GATE_VMA {
            out.push(line.to_mapping());
        }
    }
    Ok(out)
}

/// Results that carry mappings whose build IDs get filled in afterwards.
pub trait HasMappings {
    fn mappings_mut(&mut self) -> &mut [Mapping];
}

impl HasMappings for Normalized {
    fn mappings_mut(&mut self) -> &mut [Mapping] {
        &mut self.mappings
    }
}

impl HasMappings for Vec<Mapping> {
    fn mappings_mut(&mut self) -> &mut [Mapping] {
        self
    }
}

/// (address, input index) sorted by address.
pub fn sort_addrs(addrs: &[u64]) -> Vec<(u64, u32)> {
    let mut v: Vec<(u64, u32)> = addrs
        .iter()
        .enumerate()
        .map(|(i, &a)| (a, i as u32))
        .collect();
    if !v.is_sorted_by_key(|p| p.0) {
        v.sort_unstable_by_key(|p| p.0);
    }
    v
}

pub fn normalize_sorted(
    sorted: &[(u64, u32)],
    n_addrs: usize,
    source: &mut Source,
    n: &mut Normalizer,
    pid: u32,
) -> Result<Normalized, NormalizeError> {
    let mut out = Normalized {
        mappings: Vec::new(),
        addrs: Vec::with_capacity(n_addrs),
    };
    // Filled in input order below; start as "unmapped".
    out.addrs.extend(sorted.iter().map(|_| NormalizedAddr {
        addr: 0,
        resolved: None,
    }));
    // The VMA the walk stands on: bounds, index in `out.mappings` once some
    // address hit it, and the mapping itself until then.
    let mut cur: Option<(u64, u64)> = None;
    let mut cur_idx: Option<usize> = None;
    let mut pending: Option<Mapping> = None;
    let mut exhausted = false;

    for &(addr, idx) in sorted {
        let slot = &mut out.addrs[idx as usize];
        slot.addr = addr;
        if cur.is_none_or(|(_, end)| addr >= end) {
            if exhausted {
                continue;
            }
            match source.next(addr, n, pid)? {
                Some(m) => {
                    cur = Some((m.start, m.end));
                    cur_idx = None;
                    pending = Some(m);
                }
                None => {
                    exhausted = true;
                    cur = None;
                    continue;
                }
            }
        }
        let Some((start, _)) = cur else { continue };
        if addr < start {
            continue; // in a gap before the next matching VMA
        }
        let i = match (cur_idx, pending.take()) {
            (Some(i), _) => i,
            (None, Some(m)) => {
                out.mappings.push(m);
                out.mappings.len() - 1
            }
            (None, None) => continue, // unreachable: pending set with cur
        };
        cur_idx = Some(i);
        slot.resolved = Some(Resolved {
            mapping: i,
            file_offset: out.mappings[i].file_offset(addr),
        });
    }
    Ok(out)
}

pub fn all(
    source: &mut Source,
    n: &mut Normalizer,
    pid: u32,
) -> Result<Vec<Mapping>, NormalizeError> {
    let mut out = Vec::new();
    let mut addr = 0;
    while let Some(m) = source.next(addr, n, pid)? {
        addr = m.end;
        out.push(m);
        if addr == u64::MAX {
            break;
        }
    }
    Ok(out)
}
