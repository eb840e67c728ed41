//! Where a [`super::Session`] sends what it reads: [`Report`], and its
//! three forms — the live table of a terminal ([`LiveTable`]), plain lines
//! for a file or pipe ([`PlainText`]) and JSON lines ([`JsonLines`]). Each
//! can carry [`Notes`], what the run says about itself (the plan, the
//! attach, times and losses at the end), written to a writer of their own.

use std::io::{self, Write};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use super::engine::EngineKind;
use super::errors::ErrorChain;
use super::events::Event;
use super::notes::Notes;
use super::output::{self, Row};
use super::select::Func;
use super::summary::{FunctionTotals, Summary};
use super::{Plan, Tracer};

/// One interval's numbers.
#[derive(Clone, Copy, Debug)]
pub struct Interval<'a> {
    /// Since the run started.
    pub elapsed: Duration,
    /// Length of this interval, in seconds.
    pub secs: f64,
    /// Functions called in the interval, busiest first.
    pub rows: &'a [Row],
    /// Functions attached.
    pub functions: usize,
    /// The engine attached.
    pub engine: EngineKind,
}

/// Receives a run's output as it happens.
///
/// [`Report::planned`] and [`Report::attached`] come from the caller, which
/// holds the [`Plan`] and the [`Tracer`] before a [`super::Session`] exists;
/// the rest from the session ([`Report::summary`] again from the caller,
/// after [`super::Session::summary`]).
pub trait Report {
    /// The functions and the engine are chosen, nothing is loaded yet.
    fn planned(&mut self, _plan: &Plan) -> io::Result<()> {
        Ok(())
    }
    /// Everything is attached; counting starts next.
    fn attached(&mut self, _tracer: &Tracer) -> io::Result<()> {
        Ok(())
    }
    /// One call of a function whose arguments are captured.
    fn event(&mut self, event: &Event, func: &Func) -> io::Result<()>;
    /// A chain of traced calls that ended in an error
    /// ([`super::TraceOptions::errors`]).
    fn error_chain(&mut self, chain: &ErrorChain) -> io::Result<()>;
    /// An error chain read back from a recording (see
    /// [`super::recording`]), which came at `at`: as
    /// [`Report::error_chain`], with the time it came where the form shows
    /// one.
    fn recorded_chain(&mut self, chain: &ErrorChain, _at: SystemTime) -> io::Result<()> {
        self.error_chain(chain)
    }
    /// Counters of one interval.
    fn interval(&mut self, interval: &Interval<'_>) -> io::Result<()>;
    /// Every turn of the session's loop (at least every 100 ms), after
    /// what came since the last one was reported: a report can act on what
    /// was asked of it meanwhile (a signal asking for a dump,
    /// [`super::recorder::Recording`]).
    fn turn(&mut self) -> io::Result<()> {
        Ok(())
    }
    /// The end of the run: the totals, then the notes on times and losses.
    fn summary(&mut self, summary: &Summary) -> io::Result<()>;
}

/// A report lent: `&mut report` (`&mut dyn Report` too) reports as it does.
impl<R: Report + ?Sized> Report for &mut R {
    fn planned(&mut self, plan: &Plan) -> io::Result<()> {
        (**self).planned(plan)
    }
    fn attached(&mut self, tracer: &Tracer) -> io::Result<()> {
        (**self).attached(tracer)
    }
    fn event(&mut self, event: &Event, func: &Func) -> io::Result<()> {
        (**self).event(event, func)
    }
    fn error_chain(&mut self, chain: &ErrorChain) -> io::Result<()> {
        (**self).error_chain(chain)
    }
    fn recorded_chain(&mut self, chain: &ErrorChain, at: SystemTime) -> io::Result<()> {
        (**self).recorded_chain(chain, at)
    }
    fn interval(&mut self, interval: &Interval<'_>) -> io::Result<()> {
        (**self).interval(interval)
    }
    fn turn(&mut self) -> io::Result<()> {
        (**self).turn()
    }
    fn summary(&mut self, summary: &Summary) -> io::Result<()> {
        (**self).summary(summary)
    }
}

/// [`Report::planned`] and [`Report::attached`] as every form has them:
/// to its notes, if it has any.
fn note(
    notes: &mut Option<Notes>,
    say: impl FnOnce(&mut Notes) -> io::Result<()>,
) -> io::Result<()> {
    notes.as_mut().map_or(Ok(()), say)
}

/// JSON lines: an object per event and per interval, then the summary.
pub struct JsonLines<W> {
    out: W,
    intervals: bool,
    notes: Option<Notes>,
}

impl<W: Write> JsonLines<W> {
    /// `intervals`: also an object per interval (a caller printing
    /// per-call events may leave them out).
    pub fn new(out: W, intervals: bool) -> Self {
        Self {
            out,
            intervals,
            notes: None,
        }
    }

