//! The trace BPF object (src/bpf/trace.bpf.c): maps sized for the function
//! set, load-time filters, and the relocated instructions of each entry
//! point, from which engines load as many program copies as they need.
//!
//! libbpf *prepares* the object (creates maps, applies CO-RE and map-fd
//! relocations) but loads no program itself. Engines then load copies with
//! the attach type and target they need: one per function for fentry-each,
//! one per BTF object (vmlinux, each module) for the multi-links. That is how
//! one program body reaches thousands of fentry targets without reopening
//! the ELF per function, and how the .multi attach types work although the
//! vendored libbpf predates them.

use std::collections::HashMap;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use libbpf_rs::libbpf_sys;
use libbpf_rs::{AsRawLibbpf, MapCore, Object, ObjectBuilder};

use super::inject::Injection;
use super::scoping::{CgroupFilter, CgroupMatch, PidNamespace};
use super::{Error, Step as _};
use crate::bpf::trace as skel;

/// Entry points of trace.bpf.c, named after their program sections
/// (`MultiEntry` is the entry side of a multi link, as `MultiExit` its exit).
#[allow(clippy::enum_variant_names)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Entry {
    MultiEntry,
    MultiSession,
    /// fexit.multi, the global backend's exit side.
    MultiExit,
    KprobeEntry,
    KprobeSession,
    Fentry,
    Fexit,
    /// fmod_ret.multi: error injection on a tracing_multi link.
    MultiFmodRet,
    /// fmod_ret: error injection, one copy per function.
    FmodRet,
}

impl Entry {
    const ALL: [Entry; 9] = [
        Entry::MultiEntry,
        Entry::MultiSession,
        Entry::MultiExit,
        Entry::KprobeEntry,
        Entry::KprobeSession,
        Entry::Fentry,
        Entry::Fexit,
        Entry::MultiFmodRet,
        Entry::FmodRet,
    ];

    fn prog_name(self) -> &'static str {
        match self {
            Entry::MultiEntry => "trace_multi_entry",
            Entry::MultiSession => "trace_multi_session",
            Entry::MultiExit => "trace_multi_exit",
            Entry::KprobeEntry => "trace_kprobe_entry",
            Entry::KprobeSession => "trace_kprobe_session",
            Entry::Fentry => "trace_fentry",
            Entry::Fexit => "trace_fexit",
            Entry::MultiFmodRet => "trace_multi_fmod_ret",
            Entry::FmodRet => "trace_fmod_ret",
        }
    }

    pub fn prog_type(self) -> u32 {
        match self {
            Entry::KprobeEntry | Entry::KprobeSession => libbpf_sys::BPF_PROG_TYPE_KPROBE,
            _ => libbpf_sys::BPF_PROG_TYPE_TRACING,
        }
    }
}

/// Which calls count: every filter given must pass.
#[derive(Clone, Debug, Default)]
pub struct Filters {
    /// Only this process (thread group): its ID in the initial pid
    /// namespace, or in `pid_ns` when that is given.
    pub tgid: Option<u32>,
    /// Only tasks of this pid namespace (its own processes, not those of
    /// namespaces nested in it); with `tgid`, the process of that ID in it.
    pub pid_ns: Option<PidNamespace>,
    /// Only tasks of this cgroup v2 directory (and those below it, as its
    /// [`CgroupMatch`] says).
    pub cgroup: Option<CgroupFilter>,
    /// Task comm, at most 15 bytes.
    pub comm: Option<String>,
}

#[derive(Clone, Debug, Default)]
pub struct ObjectConfig {
    pub nr_funcs: usize,
    pub latency: bool,
    /// Any function captures per-call events.
    pub capture: bool,
    /// Bytes of each string an entry event carries (a multiple of 8; 0:
    /// no captured function has a string argument).
    pub str_size: u32,
    /// The pointee budget of an entry event (`--args-depth`; a multiple of
    /// 8, 0: off) and each function's reads (`struct trace_deref_func`,
    /// [`DEREF_FUNC_SIZE`] bytes, by function index).
    pub deref_size: u32,
    pub derefs: Vec<[u8; DEREF_FUNC_SIZE]>,
    pub kstack: bool,
    pub ustack: bool,
    /// Entry and exit are separate programs (per-thread call stacks needed).
    pub pair_entry_exit: bool,
    /// Report chains of calls that end in an error (per-thread call stacks
    /// on every engine, the `chains` ring buffer, stacks).
    pub errors: bool,
    /// Count calls per path of traced callers (call graph).
    pub graph: bool,
    /// Make calls fail (`bpfmux inject`).
    pub inject: Option<Injection>,
    pub filters: Filters,
    /// Which calls are recorded (the filter's programs and variables).
    pub filter: Option<FilterCode>,
}

