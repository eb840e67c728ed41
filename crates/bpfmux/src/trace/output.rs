//! Turning snapshots and events into what people read: the live table, the
//! periodic text lines, JSON objects, latency histograms, event lines.

use serde_json::{json, Value};

use super::btf::{ArgPlace, Format, Param, Proto, ValueKind};
use super::errors::{errno_name, ErrorChain, ErrorTotals, RetValue, MAX_DEPTH, MAX_TALLIED_PAIRS};
use super::events::{Event, EventKind, FuncStats};
use super::select::Func;

/// Nanoseconds as `812ns`, `3.4us`, `12.0ms`, `1.20s`.
pub fn fmt_ns(ns: u64) -> String {
    match ns {
        0..=999 => format!("{ns}ns"),
        1_000..=999_999 => format!("{:.1}us", ns as f64 / 1e3),
        1_000_000..=999_999_999 => format!("{:.1}ms", ns as f64 / 1e6),
        _ => format!("{:.2}s", ns as f64 / 1e9),
    }
}

/// Upper bound of the log2 bucket holding quantile `q` (0..=1), if any.
pub fn percentile(h: &[u64], q: f64) -> Option<u64> {
    let total: u64 = h.iter().sum();
    if total == 0 {
        return None;
    }
    let want = ((total as f64) * q).ceil().max(1.0) as u64;
    let mut acc = 0;
    for (b, &n) in h.iter().enumerate() {
        acc += n;
        if acc >= want {
            return Some(if b >= 63 {
                u64::MAX
            } else {
                (1u64 << (b + 1)) - 1
            });
        }
    }
    None
}

/// One function's numbers for an interval and since attach.
#[derive(Clone, Debug)]
pub struct Row {
    /// Index of the function in the selection.
    pub index: usize,
    /// `name`, or `module:name`.
    pub name: String,
    /// Counters of the interval.
    pub interval: FuncStats,
    /// Counters since attach.
    pub total: FuncStats,
}

/// Rows with calls in the interval (or in total, with `totals`), busiest first.
pub fn rows(
    funcs: &[Func],
    attached: &[bool],
    prev: &[FuncStats],
    now: &[FuncStats],
    totals: bool,
) -> Vec<Row> {
    let mut v: Vec<Row> = funcs
        .iter()
        .enumerate()
        .filter(|(i, _)| attached[*i])
        .map(|(i, f)| Row {
            index: i,
            name: f.display_name(),
            interval: now[i].since(prev.get(i).unwrap_or(&FuncStats::default())),
            total: now[i],
        })
        .filter(|r| {
            if totals {
                r.total.calls > 0
            } else {
                r.interval.calls > 0
            }
        })
        .collect();
    v.sort_by(|a, b| {
        let key = |r: &Row| {
            if totals {
                r.total.calls
            } else {
                r.interval.calls
            }
        };
        key(b).cmp(&key(a)).then_with(|| a.name.cmp(&b.name))
    });
    v
}

fn avg(s: &FuncStats) -> Option<u64> {
    (s.lat_count > 0).then(|| s.lat_sum_ns / s.lat_count)
}

/// Width of a table's FUNCTION column: its first `max_rows` names, at least 8.
pub(crate) fn name_width<'a>(names: impl Iterator<Item = &'a str>, max_rows: usize) -> usize {
    names.take(max_rows).map(str::len).max().unwrap_or(8).max(8)
}

/// The live table (without screen control): header line, column titles,
/// at most `max_rows` rows.
pub fn table(rows: &[Row], secs: f64, latency: bool, max_rows: usize) -> Vec<String> {
    let w = name_width(rows.iter().map(|r| r.name.as_str()), max_rows);
    let mut out = Vec::new();
    let mut head = format!(
        "{:<w$} {:>10} {:>12} {:>12}",
        "FUNCTION", "CALLS/s", "CALLS", "TOTAL"
    );
    if latency {
        head.push_str(&format!(" {:>9} {:>9}", "AVG", "MAX"));
    }
    out.push(head);
    for r in rows.iter().take(max_rows) {
        let rate = r.interval.calls as f64 / secs.max(1e-9);
        let mut line = format!(
            "{:<w$} {:>10.0} {:>12} {:>12}",
            r.name, rate, r.interval.calls, r.total.calls
        );
        if latency {
            let a = avg(&r.total).map_or("-".into(), fmt_ns);
            let m = (r.total.lat_count > 0).then(|| fmt_ns(r.total.lat_max_ns));
            line.push_str(&format!(" {:>9} {:>9}", a, m.unwrap_or_else(|| "-".into())));
        }
        out.push(line);
    }
    if rows.len() > max_rows {
        out.push(format!(
            "... {} more functions called",
            rows.len() - max_rows
        ));
    }
    out
}

