//! Several XDP programs on one interface, run in order and chained by
//! return code: `bpfmux xdp attach/list/detach`.
//!
//! A set of programs ([`ProgSpec`]: an object file, a program in it, and a
//! "chain on" [`ActionSet`] of return codes) becomes one head program for
//! the interface's XDP bpf_link, built by an engine ([`EngineKind`]): the
//! program itself when there is one, bpfmux's freplace dispatcher, or the
//! series' kernel chain calls. Replacing a set ([`attach`]) builds the new
//! one completely and swaps it in with one link update, so every packet
//! runs either the old set or the new one. State lives in bpffs, so
//! [`list`] and [`detach`] work from any later process.
//!
//! The `libxdp` engine ([`EngineKind::Libxdp`]) runs the set in libxdp's
//! multiprog dispatcher instead, through the system's `libxdp.so.1`, the
//! dispatcher `xdp-loader` and every libxdp program use: bpfmux's programs
//! and theirs share one interface in run-priority order, and each tool's
//! listing shows them all ([`libxdp`] has the protocol and the trade-offs).
//! `auto` picks it where libxdp's dispatcher already runs.

pub mod action;
mod engine;
pub mod libxdp;
mod program;
mod refusal;
mod state;

use std::ffi::{CStr, CString};
use std::fmt;
use std::io;
use std::os::fd::AsFd;

use libbpf_rs::libbpf_sys;
use serde::{Deserialize, Serialize};

use crate::sys::bpf_ops;
pub use action::{ActionSet, ActionSetError};
pub use engine::EngineChoice;
pub use program::{Origin, ProgSpec};
pub use refusal::{Problem, Refusal};
use state::{GenerationWriter, Store};
pub use state::{ProgRecord, SetRecord};

/// Why an `xdp` call failed. What a caller can act on is its own variant
/// ([`Refusal`], [`libxdp::LibxdpError`], an input that cannot work); what the
/// kernel or the file system said comes with the step it was said at.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The library will not do it as asked, and says why ([`Refusal`]).
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// libxdp could not do it.
    #[error(transparent)]
    Libxdp(#[from] libxdp::LibxdpError),
    /// A chain-on value that names no set of actions.
    #[error(transparent)]
    ActionSet(#[from] ActionSetError),
    /// An input that cannot work: a program spec, an object file, a
    /// program in it, an interface name.
    #[error("{0}")]
    Invalid(String),
    /// bpfmux's state, or the kernel's, is not what it should be: a record
    /// that cannot be read, a program still running after detach.
    #[error("{0}")]
    State(String),
    /// A step that asked the kernel or the file system failed, and what
    /// it said (its errno kept in `source`).
    #[error("{step}")]
    Kernel {
        /// What was being done.
        step: String,
        /// What the kernel or the file system said.
        #[source]
        source: io::Error,
    },
    /// What the kernel or the file system said, at no step of its own.
    #[error(transparent)]
    Os(#[from] io::Error),
    /// Another error, at a step of the caller's.
    #[error("{step}")]
    At {
        /// What was being done.
        step: String,
        /// What went wrong there.
        #[source]
        source: Box<Error>,
    },
}

/// The results of `xdp`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<libbpf_rs::Error> for Error {
    fn from(e: libbpf_rs::Error) -> Self {
        Error::Os(io::Error::other(e))
    }
}

/// An error a step can fail with, and how it reads at that step.
pub(crate) trait AtStep {
    fn at_step(self, step: String) -> Error;
}

impl AtStep for io::Error {
    fn at_step(self, step: String) -> Error {
        Error::Kernel { step, source: self }
    }
}

impl AtStep for libbpf_rs::Error {
    fn at_step(self, step: String) -> Error {
        io::Error::other(self).at_step(step)
    }
}

impl AtStep for serde_json::Error {
    fn at_step(self, step: String) -> Error {
        io::Error::new(io::ErrorKind::InvalidData, self).at_step(step)
    }
}

impl AtStep for Error {
    fn at_step(self, step: String) -> Error {
        match self {
            Error::Os(source) => Error::Kernel { step, source },
            e => Error::At {
                step,
                source: Box::new(e),
            },
        }
    }
}

impl AtStep for libxdp::LibxdpError {
    fn at_step(self, step: String) -> Error {
        Error::from(self).at_step(step)
    }
}

/// Names the step a result failed at: `step: what it said`.
pub(crate) trait Context<T> {
    fn context(self, step: impl fmt::Display) -> Result<T>;
    fn with_context<S: fmt::Display>(self, step: impl FnOnce() -> S) -> Result<T>;
}

impl<T, E: AtStep> Context<T> for std::result::Result<T, E> {
    fn context(self, step: impl fmt::Display) -> Result<T> {
        self.map_err(|e| e.at_step(step.to_string()))
    }

    fn with_context<S: fmt::Display>(self, step: impl FnOnce() -> S) -> Result<T> {
        self.map_err(|e| e.at_step(step().to_string()))
    }
}

/// A missing value: what is there is not what should be ([`Error::State`]).
impl<T> Context<T> for Option<T> {
    fn context(self, what: impl fmt::Display) -> Result<T> {
        self.ok_or_else(|| Error::State(what.to_string()))
    }

    fn with_context<S: fmt::Display>(self, what: impl FnOnce() -> S) -> Result<T> {
        self.ok_or_else(|| Error::State(what().to_string()))
    }
}

/// `return Err(Error::Invalid(format!(...)))`: an input that cannot work.
macro_rules! invalid {
    ($($t:tt)*) => {
        return Err($crate::xdp::Error::Invalid(format!($($t)*)))
    };
}

/// `return Err(Error::State(format!(...)))`: a state that is not right.
macro_rules! bad_state {
    ($($t:tt)*) => {
        return Err($crate::xdp::Error::State(format!($($t)*)))
    };
}
pub(crate) use {bad_state, invalid};

/// How a set runs: the engine that built it (kept in its record).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EngineKind {
    /// One program, attached as it is: nothing in between.
    Direct,
    /// bpfmux's freplace dispatcher (any kernel with BPF trampolines).
    Dispatcher,
    /// The series' kernel chain calls (BPF_PROG_CHAIN_*).
    KernelChain,
    /// libxdp's multiprog dispatcher, shared with other libxdp users.
    Libxdp,
}

