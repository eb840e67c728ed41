//! A timeline of per-call events in the Chrome trace-event format (JSON),
//! what the Perfetto UI and `chrome://tracing` open: a complete (`"X"`)
//! slice per call, on its process and thread, named after the function,
//! from its entry to its return, with its arguments and return value.
//!
//! Only per-call events carry a call's own time: an exit event has its
//! time and the call's duration (see [`super`] for why counters, latency
//! histograms and call graphs have none). An exit without a duration (its
//! entry came before the programs were attached, or its call stack frame
//! was not kept) cannot be placed: it is counted in
//! [`ChromeTrace::unplaced`], not drawn. Arguments come from the call's
//! entry event, matched on the same thread; they and the return value are
//! the text `--args` prints ([`output::event_json`]: by their BTF types,
//! strings quoted, enums and symbols by name), with `error` when the
//! return value carries an errno.
//!
//! ```text
//! {"displayTimeUnit":"ns","traceEvents":[
//! {"args":{"name":"trigger"},"name":"thread_name","ph":"M","pid":91,"tid":91},
//! {"args":{"regs":"0xffffc90000...","return":"0"},"cat":"call","dur":3.456,
//!  "name":"__x64_sys_getpgid","ph":"X","pid":91,"tid":91,"ts":1234567.89},
//! {"args":{"dfd":"-100","error":"ENOENT","filename":"\"/etc/nonexistent\"",
//!  "how":"0xffffc90000...","return":"-2"},"cat":"call","dur":5.1,"name":"do_sys_openat2",...},
//! ...
//! ]}
//! ```
//!
//! Times are microseconds (the format's unit) with nanosecond decimals, on
//! the clock of the events (`CLOCK_MONOTONIC`). Slices are written as the
//! calls return, so a caller's comes after its callees'; the viewers sort
//! them.

use std::collections::{HashMap, HashSet};
use std::io::{self, Write};

use serde_json::{json, Map, Value};

use super::super::btf::ValueKind;
use super::super::errors::ErrorChain;
use super::super::events::{Event, EventKind};
use super::super::output;
use super::super::report::{Interval, Report};
use super::super::select::Func;
use super::super::summary::Summary;

/// An entry event waiting for its exit: the function and its arguments.
type Pending = (usize, Map<String, Value>);

/// Entry events kept per thread, waiting for their exits (more nested
/// calls than this keep their innermost ones).
const MAX_PENDING: usize = 64;

/// Writes a Chrome trace of the per-call events a run reports (a
/// [`Report`]: give it the events, e.g. beside another report through
/// [`super::super::report::Tee`]); [`Report::summary`] or
/// [`ChromeTrace::finish`] ends the JSON.
pub struct ChromeTrace<W: Write> {
    out: W,
    started: bool,
    closed: bool,
    threads: HashSet<u32>,
    processes: HashSet<u32>,
    /// Per thread: (function, its entry's arguments), outermost first.
    entries: HashMap<u32, Vec<Pending>>,
    slices: u64,
    unplaced: u64,
}

impl<W: Write> ChromeTrace<W> {
    /// Nothing is written before the first event (or the end).
    pub fn new(out: W) -> Self {
        Self {
            out,
            started: false,
            closed: false,
            threads: HashSet::new(),
            processes: HashSet::new(),
            entries: HashMap::new(),
            slices: 0,
            unplaced: 0,
        }
    }

    /// Calls drawn as slices so far.
    pub fn slices(&self) -> u64 {
        self.slices
    }

    /// Exits without a duration, not drawn (see the module docs).
    pub fn unplaced(&self) -> u64 {
        self.unplaced
    }

    /// Ends the JSON and flushes; again, nothing.
    pub fn finish(&mut self) -> io::Result<()> {
        if self.closed {
            return Ok(());
        }
        self.start()?;
        self.out.write_all(b"\n]}\n")?;
        self.closed = true;
        self.out.flush()
    }