/// Plain lines for a non-terminal: one per function called in the interval.
pub fn text_lines(stamp: &str, rows: &[Row], latency: bool) -> Vec<String> {
    rows.iter()
        .map(|r| {
            let mut s = format!(
                "{stamp} {} {} total {}",
                r.name, r.interval.calls, r.total.calls
            );
            if latency {
                if let Some(a) = avg(&r.total) {
                    s.push_str(&format!(
                        " avg {} max {}",
                        fmt_ns(a),
                        fmt_ns(r.total.lat_max_ns)
                    ));
                }
            }
            s
        })
        .collect()
}

fn row_json(r: &Row) -> Value {
    let s = &r.interval;
    let mut v = json!({ "name": r.name, "calls": s.calls, "total": r.total.calls });
    if s.lat_count > 0 {
        v["latency_ns"] = json!({
            "count": s.lat_count,
            "avg": s.lat_sum_ns / s.lat_count,
            "max": s.lat_max_ns,
        });
    }
    v
}

/// `{"type":"interval", ...}`: one per interval with `--json`.
pub fn interval_json(elapsed_s: f64, secs: f64, rows: &[Row]) -> Value {
    json!({
        "type": "interval",
        "elapsed_s": elapsed_s,
        "interval_s": secs,
        "functions": rows.iter().map(row_json).collect::<Vec<_>>(),
    })
}

/// bpftrace-style log2 histogram lines for one function.
pub fn hist_lines(h: &[u64]) -> Vec<String> {
    let (Some(lo), Some(hi)) = (
        h.iter().position(|&n| n > 0),
        h.iter().rposition(|&n| n > 0),
    ) else {
        return Vec::new();
    };
    let max = h[lo..=hi].iter().copied().max().unwrap_or(1).max(1);
    (lo..=hi)
        .map(|b| {
            let from = if b == 0 { 0 } else { 1u64 << b };
            let to = 1u64 << (b + 1);
            let bar = "@".repeat((h[b] * 40).div_ceil(max) as usize);
            format!(
                "  [{:>7}, {:>7}) {:>10} |{:<40}|",
                fmt_ns(from),
                fmt_ns(to),
                h[b],
                bar
            )
        })
        .collect()
}

pub(crate) fn fmt_value(v: u64, kind: ValueKind) -> String {
    match kind {
        ValueKind::Signed(bits) => match bits {
            8 => (v as i8).to_string(),
            16 => (v as i16).to_string(),
            32 => (v as i32).to_string(),
            _ => (v as i64).to_string(),
        },
        ValueKind::Unsigned(bits) if bits < 64 => (v & ((1u64 << bits) - 1)).to_string(),
        ValueKind::Unsigned(_) => v.to_string(),
        ValueKind::Bool => (v & 1 != 0).to_string(),
        ValueKind::Enum => (v as i64).to_string(),
        ValueKind::Pointer | ValueKind::Aggregate | ValueKind::Void => format!("{v:#x}"),
    }
}

/// The errno an `ERR_PTR` or a negative return carries (-4095..-1), as
/// `-ENAME` (or `-N` when the number has no name).
fn minus_errno(v: i64) -> Option<String> {
    (-4095..0).contains(&v).then(|| {
        let e = -v as i32;
        errno_name(e).map_or_else(|| format!("-{e}"), |n| format!("-{n}"))
    })
}