/// Bytes of `struct trace_deref_func`: `TRACE_MAX_DEREFS` reads of 8.
pub const DEREF_FUNC_SIZE: usize = 8 * 8;

/// Most operations per side of a filter (`TRACE_FILTER_MAX_OPS`).
pub const FILTER_MAX_OPS: usize = 16;
/// Most variables a filter reads per function (`TRACE_FILTER_MAX_VARS`).
pub const FILTER_MAX_VARS: usize = 8;

/// One operation of a filter's side as trace.h lays it out:
/// (kind, src, cmp, mask, value) of `struct trace_filter_op`.
pub type FilterOp = (u8, u8, u8, u64, u64);

/// Most string literals a filter compares with (`TRACE_FILTER_MAX_STRS`).
pub const FILTER_MAX_STRS: usize = 4;
/// Bytes a string test compares at most: a literal and, for equality, its
/// NUL (`TRACE_FILTER_STR_LEN`).
pub const FILTER_STR_LEN: usize = 64;

/// A string literal of a filter (`struct trace_filter_str`): its bytes,
/// and whether a string matches by starting with them (else by equal to
/// them: the NUL after them is compared too).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilterStr {
    /// At most [`FILTER_STR_LEN`] - 1 bytes.
    pub bytes: Vec<u8>,
    /// A prefix: the bytes only.
    pub prefix: bool,
}

impl FilterStr {
    /// The words and masks trace.h compares with: the bytes, zero-padded,
    /// 8 to a word; a mask byte of 0xff for each byte compared.
    pub(crate) fn words(&self) -> ([u64; FILTER_STR_LEN / 8], [u64; FILTER_STR_LEN / 8]) {
        let compared = (self.bytes.len() + usize::from(!self.prefix)).min(FILTER_STR_LEN);
        let (mut w, mut m) = ([0u8; FILTER_STR_LEN], [0u8; FILTER_STR_LEN]);
        for (d, b) in w.iter_mut().zip(&self.bytes) {
            *d = *b;
        }
        m[..compared].fill(0xff);
        let word = |b: &[u8; FILTER_STR_LEN], i: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[8 * i..8 * i + 8]);
            u64::from_ne_bytes(a)
        };
        (
            std::array::from_fn(|i| word(&w, i)),
            std::array::from_fn(|i| word(&m, i)),
        )
    }
}

/// A filter as the BPF object takes it (compiled by [`super::filter`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FilterCode {
    /// The entry side's program.
    pub entry: Vec<FilterOp>,
    /// The exit side's program.
    pub exit: Vec<FilterOp>,
    /// Per function, its variables' descriptors (empty: it reads none).
    pub vars: Vec<[u8; FILTER_MAX_VARS]>,
    /// The string literals string tests compare with, by index.
    pub strs: Vec<FilterStr>,
}

pub const HIST_BUCKETS: usize = 32;
const EVENTS_BYTES: u32 = 8 << 20;
const CHAINS_BYTES: u32 = 8 << 20;
const STACKS: u32 = 16 << 10;
const STACK_COUNTS: u32 = 64 << 10;
/// User stacks kept by build ID (2 KiB each, preallocated: 4 MiB): only
/// the first of each process's stacks, for processes that exit before
/// their stacks are read.
const BID_STACKS: u32 = 2 << 10;
const CALL_STACK_THREADS: u32 = 16 << 10;
const GRAPH_PATHS: u32 = 64 << 10;

/// The loaded maps plus the instructions to load program copies from.
pub struct TraceObject {
    obj: Object,
    insns: HashMap<Entry, Vec<libbpf_sys::bpf_insn>>,
}

// SAFETY: after load the object is only used to look up maps (syscalls on
// their fds); instruction copies are plain data.
unsafe impl Send for TraceObject {}
unsafe impl Sync for TraceObject {}

fn object_bytes() -> &'static [u8] {
    skel::object_bytes()
}

