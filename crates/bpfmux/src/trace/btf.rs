//! Kernel BTF as `bpfmux trace` needs it: the FUNC types of vmlinux and of
//! loaded modules (split BTF), whether a trampoline can attach to each, and
//! parameter names, kinds and [`Format`]s for printing captured arguments.
//!
//! A thin reader over libbpf's `struct btf` (parsing is libbpf's job; the
//! type walk is ours, because libbpf-rs cannot open split module BTF).

use std::ffi::{CStr, CString};
use std::fs;
use std::io;
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

use libbpf_rs::libbpf_sys;

use super::pattern::Scope;
use crate::features::KernelBtf;

const KIND_INT: u32 = 1;
const KIND_PTR: u32 = 2;
const KIND_ARRAY: u32 = 3;
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
/// Argument registers of the x86-64 calling convention (rdi, rsi, rdx,
/// rcx, r8, r9); arguments past them are on the stack.
pub const REG_ARGS: usize = 6;

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

/// What BTF says a value means beyond its [`ValueKind`]: how a captured
/// argument or return value prints.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Format {
    /// As its [`ValueKind`] says: a number, a bool, a pointer in hex (NULL,
    /// `ERR_PTR(-E...)`, a kernel symbol where it points at one).
    #[default]
    Plain,
    /// An enum: printed by its enumerator's name.
    Enum(Arc<Enumerators>),
    /// `char *` or `const char *`: a NUL-terminated string, read by the
    /// program at the call (`user`: BTF tags the pointer `__user`).
    Str {
        /// Tagged `__user` (kernels built with BTF type tags).
        user: bool,
    },
    /// A pointer to a function: printed as the symbol it points at.
    FuncPtr,
}

/// The enumerators of an enum type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Enumerators {
    /// Its size in bytes (the value is truncated to it).
    pub size: u8,
    /// Whether its values are signed.
    pub signed: bool,
    /// (value, name), in BTF order.
    pub values: Vec<(i64, String)>,
}

impl Enumerators {
    /// The name of the enumerator `raw` (a register, truncated to the
    /// enum's size), if one has that value.
    pub fn name_of(&self, raw: u64) -> Option<&str> {
        let bits = u32::from(self.size.clamp(1, 8)) * 8;
        let v = if bits == 64 {
            raw as i64
        } else if self.signed {
            ((raw << (64 - bits)) as i64) >> (64 - bits)
        } else {
            (raw & ((1u64 << bits) - 1)) as i64
        };
        self.values
            .iter()
            .find(|(x, _)| *x == v)
            .map(|(_, n)| n.as_str())
    }
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
    /// What its value means, for printing (enum names, strings, symbols).
    pub format: Format,
}

/// A function prototype a trampoline can attach to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Proto {
    /// Parameters in order (every one is captured: up to 12 slots).
    pub params: Vec<Param>,
    /// How the return value prints.
    pub ret: ValueKind,
    /// What the return value means, for printing.
    pub ret_format: Format,
}

/// Where a program finds a parameter's value: the first of its 8-byte
/// slots in the program's argument array, and how many it takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArgPlace {
    /// Index of its first slot.
    pub slot: usize,
    /// Slots it takes (1, or 2 for a struct of 9 to 16 bytes).
    pub slots: u8,
}

impl Proto {
    /// Where each parameter is in the array of 8-byte slots a program
    /// reads. A trampoline program (`kprobe` false) has them in declared
    /// order, a struct passed by value taking two. A kprobe program reads
    /// the six argument registers (slots 0-5), then the stack above the
    /// return address (slot 6 onwards), so a parameter goes where the
    /// x86-64 calling convention puts it: a struct that no longer fits in
    /// the registers goes to the stack, and later scalars still take the
    /// registers left.
    pub fn arg_places(&self, kprobe: bool) -> Vec<ArgPlace> {
        let (mut next, mut reg, mut stack) = (0usize, 0usize, 0usize);
        self.params
            .iter()
            .map(|p| {
                let n = usize::from(p.slots.max(1));
                let slot = if !kprobe {
                    next += n;
                    next - n
                } else if reg + n <= REG_ARGS {
                    reg += n;
                    reg - n
                } else {
                    stack += n;
                    REG_ARGS + stack - n
                };
                ArgPlace {
                    slot,
                    slots: p.slots.max(1),
                }
            })
            .collect()
    }

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

/// A struct or union as a pointee prints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct StructType {
    /// Its BTF name (empty for an anonymous one).
    pub name: String,
    /// Its size in bytes.
    pub size: u32,
    /// Its fields, anonymous members' in their place.
    pub fields: Vec<Field>,
}

