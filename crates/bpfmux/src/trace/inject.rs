//! Error injection (`bpfmux inject`): make calls of functions the kernel
//! allows it on return an errno instead of running.
//!
//! The kernel's verifier decides where an fmod_ret program may attach
//! ([`Rules`]): on an LSM hook (`security_*`) always; on a kernel built with
//! function error injection, on the functions of its error-injection list
//! (`ALLOW_ERROR_INJECTION`, listed in debugfs with the kind of value they
//! fail with), of which only those that fail with an errno (`ERRNO`, or
//! `ERR_NULL`: an `ERR_PTR`) are taken; on a kernel built without it, on
//! the system call entry points (`__x64_sys_*` on x86-64) where its verifier
//! allows them (7.3 does, 6.12 does not: found by loading a program on
//! one). A function named
//! exactly that the rules refuse is an error, one a glob matched is dropped
//! (`-v` says why). The
//! trace program's fmod_ret entry points count each call that passes the
//! filters and make it fail with the chance asked, up to a number of times
//! ([`Injection`]); the engines attach them as fmod_ret.multi (one link,
//! this series) or one fmod_ret program per function.

use std::collections::HashMap;
use std::io;

use super::btf::ValueKind;
use super::select::{DropReason, Dropped, Selection};

/// The kernel's error-injection list.
pub const LIST: &str = "/sys/kernel/debug/error_injection/list";

/// How calls are made to fail.
#[derive(Clone, Debug, PartialEq)]
pub struct Injection {
    /// The errno the chosen calls return, negated (`ERR_PTR(-errno)` for
    /// pointer-returning functions).
    pub errno: i32,
    /// The chance a call is chosen, in (0, 1].
    pub probability: f64,
    /// How many calls fail at most, over all functions; `None`: no limit.
    pub times: Option<u64>,
}

impl Injection {
    /// Checks the numbers.
    pub fn new(errno: i32, probability: f64, times: Option<u64>) -> Result<Self, InjectError> {
        if !(1..=4095).contains(&errno) {
            return Err(InjectError::Errno(errno));
        }
        if !(probability > 0.0 && probability <= 1.0) {
            return Err(InjectError::Probability(probability));
        }
        if times == Some(0) {
            return Err(InjectError::Times);
        }
        Ok(Self {
            errno,
            probability,
            times,
        })
    }

    /// The chance out of 2^32 (2^32: every call), as the program takes it.
    pub fn chance(&self) -> u64 {
        if self.probability >= 1.0 {
            1 << 32
        } else {
            ((self.probability * 4_294_967_296.0) as u64).max(1)
        }
    }
}

/// Why an injection cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum InjectError {
    /// The list could not be read.
    #[error(
        "reading the kernel's error-injection list {LIST}: {0} (is debugfs mounted? \
         mount -t debugfs none /sys/kernel/debug)"
    )]
    List(io::Error),
    /// Functions named exactly that cannot be made to fail, with why.
    #[error("cannot inject errors into {}", .0.iter().map(|(n, w)| format!("{n} ({w})")).collect::<Vec<_>>().join(", "))]
    NotAllowed(Vec<(String, String)>),
    /// Not an errno.
    #[error("errno {0} is not an error number (1 to 4095)")]
    Errno(i32),
    /// Not a probability.
    #[error("probability {0} is not in (0, 1]")]
    Probability(f64),
    /// A limit of zero calls to fail.
    #[error("making 0 calls fail would inject nothing")]
    Times,
    /// Injection asked for together with tracing of calls' exits or stacks:
    /// the fmod_ret programs do neither.
    #[error(
        "error injection counts calls only: it cannot be combined with latency, \
             arguments, stacks or error chains"
    )]
    Combined,
}

/// The prefix of the system call entry points on this architecture, where
/// the verifier allows fmod_ret on a kernel without function error
/// injection (its `has_arch_syscall_prefix()`).
pub const SYSCALL_PREFIX: &str = if cfg!(target_arch = "aarch64") {
    "__arm64_"
} else if cfg!(target_arch = "s390x") {
    "__s390x_"
} else if cfg!(target_arch = "riscv64") {
    "__riscv_"
} else if cfg!(any(target_arch = "powerpc64", target_arch = "loongarch64")) {
    "sys_"
} else {
    "__x64_"
};

/// The prefix of the LSM hooks, where the verifier always allows fmod_ret.
pub const LSM_PREFIX: &str = "security_";

/// Where this kernel allows fmod_ret programs, the kernel's own rule.
#[derive(Clone, Debug)]
pub enum Rules {
    /// Built with function error injection: the error-injection list
    /// (function name → the kind of value it fails with: `ERRNO`,
    /// `ERR_NULL`, `TRUE`, `FALSE`, `NULL`), and the LSM hooks.
    List(HashMap<String, String>),
    /// Built without it (debugfs has no list): the LSM hooks, and the
    /// system call entry points when `syscalls` (the verifier took a
    /// program on one; older kernels refuse them).
    NoErrorInjection {
        /// Whether system call entry points are allowed.
        syscalls: bool,
    },
}

