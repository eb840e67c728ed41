//! Folded stacks: a line per path of frames, `root;…;leaf count`, what
//! flamegraph.pl, inferno-flamegraph and speedscope read (Brendan Gregg's
//! stackcollapse format).
//!
//! Frames are named by function, without offset, so that the calls of one
//! function through different call sites of its callers add up
//! ([`super::Frame::names`]: inlined functions are frames of their own,
//! frames without a symbol `[file name]` or `[unknown]`). Identical paths
//! are added up (the same stack in two processes is one line), paths with
//! a value of 0 are left out, and lines are sorted by path, so the file is
//! the same for the same recorded stacks whatever order they came in. The
//! value is the profile's main one: calls for stacks, nanoseconds of
//! exclusive time for a call graph.

use std::collections::BTreeMap;
use std::io::Write;

use super::{Error, Profile};

/// The folded lines of `p`, sorted by path (see the module docs).
pub fn lines(p: &Profile) -> Vec<String> {
    let mut paths: BTreeMap<String, u64> = BTreeMap::new();
    for s in &p.samples {
        let Some(&v) = s.values.get(p.main) else {
            continue;
        };
        let names: Vec<String> = s
            .frames
            .iter()
            .flat_map(|f| f.names())
            .map(|n| clean(&n))
            .collect();
        *paths.entry(names.join(";")).or_default() += v;
    }
    paths
        .into_iter()
        .filter(|&(_, v)| v > 0)
        .map(|(path, v)| format!("{path} {v}"))
        .collect()
}

/// Writes `p` as folded stacks ([`lines`], a line each); returns how many.
pub fn write(mut out: impl Write, p: &Profile) -> Result<usize, Error> {
    let lines = lines(p);
    for l in &lines {
        writeln!(out, "{l}")?;
    }
    out.flush()?;
    Ok(lines.len())
}

/// A frame name as the format can carry it: `;` separates frames (a `:`
/// instead), a line ends a stack (a space instead), and an empty name
/// would merge two frames.
fn clean(name: &str) -> String {
    if name.is_empty() {
        return "[unknown]".into();
    }
    name.chars()
        .map(|c| match c {
            ';' => ':',
            c if c.is_control() => ' ',
            c => c,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::tests::{graph, stacks};
    use super::super::{Profile, Sample};
    use super::*;

    #[test]
    fn stacks_fold_into_sorted_lines() {
        let mut out = Vec::new();
        assert_eq!(
            write(&mut out, &Profile::from_stacks(&stacks())).unwrap(),
            3
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "[libc.so.6];main;a;b;helper;[unknown];do_syscall_64;entry_SYSCALL_64;\
             __x64_sys_getpgid 3\n\
             [libc.so.6];main;c;b;helper;[unknown];do_syscall_64;entry_SYSCALL_64;\
             __x64_sys_getpgid 1\n\
             main;do_syscall_64;__x64_sys_getpgid 2\n"
        );
    }

    #[test]
    fn the_same_path_adds_up_and_zero_is_left_out() {
        let mut p = Profile::from_stacks(&stacks());
        let mut twin = p.samples[2].clone();
        twin.pid = Some(99);
        p.samples.push(twin);
        p.samples.push(Sample {
            values: vec![0],
            ..p.samples[0].clone()
        });
        p.samples[1].values[0] = 0;
        assert_eq!(
            lines(&p)[1..],
            ["main;do_syscall_64;__x64_sys_getpgid 4".to_string()]
        );
        // The order samples come in does not matter.
        let mut q = p.clone();
        q.samples.reverse();
        assert_eq!(lines(&q), lines(&p));
    }

    #[test]
    fn a_call_graph_folds_by_exclusive_time() {
        assert_eq!(
            lines(&Profile::from_graph(&graph())),
            [
                "__x64_sys_rt_sigaction 1900",
                "__x64_sys_rt_sigaction;do_sig:action 500",
                "f 10"
            ]
        );
    }
}