    fn start(&mut self) -> io::Result<()> {
        if !self.started {
            self.out
                .write_all(br#"{"displayTimeUnit":"ns","traceEvents":["#)?;
        }
        Ok(())
    }

    fn push(&mut self, v: &Value) -> io::Result<()> {
        self.start()?;
        self.out
            .write_all(if self.started { b",\n" } else { b"\n" })?;
        self.started = true;
        serde_json::to_writer(&mut self.out, v).map_err(io::Error::other)
    }

    /// Names the thread, and its process the first time, after `comm`.
    fn name(&mut self, e: &Event) -> io::Result<()> {
        if self.processes.insert(e.tgid) {
            self.push(&json!({"name": "process_name", "ph": "M", "pid": e.tgid,
                              "tid": e.tgid, "args": {"name": e.comm}}))?;
        }
        if self.threads.insert(e.tid) {
            self.push(&json!({"name": "thread_name", "ph": "M", "pid": e.tgid,
                              "tid": e.tid, "args": {"name": e.comm}}))?;
        }
        Ok(())
    }

    /// The arguments of the innermost pending entry of `func` on the
    /// exit's thread (and the entries above it, whose exits were lost, gone).
    fn entry_args(&mut self, e: &Event) -> Map<String, Value> {
        let Some(stack) = self.entries.get_mut(&e.tid) else {
            return Map::new();
        };
        let Some(i) = stack.iter().rposition(|(f, _)| *f == e.func) else {
            return Map::new();
        };
        stack.truncate(i + 1);
        let args = stack.pop().map(|(_, a)| a).unwrap_or_default();
        if stack.is_empty() {
            self.entries.remove(&e.tid);
        }
        args
    }
}

impl<W: Write> Report for ChromeTrace<W> {
    fn event(&mut self, e: &Event, f: &Func) -> io::Result<()> {
        if self.closed {
            return Ok(());
        }
        match e.kind {
            EventKind::Entry => {
                let args = output::args_text(e, f)
                    .into_iter()
                    .map(|(n, v)| (n, Value::String(v)))
                    .collect();
                let stack = self.entries.entry(e.tid).or_default();
                if stack.len() == MAX_PENDING {
                    stack.remove(0);
                }
                stack.push((e.func, args));
                Ok(())
            }
            EventKind::Exit => {
                let mut args = self.entry_args(e);
                if e.duration_ns == 0 {
                    self.unplaced += 1;
                    return Ok(());
                }
                if f.proto.ret != ValueKind::Void {
                    let (ret, error) = output::ret_text(e.ret, &f.proto);
                    args.insert("return".into(), Value::String(ret));
                    if let Some(error) = error {
                        args.insert("error".into(), error.into());
                    }
                }
                self.name(e)?;
                let us = |ns: u64| ns as f64 / 1e3;
                self.push(&json!({
                    "name": f.display_name(),
                    "cat": "call",
                    "ph": "X",
                    "ts": us(e.ts_ns.saturating_sub(e.duration_ns)),
                    "dur": us(e.duration_ns),
                    "pid": e.tgid,
                    "tid": e.tid,
                    "args": args,
                }))?;
                self.slices += 1;
                Ok(())
            }
        }
    }

    fn error_chain(&mut self, _: &ErrorChain) -> io::Result<()> {
        Ok(())
    }

    fn interval(&mut self, _: &Interval<'_>) -> io::Result<()> {
        Ok(())
    }