    /// Writes `notes` too (as text, to their own writer).
    pub fn with_notes(mut self, notes: Notes) -> Self {
        self.notes = Some(notes);
        self
    }

    /// [`Report::summary`] with the caller's own `fields` added to the
    /// summary object (its keys sorted with the rest), e.g. the exit status
    /// of a command the caller ran.
    pub fn summary_with(
        &mut self,
        s: &Summary,
        fields: impl IntoIterator<Item = (String, Value)>,
    ) -> io::Result<()> {
        // Through a `Value`: its keys come out sorted, as they always did.
        let mut v = serde_json::to_value(s).map_err(io::Error::other)?;
        if let Value::Object(m) = &mut v {
            m.extend(fields);
        }
        writeln!(self.out, "{v}")?;
        note(&mut self.notes, |n| n.summary(s))
    }
}

impl<W: Write> Report for JsonLines<W> {
    fn planned(&mut self, plan: &Plan) -> io::Result<()> {
        note(&mut self.notes, |n| n.planned(plan))
    }

    fn attached(&mut self, tracer: &Tracer) -> io::Result<()> {
        note(&mut self.notes, |n| n.attached(tracer))
    }

    fn event(&mut self, e: &Event, f: &Func) -> io::Result<()> {
        writeln!(self.out, "{}", output::event_json(e, f))
    }

    fn error_chain(&mut self, c: &ErrorChain) -> io::Result<()> {
        let v = serde_json::to_value(c).map_err(io::Error::other)?;
        writeln!(self.out, "{v}")?;
        self.out.flush()
    }

    fn interval(&mut self, iv: &Interval<'_>) -> io::Result<()> {
        if self.intervals {
            let v = output::interval_json(iv.elapsed.as_secs_f64(), iv.secs, iv.rows);
            writeln!(self.out, "{v}")?;
        }
        self.out.flush()
    }

    fn summary(&mut self, s: &Summary) -> io::Result<()> {
        self.summary_with(s, [])
    }
}

/// Plain lines: one per function called in an interval (with the time of
/// day), event lines, then the totals table, histograms and stacks.
pub struct PlainText<W> {
    out: W,
    latency: bool,
    top: Option<usize>,
    intervals: bool,
    notes: Option<Notes>,
}

impl<W: Write> PlainText<W> {
    /// `latency`: latency columns; `top`: rows of the totals table (all
    /// when `None`); `intervals`: lines per interval too.
    pub fn new(out: W, latency: bool, top: Option<usize>, intervals: bool) -> Self {
        Self {
            out,
            latency,
            top,
            intervals,
            notes: None,
        }
    }

    /// Writes `notes` too (to their own writer).
    pub fn with_notes(mut self, notes: Notes) -> Self {
        self.notes = Some(notes);
        self
    }
}

impl<W: Write> Report for PlainText<W> {
    fn planned(&mut self, plan: &Plan) -> io::Result<()> {
        note(&mut self.notes, |n| n.planned(plan))
    }

    fn attached(&mut self, tracer: &Tracer) -> io::Result<()> {
        note(&mut self.notes, |n| n.attached(tracer))
    }

    fn event(&mut self, e: &Event, f: &Func) -> io::Result<()> {
        writeln!(self.out, "{}", output::event_line(e, f))
    }

    fn error_chain(&mut self, c: &ErrorChain) -> io::Result<()> {
        self.recorded_chain(c, SystemTime::now())
    }

    fn recorded_chain(&mut self, c: &ErrorChain, at: SystemTime) -> io::Result<()> {
        for l in output::stamped_chain_lines(c, &clock_at(at)) {
            writeln!(self.out, "{l}")?;
        }
        self.out.flush()
    }

    fn interval(&mut self, iv: &Interval<'_>) -> io::Result<()> {
        if self.intervals {
            for l in output::text_lines(&clock(), iv.rows, self.latency) {
                writeln!(self.out, "{l}")?;
            }
        }
        self.out.flush()
    }

