//! What a run says about itself besides its data: the functions and engine
//! chosen, the attach, the selection, and at the end the attach and detach
//! times and what could not be recorded. Lines for a person, written to a
//! writer of their own (a tool sends them to standard error, apart from the
//! data on standard output).
//!
//! The library's lines name no tool: the caller gives the prefix of its
//! head lines ([`Notes::new`]) and, through [`Hint`], its own words for how
//! to see more or how to stop (a command-line flag, a key to press).

use std::io::{self, Write};
use std::time::Duration;

use super::engine::ExitSide;
use super::filter::CompiledFilter;
use super::select::{DropReason, Selection};
use super::stacks::UserStackTotals;
use super::summary::Summary;
use super::{Plan, SelfPathOutcome, Tracer};

/// How much the notes say.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Detail {
    /// Counts only, and warnings about functions asked for by name.
    #[default]
    Brief,
    /// Why engines were passed over, drops by reason (the first of them
    /// listed), where the selection and the attach spent their time.
    Verbose,
    /// As `Verbose`, with every dropped and skipped function listed.
    Full,
}

impl Detail {
    /// 0 → `Brief`, 1 → `Verbose`, more → `Full` (the count of a
    /// repeatable option).
    pub fn from_level(level: u8) -> Self {
        match level {
            0 => Detail::Brief,
            1 => Detail::Verbose,
            _ => Detail::Full,
        }
    }
}

/// A place in the notes where the caller may add its own words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hint {
    /// After "N dropped" when the reasons are not shown ([`Detail::Brief`]):
    /// how to see them.
    DropReasons,
    /// After "... N more" when not every dropped or skipped function is
    /// listed: how to list them all.
    ListAll,
    /// After the attach line: how to stop the run.
    Stop,
    /// After the count of error chains left out because they only ended in
    /// NULL ([`super::errors::NullReturns::Explained`]): how to see them.
    AllNulls,
}

/// The caller's words for each [`Hint`]; `None` leaves the place empty.
pub type Hints = fn(Hint) -> Option<&'static str>;

fn no_hints(_: Hint) -> Option<&'static str> {
    None
}

/// Writes a run's notes: [`Notes::planned`], [`Notes::attached`],
/// [`Notes::selected`], [`Notes::summary`]. The three report forms take one
/// with `with_notes` and write it at the matching [`super::Report`] events.
pub struct Notes {
    out: Box<dyn Write>,
    prefix: String,
    detail: Detail,
    hints: Hints,
}

impl Notes {
    /// Notes to `out`, each head line starting with `prefix` (e.g.
    /// `"mytool: "`; indented detail lines have none).
    pub fn new(out: impl Write + 'static, prefix: impl Into<String>, detail: Detail) -> Self {
        Self {
            out: Box::new(out),
            prefix: prefix.into(),
            detail,
            hints: no_hints,
        }
    }

    /// The caller's words at each [`Hint`].
    pub fn with_hints(mut self, hints: Hints) -> Self {
        self.hints = hints;
        self
    }

    fn write(&mut self, lines: Vec<String>) -> io::Result<()> {
        for l in lines {
            writeln!(self.out, "{l}")?;
        }
        Ok(())
    }

    /// The functions and the engine are chosen: how many, which engine;
    /// beyond [`Detail::Brief`], why better engines were not used, how exits
    /// are seen, what was dropped, where the time went.
    pub fn planned(&mut self, plan: &Plan) -> io::Result<()> {
        let lines = self.plan_lines(plan);
        self.write(lines)
    }

    /// Everything is attached: a warning per skipped function (the first
    /// 10, all with [`Detail::Full`]), the attach; beyond [`Detail::Brief`],
    /// where its time went.
    pub fn attached(&mut self, tracer: &Tracer) -> io::Result<()> {
        let lines = self.attach_lines(tracer);
        self.write(lines)
    }