/// One field of a [`StructType`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Field {
    pub name: String,
    /// Offset in bits from the start of the outermost struct read.
    pub bit_off: u32,
    /// Bits of a bitfield; 0: the whole type.
    pub bits: u32,
    pub ty: FieldType,
}

/// How a field's bytes print.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum FieldType {
    Int {
        bytes: u8,
        signed: bool,
    },
    Bool,
    Enum(Arc<Enumerators>),
    /// `to`: the struct it points at (a read at the next depth, `--args-depth`).
    Pointer {
        to: Option<u32>,
    },
    /// `char name[N]`: a string up to its NUL.
    Chars(u32),
    Array {
        elem: Box<FieldType>,
        elem_size: u32,
        len: u32,
    },
    /// An embedded struct or union.
    Struct(Arc<StructType>),
    /// Printed as `?`: floats, structs nested too deep; its size.
    Opaque(u32),
}

/// One BTF object: vmlinux or a module's split BTF on top of it.
pub struct BtfObj {
    ptr: NonNull<libbpf_sys::btf>,
    pub scope: Scope,
    /// First type id of this object (after the base's ids for a module).
    first_id: u32,
    /// Freed on drop; false for vmlinux BTF borrowed from a [`KernelBtf`].
    owned: bool,
    /// Enum types read so far, by id: prototypes share them.
    enums: Mutex<std::collections::HashMap<u32, Arc<Enumerators>>>,
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
                enums: Mutex::default(),
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
            enums: Mutex::default(),
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
    /// The kind flag: for an enum, whether its values are signed; for a
    /// struct or union, whether member offsets carry bitfield sizes.
    fn kflag(self) -> bool {
        self.info() >> 31 != 0
    }
    /// (name_off, type, offset) of member `i` of a STRUCT or UNION.
    fn member(self, i: usize) -> (u32, u32, u32) {
        // SAFETY: a STRUCT/UNION is followed by vlen btf_members; i < vlen.
        let m = unsafe { &*(self.ptr.add(1) as *const libbpf_sys::btf_member).add(i) };
        (m.name_off, m.type_, m.offset)
    }
    /// (element type, number of elements) of an ARRAY.
    fn array(self) -> (u32, u32) {
        // SAFETY: an ARRAY is followed by one btf_array.
        let a = unsafe { &*(self.ptr.add(1) as *const libbpf_sys::btf_array) };
        (a.type_, a.nelems)
    }
    /// (name_off, value) of enumerator `i` of an ENUM or ENUM64, its value
    /// read as the kind flag says (signed or not).
    fn enumerator(self, i: usize) -> (u32, i64) {
        if self.kind() == KIND_ENUM64 {
            // SAFETY: an ENUM64 is followed by vlen btf_enum64s; i < vlen.
            let e = unsafe { &*(self.ptr.add(1) as *const libbpf_sys::btf_enum64).add(i) };
            let v = (u64::from(e.val_hi32) << 32) | u64::from(e.val_lo32);
            (e.name_off, v as i64)
        } else {
            // SAFETY: an ENUM is followed by vlen btf_enums; i < vlen.
            let e = unsafe { &*(self.ptr.add(1) as *const libbpf_sys::btf_enum).add(i) };
            let v = if self.kflag() {
                i64::from(e.val)
            } else {
                i64::from(e.val as u32)
            };
            (e.name_off, v)
        }
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

    /// What a value of type `id` means, for printing it: an enum's names, a
    /// `char *` string (tagged `__user` or not), a function pointer.
    fn format(&self, id: u32) -> Format {
        let Some(t) = self.resolve(id) else {
            return Format::Plain;
        };
        match t.kind() {
            KIND_ENUM | KIND_ENUM64 => Format::Enum(self.enumerators(id, t)),
            KIND_PTR => self.pointee_format(t.size_or_type()),
            _ => Format::Plain,
        }
    }

    /// What a pointer to type `id` prints as: through const, volatile,
    /// typedefs and type tags, a `char` makes it a string (`__user` when a
    /// tag says so), a function prototype a function pointer.
    fn pointee_format(&self, mut id: u32) -> Format {
        let mut user = false;
        for _ in 0..32 {
            let Some(t) = self.ty(id) else {
                return Format::Plain;
            };
            match t.kind() {
                KIND_TYPE_TAG => {
                    user |= self.name(t.name_off()) == "user";
                    id = t.size_or_type();
                }
                KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT => id = t.size_or_type(),
                KIND_FUNC_PROTO => return Format::FuncPtr,
                // `char` (signed or not by the compiler): not `signed char`,
                // `unsigned char` or `u8`, which are bytes.
                KIND_INT if t.size_or_type() == 1 && self.name(t.name_off()) == "char" => {
                    return Format::Str { user };
                }
                _ => return Format::Plain,
            }
        }
        Format::Plain
    }

    /// The enumerators of enum type `id` (resolved to `t`), read once per
    /// type and shared.
    fn enumerators(&self, id: u32, t: RawType) -> Arc<Enumerators> {
        let mut cache = self.enums.lock().unwrap_or_else(|e| e.into_inner());
        cache
            .entry(id)
            .or_insert_with(|| {
                Arc::new(Enumerators {
                    size: u8::try_from(t.size_or_type()).unwrap_or(8),
                    signed: t.kflag(),
                    values: (0..t.vlen())
                        .map(|i| {
                            let (name_off, v) = t.enumerator(i);
                            (v, self.name(name_off).to_string())
                        })
                        .collect(),
                })
            })
            .clone()
    }

    /// The struct or union (its id) a value of type `id` points at, when
    /// it is a pointer to one of a known, non-zero size.
    pub(crate) fn pointee_struct(&self, id: u32) -> Option<u32> {
        let t = self.resolve(id)?;
        if t.kind() != KIND_PTR {
            return None;
        }
        let mut to = t.size_or_type();
        for _ in 0..32 {
            let u = self.ty(to)?;
            match u.kind() {
                KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT | KIND_TYPE_TAG => {
                    to = u.size_or_type();
                }
                KIND_STRUCT | KIND_UNION if u.size_or_type() > 0 => return Some(to),
                _ => return None,
            }
        }
        None
    }

    /// Per parameter of FUNC `id`, the struct it points at
    /// ([`Self::pointee_struct`]).
    pub(crate) fn param_pointees(&self, id: u32) -> Vec<Option<u32>> {
        let Some(proto) = self
            .ty(id)
            .filter(|t| t.kind() == KIND_FUNC)
            .and_then(|t| self.ty(t.size_or_type()))
            .filter(|t| t.kind() == KIND_FUNC_PROTO)
        else {
            return Vec::new();
        };
        (0..proto.vlen())
            .map(|i| self.pointee_struct(proto.param(i).1))
            .collect()
    }

    /// The layout of struct or union `id` as a pointee prints: its fields
    /// (those of anonymous members in their place), structs embedded in it
    /// to `nest` more levels (deeper ones opaque).
    pub(crate) fn struct_layout(&self, id: u32, nest: u8) -> Option<StructType> {
        let t = self.resolve(id)?;
        if !matches!(t.kind(), KIND_STRUCT | KIND_UNION) {
            return None;
        }
        let mut fields = Vec::new();
        self.members(t, 0, nest, &mut fields);
        Some(StructType {
            name: self.name(t.name_off()).to_string(),
            size: t.size_or_type(),
            fields,
        })
    }

    /// The members of struct/union `t` at `base` bits into the outer one.
    fn members(&self, t: RawType, base: u32, nest: u8, out: &mut Vec<Field>) {
        for i in 0..t.vlen() {
            let (name_off, ty, off) = t.member(i);
            let (bit_off, bits) = if t.kflag() {
                (off & 0xff_ffff, off >> 24)
            } else {
                (off, 0)
            };
            let name = self.name(name_off);
            let resolved = self.resolve(ty);
            // An anonymous struct or union: its members are the outer one's.
            if name.is_empty() {
                if let Some(inner) =
                    resolved.filter(|r| matches!(r.kind(), KIND_STRUCT | KIND_UNION))
                {
                    self.members(inner, base + bit_off, nest, out);
                    continue;
                }
            }
            out.push(Field {
                name: name.to_string(),
                bit_off: base + bit_off,
                bits,
                ty: self.field_type(ty, nest),
            });
        }
    }

    /// How a member of type `id` prints.
    fn field_type(&self, id: u32, nest: u8) -> FieldType {
        let Some(t) = self.resolve(id) else {
            return FieldType::Opaque(0);
        };
        match t.kind() {
            KIND_INT => {
                let enc = t.int_encoding();
                let bytes = t.size_or_type().min(8) as u8;
                match (enc >> 24) & 0xf {
                    e if e & 4 != 0 => FieldType::Bool,
                    e => FieldType::Int {
                        bytes,
                        signed: e & 1 != 0,
                    },
                }
            }
            KIND_ENUM | KIND_ENUM64 => FieldType::Enum(self.enumerators(id, t)),
            KIND_PTR => FieldType::Pointer {
                to: self.pointee_struct(id),
            },
            KIND_ARRAY => {
                let (elem, n) = t.array();
                let elem_size = self.size_of(elem);
                match self.resolve(elem) {
                    Some(e)
                        if e.kind() == KIND_INT
                            && e.size_or_type() == 1
                            && self.name(e.name_off()) == "char" =>
                    {
                        FieldType::Chars(n)
                    }
                    _ => FieldType::Array {
                        elem: Box::new(self.field_type(elem, 0)),
                        elem_size,
                        len: n,
                    },
                }
            }
            KIND_STRUCT | KIND_UNION if nest > 0 => self
                .struct_layout(id, nest - 1)
                .map_or(FieldType::Opaque(t.size_or_type()), |s| {
                    FieldType::Struct(Arc::new(s))
                }),
            KIND_STRUCT | KIND_UNION => FieldType::Opaque(t.size_or_type()),
            _ => FieldType::Opaque(self.size_of(id)),
        }
    }

    /// The size of type `id` in bytes (0 when BTF has none).
    fn size_of(&self, id: u32) -> u32 {
        match self.resolve(id) {
            Some(t) if t.kind() == KIND_PTR => 8,
            Some(t) if t.kind() == KIND_ARRAY => {
                let (elem, n) = t.array();
                self.size_of(elem).saturating_mul(n)
            }
            Some(t)
                if matches!(
                    t.kind(),
                    KIND_INT | KIND_STRUCT | KIND_UNION | KIND_ENUM | KIND_ENUM64
                ) =>
            {
                t.size_or_type()
            }
            _ => 0,
        }
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
        let ret_id = t.size_or_type();
        let ret = match self.value_kind(ret_id)? {
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
                format: self.format(ty),
            });
        }
        Ok(Proto {
            params,
            ret,
            ret_format: if ret_id == 0 {
                Format::Plain
            } else {
                self.format(ret_id)
            },
        })
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// BTF made here, type by type, with libbpf's writer.
    pub(crate) struct Synthetic(pub(crate) BtfObj);

