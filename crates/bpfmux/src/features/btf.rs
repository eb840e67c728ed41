//! Kernel BTF lookups the probes need: FUNC ids of real kernel functions
//! (trampoline targets) and UAPI enum values (to find new attach types).

use std::ptr::NonNull;

use libbpf_rs::btf::types::{Enum, Func};
use libbpf_rs::{libbpf_sys, AsRawLibbpf, Btf};

use super::Probe;

/// Functions the kernel keeps for BPF self-tests (net/bpf/test_run.c):
/// traceable, cheap, never called outside BPF_PROG_TEST_RUN, so attaching to
/// them disturbs nothing. `bpf_modify_return_test` is on the fmod_ret
/// allow-list.
pub const FENTRY_TARGETS: &[&str] = &["bpf_fentry_test1", "bpf_fentry_test2"];
pub const FMOD_RET_TARGET: &str = "bpf_modify_return_test";

/// The running kernel's vmlinux BTF, loaded once for all the probes.
pub struct KernelBtf {
    btf: Result<Btf<'static>, String>,
}

impl KernelBtf {
    /// Reads /sys/kernel/btf/vmlinux (a failure is kept and reported by
    /// [`KernelBtf::probe`], and makes other probes say why they cannot run).
    pub fn load() -> Self {
        Self {
            btf: Btf::from_vmlinux().map_err(|e| format!("{e:#}")),
        }
    }

    /// The `btf` row: whether vmlinux BTF could be read.
    pub fn probe(&self) -> Probe {
        match &self.btf {
            Ok(b) => Probe::yes(format!("/sys/kernel/btf/vmlinux parsed: {} types", b.len())),
            Err(e) => Probe::no(format!("vmlinux BTF unavailable: {e}")),
        }
    }

    /// The loaded vmlinux BTF as libbpf's object, for readers in this crate
    /// that walk it themselves (trace selection), so that a run parses it
    /// once. Valid while `self` lives.
    pub(crate) fn raw(&self) -> Option<NonNull<libbpf_sys::btf>> {
        self.btf.as_ref().ok().map(|b| b.as_libbpf_object())
    }

    /// Why vmlinux BTF could not be read, when it could not.
    pub(crate) fn load_error(&self) -> Option<&str> {
        self.btf.as_ref().err().map(String::as_str)
    }

    /// BTF FUNC id of a kernel function.
    pub fn func_id(&self, name: &str) -> Option<u32> {
        let btf = self.btf.as_ref().ok()?;
        let f: Func<'_> = btf.type_by_name(name)?;
        Some(u32::from(f.type_id()))
    }

    /// First of `names` that exists as a BTF FUNC, with its id.
    pub fn first_func<'a>(&self, names: &[&'a str]) -> Option<(&'a str, u32)> {
        names
            .iter()
            .find_map(|n| self.func_id(n).map(|id| (*n, id)))
    }

    /// Value of enumerator `member` in kernel enum `enum_name`, e.g.
    /// (`bpf_attach_type`, `BPF_TRACE_FENTRY_MULTI`).
    pub fn enum_value(&self, enum_name: &str, member: &str) -> Option<i64> {
        let btf = self.btf.as_ref().ok()?;
        let e: Enum<'_> = btf.type_by_name(enum_name)?;
        let found = e
            .iter()
            .find(|m| m.name.is_some_and(|n| n == member))
            .map(|m| m.value);
        found
    }

    /// Whether vmlinux BTF could be read.
    pub fn available(&self) -> bool {
        self.btf.is_ok()
    }
}