    /// A selection made on its own (no engine, nothing attached), which
    /// took `took`: how many functions, how many dropped; beyond
    /// [`Detail::Brief`], the drops and where the time went.
    pub fn selected(&mut self, sel: &Selection, took: Duration) -> io::Result<()> {
        let (k, d) = (sel.funcs.len(), sel.dropped.len());
        let why = match self.hint(Hint::DropReasons) {
            Some(h) if self.detail == Detail::Brief && d > 0 => format!(" ({h})"),
            _ => String::new(),
        };
        let mut lines = vec![format!(
            "{}{k} functions selected, {d} dropped{why}",
            self.prefix
        )];
        if self.detail > Detail::Brief {
            lines.extend(self.drop_lines(sel));
            lines.extend(select_time_lines(sel, took));
        }
        self.write(lines)
    }

    /// The run is over: attach and detach times, what could not be
    /// recorded (said also when nothing was lost), how many error chains
    /// were left out as NULL-only (when any were), and how many user stack
    /// addresses could not be normalized (when any); beyond
    /// [`Detail::Brief`], how user stacks were normalized.
    pub fn summary(&mut self, s: &Summary) -> io::Result<()> {
        let p = &self.prefix;
        let mut lines = vec![format!(
            "{p}engine {}: attach {:.1} ms, detach {:.1} ms for {} functions",
            s.engine, s.attach_ms, s.detach_ms, s.functions_attached
        )];
        let l = &s.lost;
        lines.push(if l.any() {
            format!(
                "{p}not recorded: {} events, {} error chains (ring buffers full), \
                 {} call graph paths (map full), {} stacks, {} calls too deeply nested; {} \
                 calls skipped by the kernel's recursion guard",
                l.events, l.chains, l.graph, l.stacks, l.nesting, l.recursion_misses
            )
        } else {
            format!("{p}nothing lost (ring buffers, stacks, nesting, recursion guard)")
        });
        if l.recursion_misses > 0 {
            lines.push(format!(
                "{p}the guard turns calls away before a program runs, so before any process \
                 filter: they may be calls of processes this run does not trace (one made \
                 on a CPU where a program of the run was preempted is turned away too)"
            ));
        }
        if let Some(why) = s
            .preemptible_reads
            .as_deref()
            .filter(|_| l.recursion_misses > 0)
        {
            lines.push(format!(
                "{p}some of those calls may have been skipped while a map read of bpfmux's \
                 was preempted on their CPU ({why})"
            ));
        }
        if let Some(f) = &s.filter {
            lines.push(format!(
                "{p}filter `{}` passed {} of {} calls",
                f.expression, f.passed, f.seen
            ));
        }
        if let Some(n) = s.null_only_chains_left_out.filter(|&n| n > 0) {
            lines.push(format!(
                "{p}left out {n} error chain{} that only ended in NULL (no traced caller \
                 failed with an errno){}",
                if n == 1 { "" } else { "s" },
                self.hint_suffix(Hint::AllNulls)
            ));
        }
        if let Some(u) = &s.user_stacks {
            lines.extend(self.user_stack_lines(u));
        }
        self.write(lines)
    }

    fn user_stack_lines(&self, u: &UserStackTotals) -> Vec<String> {
        let a = &u.addresses;
        let mut out = Vec::new();
        // Addresses placed from the build IDs the kernel recorded are not lost.
        let lost = a.failures.saturating_sub(a.by_build_id);
        if lost > 0 {
            out.push(format!(
                "{}user stacks: {} address{} not normalized, shown as addresses (the process \
                 was gone before {} read)",
                self.prefix,
                lost,
                if lost == 1 { "" } else { "es" },
                if lost == 1 { "it was" } else { "they were" },
            ));
        }
        if self.detail > Detail::Brief {
            let when = if u.during_run {
                format!(
                    "as captured ({} scans, {:.1} ms; {} only at the end)",
                    u.scans, u.capture_ms, u.at_end
                )
            } else {
                "at the end".to_string()
            };
            let rate = u
                .hit_rate
                .map_or(String::new(), |r| format!(" ({:.0} % hits)", r * 100.0));
            out.push(format!(
                "  user stacks: {} normalized {when}; addresses: {} asked of the kernel, {} \
                 from the cache{rate}, {} not normalized ({} of them placed by build ID); {} \
                 exec{} dropped cached mappings",
                u.stacks,
                a.normalized,
                a.cache_hits,
                a.failures,
                a.by_build_id,
                a.invalidations,
                if a.invalidations == 1 { "" } else { "s" },
            ));
        }
        out
    }