    fn summary(&mut self, s: &Summary) -> io::Result<()> {
        let out = &mut self.out;
        writeln!(out, "\n{} functions called, totals:", s.functions.len())?;
        let max = self.top.unwrap_or(usize::MAX);
        for l in totals_table(&s.functions, s.elapsed_s, s.latency, max) {
            writeln!(out, "{l}")?;
        }
        if let Some(n) = s.injected {
            writeln!(out, "{n} calls made to fail")?;
        }
        if s.latency {
            for f in s.functions.iter().take(10) {
                writeln!(out, "\n{} latency:", f.name)?;
                for l in f.hist().map(output::hist_lines).unwrap_or_default() {
                    writeln!(out, "{l}")?;
                }
            }
        }
        if let Some(g) = &s.graph {
            writeln!(
                out,
                "\ncall graph (time from entry to exit, in traced calls too):"
            )?;
            for l in super::graph::lines(g) {
                writeln!(out, "{l}")?;
            }
        }
        if let Some(errors) = &s.errors {
            let n: u64 = errors.iter().map(|e| e.count).sum();
            writeln!(out, "\n{n} error chains:")?;
            if n > 0 {
                for l in output::error_totals_lines(errors) {
                    writeln!(out, "{l}")?;
                }
            }
        }
        if let Some(stacks) = &s.stacks {
            writeln!(out, "\nbusiest stacks:")?;
            for st in stacks {
                writeln!(out, "  {} x{} (pid {})", st.function, st.count, st.pid)?;
                for l in &st.frames {
                    writeln!(out, "    {l}")?;
                }
            }
        }
        note(&mut self.notes, |n| n.summary(s))
    }
}

/// The live table of a terminal, redrawn every interval; the summary as
/// [`PlainText`] has it.
pub struct LiveTable<W> {
    text: PlainText<W>,
    title: String,
}

impl<W: Write> LiveTable<W> {
    /// `top`: rows of the table (default: the terminal's height).
    pub fn new(out: W, latency: bool, top: Option<usize>) -> Self {
        Self {
            text: PlainText::new(out, latency, top, false),
            title: String::new(),
        }
    }

    /// Writes `notes` too (to their own writer).
    pub fn with_notes(mut self, notes: Notes) -> Self {
        self.text.notes = Some(notes);
        self
    }

    /// Starts the table's head line (`N functions, engine E, S s`) with
    /// `title`, e.g. `"mytool: "`.
    pub fn with_title(mut self, title: impl Into<String>) -> Self {
        self.title = title.into();
        self
    }
}

impl<W: Write> Report for LiveTable<W> {
    fn planned(&mut self, plan: &Plan) -> io::Result<()> {
        self.text.planned(plan)
    }

    fn attached(&mut self, tracer: &Tracer) -> io::Result<()> {
        self.text.attached(tracer)
    }

    fn event(&mut self, e: &Event, f: &Func) -> io::Result<()> {
        self.text.event(e, f)
    }

    fn error_chain(&mut self, c: &ErrorChain) -> io::Result<()> {
        self.text.error_chain(c)
    }

    fn recorded_chain(&mut self, c: &ErrorChain, at: SystemTime) -> io::Result<()> {
        self.text.recorded_chain(c, at)
    }

    fn interval(&mut self, iv: &Interval<'_>) -> io::Result<()> {
        let t = &mut self.text;
        // Home + clear screen, then the table.
        write!(t.out, "\x1b[H\x1b[2J")?;
        writeln!(
            t.out,
            "{}{} functions, engine {}, {:.0} s",
            self.title,
            iv.functions,
            iv.engine,
            iv.elapsed.as_secs_f64()
        )?;
        let max = t.top.unwrap_or_else(terminal_rows);
        for l in output::table(iv.rows, iv.secs, t.latency, max) {
            writeln!(t.out, "{l}")?;
        }
        t.out.flush()
    }

    fn summary(&mut self, s: &Summary) -> io::Result<()> {
        self.text.summary(s)
    }
}

/// Two reports as one: what a run reports goes to `first`, then to
/// `second` (an error of either is the tee's). Per-call events can be kept
/// from `first` ([`Tee::events_to_first`]): a `second` that needs them,
/// such as a timeline ([`super::export::chrome::ChromeTrace`]), may have
/// had them turned on for itself alone.
pub struct Tee<'a> {
    first: &'a mut dyn Report,
    second: &'a mut dyn Report,
    first_events: bool,
}

impl<'a> Tee<'a> {
    /// Everything to both.
    pub fn new(first: &'a mut dyn Report, second: &'a mut dyn Report) -> Self {
        Self {
            first,
            second,
            first_events: true,
        }
    }

    /// Whether `first` gets the per-call events too (it does by default).
    pub fn events_to_first(mut self, yes: bool) -> Self {
        self.first_events = yes;
        self
    }
}

