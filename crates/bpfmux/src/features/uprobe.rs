//! uprobe.multi: attach the probe program to `getpid` in the libc this
//! process has mapped, filtered to our own pid (so nothing else is hit).

use std::mem::MaybeUninit;

use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::OpenObject;

use super::Probe;
use crate::bpf::probes::ProbesSkelBuilder;
use crate::normalize::{Normalizer, Options, VmaFilter};

const TARGET_FUNC: &str = "getpid";

pub fn multi() -> Probe {
    let Some(libc_path) = own_libc() else {
        return Probe::error("no libc mapped in this process to attach to");
    };
    let mut obj = MaybeUninit::<OpenObject>::uninit();
    let mut open = match ProbesSkelBuilder::default().open(&mut obj) {
        Ok(s) => s,
        Err(e) => return Probe::from_libbpf("open skeleton", &e),
    };
    super::trampoline::only(&mut open, "probe_uprobe_multi");
    let skel = match open.load() {
        Ok(s) => s,
        Err(e) => return Probe::from_libbpf("load probe_uprobe_multi", &e),
    };
    let pid = std::process::id() as i32;
    match skel.progs.probe_uprobe_multi.attach_uprobe_multi(
        pid,
        &libc_path,
        TARGET_FUNC,
        false,
        false,
    ) {
        Ok(_link) => Probe::yes(format!(
            "attached to {TARGET_FUNC} in {}",
            libc_path.display()
        )),
        Err(e) => Probe::from_libbpf(&format!("attach to {TARGET_FUNC}"), &e),
    }
}

/// Path of the libc mapped into this process (found with our own normalizer).
fn own_libc() -> Option<std::path::PathBuf> {
    let mut n = Normalizer::new(Options {
        build_ids: false,
        cache: false,
        ..Options::default()
    });
    let maps = n.mappings(std::process::id(), VmaFilter::EXEC).ok()?;
    maps.into_iter().filter_map(|m| m.name).find(|p| {
        p.file_name()
            .and_then(|f| f.to_str())
            .is_some_and(|f| f.starts_with("libc.so") || f.starts_with("libc-"))
    })
}
