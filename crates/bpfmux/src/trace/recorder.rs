//! A flight recorder of error chains (`bpfmux trace --errors --record-last
//! N`): a run left on for hours keeps, in bounded memory, the last N
//! completed [`ErrorChain`]s of each errno (or of each failing function),
//! and writes them out when asked — on a request (the CLI's SIGUSR1), right
//! after a chain that ends in a chosen error, and at the end of the run.
//!
//! [`Recorder`] is the store: per key a ring of the last
//! [`RecordOptions::last`] chains, oldest first. [`Recording`] is the
//! [`Report`] that feeds it: it takes the session's chains (instead of, or
//! as well as, the report it wraps), writes a [`Dump`] to its own writer
//! when one is due, and hands everything else on.
//!
//! # The memory bound
//!
//! A recorder holds at most [`Recorder::capacity`] chains: `max_keys ×
//! last`. Keys are errnos (at most 4,096: 1 to 4,095 and NULL) or failing
//! functions (as many as the selection has, up to tens of thousands on
//! `'*'`), so their number is capped too ([`RecordOptions::max_keys`],
//! default [`DEFAULT_MAX_KEYS`]): a chain of a new key when the cap is
//! reached evicts the key whose latest chain is the oldest, with its chains
//! (counted: [`Dump::keys_evicted`]). A chain is at most [`MAX_DEPTH`]
//! calls and two stacks of at most [`MAX_STACK_FRAMES`] frames, each a
//! symbol name; its heap size is counted as it comes and goes
//! ([`Recorder::bytes`], in every dump). Nothing else grows with the run:
//! per key, a count of the chains seen.
//!
//! [`MAX_DEPTH`]: super::errors::MAX_DEPTH

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use super::errors::{ChainCall, ErrorChain, Failure};
use super::events::Event;
use super::output::stamped_chain_lines;
use super::report::{local_time, Interval, Report};
use super::select::Func;
use super::summary::Summary;
use super::{Plan, Tracer};

/// Keys a recorder keeps at most unless told otherwise.
pub const DEFAULT_MAX_KEYS: usize = 1024;

/// Frames of a stack the programs take at most (the `stacks` map's value:
/// 127 addresses).
pub const MAX_STACK_FRAMES: usize = 127;

/// What a recorder keeps its last chains of.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RecordBy {
    /// The error the failing call returned (`ENOENT`, ..., `NULL`).
    #[default]
    Errno,
    /// The failing call's function.
    Function,
}

impl RecordBy {
    /// `errno` or `function`, as in `last 3 per errno`.
    pub fn name(self) -> &'static str {
        match self {
            RecordBy::Errno => "errno",
            RecordBy::Function => "function",
        }
    }
}

/// How a [`Recorder`] records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordOptions {
    /// Chains kept per key (at least 1).
    pub last: usize,
    /// What a key is.
    pub by: RecordBy,
    /// Keys kept at most (at least 1): see the [module docs](self).
    pub max_keys: usize,
    /// Errors after whose chains a dump is written at once.
    pub on: Vec<Failure>,
}

impl RecordOptions {
    /// The last `last` chains per errno, [`DEFAULT_MAX_KEYS`], no trigger.
    pub fn last(last: usize) -> Self {
        Self {
            last,
            by: RecordBy::Errno,
            max_keys: DEFAULT_MAX_KEYS,
            on: Vec::new(),
        }
    }
}

/// Why a recorder cannot be made as asked.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// Keeping no chain per key, or no key.
    #[error("a recorder keeps at least 1 chain of at least 1 key (asked: {last} chains, {max_keys} keys)")]
    Empty {
        /// Chains per key asked for.
        last: usize,
        /// Keys asked for.
        max_keys: usize,
    },
    /// More chains than can be counted.
    #[error("{last} chains for each of {max_keys} keys is more than can be held")]
    TooMany {
        /// Chains per key asked for.
        last: usize,
        /// Keys asked for.
        max_keys: usize,
    },
}

/// What a recorder keys its chains by: an error, or a failing function.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RecordKey {
    /// The failing call's error.
    Error(Failure),
    /// The failing call's function (`name` or `module:name`).
    Function(String),
}

