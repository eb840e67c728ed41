//! Reading what the programs recorded: per-function counters and latency
//! histograms (per-CPU arrays, summed here), per-call events (ring buffer),
//! stack counts, and what could not be recorded. Layouts mirror
//! src/bpf/trace.h.

use std::collections::HashMap;

use libbpf_rs::{MapCore, MapFlags};
use serde::Serialize;

use super::program::{possible_cpus, read_percpu_array, TraceObject, HIST_BUCKETS};
use super::{Error, Step as _};

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
    /// The register arguments (entry).
    pub args: [u64; 6],
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

/// `struct trace_event` is 104 bytes: 10 u64, 4 u32, `comm[16]`.
pub const EVENT_SIZE: usize = 104;

impl Event {
    /// Decodes a ring buffer record; `None` for a short or unknown one.
    pub fn parse(b: &[u8]) -> Option<Event> {
        if b.len() < EVENT_SIZE {
            return None;
        }
        let u32_at = |off: usize| u32::from_ne_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]]);
        let mut args = [0u64; 6];
        for (i, a) in args.iter_mut().enumerate() {
            *a = u64_at(b, 8 + i * 8);
        }
        let kind = match u32_at(84) {
            1 => EventKind::Entry,
            2 => EventKind::Exit,
            _ => return None,
        };
        let comm = &b[88..104];
        let end = comm.iter().position(|&c| c == 0).unwrap_or(comm.len());
        Some(Event {
            ts_ns: u64_at(b, 0),
            args,
            ret: u64_at(b, 56),
            duration_ns: u64_at(b, 64),
            func: u32_at(72) as usize,
            tgid: u32_at(76),
            tid: u32_at(80),
            kind,
            comm: String::from_utf8_lossy(&comm[..end]).into_owned(),
        })
    }
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
    fn parses_an_event_record() {
        let mut b = vec![0u8; EVENT_SIZE];
        b[0..8].copy_from_slice(&123u64.to_ne_bytes());
        for i in 0..6 {
            b[8 + i * 8..16 + i * 8].copy_from_slice(&(i as u64 + 10).to_ne_bytes());
        }
        b[56..64].copy_from_slice(&(-5i64 as u64).to_ne_bytes());
        b[64..72].copy_from_slice(&999u64.to_ne_bytes());
        b[72..76].copy_from_slice(&7u32.to_ne_bytes());
        b[76..80].copy_from_slice(&100u32.to_ne_bytes());
        b[80..84].copy_from_slice(&101u32.to_ne_bytes());
        b[84..88].copy_from_slice(&2u32.to_ne_bytes());
        b[88..92].copy_from_slice(b"cat\0");
        let e = Event::parse(&b).unwrap();
        assert_eq!(e.ts_ns, 123);
        assert_eq!(e.args, [10, 11, 12, 13, 14, 15]);
        assert_eq!(e.ret as i64, -5);
        assert_eq!((e.duration_ns, e.func, e.tgid, e.tid), (999, 7, 100, 101));
        assert_eq!(e.kind, EventKind::Exit);
        assert_eq!(e.comm, "cat");
        assert!(Event::parse(&b[..50]).is_none());
        b[84..88].copy_from_slice(&9u32.to_ne_bytes());
        assert!(Event::parse(&b).is_none());
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
