//! `--args-depth`: the structs that pointer arguments point at, read by the
//! program at the call and printed as their fields.
//!
//! For each captured function, [`plan`] chooses up to [`MAX_DEREFS`] reads
//! from its BTF, breadth first: the struct (or union) each pointer argument
//! points at (depth 1), then the structs the pointer fields of those point
//! at (depth 2), and so on to the depth asked for, until the byte budget of
//! the call is spent (the `--args-size` bound: the bytes of all the reads of
//! one call together). A struct larger than what is left is read in part;
//! its fields past the part are not printed (`...`). The program
//! (trace.bpf.c `read_derefs`) makes the reads in order into the event's
//! pointee area, each from an argument slot or from a pointer an earlier
//! read brought, from user or kernel memory by the pointer as for strings;
//! [`describe`] turns them into text.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::btf::{BtfObj, Field, FieldType, Proto, StructType};
use super::errors::errno_name;
use super::events::MAX_DEREFS;
use super::output::{fmt_pointer, fmt_value, quote};
use super::program::DEREF_FUNC_SIZE;
use super::ValueKind;

/// The deepest `--args-depth`: pointers in structs read through pointers
/// in structs read through an argument.
pub const MAX_DEPTH: u8 = 3;
/// Levels of structs embedded in a pointee printed as their fields (deeper
/// ones print `{...}`).
const NEST: u8 = 2;
/// Array elements printed, the rest `...`.
const ARRAY_SHOWN: u32 = 8;
/// `TRACE_DEREF_FIELD`: the read's pointer is in the area, not an argument.
const DEREF_FIELD: u8 = 0x80;

/// Where a read's pointer is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum From {
    /// Argument `n` of the prototype.
    Arg(usize),
    /// A pointer field at byte `offset` of read `parent`.
    Field { parent: usize, offset: u32 },
}

/// One read of a call: `len` bytes of a `ty` at `dst` in the area.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Read {
    pub from: From,
    pub ty: Arc<StructType>,
    pub len: u32,
    pub dst: u32,
}

/// The reads of one function, in the order the program makes them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct FuncPlan {
    pub reads: Vec<Read>,
}

/// The pointee reads of every selected function ([`crate::trace::plan`]
/// makes them with [`crate::trace::TraceOptions::pointee_depth`]; empty
/// without it).
#[derive(Clone, Debug, Default)]
pub struct Pointees {
    pub(crate) funcs: Vec<FuncPlan>,
    /// The bytes of all reads of one call, at most.
    pub(crate) budget: u32,
}

impl Pointees {
    /// Whether any function reads a pointee.
    pub fn is_empty(&self) -> bool {
        self.funcs.iter().all(|f| f.reads.is_empty())
    }
}

/// The reads of FUNC `func_id` of `btf`: to `depth`, at most `budget`
/// bytes in all.
pub(crate) fn plan(btf: &BtfObj, func_id: u32, depth: u8, budget: u32) -> FuncPlan {
    let mut queue: std::collections::VecDeque<(From, u32, u8)> = btf
        .param_pointees(func_id)
        .into_iter()
        .enumerate()
        .filter_map(|(i, to)| to.map(|to| (From::Arg(i), to, 1)))
        .collect();
    let mut reads: Vec<Read> = Vec::new();
    let mut dst = 0u32;
    while let Some((from, id, d)) = queue.pop_front() {
        if reads.len() == MAX_DEREFS || dst >= budget {
            break;
        }
        let Some(ty) = btf.struct_layout(id, NEST) else {
            continue;
        };
        let len = ty.size.min(budget - dst);
        if d < depth {
            for f in &ty.fields {
                let (FieldType::Pointer { to: Some(to) }, 0) = (&f.ty, f.bits) else {
                    continue;
                };
                let offset = f.bit_off / 8;
                if f.bit_off % 64 == 0 && offset + 8 <= len {
                    queue.push_back((
                        From::Field {
                            parent: reads.len(),
                            offset,
                        },
                        *to,
                        d + 1,
                    ));
                }
            }
        }
        reads.push(Read {
            from,
            ty: Arc::new(ty),
            len,
            dst,
        });
        dst = (dst + len).next_multiple_of(8);
    }
    FuncPlan { reads }
}