impl TraceObject {
    pub fn load(cfg: &ObjectConfig, entries: &[Entry]) -> Result<Self, Error> {
        let mut open = ObjectBuilder::default()
            .open_memory(object_bytes())
            .step("opening the trace BPF object")?;
        let n = u32::try_from(cfg.nr_funcs.max(1)).step("too many functions")?;
        for mut map in open.maps_mut() {
            let name = map.name().to_string_lossy().into_owned();
            let size = match name.as_str() {
                "stats" => Some(n),
                "hist" if cfg.latency => Some(
                    n.checked_mul(HIST_BUCKETS as u32)
                        .ok_or(Error::Options("too many functions for latency histograms"))?,
                ),
                "events" if cfg.capture => Some(EVENTS_BYTES),
                "chains" if cfg.errors => Some(CHAINS_BYTES),
                "stacks" if cfg.kstack || cfg.ustack || cfg.errors => Some(STACKS),
                "stack_counts" if cfg.kstack || cfg.ustack => Some(STACK_COUNTS),
                "ustacks_bid" | "ustack_bids" if cfg.ustack || cfg.errors => Some(BID_STACKS),
                "call_stacks" if cfg.pair_entry_exit || cfg.errors || cfg.graph => {
                    Some(CALL_STACK_THREADS)
                }
                "error_chains" if cfg.errors => Some(CALL_STACK_THREADS),
                "graph" if cfg.graph => Some(GRAPH_PATHS),
                "filter_funcs" if cfg.filter.as_ref().is_some_and(|f| !f.vars.is_empty()) => {
                    Some(n)
                }
                "deref_funcs" if !cfg.derefs.is_empty() => Some(n),
                _ => None,
            };
            if let Some(size) = size {
                map.set_max_entries(size)
                    .with_step(|| format!("sizing map {name}"))?;
            }
            if name.ends_with(".rodata") {
                write_rodata(&mut map, cfg)?;
            }
        }
        for mut prog in open.progs_mut() {
            let name = prog.name().to_string_lossy().into_owned();
            let wanted = entries.iter().any(|e| e.prog_name() == name);
            prog.set_autoload(wanted);
            if let Some(e) = Entry::ALL.iter().find(|e| e.prog_name() == name) {
                // The .multi sections are unknown to the vendored libbpf.
                // SAFETY: valid program of an open (not loaded) object.
                unsafe {
                    let p = prog.as_libbpf_object().as_ptr();
                    libbpf_sys::bpf_program__set_type(p, e.prog_type());
                }
            }
        }
        // SAFETY: valid open object; prepare creates maps and relocates.
        let err = unsafe { libbpf_sys::bpf_object__prepare(open.as_libbpf_object().as_ptr()) };
        if err != 0 {
            return Err(Error::Kernel {
                step: "preparing the trace BPF object (maps, relocations)".into(),
                source: io::Error::from_raw_os_error(-err),
            });
        }
        let mut insns = HashMap::new();
        for mut prog in open.progs_mut() {
            let name = prog.name().to_string_lossy().into_owned();
            if let Some(e) = entries.iter().find(|e| e.prog_name() == name) {
                insns.insert(*e, prog.insns().to_vec());
            }
            // libbpf loads nothing: every program is ours to load.
            prog.set_autoload(false);
        }
        let obj = open.load().step("loading the trace BPF object's maps")?;
        let this = Self { obj, insns };
        if let Some(f) = cfg.filter.as_ref().filter(|f| !f.vars.is_empty()) {
            this.fill_per_function("filter_funcs", &f.vars, "the filter's variables")?;
        }
        if !cfg.derefs.is_empty() {
            this.fill_per_function("deref_funcs", &cfg.derefs, "the pointee reads")?;
        }
        if let Some(c) = &cfg.filters.cgroup {
            if c.matching() == CgroupMatch::Subtree {
                this.fill_cgroup_tree(c)?;
            }
        }
        Ok(this)
    }

    /// The cgroup whose subtree counts, by a descriptor of its directory
    /// (map `cgroup_tree`, which `bpf_current_task_under_cgroup` reads).
    fn fill_cgroup_tree(&self, cgroup: &CgroupFilter) -> Result<(), Error> {
        let dir = cgroup.open_dir()?;
        let fd = u32::try_from(dir.as_raw_fd()).step("a cgroup directory's descriptor")?;
        self.map("cgroup_tree")?
            .update(
                &0u32.to_ne_bytes(),
                &fd.to_ne_bytes(),
                libbpf_rs::MapFlags::ANY,
            )
            .with_step(|| {
                format!(
                    "giving the trace programs cgroup {} (map cgroup_tree)",
                    cgroup.path().display()
                )
            })
    }