    fn hint(&self, h: Hint) -> Option<&'static str> {
        (self.hints)(h)
    }

    /// ` (words)` after a line, when the caller has words for `h`.
    fn hint_suffix(&self, h: Hint) -> String {
        self.hint(h).map_or(String::new(), |w| format!(" ({w})"))
    }

    fn plan_lines(&self, plan: &Plan) -> Vec<String> {
        let (sel, n) = (&plan.selection, plan.selection.funcs.len());
        let dropped = match (sel.dropped.len(), self.detail) {
            (0, _) => String::new(),
            (k, Detail::Brief) => format!(", {k} dropped{}", self.hint_suffix(Hint::DropReasons)),
            (k, _) => format!(", {k} dropped"),
        };
        let s = if n == 1 { "" } else { "s" };
        let mut out = vec![format!(
            "{}{n} function{s} with engine {}{dropped}",
            self.prefix, plan.engine
        )];
        if let Some(f) = &plan.filter {
            out.extend(self.filter_lines(f, sel));
        }
        if self.detail == Detail::Brief {
            return out;
        }
        for (k, why) in &plan.skipped_engines {
            out.push(format!("  engine {k} not used: {why}"));
        }
        match plan.exit {
            ExitSide::None => {}
            ExitSide::Session => out
                .push("  exits: one session program (entry and exit paired by the kernel)".into()),
            ExitSide::Pair => out.push(
                "  exits: separate entry and exit programs (paired by per-thread call stacks)"
                    .into(),
            ),
        }
        out.extend(self.drop_lines(sel));
        out.extend(select_time_lines(sel, plan.select_time));
        out
    }

    fn attach_lines(&self, t: &Tracer) -> Vec<String> {
        let p = &self.prefix;
        let warnings: Vec<_> = t.warnings().collect();
        let shown = if self.detail == Detail::Full {
            usize::MAX
        } else {
            10
        };
        let mut out: Vec<String> = warnings
            .iter()
            .take(shown)
            .map(|d| format!("{p}warning: skipped {}: {}", d.display_name(), d.reason))
            .collect();
        if warnings.len() > shown {
            out.push(format!(
                "{p}warning: ... {} more skipped{}",
                warnings.len() - shown,
                self.hint_suffix(Hint::ListAll)
            ));
        }
        let links = t.nr_links();
        let stop = self
            .hint(Hint::Stop)
            .map_or(String::new(), |w| format!("; {w}"));
        out.push(format!(
            "{p}attached {} functions in {:.1} ms ({links} link{}, engine {}){stop}",
            t.nr_attached(),
            t.attach_time.as_secs_f64() * 1e3,
            if links == 1 { "" } else { "s" },
            t.engine
        ));
        match &t.self_path {
            SelfPathOutcome::Failed(why) => out.push(format!(
                "{p}warning: the tracer's own path is unknown ({why}): glob matches it runs \
                 stay selected, and the recursion guard turns their calls from it away"
            )),
            SelfPathOutcome::Derived { path, left_out } if self.detail > Detail::Brief => {
                out.push(format!(
                    "{p}tracer's own path: {} functions from its programs and trampoline \
                     ({} scanned, {:.1} ms), {left_out} glob matches left out",
                    path.len(),
                    path.scanned,
                    path.time.as_secs_f64() * 1e3
                ));
                let on_path = t
                    .selection
                    .dropped
                    .iter()
                    .filter(|d| matches!(d.reason, DropReason::SelfPath(_)));
                for d in on_path.clone().take(shown) {
                    out.push(format!("{p}  left out {}: {}", d.display_name(), d.reason));
                }
                if *left_out > shown {
                    out.push(format!(
                        "{p}  ... {} more left out{}",
                        left_out - shown,
                        self.hint_suffix(Hint::ListAll)
                    ));
                }
            }
            _ => {}
        }
        if self.detail > Detail::Brief {
            out.extend(attach_time_lines(t));
        }
        out
    }

    /// The functions the filter never passes (the first 10, all with
    /// [`Detail::Full`]); beyond [`Detail::Brief`], its programs.
    fn filter_lines(&self, f: &CompiledFilter, sel: &Selection) -> Vec<String> {
        let mut out = Vec::new();
        let lacking = f.lacking();
        if !lacking.is_empty() {
            let shown = if self.detail == Detail::Full {
                usize::MAX
            } else {
                10
            };
            let names: Vec<String> = lacking
                .iter()
                .take(shown)
                .map(|l| {
                    let name = sel
                        .funcs
                        .get(l.index)
                        .map_or_else(String::new, |f| f.display_name());
                    format!("{name} ({})", l.why)
                })
                .collect();
            let more = match lacking.len().saturating_sub(shown) {
                0 => String::new(),
                k => format!(", ... {k} more{}", self.hint_suffix(Hint::ListAll)),
            };
            out.push(format!(
                "{}warning: the filter never passes {} function{} lacking what it reads: {}{more}",
                self.prefix,
                lacking.len(),
                if lacking.len() == 1 { "" } else { "s" },
                names.join(", ")
            ));
        }
        if self.detail > Detail::Brief {
            let (entry, exit) = f.listing();
            let side = |ops: Vec<String>| {
                if ops.is_empty() {
                    "-".to_string()
                } else {
                    ops.join("; ")
                }
            };
            out.push(format!(
                "  filter {}: at entry {}; at exit {}",
                f.text(),
                side(entry),
                side(exit)
            ));
        }
        out
    }

    /// Drop counts by reason, then the dropped functions (the first 20, all
    /// with [`Detail::Full`]).
    fn drop_lines(&self, sel: &Selection) -> Vec<String> {
        let mut out = Vec::new();
        if sel.dropped.is_empty() {
            return out;
        }
        for (why, k) in sel.drop_summary() {
            out.push(format!("  dropped {k}: {why}"));
        }
        let limit = if self.detail == Detail::Full {
            usize::MAX
        } else {
            20
        };
        for d in sel.dropped.iter().take(limit) {
            out.push(format!("    {}:{}: {}", d.scope, d.name, d.reason));
        }
        if sel.dropped.len() > limit {
            out.push(format!(
                "    ... {} more{}",
                sel.dropped.len() - limit,
                self.hint_suffix(Hint::ListAll)
            ));
        }
        out
    }
}

