//! pprof's `profile.proto`, gzip-compressed: what `go tool pprof` reads,
//! and what continuous profilers (Parca, Pyroscope) ingest.
//!
//! What is written, of the format (`perftools.profiles.Profile`):
//! - `sample_type`: the profile's value types (`calls`/`count`; for a call
//!   graph also `time`/`nanoseconds`), and `default_sample_type` its main
//!   one;
//! - `sample`: per [`super::Sample`], its locations leaf first, its values,
//!   and the process as a numeric label `pid`;
//! - `location`: one per distinct address and functions there, its `line`s
//!   innermost first (inlined functions, then the one they are inlined
//!   in, as the format wants); a frame with no symbol is a location of a
//!   function named as the folded stacks name it (`[libc.so.6]`,
//!   `[unknown]`), so every format shows the same names;
//! - `function`: one per name and source file, with `system_name` the same
//!   name (it is demangled already);
//! - `string_table`, `""` first; `duration_nanos` when known.
//!
//! No `mapping`: frames are symbolized already, and a mapping without the
//! binary would have `go tool pprof` try to symbolize it again.
//!
//! The encoder is this module's own (protobuf's wire format is varints and
//! length-prefixed bytes; seven message types are used), not a protobuf
//! crate's: prost, the maintained one, is licensed Apache-2.0 alone, which
//! is not compatible with GPL-2.0-only, one of the two licenses this crate
//! is offered under, and no dependency of the crate's has such a license.
//! A test decodes what this writes with prost (a test-only dependency).

use std::collections::HashMap;
use std::io::Write;

use flate2::write::GzEncoder;
use flate2::Compression;

use super::{Error, Frame, Profile};

/// `Profile`'s fields.
mod field {
    pub const SAMPLE_TYPE: u32 = 1;
    pub const SAMPLE: u32 = 2;
    pub const LOCATION: u32 = 4;
    pub const FUNCTION: u32 = 5;
    pub const STRING_TABLE: u32 = 6;
    pub const DURATION_NANOS: u32 = 10;
    pub const DEFAULT_SAMPLE_TYPE: u32 = 14;
}

/// Writes `p` as a gzip-compressed `profile.proto`.
pub fn write(out: impl Write, p: &Profile) -> Result<(), Error> {
    let mut gz = GzEncoder::new(out, Compression::default());
    gz.write_all(&encode(p))?;
    gz.finish()?.flush()?;
    Ok(())
}

/// `p` as a `profile.proto` message, not compressed.
pub fn encode(p: &Profile) -> Vec<u8> {
    let mut t = Tables::default();
    let mut out = Vec::new();
    for vt in &p.sample_types {
        let (kind, unit) = (t.string(vt.kind), t.string(vt.unit));
        uints(&mut out, field::SAMPLE_TYPE, &[(1, kind), (2, unit)]);
    }
    for s in &p.samples {
        let locations: Vec<u64> = s.frames.iter().rev().map(|f| t.location(f)).collect();
        let pid = s.pid.map(|pid| (t.string("pid"), pid));
        message(&mut out, field::SAMPLE, |m| {
            packed(m, 1, locations.iter().copied());
            packed(m, 2, s.values.iter().copied());
            if let Some((key, pid)) = pid {
                uints(m, 3, &[(1, key), (3, u64::from(pid))]);
            }
        });
    }
    for l in &t.locations {
        message(&mut out, field::LOCATION, |m| {
            uint(m, 1, l.id);
            uint(m, 3, l.addr);
            for &(function, line) in &l.lines {
                uints(m, 4, &[(1, function), (2, u64::from(line))]);
            }
        });
    }
    for f in &t.functions {
        let fields = [(1, f.id), (2, f.name), (3, f.name), (4, f.file)];
        uints(&mut out, field::FUNCTION, &fields);
    }
    let main = p.sample_types.get(p.main).map(|vt| t.string(vt.kind));
    for s in &t.strings {
        bytes(&mut out, field::STRING_TABLE, s.as_bytes());
    }
    if let Some(ns) = p.duration_ns {
        uint(&mut out, field::DURATION_NANOS, ns);
    }
    if let Some(main) = main {
        uint(&mut out, field::DEFAULT_SAMPLE_TYPE, main);
    }
    out
}

