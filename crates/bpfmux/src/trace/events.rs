//! Reading what the programs recorded: per-function counters and latency
//! histograms (per-CPU arrays, summed here), per-call events (ring buffer),
//! stack counts, and what could not be recorded. Layouts mirror
//! src/bpf/trace.h.

use std::collections::{BTreeMap, HashMap};

use libbpf_rs::{MapCore, MapFlags};
use serde::Serialize;

use super::btf::{Format, Proto};
use super::program::{possible_cpus, read_percpu_array, TraceObject, HIST_BUCKETS};
use super::{Error, Step as _};
use crate::normalize::capture::BuildIdFrame;
use crate::normalize::BuildId;
use crate::symbolize::KernelSymbolizer;

/// Mirrors `struct trace_func_stats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FuncStats {
    /// Calls counted.
    pub calls: u64,
    /// Calls whose latency was measured (entry and exit both seen).
    pub lat_count: u64,
    /// Their latencies added up, in nanoseconds.
    pub lat_sum_ns: u64,
    /// The longest of them, in nanoseconds.
    pub lat_max_ns: u64,
    /// Calls made to fail (`bpfmux inject`).
    pub injected: u64,
    /// Calls a filter looked at (`calls`: those it passed); 0 without one.
    pub filter_seen: u64,
}

impl FuncStats {
    fn add(&mut self, o: &FuncStats) {
        self.calls += o.calls;
        self.lat_count += o.lat_count;
        self.lat_sum_ns += o.lat_sum_ns;
        self.lat_max_ns = self.lat_max_ns.max(o.lat_max_ns);
        self.injected += o.injected;
        self.filter_seen += o.filter_seen;
    }

    /// Counters accumulated since `earlier` (max stays the running max).
    pub fn since(&self, earlier: &FuncStats) -> FuncStats {
        FuncStats {
            calls: self.calls.saturating_sub(earlier.calls),
            lat_count: self.lat_count.saturating_sub(earlier.lat_count),
            lat_sum_ns: self.lat_sum_ns.saturating_sub(earlier.lat_sum_ns),
            lat_max_ns: self.lat_max_ns,
            injected: self.injected.saturating_sub(earlier.injected),
            filter_seen: self.filter_seen.saturating_sub(earlier.filter_seen),
        }
    }
}

/// A log2 latency histogram: bucket `b` counts calls of `[2^b, 2^(b+1))` ns.
pub type Hist = [u64; HIST_BUCKETS];

/// Totals since attach.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// Per function, in selection order.
    pub stats: Vec<FuncStats>,
    /// Per function, when latency is measured.
    pub hist: Option<Vec<Hist>>,
    /// Ring buffer full, stack map full, nesting too deep.
    pub lost_events: u64,
    /// Stacks the stack map had no room for.
    pub lost_stacks: u64,
    /// Calls nested too deeply to pair entry and exit.
    pub lost_depth: u64,
    /// Error chains the ring buffer had no room for.
    pub lost_chains: u64,
    /// Call graph paths the map had no room for.
    pub lost_graph: u64,
}

/// The native-endian u64 at `off` (the caller checked the length).
pub(crate) fn u64_at(b: &[u8], off: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[off..off + 8]);
    u64::from_ne_bytes(a)
}

pub struct Reader {
    nr_funcs: usize,
    cpus: usize,
    latency: bool,
}

impl Reader {
    pub fn new(nr_funcs: usize, latency: bool) -> Result<Self, Error> {
        Ok(Self {
            nr_funcs,
            cpus: possible_cpus()?,
            latency,
        })
    }