impl Report for Tee<'_> {
    fn planned(&mut self, plan: &Plan) -> io::Result<()> {
        self.first.planned(plan)?;
        self.second.planned(plan)
    }

    fn attached(&mut self, tracer: &Tracer) -> io::Result<()> {
        self.first.attached(tracer)?;
        self.second.attached(tracer)
    }

    fn event(&mut self, e: &Event, f: &Func) -> io::Result<()> {
        if self.first_events {
            self.first.event(e, f)?;
        }
        self.second.event(e, f)
    }

    fn error_chain(&mut self, c: &ErrorChain) -> io::Result<()> {
        self.first.error_chain(c)?;
        self.second.error_chain(c)
    }

    fn recorded_chain(&mut self, c: &ErrorChain, at: SystemTime) -> io::Result<()> {
        self.first.recorded_chain(c, at)?;
        self.second.recorded_chain(c, at)
    }

    fn interval(&mut self, iv: &Interval<'_>) -> io::Result<()> {
        self.first.interval(iv)?;
        self.second.interval(iv)
    }

    fn turn(&mut self) -> io::Result<()> {
        self.first.turn()?;
        self.second.turn()
    }

    fn summary(&mut self, s: &Summary) -> io::Result<()> {
        self.first.summary(s)?;
        self.second.summary(s)
    }
}

/// Rows the terminal on standard output has room for (20 if unknown).
fn terminal_rows() -> usize {
    // SAFETY: an all-zero winsize is valid; TIOCGWINSZ fills it.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: see above.
    let r = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut ws) };
    if r == 0 && ws.ws_row > 4 {
        ws.ws_row as usize - 4
    } else {
        20
    }
}

/// The local time of day, `HH:MM:SS`.
fn clock() -> String {
    clock_at(SystemTime::now())
}

/// The local time of day of `t`, `HH:MM:SS`.
fn clock_at(t: SystemTime) -> String {
    let mut hms = local_time(t, false);
    hms.truncate("HH:MM:SS".len());
    hms
}

/// `t` in local time: `YYYY-MM-DD HH:MM:SS` with `date`, else the time of
/// day to the millisecond, `HH:MM:SS.mmm`.
pub(crate) fn local_time(t: SystemTime, date: bool) -> String {
    let since = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = libc::time_t::try_from(since.as_secs()).unwrap_or(libc::time_t::MAX);
    // SAFETY: an all-zero tm is valid; localtime_r writes into our local.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: see above.
    unsafe { libc::localtime_r(&secs, &mut tm) };
    let (h, m, s) = (tm.tm_hour, tm.tm_min, tm.tm_sec);
    if date {
        let (y, mo, d) = (tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday);
        format!("{y:04}-{mo:02}-{d:02} {h:02}:{m:02}:{s:02}")
    } else {
        format!("{h:02}:{m:02}:{s:02}.{:03}", since.subsec_millis())
    }
}