/// A pointer: `NULL`, `ERR_PTR(-EINVAL)`, or hex (with the kernel symbol
/// it points at, when the session found one).
pub(crate) fn fmt_pointer(v: u64, symbol: Option<&String>) -> String {
    if v == 0 {
        return "NULL".into();
    }
    if let Some(e) = minus_errno(v as i64) {
        return format!("ERR_PTR({e})");
    }
    match symbol {
        Some(s) => format!("{v:#x} <{s}>"),
        None => format!("{v:#x}"),
    }
}

/// Bytes of a string as a quoted literal: printable ASCII as it is, `"`
/// and `\` escaped, other bytes as `\n`, `\t`, `\r` or `\xNN`.
pub fn quote(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() + 2);
    s.push('"');
    for &b in bytes {
        match b {
            b'"' => s.push_str("\\\""),
            b'\\' => s.push_str("\\\\"),
            b'\n' => s.push_str("\\n"),
            b'\t' => s.push_str("\\t"),
            b'\r' => s.push_str("\\r"),
            0x20..=0x7e => s.push(char::from(b)),
            _ => s.push_str(&format!("\\x{b:02x}")),
        }
    }
    s.push('"');
    s
}

/// One argument as its BTF type says: integers with their sign and size,
/// enums by name, bools, pointers in hex (NULL, `ERR_PTR`, the kernel
/// symbol they point at), function pointers by symbol, `char *` as the
/// string the program read (`"..."...` when it filled the bound), a struct
/// passed by value as its slots, a pointer to a struct the program read
/// (`--args-depth`) followed by its fields; `?` for slots the event lacks.
fn fmt_arg(e: &Event, p: &Param, at: ArgPlace) -> String {
    let slot = |k: usize| e.args.get(at.slot + k).copied();
    let Some(v) = slot(0) else {
        return "?".into();
    };
    if at.slots > 1 || p.kind == ValueKind::Aggregate {
        let parts: Vec<String> = (0..usize::from(at.slots))
            .map(|k| slot(k).map_or("?".into(), |v| format!("{v:#x}")))
            .collect();
        return format!("{{{}}}", parts.join(", "));
    }
    let symbol = e.symbols.get(&at.slot);
    match &p.format {
        Format::Str { .. } => match e.strings.iter().find(|s| s.slot == at.slot) {
            Some(s) if s.error.is_some() && v != 0 => {
                let err = s.error.map_or(String::new(), |n| {
                    errno_name(n).map_or_else(|| n.to_string(), str::to_string)
                });
                format!("{v:#x} (unreadable: {err})")
            }
            Some(s) if v != 0 => {
                let dots = if s.truncated { "..." } else { "" };
                format!("{}{dots}", quote(&s.bytes))
            }
            // NULL, or a string past the ones a call carries.
            _ => fmt_pointer(v, symbol),
        },
        Format::Enum(en) => en
            .name_of(v)
            .map_or_else(|| fmt_value(v, p.kind), str::to_string),
        Format::FuncPtr if v != 0 => symbol.cloned().unwrap_or_else(|| format!("{v:#x}")),
        _ if p.kind == ValueKind::Pointer => match e.pointees.get(&at.slot) {
            // The struct it points at (--args-depth).
            Some(fields) => format!("{} {fields}", fmt_pointer(v, symbol)),
            None => fmt_pointer(v, symbol),
        },
        _ => match symbol {
            Some(s) => format!("{v:#x} <{s}>"),
            None => fmt_value(v, p.kind),
        },
    }
}

/// `name=value` for every argument of the prototype (those the event has:
/// all of them, stack-passed ones too).
pub(crate) fn args_text(e: &Event, f: &Func) -> Vec<(String, String)> {
    let places = f.proto.arg_places(false);
    f.proto
        .params
        .iter()
        .zip(places)
        .enumerate()
        .map(|(i, (p, at))| {
            let name = if p.name.is_empty() {
                format!("arg{i}")
            } else {
                p.name.clone()
            };
            (name, fmt_arg(e, p, at))
        })
        .collect()
}

