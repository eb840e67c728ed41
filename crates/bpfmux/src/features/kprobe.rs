//! kprobe.multi and kprobe.session: load the probe program and attach it to
//! one BPF self-test function through a kprobe_multi link (fprobe based).

use std::ffi::CString;
use std::mem::MaybeUninit;

use libbpf_rs::libbpf_sys;
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{AsRawLibbpf, OpenObject};

use super::btf::{KernelBtf, FENTRY_TARGETS};
use super::Probe;
use crate::bpf::probes::ProbesSkelBuilder;

pub fn multi(btf: &KernelBtf) -> Probe {
    probe(btf, false)
}

pub fn session(btf: &KernelBtf) -> Probe {
    probe(btf, true)
}

fn probe(btf: &KernelBtf, session: bool) -> Probe {
    // kprobes need no BTF, but the self-test functions are a safe target
    // and BTF is the cheap way to know they exist.
    let target = btf
        .first_func(FENTRY_TARGETS)
        .map_or(FENTRY_TARGETS[0], |(n, _)| n);
    let keep = if session {
        "probe_kprobe_session"
    } else {
        "probe_kprobe_multi"
    };

    let mut obj = MaybeUninit::<OpenObject>::uninit();
    let mut open = match ProbesSkelBuilder::default().open(&mut obj) {
        Ok(s) => s,
        Err(e) => return Probe::from_libbpf("open skeleton", &e),
    };
    super::trampoline::only(&mut open, keep);
    let skel = match open.load() {
        Ok(s) => s,
        Err(e) => return Probe::from_libbpf(&format!("load {keep}"), &e),
    };
    let prog = if session {
        &skel.progs.probe_kprobe_session
    } else {
        &skel.progs.probe_kprobe_multi
    };

    // libbpf-rs has no session option; call libbpf directly for both.
    let Ok(sym) = CString::new(target) else {
        return Probe::error("bad symbol name");
    };
    let mut syms = [sym.as_ptr()];
    let opts = libbpf_sys::bpf_kprobe_multi_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_kprobe_multi_opts>() as _,
        syms: syms.as_mut_ptr(),
        cnt: 1,
        session,
        ..Default::default()
    };
    // SAFETY: the program pointer is valid while `skel` lives; `opts` and the
    // symbol array outlive the call. The NULL pattern is allowed with syms.
    let link = unsafe {
        libbpf_sys::bpf_program__attach_kprobe_multi_opts(
            prog.as_libbpf_object().as_ptr(),
            std::ptr::null(),
            &opts,
        )
    };
    if link.is_null() {
        let e = std::io::Error::last_os_error();
        return Probe::from_io(&format!("attach to {target}"), &e);
    }
    // SAFETY: `link` is a valid link we own.
    unsafe { libbpf_sys::bpf_link__destroy(link) };
    Probe::yes(format!("loaded and attached to {target}"))
}