    pub fn snapshot(&self, obj: &TraceObject) -> Result<Snapshot, Error> {
        let n = self.nr_funcs;
        let stats_map = obj.map("stats")?;
        let raw =
            read_percpu_array(&stats_map, n, self.cpus).step("reading per-function counters")?;
        let vsize = stats_map.value_size() as usize;
        let mut stats = vec![FuncStats::default(); n];
        for (i, s) in stats.iter_mut().enumerate() {
            for cpu in 0..self.cpus {
                let off = (i * self.cpus + cpu) * vsize;
                s.add(&FuncStats {
                    calls: u64_at(&raw, off),
                    lat_count: u64_at(&raw, off + 8),
                    lat_sum_ns: u64_at(&raw, off + 16),
                    lat_max_ns: u64_at(&raw, off + 24),
                    injected: u64_at(&raw, off + 32),
                    filter_seen: u64_at(&raw, off + 40),
                });
            }
        }
        let hist = if self.latency {
            let m = obj.map("hist")?;
            let raw = read_percpu_array(&m, n * HIST_BUCKETS, self.cpus)
                .step("reading latency histograms")?;
            let mut h = vec![[0u64; HIST_BUCKETS]; n];
            for (i, hf) in h.iter_mut().enumerate() {
                for (b, slot) in hf.iter_mut().enumerate() {
                    for cpu in 0..self.cpus {
                        *slot += u64_at(&raw, ((i * HIST_BUCKETS + b) * self.cpus + cpu) * 8);
                    }
                }
            }
            Some(h)
        } else {
            None
        };
        let lost_map = obj.map("lost")?;
        let mut lost = [0u64; 5];
        for (k, slot) in lost.iter_mut().enumerate() {
            let key = (k as u32).to_ne_bytes();
            if let Some(per_cpu) = lost_map
                .lookup_percpu(&key, MapFlags::ANY)
                .step("reading loss counters")?
            {
                *slot = per_cpu.iter().map(|v| u64_at(v, 0)).sum();
            }
        }
        Ok(Snapshot {
            stats,
            hist,
            lost_events: lost[0],
            lost_stacks: lost[1],
            lost_depth: lost[2],
            lost_chains: lost[3],
            lost_graph: lost[4],
        })
    }
}

/// Which side of a call an [`Event`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EventKind {
    /// The call, with its arguments.
    Entry,
    /// The return, with the value and the duration.
    Exit,
}

/// A string an entry event carries: read by the program, at the call, from
/// a `char *` argument (at most [`MAX_STRINGS`] per call, each up to the
/// bound [`crate::trace::TraceOptions::string_size`] sets).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EventString {
    /// The argument slot the pointer was in (an index of [`Event::args`]).
    pub slot: usize,
    /// Its bytes up to the NUL, without it.
    pub bytes: Vec<u8>,
    /// It filled the bound: the string may go on.
    pub truncated: bool,
    /// Read from user memory (the pointer was below the kernel's half of
    /// the address space), else from kernel memory.
    pub user: bool,
    /// The read failed with this errno (`bytes` is empty then).
    pub error: Option<i32>,
}

/// One call of a captured function (entry with arguments, exit with the
/// return value and duration).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// When, in `CLOCK_MONOTONIC` nanoseconds.
    pub ts_ns: u64,
    /// Index of the function in the selection.
    pub func: usize,
    /// Entry or exit.
    pub kind: EventKind,
    /// The argument slots (entry; empty for an exit), in the order the
    /// prototype declares the arguments: stack-passed ones (7th and on)
    /// included, a struct of 9 to 16 bytes passed by value taking two
    /// ([`crate::trace::Proto::arg_places`] with `kprobe` false).
    pub args: Vec<u64>,
    /// The strings read from `char *` arguments (entry).
    pub strings: Vec<EventString>,
    /// Kernel symbols (`name+0xoff`) of argument slots that point into
    /// kernel code, by slot: filled by the session from kallsyms.
    pub symbols: BTreeMap<usize, String>,
    /// The structs pointer arguments point at, read by the program at the
    /// call (`--args-depth`), as text (`{field=value, ...}`) by slot.
    pub pointees: BTreeMap<usize, String>,
    /// The return value (exit).
    pub ret: u64,
    /// Time since the entry (exit; 0 when unknown).
    pub duration_ns: u64,
    /// The process.
    pub tgid: u32,
    /// The thread.
    pub tid: u32,
    /// The thread's name.
    pub comm: String,
}

/// `TRACE_EVENT_VERSION`: the record layout of trace.h this reader knows.
pub const EVENT_VERSION: u8 = 3;
/// `struct trace_event`, every record's head: 3 u64, 3 u32, 4 u8, `comm[16]`.
pub const EVENT_SIZE: usize = 56;
/// `struct trace_entry_event` without its strings and pointees: the head,
/// 12 argument slots, [`MAX_STRINGS`] string heads of 8 bytes, the sizes
/// (8 bytes) and [`MAX_DEREFS`] pointee results.
pub const ENTRY_SIZE: usize = EVENT_SIZE + 8 * MAX_ARGS + 8 * MAX_STRINGS + 8 + 4 * MAX_DEREFS;
/// `TRACE_MAX_DEREFS`: pointee reads per call (`--args-depth`).
pub const MAX_DEREFS: usize = 8;
/// Where `str_size` and `deref_size` are in an entry record.
const SIZES_AT: usize = EVENT_SIZE + 8 * MAX_ARGS + 8 * MAX_STRINGS;
/// `TRACE_MAX_ARGS`: argument slots an entry event has room for
/// (MAX_BPF_FUNC_ARGS, what a trampoline saves).
pub const MAX_ARGS: usize = 12;
/// `TRACE_MAX_STRS`: strings an entry event carries at most.
pub const MAX_STRINGS: usize = 2;
/// `TRACE_STR_MAX`: the largest bound of a captured string, in bytes.
pub const MAX_STRING_SIZE: usize = 1024;