impl FuncPlan {
    /// `struct trace_deref_func` for the program: each read's source (the
    /// argument's slot where a kprobe program, `kprobe`, or a trampoline
    /// program finds it), and where its bytes go.
    pub(crate) fn descriptors(&self, proto: &Proto, kprobe: bool) -> [u8; DEREF_FUNC_SIZE] {
        let places = proto.arg_places(kprobe);
        let mut out = [0u8; DEREF_FUNC_SIZE];
        for (r, d) in self.reads.iter().zip(out.chunks_exact_mut(8)) {
            let (from, at) = match r.from {
                From::Arg(i) => (places.get(i).map_or(0xff, |p| p.slot as u8), 0),
                From::Field { parent, offset } => (
                    DEREF_FIELD,
                    self.reads.get(parent).map_or(0, |p| p.dst) + offset,
                ),
            };
            d[0] = from;
            d[2..4].copy_from_slice(&(at as u16).to_ne_bytes());
            d[4..6].copy_from_slice(&(r.dst as u16).to_ne_bytes());
            d[6..8].copy_from_slice(&(r.len as u16).to_ne_bytes());
        }
        out
    }
}

/// The text of each pointer argument whose struct the program read, by
/// its slot in declared order: `{field=value, ...}` (`...` where the read
/// stopped short of the struct), pointer fields read deeper followed by
/// their struct, `(unreadable: EFAULT)` where the read failed. `rets`: each
/// read's result as the event says (0, -errno, 1: not made); `area`: the
/// event's pointee area.
pub(crate) fn describe(
    plan: &FuncPlan,
    proto: &Proto,
    args: &[u64],
    rets: &[i32],
    area: &[u8],
) -> BTreeMap<usize, String> {
    let places = proto.arg_places(false);
    let mut out = BTreeMap::new();
    for (i, r) in plan.reads.iter().enumerate() {
        let From::Arg(n) = r.from else { continue };
        let (Some(at), Some(&p)) = (places.get(n), places.get(n).and_then(|a| args.get(a.slot)))
        else {
            continue;
        };
        // NULL and ERR_PTR print as such, without their failed read.
        if p == 0 || (-4095..0).contains(&(p as i64)) {
            continue;
        }
        if let Some(text) = read_text(plan, i, rets, area) {
            out.insert(at.slot, text);
        }
    }
    out
}

/// Read `i` as text, or `None` when it was not made.
fn read_text(plan: &FuncPlan, i: usize, rets: &[i32], area: &[u8]) -> Option<String> {
    let r = plan.reads.get(i)?;
    match rets.get(i).copied() {
        None | Some(1) => None,
        Some(0) => {
            let bytes = area.get(r.dst as usize..(r.dst + r.len) as usize)?;
            Some(struct_text(plan, i, &r.ty, bytes, rets, area))
        }
        Some(e) => Some(format!(
            "(unreadable: {})",
            errno_name(-e).map_or_else(|| (-e).to_string(), str::to_string)
        )),
    }
}

/// `{a=1, b=2, ...}`: the fields of read `i` (an embedded struct is its
/// own `bytes` of the read) whose bytes were read.
fn struct_text(
    plan: &FuncPlan,
    i: usize,
    ty: &StructType,
    bytes: &[u8],
    rets: &[i32],
    area: &[u8],
) -> String {
    let mut parts = Vec::new();
    let mut cut = false;
    for f in &ty.fields {
        match field_text(plan, i, f, bytes, rets, area) {
            Some(v) => parts.push(format!("{}={v}", f.name)),
            None => {
                cut = true;
                break;
            }
        }
    }
    if cut {
        parts.push("...".into());
    }
    format!("{{{}}}", parts.join(", "))
}

/// Little-endian bits `[bit_off, bit_off + bits)` of `b`, if it has them.
fn bits_at(b: &[u8], bit_off: u32, bits: u32) -> Option<u64> {
    let first = (bit_off / 8) as usize;
    let last = (bit_off + bits).div_ceil(8) as usize;
    let window = b.get(first..last)?;
    let mut v: u128 = 0;
    for (k, &x) in window.iter().enumerate() {
        v |= u128::from(x) << (8 * k);
    }
    let v = v >> (bit_off % 8);
    Some(if bits >= 64 {
        v as u64
    } else {
        (v as u64) & ((1u64 << bits) - 1)
    })
}