/// How long the selection took (`total`) and where the time went.
fn select_time_lines(sel: &Selection, total: Duration) -> Vec<String> {
    let ms = |(name, d): &(&str, Duration)| format!("{name} {:.0}", d.as_secs_f64() * 1e3);
    let phases: Vec<String> = sel.phases.iter().map(ms).collect();
    let mut out = vec![format!(
        "  selected in {:.1} ms ({}; ms: {})",
        total.as_secs_f64() * 1e3,
        if sel.read_listings {
            "BTF + available_filter_functions + kallsyms"
        } else {
            "exact names: BTF lookup only"
        },
        phases.join(", ")
    )];
    if sel.read_listings {
        let reads: Vec<String> = sel.listing_times.iter().map(ms).collect();
        out.push(format!(
            "  meanwhile, on other threads (ms): {}",
            reads.join(", ")
        ));
    }
    out
}

/// Where the attach time went, the kernel's share apart from ours.
fn attach_time_lines(t: &Tracer) -> Vec<String> {
    let b = &t.breakdown;
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let plural = |n: usize, one: &'static str, many: &'static str| if n == 1 { one } else { many };
    let mut out = vec![format!(
        "  attach: maps {:.0} ms; {} program load{} {:.0} ms; {} link{} over {} functions {:.0} ms",
        ms(t.prepare_time),
        b.loads,
        plural(b.loads, "", "s"),
        ms(b.load_time),
        b.links,
        plural(b.links, "", "s"),
        b.link_funcs,
        ms(b.link_time),
    )];
    if b.refused_tries > 0 {
        out.push(format!(
            "  attach: {} link tr{} the kernel refused {:.0} ms",
            b.refused_tries,
            plural(b.refused_tries, "y", "ies"),
            ms(b.refused_time)
        ));
    }
    out.extend(b.split.iter().map(|why| format!("  links: {why}")));
    out
}
