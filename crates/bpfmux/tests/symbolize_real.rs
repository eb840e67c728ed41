//! Symbolization of real code against independent tools on the same files:
//! every sized function of libc (from `readelf`, with the debug file's
//! `.symtab` when installed) and every PLT stub (`objdump`'s names) get a
//! name; inline chains match `addr2line -i`; the vDSO is named from the
//! process's own image; kernel data objects and the last kallsyms symbol are
//! named. Needs binutils (readelf, objdump, addr2line); the kernel part
//! needs root (kallsyms addresses).

use std::collections::{BTreeMap, HashSet};
use std::process::Command;

use bpfmux::symbolize::{KernelSymbolizer, SymResult, Symbol, SymbolKind, UserSymbolizer};

#[path = "common/vdso.rs"]
mod vdso;
use vdso::vdso_range;

fn tool(cmd: &str, args: &[&str], input: Option<&str>) -> String {
    use std::io::Write;
    let mut c = Command::new(cmd)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{cmd} (binutils) is needed: {e}"));
    let mut stdin = c.stdin.take().unwrap();
    let input = input.unwrap_or("").to_string();
    let w = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = c.wait_with_output().unwrap();
    w.join().unwrap().unwrap();
    assert!(out.status.success(), "{cmd} {args:?} failed");
    String::from_utf8(out.stdout).unwrap()
}

/// Path and load base of libc in this process.
fn libc() -> (String, u64) {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    for l in maps.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() >= 6 && f[5].contains("/libc.so") && f[2] == "00000000" {
            let start = u64::from_str_radix(f[0].split('-').next().unwrap(), 16).unwrap();
            return (f[5].to_string(), start);
        }
    }
    panic!("libc not mapped");
}

/// Sized, defined FUNC/IFUNC symbols: start → (size, names).
fn functions(path: &str, into: &mut BTreeMap<(u64, u64), HashSet<String>>) {
    for l in tool("readelf", &["-sW", path], None).lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() < 8 || !f[0].ends_with(':') || !matches!(f[3], "FUNC" | "IFUNC") {
            continue;
        }
        let size: u64 = match f[2].strip_prefix("0x") {
            Some(h) => u64::from_str_radix(h, 16).unwrap(),
            None => f[2].parse().unwrap(),
        };
        if f[6] == "UND" || size == 0 {
            continue;
        }
        let value = u64::from_str_radix(f[1], 16).unwrap();
        let name = f[7].split('@').next().unwrap().to_string();
        into.entry((value, size)).or_default().insert(name);
    }
}

fn debug_file(path: &str) -> Option<String> {
    let notes = tool("readelf", &["-nW", path], None);
    let id = notes
        .split("Build ID: ")
        .nth(1)?
        .split_whitespace()
        .next()?;
    let p = format!("/usr/lib/debug/.build-id/{}/{}.debug", &id[..2], &id[2..]);
    std::path::Path::new(&p).exists().then_some(p)
}

/// A clone (`f.cold`, `f.part.0`) is `f` in DWARF.
fn base(n: &str) -> &str {
    n.split(['.', '@']).next().unwrap()
}

fn symbol(r: &SymResult) -> Option<&Symbol> {
    match r {
        SymResult::Symbol(s) => Some(s),
        _ => None,
    }
}