    /// Each function's value (by index) of an array map, in one batch:
    /// the filter's variables (`filter_funcs`), the pointee reads
    /// (`deref_funcs`).
    fn fill_per_function<const N: usize>(
        &self,
        name: &str,
        per_func: &[[u8; N]],
        what: &str,
    ) -> Result<(), Error> {
        let map = self.map(name)?;
        let mut keys: Vec<u32> = (0..per_func.len())
            .map(u32::try_from)
            .collect::<Result<_, _>>()
            .with_step(|| format!("too many functions for {what}"))?;
        let mut values: Vec<u8> = per_func.iter().flatten().copied().collect();
        let mut count =
            u32::try_from(keys.len()).with_step(|| format!("too many functions for {what}"))?;
        let opts = libbpf_sys::bpf_map_batch_opts {
            sz: std::mem::size_of::<libbpf_sys::bpf_map_batch_opts>() as _,
            ..Default::default()
        };
        // SAFETY: `count` keys and values of the map's sizes (u32, N bytes).
        let r = unsafe {
            libbpf_sys::bpf_map_update_batch(
                map.as_fd().as_raw_fd(),
                keys.as_mut_ptr() as *const libc::c_void,
                values.as_mut_ptr() as *const libc::c_void,
                &mut count,
                &opts,
            )
        };
        if r < 0 {
            return Err(Error::Kernel {
                step: format!("writing {what} per function (map {name})"),
                source: io::Error::last_os_error(),
            });
        }
        Ok(())
    }

    /// Starts counting: until this is called the programs run but record
    /// nothing (see `armed` in trace.bpf.c).
    pub fn arm(&self) -> Result<(), Error> {
        self.set_armed(true)
    }

    /// Stops counting, before the links go: what detaching calls is not
    /// part of the trace either.
    pub fn disarm(&self) -> Result<(), Error> {
        self.set_armed(false)
    }

    fn set_armed(&self, on: bool) -> Result<(), Error> {
        let broken = |what: &str| Error::Broken(what.to_string());
        let map = self
            .obj
            .maps()
            .find(|m| m.name().to_string_lossy().ends_with(".bss"))
            .ok_or_else(|| broken("trace BPF object has no .bss map"))?;
        let key = 0u32.to_ne_bytes();
        let mut value = map
            .lookup(&key, libbpf_rs::MapFlags::ANY)
            .step("reading the trace object's .bss")?
            .ok_or_else(|| broken("trace object's .bss has no element"))?;
        let at = std::mem::offset_of!(skel::types::bss, armed);
        let field = value
            .get_mut(at..at + 4)
            .ok_or_else(|| broken("trace object's .bss is smaller than its skeleton type"))?;
        field.copy_from_slice(&u32::from(on).to_ne_bytes());
        map.update(&key, &value, libbpf_rs::MapFlags::ANY)
            .step("switching the trace programs' counting (.bss)")
    }