/// Bits 35-38 of the attach cookie: argument slots to read (trace.h).
const COOKIE_NARGS_SHIFT: u32 = 35;
/// Bits 39-43 and 44-48: string i (`TRACE_COOKIE_STR_*`).
const COOKIE_STR_SHIFT: u32 = 39;
const COOKIE_STR_BITS: u32 = 5;
const COOKIE_STR_ON: u64 = 0x10;

/// The attach cookie's bits for a captured function (trace.h): how many
/// argument slots its program reads, and in which slots the pointers of
/// the strings to read are (its first [`MAX_STRINGS`] `char *`
/// arguments), where a kprobe program (`kprobe`) or a trampoline program
/// finds them ([`Proto::arg_places`]).
pub(crate) fn capture_bits(proto: &Proto, kprobe: bool) -> u64 {
    let places = proto.arg_places(kprobe);
    let nargs = places
        .iter()
        .map(|p| p.slot + usize::from(p.slots))
        .max()
        .unwrap_or(0)
        .min(MAX_ARGS);
    let mut bits = (nargs as u64) << COOKIE_NARGS_SHIFT;
    let strings = proto
        .params
        .iter()
        .zip(&places)
        .filter(|(p, at)| matches!(p.format, Format::Str { .. }) && at.slot < MAX_ARGS)
        .take(MAX_STRINGS);
    for (i, (_, at)) in strings.enumerate() {
        bits |= (COOKIE_STR_ON | at.slot as u64) << (COOKIE_STR_SHIFT + i as u32 * COOKIE_STR_BITS);
    }
    bits
}

/// Offsets past this from a kernel symbol are not in it (JIT code, gaps).
const MAX_SYMBOL_OFFSET: u64 = 1 << 20;

/// Names the argument slots of an entry event that point into kernel code
/// (function pointers, other pointers, unsigned 64-bit values such as an
/// instruction pointer) with their kernel function, `name+0xoff`, into
/// [`Event::symbols`].
pub(crate) fn name_symbols(e: &mut Event, proto: &Proto, ksyms: &KernelSymbolizer) {
    use super::btf::ValueKind;
    use crate::symbolize::{SymResult, SymbolKind};
    for (p, at) in proto.params.iter().zip(proto.arg_places(false)) {
        let code = matches!(p.format, Format::FuncPtr)
            || matches!(p.kind, ValueKind::Pointer | ValueKind::Unsigned(64));
        let Some(&v) = e.args.get(at.slot) else {
            continue;
        };
        // Kernel addresses have the top bit set; ERR_PTR values are not addresses.
        if !code || at.slots != 1 || (v as i64) >= 0 || (v as i64) >= -4095 {
            continue;
        }
        if let Some(SymResult::Symbol(s)) = ksyms.symbolize(&[v]).pop().map(|s| s.result) {
            if s.kind == SymbolKind::Function && s.offset <= MAX_SYMBOL_OFFSET {
                e.symbols
                    .insert(at.slot, format!("{}+{:#x}", s.name, s.offset));
            }
        }
    }
}

/// Whether a function has an argument the program reads a string from.
pub(crate) fn has_strings(proto: &Proto) -> bool {
    proto
        .params
        .iter()
        .any(|p| matches!(p.format, Format::Str { .. }))
}