    impl Synthetic {
        pub(crate) fn new() -> Self {
            // SAFETY: no arguments; NULL on failure, checked.
            let ptr =
                NonNull::new(unsafe { libbpf_sys::btf__new_empty() }).expect("btf__new_empty");
            Synthetic(BtfObj {
                ptr,
                scope: Scope::Vmlinux,
                first_id: 1,
                owned: true,
                enums: Mutex::default(),
            })
        }

        pub(crate) fn p(&self) -> *mut libbpf_sys::btf {
            self.0.ptr.as_ptr()
        }

        /// A type id libbpf returned (negative: an error).
        pub(crate) fn id(r: i32) -> i32 {
            assert!(r > 0, "libbpf: {r}");
            r
        }

        pub(crate) fn int(&self, name: &str, size: usize, enc: u32) -> i32 {
            let n = CString::new(name).unwrap();
            // SAFETY: valid btf and name.
            Self::id(unsafe {
                libbpf_sys::btf__add_int(self.p(), n.as_ptr(), size as _, enc as i32)
            })
        }

        pub(crate) fn ptr(&self, to: i32) -> i32 {
            // SAFETY: valid btf.
            Self::id(unsafe { libbpf_sys::btf__add_ptr(self.p(), to) })
        }

        pub(crate) fn konst(&self, to: i32) -> i32 {
            // SAFETY: valid btf.
            Self::id(unsafe { libbpf_sys::btf__add_const(self.p(), to) })
        }