/// A return value as its BTF type says, and the error it carries: `-2`
/// and `ENOENT` for a function returning a signed integer, `ERR_PTR(-EINVAL)`
/// and `EINVAL` or `NULL` for one returning a pointer, an enum's name.
pub fn ret_text(ret: u64, proto: &Proto) -> (String, Option<&'static str>) {
    let errno = |v: i64| {
        (-4095..0)
            .contains(&v)
            .then(|| errno_name(-v as i32))
            .flatten()
    };
    match (&proto.ret_format, proto.ret) {
        (_, ValueKind::Void) => ("void".into(), None),
        (Format::Enum(en), k) => (
            en.name_of(ret)
                .map_or_else(|| fmt_value(ret, k), str::to_string),
            None,
        ),
        (_, ValueKind::Pointer) => (fmt_pointer(ret, None), errno(ret as i64)),
        (_, k @ ValueKind::Signed(bits)) => {
            let v = if bits <= 32 {
                i64::from(ret as u32 as i32)
            } else {
                ret as i64
            };
            (fmt_value(ret, k), errno(v))
        }
        (_, k) => (fmt_value(ret, k), None),
    }
}

/// `cat[42/42] -> vfs_read(file=0x..., count=4096)` or
/// `... <- vfs_read = 4096 (3.2us)`; a return that carries an errno is
/// `= -2 ENOENT`.
pub fn event_line(e: &Event, f: &Func) -> String {
    let who = format!("{}[{}/{}]", e.comm, e.tgid, e.tid);
    match e.kind {
        EventKind::Entry => {
            let args: Vec<String> = args_text(e, f)
                .into_iter()
                .map(|(n, v)| format!("{n}={v}"))
                .collect();
            format!("{who} -> {}({})", f.display_name(), args.join(", "))
        }
        EventKind::Exit => {
            let ret = match ret_text(e.ret, &f.proto) {
                (v, Some(err)) if f.proto.ret != ValueKind::Pointer => format!("{v} {err}"),
                (v, _) => v,
            };
            let d = if e.duration_ns > 0 {
                format!(" ({})", fmt_ns(e.duration_ns))
            } else {
                String::new()
            };
            format!("{who} <- {} = {ret}{d}", f.display_name())
        }
    }
}

/// `{"type":"event", ...}`: one call with `--json`. Arguments are an
/// object of their names and their text as [`event_line`] prints it; the
/// return value likewise, with `error` when it carries an errno.
pub fn event_json(e: &Event, f: &Func) -> Value {
    let mut v = json!({
        "type": "event",
        "kind": e.kind,
        "ts_ns": e.ts_ns,
        "function": f.display_name(),
        "tgid": e.tgid,
        "tid": e.tid,
        "comm": e.comm,
    });
    match e.kind {
        EventKind::Entry => {
            let args: serde_json::Map<String, Value> = args_text(e, f)
                .into_iter()
                .map(|(n, s)| (n, Value::String(s)))
                .collect();
            v["args"] = Value::Object(args);
        }
        EventKind::Exit => {
            let (ret, error) = ret_text(e.ret, &f.proto);
            v["ret"] = json!(ret);
            if let Some(err) = error {
                v["error"] = json!(err);
            }
            v["duration_ns"] = json!(e.duration_ns);
        }
    }
    v
}

/// An error chain as text: a head line, the calls outermost first, indented
/// by depth, with return value, error and duration (`?` when the call's exit
/// was not seen), then the kernel and user stacks.
///
/// ```text
/// cat[42/42] ENOENT in path_openat, 3 calls
///   __x64_sys_openat       -2 ENOENT  41.0us
///     do_sys_openat2       -2 ENOENT  38.2us
///       path_openat        -2 ENOENT  20.1us
///   kernel stack:
///     do_sys_openat2+0x7a
/// ```
pub fn chain_lines(c: &ErrorChain) -> Vec<String> {
    let mut out = vec![format!(
        "{}[{}/{}] {} in {}, {} call{}{}",
        c.comm,
        c.pid,
        c.tid,
        c.error,
        c.function,
        c.calls.len(),
        if c.calls.len() == 1 { "" } else { "s" },
        if c.overflow > 0 {
            format!(
                " ({} deeper calls not kept: nesting over {})",
                c.overflow, MAX_DEPTH
            )
        } else {
            String::new()
        }
    )];
    let w = c
        .calls
        .iter()
        .enumerate()
        .map(|(i, k)| 2 * i + k.function.len())
        .max()
        .unwrap_or(0);
    for (i, k) in c.calls.iter().enumerate() {
        let name = format!("{:indent$}{}", "", k.function, indent = 2 * i);
        let ret = match k.ret {
            Some(RetValue::Signed(v)) => v.to_string(),
            Some(RetValue::Unsigned(v)) => format!("{v:#x}"),
            None => "?".into(),
        };
        let d = k.duration_ns.map_or("?".into(), fmt_ns);
        let err = k.error.as_deref().unwrap_or("");
        out.push(
            format!("  {name:<w$} {ret:>18} {err:<12} {d:>9}")
                .trim_end()
                .to_string(),
        );
    }
    for (what, frames) in [("kernel", &c.kernel_stack), ("user", &c.user_stack)] {
        if !frames.is_empty() {
            out.push(format!("  {what} stack:"));
            out.extend(frames.iter().map(|f| format!("    {f}")));
        }
    }
    out
}