impl Rules {
    /// Why errors cannot be injected into the function `name` that returns
    /// `ret`; `None` when they can.
    pub fn refusal(&self, name: &str, ret: &ValueKind) -> Option<String> {
        let errno_type = matches!(ret, ValueKind::Signed(_) | ValueKind::Pointer);
        if name.starts_with(LSM_PREFIX) {
            return (!errno_type).then(|| "an LSM hook that returns no error number".to_string());
        }
        match self {
            Rules::List(list) => match list.get(name).map(String::as_str) {
                Some("ERRNO" | "ERR_NULL") => None,
                Some(kind) => Some(format!("it fails with {kind}, not an errno")),
                None => Some(format!(
                    "not on the kernel's error-injection list {LIST}, nor an LSM hook \
                     ({LSM_PREFIX}*)"
                )),
            },
            Rules::NoErrorInjection { syscalls: true }
                if name.starts_with(SYSCALL_PREFIX) && errno_type =>
            {
                None
            }
            Rules::NoErrorInjection { syscalls: true } => Some(format!(
                "the kernel has no function error injection, built without \
                 CONFIG_FUNCTION_ERROR_INJECTION: it allows fmod_ret only on system call \
                 entry points ({SYSCALL_PREFIX}sys_*) and LSM hooks ({LSM_PREFIX}*)"
            )),
            Rules::NoErrorInjection { syscalls: false } => Some(format!(
                "the kernel has no function error injection, built without \
                 CONFIG_FUNCTION_ERROR_INJECTION, and its verifier predates fmod_ret on \
                 system calls: it allows fmod_ret only on LSM hooks ({LSM_PREFIX}*)"
            )),
        }
    }
}

/// The system call whose entry point is loaded on to ask the verifier.
const SYSCALL_PROBE: &str = "sys_getpgid";

/// The kernel's rule: its error-injection list, or, when debugfs is
/// mounted and has none, the rule of a kernel without error injection,
/// whose verifier is asked whether it takes system calls.
pub fn read_rules() -> Result<Rules, InjectError> {
    match std::fs::read_to_string(LIST) {
        Ok(text) => Ok(Rules::List(parse_list(&text))),
        Err(e) if e.kind() == io::ErrorKind::NotFound && debugfs_mounted() => {
            let probe =
                crate::features::fmod_ret_allowed_on(&format!("{SYSCALL_PREFIX}{SYSCALL_PROBE}"));
            Ok(Rules::NoErrorInjection {
                syscalls: probe.status == crate::features::Status::Yes,
            })
        }
        Err(e) => Err(InjectError::List(e)),
    }
}

/// Whether debugfs is mounted where the list lives.
fn debugfs_mounted() -> bool {
    const DEBUGFS_MAGIC: libc::c_long = 0x6462_6720;
    // SAFETY: statfs fills the zeroed struct from a NUL-terminated path.
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::statfs(c"/sys/kernel/debug".as_ptr(), &mut fs) };
    r == 0 && fs.f_type as libc::c_long == DEBUGFS_MAGIC
}

/// `name<TAB>KIND` lines; a module function reads `name [module]<TAB>KIND`.
fn parse_list(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter_map(|l| {
            let name = l.split_whitespace().next()?;
            let kind = l.split_whitespace().last()?;
            Some((name.to_string(), kind.to_string()))
        })
        .collect()
}