        pub(crate) fn tag(&self, name: &str, to: i32) -> i32 {
            let n = CString::new(name).unwrap();
            // SAFETY: valid btf and name.
            Self::id(unsafe { libbpf_sys::btf__add_type_tag(self.p(), n.as_ptr(), to) })
        }

        pub(crate) fn typedef(&self, name: &str, to: i32) -> i32 {
            let n = CString::new(name).unwrap();
            // SAFETY: valid btf and name.
            Self::id(unsafe { libbpf_sys::btf__add_typedef(self.p(), n.as_ptr(), to) })
        }

        pub(crate) fn enumeration(&self, name: &str, values: &[(&str, i64)]) -> i32 {
            let n = CString::new(name).unwrap();
            // SAFETY: valid btf and names; values follow the enum they belong to.
            unsafe {
                let id = Self::id(libbpf_sys::btf__add_enum(self.p(), n.as_ptr(), 4));
                for (v, x) in values {
                    let v = CString::new(*v).unwrap();
                    assert_eq!(libbpf_sys::btf__add_enum_value(self.p(), v.as_ptr(), *x), 0);
                }
                id
            }
        }

        pub(crate) fn struct16(&self, name: &str, long: i32) -> i32 {
            let n = CString::new(name).unwrap();
            let (a, b) = (CString::new("a").unwrap(), CString::new("b").unwrap());
            // SAFETY: valid btf and names; fields follow their struct.
            unsafe {
                let id = Self::id(libbpf_sys::btf__add_struct(self.p(), n.as_ptr(), 16));
                assert_eq!(
                    libbpf_sys::btf__add_field(self.p(), a.as_ptr(), long, 0, 0),
                    0
                );
                assert_eq!(
                    libbpf_sys::btf__add_field(self.p(), b.as_ptr(), long, 64, 0),
                    0
                );
                id
            }
        }