    fn summary(&mut self, _: &Summary) -> io::Result<()> {
        self.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::btf::{Format, Param};
    use crate::trace::events::EventString;

    /// `long name(int pid, const char *path)`.
    fn func(name: &str) -> Func {
        let param = |name: &str, kind, format| Param {
            name: name.into(),
            kind,
            slots: 1,
            format,
        };
        let params = vec![
            param("pid", ValueKind::Signed(32), Format::Plain),
            param("path", ValueKind::Pointer, Format::Str { user: true }),
        ];
        Func::test(name, params, ValueKind::Signed(64))
    }

    fn event(kind: EventKind, func: usize, ts_ns: u64, duration_ns: u64, tid: u32) -> Event {
        let entry = kind == EventKind::Entry;
        Event {
            ts_ns,
            func,
            kind,
            // An int of 7, the register's upper half left by the caller.
            args: if entry {
                vec![0xdead_0000_0007, 0x7ffc_1000]
            } else {
                vec![]
            },
            strings: if entry {
                vec![EventString {
                    slot: 1,
                    bytes: b"/etc/hostname".to_vec(),
                    user: true,
                    ..Default::default()
                }]
            } else {
                vec![]
            },
            symbols: Default::default(),
            pointees: Default::default(),
            ret: -3i64 as u64,
            duration_ns,
            tgid: 40,
            tid,
            comm: "trigger".into(),
        }
    }

    /// A program's calls as the ring buffer sends them: `outer` calling
    /// `inner` twice on thread 41, one `inner` on thread 42, and an exit
    /// whose entry came before the attach (no duration).
    fn run() -> (Value, ChromeTrace<Vec<u8>>) {
        let funcs = [func("outer"), func("inner")];
        let (x, n) = (EventKind::Exit, EventKind::Entry);
        let events = [
            event(x, 1, 500, 0, 41),
            event(n, 0, 1_000, 0, 41),
            event(n, 1, 1_100, 0, 41),
            event(x, 1, 1_300, 200, 41),
            event(n, 1, 1_400, 0, 42),
            event(n, 1, 1_500, 0, 41),
            event(x, 1, 1_750, 250, 41),
            event(x, 1, 1_900, 500, 42),
            event(x, 0, 2_000, 1_000, 41),
        ];
        let mut c = ChromeTrace::new(Vec::new());
        for e in &events {
            c.event(e, &funcs[e.func]).unwrap();
        }
        c.finish().unwrap();
        c.finish().unwrap();
        let v = serde_json::from_slice(&c.out).expect("the trace is JSON");
        (v, c)
    }

    #[test]
    fn one_slice_per_call_with_its_times_and_arguments() {
        let (v, c) = run();
        let ev = v["traceEvents"].as_array().unwrap();
        let slices: Vec<_> = ev.iter().filter(|e| e["ph"] == "X").collect();
        assert_eq!((slices.len(), c.slices(), c.unplaced()), (4, 4, 1));
        let got: Vec<_> = slices
            .iter()
            .map(|e| {
                (
                    e["name"].as_str().unwrap(),
                    e["tid"].as_u64().unwrap(),
                    e["ts"].as_f64().unwrap(),
                    e["dur"].as_f64().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("inner", 41, 1.1, 0.2),
                ("inner", 41, 1.5, 0.25),
                ("inner", 42, 1.4, 0.5),
                ("outer", 41, 1.0, 1.0),
            ]
        );
        assert!(slices.iter().all(|e| e["pid"] == 40 && e["cat"] == "call"));
        // As --args prints them: by their types, the errno a return carries.
        assert_eq!(
            slices[0]["args"],
            json!({"pid": "7", "path": "\"/etc/hostname\"", "return": "-3", "error": "ESRCH"})
        );
        assert_eq!(v["displayTimeUnit"], "ns");
    }

    #[test]
    fn threads_and_the_process_are_named_once() {
        let (v, _) = run();
        let meta: Vec<_> = v["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["ph"] == "M")
            .map(|e| (e["name"].as_str().unwrap(), e["tid"].as_u64().unwrap()))
            .collect();
        assert_eq!(
            meta,
            [
                ("process_name", 40),
                ("thread_name", 41),
                ("thread_name", 42)
            ]
        );
    }

    #[test]
    fn no_events_is_an_empty_trace() {
        let mut c = ChromeTrace::new(Vec::new());
        c.finish().unwrap();
        let v: Value = serde_json::from_slice(&c.out).unwrap();
        assert_eq!(v["traceEvents"], json!([]));
    }
}
