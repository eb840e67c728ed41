//! Runs every feature probe against the running kernel. Support varies by
//! kernel, so this checks the shape of the answer and the facts every
//! supported kernel (6.12+) has: BTF and PROCMAP_QUERY.

use bpfmux::features::{self, Status};

#[test]
fn every_probe_answers() {
    features::quiet_libbpf();
    let rows = features::probe_all();
    let names: Vec<_> = rows.iter().map(|r| r.name).collect();
    for want in [
        "btf",
        "fentry",
        "fexit",
        "fmod_ret",
        "freplace",
        "tracing_multi",
        "kprobe.multi",
        "kprobe.session",
        "uprobe.multi",
        "xdp.generic",
        "xdp.native",
        "procmap_query",
        "global_trampoline",
        "fmod_ret.multi",
        "xdp.chain_calls",
    ] {
        assert!(names.contains(&want), "missing {want}: {names:?}");
    }
    for r in &rows {
        assert!(!r.detail.is_empty(), "{} has no detail", r.name);
    }
    let status = |n: &str| rows.iter().find(|r| r.name == n).map(|r| r.status.clone());
    assert_eq!(status("btf"), Some(Status::Yes));
    assert_eq!(status("procmap_query"), Some(Status::Yes));
    // Nothing in any kernel yet: must never claim support.
    for n in ["global_trampoline", "fmod_ret.multi", "xdp.chain_calls"] {
        assert_ne!(status(n), Some(Status::Yes), "{n}");
    }
    // JSON output is what `bpfmux features --json` prints.
    let json = serde_json::to_value(&rows).unwrap();
    assert_eq!(json[0]["name"], "btf");
}