impl Event {
    /// Decodes a ring buffer record as the program wrote it; `None` for a
    /// short one, an unknown kind or another layout version. Argument slots
    /// are in the program's order: for a kprobe program registers, then
    /// stack ([`Event::to_declared_order`] puts them in the prototype's).
    pub fn parse(b: &[u8]) -> Option<Event> {
        if b.len() < EVENT_SIZE || b[37] != EVENT_VERSION {
            return None;
        }
        let u32_at = |off: usize| u32::from_ne_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]]);
        let kind = match b[36] {
            1 => EventKind::Entry,
            2 => EventKind::Exit,
            _ => return None,
        };
        let comm = &b[40..56];
        let end = comm.iter().position(|&c| c == 0).unwrap_or(comm.len());
        let mut e = Event {
            ts_ns: u64_at(b, 0),
            ret: u64_at(b, 8),
            duration_ns: u64_at(b, 16),
            func: u32_at(24) as usize,
            tgid: u32_at(28),
            tid: u32_at(32),
            kind,
            args: Vec::new(),
            strings: Vec::new(),
            symbols: BTreeMap::new(),
            pointees: BTreeMap::new(),
            comm: String::from_utf8_lossy(&comm[..end]).into_owned(),
        };
        if kind == EventKind::Exit {
            return Some(e);
        }
        if b.len() < ENTRY_SIZE {
            return None;
        }
        let (nargs, nstrs) = (usize::from(b[38]).min(MAX_ARGS), usize::from(b[39]));
        e.args = (0..nargs).map(|i| u64_at(b, EVENT_SIZE + 8 * i)).collect();
        let size = usize::from(u16::from_ne_bytes([b[SIZES_AT], b[SIZES_AT + 1]]));
        if nstrs == 0 || b.len() < ENTRY_SIZE + MAX_STRINGS * size {
            return Some(e);
        }
        for i in 0..nstrs.min(MAX_STRINGS) {
            let head = EVENT_SIZE + 8 * MAX_ARGS + 8 * i;
            let len = u32_at(head) as i32;
            if len == 0 {
                continue;
            }
            let mut s = EventString {
                slot: usize::from(b[head + 4]),
                user: b[head + 5] != 0,
                ..Default::default()
            };
            if len < 0 {
                s.error = Some(-len);
            } else {
                let data = &b[ENTRY_SIZE + i * size..ENTRY_SIZE + (i + 1) * size];
                let n = (len as usize).min(size);
                let nul = data[..n].iter().position(|&c| c == 0).unwrap_or(n);
                s.bytes = data[..nul].to_vec();
                s.truncated = n == size;
            }
            e.strings.push(s);
        }
        Some(e)
    }

    /// Puts a kprobe program's argument slots (six registers, then the
    /// stack) in the order `proto` declares the arguments, as a trampoline
    /// program reads them; the strings' slots follow. Slots no argument
    /// has are left out.
    pub fn to_declared_order(&mut self, proto: &Proto) {
        let (from, to) = (proto.arg_places(true), proto.arg_places(false));
        let len = to.last().map_or(0, |p| p.slot + usize::from(p.slots));
        let mut args = vec![0u64; len];
        for (f, t) in from.iter().zip(&to) {
            for k in 0..usize::from(t.slots) {
                if let (Some(v), Some(d)) = (self.args.get(f.slot + k), args.get_mut(t.slot + k)) {
                    *d = *v;
                }
            }
        }
        // Slots a kprobe program could not read (past its stack slots) stay 0.
        args.truncate(len.min(MAX_ARGS));
        self.args = args;
        for s in &mut self.strings {
            if let Some(i) = from.iter().position(|p| p.slot == s.slot) {
                s.slot = to[i].slot;
            }
        }
    }
}

/// The pointee reads of an entry record (`--args-depth`): each read's
/// result (0, -errno, 1: not made) and the pointee area; `None` for an
/// exit, a record of another version, or one without pointees.
pub(crate) fn pointee_area(b: &[u8]) -> Option<([i32; MAX_DEREFS], &[u8])> {
    if b.len() < ENTRY_SIZE || b[37] != EVENT_VERSION || b[36] != 1 {
        return None;
    }
    let u16_at = |off: usize| usize::from(u16::from_ne_bytes([b[off], b[off + 1]]));
    let (str_size, deref_size) = (u16_at(SIZES_AT), u16_at(SIZES_AT + 2));
    if deref_size == 0 {
        return None;
    }
    let rets = std::array::from_fn(|i| {
        let at = SIZES_AT + 8 + 4 * i;
        i32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
    });
    let start = ENTRY_SIZE + MAX_STRINGS * str_size;
    Some((rets, b.get(start..start + 2 * deref_size)?))
}

/// Mirrors `struct trace_stack_key`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StackKey {
    pub func: usize,
    pub tgid: u32,
    pub kstack: Option<u32>,
    pub ustack: Option<u32>,
}

/// Stack counts with the raw addresses of each stack.
#[derive(Debug, Default)]
pub struct Stacks {
    pub counts: Vec<(StackKey, u64)>,
    pub addrs: HashMap<u32, Vec<u64>>,
}

