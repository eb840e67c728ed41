//! Kernel BTF as `bpfmux trace` needs it: the FUNC types of vmlinux and of
//! loaded modules (split BTF), whether a trampoline can attach to each, and
//! parameter names and kinds for printing captured arguments.
//!
//! A thin reader over libbpf's `struct btf` (parsing is libbpf's job; the
//! type walk is ours, because libbpf-rs cannot open split module BTF).

use std::ffi::{CStr, CString};
use std::fs;
use std::io;
use std::marker::PhantomData;
use std::ptr::NonNull;

use libbpf_rs::libbpf_sys;

use super::pattern::Scope;
use crate::features::KernelBtf;

const KIND_INT: u32 = 1;
const KIND_PTR: u32 = 2;
const KIND_STRUCT: u32 = 4;
const KIND_UNION: u32 = 5;
const KIND_ENUM: u32 = 6;
const KIND_TYPEDEF: u32 = 8;
const KIND_VOLATILE: u32 = 9;
const KIND_CONST: u32 = 10;
const KIND_RESTRICT: u32 = 11;
const KIND_FUNC: u32 = 12;
const KIND_FUNC_PROTO: u32 = 13;
const KIND_TYPE_TAG: u32 = 18;
const KIND_ENUM64: u32 = 19;

/// MAX_BPF_FUNC_ARGS: the most arguments a trampoline saves.
pub const MAX_TRAMPOLINE_ARGS: usize = 12;

/// Kernel BTF that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BtfError {
    /// /sys/kernel/btf/vmlinux.
    #[error("loading vmlinux BTF (kernel built without CONFIG_DEBUG_INFO_BTF?): {0}")]
    Vmlinux(io::Error),
    /// A module's split BTF.
    #[error("loading BTF of module {module} from /sys/kernel/btf/{module}")]
    Module {
        /// The module.
        module: String,
        /// What reading it said.
        source: io::Error,
    },
}

/// How an argument or return value prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueKind {
    /// No value (a `void` return).
    Void,
    /// A signed integer of this many bits.
    Signed(u8),
    /// An unsigned integer of this many bits.
    Unsigned(u8),
    /// `_Bool`.
    Bool,
    /// Any pointer, printed in hex.
    Pointer,
    /// An enum, printed as its number.
    Enum,
    /// Passed by value; the register holds (part of) the bytes.
    Aggregate,
}

/// One parameter of a [`Proto`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Param {
    /// Its name in BTF (empty when BTF has none).
    pub name: String,
    /// How its value prints.
    pub kind: ValueKind,
    /// The 8-byte argument registers (or stack slots) it takes: 2 for a
    /// struct of 9 to 16 bytes passed by value, 1 otherwise.
    pub slots: u8,
}

/// A function prototype a trampoline can attach to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Proto {
    /// Parameters in order (those passed in registers are captured).
    pub params: Vec<Param>,
    /// How the return value prints.
    pub ret: ValueKind,
}

impl Proto {
    /// Whether a struct passed by value pushes arguments past the six
    /// argument registers, where a caller that copies only 8-byte slots
    /// (the series' global trampoline calling the function for its exit
    /// side) cannot find them.
    pub fn struct_args_on_stack(&self) -> bool {
        self.params.iter().any(|p| p.slots > 1)
            && self
                .params
                .iter()
                .map(|p| usize::from(p.slots))
                .sum::<usize>()
                > 6
    }
}

/// One BTF object: vmlinux or a module's split BTF on top of it.
pub struct BtfObj {
    ptr: NonNull<libbpf_sys::btf>,
    pub scope: Scope,
    /// First type id of this object (after the base's ids for a module).
    first_id: u32,
    /// Freed on drop; false for vmlinux BTF borrowed from a [`KernelBtf`].
    owned: bool,
}

// SAFETY: the btf is only read after loading, and libbpf's read paths keep
// no thread-local state.
unsafe impl Send for BtfObj {}
unsafe impl Sync for BtfObj {}

impl Drop for BtfObj {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        // SAFETY: we own the pointer; module objects are dropped before their
        // base (see KernelBtfs field order).
        unsafe { libbpf_sys::btf__free(self.ptr.as_ptr()) };
    }
}