impl RecordKey {
    /// `ENOENT (2)`, `NULL`, or the function's name.
    pub fn text(&self) -> String {
        match self {
            RecordKey::Error(f @ Failure::Errno(e)) => format!("{} ({e})", f.name()),
            RecordKey::Error(f) => f.name(),
            RecordKey::Function(name) => name.clone(),
        }
    }
}

/// The failure a chain ended in.
fn failure_of(c: &ErrorChain) -> Failure {
    c.errno.map_or(Failure::Null, Failure::Errno)
}

/// Heap and inline bytes of a chain, as its strings and vectors hold them.
pub fn chain_bytes(c: &ErrorChain) -> usize {
    let strings = |v: &[String]| v.iter().map(String::capacity).sum::<usize>();
    let call = |k: &ChainCall| k.function.capacity() + k.error.as_ref().map_or(0, String::capacity);
    std::mem::size_of::<ErrorChain>()
        + c.comm.capacity()
        + c.function.capacity()
        + c.error.capacity()
        + c.calls.capacity() * std::mem::size_of::<ChainCall>()
        + c.calls.iter().map(call).sum::<usize>()
        + (c.kernel_stack.capacity() + c.user_stack.capacity()) * std::mem::size_of::<String>()
        + strings(&c.kernel_stack)
        + strings(&c.user_stack)
}

/// One key's ring.
#[derive(Debug)]
struct Ring {
    /// Oldest first, at most `last`.
    chains: VecDeque<ErrorChain>,
    /// Chains of this key recorded since it was (last) made.
    seen: u64,
    /// The recorder's sequence number of its latest chain.
    latest: u64,
}

/// The last chains per key, in bounded memory (see the [module docs](self)).
#[derive(Debug)]
pub struct Recorder {
    opts: RecordOptions,
    rings: HashMap<RecordKey, Ring>,
    /// Sequence number of each key's latest chain → the key: the first is
    /// the one to evict.
    recency: BTreeMap<u64, RecordKey>,
    seq: u64,
    seen: u64,
    held: usize,
    bytes: usize,
    keys_evicted: u64,
}

impl Recorder {
    /// An empty recorder.
    pub fn new(opts: RecordOptions) -> Result<Self, RecordError> {
        let (last, max_keys) = (opts.last, opts.max_keys);
        if last == 0 || max_keys == 0 {
            return Err(RecordError::Empty { last, max_keys });
        }
        if last.checked_mul(max_keys).is_none() {
            return Err(RecordError::TooMany { last, max_keys });
        }
        Ok(Self {
            opts,
            rings: HashMap::new(),
            recency: BTreeMap::new(),
            seq: 0,
            seen: 0,
            held: 0,
            bytes: 0,
            keys_evicted: 0,
        })
    }

    /// How it records.
    pub fn options(&self) -> &RecordOptions {
        &self.opts
    }

    /// The key `c` is kept under.
    pub fn key_of(&self, c: &ErrorChain) -> RecordKey {
        match self.opts.by {
            RecordBy::Errno => RecordKey::Error(failure_of(c)),
            RecordBy::Function => RecordKey::Function(c.function.clone()),
        }
    }

    /// Keeps `c` as the latest chain of its key, dropping that key's oldest
    /// when it has `last` already, and the least recently updated key when
    /// `c` is of a new one and `max_keys` are kept. Returns the first error
    /// of [`RecordOptions::on`] that a call of `c` returned, if any: the
    /// failing call's, or a caller's (a close of a bad descriptor can end
    /// in a NULL lookup under a system call that returned `-EBADF`).
    pub fn record(&mut self, c: ErrorChain) -> Option<Failure> {
        let key = self.key_of(&c);
        let triggers = self.triggered_by(&c);
        self.seq += 1;
        self.seen += 1;
        if !self.rings.contains_key(&key) && self.rings.len() >= self.opts.max_keys {
            self.evict_oldest_key();
        }
        let ring = self.rings.entry(key.clone()).or_insert_with(|| Ring {
            chains: VecDeque::new(),
            seen: 0,
            latest: 0,
        });
        self.recency.remove(&ring.latest);
        ring.latest = self.seq;
        self.recency.insert(self.seq, key);
        ring.seen += 1;
        if ring.chains.len() >= self.opts.last {
            if let Some(old) = ring.chains.pop_front() {
                self.held -= 1;
                self.bytes -= chain_bytes(&old);
            }
        }
        self.held += 1;
        self.bytes += chain_bytes(&c);
        ring.chains.push_back(c);
        triggers
    }