impl StackKey {
    /// Decodes a `stack_counts` key; `None` for a short one.
    fn parse(key: &[u8]) -> Option<Self> {
        let i32_at = |off: usize| {
            let b = key.get(off..off + 4)?;
            Some(i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
        };
        let stack_id = |v: i32| (v >= 0).then_some(v as u32);
        Some(StackKey {
            func: i32_at(0)? as u32 as usize,
            tgid: i32_at(4)? as u32,
            kstack: stack_id(i32_at(8)?),
            ustack: stack_id(i32_at(12)?),
        })
    }
}

/// The addresses of stack `id` in the `stacks` map (empty when it is not
/// there).
pub fn stack_addrs(obj: &TraceObject, id: u32) -> Result<Vec<u64>, Error> {
    let raw = obj
        .map("stacks")?
        .lookup(&id.to_ne_bytes(), MapFlags::ANY)
        .step("reading a stack trace")?;
    Ok(raw.map_or_else(Vec::new, |raw| {
        raw.chunks_exact(8)
            .map(|c| u64_at(c, 0))
            .take_while(|&a| a != 0)
            .collect()
    }))
}

/// User stack `ustack` of process `tgid` as the programs also recorded it,
/// by build ID and file offset per frame (`ustacks_bid`, the first time
/// the process showed that stack); `None` when it was not.
pub fn ustack_build_ids(
    obj: &TraceObject,
    tgid: u32,
    ustack: u32,
) -> Result<Option<Vec<BuildIdFrame>>, Error> {
    let mut key = [0u8; 8];
    key[..4].copy_from_slice(&tgid.to_ne_bytes());
    key[4..].copy_from_slice(&ustack.to_ne_bytes());
    let Some(id) = obj
        .map("ustack_bids")?
        .lookup(&key, MapFlags::ANY)
        .step("reading a build ID stack's id")?
    else {
        return Ok(None);
    };
    let raw = obj
        .map("ustacks_bid")?
        .lookup(&id[..4], MapFlags::ANY)
        .step("reading a build ID stack")?;
    Ok(raw.map(|raw| build_id_frames(&raw)))
}

/// Frames of a `BPF_F_STACK_BUILD_ID` stack map value (`struct
/// bpf_stack_build_id`: status, 20 bytes of build ID, offset or address),
/// up to the first empty one.
fn build_id_frames(raw: &[u8]) -> Vec<BuildIdFrame> {
    const VALID: i32 = 1;
    const IP: i32 = 2;
    raw.chunks_exact(32)
        .map_while(|c| {
            let status = i32::from_ne_bytes([c[0], c[1], c[2], c[3]]);
            let value = u64_at(c, 24);
            match status {
                VALID => Some(match BuildId::new(&c[4..24]) {
                    Some(build_id) => BuildIdFrame::File {
                        build_id,
                        offset: value,
                    },
                    None => BuildIdFrame::Addr(0),
                }),
                IP => Some(BuildIdFrame::Addr(value)),
                _ => None,
            }
        })
        .collect()
}

pub fn read_stacks(obj: &TraceObject) -> Result<Stacks, Error> {
    let counts_map = obj.map("stack_counts")?;
    let mut out = Stacks::default();
    for key in counts_map.keys() {
        let Some(k) = StackKey::parse(&key) else {
            continue;
        };
        let Some(val) = counts_map
            .lookup(&key, MapFlags::ANY)
            .step("reading stack counts")?
        else {
            continue;
        };
        for id in [k.kstack, k.ustack].into_iter().flatten() {
            if let std::collections::hash_map::Entry::Vacant(v) = out.addrs.entry(id) {
                v.insert(stack_addrs(obj, id)?);
            }
        }
        out.counts.push((k, u64_at(&val, 0)));
    }
    out.counts.sort_by_key(|c| std::cmp::Reverse(c.1));
    Ok(out)
}

/// Keys of `stack_counts` read per system call by [`stack_keys`].
const KEY_BATCH: usize = 1024;

/// Every key of `stack_counts` now, into `out`: a batch lookup reads
/// [`KEY_BATCH`] keys per system call; where the kernel cannot do that for
/// this map (or a batch fails), one key per call. Keys added meanwhile may
/// be missed (the next call sees them).
pub fn stack_keys(obj: &TraceObject, out: &mut Vec<StackKey>) -> Result<(), Error> {
    keys_of(&obj.map("stack_counts")?, out);
    Ok(())
}

/// [`stack_keys`] of any hash map with `stack_counts`' key layout.
fn keys_of(map: &impl MapCore, out: &mut Vec<StackKey>) {
    use std::os::fd::AsRawFd;
    let (ksize, vsize) = (map.key_size() as usize, map.value_size() as usize);
    let mut keys = vec![0u8; KEY_BATCH * ksize];
    let mut values = vec![0u8; KEY_BATCH * vsize];
    // Where the previous batch ended, and where this one ends.
    let (mut from, mut to) = (vec![0u8; ksize], vec![0u8; ksize]);
    let (mut first, start) = (true, out.len());
    loop {
        let mut count = KEY_BATCH as u32;
        let opts = libbpf_rs::libbpf_sys::bpf_map_batch_opts {
            sz: std::mem::size_of::<libbpf_rs::libbpf_sys::bpf_map_batch_opts>() as _,
            ..Default::default()
        };
        // SAFETY: buffers of KEY_BATCH keys and values, batch tokens of a
        // key's size, all alive for the call.
        let ret = unsafe {
            libbpf_rs::libbpf_sys::bpf_map_lookup_batch(
                map.as_fd().as_raw_fd(),
                if first {
                    std::ptr::null_mut()
                } else {
                    from.as_mut_ptr().cast()
                },
                to.as_mut_ptr().cast(),
                keys.as_mut_ptr().cast(),
                values.as_mut_ptr().cast(),
                &mut count,
                &opts,
            )
        };
        let errno = if ret < 0 { -ret } else { 0 };
        if errno != 0 && errno != libc::ENOENT {
            // No batch lookup here, or a hash bucket larger than a batch
            // (ENOSPC): key by key, from the start.
            out.truncate(start);
            out.extend(map.keys().filter_map(|k| StackKey::parse(&k)));
            return;
        }
        let n = (count as usize).min(KEY_BATCH);
        out.extend(
            keys[..n * ksize]
                .chunks_exact(ksize)
                .filter_map(StackKey::parse),
        );
        // ENOENT: that was the last batch.
        if errno == libc::ENOENT {
            return;
        }
        std::mem::swap(&mut from, &mut to);
        first = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_id_frames_stop_at_the_first_empty_one() {
        let frame = |status: i32, id: u8, value: u64| {
            let mut f = [0u8; 32];
            f[..4].copy_from_slice(&status.to_ne_bytes());
            f[4..24].fill(id);
            f[24..].copy_from_slice(&value.to_ne_bytes());
            f
        };
        let raw: Vec<u8> = [
            frame(1, 0xaa, 0x1000),
            frame(2, 0, 0x7f00),
            frame(0, 0, 0),
            frame(1, 0xbb, 1),
        ]
        .concat();
        assert_eq!(
            build_id_frames(&raw),
            [
                BuildIdFrame::File {
                    build_id: BuildId::new(&[0xaa; 20]).unwrap(),
                    offset: 0x1000
                },
                BuildIdFrame::Addr(0x7f00)
            ]
        );
    }

    /// A record as trace.bpf.c writes it: the head, then for an entry the
    /// argument slots, the string heads (len, slot, user) and buffers of
    /// `size` bytes.
    fn record(kind: u8, args: &[u64], strs: &[(i32, u8, bool, &[u8])], size: usize) -> Vec<u8> {
        let mut b = vec![0u8; EVENT_SIZE];
        b[0..8].copy_from_slice(&123u64.to_ne_bytes());
        b[8..16].copy_from_slice(&(-5i64 as u64).to_ne_bytes());
        b[16..24].copy_from_slice(&999u64.to_ne_bytes());
        b[24..28].copy_from_slice(&7u32.to_ne_bytes());
        b[28..32].copy_from_slice(&100u32.to_ne_bytes());
        b[32..36].copy_from_slice(&101u32.to_ne_bytes());
        b[36] = kind;
        b[37] = EVENT_VERSION;
        b[40..44].copy_from_slice(b"cat\0");
        if kind == 2 {
            return b;
        }
        b[38] = args.len() as u8;
        b[39] = if strs.is_empty() {
            0
        } else {
            MAX_STRINGS as u8
        };
        b.resize(
            ENTRY_SIZE
                + if strs.is_empty() {
                    0
                } else {
                    MAX_STRINGS * size
                },
            0xee,
        );
        for (i, a) in args.iter().enumerate() {
            b[EVENT_SIZE + 8 * i..EVENT_SIZE + 8 * i + 8].copy_from_slice(&a.to_ne_bytes());
        }
        let str_size = if strs.is_empty() { 0 } else { size as u16 };
        b[SIZES_AT..SIZES_AT + 2].copy_from_slice(&str_size.to_ne_bytes());
        b[SIZES_AT + 2..SIZES_AT + 8].fill(0);
        b[SIZES_AT + 8..ENTRY_SIZE].fill(0);
        for i in 0..MAX_STRINGS {
            let head = EVENT_SIZE + 8 * MAX_ARGS + 8 * i;
            b[head..head + 8].fill(0);
            let Some(&(len, slot, user, bytes)) = strs.get(i) else {
                continue;
            };
            b[head..head + 4].copy_from_slice(&len.to_ne_bytes());
            b[head + 4] = slot;
            b[head + 5] = u8::from(user);
            let at = ENTRY_SIZE + i * size;
            b[at..at + bytes.len()].copy_from_slice(bytes);
        }
        b
    }

    #[test]
    fn parses_exit_records() {
        let b = record(2, &[], &[], 0);
        let e = Event::parse(&b).unwrap();
        assert_eq!(e.ts_ns, 123);
        assert_eq!(e.ret as i64, -5);
        assert_eq!((e.duration_ns, e.func, e.tgid, e.tid), (999, 7, 100, 101));
        assert_eq!((e.kind, e.comm.as_str()), (EventKind::Exit, "cat"));
        assert!(e.args.is_empty() && e.strings.is_empty());
        assert!(Event::parse(&b[..50]).is_none());
        let mut bad = b.clone();
        bad[36] = 9;
        assert!(Event::parse(&bad).is_none(), "unknown kind");
        let mut old = b;
        old[37] = 1;
        assert!(Event::parse(&old).is_none(), "another layout version");
    }

    /// Nine argument slots (three of them stack-passed) and two strings:
    /// one that fit, from user memory; one that filled its 16 bytes.
    #[test]
    fn parses_entry_records_with_stack_arguments_and_strings() {
        let args: Vec<u64> = (1..=9).map(|i| i * 0x1111).collect();
        let strs: [(i32, u8, bool, &[u8]); 2] = [
            (12, 1, true, b"/etc/passwd\0"),
            (16, 7, false, b"0123456789abcde\0"),
        ];
        let e = Event::parse(&record(1, &args, &strs, 16)).unwrap();
        assert_eq!(e.kind, EventKind::Entry);
        assert_eq!(e.args, args);
        assert_eq!(
            e.strings,
            [
                EventString {
                    slot: 1,
                    bytes: b"/etc/passwd".to_vec(),
                    truncated: false,
                    user: true,
                    error: None,
                },
                EventString {
                    slot: 7,
                    bytes: b"0123456789abcde".to_vec(),
                    truncated: true,
                    user: false,
                    error: None,
                },
            ]
        );
        // A failed read (-EFAULT), and an unused second slot.
        let e = Event::parse(&record(1, &args, &[(-14, 2, false, b"")], 8)).unwrap();
        assert_eq!(e.strings.len(), 1);
        assert_eq!((e.strings[0].slot, e.strings[0].error), (2, Some(14)));
        // Without strings the record ends after the string heads.
        let e = Event::parse(&record(1, &args[..3], &[], 0)).unwrap();
        assert_eq!((e.args.len(), e.strings.len()), (3, 0));
        assert!(Event::parse(&record(1, &args, &[], 0)[..ENTRY_SIZE - 1]).is_none());
    }

    fn proto(slots: &[u8], strings: &[usize]) -> Proto {
        use crate::trace::btf::{Param, ValueKind};
        Proto {
            params: slots
                .iter()
                .enumerate()
                .map(|(i, &n)| Param {
                    name: format!("a{i}"),
                    kind: if n > 1 {
                        ValueKind::Aggregate
                    } else {
                        ValueKind::Unsigned(64)
                    },
                    slots: n,
                    format: if strings.contains(&i) {
                        Format::Str { user: false }
                    } else {
                        Format::Plain
                    },
                })
                .collect(),
            ret: ValueKind::Signed(32),
            ret_format: Format::Plain,
        }
    }

    #[test]
    fn kprobe_slots_come_in_the_prototypes_order() {
        // Nine scalars: the same order either way (registers, then stack).
        let nine = proto(&[1; 9], &[]);
        let places =
            |p: &Proto, k| -> Vec<usize> { p.arg_places(k).iter().map(|a| a.slot).collect() };
        assert_eq!(places(&nine, true), places(&nine, false));
        // Five scalars, a 16-byte struct, a scalar: the struct does not fit
        // in the last register and goes to the stack, the scalar after it
        // takes that register.
        let spill = proto(&[1, 1, 1, 1, 1, 2, 1], &[6]);
        assert_eq!(places(&spill, false), [0, 1, 2, 3, 4, 5, 7]);
        assert_eq!(places(&spill, true), [0, 1, 2, 3, 4, 6, 5]);
        let raw = [10, 11, 12, 13, 14, 15, 60, 61, 0, 0, 0, 0];
        let mut e = Event::parse(&record(1, &raw, &[(3, 5, false, b"ab\0")], 8)).unwrap();
        e.to_declared_order(&spill);
        assert_eq!(e.args, [10, 11, 12, 13, 14, 60, 61, 15]);
        assert_eq!(
            e.strings[0].slot, 7,
            "the string's slot follows its argument"
        );
    }

    #[test]
    fn the_cookie_names_slots_to_read_and_strings() {
        let nargs = |b: u64| (b >> COOKIE_NARGS_SHIFT) & 0xf;
        let string = |b: u64, i: u32| (b >> (COOKIE_STR_SHIFT + i * COOKIE_STR_BITS)) & 0x1f;
        let p = proto(&[1; 9], &[1, 7, 8]);
        let b = capture_bits(&p, false);
        assert_eq!(nargs(b), 9);
        // The first two strings only.
        assert_eq!((string(b, 0), string(b, 1)), (0x10 | 1, 0x10 | 7));
        assert_eq!(b >> (COOKIE_STR_SHIFT + 2 * COOKIE_STR_BITS), 0);
        // Bits 0-34 stay the index, the capture flag and the return class.
        assert_eq!(b & ((1 << 35) - 1), 0);
        let spill = proto(&[1, 1, 1, 1, 1, 2, 1], &[6]);
        assert_eq!(nargs(capture_bits(&spill, false)), 8);
        let k = capture_bits(&spill, true);
        assert_eq!((nargs(k), string(k, 0)), (8, 0x10 | 5));
        assert_eq!(capture_bits(&proto(&[], &[]), true), 0);
        assert!(has_strings(&p) && !has_strings(&proto(&[1], &[])));
    }

    /// Keys read in batches are every key, once: a real BPF hash map of
    /// `stack_counts`' layout with more keys than three batches hold
    /// (needs CAP_BPF: elsewhere only that the kernel refuses the map).
    #[test]
    fn stack_keys_reads_every_key_in_batches() {
        use libbpf_rs::{MapHandle, MapType};
        let opts = libbpf_rs::libbpf_sys::bpf_map_create_opts {
            sz: std::mem::size_of::<libbpf_rs::libbpf_sys::bpf_map_create_opts>() as _,
            ..Default::default()
        };
        let n = 3 * KEY_BATCH as u32 + 7;
        let map = match MapHandle::create(MapType::Hash, Some("keys_test"), 16, 8, n, &opts) {
            Ok(m) => m,
            // SAFETY: geteuid has no preconditions.
            Err(e) if unsafe { libc::geteuid() } != 0 => {
                println!("no BPF map for an unprivileged user ({e}): batches not checked");
                return;
            }
            Err(e) => panic!("creating a BPF hash map as root: {e}"),
        };
        let mut want = Vec::new();
        for i in 0..n {
            let mut key = [0u8; 16];
            key[0..4].copy_from_slice(&(i % 5).to_ne_bytes());
            key[4..8].copy_from_slice(&(1000 + i).to_ne_bytes());
            key[8..12].copy_from_slice(&(-1i32).to_ne_bytes());
            key[12..16].copy_from_slice(&(i as i32).to_ne_bytes());
            map.update(&key, &1u64.to_ne_bytes(), MapFlags::ANY)
                .unwrap();
            want.push((1000 + i, Some(i)));
        }
        let mut got = vec![StackKey {
            func: 0,
            tgid: 0,
            kstack: None,
            ustack: None,
        }];
        keys_of(&map, &mut got);
        assert_eq!(got.len(), n as usize + 1, "appended, every key once");
        assert!(got[1..].iter().all(|k| k.kstack.is_none()));
        let mut pairs: Vec<(u32, Option<u32>)> =
            got[1..].iter().map(|k| (k.tgid, k.ustack)).collect();
        pairs.sort_unstable();
        assert_eq!(pairs, want);
    }

    #[test]
    fn deltas_keep_running_max() {
        let a = FuncStats {
            calls: 10,
            lat_count: 4,
            lat_sum_ns: 400,
            lat_max_ns: 200,
            injected: 0,
            filter_seen: 30,
        };
        let b = FuncStats {
            calls: 15,
            lat_count: 6,
            lat_sum_ns: 700,
            lat_max_ns: 250,
            injected: 0,
            filter_seen: 42,
        };
        let d = b.since(&a);
        assert_eq!(
            (
                d.calls,
                d.lat_count,
                d.lat_sum_ns,
                d.lat_max_ns,
                d.filter_seen
            ),
            (5, 2, 300, 250, 12)
        );
    }
}