/// vmlinux BTF plus the BTF of the modules asked for; `'a` is the
/// [`KernelBtf`] the vmlinux part may be borrowed from.
pub struct KernelBtfs<'a> {
    // Declared first, dropped first: split BTF refers to its base.
    modules: Vec<BtfObj>,
    vmlinux: BtfObj,
    base: PhantomData<&'a KernelBtf>,
}

fn last_io_error() -> io::Error {
    io::Error::last_os_error()
}

impl<'a> KernelBtfs<'a> {
    /// The vmlinux BTF that `btf` already parsed (engine choice and
    /// selection read the same object: one parse per run).
    pub fn borrow_vmlinux(btf: &'a KernelBtf) -> Result<Self, BtfError> {
        let ptr = btf.raw().ok_or_else(|| {
            BtfError::Vmlinux(io::Error::other(
                btf.load_error().unwrap_or("not loaded").to_owned(),
            ))
        })?;
        Ok(Self {
            modules: Vec::new(),
            vmlinux: BtfObj {
                ptr,
                scope: Scope::Vmlinux,
                first_id: 1,
                owned: false,
            },
            base: PhantomData,
        })
    }

    /// Names of modules that have BTF loaded in the kernel.
    pub fn module_names() -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir("/sys/kernel/btf")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| n != "vmlinux")
            .collect();
        v.sort();
        v
    }

    /// Adds one module's BTF (no-op when already loaded).
    pub fn load_module(&mut self, module: &str) -> Result<(), BtfError> {
        if self
            .modules
            .iter()
            .any(|m| m.scope.module() == Some(module))
        {
            return Ok(());
        }
        let err = |source| BtfError::Module {
            module: module.into(),
            source,
        };
        let path = CString::new(format!("/sys/kernel/btf/{module}"))
            .map_err(|_| err(io::Error::from(io::ErrorKind::InvalidInput)))?;
        // SAFETY: valid path; the base outlives the split object (field order).
        let ptr = unsafe { libbpf_sys::btf__parse_split(path.as_ptr(), self.vmlinux.ptr.as_ptr()) };
        let ptr = NonNull::new(ptr).ok_or_else(|| err(last_io_error()))?;
        // SAFETY: valid btf pointer.
        let first_id = unsafe { libbpf_sys::btf__type_cnt(self.vmlinux.ptr.as_ptr()) };
        self.modules.push(BtfObj {
            ptr,
            scope: Scope::Module(module.into()),
            first_id,
            owned: true,
        });
        Ok(())
    }

    pub fn objects(&self) -> impl Iterator<Item = &BtfObj> {
        std::iter::once(&self.vmlinux).chain(self.modules.iter())
    }

    pub fn get(&self, scope: &Scope) -> Option<&BtfObj> {
        self.objects().find(|o| &o.scope == scope)
    }

    pub fn vmlinux(&self) -> &BtfObj {
        &self.vmlinux
    }
}

/// A raw `struct btf_type` and the `struct btf_param`s after it.
#[derive(Clone, Copy)]
struct RawType {
    ptr: *const libbpf_sys::btf_type,
}

impl RawType {
    fn info(self) -> u32 {
        // SAFETY: points into the btf's type data, valid while the btf lives.
        unsafe { (*self.ptr).info }
    }
    fn kind(self) -> u32 {
        (self.info() >> 24) & 0x1f
    }
    fn vlen(self) -> usize {
        (self.info() & 0xffff) as usize
    }
    fn name_off(self) -> u32 {
        // SAFETY: as above.
        unsafe { (*self.ptr).name_off }
    }
    /// `size` or `type`, depending on the kind.
    fn size_or_type(self) -> u32 {
        // SAFETY: as above; both union members are u32.
        unsafe { (*self.ptr).__bindgen_anon_1.size }
    }
    /// The u32 after an INT type: encoding and bit size.
    fn int_encoding(self) -> u32 {
        // SAFETY: an INT type is followed by one u32.
        unsafe { *(self.ptr.add(1) as *const u32) }
    }
    /// (name_off, type) of parameter `i` of a FUNC_PROTO.
    fn param(self, i: usize) -> (u32, u32) {
        // SAFETY: a FUNC_PROTO is followed by vlen btf_params; i < vlen.
        let p = unsafe { &*(self.ptr.add(1) as *const libbpf_sys::btf_param).add(i) };
        (p.name_off, p.type_)
    }
}

