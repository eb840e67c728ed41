//! `bpfmux report` on recordings made here (the host cannot trace): one
//! written through the library's writer with this process's own frames and
//! a synthetic kernel symbol table, read in a fresh directory; its output
//! against what the run's own report forms print for the same chain and
//! summary. Truncated and foreign files end in a clear error.

use std::process::Command;

use bpfmux::normalize::capture::CaptureCache;
use bpfmux::symbolize::{at_source, KernelSymbolizer, SymResult, UserSymbolizer};
use bpfmux::trace::errors::{ChainCall, ErrorChain, RetValue};
use bpfmux::trace::recording::{Header, Host, RecordedOptions, Writer, FORMAT, VERSION};
use bpfmux::trace::summary::{FunctionTotals, StackSummary, Summary};
use bpfmux::trace::{EngineKind, ExitSide, FuncStats, JsonLines, PlainText, Report};

#[path = "../../bpfmux/tests/common/scratch.rs"]
mod scratch;
use scratch::Scratch;

fn bpfmux() -> Command {
    Command::new(env!("CARGO_BIN_EXE_bpfmux"))
}

const KALLSYMS: &str = "\
ffffffff81000000 T _stext
ffffffff81001000 t do_sys_openat2
ffffffff81001400 T __x64_sys_openat
ffffffff81002000 T _etext
";
const KERNEL: [u64; 3] = [
    0xffff_ffff_8100_1010,
    0xffff_ffff_8100_1408,
    0xffff_ffff_8100_2010,
];

#[inline(never)]
fn report_marker() -> u64 {
    std::hint::black_box(0x5eed)
}

/// A summary as a run's `--json` gives it: do_sys_openat2 called 7 times,
/// with a latency histogram.
fn summary() -> Summary {
    let mut hist = vec![0u64; 32];
    hist[10] = 6;
    hist[12] = 1;
    let mut s: Summary = serde_json::from_value(serde_json::json!({
        "engine": "kprobe-multi", "exit_side": "session", "functions_attached": 2,
        "functions_dropped": 0, "skipped": [], "links": 1, "select_ms": 1.0,
        "prepare_ms": 2.0, "attach_ms": 3.0, "detach_ms": 4.0,
        "attach_breakdown": {"program_loads": 1, "load_ms": 1.5, "links": 1,
            "link_functions": 2, "link_ms": 1.0, "refused_tries": 0, "refused_ms": 0.0,
            "split": []},
        "elapsed_s": 2.0, "events": 0, "null_only_chains_left_out": 0,
        "lost": {"events": 0, "chains": 0, "graph": 0, "stacks": 0, "nesting": 0,
            "recursion_misses": 0},
        "functions": [],
    }))
    .unwrap();
    let stats = FuncStats {
        calls: 7,
        lat_count: 7,
        lat_sum_ns: 7000,
        lat_max_ns: 4000,
        ..Default::default()
    };
    s.functions = vec![FunctionTotals::new("do_sys_openat2", &stats, Some(&hist))];
    s.latency = true;
    s
}

fn chain(kernel: Vec<String>, user: Vec<String>) -> ErrorChain {
    ErrorChain {
        kind: "error",
        ts_ns: 5,
        pid: 42,
        tid: 43,
        comm: "cat".into(),
        function: "do_sys_openat2".into(),
        error: "ENOENT".into(),
        errno: Some(2),
        calls: vec![
            ChainCall {
                function: "__x64_sys_openat".into(),
                ret: Some(RetValue::Signed(-2)),
                error: Some("ENOENT".into()),
                duration_ns: Some(9100),
            },
            ChainCall {
                function: "do_sys_openat2".into(),
                ret: Some(RetValue::Signed(-2)),
                error: Some("ENOENT".into()),
                duration_ns: Some(7300),
            },
        ],
        overflow: 0,
        kernel_stack: kernel,
        user_stack: user,
    }
}