#[test]
fn every_libc_function_and_plt_stub_is_named() {
    let (path, load) = libc();
    let mut funcs = BTreeMap::new();
    functions(&path, &mut funcs);
    if let Some(d) = debug_file(&path) {
        functions(&d, &mut funcs);
    }
    let mut want: Vec<(u64, HashSet<String>)> = Vec::new();
    for &(v, size) in funcs.keys() {
        for a in [v, v + size / 2, v + size - 1] {
            // Every name of every sized function covering `a`.
            let names: HashSet<String> = funcs
                .range(..=(a, u64::MAX))
                .rev()
                .take(64)
                .filter(|((s, z), _)| *s <= a && a < s + z)
                .flat_map(|(_, n)| n.iter().map(|n| base(n).to_string()))
                .collect();
            want.push((a, names));
        }
    }
    let mut stubs = Vec::new();
    let plt = tool(
        "objdump",
        &[
            "-d", "-j", ".plt", "-j", ".plt.sec", "-j", ".plt.got", &path,
        ],
        None,
    );
    for l in plt.lines() {
        if let Some((addr, rest)) = l.split_once(" <") {
            if let (Ok(a), Some(name)) = (u64::from_str_radix(addr, 16), rest.strip_suffix(">:")) {
                if name.ends_with("@plt") {
                    stubs.push((a, name.to_string()));
                }
            }
        }
    }
    let addrs: Vec<u64> = want
        .iter()
        .map(|(a, _)| a + load)
        .chain(stubs.iter().map(|(a, _)| a + load))
        .collect();
    let mut sym = UserSymbolizer::default();
    let out = sym.symbolize(std::process::id(), &addrs).unwrap();
    let mut bad = Vec::new();
    for ((a, names), r) in want.iter().zip(&out) {
        match symbol(&r.result) {
            Some(s) if names.contains(base(&s.name)) => {}
            _ => bad.push(format!("{a:#x} {names:?}: {:?}", r.result)),
        }
    }
    for ((a, name), r) in stubs.iter().zip(&out[want.len()..]) {
        match symbol(&r.result) {
            // objdump names ifunc stubs *ABS*+0xRESOLVER@plt; we name them
            // after the resolver's symbol.
            Some(s) if s.kind == SymbolKind::Plt && s.offset == 0 => {
                if !name.starts_with("*ABS*") && s.name != *name {
                    bad.push(format!("{a:#x} {name}: {}", s.name));
                }
            }
            _ => bad.push(format!("{a:#x} {name}: {:?}", r.result)),
        }
    }
    assert!(
        want.len() > 1000 && stubs.len() > 10,
        "{} functions, {} stubs",
        want.len(),
        stubs.len()
    );
    assert!(
        bad.is_empty(),
        "{} of {} addresses unnamed or misnamed, first: {:#?}",
        bad.len(),
        addrs.len(),
        &bad[..bad.len().min(10)]
    );
}

#[test]
fn inline_chains_match_addr2line() {
    let (path, load) = libc();
    if debug_file(&path).is_none() {
        panic!("needs libc's debug file (Debian: libc6-dbg) for DWARF inline info");
    }
    let mut funcs = BTreeMap::new();
    functions(&path, &mut funcs);
    // Middles and quarter points of exported functions: many are inlined.
    let cands: Vec<u64> = funcs
        .keys()
        .flat_map(|&(v, s)| [v + s / 4, v + s / 2, v + 3 * s / 4])
        .collect();
    let input: String = cands.iter().map(|a| format!("{a:#x}\n")).collect();
    // -i: innermost frame first, then its callers; a frame is two lines.
    // Each address ends with a marker address of 0 ("??") so the groups
    // can be told apart.
    let input: String = input.lines().map(|l| format!("{l}\n0x0\n")).collect();
    let out = tool("addr2line", &["-i", "-f", "-e", &path], Some(&input));
    let lines: Vec<&str> = out.lines().collect();
    let mut chains: Vec<(u64, Vec<String>)> = Vec::new();
    let mut i = 0;
    for &a in &cands {
        let mut frames = Vec::new();
        while i + 1 < lines.len() && lines[i] != "??" {
            frames.push(lines[i].to_string());
            i += 2;
        }
        i += 2; // the marker
        if frames.len() >= 2 {
            chains.push((a, frames));
        }
    }
    assert!(
        chains.len() >= 50,
        "only {} inlined addresses",
        chains.len()
    );
    let addrs: Vec<u64> = chains.iter().map(|(a, _)| a + load).collect();
    let out = UserSymbolizer::default()
        .symbolize(std::process::id(), &addrs)
        .unwrap();
    let mut bad = Vec::new();
    for ((a, frames), r) in chains.iter().zip(&out) {
        let Some(s) = symbol(&r.result) else {
            bad.push(format!("{a:#x}: {:?}", r.result));
            continue;
        };
        // Ours: outermost first; addr2line: innermost first.
        let ours: Vec<&str> = s.inlined.iter().rev().map(|f| f.name.as_str()).collect();
        let theirs: Vec<&str> = frames[..frames.len() - 1]
            .iter()
            .map(String::as_str)
            .collect();
        if ours != theirs || s.inlined.iter().any(|f| f.line.is_none()) {
            bad.push(format!("{a:#x}: ours {ours:?}, addr2line {theirs:?}"));
        }
    }
    assert!(
        bad.is_empty(),
        "{} of {} inline chains differ: {:#?}",
        bad.len(),
        chains.len(),
        &bad[..bad.len().min(10)]
    );
}