/// A FUNC of one BTF object, with the verdict on trampoline attach.
#[derive(Clone, Debug)]
pub struct BtfFunc {
    pub id: u32,
    pub name: String,
    pub proto: Result<Proto, String>,
}

impl BtfObj {
    fn ty(&self, id: u32) -> Option<RawType> {
        // SAFETY: valid btf; libbpf returns NULL for ids out of range.
        let ptr = unsafe { libbpf_sys::btf__type_by_id(self.ptr.as_ptr(), id) };
        (!ptr.is_null()).then_some(RawType { ptr })
    }

    fn name(&self, off: u32) -> &str {
        // SAFETY: valid btf; the string table outlives the borrow of self.
        let p = unsafe { libbpf_sys::btf__name_by_offset(self.ptr.as_ptr(), off) };
        if p.is_null() {
            return "";
        }
        // SAFETY: libbpf returns NUL-terminated strings from the table.
        unsafe { CStr::from_ptr(p) }.to_str().unwrap_or("")
    }

    fn end_id(&self) -> u32 {
        // SAFETY: valid btf.
        unsafe { libbpf_sys::btf__type_cnt(self.ptr.as_ptr()) }
    }

    /// Calls `f(id, name)` for every FUNC of this object (not its base).
    pub fn for_each_func(&self, mut f: impl FnMut(u32, &str)) {
        for id in self.first_id..self.end_id() {
            if let Some(t) = self.ty(id) {
                if t.kind() == KIND_FUNC {
                    f(id, self.name(t.name_off()));
                }
            }
        }
    }

    /// Every FUNC name of this object with its id, for many lookups.
    pub fn func_index(&self) -> std::collections::HashMap<String, u32> {
        let mut m = std::collections::HashMap::new();
        self.for_each_func(|id, name| {
            m.entry(name.to_string()).or_insert(id);
        });
        m
    }

    /// The FUNC named `name` in this object. pahole drops functions whose
    /// name has inconsistent prototypes, so a name has at most one FUNC.
    pub fn find_func(&self, name: &str) -> Option<u32> {
        let c = CString::new(name).ok()?;
        // SAFETY: valid btf and C string.
        let first =
            unsafe { libbpf_sys::btf__find_by_name_kind(self.ptr.as_ptr(), c.as_ptr(), KIND_FUNC) };
        if first > 0 && first as u32 >= self.first_id {
            return Some(first as u32);
        }
        if self.first_id == 1 {
            return None;
        }
        // Split BTF: libbpf searched the base first; look at our own ids.
        (self.first_id..self.end_id()).find(|&id| {
            self.ty(id)
                .is_some_and(|t| t.kind() == KIND_FUNC && self.name(t.name_off()) == name)
        })
    }

    /// The prototype of FUNC `id`, or why a trampoline cannot take it.
    pub fn func_proto(&self, id: u32) -> Option<Result<Proto, String>> {
        let t = self.ty(id)?;
        (t.kind() == KIND_FUNC).then(|| self.proto(t.size_or_type()))
    }

    pub fn func(&self, id: u32) -> Option<BtfFunc> {
        let t = self.ty(id)?;
        (t.kind() == KIND_FUNC).then(|| BtfFunc {
            id,
            name: self.name(t.name_off()).to_string(),
            proto: self.proto(t.size_or_type()),
        })
    }

    /// Skips const/volatile/typedef/... to the type that decides the layout.
    fn resolve(&self, mut id: u32) -> Option<RawType> {
        for _ in 0..32 {
            let t = self.ty(id)?;
            match t.kind() {
                KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT | KIND_TYPE_TAG => {
                    id = t.size_or_type();
                }
                _ => return Some(t),
            }
        }
        None
    }