    pub fn map(&self, name: &str) -> Result<libbpf_rs::Map<'_>, Error> {
        self.obj
            .maps()
            .find(|m| m.name() == name)
            .ok_or_else(|| Error::Broken(format!("trace BPF object has no map {name}")))
    }

    /// Loads one copy of `entry`. `btf_obj` is the module BTF for module
    /// targets; `attach_btf_id` is 0 for the multi attach types.
    pub fn load_prog(
        &self,
        entry: Entry,
        expected_attach_type: u32,
        btf_obj: Option<BorrowedFd<'_>>,
        attach_btf_id: u32,
    ) -> Result<OwnedFd, LoadError> {
        let insns = self
            .insns
            .get(&entry)
            .ok_or(LoadError::NotPrepared(entry))?;
        let load = |log: Option<&mut [u8]>| {
            let (log_buf, log_size, log_level) = match log {
                Some(b) => (b.as_mut_ptr() as *mut libc::c_char, b.len() as u32, 1),
                None => (std::ptr::null_mut(), 0, 0),
            };
            let mut opts = libbpf_sys::bpf_prog_load_opts {
                sz: std::mem::size_of::<libbpf_sys::bpf_prog_load_opts>() as _,
                expected_attach_type,
                attach_btf_id,
                attach_btf_obj_fd: btf_obj.map_or(0, |f| f.as_raw_fd() as u32),
                log_buf,
                log_size,
                log_level,
                ..Default::default()
            };
            let name = CString::new(entry.prog_name()).unwrap_or_default();
            // SAFETY: valid instruction array and strings; opts is sized.
            let fd = unsafe {
                libbpf_sys::bpf_prog_load(
                    entry.prog_type(),
                    name.as_ptr(),
                    c"GPL".as_ptr(),
                    insns.as_ptr(),
                    insns.len() as _,
                    &mut opts,
                )
            };
            if fd < 0 {
                Err(io::Error::from_raw_os_error(-fd))
            } else {
                // SAFETY: the kernel just returned this descriptor.
                Ok(unsafe { OwnedFd::from_raw_fd(fd) })
            }
        };
        load(None).map_err(|e| {
            // Load again with the verifier log to say why.
            let mut buf = vec![0u8; 1 << 20];
            let _ = load(Some(&mut buf));
            let log =
                String::from_utf8_lossy(&buf[..buf.iter().position(|&b| b == 0).unwrap_or(0)])
                    .lines()
                    .rev()
                    .take(8)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect::<Vec<_>>()
                    .join("\n");
            LoadError::Kernel { err: e, log }
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("entry point {0:?} was not prepared")]
    NotPrepared(Entry),
    #[error("{err}{}", if log.is_empty() { String::new() } else { format!("; verifier log tail:\n{log}") })]
    Kernel { err: io::Error, log: String },
}

impl From<LoadError> for io::Error {
    fn from(e: LoadError) -> Self {
        let kind = e.errno().map_or(io::ErrorKind::Other, |n| {
            io::Error::from_raw_os_error(n).kind()
        });
        io::Error::new(kind, e)
    }
}

impl LoadError {
    pub fn errno(&self) -> Option<i32> {
        match self {
            LoadError::Kernel { err, .. } => err.raw_os_error(),
            LoadError::NotPrepared(_) => None,
        }
    }
}

fn write_rodata(map: &mut libbpf_rs::OpenMapMut<'_>, cfg: &ObjectConfig) -> Result<(), Error> {
    let buf = map
        .initial_value_mut()
        .ok_or_else(|| Error::Broken("trace BPF object: .rodata has no initial value".into()))?;
    // In the program 0 means "no filter" and an empty name matches no
    // task: neither is what such a filter asks for.
    if cfg.filters.tgid == Some(0) {
        return Err(Error::Options(
            "a process filter needs a process ID other than 0",
        ));
    }
    if cfg.filters.comm.as_deref() == Some("") {
        return Err(Error::Options("a task name filter needs a non-empty name"));
    }
    // The namespace's inode is never 0: 0 is "no namespace filter".
    if cfg
        .filters
        .pid_ns
        .as_ref()
        .is_some_and(|ns| ns.inode() == 0)
    {
        return Err(Error::Options("a pid namespace filter needs a namespace"));
    }
    let mut comm = [0i8; 16];
    if let Some(c) = &cfg.filters.comm {
        for (d, s) in comm.iter_mut().zip(c.bytes().take(15)) {
            *d = s as i8;
        }
    }
    // SAFETY: plain-old-data (integers, bools, arrays of them): all zeros
    // is a valid value, and the one the section starts with. Assigned
    // field by field: the skeleton's padding fields are private.
    let mut ro: skel::types::rodata = unsafe { std::mem::zeroed() };
    ro.want_latency = cfg.latency;
    ro.filter_tgid = cfg.filters.tgid.unwrap_or(0);
    if let Some(c) = &cfg.filters.cgroup {
        ro.filter_cgroup = c.id();
        ro.filter_cgroup_tree = c.matching() == CgroupMatch::Subtree;
    }
    if let Some(ns) = &cfg.filters.pid_ns {
        ro.filter_pidns_dev = ns.kernel_dev();
        ro.filter_pidns_ino = ns.inode();
    }
    ro.filter_comm_on = cfg.filters.comm.is_some();
    ro.filter_comm = comm;
    ro.want_kstack = cfg.kstack;
    ro.want_ustack = cfg.ustack;
    ro.pair_entry_exit = cfg.pair_entry_exit;
    ro.want_errors = cfg.errors;
    ro.want_graph = cfg.graph;
    ro.event_str_size = cfg.str_size;
    ro.event_deref_size = cfg.deref_size;
    if let Some(i) = &cfg.inject {
        ro.inject_ret = -i64::from(i.errno);
        ro.inject_chance = i.chance();
        ro.inject_times = i.times.unwrap_or(0);
        // As the kernel sees it when bpfmux runs in the initial PID
        // namespace, where tracing from a container is rarely run.
        ro.inject_self_tgid = std::process::id();
    }
    if let Some(f) = &cfg.filter {
        ro.filter_on = true;
        ro.filter_vars = !f.vars.is_empty();
        ro.filter_entry_nops = write_ops(&mut ro.filter_entry_ops, &f.entry)?;
        ro.filter_exit_nops = write_ops(&mut ro.filter_exit_ops, &f.exit)?;
        if f.strs.len() > ro.filter_strs.len() {
            return Err(Error::Broken(format!(
                "a filter of {} string literals (at most {})",
                f.strs.len(),
                ro.filter_strs.len()
            )));
        }
        for (slot, lit) in ro.filter_strs.iter_mut().zip(&f.strs) {
            (slot.word, slot.mask) = lit.words();
        }
    }
    // The section may end before the struct's trailing padding: copy the
    // bytes that exist (every field is inside the section).
    let size = std::mem::size_of::<skel::types::rodata>();
    // SAFETY: `ro` is a plain-old-data struct of `size` bytes.
    let bytes = unsafe { std::slice::from_raw_parts(&ro as *const _ as *const u8, size) };
    let n = buf.len().min(size);
    if n + 8 < size {
        return Err(Error::Broken(format!(
            "trace BPF object: .rodata ({} bytes) smaller than its skeleton type",
            buf.len()
        )));
    }
    buf[..n].copy_from_slice(&bytes[..n]);
    Ok(())
}

/// A side's filter program into its .rodata array; returns its length.
fn write_ops(
    out: &mut [skel::types::trace_filter_op; FILTER_MAX_OPS],
    ops: &[FilterOp],
) -> Result<u32, Error> {
    if ops.len() > out.len() {
        return Err(Error::Broken(format!(
            "a filter program of {} operations (at most {})",
            ops.len(),
            out.len()
        )));
    }
    for (slot, &(kind, src, cmp, mask, value)) in out.iter_mut().zip(ops) {
        slot.kind = kind;
        slot.src = src;
        slot.cmp = cmp;
        slot.mask = mask;
        slot.value = value;
    }
    Ok(ops.len() as u32)
}

/// Number of possible CPUs (per-CPU map values come in this many slots).
pub fn possible_cpus() -> Result<usize, Error> {
    // SAFETY: plain libbpf call.
    let n = unsafe { libbpf_sys::libbpf_num_possible_cpus() };
    usize::try_from(n).map_err(|_| Error::Broken(format!("counting possible CPUs: error {n}")))
}

/// Reads `n` entries of a per-CPU array map in batches: one buffer of
/// `n * cpus * value_size` bytes (value_size already 8-aligned).
pub fn read_percpu_array(map: &libbpf_rs::Map<'_>, n: usize, cpus: usize) -> io::Result<Vec<u8>> {
    let vsize = map.value_size() as usize;
    let mut out = vec![0u8; n * cpus * vsize];
    let mut keys: Vec<u32> = vec![0; n];
    let fd = map.as_fd().as_raw_fd();
    let mut done = 0usize;
    let mut in_batch: u32 = 0;
    let mut out_batch: u32 = 0;
    let mut first = true;
    while done < n {
        let mut count = (n - done) as u32;
        let opts = libbpf_sys::bpf_map_batch_opts {
            sz: std::mem::size_of::<libbpf_sys::bpf_map_batch_opts>() as _,
            ..Default::default()
        };
        // SAFETY: buffers are sized for `count` more entries from `done`.
        let r = unsafe {
            libbpf_sys::bpf_map_lookup_batch(
                fd,
                if first {
                    std::ptr::null_mut()
                } else {
                    &mut in_batch as *mut u32 as *mut libc::c_void
                },
                &mut out_batch as *mut u32 as *mut libc::c_void,
                keys[done..].as_mut_ptr() as *mut libc::c_void,
                out[done * cpus * vsize..].as_mut_ptr() as *mut libc::c_void,
                &mut count,
                &opts,
            )
        };
        let err = (r < 0).then(io::Error::last_os_error);
        done += count as usize;
        match err {
            // ENOENT: no more entries after this batch.
            Some(e) if e.raw_os_error() == Some(libc::ENOENT) => break,
            Some(e) => return Err(e),
            None => {}
        }
        in_batch = out_batch;
        first = false;
    }
    Ok(out)
}

use std::os::fd::AsFd as _;