    /// The first error of [`RecordOptions::on`] a call of `c` returned.
    fn triggered_by(&self, c: &ErrorChain) -> Option<Failure> {
        let failing = failure_of(c);
        self.opts.on.iter().copied().find(|&f| {
            f == failing || {
                let name = f.name();
                c.calls
                    .iter()
                    .any(|k| k.error.as_deref() == Some(name.as_str()))
            }
        })
    }

    fn evict_oldest_key(&mut self) {
        let Some((_, key)) = self.recency.pop_first() else {
            return;
        };
        if let Some(ring) = self.rings.remove(&key) {
            self.held -= ring.chains.len();
            self.bytes -= ring.chains.iter().map(chain_bytes).sum::<usize>();
            self.keys_evicted += 1;
        }
    }

    /// Chains held at most: `max_keys × last`.
    pub fn capacity(&self) -> usize {
        // Checked in `new`.
        self.opts.max_keys.saturating_mul(self.opts.last)
    }

    /// Chains held now.
    pub fn held(&self) -> usize {
        self.held
    }

    /// Bytes the chains held take ([`chain_bytes`] of each).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Keys held now.
    pub fn keys(&self) -> usize {
        self.rings.len()
    }

    /// Chains recorded since the start.
    pub fn seen(&self) -> u64 {
        self.seen
    }

    /// What is held now, for `trigger`, as of `at` (the time of day in its
    /// head; chains are stamped from their monotonic times through `at`).
    pub fn dump(&self, trigger: Trigger, at: SystemTime) -> Dump<'_> {
        let mut keys: Vec<(&RecordKey, &Ring)> = self.rings.iter().collect();
        keys.sort_by(|a, b| a.0.cmp(b.0));
        let groups = keys
            .into_iter()
            .map(|(k, r)| {
                let (error, errno, function) = match k {
                    RecordKey::Error(f) => (Some(f.name()), f.errno(), None),
                    RecordKey::Function(name) => (None, None, Some(name.clone())),
                };
                DumpGroup {
                    key: k.text(),
                    error,
                    errno,
                    function,
                    seen: r.seen,
                    chains: r.chains.iter().collect(),
                }
            })
            .collect();
        Dump {
            kind: "recorded",
            trigger: trigger.name(),
            trigger_error: match trigger {
                Trigger::Error(f) => Some(f.name()),
                _ => None,
            },
            unix_time: at
                .duration_since(UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
            by: self.opts.by,
            last: self.opts.last,
            chains_seen: self.seen,
            chains_held: self.held,
            bytes_held: self.bytes,
            keys_evicted: self.keys_evicted,
            max_keys: self.opts.max_keys,
            groups,
            at,
            monotonic_at: monotonic_now(),
        }
    }
}

/// What made a dump.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// Asked for (the CLI: SIGUSR1).
    Request,
    /// A chain that ended in this error ([`RecordOptions::on`]).
    Error(Failure),
    /// The end of the run.
    Exit,
}

impl Trigger {
    /// `request`, `error`, `exit`.
    pub fn name(self) -> &'static str {
        match self {
            Trigger::Request => "request",
            Trigger::Error(_) => "error",
            Trigger::Exit => "exit",
        }
    }
}

/// `CLOCK_MONOTONIC` now, nanoseconds (the clock of chains' `ts_ns`).
fn monotonic_now() -> u64 {
    // SAFETY: an all-zero timespec is valid; clock_gettime fills it.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: see above.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64).saturating_mul(1_000_000_000) + ts.tv_nsec as u64
}

/// What a recorder held at one moment: JSON as it serializes, text from
/// [`Dump::lines`].
#[derive(Clone, Debug, Serialize)]
pub struct Dump<'a> {
    /// Always `"recorded"`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// `request`, `error` or `exit` ([`Trigger`]).
    pub trigger: &'static str,
    /// The error that triggered it (`trigger` is `error`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trigger_error: Option<String>,
    /// When it was taken, seconds since the epoch.
    pub unix_time: f64,
    /// What the groups are of.
    pub by: RecordBy,
    /// Chains kept per key.
    pub last: usize,
    /// Chains recorded since the start.
    pub chains_seen: u64,
    /// Chains held now.
    pub chains_held: usize,
    /// Bytes they take ([`chain_bytes`]).
    pub bytes_held: usize,
    /// Keys dropped (with their chains) to keep at most `max_keys`.
    pub keys_evicted: u64,
    /// Keys kept at most.
    pub max_keys: usize,
    /// Per key (errors by number, NULL last; functions by name), its last
    /// chains, oldest first.
    pub groups: Vec<DumpGroup<'a>>,
    #[serde(skip)]
    at: SystemTime,
    #[serde(skip)]
    monotonic_at: u64,
}

