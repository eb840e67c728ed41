//! The end of a trace run as data: totals per function, times, losses and
//! the busiest stacks symbolized — what [`super::JsonLines`] writes last.

use serde::{Deserialize, Serialize};

use super::engine::{EngineKind, ExitSide};
use super::errors::ErrorTotals;
use super::events::FuncStats;
use super::graph::GraphNode;
use super::output::percentile;
use super::stacks::{frames_text, Stack, UserStackTotals};

/// How many of the busiest stacks the summary symbolizes.
pub const TOP_STACKS: usize = 10;

pub(crate) use super::ms;

/// The end of a run: what [`super::JsonLines`] writes last, field for field.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Summary {
    /// Always `"summary"`.
    #[serde(rename = "type", skip_deserializing, default = "summary_kind")]
    pub kind: &'static str,
    /// The engine that attached the functions.
    pub engine: EngineKind,
    /// How it saw exits.
    pub exit_side: ExitSide,
    /// Functions attached.
    pub functions_attached: usize,
    /// Dropped by the selection or refused by the kernel at attach.
    pub functions_dropped: usize,
    /// The drops worth a warning (see [`super::Tracer::warnings`]).
    pub skipped: Vec<Skipped>,
    /// Links the kernel made.
    pub links: usize,
    /// Selecting the functions.
    pub select_ms: f64,
    /// Creating the maps, before any program load.
    pub prepare_ms: f64,
    /// Loading programs and creating links.
    pub attach_ms: f64,
    /// Detaching.
    pub detach_ms: f64,
    /// Where `attach_ms` went.
    pub attach_breakdown: AttachBreakdown,
    /// Length of the traced window.
    pub elapsed_s: f64,
    /// Per-call events reported.
    pub events: usize,
    /// Calls made to fail in all, when errors were injected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub injected: Option<u64>,
    /// The call tree of the traced functions, with `--graph`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub graph: Option<Vec<GraphNode>>,
    /// Error chains reported per error, with `--errors`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errors: Option<Vec<ErrorTotals>>,
    /// With `--errors`: chains that ended in NULL with no traced caller
    /// failing with an errno, left out (see [`super::errors::NullReturns`];
    /// always 0 under [`super::errors::NullReturns::All`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub null_only_chains_left_out: Option<u64>,
    /// What could not be recorded.
    pub lost: Lost,
    /// Why bpfmux's own map reads could be preempted while programs that a
    /// preempted map read turns away ran (see
    /// [`EngineKind::guard_is_cpu_wide`]): some recursion misses may be of
    /// its making.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preemptible_reads: Option<String>,
    /// The filter, and how many calls it passed of those it saw.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filter: Option<FilterTotals>,
    /// Functions called at least once, busiest first.
    pub functions: Vec<FunctionTotals>,
    /// The busiest stacks, symbolized, when stacks were counted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stacks: Option<Vec<StackSummary>>,
    /// How user stacks were normalized, when they were taken (stacks or
    /// error chains).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_stacks: Option<UserStackTotals>,
    /// Whether latency histograms were measured.
    #[serde(skip)]
    pub latency: bool,
}

/// [`Summary::kind`] of a summary read back (a recording's).
fn summary_kind() -> &'static str {
    "summary"
}

/// A function skipped with a warning.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Skipped {
    /// `name`, or `module:name`.
    pub function: String,
    /// Why it was skipped.
    pub reason: String,
}

/// [`super::engine::Breakdown`] in milliseconds.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AttachBreakdown {
    /// Program loads (the verifier).
    pub program_loads: usize,
    /// Their total time (threads of fentry-each add up).
    pub load_ms: f64,
    /// Links the kernel created.
    pub links: usize,
    /// Functions those links cover.
    pub link_functions: usize,
    /// Time creating them took.
    pub link_ms: f64,
    /// Link creations the kernel refused while isolating functions it will not attach.
    pub refused_tries: usize,
    /// Time those refused tries took.
    pub refused_ms: f64,
    /// Why the set took more than one link.
    pub split: Vec<String>,
}

/// What could not be recorded.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct Lost {
    /// Ring buffer full.
    pub events: u64,
    /// Error chains the ring buffer had no room for.
    pub chains: u64,
    /// Call graph paths the map had no room for (their calls not in the
    /// graph).
    pub graph: u64,
    /// Stack map full.
    pub stacks: u64,
    /// Calls nested too deeply for the per-thread call stack (their
    /// entry and exit not paired, left out of error chains).
    pub nesting: u64,
    /// Calls the kernel's recursion guard skipped.
    pub recursion_misses: u64,
}

impl Lost {
    /// Anything lost at all.
    pub fn any(&self) -> bool {
        self.events + self.chains + self.graph + self.stacks + self.nesting + self.recursion_misses
            > 0
    }
}