impl fmt::Display for EngineKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EngineKind::Direct => "direct",
            EngineKind::Dispatcher => "dispatcher",
            EngineKind::KernelChain => "kernel-chain",
            EngineKind::Libxdp => "libxdp",
        })
    }
}

/// Where the kernel runs the XDP program.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// The driver's native mode if it has one, else generic.
    #[default]
    Auto,
    /// In the driver (fails if the driver has no XDP support).
    Native,
    /// In the generic skb path (any interface, slower).
    Generic,
}

impl Mode {
    fn link_flags(self) -> u32 {
        match self {
            Mode::Auto => 0,
            Mode::Native => libbpf_sys::XDP_FLAGS_DRV_MODE,
            Mode::Generic => libbpf_sys::XDP_FLAGS_SKB_MODE,
        }
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Mode::Auto => "auto",
            Mode::Native => "native",
            Mode::Generic => "generic",
        })
    }
}

/// How [`attach`] runs a set.
#[derive(Clone, Copy, Debug, Default)]
pub struct AttachOptions {
    /// Where the kernel runs it.
    pub mode: Mode,
    /// Which engine builds it.
    pub engine: EngineChoice,
    /// libxdp engine: the run priority of the set's first program (the
    /// others follow in order: +1, +2, ...); None: libxdp's default, 50.
    /// Lower runs first, also relative to other tools' programs.
    pub priority: Option<u32>,
}

/// One interface's set as `list` (and `attach`) report it, whatever the
/// engine.
#[derive(Clone, Debug, Serialize)]
pub struct SetView {
    /// The interface's index.
    pub ifindex: u32,
    /// The interface's name now; None once it is gone.
    pub ifname: Option<String>,
    /// Where the kernel runs the head program: native, generic, or None
    /// when the link is no longer attached.
    pub running: Option<String>,
    /// The XDP link bpfmux pinned for the interface.
    pub link_id: u32,
    /// The recorded set; None if the record is missing or unreadable (see
    /// problems).
    pub set: Option<SetRecord>,
    /// Differences between the record and the kernel; empty when healthy.
    pub problems: Vec<Problem>,
    /// libxdp engine: libxdp's dispatcher the set runs in, with every
    /// program in it, other tools' too.
    pub libxdp: Option<libxdp::Dispatcher>,
}

/// An XDP program bpfmux did not attach.
#[derive(Clone, Debug, Serialize)]
pub struct Foreign {
    /// The interface's index.
    pub ifindex: u32,
    /// The interface's name.
    pub ifname: String,
    /// The program attached there.
    pub prog_id: u32,
    /// When that program is libxdp's dispatcher: it and its programs.
    pub libxdp: Option<libxdp::Dispatcher>,
}