/// [`chain_lines`] with `stamp` (a time) in front of the head line: how a
/// chain is printed as it comes and in a recorder's dumps.
pub fn stamped_chain_lines(c: &ErrorChain, stamp: &str) -> Vec<String> {
    let mut lines = chain_lines(c);
    if let Some(head) = lines.first_mut() {
        *head = format!("{stamp} {head}");
    }
    lines
}

/// The summary's error chains per error, most first: `ENOENT (2) 3 chains:
/// path_openat 3`.
pub fn error_totals_lines(totals: &[ErrorTotals]) -> Vec<String> {
    let mut out = vec![format!(
        "{:<14} {:>8}  FAILING FUNCTIONS",
        "ERROR", "CHAINS"
    )];
    for t in totals {
        let name = match t.errno {
            Some(e) => format!("{} ({e})", t.error),
            None => t.error.clone(),
        };
        let mut funcs: Vec<String> = t
            .functions
            .iter()
            .map(|f| format!("{} {}", f.function, f.count))
            .collect();
        if t.other_functions > 0 {
            funcs.push(format!(
                "{} in other functions (the tally keeps {MAX_TALLIED_PAIRS} pairs apart)",
                t.other_functions
            ));
        }
        out.push(format!("{name:<14} {:>8}  {}", t.count, funcs.join(", ")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::btf::{Param, Proto};
    use crate::trace::pattern::Scope;

    #[test]
    fn percentiles_from_log2_buckets() {
        let mut h = [0u64; 32];
        h[3] = 50; // [8, 16)
        h[10] = 49; // [1024, 2048)
        h[20] = 1;
        assert_eq!(percentile(&h, 0.5), Some(15));
        assert_eq!(percentile(&h, 0.99), Some(2047));
        assert_eq!(percentile(&h, 1.0), Some((1 << 21) - 1));
        assert_eq!(percentile(&[0; 32], 0.5), None);
    }

    #[test]
    fn formats_durations_and_values() {
        assert_eq!(fmt_ns(812), "812ns");
        assert_eq!(fmt_ns(3_400), "3.4us");
        assert_eq!(fmt_ns(12_000_000), "12.0ms");
        assert_eq!(fmt_ns(1_200_000_000), "1.20s");
        assert_eq!(fmt_value(-2i64 as u64, ValueKind::Signed(32)), "-2");
        assert_eq!(fmt_value(0x1_0000_0005, ValueKind::Unsigned(32)), "5");
        assert_eq!(
            fmt_value(0xffff888000001000, ValueKind::Pointer),
            "0xffff888000001000"
        );
    }

    /// An event of `cat[5/6]`, with nothing but its kind and arguments.
    fn event(kind: EventKind, args: Vec<u64>) -> Event {
        Event {
            ts_ns: 1,
            func: 0,
            kind,
            args,
            strings: vec![],
            symbols: Default::default(),
            pointees: Default::default(),
            ret: 0,
            duration_ns: 0,
            tgid: 5,
            tid: 6,
            comm: "cat".into(),
        }
    }

    fn func() -> Func {
        Func {
            scope: Scope::Vmlinux,
            name: "vfs_read".into(),
            btf_id: 1,
            proto: Proto {
                params: vec![
                    Param {
                        name: "file".into(),
                        kind: ValueKind::Pointer,
                        slots: 1,
                        format: Default::default(),
                    },
                    Param {
                        name: "count".into(),
                        kind: ValueKind::Unsigned(64),
                        slots: 1,
                        format: Default::default(),
                    },
                ],
                ret: ValueKind::Signed(64),
                ret_format: Default::default(),
            },
            exact: true,
            addr: None,
        }
    }

    #[test]
    fn event_lines_name_arguments() {
        let mut e = event(EventKind::Entry, vec![0x1000, 4096, 9, 9, 9, 9]);
        assert_eq!(
            event_line(&e, &func()),
            "cat[5/6] -> vfs_read(file=0x1000, count=4096)"
        );
        e.kind = EventKind::Exit;
        e.ret = -14i64 as u64;
        e.duration_ns = 3_400;
        assert_eq!(
            event_line(&e, &func()),
            "cat[5/6] <- vfs_read = -14 EFAULT (3.4us)"
        );
        let j = event_json(&e, &func());
        assert_eq!((&j["ret"], &j["error"]), (&json!("-14"), &json!("EFAULT")));
    }

    fn param(name: &str, kind: ValueKind, format: Format) -> Param {
        Param {
            name: name.into(),
            kind,
            slots: if kind == ValueKind::Aggregate { 2 } else { 1 },
            format,
        }
    }

    /// A function of eleven arguments (twelve slots, six on the stack):
    /// each kind of argument the printer tells apart.
    fn every_kind() -> Func {
        use crate::trace::btf::Enumerators;
        use std::sync::Arc;
        let mode = Format::Enum(Arc::new(Enumerators {
            size: 4,
            signed: true,
            values: vec![(1, "MODE_A".into()), (-2, "MODE_B".into())],
        }));
        let mut f = func();
        f.name = "every_kind".into();
        f.proto = Proto {
            params: vec![
                param("a", ValueKind::Signed(32), Format::Plain),
                param("u", ValueKind::Pointer, Format::Str { user: true }),
                param("k", ValueKind::Pointer, Format::Str { user: false }),
                param("m", ValueKind::Enum, mode.clone()),
                param("cb", ValueKind::Pointer, Format::FuncPtr),
                param("flag", ValueKind::Bool, Format::Plain),
                param("byval", ValueKind::Aggregate, Format::Plain),
                param("s", ValueKind::Signed(16), Format::Plain),
                param("b", ValueKind::Unsigned(8), Format::Plain),
                param("none", ValueKind::Pointer, Format::Str { user: false }),
                param("ip", ValueKind::Unsigned(64), Format::Plain),
            ],
            ret: ValueKind::Signed(32),
            ret_format: Format::Plain,
        };
        f
    }

    #[test]
    fn arguments_print_as_their_types_say() {
        use crate::trace::events::EventString;
        let f = every_kind();
        let mut e = event(
            EventKind::Entry,
            vec![
                0xdead_beef_ffff_ffff, // int -1, upper half left by the caller
                0x7ffc_0000_1000,
                0xffff_8880_0000_2000,
                0xffff_fffe,
                0xffff_ffff_8100_0000,
                1,
                0x11,
                0x22,
                0xfff9,
                0x1_00c8,
                0,
                0xffff_ffff_8100_0042,
            ],
        );
        e.strings = vec![
            EventString {
                slot: 1,
                bytes: b"/etc/passwd".to_vec(),
                user: true,
                ..Default::default()
            },
            EventString {
                slot: 2,
                bytes: b"a\"b\\c\n\x01".to_vec(),
                truncated: true,
                ..Default::default()
            },
        ];
        e.symbols = [(4, "vfs_read+0x0".into()), (11, "vfs_write+0x42".into())]
            .into_iter()
            .collect();
        assert_eq!(
            event_line(&e, &f),
            "cat[5/6] -> every_kind(a=-1, u=\"/etc/passwd\", k=\"a\\\"b\\\\c\\n\\x01\"..., \
             m=MODE_B, cb=vfs_read+0x0, flag=true, byval={0x11, 0x22}, s=-7, b=200, \
             none=NULL, ip=0xffffffff81000042 <vfs_write+0x42>)"
        );
        let j = event_json(&e, &f);
        assert_eq!(j["args"]["u"], "\"/etc/passwd\"");
        assert_eq!(j["args"]["m"], "MODE_B");
        // Unknown enumerator, unreadable string, a pointer with no symbol,
        // and an event that lacks the last slots (a kprobe past its stack).
        e.args[3] = 7;
        e.strings[1] = EventString {
            slot: 2,
            error: Some(14),
            ..Default::default()
        };
        e.symbols.clear();
        e.args.truncate(11);
        let line = event_line(&e, &f);
        assert!(
            line.contains("k=0xffff888000002000 (unreadable: EFAULT), m=7, cb=0xffffffff81000000,")
                && line.ends_with(", none=NULL, ip=?)"),
            "{line}"
        );
    }

    #[test]
    fn return_values_carry_their_errors() {
        let mut f = func();
        let ret = |f: &Func, v: i64| ret_text(v as u64, &f.proto);
        assert_eq!(ret(&f, -2), ("-2".into(), Some("ENOENT")));
        assert_eq!(ret(&f, 4096), ("4096".into(), None));
        assert_eq!(ret(&f, -5000), ("-5000".into(), None));
        // An int: the upper half of the register is not the function's.
        f.proto.ret = ValueKind::Signed(32);
        assert_eq!(ret(&f, 0x1_ffff_ffea), ("-22".into(), Some("EINVAL")));
        f.proto.ret = ValueKind::Pointer;
        assert_eq!(ret(&f, -22), ("ERR_PTR(-EINVAL)".into(), Some("EINVAL")));
        assert_eq!(ret(&f, 0), ("NULL".into(), None));
        assert_eq!(
            ret(&f, 0xffff_8880_1234_0000u64 as i64).0,
            "0xffff888012340000"
        );
        f.proto.ret = ValueKind::Unsigned(64);
        assert_eq!(ret(&f, -2), ((u64::MAX - 1).to_string(), None));
        f.proto.ret = ValueKind::Void;
        assert_eq!(ret(&f, 3), ("void".into(), None));
        f.proto.ret = ValueKind::Pointer;
        let mut e = event(EventKind::Exit, vec![]);
        e.ret = -12i64 as u64;
        assert_eq!(
            event_line(&e, &f),
            "cat[5/6] <- vfs_read = ERR_PTR(-ENOMEM)"
        );
        assert_eq!(event_json(&e, &f)["error"], "ENOMEM");
    }

    #[test]
    fn error_totals_say_what_the_tally_did_not_keep_apart() {
        use crate::trace::errors::FailingFunction;
        let totals = [ErrorTotals {
            error: "EINVAL".into(),
            errno: Some(22),
            count: 5,
            functions: vec![FailingFunction {
                function: "g".into(),
                count: 3,
            }],
            other_functions: 2,
        }];
        assert_eq!(
            error_totals_lines(&totals)[1],
            "EINVAL (22)           5  g 3, 2 in other functions (the tally keeps 65536 pairs apart)"
        );
    }

    #[test]
    fn rows_sort_by_interval_calls() {
        let mut f2 = func();
        f2.name = "vfs_write".into();
        let funcs = vec![func(), f2];
        let st = |c| FuncStats {
            calls: c,
            ..Default::default()
        };
        let prev = vec![st(10), st(0)];
        let now = vec![st(12), st(5)];
        let r = rows(&funcs, &[true, true], &prev, &now, false);
        assert_eq!(
            r.iter()
                .map(|r| (r.name.as_str(), r.interval.calls))
                .collect::<Vec<_>>(),
            [("vfs_write", 5), ("vfs_read", 2)]
        );
        // Refused functions never show.
        let r = rows(&funcs, &[true, false], &prev, &now, true);
        assert_eq!(r.len(), 1);
        let lines = hist_lines(&{
            let mut h = [0u64; 32];
            h[4] = 2;
            h[6] = 1;
            h
        });
        assert_eq!(lines.len(), 3);
        assert!(lines[0].contains("[   16ns,    32ns)"), "{}", lines[0]);
    }
}
