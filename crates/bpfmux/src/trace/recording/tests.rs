//! The format: written and read back, as a live run would have printed it;
//! versions, truncation and unknown fields.

use super::*;
use crate::trace::errors::ChainCall;

const KALLSYMS: &str = "\
ffffffff81000000 T _stext
ffffffff81001000 t do_sys_openat2
ffffffff81001400 T __x64_sys_openat
ffffffff81002000 T _etext
";

/// A stack's kernel addresses: two named, one past `_etext`.
const KERNEL: [u64; 3] = [
    0xffff_ffff_8100_1010,
    0xffff_ffff_8100_1408,
    0xffff_ffff_8100_2010,
];

#[inline(never)]
fn recorded_marker() -> u64 {
    std::hint::black_box(0x5eed)
}

fn summary() -> Summary {
    Summary {
        null_only_chains_left_out: Some(0),
        // A run's length that a float parser off by one unit in the last
        // place reads back as 1.278919641 (seen in a guest check).
        elapsed_s: 1.2789196409999999,
        ..crate::trace::report::tests::summary()
    }
}

fn header() -> Header {
    Header {
        format: FORMAT.into(),
        version: VERSION,
        bpfmux: "test".into(),
        created_unix_s: 1,
        host: Host::this(),
        engine: EngineKind::KprobeMulti,
        exit_side: ExitSide::Session,
        options: RecordedOptions {
            stacks: true,
            errors: true,
            patterns: vec!["do_sys_openat2".into()],
            ..Default::default()
        },
        functions: vec!["do_sys_openat2".into(), "__x64_sys_openat".into()],
    }
}

fn chain() -> ErrorChain {
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
                ret: Some(RetValue::Unsigned(0x10)),
                error: None,
                duration_ns: Some(9),
            },
            ChainCall {
                function: "do_sys_openat2".into(),
                ret: Some(RetValue::Signed(-2)),
                error: Some("ENOENT".into()),
                duration_ns: Some(7),
            },
        ],
        overflow: 0,
        kernel_stack: vec![],
        user_stack: vec![],
    }
}

/// A scratch file of the test's own.
fn scratch(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("bpfmux-recording-{}-{name}", std::process::id()))
}

/// What the test recorded and what a live run names its frames as.
struct Made {
    path: PathBuf,
    live_kernel: Vec<String>,
    live_user: Vec<String>,
}

/// A recording of one chain and one stack of this process's own frames.
fn make(name: &str) -> Made {
    let path = scratch(name);
    let ksyms = KernelSymbolizer::parse(KALLSYMS).unwrap();
    let mut cache = CaptureCache::default();
    let addr = recorded_marker as *const () as u64;
    let user = cache.normalize(std::process::id(), &[addr, 8]);
    let mut w = Writer::create(&path).unwrap();
    w.write_header(&header()).unwrap();
    w.write_chain(&chain(), &KERNEL, &user, &cache, Some(&ksyms))
        .unwrap();
    w.write_stack(
        ("do_sys_openat2", 42, 7),
        &KERNEL,
        &user,
        &cache,
        Some(&ksyms),
    )
    .unwrap();
    let fields = [("command_exit".to_string(), Value::from(3))];
    let n = w.write_end(&summary(), &fields).unwrap();
    assert_eq!(
        (n.chains, n.stacks, n.objects, n.kernel_symbols),
        (1, 1, 1, 2)
    );
    // What the live run prints for the same frames.
    let live_user = crate::trace::stacks::frames_text(&crate::trace::stacks::symbolized(
        &mut UserSymbolizer::default(),
        &cache,
        &user,
    ));
    Made {
        path,
        live_kernel: lines(&kernel_frames(
            Some(&ksyms),
            &Mechanism::default(),
            None,
            &KERNEL,
        )),
        live_user,
    }
}