/// One field's value as text; `None` when its bytes were not read.
fn field_text(
    plan: &FuncPlan,
    i: usize,
    f: &Field,
    bytes: &[u8],
    rets: &[i32],
    area: &[u8],
) -> Option<String> {
    let at = (f.bit_off / 8) as usize;
    let scalar = |size: u32| -> Option<u64> {
        let bits = if f.bits > 0 { f.bits } else { size * 8 };
        bits_at(bytes, f.bit_off, bits)
    };
    Some(match &f.ty {
        FieldType::Int { bytes: n, signed } => {
            let v = scalar(u32::from(*n))?;
            let bits = if f.bits > 0 {
                f.bits
            } else {
                u32::from(*n) * 8
            };
            if *signed && bits < 64 && v >> (bits - 1) & 1 == 1 {
                ((v | !((1u64 << bits) - 1)) as i64).to_string()
            } else if *signed {
                (v as i64).to_string()
            } else {
                v.to_string()
            }
        }
        FieldType::Bool => (scalar(1)? & 1 == 1).to_string(),
        FieldType::Enum(en) => {
            let v = scalar(u32::from(en.size.clamp(1, 8)))?;
            en.name_of(v)
                .map_or_else(|| fmt_value(v, ValueKind::Enum), str::to_string)
        }
        FieldType::Pointer { .. } => {
            let v = scalar(8)?;
            let text = fmt_pointer(v, None);
            let child = plan.reads.iter().position(|r| {
                r.from
                    == From::Field {
                        parent: i,
                        offset: at as u32,
                    }
            });
            match child.and_then(|c| read_text(plan, c, rets, area)) {
                Some(t) if v != 0 && !(-4095..0).contains(&(v as i64)) => format!("{text} {t}"),
                _ => text,
            }
        }
        FieldType::Chars(n) => {
            let s = bytes.get(at..at + *n as usize)?;
            let end = s.iter().position(|&c| c == 0).unwrap_or(s.len());
            quote(&s[..end])
        }
        FieldType::Array {
            elem,
            elem_size,
            len,
        } => {
            bytes.get(at..at + (elem_size * len) as usize)?;
            let scalar_elem = matches!(
                **elem,
                FieldType::Int { .. } | FieldType::Bool | FieldType::Enum(_)
            ) || matches!(**elem, FieldType::Pointer { .. });
            if !scalar_elem || *elem_size == 0 {
                return Some("[...]".into());
            }
            let mut parts: Vec<String> = (0..(*len).min(ARRAY_SHOWN))
                .filter_map(|k| {
                    let e = Field {
                        name: String::new(),
                        bit_off: f.bit_off + k * elem_size * 8,
                        bits: 0,
                        ty: match &**elem {
                            FieldType::Pointer { .. } => FieldType::Pointer { to: None },
                            other => other.clone(),
                        },
                    };
                    field_text(plan, usize::MAX, &e, bytes, rets, area)
                })
                .collect();
            if *len > ARRAY_SHOWN {
                parts.push("...".into());
            }
            format!("[{}]", parts.join(", "))
        }
        FieldType::Struct(inner) => {
            bytes.get(at..at + inner.size as usize)?;
            // Its fields' offsets are from its own start.
            let sub = &bytes[at..at + inner.size as usize];
            struct_text(plan, usize::MAX, inner, sub, rets, area)
        }
        FieldType::Opaque(size) => {
            bytes.get(at..at + *size as usize)?;
            "?".into()
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::btf::Enumerators;

    fn int(name: &str, bit_off: u32, bytes: u8, signed: bool) -> Field {
        Field {
            name: name.into(),
            bit_off,
            bits: 0,
            ty: FieldType::Int { bytes, signed },
        }
    }

    /// targs_kmod's `struct targs_outer` and `struct targs_inner`.
    fn outer() -> (StructType, StructType) {
        let mode = Arc::new(Enumerators {
            size: 4,
            signed: true,
            values: vec![(1, "TARGS_MODE_A".into()), (7, "TARGS_MODE_B".into())],
        });
        let pair = StructType {
            name: "targs_pair".into(),
            size: 16,
            fields: vec![int("a", 0, 8, true), int("b", 64, 8, true)],
        };
        let outer = StructType {
            name: "targs_outer".into(),
            size: 48,
            fields: vec![
                int("a", 0, 8, true),
                int("b", 64, 2, false),
                Field {
                    name: "mode".into(),
                    bit_off: 96,
                    bits: 0,
                    ty: FieldType::Enum(mode),
                },
                Field {
                    name: "inner".into(),
                    bit_off: 128,
                    bits: 0,
                    ty: FieldType::Pointer { to: Some(2) },
                },
                Field {
                    name: "pair".into(),
                    bit_off: 192,
                    bits: 0,
                    ty: FieldType::Struct(Arc::new(pair)),
                },
                Field {
                    name: "flags".into(),
                    bit_off: 320,
                    bits: 3,
                    ty: FieldType::Int {
                        bytes: 4,
                        signed: false,
                    },
                },
                Field {
                    name: "more".into(),
                    bit_off: 323,
                    bits: 5,
                    ty: FieldType::Int {
                        bytes: 4,
                        signed: true,
                    },
                },
            ],
        };
        let inner = StructType {
            name: "targs_inner".into(),
            size: 12,
            fields: vec![
                int("id", 0, 4, true),
                Field {
                    name: "tag".into(),
                    bit_off: 32,
                    bits: 0,
                    ty: FieldType::Chars(8),
                },
            ],
        };
        (outer, inner)
    }

    fn bytes_of_outer() -> Vec<u8> {
        let mut b = vec![0u8; 48];
        b[0..8].copy_from_slice(&(-5i64).to_le_bytes());
        b[8..10].copy_from_slice(&7u16.to_le_bytes());
        b[12..16].copy_from_slice(&7i32.to_le_bytes());
        b[16..24].copy_from_slice(&0xffff_8880_0000_4000u64.to_le_bytes());
        b[24..32].copy_from_slice(&0x11i64.to_le_bytes());
        b[32..40].copy_from_slice(&0x22i64.to_le_bytes());
        // flags:3 = 5, more:5 = -15 (0b10001)
        b[40] = 5 | (0b10001 << 3);
        b
    }

    /// The outer struct from argument `arg`, the inner one through its
    /// `inner` pointer.
    fn outer_plan(arg: usize) -> FuncPlan {
        let (outer, inner) = outer();
        FuncPlan {
            reads: vec![
                Read {
                    from: From::Arg(arg),
                    ty: Arc::new(outer),
                    len: 48,
                    dst: 0,
                },
                Read {
                    from: From::Field {
                        parent: 0,
                        offset: 16,
                    },
                    ty: Arc::new(inner),
                    len: 12,
                    dst: 48,
                },
            ],
        }
    }

    #[test]
    fn pointees_print_as_their_fields() {
        let plan = outer_plan(0);
        let mut area = vec![0u8; 128];
        area[..48].copy_from_slice(&bytes_of_outer());
        area[48..52].copy_from_slice(&42i32.to_le_bytes());
        area[52..57].copy_from_slice(b"inner");
        let proto = Proto {
            params: vec![crate::trace::Param {
                name: "o".into(),
                kind: ValueKind::Pointer,
                slots: 1,
                format: Default::default(),
            }],
            ret: ValueKind::Signed(32),
            ret_format: Default::default(),
        };
        let args = [0xffff_8880_0000_1000u64];
        let got = describe(&plan, &proto, &args, &[0, 0, 1, 1, 1, 1, 1, 1], &area);
        assert_eq!(
            got.get(&0).map(String::as_str),
            Some(
                "{a=-5, b=7, mode=TARGS_MODE_B, inner=0xffff888000004000 {id=42, \
                 tag=\"inner\"}, pair={a=17, b=34}, flags=5, more=-15}"
            )
        );
        // The inner read failed; the outer one was cut at 20 bytes.
        let mut cut = plan.clone();
        cut.reads[0].len = 20;
        let got = describe(&cut, &proto, &args, &[0, -14, 1, 1, 1, 1, 1, 1], &area);
        assert_eq!(
            got.get(&0).map(String::as_str),
            Some("{a=-5, b=7, mode=TARGS_MODE_B, ...}")
        );
        let got = describe(&plan, &proto, &args, &[0, -14, 1, 1, 1, 1, 1, 1], &area);
        assert!(
            got[&0].contains("inner=0xffff888000004000 (unreadable: EFAULT), pair="),
            "{got:?}"
        );
        // NULL prints alone; a read not made prints nothing.
        assert!(describe(&plan, &proto, &[0], &[-14; 8], &area).is_empty());
        assert!(describe(&plan, &proto, &args, &[1; 8], &area).is_empty());
    }

    #[test]
    fn descriptors_say_where_each_read_goes() {
        let plan = outer_plan(1);
        let p = |slots: u8| crate::trace::Param {
            name: "x".into(),
            kind: if slots > 1 {
                ValueKind::Aggregate
            } else {
                ValueKind::Pointer
            },
            slots,
            format: Default::default(),
        };
        let proto = Proto {
            params: vec![p(2), p(1)],
            ret: ValueKind::Void,
            ret_format: Default::default(),
        };
        let d = plan.descriptors(&proto, false);
        // from slot 2 (after a 16-byte struct), 48 bytes at 0.
        assert_eq!(&d[0..8], &[2, 0, 0, 0, 0, 0, 48, 0]);
        // from the pointer at 0 + 16 of the area, 12 bytes at 48.
        assert_eq!(&d[8..16], &[DEREF_FIELD, 0, 16, 0, 48, 0, 12, 0]);
        assert_eq!(&d[16..], &[0u8; DEREF_FUNC_SIZE - 16][..]);
    }

    /// targs_kmod's structs in synthetic BTF, as the planner reads them:
    /// its layout, the reads to each depth, the byte budget.
    #[test]
    fn plans_follow_the_btf_breadth_first() {
        use crate::trace::btf::tests::Synthetic;
        use libbpf_rs::libbpf_sys::BTF_INT_SIGNED;
        let b = Synthetic::new();
        let int = b.int("int", 4, BTF_INT_SIGNED);
        let long = b.int("long", 8, BTF_INT_SIGNED);
        let ushort = b.int("unsigned short", 2, 0);
        let uint = b.int("unsigned int", 4, 0);
        let chr = b.int("char", 1, BTF_INT_SIGNED);
        let tag = b.array(chr, int, 8);
        let inner = b.structure("targs_inner", 12, &[("id", int, 0, 0), ("tag", tag, 32, 0)]);
        let mode = b.enumeration("targs_mode", &[("TARGS_MODE_A", 1), ("TARGS_MODE_B", 7)]);
        let pair = b.struct16("targs_pair", long);
        let inner_ptr = b.ptr(inner);
        let outer = b.structure(
            "targs_outer",
            48,
            &[
                ("a", long, 0, 0),
                ("b", ushort, 64, 0),
                ("mode", mode, 96, 0),
                ("inner", inner_ptr, 128, 0),
                ("pair", pair, 192, 0),
                ("flags", uint, 320, 3),
                ("more", int, 323, 5),
            ],
        );
        let outer_ptr = b.ptr(b.konst(outer));
        let f = b.func("bpfmux_targs_struct", int, &[("o", outer_ptr), ("n", int)]);
        let layout = b.0.struct_layout(outer as u32, NEST).unwrap();
        assert_eq!((layout.name.as_str(), layout.size), ("targs_outer", 48));
        let fields: Vec<(&str, u32, u32)> = layout
            .fields
            .iter()
            .map(|f| (f.name.as_str(), f.bit_off, f.bits))
            .collect();
        assert_eq!(
            fields,
            [
                ("a", 0, 0),
                ("b", 64, 0),
                ("mode", 96, 0),
                ("inner", 128, 0),
                ("pair", 192, 0),
                ("flags", 320, 3),
                ("more", 323, 5)
            ]
        );
        assert_eq!(
            layout.fields[3].ty,
            FieldType::Pointer {
                to: Some(inner as u32)
            }
        );
        assert!(matches!(layout.fields[4].ty, FieldType::Struct(_)));
        let summary = |p: &FuncPlan| -> Vec<(From, u32, u32)> {
            p.reads.iter().map(|r| (r.from, r.dst, r.len)).collect()
        };
        // Depth 1: the argument's struct; 2: the one its pointer points at.
        assert_eq!(summary(&plan(&b.0, f, 1, 64)), [(From::Arg(0), 0, 48)]);
        assert_eq!(
            summary(&plan(&b.0, f, 2, 64)),
            [
                (From::Arg(0), 0, 48),
                (
                    From::Field {
                        parent: 0,
                        offset: 16
                    },
                    48,
                    12
                )
            ]
        );
        // The budget cuts the outer struct; its pointer field was not read,
        // so nothing is read through it.
        assert_eq!(summary(&plan(&b.0, f, 3, 16)), [(From::Arg(0), 0, 16)]);
        // No struct pointer: no read.
        let g = b.func("plain", int, &[("n", int)]);
        assert!(plan(&b.0, g, 3, 64).reads.is_empty());
    }

    #[test]
    fn bits_come_little_endian() {
        let b = [0b1010_1101u8, 0xff, 0x01];
        assert_eq!(bits_at(&b, 0, 3), Some(0b101));
        assert_eq!(bits_at(&b, 3, 5), Some(0b10101));
        assert_eq!(bits_at(&b, 4, 12), Some(0xffa));
        assert_eq!(bits_at(&b, 16, 16), None);
    }
}