        /// A FUNC `name` of ret (0: void) and (name, type) parameters.
        pub(crate) fn func(&self, name: &str, ret: i32, params: &[(&str, i32)]) -> u32 {
            // SAFETY: valid btf and names; parameters follow their prototype.
            unsafe {
                let proto = Self::id(libbpf_sys::btf__add_func_proto(self.p(), ret));
                for (pname, ty) in params {
                    let c = CString::new(*pname).unwrap();
                    assert_eq!(
                        libbpf_sys::btf__add_func_param(self.p(), c.as_ptr(), *ty),
                        0
                    );
                }
                let n = CString::new(name).unwrap();
                Self::id(libbpf_sys::btf__add_func(
                    self.p(),
                    n.as_ptr(),
                    libbpf_sys::BTF_FUNC_GLOBAL,
                    proto,
                )) as u32
            }
        }

        /// A struct of `size` bytes with (name, type, bit offset, bitfield
        /// bits) fields.
        pub(crate) fn structure(
            &self,
            name: &str,
            size: u32,
            fields: &[(&str, i32, u32, u32)],
        ) -> i32 {
            let n = CString::new(name).unwrap();
            // SAFETY: valid btf and names; fields follow their struct.
            unsafe {
                let id = Self::id(libbpf_sys::btf__add_struct(self.p(), n.as_ptr(), size));
                for (f, ty, off, bits) in fields {
                    let f = CString::new(*f).unwrap();
                    assert_eq!(
                        libbpf_sys::btf__add_field(self.p(), f.as_ptr(), *ty, *off, *bits),
                        0
                    );
                }
                id
            }
        }