/// One key's chains in a [`Dump`].
#[derive(Clone, Debug, Serialize)]
pub struct DumpGroup<'a> {
    /// `ENOENT (2)`, `NULL`, or the function.
    pub key: String,
    /// The error, keyed by errno.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Its number (absent for NULL).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errno: Option<i32>,
    /// The function, keyed by function.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    /// Chains of this key recorded (since it was last evicted).
    pub seen: u64,
    /// The last of them, oldest first.
    pub chains: Vec<&'a ErrorChain>,
}

impl Dump<'_> {
    /// When a chain's outermost call returned, by the clock of day.
    fn wall_time(&self, ts_ns: u64) -> SystemTime {
        let ago = Duration::from_nanos(self.monotonic_at.saturating_sub(ts_ns));
        self.at.checked_sub(ago).unwrap_or(self.at)
    }

    /// The text form, local time of day in the head and on every chain.
    ///
    /// ```text
    /// === 2026-11-30 14:02:11 recorded error chains (requested): last 3 per errno, 4 held of 27 seen (9.1 KiB)
    /// --- ENOENT (2): last 3 of 25
    /// 14:01:58.120 cat[42/42] ENOENT in path_openat, 3 calls
    ///   __x64_sys_openat       -2 ENOENT  41.0us
    ///   ...
    /// --- EBADF (9): last 1 of 2
    /// ...
    /// === end of recorded error chains
    /// ```
    pub fn lines(&self) -> Vec<String> {
        self.lines_stamped(&|t, day| local_time(t, day))
    }

    /// [`Dump::lines`] with `stamp(time, with_date)` for the times.
    pub fn lines_stamped(&self, stamp: &dyn Fn(SystemTime, bool) -> String) -> Vec<String> {
        let why = match self.trigger_error.as_deref() {
            Some(e) => format!("after {e}"),
            None if self.trigger == "exit" => "at exit".into(),
            None => "requested".into(),
        };
        let mut head = format!(
            "=== {} recorded error chains ({why}): last {} per {}, {} held of {} seen ({})",
            stamp(self.at, true),
            self.last,
            self.by.name(),
            self.chains_held,
            self.chains_seen,
            kib(self.bytes_held),
        );
        if self.keys_evicted > 0 {
            head.push_str(&format!(
                "; {} {}s evicted to keep at most {}",
                self.keys_evicted,
                self.by.name(),
                self.max_keys
            ));
        }
        let mut out = vec![head];
        for g in &self.groups {
            out.push(format!(
                "--- {}: last {} of {}",
                g.key,
                g.chains.len(),
                g.seen
            ));
            for c in &g.chains {
                out.extend(stamped_chain_lines(
                    c,
                    &stamp(self.wall_time(c.ts_ns), false),
                ));
            }
        }
        out.push("=== end of recorded error chains".into());
        out
    }

    /// Writes the text form, or one JSON line.
    pub fn write(&self, out: &mut dyn Write, json: bool) -> io::Result<()> {
        if json {
            let v = serde_json::to_value(self).map_err(io::Error::other)?;
            writeln!(out, "{v}")?;
        } else {
            for l in self.lines() {
                writeln!(out, "{l}")?;
            }
        }
        out.flush()
    }
}

/// `9.1 KiB`, `2.0 MiB`.
fn kib(bytes: usize) -> String {
    let k = bytes as f64 / 1024.0;
    if k < 1024.0 {
        format!("{k:.1} KiB")
    } else {
        format!("{:.1} MiB", k / 1024.0)
    }
}

