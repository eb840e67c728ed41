//! Capture-time normalization on a real short-lived process: a program
//! built here with DWARF, whose addresses (its functions, its vDSO) are
//! normalized while it runs, is symbolized after it exited — and after its
//! file was deleted — to exactly what a live symbolization said. Needs a C
//! compiler (`cc`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use bpfmux::normalize::capture::{CaptureCache, Place};
use bpfmux::symbolize::{SymResult, UserSymbolizer};
use object::{Object, ObjectSymbol};

#[path = "common/scratch.rs"]
mod scratch;
use scratch::Scratch;

#[path = "common/vdso.rs"]
mod vdso;
use vdso::vdso_range;

/// `main` → `a` → `b`, which waits for a byte on standard input, then all
/// return and the program exits.
const PROGRAM: &str = r#"
#include <unistd.h>
__attribute__((noipa)) int b(int x) { char c; return (int)read(0, &c, 1) + x; }
__attribute__((noipa)) int a(int x) { return b(x + 1) * 2; }
int main(void) { return a(1) > 100; }
"#;

fn build(dir: &Path) -> PathBuf {
    let src = dir.join("chain.c");
    std::fs::write(&src, PROGRAM).unwrap();
    let exe = dir.join("chain");
    let out = Command::new("cc")
        .args(["-g", "-O1", "-fno-omit-frame-pointer", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .expect("a C compiler (cc) is needed");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// Virtual addresses of `names` in `exe`.
fn symbol_addrs(exe: &Path, names: &[&str]) -> Vec<u64> {
    let data = std::fs::read(exe).unwrap();
    let obj = object::File::parse(&*data).unwrap();
    names
        .iter()
        .map(|n| {
            obj.symbols()
                .find(|s| s.name() == Ok(n))
                .unwrap_or_else(|| panic!("{n} not in {}", exe.display()))
                .address()
        })
        .collect()
}

/// Where the executable's vaddr 0 is in process `pid` (its mapping at file
/// offset 0), once it is mapped.
fn load_bias(pid: u32, exe: &Path) -> u64 {
    for _ in 0..400 {
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
        let start = maps.lines().find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 6 && f[2] == "00000000" && Path::new(f[5]) == exe)
                .then(|| u64::from_str_radix(l.split('-').next()?, 16).ok())
                .flatten()
        });
        if let Some(s) = start {
            return s;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    panic!("{} never mapped", exe.display());
}

/// Addresses spread over process `pid`'s vDSO.
fn vdso_addrs(pid: u32) -> Vec<u64> {
    let (s, e) = vdso_range(&pid.to_string());
    (1..16).map(|i| s + i * (e - s) / 16).collect()
}

#[test]
fn exited_process_symbolizes_like_a_live_one() {
    let dir = Scratch::new("capture-exited");
    let exe = build(&dir.0);
    let vaddrs = symbol_addrs(&exe, &["b", "a", "main"]);
    let mut child = Command::new(&exe).stdin(Stdio::piped()).spawn().unwrap();
    let pid = child.id();
    let bias = load_bias(pid, &exe);
    // An address one byte into each function, as a return address would be;
    // then addresses across its vDSO (looked up in ours once it is gone).
    let mut addrs: Vec<u64> = vaddrs.iter().map(|v| v + bias + 1).collect();
    addrs.extend(vdso_addrs(pid));

    // While it lives: what a live symbolization says, and the capture.
    let mut live_syms = UserSymbolizer::default();
    let live: Vec<SymResult> = live_syms
        .symbolize(pid, &addrs)
        .unwrap()
        .into_iter()
        .map(|s| s.result)
        .collect();
    let names: Vec<String> = live
        .iter()
        .map(|r| match r {
            SymResult::Symbol(s) => format!("{}+{:#x}", s.name, s.offset),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(names[..3], ["b+0x1", "a+0x1", "main+0x1"], "live");
    assert!(
        names[3..].iter().any(|n| n.starts_with("__vdso_")),
        "a vDSO function among {names:?}"
    );
    let mut cache = CaptureCache::default();
    let frames = cache.normalize(pid, &addrs);
    assert!(
        frames[..3]
            .iter()
            .all(|f| matches!(f.place, Place::File { .. })),
        "{frames:?}"
    );
    assert!(
        frames[3..]
            .iter()
            .all(|f| matches!(f.place, Place::Vdso { .. })),
        "{frames:?}"
    );

    // Gone: file deleted, process exited and reaped.
    std::fs::remove_file(&exe).unwrap();
    child.stdin.take().unwrap().write_all(b"x").unwrap();
    assert!(child.wait().unwrap().success());
    assert!(
        UserSymbolizer::default().symbolize(pid, &addrs).is_err(),
        "the process is gone"
    );

    // Symbolized later, by another symbolizer: the same, DWARF lines too.
    let later: Vec<SymResult> = UserSymbolizer::default()
        .symbolize_captured(&cache, &frames)
        .into_iter()
        .map(|r| r.expect("every frame was normalized"))
        .collect();
    assert_eq!(later, live);
    let SymResult::Symbol(b) = &later[0] else {
        unreachable!()
    };
    assert!(
        b.file
            .as_deref()
            .is_some_and(|f| f.ends_with("chain.c") && b.line.is_some()),
        "{b:?}"
    );

    // A stack read only now, in a new round, has nothing left to normalize
    // it with (within the round of the capture the cached mappings answer).
    cache.new_round();
    let late = cache.normalize(pid, &addrs);
    assert!(late.iter().all(|f| f.place == Place::Unknown), "{late:?}");
    assert_eq!(cache.stats().failures, addrs.len() as u64);
}