        /// An array of `n` elements of `elem`.
        pub(crate) fn array(&self, elem: i32, index: i32, n: u32) -> i32 {
            // SAFETY: valid btf.
            Self::id(unsafe { libbpf_sys::btf__add_array(self.p(), index, elem, n) })
        }

        pub(crate) fn proto(&self, func: u32) -> Proto {
            self.0
                .func_proto(func)
                .expect("a FUNC")
                .expect("a prototype")
        }
    }

    /// One function with every kind of argument the printer tells apart,
    /// ten of them (eleven slots: the struct takes two), five on the stack.
    #[test]
    fn formats_follow_the_btf_types() {
        let b = Synthetic::new();
        let int = b.int("int", 4, libbpf_sys::BTF_INT_SIGNED);
        let chr = b.int("char", 1, libbpf_sys::BTF_INT_SIGNED);
        let uchar = b.int("unsigned char", 1, 0);
        let short = b.int("short", 2, libbpf_sys::BTF_INT_SIGNED);
        let ulong = b.int("long unsigned int", 8, 0);
        let boolean = b.int("_Bool", 1, libbpf_sys::BTF_INT_BOOL);
        let cchar = b.konst(chr);
        let user_str = b.ptr(b.tag("user", cchar));
        let kernel_str = b.ptr(cchar);
        let bytes = b.ptr(b.typedef("u8", uchar));
        let mode = b.enumeration("mode", &[("MODE_A", 1), ("MODE_B", -2)]);
        let cb_proto = {
            // SAFETY: valid btf; the parameter follows its prototype.
            unsafe {
                let p = Synthetic::id(libbpf_sys::btf__add_func_proto(b.p(), 0));
                assert_eq!(libbpf_sys::btf__add_func_param(b.p(), c"".as_ptr(), int), 0);
                p
            }
        };
        let cb = b.typedef("cb_t", b.ptr(cb_proto));
        let pair = b.struct16("pair", ulong);
        let f = b.func(
            "every_kind",
            kernel_str,
            &[
                ("a", int),
                ("u", user_str),
                ("k", kernel_str),
                ("bytes", bytes),
                ("m", mode),
                ("cb", cb),
                ("flag", boolean),
                ("byval", pair),
                ("s", short),
                ("m2", mode),
            ],
        );
        let p = b.proto(f);
        let kinds: Vec<(&str, ValueKind, &Format)> = p
            .params
            .iter()
            .map(|q| (q.name.as_str(), q.kind, &q.format))
            .collect();
        let Format::Enum(en) = &p.params[4].format else {
            panic!("m: {:?}", p.params[4].format);
        };
        assert_eq!(
            kinds,
            [
                ("a", ValueKind::Signed(32), &Format::Plain),
                ("u", ValueKind::Pointer, &Format::Str { user: true }),
                ("k", ValueKind::Pointer, &Format::Str { user: false }),
                ("bytes", ValueKind::Pointer, &Format::Plain),
                ("m", ValueKind::Enum, &Format::Enum(en.clone())),
                ("cb", ValueKind::Pointer, &Format::FuncPtr),
                ("flag", ValueKind::Bool, &Format::Plain),
                ("byval", ValueKind::Aggregate, &Format::Plain),
                ("s", ValueKind::Signed(16), &Format::Plain),
                ("m2", ValueKind::Enum, &Format::Enum(en.clone())),
            ]
        );
        // A `const char *` return is a pointer whose string is not read.
        assert_eq!(
            (p.ret, &p.ret_format),
            (ValueKind::Pointer, &Format::Str { user: false })
        );
        // An enum negative values make signed; read once, shared.
        assert!(en.signed && en.size == 4);
        assert_eq!(en.values, [(1, "MODE_A".into()), (-2, "MODE_B".into())]);
        let Format::Enum(en2) = &p.params[9].format else {
            panic!()
        };
        assert!(Arc::ptr_eq(en, en2), "one enum type, one copy");
        assert_eq!(en.name_of(0xffff_fffe), Some("MODE_B"));
        assert_eq!(en.name_of(0xdead_0000_0000_0001), Some("MODE_A"));
        assert_eq!(en.name_of(7), None);
        // Eleven slots: the struct takes two; six registers full, so the
        // kprobe program finds them in the same places.
        let slots: Vec<(usize, u8)> = p
            .arg_places(false)
            .iter()
            .map(|a| (a.slot, a.slots))
            .collect();
        assert_eq!(
            slots,
            [
                (0, 1),
                (1, 1),
                (2, 1),
                (3, 1),
                (4, 1),
                (5, 1),
                (6, 1),
                (7, 2),
                (9, 1),
                (10, 1)
            ]
        );
        assert_eq!(p.arg_places(true), p.arg_places(false));
        // An enum return prints by name.
        let g = b.func("gives_mode", mode, &[]);
        assert!(matches!(b.proto(g).ret_format, Format::Enum(_)));
        assert_eq!(b.proto(b.func("nothing", 0, &[])).ret, ValueKind::Void);
    }