/// Writes the recording; returns what a live run names the frames as.
fn record(path: &std::path::Path) -> (Vec<String>, Vec<String>) {
    let ksyms = KernelSymbolizer::parse(KALLSYMS).unwrap();
    let addr = report_marker as *const () as u64;
    let mut cache = CaptureCache::default();
    let user = cache.normalize(std::process::id(), &[addr]);
    let mut w = Writer::create(path).unwrap();
    w.write_header(&Header {
        format: FORMAT.into(),
        version: VERSION,
        bpfmux: "test".into(),
        created_unix_s: 1_700_000_000,
        host: Host::this(),
        engine: EngineKind::KprobeMulti,
        exit_side: ExitSide::Session,
        options: RecordedOptions {
            latency: true,
            stacks: true,
            errors: true,
            patterns: vec!["do_sys_openat2".into(), "__x64_sys_openat".into()],
            ..Default::default()
        },
        functions: vec!["do_sys_openat2".into(), "__x64_sys_openat".into()],
    })
    .unwrap();
    w.write_chain(&chain(vec![], vec![]), &KERNEL, &user, &cache, Some(&ksyms))
        .unwrap();
    w.write_stack(
        ("do_sys_openat2", 42, 7),
        &KERNEL,
        &user,
        &cache,
        Some(&ksyms),
    )
    .unwrap();
    w.write_end(&summary(), &[("command_exit".into(), 1.into())])
        .unwrap();
    // The live names: the kernel's as kallsyms names them, ours by
    // normalizing and symbolizing this process's address now.
    let live_user = match &UserSymbolizer::default()
        .symbolize(std::process::id(), &[addr])
        .unwrap()[0]
        .result
    {
        // The calls inlined there first, innermost first, then the frame,
        // each with its line.
        SymResult::Symbol(s) => s
            .inlined
            .iter()
            .rev()
            .map(|i| {
                let at = at_source(i.file.as_deref(), i.line);
                format!("{} (inlined){at}", i.name)
            })
            .chain([format!(
                "{}+{:#x}{}",
                s.name,
                s.offset,
                at_source(s.file.as_deref(), s.line)
            )])
            .collect(),
        other => panic!("{other:?}"),
    };
    let live_kernel = ksyms
        .symbolize(&KERNEL)
        .iter()
        .map(|s| match &s.result {
            SymResult::Symbol(s) => format!("{}+{:#x}", s.name, s.offset),
            _ => format!("{:#x}", s.addr),
        })
        .collect();
    (live_kernel, live_user)
}

/// Text without the time of day in front of chains' head lines.
fn untimed(text: &str) -> String {
    text.lines()
        .map(|l| match l.split_once(' ') {
            Some((t, rest)) if t.len() == 8 && t.as_bytes()[2] == b':' => rest,
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn report_prints_what_the_run_printed() {
    let d = Scratch::new("report-cli");
    let file = d.0.join("run.jsonl.gz");
    let (kernel, user) = record(&file);
    assert!(
        user.iter().any(|l| l.contains("report_marker+0x0 at ")),
        "{user:?}"
    );
    // What the run's report prints for it, the stacks named live.
    let mut s = summary();
    let mut frames = kernel.clone();
    frames.push("--".into());
    frames.extend(user.clone());
    s.stacks = Some(vec![StackSummary {
        function: "do_sys_openat2".into(),
        count: 7,
        pid: 42,
        frames,
    }]);
    let live_chain = chain(kernel, user);
    let mut expected = Vec::new();
    let mut p = PlainText::new(&mut expected, true, None, false);
    p.error_chain(&live_chain).unwrap();
    p.summary(&s).unwrap();
    let expected = String::from_utf8(expected).unwrap();

    // Read in a fresh directory, with only the file.
    let fresh = Scratch::new("report-cli-fresh");
    let copy = fresh.0.join("run.jsonl.gz");
    std::fs::copy(&file, &copy).unwrap();
    let out = bpfmux()
        .current_dir(&fresh.0)
        .args(["report", "run.jsonl.gz"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(untimed(&text), untimed(&expected));
    assert!(text.contains("do_sys_openat2+0x10"), "{text}");
    assert!(text.contains("0xffffffff81002010"), "{text}");
    assert!(
        stderr.starts_with("bpfmux report: run.jsonl.gz: recorded on "),
        "{stderr}"
    );
    assert!(
        stderr.contains("bpfmux report: engine kprobe-multi: attach 3.0 ms"),
        "{stderr}"
    );

    // --json: the chain and the summary as --json printed them.
    let out = bpfmux()
        .current_dir(&fresh.0)
        .args(["report", "--json", "run.jsonl.gz"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let mut expected = Vec::new();
    let mut j = JsonLines::new(&mut expected, false);
    j.error_chain(&live_chain).unwrap();
    j.summary_with(&s, [("command_exit".to_string(), 1.into())])
        .unwrap();
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(expected).unwrap()
    );
}

#[test]
fn truncated_and_foreign_files_are_clear_errors() {
    let d = Scratch::new("report-cli-bad");
    let file = d.0.join("run.jsonl");
    record(&file);
    let text = std::fs::read_to_string(&file).unwrap();
    let cut = &text[..text.len() / 2];
    std::fs::write(&file, cut).unwrap();
    let out = bpfmux().arg("report").arg(&file).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(": truncated after "), "{stderr}");
    std::fs::write(&file, "hello\n").unwrap();
    let out = bpfmux().arg("report").arg(&file).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not a bpfmux recording"), "{stderr}");
}
