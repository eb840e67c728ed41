//! Call graphs (`bpfmux trace --graph`): the tree of traced calls a command
//! made, with inclusive and exclusive time per node and repeats folded.
//!
//! The programs keep each thread's traced calls in flight on the same
//! fixed-depth call stack as error chains ([`super::errors`]); at each exit
//! the path of functions from the outermost traced call to the returning
//! one is the key of a hash map (`graph`) that counts calls and adds up
//! their durations. Identical paths fold: 5000 calls of `vfs_read` under the
//! same callers are one node `vfs_read ×5000`. Here the map becomes a tree:
//! [`GraphNode`]s, children by inclusive time, exclusive time = inclusive
//! less the children's. Calls deeper than the stack (32) are not in the
//! graph (`lost.nesting`); paths the map had no room for are counted in
//! `lost.graph`.

use std::collections::BTreeMap;

use libbpf_rs::{MapCore, MapFlags};
use serde::{Deserialize, Serialize};

use super::errors::MAX_DEPTH;
use super::events::u64_at;
use super::output::fmt_ns;
use super::program::TraceObject;
use super::select::Func;

/// One node of the call graph: a function under one chain of callers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GraphNode {
    /// `name`, or `module:name`.
    pub function: String,
    /// Calls of it under these callers (their exits seen).
    pub calls: u64,
    /// Their time from entry to exit, added up.
    pub inclusive_ns: u64,
    /// Less the time in the traced functions they called.
    pub exclusive_ns: u64,
    /// Traced functions it called, most inclusive time first.
    pub children: Vec<GraphNode>,
}

/// The map's entries: path of function indexes, outermost first → (calls,
/// total ns).
pub(crate) type Paths = Vec<(Vec<u32>, u64, u64)>;

/// Reads the `graph` map (after detach: nothing changes it then).
pub(crate) fn read_paths(obj: &TraceObject) -> Result<Paths, super::Error> {
    use super::Step as _;
    let map = obj.map("graph")?;
    let mut out = Vec::new();
    for key in map.keys() {
        // struct trace_graph_key: depth, then func[MAX_DEPTH].
        if key.len() < 4 + 4 * MAX_DEPTH {
            continue;
        }
        let u32_at = |o: usize| u32::from_ne_bytes([key[o], key[o + 1], key[o + 2], key[o + 3]]);
        let depth = u32_at(0) as usize;
        if depth == 0 || depth > MAX_DEPTH {
            continue;
        }
        let path = (0..depth).map(|i| u32_at(4 + 4 * i)).collect();
        let Some(v) = map
            .lookup(&key, MapFlags::ANY)
            .step("reading the call graph")?
        else {
            continue;
        };
        if v.len() >= 16 {
            out.push((path, u64_at(&v, 0), u64_at(&v, 8)));
        }
    }
    Ok(out)
}

/// The tree of `paths`, roots and children by inclusive time (then name).
pub fn build(paths: &[(Vec<u32>, u64, u64)], funcs: &[Func]) -> Vec<GraphNode> {
    #[derive(Default)]
    struct Tmp {
        calls: u64,
        ns: u64,
        children: BTreeMap<u32, Tmp>,
    }
    let mut root = Tmp::default();
    for (path, calls, ns) in paths {
        let mut at = &mut root;
        for f in path {
            at = at.children.entry(*f).or_default();
        }
        at.calls += calls;
        at.ns += ns;
    }
    fn nodes(t: &Tmp, funcs: &[Func]) -> Vec<GraphNode> {
        let mut v: Vec<GraphNode> = t
            .children
            .iter()
            .map(|(f, c)| {
                let children = nodes(c, funcs);
                let inner: u64 = children.iter().map(|n| n.inclusive_ns).sum();
                GraphNode {
                    function: funcs
                        .get(*f as usize)
                        .map_or_else(|| format!("#{f}"), Func::display_name),
                    calls: c.calls,
                    inclusive_ns: c.ns,
                    exclusive_ns: c.ns.saturating_sub(inner),
                    children,
                }
            })
            .collect();
        v.sort_by(|a, b| {
            b.inclusive_ns
                .cmp(&a.inclusive_ns)
                .then_with(|| a.function.cmp(&b.function))
        });
        v
    }
    nodes(&root, funcs)
}

/// The tree as text, two spaces a level:
/// `vfs_read ×5000  12.0ms incl  3.1ms excl`.
pub fn lines(roots: &[GraphNode]) -> Vec<String> {
    fn walk(n: &GraphNode, depth: usize, out: &mut Vec<String>) {
        let name = format!("{:indent$}{}", "", n.function, indent = 2 * depth);
        let times = if n.calls > 1 {
            format!("{name} ×{}", n.calls)
        } else {
            name
        };
        out.push(format!(
            "{times:<48} {:>9} incl {:>9} excl",
            fmt_ns(n.inclusive_ns),
            fmt_ns(n.exclusive_ns)
        ));
        for c in &n.children {
            walk(c, depth + 1, out);
        }
    }
    let mut out = Vec::new();
    for r in roots {
        walk(r, 0, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::btf::ValueKind;

    fn funcs(names: &[&str]) -> Vec<Func> {
        names
            .iter()
            .map(|n| Func::test(n, vec![], ValueKind::Signed(32)))
            .collect()
    }

    #[test]
    fn paths_fold_into_a_tree_with_exclusive_times() {
        let f = funcs(&["sys_read", "vfs_read", "rw_verify", "sys_getpid"]);
        let paths = vec![
            (vec![0], 5000, 90_000),
            (vec![0, 1], 5000, 60_000),
            (vec![0, 1, 2], 5000, 10_000),
            (vec![0, 2], 3, 900),
            (vec![3], 1, 100_000),
        ];
        let g = build(&paths, &f);
        let text = lines(&g);
        let want = [
            "sys_getpid",
            "sys_read ×5000",
            "  vfs_read ×5000",
            "    rw_verify ×5000",
            "  rw_verify ×3",
        ];
        assert_eq!(text.len(), 5, "{text:?}");
        for (l, w) in text.iter().zip(want) {
            assert!(l.starts_with(&format!("{w} ")), "{l:?}");
        }
        assert!(
            text[1].ends_with("90.0us incl    29.1us excl"),
            "{}",
            text[1]
        );
        assert_eq!(
            (g[1].inclusive_ns, g[1].exclusive_ns),
            (90_000, 90_000 - 60_000 - 900)
        );
        assert_eq!(g[1].children[0].exclusive_ns, 50_000);
        let v = serde_json::to_value(&g[0]).unwrap();
        assert_eq!(
            v.to_string(),
            r#"{"calls":1,"children":[],"exclusive_ns":100000,"function":"sys_getpid","inclusive_ns":100000}"#
        );
    }
}