/// What a filter did over the run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FilterTotals {
    /// The filter as written (with a latency floor).
    pub expression: String,
    /// Calls it looked at (those the process, cgroup and task name
    /// filters let through).
    pub seen: u64,
    /// Calls it passed: the calls counted.
    pub passed: u64,
    /// Functions it never passes (they lack an argument it names).
    pub functions_never_passed: usize,
}

/// One function's totals since attach.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FunctionTotals {
    /// `name`, or `module:name`.
    pub name: String,
    /// Calls counted.
    pub calls: u64,
    /// Calls made to fail, when errors were injected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub injected: Option<u64>,
    /// When calls' latencies were measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_ns: Option<LatencyTotals>,
}

/// Latency over every measured call, in nanoseconds.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LatencyTotals {
    /// Calls measured (entry and exit both seen).
    pub count: u64,
    /// Mean latency.
    pub avg: u64,
    /// Longest latency.
    pub max: u64,
    /// With histograms (`--latency`).
    #[serde(flatten)]
    pub hist: Option<HistTotals>,
}

/// A log2 latency histogram and the percentiles it bounds.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct HistTotals {
    /// Upper bound of the bucket holding the median.
    pub p50: Option<u64>,
    /// Upper bound of the bucket holding the 99th percentile.
    pub p99: Option<u64>,
    /// Calls per bucket: bucket `b` holds `[2^b, 2^(b+1))` ns (0 from 0).
    pub log2_hist: Vec<u64>,
}

impl FunctionTotals {
    /// From counters and, when measured, the function's histogram.
    pub fn new(name: &str, s: &FuncStats, hist: Option<&[u64]>) -> Self {
        let latency_ns = (s.lat_count > 0).then(|| LatencyTotals {
            count: s.lat_count,
            avg: s.lat_sum_ns / s.lat_count,
            max: s.lat_max_ns,
            hist: hist.map(|h| HistTotals {
                p50: percentile(h, 0.5),
                p99: percentile(h, 0.99),
                log2_hist: h.to_vec(),
            }),
        });
        Self {
            name: name.to_string(),
            calls: s.calls,
            injected: None,
            latency_ns,
        }
    }

    /// The histogram, when measured and not empty.
    pub fn hist(&self) -> Option<&[u64]> {
        self.latency_ns
            .as_ref()
            .and_then(|l| l.hist.as_ref())
            .map(|h| &h.log2_hist[..])
    }
}

/// A call stack and how often the function was called through it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StackSummary {
    /// `name`, or `module:name`.
    pub function: String,
    /// Calls through this stack.
    pub count: u64,
    /// The process (thread group) that made the calls.
    pub pid: u32,
    /// Kernel frames, then `--` and user frames when there are any:
    /// `name+0xoff`, or the address when it has no symbol; frames with
    /// source lines (user files' DWARF, a vmlinux for kernel frames) as
    /// `name+0xoff at FILE:LINE`, after the calls inlined there (`name
    /// (inlined) at FILE:LINE`).
    pub frames: Vec<String>,
}

impl From<&Stack> for StackSummary {
    /// Kernel frames, then `--` and the user frames when there are any.
    fn from(s: &Stack) -> Self {
        let mut frames = frames_text(&s.kernel);
        if !s.user.is_empty() {
            frames.push("--".into());
            frames.extend(frames_text(&s.user));
        }
        Self {
            function: s.function.clone(),
            count: s.count,
            pid: s.pid,
            frames,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn function_totals_serialize_as_before() {
        let s = FuncStats {
            calls: 7,
            lat_count: 2,
            lat_sum_ns: 30,
            lat_max_ns: 20,
            injected: 0,
            ..Default::default()
        };
        let mut h = [0u64; 32];
        h[3] = 2;
        let v = serde_json::to_value(FunctionTotals::new("vfs_read", &s, Some(&h))).unwrap();
        assert_eq!(
            v.to_string(),
            r#"{"calls":7,"latency_ns":{"avg":15,"count":2,"log2_hist":[0,0,0,2,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],"max":20,"p50":15,"p99":15},"name":"vfs_read"}"#
        );
        let v = serde_json::to_value(FunctionTotals::new("vfs_read", &s, None)).unwrap();
        assert_eq!(
            v.to_string(),
            r#"{"calls":7,"latency_ns":{"avg":15,"count":2,"max":20},"name":"vfs_read"}"#
        );
        let none = FuncStats {
            calls: 1,
            ..Default::default()
        };
        let v = serde_json::to_value(FunctionTotals::new("f", &none, Some(&h))).unwrap();
        assert_eq!(v.to_string(), r#"{"calls":1,"name":"f"}"#);
    }
}