    /// 8-byte slots of an argument of type `id` (1 unless a struct/union
    /// of more than 8 bytes is passed by value).
    fn slots(&self, id: u32) -> u8 {
        match self.resolve(id) {
            Some(t) if matches!(t.kind(), KIND_STRUCT | KIND_UNION) && t.size_or_type() > 8 => 2,
            _ => 1,
        }
    }

    fn value_kind(&self, id: u32) -> Result<ValueKind, String> {
        if id == 0 {
            return Ok(ValueKind::Void);
        }
        let t = self
            .resolve(id)
            .ok_or_else(|| format!("unresolvable type {id}"))?;
        Ok(match t.kind() {
            KIND_INT => {
                let enc = t.int_encoding();
                let bits = (enc & 0xff) as u8;
                match (enc >> 24) & 0xf {
                    e if e & 4 != 0 => ValueKind::Bool,
                    e if e & 1 != 0 => ValueKind::Signed(bits),
                    _ => ValueKind::Unsigned(bits),
                }
            }
            KIND_PTR => ValueKind::Pointer,
            KIND_ENUM | KIND_ENUM64 => ValueKind::Enum,
            KIND_STRUCT | KIND_UNION => {
                if t.size_or_type() > 16 {
                    return Err("passes a struct/union larger than 16 bytes by value".into());
                }
                // The kernel's btf_distill_func_proto() calls a zero-sized
                // argument malformed (an empty struct, e.g. a config-dependent
                // one compiled out) and refuses the function with EINVAL.
                if t.size_or_type() == 0 {
                    return Err("passes an empty struct/union by value".into());
                }
                ValueKind::Aggregate
            }
            k => return Err(format!("argument of BTF kind {k}")),
        })
    }

    /// The prototype if a trampoline can attach (the kernel's own rules for
    /// BPF_TRACE_FENTRY and tracing_multi); otherwise why not.
    fn proto(&self, proto_id: u32) -> Result<Proto, String> {
        let t = self
            .ty(proto_id)
            .filter(|t| t.kind() == KIND_FUNC_PROTO)
            .ok_or("no function prototype")?;
        let n = t.vlen();
        if n > MAX_TRAMPOLINE_ARGS {
            return Err(format!("{n} arguments (a trampoline takes at most 12)"));
        }
        let ret = match self.value_kind(t.size_or_type())? {
            ValueKind::Aggregate => return Err("returns a struct/union".into()),
            k => k,
        };
        let mut params = Vec::with_capacity(n);
        for i in 0..n {
            let (name_off, ty) = t.param(i);
            if ty == 0 {
                return Err("variadic".into());
            }
            params.push(Param {
                name: self.name(name_off).to_string(),
                kind: self.value_kind(ty)?,
                slots: self.slots(ty),
            });
        }
        Ok(Proto { params, ret })
    }
}

/// A descriptor of module `module`'s BTF object in the kernel, which
/// trampoline programs for that module's functions are loaded against.
pub fn module_btf_fd(module: &str) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::{FromRawFd, OwnedFd};

    let mut id: u32 = 0;
    loop {
        // SAFETY: plain syscall wrappers; out-pointers are valid.
        let r = unsafe { libbpf_sys::bpf_btf_get_next_id(id, &mut id) };
        if r != 0 {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no kernel BTF object named {module}"),
            ));
        }
        // SAFETY: as above.
        let fd = unsafe { libbpf_sys::bpf_btf_get_fd_by_id(id) };
        if fd < 0 {
            continue; // gone since we listed it
        }
        // SAFETY: the kernel just returned this descriptor.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut name = [0u8; 64];
        let mut info = libbpf_sys::bpf_btf_info {
            name: name.as_mut_ptr() as u64,
            name_len: name.len() as u32,
            ..Default::default()
        };
        let mut len = std::mem::size_of::<libbpf_sys::bpf_btf_info>() as u32;
        // SAFETY: info and the name buffer outlive the call.
        let r = unsafe {
            libbpf_sys::bpf_btf_get_info_by_fd(
                std::os::fd::AsRawFd::as_raw_fd(&fd),
                &mut info,
                &mut len,
            )
        };
        if r != 0 {
            continue;
        }
        let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
        if info.kernel_btf != 0 && &name[..end] == module.as_bytes() {
            return Ok(fd);
        }
    }
}