/// Keeps the functions errors can be injected into: the others named
/// exactly are an error, the others a glob matched are dropped with why.
pub fn restrict(sel: &mut Selection, rules: &Rules) -> Result<(), InjectError> {
    let why = |f: &super::select::Func| rules.refusal(&f.name, &f.proto.ret);
    let refused: Vec<(String, String)> = sel
        .funcs
        .iter()
        .filter(|f| f.exact)
        .filter_map(|f| why(f).map(|w| (f.display_name(), w)))
        .collect();
    if !refused.is_empty() {
        return Err(InjectError::NotAllowed(refused));
    }
    let mut keep = Vec::with_capacity(sel.funcs.len());
    for f in std::mem::take(&mut sel.funcs) {
        match why(&f) {
            None => keep.push(f),
            Some(w) => sel.dropped.push(Dropped {
                reason: DropReason::NotInjectable(w),
                scope: f.scope,
                name: f.name,
                exact: f.exact,
            }),
        }
    }
    sel.funcs = keep;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::btf::{Proto, ValueKind};
    use crate::trace::pattern::Scope;
    use crate::trace::select::Func;

    fn func(name: &str, exact: bool) -> Func {
        func_ret(name, exact, ValueKind::Signed(64))
    }

    fn func_ret(name: &str, exact: bool, ret: ValueKind) -> Func {
        Func {
            scope: Scope::Vmlinux,
            name: name.into(),
            btf_id: 1,
            proto: Proto {
                params: vec![],
                ret,
                ret_format: Default::default(),
            },
            exact,
            addr: None,
        }
    }

    fn list() -> Rules {
        Rules::List(list_map())
    }

    fn list_map() -> HashMap<String, String> {
        parse_list(
            "__x64_sys_getpgid\tERRNO\nshould_failslab\tERRNO\nkmalloc_thing\tERR_NULL\n\
             is_it\tTRUE\nmod_func [some_mod]\tERRNO\n",
        )
    }

    #[test]
    fn the_list_reads_names_and_kinds() {
        let l = list_map();
        assert_eq!(l.len(), 5);
        assert_eq!(l["mod_func"], "ERRNO");
        assert_eq!(l["kmalloc_thing"], "ERR_NULL");
    }

    #[test]
    fn exact_names_must_be_on_the_list_globs_are_dropped() {
        let mut sel = Selection {
            funcs: vec![
                func("__x64_sys_getpgid", true),
                func("kmalloc_thing", false),
                func("vfs_read", false),
                func("is_it", false),
            ],
            ..Default::default()
        };
        restrict(&mut sel, &list()).unwrap();
        let names: Vec<_> = sel.funcs.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["__x64_sys_getpgid", "kmalloc_thing"]);
        let dropped: Vec<_> = sel.dropped.iter().map(|d| d.reason.to_string()).collect();
        assert_eq!(
            dropped,
            [
                format!(
                    "no error injection: not on the kernel's error-injection list {LIST}, nor \
                     an LSM hook (security_*)"
                ),
                "no error injection: it fails with TRUE, not an errno".to_string(),
            ]
        );
        let mut sel = Selection {
            funcs: vec![func("vfs_read", true), func("is_it", true)],
            ..Default::default()
        };
        let e = restrict(&mut sel, &list()).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "cannot inject errors into vfs_read (not on the kernel's error-injection \
                 list {LIST}, nor an LSM hook (security_*)), is_it (it fails with TRUE, not an \
                 errno)"
            )
        );
    }

    #[test]
    fn lsm_hooks_are_allowed_on_every_kernel_when_they_return_an_errno() {
        for rules in [
            list(),
            Rules::NoErrorInjection { syscalls: true },
            Rules::NoErrorInjection { syscalls: false },
        ] {
            let mut sel = Selection {
                funcs: vec![
                    func_ret("security_file_open", true, ValueKind::Signed(32)),
                    func_ret("security_task_free", false, ValueKind::Void),
                ],
                ..Default::default()
            };
            restrict(&mut sel, &rules).unwrap();
            let names: Vec<_> = sel.funcs.iter().map(|f| f.name.as_str()).collect();
            assert_eq!(names, ["security_file_open"]);
            assert_eq!(
                sel.dropped[0].reason.to_string(),
                "no error injection: an LSM hook that returns no error number"
            );
        }
    }

    #[test]
    fn without_error_injection_system_calls_are_allowed() {
        let rules = Rules::NoErrorInjection { syscalls: true };
        let mut sel = Selection {
            funcs: vec![
                func(&format!("{SYSCALL_PREFIX}sys_openat"), true),
                func("should_failslab", false),
            ],
            ..Default::default()
        };
        restrict(&mut sel, &rules).unwrap();
        assert_eq!(sel.funcs.len(), 1);
        assert_eq!(sel.dropped.len(), 1);
        let e = rules.refusal("vfs_read", &ValueKind::Signed(64)).unwrap();
        assert!(e.contains("CONFIG_FUNCTION_ERROR_INJECTION"), "{e}");
        assert!(e.contains(&format!("{SYSCALL_PREFIX}sys_*")), "{e}");
        // Before the verifier took system calls: LSM hooks only.
        let e = Rules::NoErrorInjection { syscalls: false }
            .refusal(
                &format!("{SYSCALL_PREFIX}sys_openat"),
                &ValueKind::Signed(64),
            )
            .unwrap();
        assert!(e.contains("only on LSM hooks"), "{e}");
        // On a kernel with the list, a system call must be on it like any function.
        assert!(list()
            .refusal(
                &format!("{SYSCALL_PREFIX}sys_openat"),
                &ValueKind::Signed(64)
            )
            .is_some());
    }

    #[test]
    fn numbers_are_checked() {
        assert!(Injection::new(12, 1.0, Some(3)).is_ok());
        assert!(matches!(
            Injection::new(0, 1.0, None),
            Err(InjectError::Errno(0))
        ));
        assert!(matches!(
            Injection::new(5000, 1.0, None),
            Err(InjectError::Errno(5000))
        ));
        assert!(matches!(
            Injection::new(12, 0.0, None),
            Err(InjectError::Probability(_))
        ));
        assert!(matches!(
            Injection::new(12, 1.5, None),
            Err(InjectError::Probability(_))
        ));
        assert!(matches!(
            Injection::new(12, f64::NAN, None),
            Err(InjectError::Probability(_))
        ));
        assert!(matches!(
            Injection::new(12, 0.5, Some(0)),
            Err(InjectError::Times)
        ));
        assert_eq!(Injection::new(12, 1.0, None).unwrap().chance(), 1 << 32);
        assert_eq!(Injection::new(12, 0.5, None).unwrap().chance(), 1 << 31);
        assert_eq!(Injection::new(12, 1e-12, None).unwrap().chance(), 1);
    }
}