/// A [`Report`] that records the session's error chains in a [`Recorder`]
/// and writes a [`Dump`] to `sink` when one is due: asked for through
/// `request` (checked on every turn of the session's loop, at least every
/// 100 ms, and answered at the turn after the one that saw it, once the
/// ring buffers were read again), and right after a chain of a trigger
/// error. The run's last
/// dump is the caller's ([`Recording::finish`]: the recorder back). Chains
/// go to `inner` too only with [`Recording::print_chains`]; everything else
/// does always.
pub struct Recording<'a, W: Write> {
    inner: &'a mut dyn Report,
    recorder: Recorder,
    sink: W,
    json: bool,
    request: &'a AtomicBool,
    /// A request seen at the last turn, answered at this one.
    requested: bool,
    print_chains: bool,
    dumps: u64,
}

impl<'a, W: Write> Recording<'a, W> {
    /// Records into `recorder`, dumps to `sink` (JSON lines with `json`,
    /// else text) when `request` is set (it is cleared then) or a trigger
    /// error comes.
    pub fn new(
        inner: &'a mut dyn Report,
        recorder: Recorder,
        sink: W,
        json: bool,
        request: &'a AtomicBool,
    ) -> Self {
        Self {
            inner,
            recorder,
            sink,
            json,
            request,
            requested: false,
            print_chains: false,
            dumps: 0,
        }
    }

    /// Whether each chain also goes to the wrapped report as it comes
    /// (default: no, it is only recorded).
    pub fn print_chains(mut self, yes: bool) -> Self {
        self.print_chains = yes;
        self
    }

    /// Writes what is held now, for `trigger`.
    pub fn dump(&mut self, trigger: Trigger) -> io::Result<()> {
        self.dumps += 1;
        self.recorder
            .dump(trigger, SystemTime::now())
            .write(&mut self.sink, self.json)
    }

    /// Dumps written so far.
    pub fn dumps(&self) -> u64 {
        self.dumps
    }

    /// The recorder and the sink, for the run's last dump.
    pub fn finish(self) -> (Recorder, W) {
        (self.recorder, self.sink)
    }
}

