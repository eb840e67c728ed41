//! XDP generic (skb) and native (driver) mode: attach the probe program in a
//! throwaway network namespace (so no host interface is touched) — generic
//! on that namespace's loopback, native on a veth pair created there.

use std::ffi::CString;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd};

use libbpf_rs::libbpf_sys;
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::OpenObject;

use super::Probe;
use crate::bpf::probes::ProbesSkelBuilder;
use crate::sys::netlink;

pub fn generic() -> Probe {
    in_private_netns(|| {
        attach(
            "lo",
            libbpf_sys::XDP_FLAGS_SKB_MODE,
            "generic XDP on loopback",
        )
    })
}

pub fn native() -> Probe {
    in_private_netns(|| {
        if let Err(e) = netlink::create_veth("bpfmux0", "bpfmux1") {
            // Without a veth (driver not built in / module not loadable)
            // there is nothing to attach to: that says nothing about XDP.
            let mut p = Probe::from_io("create veth pair (needs the veth driver)", &e);
            if p.status == super::Status::No {
                p.status = super::Status::Error;
            }
            return p;
        }
        attach(
            "bpfmux0",
            libbpf_sys::XDP_FLAGS_DRV_MODE,
            "native XDP on veth",
        )
    })
}

/// Runs `f` on a fresh thread moved into a new network namespace; the
/// namespace (and any veth in it) goes away when the thread ends.
fn in_private_netns(f: impl FnOnce() -> Probe + Send + 'static) -> Probe {
    let t = std::thread::spawn(move || {
        // SAFETY: affects only this thread's namespaces.
        if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
            return Probe::from_io("unshare(CLONE_NEWNET)", &io::Error::last_os_error());
        }
        f()
    });
    t.join()
        .unwrap_or_else(|_| Probe::error("XDP probe thread panicked"))
}

fn attach(ifname: &str, mode: u32, what: &str) -> Probe {
    let Ok(cname) = CString::new(ifname) else {
        return Probe::error("bad interface name");
    };
    // SAFETY: NUL-terminated string.
    let ifindex = unsafe { libc::if_nametoindex(cname.as_ptr()) };
    if ifindex == 0 {
        return Probe::from_io(&format!("find {ifname}"), &io::Error::last_os_error());
    }
    let mut obj = MaybeUninit::<OpenObject>::uninit();
    let mut open = match ProbesSkelBuilder::default().open(&mut obj) {
        Ok(s) => s,
        Err(e) => return Probe::from_libbpf("open skeleton", &e),
    };
    super::trampoline::only(&mut open, "probe_xdp");
    let skel = match open.load() {
        Ok(s) => s,
        Err(e) => return Probe::from_libbpf("load XDP program", &e),
    };
    let fd = skel.progs.probe_xdp.as_fd().as_raw_fd();
    let flags = mode | libbpf_sys::XDP_FLAGS_UPDATE_IF_NOEXIST;
    // SAFETY: valid ifindex and program fd; NULL opts is allowed.
    let rc = unsafe { libbpf_sys::bpf_xdp_attach(ifindex as i32, fd, flags, std::ptr::null()) };
    if rc < 0 {
        return Probe::from_io(
            &format!("attach {what}"),
            &io::Error::from_raw_os_error(-rc),
        );
    }
    // SAFETY: as above; detaching what we attached.
    unsafe { libbpf_sys::bpf_xdp_detach(ifindex as i32, flags, std::ptr::null()) };
    Probe::yes(format!("attached {what}"))
}