#[test]
fn a_recording_reads_back_as_the_live_run_named_it() {
    let m = make("round-trip.jsonl");
    let r = Replay::open(&m.path).unwrap();
    assert_eq!(r.header.functions.len(), 2);
    let got = r.resolve(&SymbolSources::default());
    let (c, _) = &got.chains[0];
    // Calls inlined at the address come first, as frames of their own.
    assert!(
        m.live_user
            .iter()
            .find(|l| !l.contains(" (inlined)"))
            .is_some_and(|l| l.contains("recorded_marker+0x0 at ") && l.contains("tests.rs:")),
        "{:?}",
        m.live_user
    );
    assert_eq!(c.user_stack, m.live_user);
    assert_eq!(
        m.live_kernel,
        [
            "do_sys_openat2+0x10",
            "__x64_sys_openat+0x8",
            "0xffffffff81002010"
        ]
    );
    assert_eq!(c.kernel_stack, m.live_kernel);
    // Return values keep their sign (pointers print in hex).
    assert_eq!(c.calls[0].ret, Some(RetValue::Unsigned(0x10)));
    assert_eq!(c.calls[1].ret, Some(RetValue::Signed(-2)));
    assert_eq!(
        serde_json::to_value(c).unwrap(),
        serde_json::to_value(ErrorChain {
            kernel_stack: m.live_kernel.clone(),
            user_stack: m.live_user.clone(),
            ..chain()
        })
        .unwrap()
    );
    // The summary as it was, its stacks named here.
    let s = &got.summary;
    assert!(s.latency);
    assert_eq!(s.elapsed_s.to_bits(), summary().elapsed_s.to_bits());
    assert_eq!(
        (s.functions[0].name.as_str(), s.functions[0].calls),
        ("vfs_read", 4)
    );
    let stacks = s.stacks.as_ref().expect("stacks were counted");
    let mut frames = m.live_kernel.clone();
    frames.push("--".into());
    frames.extend(m.live_user.clone());
    assert_eq!(stacks[0].frames, frames);
    assert_eq!(r.fields(), [("command_exit".to_string(), Value::from(3))]);
    assert!(matches!(got.objects[0].found, Found::Binary(_)));
    let _ = std::fs::remove_file(&m.path);
}

#[test]
fn gzip_round_trip() {
    let m = make("round-trip.jsonl.gz");
    let raw = std::fs::read(&m.path).unwrap();
    assert_eq!(&raw[..2], [0x1f, 0x8b]);
    let r = Replay::open(&m.path).unwrap();
    let got = r.resolve(&SymbolSources::default());
    assert_eq!(got.chains[0].0.user_stack, m.live_user);
    // Cut short: truncated, not another error.
    let cut = &raw[..raw.len() - 30];
    assert!(
        matches!(Replay::read(cut), Err(RecordingError::Truncated { .. })),
        "{:?}",
        Replay::read(cut).err()
    );
    let _ = std::fs::remove_file(&m.path);
}

/// Without the binary or a debug file, user frames are addresses.
#[test]
fn frames_of_a_file_not_here_are_addresses() {
    let m = make("missing.jsonl");
    let r = Replay::open(&m.path).unwrap();
    let nothing = SymbolSources {
        debug_dirs: vec![scratch("no-such-dir")],
        paths: false,
        debuginfod: None,
    };
    let got = r.resolve(&nothing);
    let addr = recorded_marker as *const () as u64;
    assert_eq!(got.chains[0].0.user_stack[0], format!("{addr:#x}"));
    assert!(matches!(got.objects[0].found, Found::Missing(_)));
    let _ = std::fs::remove_file(&m.path);
}