/// Everything [`list`] found.
#[derive(Clone, Debug, Serialize)]
pub struct Listing {
    /// Sets bpfmux attached, one per interface.
    pub sets: Vec<SetView>,
    /// XDP programs other tools attached.
    pub foreign: Vec<Foreign>,
}

/// What [`attach`] did.
#[derive(Clone, Debug, Serialize)]
pub struct AttachReport {
    /// The set now running, as [`list`] shows it.
    pub view: SetView,
    /// Head program of the set this one replaced.
    pub replaced: Option<u32>,
    /// Programs kept running from the replaced set (not loaded again).
    pub kept: usize,
    /// What went wrong after the new set was in, and did not undo it
    /// (e.g. the replaced set's pins could not all be removed).
    #[serde(skip)]
    pub warnings: Vec<String>,
}

/// The index of interface `iface`.
pub fn ifindex_of(iface: &str) -> Result<u32> {
    let c =
        CString::new(iface).map_err(|_| Error::Invalid(format!("bad interface name {iface:?}")))?;
    // SAFETY: NUL-terminated string.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        invalid!("no interface '{iface}' in this network namespace");
    }
    Ok(idx)
}

fn ifname_of(ifindex: u32) -> Option<String> {
    let mut buf = [0 as libc::c_char; libc::IF_NAMESIZE];
    // SAFETY: buffer of IF_NAMESIZE bytes as required.
    let p = unsafe { libc::if_indextoname(ifindex, buf.as_mut_ptr()) };
    if p.is_null() {
        return None;
    }
    // SAFETY: if_indextoname NUL-terminated the buffer.
    Some(
        unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned(),
    )
}

/// Every interface of this namespace: (ifindex, name).
fn interfaces() -> Vec<(u32, String)> {
    let mut out = vec![];
    // SAFETY: returns an array terminated by a zero entry, or NULL.
    let head = unsafe { libc::if_nameindex() };
    if head.is_null() {
        return out;
    }
    let mut p = head;
    // SAFETY: walk until the terminating entry, then free what we got.
    unsafe {
        while (*p).if_index != 0 {
            let name = CStr::from_ptr((*p).if_name).to_string_lossy().into_owned();
            out.push(((*p).if_index, name));
            p = p.add(1);
        }
        libc::if_freenameindex(head);
    }
    out
}

/// native / generic: where the kernel runs `prog_id` on `ifindex`.
fn running_mode(ifindex: u32, prog_id: u32) -> Option<String> {
    let q = bpf_ops::xdp_query(ifindex).ok()?;
    if q.drv_prog_id == prog_id {
        Some("native".into())
    } else if q.skb_prog_id == prog_id {
        Some("generic".into())
    } else if q.hw_prog_id == prog_id {
        Some("offload".into())
    } else {
        None
    }
}

