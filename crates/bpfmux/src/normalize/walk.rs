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
pub enum Source<'a> {
    Ioctl(IoctlSource<'a>),
    /// Text maps parsed lazily, line by line, as the walk advances.
    Text(TextSource),
    /// A complete, sorted list (cached or parsed up front).
    Known(KnownSource),
}

pub struct IoctlSource<'a> {
    pub maps: &'a File,
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

impl Source<'_> {
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
                n.calls.queries += 1;
                n.calls.build_id_queries += u64::from(s.want.build_id);
                let vma = procmap_query::query(s.maps, addr, flags, s.want, &mut n.qbuf)
                    .map_err(|e| NormalizeError::from_io(pid, "querying", e))?;
                if let (true, Some(v)) = (s.want.build_id, &vma) {
                    if v.is_file_backed() {
                        let key = FileKey::of(v);
                        if s.inline_ids.insert(key, v.build_id).is_some() {
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

/// Normalizes `addrs` (any order) against `source`, which delivers VMAs in
/// address order. Sorted input (what a caller that sorts its batch passes)
/// is walked in place; other input is walked in sorted order and the
/// results are put back in input order.
pub fn normalize(
    addrs: &[u64],
    source: &mut Source,
    n: &mut Normalizer,
    pid: u32,
) -> Result<Normalized, NormalizeError> {
    let mut mappings = Vec::new();
    if addrs.is_sorted() {
        let mut out = Vec::with_capacity(addrs.len());
        walk_sorted(addrs, source, n, pid, &mut mappings, |_, run, hit| {
            out.extend(run.iter().map(|&a| result(a, hit)));
        })?;
        return Ok(Normalized {
            mappings,
            addrs: out,
        });
    }
    let mut order: Vec<(u64, u32)> = addrs.iter().copied().zip(0..).collect();
    order.sort_unstable_by_key(|p| p.0);
    let sorted: Vec<u64> = order.iter().map(|p| p.0).collect();
    let mut out = vec![result(0, None); addrs.len()];
    walk_sorted(&sorted, source, n, pid, &mut mappings, |first, run, hit| {
        for (&a, &(_, i)) in run.iter().zip(&order[first..]) {
            out[i as usize] = result(a, hit);
        }
    })?;
    Ok(Normalized {
        mappings,
        addrs: out,
    })
}

/// A run of addresses inside one mapping: its index in the output and the
/// mapping's start and file offset.
#[derive(Clone, Copy)]
struct Hit {
    mapping: usize,
    start: u64,
    offset: u64,
}

fn result(addr: u64, hit: Option<Hit>) -> NormalizedAddr {
    NormalizedAddr {
        addr,
        resolved: hit.map(|h| Resolved {
            mapping: h.mapping,
            file_offset: addr - h.start + h.offset,
        }),
    }
}

/// The walk proper: one `source.next` per VMA that covers addresses (plus
/// one per gap), then whole runs of addresses at a time.
/// `emit(first, run, hit)` receives `addrs[first..first + run.len()]`, all
/// in the mapping `hit` or (`None`) all unmapped, in order.
fn walk_sorted(
    addrs: &[u64],
    source: &mut Source,
    n: &mut Normalizer,
    pid: u32,
    mappings: &mut Vec<Mapping>,
    mut emit: impl FnMut(usize, &[u64], Option<Hit>),
) -> Result<(), NormalizeError> {
    let mut k = 0;
    while let Some(&addr) = addrs.get(k) {
        // The first matching VMA ending above `addr` (sources guarantee
        // `end > addr`, so each round consumes at least one address).
        let Some(m) = source.next(addr, n, pid)? else {
            break;
        };
        let rest = &addrs[k..];
        // Addresses in the gap below it are not mapped.
        let gap = rest.partition_point(|&a| a < m.start);
        let inside = rest[gap..].partition_point(|&a| a < m.end);
        if gap > 0 {
            emit(k, &rest[..gap], None);
        }
        if inside > 0 {
            let hit = Hit {
                mapping: mappings.len(),
                start: m.start,
                offset: m.offset,
            };
            emit(k + gap, &rest[gap..gap + inside], Some(hit));
            // `m` is kept only because some address hit it.
            mappings.push(m);
        }
        k += gap + inside;
    }
    // Above the last matching VMA.
    if k < addrs.len() {
        emit(k, &addrs[k..], None);
    }
    Ok(())
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