/// A file found nowhere here comes from a debuginfod server: the file
/// itself when the server has no debug file; a dead server is named.
#[test]
fn frames_of_a_file_not_here_from_debuginfod() {
    use crate::symbolize::debuginfod::{tests::server, Debuginfod, Kind};
    let m = make("debuginfod.jsonl");
    let r = Replay::open(&m.path).unwrap();
    let (url, asked) = server(|p| match p.ends_with("/executable") {
        true => (200, std::fs::read("/proc/self/exe").unwrap()),
        false => (404, Vec::new()),
    });
    let cache = scratch("debuginfod-cache");
    let _ = std::fs::remove_dir_all(&cache);
    let client = |url: &str| {
        Debuginfod::new(
            vec![url.to_string()],
            cache.clone(),
            Duration::from_secs(10),
            None,
        )
        .unwrap()
    };
    let sources = SymbolSources {
        debug_dirs: vec![scratch("no-such-dir")],
        paths: false,
        debuginfod: Some(client(&url)),
    };
    let got = r.resolve(&sources);
    assert_eq!(got.chains[0].0.user_stack, m.live_user);
    match &got.objects[0].found {
        Found::Debuginfod(f, Kind::Executable) => assert_eq!(f.server.as_deref(), Some(&*url)),
        other => panic!("{other:?}"),
    }
    let id = got.objects[0].build_id.clone().unwrap();
    assert_eq!(
        *asked.lock().unwrap(),
        [
            format!("/buildid/{id}/debuginfo"),
            format!("/buildid/{id}/executable")
        ]
    );
    // A file recorded without segments (known by build ID alone at capture): no debug
    // file can place its offsets, so only the file itself is asked for.
    let mut bare = Replay::open(&m.path).unwrap();
    for o in bare.objects.values_mut() {
        o.segments.clear();
    }
    asked.lock().unwrap().clear();
    let _ = std::fs::remove_dir_all(&cache);
    let got = bare.resolve(&sources);
    assert_eq!(got.chains[0].0.user_stack, m.live_user);
    assert_eq!(
        *asked.lock().unwrap(),
        [format!("/buildid/{id}/executable")]
    );
    // No server: what each place answered, and addresses.
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let _ = std::fs::remove_dir_all(&cache);
    let got = r.resolve(&SymbolSources {
        debuginfod: Some(client(&dead)),
        ..sources
    });
    let addr = recorded_marker as *const () as u64;
    assert_eq!(got.chains[0].0.user_stack[0], format!("{addr:#x}"));
    match &got.objects[0].found {
        Found::Missing(why) => assert!(
            why.ends_with(&format!(
                "debuginfod debuginfo: {dead}: connection refused; debuginfod executable: \
                 {dead}: not reached earlier in this run"
            )),
            "{why}"
        ),
        other => panic!("{other:?}"),
    }
    let _ = std::fs::remove_dir_all(&cache);
    let _ = std::fs::remove_file(&m.path);
}

fn text_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(String::from)
        .collect()
}

#[test]
fn another_version_is_refused_with_a_clear_error() {
    let m = make("version.jsonl");
    let mut lines = text_lines(&m.path);
    lines[0] = lines[0].replace("\"version\":1", "\"version\":2");
    let e = Replay::read(lines.join("\n").as_bytes()).unwrap_err();
    assert!(matches!(e, RecordingError::Version { found: 2 }), "{e:?}");
    assert_eq!(
        e.to_string(),
        "recording format version 2: this bpfmux reads version 1 only (a bpfmux of the \
         recording's version reads it)"
    );
    let e = Replay::read(&b"{\"type\":\"summary\"}\n"[..]).unwrap_err();
    assert!(matches!(e, RecordingError::NotARecording), "{e:?}");
    let _ = std::fs::remove_file(&m.path);
}