impl<W: Write> Report for Recording<'_, W> {
    fn planned(&mut self, plan: &Plan) -> io::Result<()> {
        self.inner.planned(plan)
    }

    fn attached(&mut self, tracer: &Tracer) -> io::Result<()> {
        self.inner.attached(tracer)
    }

    fn event(&mut self, event: &Event, func: &Func) -> io::Result<()> {
        self.inner.event(event, func)
    }

    fn error_chain(&mut self, chain: &ErrorChain) -> io::Result<()> {
        if self.print_chains {
            self.inner.error_chain(chain)?;
        }
        if let Some(f) = self.recorder.record(chain.clone()) {
            self.dump(Trigger::Error(f))?;
        }
        Ok(())
    }

    fn interval(&mut self, interval: &Interval<'_>) -> io::Result<()> {
        self.inner.interval(interval)
    }

    fn turn(&mut self) -> io::Result<()> {
        // A request seen now is answered at the next turn: the session reads
        // its ring buffers once more in between, after the request was seen
        // and so after the signal, and everything sent before the signal is
        // in the dump. (Seen while this turn's chains were being delivered,
        // which can take seconds when the kernel's symbols load first, it
        // would miss those sent meanwhile.)
        if self.requested {
            self.requested = false;
            self.dump(Trigger::Request)?;
        }
        if self.request.swap(false, Ordering::Relaxed) {
            self.requested = true;
        }
        self.inner.turn()
    }

    fn summary(&mut self, summary: &Summary) -> io::Result<()> {
        self.inner.summary(summary)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::errors::RetValue;

    /// A chain of `function` failing with `errno` (None: NULL), numbered `n`
    /// in its pid and time.
    fn chain(function: &str, errno: Option<i32>, n: u32) -> ErrorChain {
        let error = errno.map_or(Failure::Null, Failure::Errno).name();
        ErrorChain {
            kind: "error",
            ts_ns: u64::from(n) * 1_000_000,
            pid: n,
            tid: n,
            comm: "t".into(),
            function: function.into(),
            error: error.clone(),
            errno,
            calls: vec![ChainCall {
                function: function.into(),
                ret: Some(RetValue::Signed(-i64::from(errno.unwrap_or(0)))),
                error: Some(error),
                duration_ns: Some(1500),
            }],
            overflow: 0,
            kernel_stack: vec!["do_sys_openat2+0x7e".into()],
            user_stack: vec![],
        }
    }

    fn recorder(last: usize, by: RecordBy, max_keys: usize) -> Recorder {
        Recorder::new(RecordOptions {
            last,
            by,
            max_keys,
            on: vec![Failure::Errno(9)],
        })
        .unwrap()
    }

    /// (key, pids of its chains, seen) per group of a dump.
    fn held(r: &Recorder) -> Vec<(String, Vec<u32>, u64)> {
        r.dump(Trigger::Request, SystemTime::now())
            .groups
            .iter()
            .map(|g| {
                (
                    g.key.clone(),
                    g.chains.iter().map(|c| c.pid).collect(),
                    g.seen,
                )
            })
            .collect()
    }

    #[test]
    fn keeps_the_last_n_per_errno_oldest_first() {
        let mut r = recorder(3, RecordBy::Errno, 16);
        // 10 ENOENT (pids 1..=10), interleaved with 2 EBADF (98, 100), 1 NULL.
        let ebadf = Some(Failure::Errno(9));
        for n in 1..=10 {
            assert_eq!(r.record(chain("path_openat", Some(2), n)), None);
            if n == 4 || n == 7 {
                let c = chain("fget", Some(9), 96 + n / 3 * 2);
                assert_eq!(r.record(c), ebadf, "EBADF triggers");
            }
        }
        // A NULL under a caller that returned EBADF triggers as EBADF.
        let mut null = chain("kmalloc", None, 200);
        null.calls
            .insert(0, chain("__x64_sys_close", Some(9), 200).calls[0].clone());
        assert_eq!(r.record(null), Some(Failure::Errno(9)));
        assert_eq!(
            held(&r),
            [
                ("ENOENT (2)".to_string(), vec![8, 9, 10], 10),
                ("EBADF (9)".to_string(), vec![98, 100], 2),
                ("NULL".to_string(), vec![200], 1),
            ]
        );
        assert_eq!((r.held(), r.seen(), r.keys()), (6, 13, 3));
        // Eviction goes oldest first, one at a time.
        r.record(chain("path_openat", Some(2), 11));
        assert_eq!(held(&r)[0].1, [9, 10, 11]);
    }

    #[test]
    fn keys_per_function_when_asked() {
        let mut r = recorder(2, RecordBy::Function, 16);
        for (n, f) in ["a", "b", "a", "a", "c", "b"].iter().enumerate() {
            r.record(chain(f, Some(2), n as u32));
        }
        assert_eq!(
            held(&r),
            [
                ("a".to_string(), vec![2, 3], 3),
                ("b".to_string(), vec![1, 5], 2),
                ("c".to_string(), vec![4], 1),
            ]
        );
        let d = r.dump(Trigger::Exit, SystemTime::now());
        let v = serde_json::to_value(&d).unwrap();
        assert_eq!(v["groups"][0]["function"], "a");
        assert!(v["groups"][0].get("errno").is_none(), "{v}");
        assert_eq!(
            (&v["by"], &v["trigger"]),
            (&"function".into(), &"exit".into())
        );
    }

    /// However many chains of however many keys come, at most `max_keys ×
    /// last` are held, their bytes as counted; the key whose latest chain
    /// is the oldest goes first.
    #[test]
    fn memory_stays_within_the_bound() {
        let (last, max_keys) = (3, 8);
        let mut r = recorder(last, RecordBy::Function, max_keys);
        let one = chain("function_0000", Some(2), 0);
        let most = chain_bytes(&one);
        for n in 0..100_000u32 {
            // 1,000 functions, a few of them far more often than the rest.
            let f = format!("function_{:04}", if n % 3 == 0 { n % 4 } else { n % 1000 });
            r.record(chain(&f, Some(2), n));
            assert!(r.held() <= r.capacity() && r.keys() <= max_keys);
            assert!(r.bytes() <= r.capacity() * most, "{} bytes", r.bytes());
        }
        assert_eq!(r.capacity(), 24);
        assert_eq!((r.keys(), r.seen()), (8, 100_000));
        assert!(r.dump(Trigger::Request, SystemTime::now()).keys_evicted >= 1000 - 8);
        // Then 8 keys, 3 chains each, in turn: the others are gone, each of
        // these holds its 3, oldest first.
        for round in 0..3 {
            for k in 0..8 {
                r.record(chain(
                    &format!("hot_{k}"),
                    Some(2),
                    1_000_000 + round * 10 + k,
                ));
            }
        }
        assert_eq!((r.held(), r.keys()), (24, 8));
        let counted: usize = r
            .dump(Trigger::Request, SystemTime::now())
            .groups
            .iter()
            .flat_map(|g| g.chains.iter().map(|c| chain_bytes(c)))
            .sum();
        assert_eq!(r.bytes(), counted);
        let got: Vec<(String, Vec<u32>, u64)> = held(&r);
        let want: Vec<(String, Vec<u32>, u64)> = (0..8)
            .map(|k| {
                (
                    format!("hot_{k}"),
                    vec![1_000_000 + k, 1_000_010 + k, 1_000_020 + k],
                    3,
                )
            })
            .collect();
        assert_eq!(got, want);
        // A key evicted and seen again starts afresh.
        r.record(chain("function_0500", Some(2), 1));
        assert_eq!(
            held(&r)
                .iter()
                .find(|g| g.0 == "function_0500")
                .map(|g| g.2),
            Some(1)
        );
    }

    #[test]
    fn refuses_an_empty_or_unbounded_recorder() {
        let opts = |last, max_keys| RecordOptions {
            last,
            max_keys,
            ..RecordOptions::last(1)
        };
        assert_eq!(
            Recorder::new(opts(0, 5)).unwrap_err(),
            RecordError::Empty {
                last: 0,
                max_keys: 5
            }
        );
        assert!(Recorder::new(opts(3, 0)).is_err());
        assert!(matches!(
            Recorder::new(opts(usize::MAX, 2)),
            Err(RecordError::TooMany { .. })
        ));
        assert_eq!(Recorder::new(opts(3, 4)).unwrap().capacity(), 12);
    }

    fn stamp(t: SystemTime, day: bool) -> String {
        let s = t.duration_since(UNIX_EPOCH).unwrap_or_default().as_millis();
        if day {
            format!("DAY@{s}")
        } else {
            format!("T@{s}")
        }
    }

    #[test]
    fn dump_text_is_the_chain_report_under_a_head() {
        let mut r = recorder(2, RecordBy::Errno, 16);
        for n in 1..=3 {
            r.record(chain("path_openat", Some(2), n));
        }
        r.record(chain("fget", Some(9), 7));
        let mut d = r.dump(Trigger::Error(Failure::Errno(9)), UNIX_EPOCH);
        d.at = UNIX_EPOCH + Duration::from_secs(100);
        d.monotonic_at = 10_000_000;
        let lines = d.lines_stamped(&stamp);
        let bytes = kib(r.bytes());
        // Each chain as the live report prints it, stamped with its own time.
        let body = |n: u32, f: &str, e: i32| {
            let mut l = crate::trace::output::chain_lines(&chain(f, Some(e), n));
            l[0] = format!("T@{} {}", 99_990 + n, l[0]);
            l
        };
        let want: Vec<String> = [
            vec![
                format!(
                    "=== DAY@100000 recorded error chains (after EBADF): last 2 per errno, \
                     3 held of 4 seen ({bytes})"
                ),
                "--- ENOENT (2): last 2 of 3".into(),
            ],
            body(2, "path_openat", 2),
            body(3, "path_openat", 2),
            vec!["--- EBADF (9): last 1 of 1".into()],
            body(7, "fget", 9),
            vec!["=== end of recorded error chains".into()],
        ]
        .concat();
        assert_eq!(lines, want);
        assert_eq!(lines[2], "T@99992 t[2/2] ENOENT in path_openat, 1 call");
        assert_eq!(
            lines[3].split_whitespace().collect::<Vec<_>>(),
            ["path_openat", "-2", "ENOENT", "1.5us"]
        );
        // The chain lines are the live report's, only stamped otherwise.
        let mut live = Vec::new();
        crate::trace::PlainText::new(&mut live, false, None, false)
            .error_chain(&chain("fget", Some(9), 7))
            .unwrap();
        let live = String::from_utf8(live).unwrap();
        let tail: Vec<&str> = live.lines().skip(1).collect();
        assert_eq!(tail, lines[12..15]);
        assert!(live
            .lines()
            .next()
            .unwrap()
            .ends_with(" t[7/7] EBADF in fget, 1 call"));
    }

    #[test]
    fn dump_json_and_an_empty_dump() {
        let r = recorder(3, RecordBy::Errno, 16);
        let d = r.dump(Trigger::Request, UNIX_EPOCH + Duration::from_millis(1500));
        assert_eq!(
            d.lines_stamped(&stamp),
            [
                "=== DAY@1500 recorded error chains (requested): last 3 per errno, 0 held of 0 \
                 seen (0.0 KiB)",
                "=== end of recorded error chains",
            ]
        );
        let mut out = Vec::new();
        d.write(&mut out, true).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "type": "recorded", "trigger": "request", "unix_time": 1.5, "by": "errno",
                "last": 3, "chains_seen": 0, "chains_held": 0, "bytes_held": 0,
                "keys_evicted": 0, "max_keys": 16, "groups": [],
            })
        );
        let mut r = recorder(1, RecordBy::Errno, 1);
        r.record(chain("f", Some(2), 1));
        r.record(chain("g", Some(22), 2));
        let d = r.dump(Trigger::Error(Failure::Errno(22)), UNIX_EPOCH);
        let v = serde_json::to_value(&d).unwrap();
        assert_eq!(
            (&v["trigger"], &v["trigger_error"]),
            (&"error".into(), &"EINVAL".into())
        );
        assert_eq!(
            (&v["groups"][0]["error"], &v["groups"][0]["errno"]),
            (&"EINVAL".into(), &22.into())
        );
        assert_eq!(v["groups"][0]["chains"][0]["function"], "g");
        assert!(d.lines_stamped(&stamp)[0].ends_with("; 1 errnos evicted to keep at most 1"));
    }

    /// A report that counts what reaches it.
    #[derive(Default)]
    struct Counts {
        chains: usize,
        turns: usize,
    }

    impl Report for Counts {
        fn event(&mut self, _: &Event, _: &Func) -> io::Result<()> {
            Ok(())
        }
        fn error_chain(&mut self, _: &ErrorChain) -> io::Result<()> {
            self.chains += 1;
            Ok(())
        }
        fn interval(&mut self, _: &Interval<'_>) -> io::Result<()> {
            Ok(())
        }
        fn turn(&mut self) -> io::Result<()> {
            self.turns += 1;
            Ok(())
        }
        fn summary(&mut self, _: &Summary) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn recording_dumps_on_request_and_on_a_trigger_error() {
        let request = AtomicBool::new(false);
        let mut inner = Counts::default();
        let mut sink = Vec::new();
        let mut rec = Recording::new(
            &mut inner,
            recorder(3, RecordBy::Errno, 16),
            &mut sink,
            true,
            &request,
        );
        rec.error_chain(&chain("path_openat", Some(2), 1)).unwrap();
        rec.turn().unwrap();
        assert_eq!(rec.dumps(), 0);
        request.store(true, Ordering::Relaxed);
        rec.turn().unwrap();
        assert_eq!(
            rec.dumps(),
            0,
            "answered at the next turn, after one more read"
        );
        rec.error_chain(&chain("path_openat", Some(2), 3)).unwrap();
        rec.turn().unwrap();
        assert_eq!(rec.dumps(), 1, "one request, one dump");
        rec.turn().unwrap();
        assert_eq!(rec.dumps(), 1, "one request, one dump");
        assert!(!request.load(Ordering::Relaxed));
        // EBADF is the trigger: a dump right after it, holding it.
        rec.error_chain(&chain("fget", Some(9), 2)).unwrap();
        assert_eq!(rec.dumps(), 2);
        let (r, _) = rec.finish();
        assert_eq!(r.held(), 3);
        assert_eq!(
            (inner.chains, inner.turns),
            (0, 4),
            "chains are only recorded"
        );
        let dumps: Vec<serde_json::Value> = String::from_utf8(sink)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(dumps.len(), 2);
        assert_eq!(
            (&dumps[0]["trigger"], &dumps[0]["chains_held"]),
            (&"request".into(), &2.into()),
            "the dump holds the chain that came in the turn after the request"
        );
        assert_eq!(dumps[1]["trigger_error"], "EBADF");
        assert_eq!(dumps[1]["groups"][1]["chains"][0]["function"], "fget");
        // Printing chains too, when asked.
        let mut inner = Counts::default();
        let mut rec = Recording::new(
            &mut inner,
            recorder(3, RecordBy::Errno, 16),
            io::sink(),
            false,
            &request,
        )
        .print_chains(true);
        rec.error_chain(&chain("f", Some(2), 1)).unwrap();
        drop(rec);
        assert_eq!(inner.chains, 1);
    }
}