    /// Real prototypes of the running kernel (skipped without its BTF).
    #[test]
    fn host_kernel_prototypes() {
        let kb = KernelBtf::load();
        let Ok(btfs) = KernelBtfs::borrow_vmlinux(&kb) else {
            println!("no vmlinux BTF here: not checked");
            return;
        };
        let v = btfs.vmlinux();
        let proto = |name: &str| {
            v.find_func(name)
                .and_then(|id| v.func_proto(id))
                .map(|p| p.unwrap_or_else(|e| panic!("{name}: {e}")))
        };
        // do_sys_openat2(int dfd, const char __user *filename, struct open_how *how)
        if let Some(p) = proto("do_sys_openat2") {
            assert_eq!(p.params[0].kind, ValueKind::Signed(32));
            assert!(
                matches!(p.params[1].format, Format::Str { .. }),
                "{:?}",
                p.params[1]
            );
            assert_eq!(
                (p.params[2].kind, &p.params[2].format),
                (ValueKind::Pointer, &Format::Plain)
            );
            println!("do_sys_openat2 filename: {:?}", p.params[1].format);
        }
        // vfs_open(const struct path *, struct file *): two plain pointers.
        if let Some(p) = proto("vfs_open") {
            assert!(p
                .params
                .iter()
                .all(|q| q.kind == ValueKind::Pointer && q.format == Format::Plain));
        }
        // do_mmap: more arguments than registers (nine on 6.x/7.x), the
        // rest on the stack, every one in a slot of its own.
        let p = proto("do_mmap").expect("do_mmap in vmlinux BTF");
        assert!(p.params.len() > REG_ARGS, "{p:?}");
        let slots: Vec<usize> = p.arg_places(false).iter().map(|a| a.slot).collect();
        assert_eq!(slots, (0..p.params.len()).collect::<Vec<_>>());
        assert_eq!(p.arg_places(true), p.arg_places(false));
        let pgoff = p.params.iter().position(|q| q.name == "pgoff");
        assert!(pgoff.is_some_and(|i| i >= REG_ARGS), "{p:?}");
        // pid_task(struct pid *, enum pid_type): the enum by name.
        if let Some(p) = proto("pid_task") {
            let Format::Enum(en) = &p.params[1].format else {
                panic!("{:?}", p.params[1]);
            };
            assert_eq!(en.name_of(0), Some("PIDTYPE_PID"));
        }
        // call_rcu(struct rcu_head *, rcu_callback_t): a function pointer.
        if let Some(p) = proto("call_rcu") {
            assert_eq!(p.params[1].format, Format::FuncPtr);
        }
    }
}