/// Waits until no CPU can still be running the set that was just swapped
/// out. The swap itself is atomic, but a packet that entered the old
/// dispatcher just before it may still be inside; unpinning the old set
/// right away would unpatch its freplace slots under that packet (it would
/// skip the user programs). XDP runs inside an RCU read-side section, and
/// MEMBARRIER_CMD_GLOBAL is synchronize_rcu() from userspace.
fn wait_for_readers() {
    const MEMBARRIER_CMD_GLOBAL: libc::c_int = 1;
    // SAFETY: plain syscall without pointers.
    let rc = unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0) };
    if rc != 0 {
        // nohz_full kernels refuse it; packets are done in microseconds.
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// A test hook: makes `attach` fail at a named step, to prove that a
/// failure there leaves nothing half-attached. Only `before-commit` exists.
fn failpoint(step: &str) -> Result<()> {
    if std::env::var("BPFMUX_XDP_FAILPOINT").is_ok_and(|v| v == step) {
        bad_state!("failing on purpose at '{step}' (BPFMUX_XDP_FAILPOINT)");
    }
    Ok(())
}

/// [`Refusal::StateUnreadable`], as an error.
fn unreadable(iface: &str, e: &Error) -> Error {
    Refusal::StateUnreadable {
        iface: iface.to_string(),
        detail: crate::error_text(e),
    }
    .into()
}

fn explain_link_create(e: std::io::Error, iface: &str, mode: Mode) -> Error {
    let why = match e.raw_os_error() {
        Some(libc::EBUSY | libc::EEXIST) => {
            format!("{iface} already has an XDP program attached by something else")
        }
        Some(libc::EOPNOTSUPP) if mode == Mode::Native => {
            return Refusal::NoNativeXdp {
                iface: iface.to_string(),
                source: e,
            }
            .into();
        }
        _ => format!("attach XDP ({mode} mode) to {iface}"),
    };
    e.at_step(why)
}

/// Attaches `specs` to `iface` as its whole XDP set, in order, replacing
/// the set bpfmux attached before (atomically). On any error nothing
/// changes: no new program runs and no new pin remains.
pub fn attach(iface: &str, specs: &[ProgSpec], opts: &AttachOptions) -> Result<AttachReport> {
    if specs.is_empty() {
        invalid!("no programs given");
    }
    // A program after one that continues on nothing could never run (and
    // the verifier would prune its dispatcher slot): say so instead.
    if let Some(i) = specs[..specs.len() - 1]
        .iter()
        .position(|s| s.chain_on == ActionSet(0))
    {
        return Err(Refusal::NeverRuns {
            index: i,
            program: specs[i + 1].display(),
            blocker: specs[i].display(),
        }
        .into());
    }
    let ifindex = ifindex_of(iface)?;
    // Everything about the inputs is checked before the kernel is touched.
    let resolved = specs
        .iter()
        .map(program::resolve)
        .collect::<Result<Vec<_>>>()?;
    let store = Store::open()?;
    let _lock = store.lock()?;
    let dir = store.iface(ifindex);

    let mut current = dir.current()?;
    if current
        .as_ref()
        .is_some_and(|c| c.link_info.xdp_ifindex != ifindex)
    {
        // The link outlived its interface (this ifindex was reused).
        current = None;
        dir.remove()?;
    }
    // libxdp's dispatcher here (anyone's), and bpfmux's programs in it.
    let (theirs, ours) = match &current {
        Some(_) => (None, None),
        None => (
            libxdp::dispatcher(ifindex, &[]).ok().flatten(),
            dir.libxdp_record(),
        ),
    };
    let to_libxdp = match opts.engine {
        EngineChoice::Libxdp => true,
        EngineChoice::Auto => theirs.is_some() || ours.is_some(),
        EngineChoice::Dispatcher | EngineChoice::KernelChain => {
            if let Some(d) = &theirs {
                return Err(Refusal::LibxdpRuns {
                    iface: iface.to_string(),
                    prog_id: d.prog_id,
                    programs: names(&d.components),
                }
                .into());
            }
            if ours.is_some() {
                return Err(Refusal::OursInLibxdp {
                    iface: iface.to_string(),
                }
                .into());
            }
            false
        }
    };
    if to_libxdp {
        if let Some(c) = &current {
            let engine = c
                .record
                .as_ref()
                .map_or("bpfmux's".to_string(), |r| r.engine.to_string());
            return Err(Refusal::NotInLibxdp {
                iface: iface.to_string(),
                engine,
            }
            .into());
        }
        let ours = match ours {
            Some(Ok(r)) => Some(r),
            Some(Err(e)) => return Err(unreadable(iface, &e)),
            None => None,
        };
        return attach_libxdp(iface, ifindex, &dir, &resolved, opts, ours, theirs);
    }
    let engine = engine::choose(opts.engine, resolved.len())?;
    if current.is_none() {
        if let Some(id) = bpf_ops::xdp_query(ifindex)
            .with_context(|| format!("query XDP on {iface}"))?
            .any()
        {
            bad_state!(
                "{iface} already runs XDP program {id}, which bpfmux did not attach; \
                 remove it first (ip link set dev {iface} xdp off)"
            );
        }
    }
    if let Some(c) = &current {
        match &c.record {
            Ok(r) if r.mode != opts.mode => bad_state!(
                "the set on {iface} was attached in {} mode; detach it first to use {} mode",
                r.mode,
                opts.mode
            ),
            Ok(_) => {}
            Err(e) => return Err(unreadable(iface, e)),
        }
    }

    let result = (|| -> Result<AttachReport> {
        let previous = current.as_ref().and_then(|c| {
            c.record.as_ref().ok().map(|record| engine::Previous {
                record,
                generation: &c.generation,
            })
        });
        let built = engine.build(&resolved, previous)?;
        let head_id = bpf_ops::prog_info(built.head.as_fd())?.id;
        let record = SetRecord {
            format: state::FORMAT,
            ifindex,
            ifname: iface.to_string(),
            mode: opts.mode,
            engine: engine.kind(),
            head_prog_id: head_id,
            progs: built.progs.clone(),
        };
        let gen = GenerationWriter::create(dir.generation_path(head_id))?;
        for (name, fd) in &built.pins {
            gen.pin(name, fd)?;
        }
        gen.write_record(&record)?;
        failpoint("before-commit")?;

        // The commit: one link operation makes the new set live.
        let replaced = match &current {
            Some(c) => {
                let old = bpf_ops::prog_fd_by_id(c.link_info.prog_id)
                    .context("open the running head program")?;
                bpf_ops::link_replace(c.link.as_fd(), built.head.as_fd(), old.as_fd())
                    .with_context(|| format!("swap the new set into {iface}'s XDP link"))?;
                Some(c.link_info.prog_id)
            }
            None => {
                let link =
                    bpf_ops::link_create_xdp(built.head.as_fd(), ifindex, opts.mode.link_flags())
                        .map_err(|e| explain_link_create(e, iface, opts.mode))?;
                // If pinning fails the link closes with this function and
                // the interface is left as it was.
                bpf_ops::pin(link.as_fd(), &dir.link_path())
                    .with_context(|| format!("pin {}", dir.link_path().display()))?;
                None
            }
        };
        let keep = gen.dir().to_path_buf();
        gen.commit();
        wait_for_readers();
        // The old generation's pins held the replaced set; unpinning frees it.
        let warnings = match dir.prune(Some(&keep)) {
            Ok(()) => vec![],
            Err(e) => vec![format!(
                "removing the replaced set's pins: {}",
                crate::error_text(&e)
            )],
        };
        let link_id = bpf_ops::get_pinned(&dir.link_path())
            .and_then(|l| bpf_ops::link_info(l.as_fd()))
            .map(|i| i.id)
            .unwrap_or(0);
        Ok(AttachReport {
            view: SetView {
                ifindex,
                ifname: Some(iface.to_string()),
                running: running_mode(ifindex, head_id),
                link_id,
                set: Some(record),
                problems: vec![],
                libxdp: None,
            },
            replaced,
            kept: built.kept,
            warnings,
        })
    })();
    if result.is_err() && current.is_none() {
        let _ = dir.remove();
        store.tidy();
    }
    result
}

/// `a, b, c`: the names of a dispatcher's programs.
fn names(components: &[libxdp::Component]) -> String {
    if components.is_empty() {
        return "no programs".into();
    }
    components
        .iter()
        .map(|c| c.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// [`attach`] through libxdp: adds the set to libxdp's dispatcher on
/// `iface` (creating it if the interface runs nothing), then removes the
/// set bpfmux had there. libxdp changes a dispatcher by swapping in a new
/// one; a replacement is therefore two swaps, and packets in between run
/// both sets (never neither).
fn attach_libxdp(
    iface: &str,
    ifindex: u32,
    dir: &state::IfaceDir,
    resolved: &[program::Resolved],
    opts: &AttachOptions,
    previous: Option<SetRecord>,
    theirs: Option<libxdp::Dispatcher>,
) -> Result<AttachReport> {
    if let Some(why) = libxdp::unavailable() {
        return Err(why.at_step("the libxdp engine".into()));
    }
    for r in resolved {
        libxdp::check_actions(r.spec.chain_on)
            .with_context(|| format!("program {}", r.spec.display()))?;
    }
    if theirs.is_none() {
        if let Some(id) = bpf_ops::xdp_query(ifindex)
            .with_context(|| format!("query XDP on {iface}"))?
            .any()
        {
            bad_state!(
                "{iface} already runs XDP program {id}, which is not libxdp's dispatcher and \
                 which bpfmux did not attach; remove it first (ip link set dev {iface} xdp off)"
            );
        }
    }
    if let Some(p) = &previous {
        if p.mode != opts.mode {
            bad_state!(
                "the set on {iface} was attached in {} mode; detach it first to use {} mode",
                p.mode,
                opts.mode
            );
        }
    }
    // bpfmux's programs of the set being replaced that still run.
    let old_ids: Vec<u32> = match (&previous, &theirs) {
        (Some(p), Some(d)) => p
            .progs
            .iter()
            .map(|r| r.prog_id)
            .filter(|id| d.components.iter().any(|c| c.prog_id == *id))
            .collect(),
        _ => vec![],
    };
    let others = theirs
        .as_ref()
        .map_or(0, |d| d.components.len() - old_ids.len());
    if others + old_ids.len() + resolved.len() > libxdp::MAX_PROGS {
        return Err(Refusal::LibxdpFull {
            iface: iface.to_string(),
            max: libxdp::MAX_PROGS,
            others,
            replaced: old_ids.len(),
            new: resolved.len(),
        }
        .into());
    }
    let base = opts.priority.unwrap_or(libxdp::DEFAULT_PRIO);
    let new: Vec<libxdp::NewProg<'_>> = resolved
        .iter()
        .enumerate()
        .map(|(i, r)| libxdp::NewProg {
            object: &r.origin.object,
            program: &r.origin.program,
            run_prio: base.saturating_add(i as u32),
            chain_on: r.spec.chain_on,
        })
        .collect();
    let ids = libxdp::attach(ifindex, opts.mode, &new)
        .with_context(|| format!("attach to {iface} through libxdp"))?;
    let dispatcher = libxdp::dispatcher(ifindex, &ids).ok().flatten();
    let record = SetRecord {
        format: state::FORMAT,
        ifindex,
        ifname: iface.to_string(),
        mode: opts.mode,
        engine: EngineKind::Libxdp,
        head_prog_id: dispatcher.as_ref().map_or(0, |d| d.prog_id),
        progs: resolved
            .iter()
            .zip(&ids)
            .map(|(r, &prog_id)| ProgRecord {
                name: r.origin.program.clone(),
                prog_id,
                chain_on: r.spec.chain_on,
                origin: r.origin.clone(),
            })
            .collect(),
    };
    if let Err(e) = failpoint("before-commit").and_then(|()| dir.write_libxdp_record(&record)) {
        // Take the programs out again: nothing of this attach stays.
        if let Err(undo) = libxdp::detach(ifindex, &ids) {
            return Err(e.at_step(format!(
                "and removing the new programs again failed ({undo}); remove them with \
                 xdp-loader unload {iface} --id ID (ids {ids:?})"
            )));
        }
        if previous.is_none() {
            let _ = dir.remove();
        }
        return Err(e);
    }
    let replaced = previous.as_ref().map(|p| p.head_prog_id);
    if !old_ids.is_empty() {
        libxdp::detach(ifindex, &old_ids).with_context(|| {
            format!(
                "the new set runs on {iface}, but removing the set it replaces failed; \
                 remove its programs with xdp-loader unload {iface} --id ID (ids {old_ids:?})"
            )
        })?;
    }
    let dispatcher = libxdp::dispatcher(ifindex, &ids).ok().flatten();
    Ok(AttachReport {
        view: SetView {
            ifindex,
            ifname: Some(iface.to_string()),
            running: dispatcher.as_ref().map(|d| d.mode.clone()),
            link_id: 0,
            set: Some(record),
            problems: vec![],
            libxdp: dispatcher,
        },
        replaced,
        kept: 0,
        warnings: vec![],
    })
}

/// What [`detach`] removed.
#[derive(Clone, Debug, Serialize)]
pub struct DetachReport {
    /// The engine of bpfmux's set; None when there was none (`force`).
    pub engine: Option<EngineKind>,
    /// The head program the interface ran: the set's, or libxdp's
    /// dispatcher.
    pub head_prog_id: u32,
    /// Programs of bpfmux's set taken off the interface.
    pub removed: Vec<u32>,
    /// Programs of bpfmux's set another tool had already removed.
    pub already_gone: Vec<u32>,
    /// `force`: other tools' programs removed with libxdp's dispatcher.
    pub forced: Vec<libxdp::Component>,
    /// Other tools' programs still running in libxdp's dispatcher there.
    pub others_left: Vec<libxdp::Component>,
}

/// Detaches bpfmux's set from `iface` and removes its pins. In libxdp's
/// dispatcher only bpfmux's programs go; with `force`, the whole dispatcher
/// goes, other tools' programs and libxdp's pins included (as with
/// `xdp-loader unload IFACE --all`).
pub fn detach(iface: &str, force: bool) -> Result<DetachReport> {
    let ifindex = ifindex_of(iface)?;
    let store = Store::open()?;
    let _lock = store.lock()?;
    let dir = store.iface(ifindex);
    if dir.current()?.is_none() {
        if let Some(record) = dir.libxdp_record() {
            return detach_libxdp(iface, ifindex, &dir, &store, record, force);
        }
        if force {
            let forced = libxdp::detach_all(ifindex)
                .with_context(|| format!("remove libxdp's dispatcher from {iface}"))?;
            if let Some(d) = forced {
                dir.remove()?;
                store.tidy();
                return Ok(DetachReport {
                    engine: None,
                    head_prog_id: d.prog_id,
                    removed: vec![],
                    already_gone: vec![],
                    forced: d.components,
                    others_left: vec![],
                });
            }
        }
    }
    detach_own(iface, ifindex, &dir, &store).map(|(engine, head_prog_id, removed)| DetachReport {
        engine,
        head_prog_id,
        removed,
        already_gone: vec![],
        forced: vec![],
        others_left: vec![],
    })
}

fn detach_libxdp(
    iface: &str,
    ifindex: u32,
    dir: &state::IfaceDir,
    store: &Store,
    record: Result<SetRecord>,
    force: bool,
) -> Result<DetachReport> {
    let record = record.with_context(|| {
        format!(
            "the state of bpfmux's programs in libxdp's dispatcher on {iface} is unreadable \
             (remove them with xdp-loader unload {iface} --id ID)"
        )
    })?;
    let ids: Vec<u32> = record.progs.iter().map(|p| p.prog_id).collect();
    let before = libxdp::dispatcher(ifindex, &ids)
        .with_context(|| format!("read libxdp's dispatcher on {iface}"))?;
    let removed = if force {
        libxdp::detach_all(ifindex)
            .with_context(|| format!("remove libxdp's dispatcher from {iface}"))?;
        before.as_ref().map_or(vec![], |d| {
            d.components
                .iter()
                .filter(|c| c.bpfmux)
                .map(|c| c.prog_id)
                .collect()
        })
    } else {
        libxdp::detach(ifindex, &ids).with_context(|| {
            format!("remove bpfmux's programs from libxdp's dispatcher on {iface}")
        })?
    };
    dir.remove()?;
    store.tidy();
    let others = |d: &Option<libxdp::Dispatcher>| -> Vec<libxdp::Component> {
        d.as_ref().map_or(vec![], |d| {
            d.components.iter().filter(|c| !c.bpfmux).cloned().collect()
        })
    };
    let after = if force {
        None
    } else {
        libxdp::dispatcher(ifindex, &[]).ok().flatten()
    };
    Ok(DetachReport {
        engine: Some(EngineKind::Libxdp),
        head_prog_id: before.as_ref().map_or(record.head_prog_id, |d| d.prog_id),
        already_gone: ids
            .iter()
            .copied()
            .filter(|id| !removed.contains(id))
            .collect(),
        removed,
        forced: if force { others(&before) } else { vec![] },
        others_left: others(&after),
    })
}

/// Detaches bpfmux's own (link-based) set: (engine, head program, programs).
fn detach_own(
    iface: &str,
    ifindex: u32,
    dir: &state::IfaceDir,
    store: &Store,
) -> Result<(Option<EngineKind>, u32, Vec<u32>)> {
    let Some(current) = dir.current()? else {
        let leftover = dir.path.exists();
        dir.remove()?;
        store.tidy();
        if let Some(d) = libxdp::dispatcher(ifindex, &[]).ok().flatten() {
            return Err(Refusal::OnlyTheirs {
                iface: iface.to_string(),
                prog_id: d.prog_id,
                programs: names(&d.components),
            }
            .into());
        }
        if let Some(id) = bpf_ops::xdp_query(ifindex)?.any() {
            bad_state!(
                "{iface} runs XDP program {id}, which bpfmux did not attach \
                 (ip link set dev {iface} xdp off removes it)"
            );
        }
        if leftover {
            bad_state!("nothing attached to {iface} by bpfmux (removed leftover state)");
        }
        bad_state!("nothing attached to {iface} by bpfmux");
    };
    let head = current.link_info.prog_id;
    let (engine, progs) = match &current.record {
        Ok(r) => (Some(r.engine), r.progs.iter().map(|p| p.prog_id).collect()),
        Err(_) => (None, vec![]),
    };
    if current.link_info.xdp_ifindex == ifindex {
        bpf_ops::link_detach(current.link.as_fd())
            .with_context(|| format!("detach the XDP link from {iface}"))?;
    }
    drop(current);
    wait_for_readers();
    dir.remove()?;
    store.tidy();
    if let Some(id) = bpf_ops::xdp_query(ifindex)?.any() {
        bad_state!("{iface} still runs XDP program {id} after detach");
    }
    Ok((engine, head, progs))
}

/// Removes the state of sets whose interface is gone, in any network
/// namespace (a deleted namespace takes its interfaces along but leaves
/// their defunct links and programs pinned); returns their ifindexes.
pub fn prune_stale() -> Result<Vec<u32>> {
    let store = Store::open()?;
    let _lock = store.lock()?;
    let mut removed = vec![];
    for dir in store.ifaces_everywhere()? {
        // A defunct XDP link reports ifindex 0.
        let stale = match dir.current() {
            // bpfmux's programs in libxdp's dispatcher: libxdp's pins hold
            // them, so the set is stale once none of them is loaded.
            Ok(None) => match dir.libxdp_record() {
                Some(Ok(r)) => r
                    .progs
                    .iter()
                    .all(|p| bpf_ops::prog_fd_by_id(p.prog_id).is_err()),
                Some(Err(_)) => false,
                None => true,
            },
            Ok(Some(c)) => c.link_info.xdp_ifindex != dir.ifindex,
            Err(_) => false, // unreadable is not proof of staleness
        };
        if stale {
            dir.remove()?;
            removed.push(dir.ifindex);
        }
    }
    store.tidy_everywhere();
    Ok(removed)
}

fn view(dir: &state::IfaceDir) -> Result<SetView> {
    let mut v = SetView {
        ifindex: dir.ifindex,
        ifname: None,
        running: None,
        link_id: 0,
        set: None,
        problems: vec![],
        libxdp: None,
    };
    let Some(c) = dir.current()? else {
        if let Some(record) = dir.libxdp_record() {
            return Ok(libxdp_view(v, record));
        }
        v.problems.push(Problem::Leftover);
        return Ok(v);
    };
    v.link_id = c.link_info.id;
    if c.link_info.xdp_ifindex != dir.ifindex {
        v.problems.push(Problem::InterfaceGone);
    } else {
        v.ifname = ifname_of(dir.ifindex);
        v.running = running_mode(dir.ifindex, c.link_info.prog_id);
        if v.running.is_none() {
            v.problems.push(Problem::Other(
                "the link's program is not what the interface runs".into(),
            ));
        }
    }
    match c.record {
        Ok(r) => {
            if r.head_prog_id != c.link_info.prog_id {
                v.problems.push(Problem::Other(format!(
                    "link runs program {}, the record says {}",
                    c.link_info.prog_id, r.head_prog_id
                )));
            }
            match engine::engine(r.engine) {
                Some(e) => v
                    .problems
                    .extend(e.check(&r, &c.generation).into_iter().map(Problem::Other)),
                None => v.problems.push(Problem::Other(format!(
                    "a {} set recorded under an XDP link",
                    r.engine
                ))),
            }
            v.set = Some(r);
        }
        Err(e) => v.problems.push(Problem::Other(crate::error_text(&e))),
    }
    Ok(v)
}

/// bpfmux's programs in libxdp's dispatcher, checked against what libxdp
/// reads from the kernel: the dispatcher with everything in it.
fn libxdp_view(mut v: SetView, record: Result<SetRecord>) -> SetView {
    let record = match record {
        Ok(r) => r,
        Err(e) => {
            v.problems.push(Problem::Other(crate::error_text(&e)));
            return v;
        }
    };
    let ids: Vec<u32> = record.progs.iter().map(|p| p.prog_id).collect();
    v.ifname = ifname_of(v.ifindex);
    if v.ifname.is_none() {
        v.problems.push(Problem::InterfaceGone);
    } else {
        match libxdp::dispatcher(v.ifindex, &ids) {
            Ok(Some(d)) => {
                for p in &record.progs {
                    if !d.components.iter().any(|c| c.prog_id == p.prog_id) {
                        v.problems.push(Problem::NotInDispatcher {
                            program: p.name.clone(),
                            prog_id: p.prog_id,
                            iface: record.ifname.clone(),
                        });
                    }
                }
                v.running = Some(d.mode.clone());
                v.libxdp = Some(d);
            }
            Ok(None) => v.problems.push(Problem::DispatcherGone {
                iface: record.ifname.clone(),
            }),
            Err(e) => v.problems.push(Problem::Other(format!("{e}"))),
        }
    }
    v.set = Some(record);
    v
}

/// Every set bpfmux attached in this network namespace, checked against
/// the kernel, plus the XDP programs on other interfaces.
pub fn list() -> Result<Listing> {
    let store = Store::open()?;
    let _lock = store.lock()?;
    let sets = store
        .ifaces()?
        .iter()
        .map(view)
        .collect::<Result<Vec<_>>>()?;
    let foreign = interfaces()
        .into_iter()
        .filter(|(idx, _)| !sets.iter().any(|s| s.ifindex == *idx))
        .filter_map(|(ifindex, ifname)| {
            let prog_id = bpf_ops::xdp_query(ifindex).ok()?.any()?;
            Some(Foreign {
                ifindex,
                ifname,
                prog_id,
                libxdp: libxdp::dispatcher(ifindex, &[]).ok().flatten(),
            })
        })
        .collect();
    Ok(Listing { sets, foreign })
}
