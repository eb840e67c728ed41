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
use std::str::FromStr;

use serde::Serialize;

pub use btf::KernelBtf;

/// A probe's answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// Supported, and this process may use it.
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

/// A kernel feature bpfmux can probe: the rows of `bpfmux features`, and
/// what engine selection asks about.
///
/// ```
/// use bpfmux::features::Feature;
///
/// let f: Feature = "kprobe.session".parse().unwrap();
/// assert_eq!(f, Feature::KprobeSession);
/// assert_eq!(f.to_string(), "kprobe.session");
/// assert!(Feature::ALL.iter().all(|f| f.name().parse() == Ok(*f)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Feature {
    /// Kernel BTF at /sys/kernel/btf/vmlinux.
    Btf,
    /// fentry programs (a BPF trampoline per function).
    Fentry,
    /// fexit programs.
    Fexit,
    /// fmod_ret programs.
    FmodRet,
    /// freplace (BPF_PROG_TYPE_EXT) programs.
    Freplace,
    /// The tracing_multi link (Linux 7.2+).
    TracingMulti,
    /// The kprobe.multi link (5.18+).
    KprobeMulti,
    /// kprobe.session programs (6.10+).
    KprobeSession,
    /// The uprobe.multi link.
    UprobeMulti,
    /// XDP in the generic (skb) path.
    XdpGeneric,
    /// XDP in the driver.
    XdpNative,
    /// The PROCMAP_QUERY ioctl on /proc/PID/maps.
    ProcmapQuery,
    /// This series: the global trampoline (BPF_F_TRACING_MULTI_GLOBAL).
    GlobalTrampoline,
    /// This series: fmod_ret.multi.
    FmodRetMulti,
    /// This series: fsession.multi on the global trampoline.
    FsessionMultiGlobal,
    /// This series: XDP chain calls (BPF_PROG_CHAIN_*).
    XdpChainCalls,
}

impl Feature {
    /// Every feature, in `bpfmux features` order.
    pub const ALL: [Feature; 16] = [
        Feature::Btf,
        Feature::Fentry,
        Feature::Fexit,
        Feature::FmodRet,
        Feature::Freplace,
        Feature::TracingMulti,
        Feature::KprobeMulti,
        Feature::KprobeSession,
        Feature::UprobeMulti,
        Feature::XdpGeneric,
        Feature::XdpNative,
        Feature::ProcmapQuery,
        Feature::GlobalTrampoline,
        Feature::FmodRetMulti,
        Feature::FsessionMultiGlobal,
        Feature::XdpChainCalls,
    ];

    /// The stable key `bpfmux features` prints, e.g. `kprobe.multi`.
    pub fn name(self) -> &'static str {
        match self {
            Feature::Btf => "btf",
            Feature::Fentry => "fentry",
            Feature::Fexit => "fexit",
            Feature::FmodRet => "fmod_ret",
            Feature::Freplace => "freplace",
            Feature::TracingMulti => "tracing_multi",
            Feature::KprobeMulti => "kprobe.multi",
            Feature::KprobeSession => "kprobe.session",
            Feature::UprobeMulti => "uprobe.multi",
            Feature::XdpGeneric => "xdp.generic",
            Feature::XdpNative => "xdp.native",
            Feature::ProcmapQuery => "procmap_query",
            Feature::GlobalTrampoline => "global_trampoline",
            Feature::FmodRetMulti => "fmod_ret.multi",
            Feature::FsessionMultiGlobal => "fsession.multi.global",
            Feature::XdpChainCalls => "xdp.chain_calls",
        }
    }

    /// Where the feature comes from.
    pub fn origin(self) -> Origin {
        match self {
            Feature::GlobalTrampoline
            | Feature::FmodRetMulti
            | Feature::FsessionMultiGlobal
            | Feature::XdpChainCalls => Origin::Series,
            _ => Origin::Upstream,
        }
    }
}

impl fmt::Display for Feature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

impl FromStr for Feature {
    type Err = UnknownFeature;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Feature::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| UnknownFeature(s.to_string()))
    }
}

impl Serialize for Feature {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// A name that is no [`Feature`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown feature {0:?}")]
pub struct UnknownFeature(pub String);

/// Upstream Linux, or this project's kernel series.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Origin {
    /// Upstream Linux.
    #[serde(rename = "upstream")]
    Upstream,
    /// This project's kernel series (`kernel/`).
    #[serde(rename = "bpfmux-series")]
    Series,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            Origin::Upstream => "upstream",
            Origin::Series => "bpfmux-series",
        })
    }
}