/// The string, function and location tables, ids as the format counts
/// them (strings from 0, `""` first; the others from 1).
struct Tables {
    strings: Vec<String>,
    string_ids: HashMap<String, u64>,
    functions: Vec<FunctionRow>,
    function_ids: HashMap<(u64, u64), u64>,
    locations: Vec<LocationRow>,
    location_ids: HashMap<(u64, Vec<(u64, u32)>), u64>,
}

struct FunctionRow {
    id: u64,
    name: u64,
    file: u64,
}

struct LocationRow {
    id: u64,
    addr: u64,
    /// (function id, line), innermost first.
    lines: Vec<(u64, u32)>,
}

impl Default for Tables {
    fn default() -> Self {
        Self {
            strings: vec![String::new()],
            string_ids: HashMap::from([(String::new(), 0)]),
            functions: Vec::new(),
            function_ids: HashMap::new(),
            locations: Vec::new(),
            location_ids: HashMap::new(),
        }
    }
}

impl Tables {
    fn string(&mut self, s: &str) -> u64 {
        if let Some(&id) = self.string_ids.get(s) {
            return id;
        }
        let id = self.strings.len() as u64;
        self.strings.push(s.to_string());
        self.string_ids.insert(s.to_string(), id);
        id
    }

    fn function(&mut self, name: &str, file: Option<&str>) -> u64 {
        let key = (self.string(name), self.string(file.unwrap_or("")));
        if let Some(&id) = self.function_ids.get(&key) {
            return id;
        }
        let id = self.functions.len() as u64 + 1;
        self.functions.push(FunctionRow {
            id,
            name: key.0,
            file: key.1,
        });
        self.function_ids.insert(key, id);
        id
    }

    fn location(&mut self, f: &Frame) -> u64 {
        let lines: Vec<(u64, u32)> = if f.functions.is_empty() {
            // Named as the folded stacks name it.
            let names = f.names();
            let name = names.first().map_or("[unknown]", |n| n);
            vec![(self.function(name, None), 0)]
        } else {
            f.functions
                .iter()
                .rev()
                .map(|g| {
                    (
                        self.function(&g.name, g.file.as_deref()),
                        g.line.unwrap_or(0),
                    )
                })
                .collect()
        };
        let addr = f.addr.unwrap_or(0);
        let key = (addr, lines);
        if let Some(&id) = self.location_ids.get(&key) {
            return id;
        }
        let id = self.locations.len() as u64 + 1;
        self.locations.push(LocationRow {
            id,
            addr,
            lines: key.1.clone(),
        });
        self.location_ids.insert(key, id);
        id
    }
}

// The wire format: a key (field number and wire type) before each value.
const VARINT: u32 = 0;
const LEN: u32 = 2;

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn key(out: &mut Vec<u8>, field: u32, wire: u32) {
    varint(out, u64::from(field << 3 | wire));
}

/// A varint field, left out at 0 (proto3's default).
fn uint(out: &mut Vec<u8>, field: u32, v: u64) {
    if v != 0 {
        key(out, field, VARINT);
        varint(out, v);
    }
}