#[test]
fn a_truncated_file_is_an_error() {
    let m = make("truncated.jsonl");
    let lines = text_lines(&m.path);
    let n = lines.len();
    // Without its end line, and cut in the middle of a line.
    let short = lines[..n - 1].join("\n") + "\n";
    let e = Replay::read(short.as_bytes()).unwrap_err();
    assert!(
        matches!(e, RecordingError::Truncated { lines } if lines == n - 1),
        "{e:?}"
    );
    assert!(e.to_string().starts_with("truncated after"), "{e}");
    let all = lines.join("\n");
    let cut = &all[..all.len() - lines[n - 1].len() - 20];
    let e = Replay::read(cut.as_bytes()).unwrap_err();
    assert!(matches!(e, RecordingError::Truncated { .. }), "{e:?}");
    let _ = std::fs::remove_file(&m.path);
}

#[test]
fn unknown_fields_and_lines_are_ignored() {
    let m = make("unknown.jsonl");
    let mut lines: Vec<String> = text_lines(&m.path)
        .into_iter()
        .map(|l| {
            let mut v: Value = serde_json::from_str(&l).unwrap();
            v["from_the_future"] = Value::from(1);
            v.to_string()
        })
        .collect();
    lines.insert(1, r#"{"type":"event","later":true}"#.into());
    let r = Replay::read(lines.join("\n").as_bytes()).unwrap();
    let got = r.resolve(&SymbolSources::default());
    assert_eq!(got.chains[0].0.kernel_stack, m.live_kernel);
    assert_eq!(got.chains[0].0.user_stack, m.live_user);
    let _ = std::fs::remove_file(&m.path);
}

/// A stack the programs took with the tracer's own frames in it (the
/// global trampoline's callers and a traced caller's entry twice; a
/// per-function trampoline and its program) is recorded as the live run
/// printed it, and reported so: nothing of the mechanism, path_openat+0x0
/// first, though the report has no [`Mechanism`] to trim with.
#[test]
fn kernel_stacks_are_recorded_trimmed_as_printed() {
    use crate::trace::stacks::tests::{addrs, kernel, PATH_OPENAT, PATH_OPENAT_STACK};
    use crate::trace::stacks::tests::{GLOBAL_AT_A_RETURN, TRAMPOLINES_AT_A_RETURN};
    let (ksyms, mech) = kernel();
    let at_return = addrs(GLOBAL_AT_A_RETURN);
    let trampolines = addrs(TRAMPOLINES_AT_A_RETURN);
    let kernel = (Some(&ksyms), &mech);
    // What the live run prints: the chain's stack, the summary's.
    let live = |raw: &[u64]| lines(&kernel_frames(Some(&ksyms), &mech, Some(PATH_OPENAT), raw));
    assert_eq!(live(&at_return), PATH_OPENAT_STACK);
    assert_eq!(live(&trampolines), PATH_OPENAT_STACK);

    let path = scratch("trimmed.jsonl");
    let cache = CaptureCache::default();
    let mut w = Writer::create(&path).unwrap();
    w.write_header(&header()).unwrap();
    let printed = printed_kernel(kernel, Some(PATH_OPENAT), &at_return);
    w.write_chain(&chain(), &printed, &[], &cache, kernel.0)
        .unwrap();
    let printed = printed_kernel(kernel, Some(PATH_OPENAT), &trampolines);
    let stack = ("path_openat", 42, 3);
    w.write_stack(stack, &printed, &[], &cache, kernel.0)
        .unwrap();
    w.write_end(&summary(), &[]).unwrap();
    // Nothing of the mechanism in the file, not even its symbols.
    let text = std::fs::read_to_string(&path).unwrap();
    for mechanism in ["bpf_prog_", "bpf_global_", "bpf_trampoline_"] {
        assert!(!text.contains(mechanism), "{mechanism} in {text}");
    }

    let got = Replay::open(&path)
        .unwrap()
        .resolve(&SymbolSources::default());
    assert_eq!(got.chains[0].0.kernel_stack, live(&at_return));
    assert_eq!(lines(&got.stacks[0].kernel), live(&trampolines));
    let busiest = got.summary.stacks.as_ref().expect("stacks were counted");
    assert_eq!(busiest[0].frames, live(&trampolines));
    let _ = std::fs::remove_file(&path);
}