/// One row of `bpfmux features`.
#[derive(Clone, Debug, Serialize)]
pub struct FeatureRow {
    /// Serialized as its stable key, e.g. `kprobe.multi`.
    #[serde(rename = "name")]
    pub feature: Feature,
    /// Upstream, or this project's series.
    pub origin: Origin,
    /// What the probe found.
    pub status: Status,
    /// How it was probed and what the kernel said.
    pub detail: String,
}

/// Outcome of one probe before it is named.
#[derive(Clone, Debug)]
pub struct Probe {
    /// What the probe found.
    pub status: Status,
    /// How it was probed and what the kernel said.
    pub detail: String,
}

impl Probe {
    /// Supported.
    pub fn yes(detail: impl Into<String>) -> Self {
        Self {
            status: Status::Yes,
            detail: detail.into(),
        }
    }

    /// Not supported.
    pub fn no(detail: impl Into<String>) -> Self {
        Self {
            status: Status::No,
            detail: detail.into(),
        }
    }

    /// The probe could not decide.
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
            Some(libc::EPERM | libc::EACCES) => Status::NotPermitted,
            Some(libc::ENOMEM | libc::EINTR | libc::EAGAIN | libc::EBUSY | libc::EMFILE) => {
                Status::Error
            }
            Some(_) => Status::No,
            None => Status::Error,
        };
        Self {
            status,
            detail: format!("{step}: {msg}"),
        }
    }

    /// A failed step, classified by its errno (see [`Probe::from_errno`]).
    pub fn from_io(step: &str, e: &io::Error) -> Self {
        Self::from_errno(step, e.raw_os_error(), e)
    }

    /// A failed libbpf step, classified by the errno in its message.
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

/// Probes one feature for real. `btf` is the kernel's BTF, loaded once by
/// the caller for all the probes it runs.
pub fn probe(feature: Feature, btf: &KernelBtf) -> Probe {
    match feature {
        Feature::Btf => btf.probe(),
        Feature::Fentry => trampoline::fentry(btf),
        Feature::Fexit => trampoline::fexit(btf),
        Feature::FmodRet => trampoline::fmod_ret(btf),
        Feature::Freplace => trampoline::freplace(),
        Feature::TracingMulti => tracing_multi::probe(btf),
        Feature::KprobeMulti => kprobe::multi(btf),
        Feature::KprobeSession => kprobe::session(btf),
        Feature::UprobeMulti => uprobe::multi(),
        Feature::XdpGeneric => xdp::generic(),
        Feature::XdpNative => xdp::native(),
        Feature::ProcmapQuery => procmap::probe(),
        Feature::GlobalTrampoline => series::global_trampoline(btf),
        Feature::FmodRetMulti => series::fmod_ret_multi(btf),
        Feature::FsessionMultiGlobal => series::fsession_multi_global(btf),
        Feature::XdpChainCalls => series::xdp_chain_calls(btf),
    }
}

/// Runs every probe, in [`Feature::ALL`] order. Needs root (or CAP_BPF +
/// CAP_PERFMON + CAP_NET_ADMIN + CAP_SYS_ADMIN for the netns) for
/// meaningful answers; without it most rows read "not permitted".
pub fn probe_all() -> Vec<FeatureRow> {
    let btf = KernelBtf::load();
    Feature::ALL
        .into_iter()
        .map(|feature| {
            let p = probe(feature, &btf);
            FeatureRow {
                feature,
                origin: feature.origin(),
                status: p.status,
                detail: p.detail,
            }
        })
        .collect()
}

/// fexit.multi on the global trampoline (the series' exit side before its
/// fsession patch): not a `bpfmux features` row, asked by the trace engine.
pub fn fexit_multi_global(btf: &KernelBtf) -> Probe {
    series::fexit_multi_global(btf)
}

/// Whether the verifier takes an fmod_ret program on the kernel function
/// `target` (loaded, not attached): asked by `bpfmux inject` where the
/// kernel's rule depends on its version.
pub fn fmod_ret_allowed_on(target: &str) -> Probe {
    trampoline::fmod_ret_loads_on(target)
}

/// Silences libbpf's own stderr logging while probes fail on purpose.
pub fn quiet_libbpf() {
    libbpf_rs::set_print(None);
}