/// A length-delimited field, written even when empty (a repeated string's
/// `""` is an element).
fn bytes(out: &mut Vec<u8>, field: u32, b: &[u8]) {
    key(out, field, LEN);
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn message(out: &mut Vec<u8>, field: u32, fill: impl FnOnce(&mut Vec<u8>)) {
    let mut m = Vec::new();
    fill(&mut m);
    bytes(out, field, &m);
}

/// A message of varint fields only: (field, value) each.
fn uints(out: &mut Vec<u8>, field: u32, fields: &[(u32, u64)]) {
    message(out, field, |m| {
        for &(f, v) in fields {
            uint(m, f, v);
        }
    });
}

/// A repeated integer field, packed (left out when empty).
fn packed(out: &mut Vec<u8>, field: u32, vs: impl Iterator<Item = u64>) {
    let mut m = Vec::new();
    for v in vs {
        varint(&mut m, v);
    }
    if !m.is_empty() {
        bytes(out, field, &m);
    }
}

#[cfg(test)]
mod tests {
    //! What is written, read back by prost from the format's own field
    //! numbers (the messages below are `profile.proto`'s, as far as used).
    use std::io::Read;

    use prost::Message;

    use super::super::tests::{graph, stacks};
    use super::super::Profile;
    use super::*;

    #[derive(Clone, PartialEq, Message)]
    struct PProfile {
        #[prost(message, repeated, tag = "1")]
        sample_type: Vec<PValueType>,
        #[prost(message, repeated, tag = "2")]
        sample: Vec<PSample>,
        #[prost(message, repeated, tag = "4")]
        location: Vec<PLocation>,
        #[prost(message, repeated, tag = "5")]
        function: Vec<PFunction>,
        #[prost(string, repeated, tag = "6")]
        string_table: Vec<String>,
        #[prost(int64, tag = "10")]
        duration_nanos: i64,
        #[prost(int64, tag = "14")]
        default_sample_type: i64,
    }

    #[derive(Clone, PartialEq, Message)]
    struct PValueType {
        #[prost(int64, tag = "1")]
        r#type: i64,
        #[prost(int64, tag = "2")]
        unit: i64,
    }

    #[derive(Clone, PartialEq, Message)]
    struct PSample {
        #[prost(uint64, repeated, tag = "1")]
        location_id: Vec<u64>,
        #[prost(int64, repeated, tag = "2")]
        value: Vec<i64>,
        #[prost(message, repeated, tag = "3")]
        label: Vec<PLabel>,
    }

    #[derive(Clone, PartialEq, Message)]
    struct PLabel {
        #[prost(int64, tag = "1")]
        key: i64,
        #[prost(int64, tag = "2")]
        str: i64,
        #[prost(int64, tag = "3")]
        num: i64,
    }

    #[derive(Clone, PartialEq, Message)]
    struct PLocation {
        #[prost(uint64, tag = "1")]
        id: u64,
        #[prost(uint64, tag = "2")]
        mapping_id: u64,
        #[prost(uint64, tag = "3")]
        address: u64,
        #[prost(message, repeated, tag = "4")]
        line: Vec<PLine>,
    }

    #[derive(Clone, PartialEq, Message)]
    struct PLine {
        #[prost(uint64, tag = "1")]
        function_id: u64,
        #[prost(int64, tag = "2")]
        line: i64,
    }

    #[derive(Clone, PartialEq, Message)]
    struct PFunction {
        #[prost(uint64, tag = "1")]
        id: u64,
        #[prost(int64, tag = "2")]
        name: i64,
        #[prost(int64, tag = "3")]
        system_name: i64,
        #[prost(int64, tag = "4")]
        filename: i64,
    }

    /// Written, gunzipped, decoded.
    fn round_trip(p: &Profile) -> PProfile {
        let mut gz = Vec::new();
        write(&mut gz, p).unwrap();
        let mut raw = Vec::new();
        flate2::read::GzDecoder::new(&gz[..])
            .read_to_end(&mut raw)
            .unwrap();
        assert_eq!(raw, encode(p), "the gzip holds the encoding");
        PProfile::decode(&raw[..]).unwrap()
    }

    /// A sample read back: function names leaf first, values, labels.
    type Decoded = (Vec<String>, Vec<i64>, Vec<(String, i64)>);

    impl PProfile {
        fn s(&self, i: i64) -> &str {
            &self.string_table[i as usize]
        }

        /// Each sample's function names, leaf first (a location's lines
        /// innermost first), with its values and labels.
        fn stacks(&self) -> Vec<Decoded> {
            let loc: HashMap<u64, &PLocation> = self.location.iter().map(|l| (l.id, l)).collect();
            let fun: HashMap<u64, &PFunction> = self.function.iter().map(|f| (f.id, f)).collect();
            self.sample
                .iter()
                .map(|s| {
                    let names = s
                        .location_id
                        .iter()
                        .flat_map(|id| &loc[id].line)
                        .map(|l| self.s(fun[&l.function_id].name).to_string())
                        .collect();
                    let labels = s
                        .label
                        .iter()
                        .map(|l| (self.s(l.key).to_string(), l.num))
                        .collect();
                    (names, s.value.clone(), labels)
                })
                .collect()
        }
    }

    #[test]
    fn stacks_decode_back() {
        let p = Profile::from_stacks(&stacks()).with_duration_ns(2_000_000_000);
        let d = round_trip(&p);
        assert_eq!(d.string_table[0], "");
        let types: Vec<_> = d
            .sample_type
            .iter()
            .map(|t| (d.s(t.r#type), d.s(t.unit)))
            .collect();
        assert_eq!(types, [("calls", "count")]);
        assert_eq!(d.s(d.default_sample_type), "calls");
        assert_eq!(d.duration_nanos, 2_000_000_000);
        let got = d.stacks();
        assert_eq!(
            got[0].0,
            [
                "__x64_sys_getpgid",
                "entry_SYSCALL_64",
                "do_syscall_64",
                "[unknown]",
                "helper",
                "b",
                "a",
                "main",
                "[libc.so.6]"
            ]
        );
        assert_eq!(
            (&got[0].1[..], &got[0].2[..]),
            (&[3][..], &[("pid".into(), 42)][..])
        );
        assert_eq!(
            (&got[1].1[..], &got[1].2[..]),
            (&[1][..], &[("pid".into(), 43)][..])
        );
        assert_eq!(got[2].0, ["__x64_sys_getpgid", "do_syscall_64", "main"]);
        // Locations: one per address and functions, shared by the stacks
        // through them; the inlined call first, with its line.
        let b = d.location.iter().find(|l| l.address == 0x1000).unwrap();
        let lines: Vec<_> = b
            .line
            .iter()
            .map(|l| {
                let f = &d.function[l.function_id as usize - 1];
                (d.s(f.name), d.s(f.filename), l.line)
            })
            .collect();
        assert_eq!(lines, [("helper", "/src/h.h", 3), ("b", "/src/p.c", 7)]);
        assert_eq!(d.location.iter().filter(|l| l.address == 0x3000).count(), 1);
        // The same frame in two stacks is one location, the traced function
        // (no address) one too; every id is 1 + its index.
        assert_eq!(d.location.len(), 10, "{:?}", d.location);
        assert!(d
            .location
            .iter()
            .enumerate()
            .all(|(i, l)| l.id == i as u64 + 1));
        assert!(d.function.iter().all(|f| f.system_name == f.name));
        assert!(d.location.iter().all(|l| l.mapping_id == 0));
    }

    #[test]
    fn a_call_graph_has_calls_and_time() {
        let d = round_trip(&Profile::from_graph(&graph()));
        let types: Vec<_> = d
            .sample_type
            .iter()
            .map(|t| (d.s(t.r#type), d.s(t.unit)))
            .collect();
        assert_eq!(types, [("calls", "count"), ("time", "nanoseconds")]);
        assert_eq!(d.s(d.default_sample_type), "time");
        let got: Vec<_> = d
            .stacks()
            .into_iter()
            .map(|(n, v, _)| (n.join("<"), v))
            .collect();
        assert_eq!(
            got,
            [
                ("__x64_sys_rt_sigaction".into(), vec![50, 1900]),
                ("do_sig;action<__x64_sys_rt_sigaction".into(), vec![50, 500]),
                ("f".into(), vec![1, 10]),
            ]
        );
    }

    #[test]
    fn varints_as_protobuf_has_them() {
        let enc = |v| {
            let mut out = Vec::new();
            varint(&mut out, v);
            out
        };
        assert_eq!(enc(0), [0]);
        assert_eq!(enc(1), [1]);
        assert_eq!(enc(300), [0xac, 0x02]);
        assert_eq!(enc(u64::MAX).len(), 10);
        // An empty profile: its string table's "" and nothing else.
        assert_eq!(encode(&Profile::default()), [0x32, 0x00]);
    }
}
