//! Runs every feature probe against the running kernel. Support varies by
//! kernel, so this checks the shape of the answer and the facts every
//! supported kernel (6.12+) has: BTF and PROCMAP_QUERY.

use bpfmux::features::{self, Feature, Status};

#[test]
fn every_probe_answers() {
    features::quiet_libbpf();
    let rows = features::probe_all();
    // Every feature answers, once, in order.
    let got: Vec<Feature> = rows.iter().map(|r| r.feature).collect();
    assert_eq!(got, Feature::ALL);
    for r in &rows {
        assert!(!r.detail.is_empty(), "{} has no detail", r.feature);
    }
    let status = |f: Feature| {
        rows.iter()
            .find(|r| r.feature == f)
            .map(|r| r.status.clone())
    };
    assert_eq!(status(Feature::Btf), Some(Status::Yes));
    assert_eq!(status(Feature::ProcmapQuery), Some(Status::Yes));
    // The series' additions are in no kernel this runs on (the host's):
    // they must never claim support.
    for f in Feature::ALL {
        if f.origin() == features::Origin::Series {
            assert_ne!(status(f), Some(Status::Yes), "{f}");
        }
    }
    // JSON output is what `bpfmux features --json` prints.
    let json = serde_json::to_value(&rows).unwrap();
    assert_eq!(json[0]["name"], "btf");
}
