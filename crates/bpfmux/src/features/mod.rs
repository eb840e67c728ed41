//! What the running kernel offers, each found by a real probe (a load or
//! attach attempt, or an ioctl) — never by version number.
//!
//! Every probe answers yes / no (not supported) / not permitted (the kernel
//! has it but refused us, e.g. EPERM for trampolines under a lockdown or LSM
//! policy) / error (the probe itself could not run).

mod btf;
mod kprobe;
mod procmap;
mod series;
mod tracing_multi;
mod trampoline;
mod uprobe;
mod xdp;

use std::fmt;
use std::io;

use serde::Serialize;

pub use btf::KernelBtf;

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    Yes,
    /// Not supported by this kernel.
    No,
    /// Supported, but this process may not use it here.
    NotPermitted,
    /// The probe could not decide.
    Error,
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Status::Yes => "yes",
            Status::No => "no",
            Status::NotPermitted => "not permitted",
            Status::Error => "error",
        })
    }
}

/// One row of `bpfmux features`.
#[derive(Clone, Debug, Serialize)]
pub struct Feature {
    /// Stable key, e.g. `fentry`, `kprobe.multi`.
    pub name: &'static str,
    /// `upstream` or `bpfmux-series` (this project's kernel additions).
    pub origin: &'static str,
    pub status: Status,
    /// How it was probed and what the kernel said.
    pub detail: String,
}

/// Outcome of one probe before it is named.
#[derive(Clone, Debug)]
pub struct Probe {
    pub status: Status,
    pub detail: String,
}

impl Probe {
    pub fn yes(detail: impl Into<String>) -> Self {
        Self {
            status: Status::Yes,
            detail: detail.into(),
        }
    }

    pub fn no(detail: impl Into<String>) -> Self {
        Self {
            status: Status::No,
            detail: detail.into(),
        }
    }

    pub fn error(detail: impl Into<String>) -> Self {
        Self {
            status: Status::Error,
            detail: detail.into(),
        }
    }

    /// Classifies a failed step by errno: EPERM/EACCES mean "the kernel
    /// knows this, but refuses us"; resource and transient errors leave the
    /// question open; anything else (EINVAL, EOPNOTSUPP, ENOTSUPP, ENOENT,
    /// E2BIG, ESRCH, ...) means the kernel does not support it.
    pub fn from_errno(step: &str, errno: Option<i32>, msg: &dyn fmt::Display) -> Self {
        let status = match errno {
            Some(libc::EPERM) | Some(libc::EACCES) => Status::NotPermitted,
            Some(libc::ENOMEM) | Some(libc::EINTR) | Some(libc::EAGAIN) | Some(libc::EBUSY)
            | Some(libc::EMFILE) => Status::Error,
            Some(_) => Status::No,
            None => Status::Error,
        };
        Self {
            status,
            detail: format!("{step}: {msg}"),
        }
    }

    pub fn from_io(step: &str, e: &io::Error) -> Self {
        Self::from_errno(step, e.raw_os_error(), e)
    }

    pub fn from_libbpf(step: &str, e: &libbpf_rs::Error) -> Self {
        Self::from_errno(step, libbpf_errno(e), e)
    }
}

/// libbpf-rs keeps the errno only inside its message ("... (os error N)").
fn libbpf_errno(e: &libbpf_rs::Error) -> Option<i32> {
    let s = format!("{e:#}");
    let at = s.rfind("(os error ")? + "(os error ".len();
    s[at..].split(')').next()?.parse().ok()
}

/// Runs every probe. Needs root (or CAP_BPF + CAP_PERFMON + CAP_NET_ADMIN +
/// CAP_SYS_ADMIN for the netns) for meaningful answers; without it most rows
/// read "not permitted".
pub fn probe_all() -> Vec<Feature> {
    let btf = KernelBtf::load();
    let upstream = |name, p: Probe| Feature {
        name,
        origin: "upstream",
        status: p.status,
        detail: p.detail,
    };
    let series = |name, p: Probe| Feature {
        name,
        origin: "bpfmux-series",
        status: p.status,
        detail: p.detail,
    };
    vec![
        upstream("btf", btf.probe()),
        upstream("fentry", trampoline::fentry(&btf)),
        upstream("fexit", trampoline::fexit(&btf)),
        upstream("fmod_ret", trampoline::fmod_ret(&btf)),
        upstream("freplace", trampoline::freplace()),
        upstream("tracing_multi", tracing_multi::probe(&btf)),
        upstream("kprobe.multi", kprobe::multi(&btf)),
        upstream("kprobe.session", kprobe::session(&btf)),
        upstream("uprobe.multi", uprobe::multi()),
        upstream("xdp.generic", xdp::generic()),
        upstream("xdp.native", xdp::native()),
        upstream("procmap_query", procmap::probe()),
        series("global_trampoline", series::global_trampoline(&btf)),
        series("fmod_ret.multi", series::fmod_ret_multi(&btf)),
        series("fsession.multi.global", series::fsession_multi_global(&btf)),
        series("xdp.chain_calls", series::xdp_chain_calls(&btf)),
    ]
}

/// One probe by its `bpfmux features` name, for callers that only need a
/// few (e.g. `bpfmux trace` choosing an engine). `None`: no such probe here.
pub fn probe_one(name: &str, btf: &KernelBtf) -> Option<Probe> {
    Some(match name {
        "fentry" => trampoline::fentry(btf),
        "fexit" => trampoline::fexit(btf),
        "tracing_multi" => tracing_multi::probe(btf),
        "kprobe.multi" => kprobe::multi(btf),
        "kprobe.session" => kprobe::session(btf),
        "global_trampoline" => series::global_trampoline(btf),
        "fmod_ret.multi" => series::fmod_ret_multi(btf),
        "fsession.multi.global" => series::fsession_multi_global(btf),
        _ => return None,
    })
}

/// Silences libbpf's own stderr logging while probes fail on purpose.
pub fn quiet_libbpf() {
    libbpf_rs::set_print(None);
}