#[test]
fn vdso_is_named_from_the_process_image() {
    let (start, end) = vdso_range("self");
    // A copy for readelf, read independently of the library.
    let image = unsafe { std::slice::from_raw_parts(start as *const u8, (end - start) as usize) };
    let file = std::env::temp_dir().join(format!("bpfmux-vdso-{}.so", std::process::id()));
    std::fs::write(&file, image).unwrap();
    let mut funcs = BTreeMap::new();
    functions(file.to_str().unwrap(), &mut funcs);
    std::fs::remove_file(&file).unwrap();
    assert!(!funcs.is_empty(), "vDSO has no sized functions?");
    let addrs: Vec<u64> = funcs.keys().map(|&(v, s)| start + v + s / 2).collect();
    let out = UserSymbolizer::default()
        .symbolize(std::process::id(), &addrs)
        .unwrap();
    for (((_, names), a), r) in funcs.iter().zip(&addrs).zip(&out) {
        let s = symbol(&r.result).unwrap_or_else(|| panic!("{a:#x}: {:?}", r.result));
        assert!(
            names.contains(&s.name),
            "{a:#x}: {} not in {names:?}",
            s.name
        );
        assert_eq!(s.module.as_deref(), Some(std::path::Path::new("[vdso]")));
    }
}

#[test]
fn kernel_data_objects_and_the_last_symbol() {
    let k = KernelSymbolizer::load().expect("kallsyms with addresses (run as root)");
    let text = std::fs::read_to_string("/proc/kallsyms").unwrap();
    let mut syms: Vec<(u64, char, &str)> = text
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let a = u64::from_str_radix(f.next()?, 16).ok()?;
            let t = f.next()?.chars().next()?;
            Some((a, t, f.next()?))
        })
        .filter(|(a, t, _)| *a != 0 && "tTwWdDbBrR".contains(*t))
        .collect();
    syms.sort_by_key(|s| s.0);
    // A data symbol with room after it: named as data. (Without
    // CONFIG_KALLSYMS_ALL the only ones are section markers like
    // __start_rodata; still data, not "_etext+0x…".)
    let is_end = |n: &str| n.starts_with("__stop_") || n.starts_with("__end_") || n == "_edata";
    let i = syms
        .windows(2)
        .position(|w| {
            matches!(w[0].1, 'd' | 'D' | 'b' | 'B' | 'r' | 'R')
                && w[1].0 > w[0].0 + 8
                && !is_end(w[0].2)
        })
        .expect("a data symbol");
    let (a, _, name) = syms[i];
    let r = &k.symbolize(&[a + 4])[0].result;
    let s = symbol(r).unwrap_or_else(|| panic!("{name}+4: {r:?}"));
    let same_addr: Vec<&str> = syms.iter().filter(|x| x.0 == a).map(|x| x.2).collect();
    assert!(
        same_addr.contains(&s.name.as_str()),
        "{} not in {same_addr:?}",
        s.name
    );
    assert_eq!(s.kind, SymbolKind::Data);
    // Nothing is named after _etext.
    let etext = syms.iter().find(|s| s.2 == "_etext").expect("_etext").0;
    if let Some(s) = symbol(&k.symbolize(&[etext + 1])[0].result) {
        assert_ne!(s.name, "_etext");
    }
    // The highest symbol names an address just past it.
    let (a, _, name) = *syms.last().unwrap();
    let r = &k.symbolize(&[a + 1])[0].result;
    let s = symbol(r).unwrap_or_else(|| panic!("last symbol {name}+1: {r:?}"));
    assert_eq!((s.offset, s.name.as_str()), (1, name));
}

/// Where kallsyms lists a function under its own name and a `__pi_`
/// alias (x86's position-independent copies: memset, memcpy, the
/// retpoline thunks), the answer is the function's own name.
#[test]
fn kernel_aliases_give_way_to_the_plain_name() {
    let k = KernelSymbolizer::load().expect("kallsyms with addresses (run as root)");
    let text = std::fs::read_to_string("/proc/kallsyms").unwrap();
    let mut at: BTreeMap<u64, Vec<&str>> = BTreeMap::new();
    for l in text.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() >= 3 && matches!(f[1], "t" | "T") {
            if let Ok(a) = u64::from_str_radix(f[0], 16) {
                at.entry(a).or_default().push(f[2]);
            }
        }
    }
    let mut bad = Vec::new();
    for (a, names) in &at {
        let plain = names
            .iter()
            .any(|n| !n.starts_with("__pi_") && n.chars().next().is_some_and(|c| c != '_'));
        if !plain || !names.iter().any(|n| n.starts_with("__pi_")) {
            continue;
        }
        match symbol(&k.symbolize(&[a + 1])[0].result) {
            Some(s) if !s.name.starts_with('_') => {}
            other => bad.push(format!("{a:#x} {names:?}: {other:?}")),
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}
