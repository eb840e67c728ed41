//! fentry / fexit / fmod_ret / freplace: load one of the skeleton's probe
//! programs against a real kernel function (or a BPF program, for freplace)
//! and attach it. These all go through a BPF trampoline.

use std::mem::MaybeUninit;

use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::OpenObject;

use super::btf::{KernelBtf, FENTRY_TARGETS, FMOD_RET_TARGET};
use super::Probe;
use crate::bpf::probes::{OpenProbesSkel, ProbesSkelBuilder};

#[derive(Clone, Copy)]
enum Kind {
    Fentry,
    Fexit,
    FmodRet,
}

pub fn fentry(btf: &KernelBtf) -> Probe {
    kernel_target(btf, Kind::Fentry)
}

pub fn fexit(btf: &KernelBtf) -> Probe {
    kernel_target(btf, Kind::Fexit)
}

pub fn fmod_ret(btf: &KernelBtf) -> Probe {
    kernel_target(btf, Kind::FmodRet)
}

/// Turns autoload off for every program but `keep`: one object, one probe.
pub(super) fn only(skel: &mut OpenProbesSkel<'_>, keep: &str) {
    let p = &mut skel.progs;
    let all = [
        &mut p.probe_fentry,
        &mut p.probe_fexit,
        &mut p.probe_fmod_ret,
        &mut p.probe_kprobe_multi,
        &mut p.probe_kprobe_session,
        &mut p.probe_uprobe_multi,
        &mut p.probe_xdp,
        &mut p.probe_freplace,
    ];
    for prog in all {
        let name = prog.name().to_string_lossy().into_owned();
        prog.set_autoload(name == keep);
    }
}

fn kernel_target(btf: &KernelBtf, kind: Kind) -> Probe {
    let (prog_name, target) = match kind {
        Kind::Fentry | Kind::Fexit => {
            let Some((name, _)) = btf.first_func(FENTRY_TARGETS) else {
                return Probe::error(format!(
                    "no probe target in vmlinux BTF (looked for {FENTRY_TARGETS:?})"
                ));
            };
            let prog = if matches!(kind, Kind::Fentry) {
                "probe_fentry"
            } else {
                "probe_fexit"
            };
            (prog, name)
        }
        Kind::FmodRet => {
            if btf.func_id(FMOD_RET_TARGET).is_none() {
                return Probe::error(format!("{FMOD_RET_TARGET} not in vmlinux BTF"));
            }
            ("probe_fmod_ret", FMOD_RET_TARGET)
        }
    };
    let mut obj = MaybeUninit::<OpenObject>::uninit();
    let mut open = match ProbesSkelBuilder::default().open(&mut obj) {
        Ok(s) => s,
        Err(e) => return Probe::from_libbpf("open skeleton", &e),
    };
    only(&mut open, prog_name);
    let prog = match kind {
        Kind::Fentry => &mut open.progs.probe_fentry,
        Kind::Fexit => &mut open.progs.probe_fexit,
        Kind::FmodRet => &mut open.progs.probe_fmod_ret,
    };
    if let Err(e) = prog.set_attach_target(0, Some(target.to_string())) {
        return Probe::from_libbpf("set attach target", &e);
    }
    let skel = match open.load() {
        Ok(s) => s,
        Err(e) => return Probe::from_libbpf(&format!("load {prog_name} on {target}"), &e),
    };
    let prog = match kind {
        Kind::Fentry => &skel.progs.probe_fentry,
        Kind::Fexit => &skel.progs.probe_fexit,
        Kind::FmodRet => &skel.progs.probe_fmod_ret,
    };
    match prog.attach_trace() {
        Ok(_link) => Probe::yes(format!("loaded and attached to {target}")),
        Err(e) => Probe::from_libbpf(&format!("attach to {target}"), &e),
    }
}

/// Whether the verifier takes an fmod_ret program on the kernel function
/// `target`: loaded, not attached (the verifier decides at load).
pub fn fmod_ret_loads_on(target: &str) -> Probe {
    let mut obj = MaybeUninit::<OpenObject>::uninit();
    let mut open = match ProbesSkelBuilder::default().open(&mut obj) {
        Ok(s) => s,
        Err(e) => return Probe::from_libbpf("open skeleton", &e),
    };
    only(&mut open, "probe_fmod_ret");
    if let Err(e) = open
        .progs
        .probe_fmod_ret
        .set_attach_target(0, Some(target.to_string()))
    {
        return Probe::from_libbpf("set attach target", &e);
    }
    let probe = match open.load() {
        Ok(_) => Probe::yes(format!("the verifier takes fmod_ret on {target}")),
        Err(e) => Probe::from_libbpf(&format!("load probe_fmod_ret on {target}"), &e),
    };
    probe
}

/// freplace: load the XDP probe (which calls a global subprogram), then an
/// extension program replacing that subprogram, and attach it.
pub fn freplace() -> Probe {
    let mut tobj = MaybeUninit::<OpenObject>::uninit();
    let mut topen = match ProbesSkelBuilder::default().open(&mut tobj) {
        Ok(s) => s,
        Err(e) => return Probe::from_libbpf("open skeleton", &e),
    };
    only(&mut topen, "probe_xdp");
    let target = match topen.load() {
        Ok(s) => s,
        Err(e) => return Probe::from_libbpf("load XDP target program", &e),
    };
    let target_fd = {
        use std::os::fd::{AsFd, AsRawFd};
        target.progs.probe_xdp.as_fd().as_raw_fd()
    };

    let mut obj = MaybeUninit::<OpenObject>::uninit();
    let mut open = match ProbesSkelBuilder::default().open(&mut obj) {
        Ok(s) => s,
        Err(e) => return Probe::from_libbpf("open skeleton", &e),
    };
    only(&mut open, "probe_freplace");
    let prog = &mut open.progs.probe_freplace;
    if let Err(e) = prog.set_attach_target(target_fd, Some("probe_xdp_stub".into())) {
        return Probe::from_libbpf("set attach target", &e);
    }
    let skel = match open.load() {
        Ok(s) => s,
        Err(e) => return Probe::from_libbpf("load freplace program", &e),
    };
    match skel.progs.probe_freplace.attach_trace() {
        Ok(_link) => Probe::yes("replaced a global function of a loaded XDP program"),
        Err(e) => Probe::from_libbpf("attach freplace", &e),
    }
}