/// The final table: totals since attach, mean rate over `secs`; latency
/// columns when histograms were measured (P99< is the log2 bucket's bound).
pub fn totals_table(
    funcs: &[FunctionTotals],
    secs: f64,
    latency: bool,
    max_rows: usize,
) -> Vec<String> {
    let w = output::name_width(funcs.iter().map(|f| f.name.as_str()), max_rows);
    let mut head = format!("{:<w$} {:>12} {:>10}", "FUNCTION", "CALLS", "MEAN/s");
    let injected = funcs.iter().any(|f| f.injected.is_some());
    if injected {
        head.push_str(&format!(" {:>10}", "INJECTED"));
    }
    if latency {
        head.push_str(&format!(" {:>9} {:>9} {:>9}", "AVG", "P99<", "MAX"));
    }
    let mut out = vec![head];
    for r in funcs.iter().take(max_rows) {
        let mut line = format!(
            "{:<w$} {:>12} {:>10.1}",
            r.name,
            r.calls,
            r.calls as f64 / secs.max(1e-9)
        );
        if injected {
            line.push_str(&format!(" {:>10}", r.injected.unwrap_or(0)));
        }
        if latency {
            let lat = r.latency_ns.as_ref();
            let a = lat.map_or("-".into(), |l| output::fmt_ns(l.avg));
            let m = lat.map_or("-".into(), |l| output::fmt_ns(l.max));
            let p99 = r
                .hist()
                .and_then(|h| output::percentile(h, 0.99))
                .map_or("-".into(), output::fmt_ns);
            line.push_str(&format!(" {a:>9} {p99:>9} {m:>9}"));
        }
        out.push(line);
    }
    if funcs.len() > max_rows {
        out.push(format!(
            "... {} more functions called",
            funcs.len() - max_rows
        ));
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::trace::engine::ExitSide;
    use crate::trace::events::FuncStats;
    use crate::trace::notes::{Detail, Hint, Notes};
    use crate::trace::summary::{AttachBreakdown, FunctionTotals, Lost};

    /// A run's summary: vfs_read called 4 times, with histograms.
    pub(crate) fn summary() -> Summary {
        let s = FuncStats {
            calls: 4,
            lat_count: 4,
            lat_sum_ns: 40,
            lat_max_ns: 12,
            injected: 0,
            ..Default::default()
        };
        let mut h = [0u64; 32];
        h[3] = 4;
        Summary {
            kind: "summary",
            engine: EngineKind::KprobeMulti,
            exit_side: ExitSide::Session,
            functions_attached: 2,
            functions_dropped: 0,
            skipped: vec![],
            links: 1,
            select_ms: 1.0,
            prepare_ms: 2.0,
            attach_ms: 3.0,
            detach_ms: 4.0,
            attach_breakdown: AttachBreakdown {
                program_loads: 1,
                load_ms: 1.5,
                links: 1,
                link_functions: 2,
                link_ms: 1.0,
                refused_tries: 0,
                refused_ms: 0.0,
                split: vec![],
            },
            elapsed_s: 2.0,
            events: 0,
            injected: None,
            errors: None,
            null_only_chains_left_out: None,
            graph: None,
            lost: Lost::default(),
            preemptible_reads: None,
            filter: None,
            functions: vec![FunctionTotals::new("vfs_read", &s, Some(&h))],
            stacks: None,
            user_stacks: None,
            latency: true,
        }
    }

    #[test]
    fn intervals_in_each_form() {
        let st = |calls| FuncStats {
            calls,
            ..Default::default()
        };
        let rows = [Row {
            index: 0,
            name: "vfs_read".into(),
            interval: st(3),
            total: st(10),
        }];
        let iv = Interval {
            elapsed: Duration::from_secs(2),
            secs: 1.0,
            rows: &rows,
            functions: 7,
            engine: EngineKind::Global,
        };
        let text = |r: &mut dyn FnMut(&mut Vec<u8>)| {
            let mut out = Vec::new();
            r(&mut out);
            String::from_utf8(out).unwrap()
        };
        let json = text(&mut |o| JsonLines::new(o, true).interval(&iv).unwrap());
        assert_eq!(
            json,
            "{\"elapsed_s\":2.0,\"functions\":[{\"calls\":3,\"name\":\"vfs_read\",\"total\":10}],\
             \"interval_s\":1.0,\"type\":\"interval\"}\n"
        );
        // With per-call events (--args), no interval lines in either form.
        assert_eq!(
            text(&mut |o| JsonLines::new(o, false).interval(&iv).unwrap()),
            ""
        );
        assert_eq!(
            text(&mut |o| PlainText::new(o, false, None, false).interval(&iv).unwrap()),
            ""
        );
        let plain = text(&mut |o| PlainText::new(o, false, None, true).interval(&iv).unwrap());
        assert!(plain.ends_with(" vfs_read 3 total 10\n"), "{plain}");
        let live = text(&mut |o| {
            LiveTable::new(o, false, Some(5))
                .with_title("tool: ")
                .interval(&iv)
                .unwrap();
        });
        let lines: Vec<_> = live.lines().collect();
        assert_eq!(
            lines[0],
            "\x1b[H\x1b[2Jtool: 7 functions, engine global, 2 s"
        );
        let untitled = text(&mut |o| LiveTable::new(o, false, Some(5)).interval(&iv).unwrap());
        assert!(untitled.starts_with("\x1b[H\x1b[2J7 functions, engine global, 2 s\n"));
        assert!(lines[1].starts_with("FUNCTION") && lines[2].starts_with("vfs_read"));
    }

    #[test]
    fn totals_table_has_latency_columns() {
        let s = FuncStats {
            calls: 12,
            lat_count: 2,
            lat_sum_ns: 3000,
            lat_max_ns: 2000,
            injected: 0,
            ..Default::default()
        };
        let mut h = [0u64; 32];
        h[10] = 2;
        let t = totals_table(
            &[FunctionTotals::new("vfs_read", &s, Some(&h))],
            2.0,
            true,
            10,
        );
        assert!(t[0].contains("P99<"), "{}", t[0]);
        assert!(
            t[1].starts_with("vfs_read") && t[1].contains(" 12 "),
            "{}",
            t[1]
        );
        assert!(t[1].ends_with("1.5us     2.0us     2.0us"), "{}", t[1]);
    }

    #[test]
    fn json_summary_has_sorted_keys() {
        let mut out = Vec::new();
        JsonLines::new(&mut out, true).summary(&summary()).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.starts_with(r#"{"attach_breakdown":{"link_functions":2,"#),
            "{text}"
        );
        assert!(text.contains(r#""type":"summary""#), "{text}");
        assert!(!text.contains("command_exit"), "{text}");
        assert!(text.ends_with("}\n"), "{text}");
    }

    /// The summary as `bpfmux trace --json` built it before it was a type.
    #[test]
    fn json_summary_is_what_it_was() {
        use serde_json::json;
        let mut s = summary();
        s.skipped = vec![crate::trace::summary::Skipped {
            function: "m:f".into(),
            reason: "refused at attach: EINVAL".into(),
        }];
        s.stacks = Some(vec![crate::trace::summary::StackSummary {
            function: "vfs_read".into(),
            count: 9,
            pid: 42,
            frames: vec!["vfs_read+0x4".into(), "--".into(), "0x1234".into()],
        }]);
        let mut h = [0u64; 32];
        h[3] = 4;
        let old = json!({
            "type": "summary",
            "engine": s.engine,
            "exit_side": s.exit_side,
            "functions_attached": 2,
            "functions_dropped": 0,
            "skipped": [{"function": "m:f", "reason": "refused at attach: EINVAL"}],
            "links": 1,
            "select_ms": 1.0,
            "prepare_ms": 2.0,
            "attach_ms": 3.0,
            "detach_ms": 4.0,
            "attach_breakdown": {
                "program_loads": 1,
                "load_ms": 1.5,
                "links": 1,
                "link_functions": 2,
                "link_ms": 1.0,
                "refused_tries": 0,
                "refused_ms": 0.0,
                "split": Vec::<String>::new(),
            },
            "elapsed_s": 2.0,
            "events": 0,
            "lost": {"events": 0, "chains": 0, "graph": 0, "stacks": 0, "nesting": 0,
                     "recursion_misses": 0},
            "functions": [{
                "name": "vfs_read",
                "calls": 4,
                "latency_ns": {
                    "count": 4, "avg": 10, "max": 12,
                    "p50": 15, "p99": 15, "log2_hist": h.to_vec(),
                },
            }],
            "stacks": [{
                "function": "vfs_read", "count": 9, "pid": 42,
                "frames": ["vfs_read+0x4", "--", "0x1234"],
            }],
            "command_exit": 3,
        });
        // The caller's own field (here a command's exit status) sorted in.
        let mut out = Vec::new();
        JsonLines::new(&mut out, true)
            .summary_with(&s, [("command_exit".to_string(), json!(3))])
            .unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), format!("{old}\n"));
    }

    fn openat_chain() -> ErrorChain {
        use crate::trace::errors::{ChainCall, RetValue};
        let call = |f: &str, ret: Option<i64>, d: u64| ChainCall {
            function: f.into(),
            ret: ret.map(RetValue::Signed),
            error: ret.map(|_| "ENOENT".into()),
            duration_ns: ret.map(|_| d),
        };
        ErrorChain {
            kind: "error",
            ts_ns: 5,
            pid: 42,
            tid: 43,
            comm: "cat".into(),
            function: "path_openat".into(),
            error: "ENOENT".into(),
            errno: Some(2),
            calls: vec![
                call("__x64_sys_openat", None, 0),
                call("do_sys_openat2", Some(-2), 38_200),
                call("path_openat", Some(-2), 20_100),
            ],
            overflow: 1,
            kernel_stack: vec!["do_sys_openat2+0x7e".into()],
            user_stack: vec![],
        }
    }

    #[test]
    fn error_chains_as_text_and_json() {
        let mut out = Vec::new();
        PlainText::new(&mut out, false, None, false)
            .error_chain(&openat_chain())
            .unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<_> = text.lines().collect();
        // The head line starts with the time of day.
        assert!(
            lines[0].ends_with(
                " cat[42/43] ENOENT in path_openat, 3 calls \
                 (1 deeper calls not kept: nesting over 32)"
            ),
            "{text}"
        );
        assert_eq!(
            &lines[1..],
            [
                "  __x64_sys_openat                  ?                      ?",
                "    do_sys_openat2                 -2 ENOENT          38.2us",
                "      path_openat                  -2 ENOENT          20.1us",
                "  kernel stack:",
                "    do_sys_openat2+0x7e",
            ]
        );
        let mut out = Vec::new();
        JsonLines::new(&mut out, false)
            .error_chain(&openat_chain())
            .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "{\"calls\":[{\"function\":\"__x64_sys_openat\"},\
             {\"duration_ns\":38200,\"error\":\"ENOENT\",\"function\":\"do_sys_openat2\",\"ret\":-2},\
             {\"duration_ns\":20100,\"error\":\"ENOENT\",\"function\":\"path_openat\",\"ret\":-2}],\
             \"comm\":\"cat\",\"errno\":2,\"error\":\"ENOENT\",\"function\":\"path_openat\",\
             \"kernel_stack\":[\"do_sys_openat2+0x7e\"],\"overflow\":1,\"pid\":42,\"tid\":43,\
             \"ts_ns\":5,\"type\":\"error\",\"user_stack\":[]}\n"
        );
    }

    #[test]
    fn summary_counts_chains_and_always_says_what_was_lost() {
        use crate::trace::errors::ErrorTally;
        let mut tally = ErrorTally::default();
        tally.add(&openat_chain());
        tally.add(&openat_chain());
        let mut s = summary();
        s.errors = Some(tally.totals());
        let mut out = Vec::new();
        let said = Said::default();
        PlainText::new(&mut out, false, None, false)
            .with_notes(Notes::new(said.clone(), "tool: ", Detail::Brief))
            .summary(&s)
            .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.ends_with(
                "\n2 error chains:\n\
                 ERROR            CHAINS  FAILING FUNCTIONS\n\
                 ENOENT (2)            2  path_openat 2\n"
            ),
            "{text}"
        );
        assert_eq!(
            said.text(),
            "tool: engine kprobe-multi: attach 3.0 ms, detach 4.0 ms for 2 functions\n\
             tool: nothing lost (ring buffers, stacks, nesting, recursion guard)\n"
        );
        s.lost.chains = 3;
        s.lost.recursion_misses = 2;
        let said = Said::default();
        JsonLines::new(Vec::new(), false)
            .with_notes(Notes::new(said.clone(), "", Detail::Brief))
            .summary(&s)
            .unwrap();
        assert_eq!(
            said.text().lines().nth(1),
            Some(
                "not recorded: 0 events, 3 error chains (ring buffers full), \
                 0 call graph paths (map full), 0 stacks, 0 calls too deeply nested; 2 calls \
                 skipped by the kernel's recursion guard"
            )
        );
        assert!(
            said.text()
                .lines()
                .nth(2)
                .is_some_and(|l| l.contains("before any process filter")),
            "{}",
            said.text()
        );
    }

    #[test]
    fn user_stack_totals_in_notes_and_json() {
        use crate::normalize::capture::CaptureStats;
        use crate::trace::stacks::UserStackTotals;
        let mut s = summary();
        s.user_stacks = Some(UserStackTotals {
            during_run: true,
            stacks: 5,
            at_end: 1,
            addresses: CaptureStats {
                normalized: 4,
                cache_hits: 12,
                failures: 0,
                invalidations: 1,
                by_build_id: 0,
            },
            hit_rate: Some(0.75),
            scans: 7,
            capture_ms: 1.25,
        });
        let notes = |s: &Summary, detail| {
            let said = Said::default();
            JsonLines::new(Vec::new(), false)
                .with_notes(Notes::new(said.clone(), "tool: ", detail))
                .summary(s)
                .unwrap();
            said.text()
        };
        // Nothing to say at the brief level when every address was normalized.
        assert_eq!(notes(&s, Detail::Brief).lines().count(), 2);
        assert_eq!(
            notes(&s, Detail::Verbose).lines().nth(2),
            Some(
                "  user stacks: 5 normalized as captured (7 scans, 1.2 ms; 1 only at the end); \
                 addresses: 4 asked of the kernel, 12 from the cache (75 % hits), 0 not \
                 normalized (0 of them placed by build ID); 1 exec dropped cached mappings"
            )
        );
        // Those placed by build ID are not lost.
        for (by_build_id, said) in [
            (
                0,
                "3 addresses not normalized, shown as addresses (the process was gone before \
                 they were read)",
            ),
            (
                2,
                "1 address not normalized, shown as addresses (the process was gone before \
                 it was read)",
            ),
        ] {
            if let Some(u) = s.user_stacks.as_mut() {
                u.addresses.failures = 3;
                u.addresses.by_build_id = by_build_id;
            }
            let want = format!("tool: user stacks: {said}");
            assert_eq!(notes(&s, Detail::Brief).lines().nth(2), Some(want.as_str()));
        }
        let mut out = Vec::new();
        JsonLines::new(&mut out, false).summary(&s).unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            v["user_stacks"],
            serde_json::json!({
                "during_run": true, "stacks": 5, "at_end": 1, "normalized": 4,
                "cache_hits": 12, "failures": 3, "invalidations": 1, "by_build_id": 2,
                "hit_rate": 0.75,
                "scans": 7, "capture_ms": 1.25,
            })
        );
    }

    #[test]
    fn summary_counts_null_only_chains_left_out() {
        use crate::trace::errors::{ChainRecord, ErrorTally, NullReturns, RawFrame, RetClass};
        // Function 0 returns long, 1 a pointer: a lone NULL of 1 twice, a
        // NULL of 1 under -ESRCH of 0 once.
        let class = |i: usize| [RetClass::Long, RetClass::Ptr].get(i).copied();
        let frame = |func, ret: i64| RawFrame {
            func,
            done: true,
            ret: ret as u64,
            duration_ns: 1,
        };
        let record = |frames: Vec<RawFrame>| ChainRecord {
            ts_ns: 0,
            tgid: 1,
            tid: 1,
            failed: frames.len() - 1,
            overflow: 0,
            kstack: None,
            ustack: None,
            comm: "t".into(),
            frames,
        };
        let records = [
            record(vec![frame(1, 0)]),
            record(vec![frame(0, -3), frame(1, 0)]),
            record(vec![frame(1, 0)]),
        ];
        let mut tally = ErrorTally::default();
        let kept = records
            .iter()
            .filter(|r| tally.admit(NullReturns::Explained, r, class))
            .count();
        assert_eq!((kept, tally.null_only_left_out()), (1, 2));
        let mut s = summary();
        s.errors = Some(tally.totals());
        s.null_only_chains_left_out = Some(tally.null_only_left_out());
        let hints: crate::trace::Hints = |h| (h == Hint::AllNulls).then_some("show them");
        let said = Said::default();
        let mut out = Vec::new();
        JsonLines::new(&mut out, false)
            .with_notes(Notes::new(said.clone(), "t: ", Detail::Brief).with_hints(hints))
            .summary(&s)
            .unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["null_only_chains_left_out"], 2);
        assert_eq!(
            said.text().lines().nth(2),
            Some(
                "t: left out 2 error chains that only ended in NULL (no traced caller failed \
                 with an errno) (show them)"
            )
        );
        // None left out: nothing said; without error chains, no field.
        s.null_only_chains_left_out = Some(0);
        let said = Said::default();
        PlainText::new(Vec::new(), false, None, false)
            .with_notes(Notes::new(said.clone(), "t: ", Detail::Brief))
            .summary(&s)
            .unwrap();
        assert_eq!(said.text().lines().count(), 2, "{}", said.text());
        s.null_only_chains_left_out = None;
        let mut out = Vec::new();
        JsonLines::new(&mut out, false).summary(&s).unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert!(v.get("null_only_chains_left_out").is_none(), "{v}");
    }

    /// A writer whose text the test reads after the report wrote it.
    #[derive(Clone, Default)]
    struct Said(std::rc::Rc<std::cell::RefCell<Vec<u8>>>);

    impl Write for Said {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.borrow_mut().extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Said {
        fn text(&self) -> String {
            String::from_utf8(self.0.borrow().clone()).unwrap()
        }
    }

    #[test]
    fn notes_of_a_selection_take_the_callers_hints() {
        use crate::trace::{DropReason, Dropped, Scope, Selection};
        let sel = Selection {
            funcs: vec![],
            dropped: (0..25)
                .map(|i| Dropped {
                    scope: Scope::Vmlinux,
                    name: format!("f{i}"),
                    reason: DropReason::Ambiguous(2),
                    exact: false,
                })
                .collect(),
            read_listings: false,
            phases: vec![("btf", Duration::from_millis(3))],
            listing_times: [("a", Duration::ZERO), ("b", Duration::ZERO)],
        };
        let hints: crate::trace::Hints = |h| match h {
            Hint::DropReasons => Some("say more"),
            Hint::ListAll => Some("list all"),
            Hint::Stop | Hint::AllNulls => None,
        };
        let said = Said::default();
        Notes::new(said.clone(), "t: ", Detail::Brief)
            .with_hints(hints)
            .selected(&sel, Duration::from_millis(5))
            .unwrap();
        assert_eq!(
            said.text(),
            "t: 0 functions selected, 25 dropped (say more)\n"
        );
        let said = Said::default();
        Notes::new(said.clone(), "t: ", Detail::Verbose)
            .with_hints(hints)
            .selected(&sel, Duration::from_millis(5))
            .unwrap();
        let text = said.text();
        let lines: Vec<_> = text.lines().collect();
        assert_eq!(lines[0], "t: 0 functions selected, 25 dropped");
        assert_eq!(
            lines[1],
            "  dropped 25: name shared by several kernel functions"
        );
        assert_eq!(lines[22], "    ... 5 more (list all)");
        assert_eq!(
            lines[23],
            "  selected in 5.0 ms (exact names: BTF lookup only; ms: btf 3)"
        );
        // Without hints, nothing in their places.
        let said = Said::default();
        Notes::new(said.clone(), "", Detail::Brief)
            .selected(&sel, Duration::ZERO)
            .unwrap();
        assert_eq!(said.text(), "0 functions selected, 25 dropped\n");
    }

    #[test]
    fn text_summary_has_totals_and_histograms() {
        let mut out = Vec::new();
        PlainText::new(&mut out, true, None, false)
            .summary(&summary())
            .unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<_> = text.lines().collect();
        assert_eq!(lines[1], "1 functions called, totals:");
        assert!(lines[2].contains("P99<"), "{text}");
        assert!(lines[3].starts_with("vfs_read"), "{text}");
        assert_eq!(lines[5], "vfs_read latency:");
        assert!(lines[6].contains("|@@@@"), "{text}");
    }
}
