//! Symbolization of small programs built here with the host's C and C++
//! compilers, each made to show one shape of real binaries: padding after
//! a size-0 label, a C function whose name a C++ demangler would accept,
//! C++ functions split into hot and cold parts, symbols found only through
//! `.gnu_debuglink`. Needs cc, c++ and binutils (objcopy, strip).

use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use bpfmux::symbolize::elf_table::{ElfTable, EntryKind};
use bpfmux::symbolize::{SymResult, UserSymbolizer};
use object::{Object, ObjectSymbol};

#[path = "common/scratch.rs"]
mod scratch;
use scratch::Scratch;

/// Compiles `src` (`lang`: "c" or "c++") into an executable `name` in `dir`.
fn build(dir: &Scratch, name: &str, lang: &str, src: &str, flags: &[&str]) -> PathBuf {
    let (cc, ext) = if lang == "c++" {
        ("c++", "cc")
    } else {
        ("cc", "c")
    };
    let file = dir.0.join(format!("{name}.{ext}"));
    std::fs::write(&file, src).unwrap();
    let exe = dir.0.join(name);
    run(Command::new(cc).args(flags).arg("-o").arg(&exe).arg(&file));
    exe
}

fn run(c: &mut Command) {
    let out = c
        .output()
        .unwrap_or_else(|e| panic!("{c:?} (compilers and binutils are needed): {e}"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{c:?}: {err}");
}

/// Virtual address of the symbol `name` (exact) in `exe`.
fn symbol_addr(exe: &Path, name: &str) -> u64 {
    let data = std::fs::read(exe).unwrap();
    let obj = object::File::parse(&*data).unwrap();
    obj.symbols()
        .find(|s| s.name() == Ok(name))
        .unwrap_or_else(|| panic!("{name} not in {}", exe.display()))
        .address()
}

/// The program running (it must pause), killed on drop.
struct Running(Child);

impl Running {
    fn start(exe: &Path) -> Self {
        let c = Command::new(exe).spawn().unwrap();
        let me = Self(c);
        // Until the exec, the child is this test's copy (its exe and maps).
        let want = exe.canonicalize().unwrap();
        let execd =
            || std::fs::read_link(format!("/proc/{}/exe", me.0.id())).ok() == Some(want.clone());
        for _ in 0..400 {
            if execd() && me.load_bias().is_some() {
                return me;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        panic!("{} never mapped", exe.display());
    }

    /// Where a (position-independent) executable's vaddr 0 is: the start
    /// of its mapping at file offset 0.
    fn load_bias(&self) -> Option<u64> {
        let exe = std::fs::read_link(format!("/proc/{}/exe", self.0.id())).ok()?;
        let maps = std::fs::read_to_string(format!("/proc/{}/maps", self.0.id())).ok()?;
        let line = maps.lines().find(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() >= 6 && f[2] == "00000000" && Path::new(f[5]) == exe
        })?;
        u64::from_str_radix(line.split('-').next()?, 16).ok()
    }

    /// Symbolizes vaddrs of the executable; text per address.
    fn symbolize(&self, vaddrs: &[u64]) -> Vec<String> {
        let bias = self.load_bias().unwrap();
        let addrs: Vec<u64> = vaddrs.iter().map(|v| v + bias).collect();
        let out = UserSymbolizer::default()
            .symbolize(self.0.id(), &addrs)
            .unwrap();
        out.iter()
            .map(|s| match &s.result {
                SymResult::Symbol(sym) => format!("{}+{:#x}", sym.name, sym.offset),
                other => format!("{other:?}"),
            })
            .collect()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A size-0 label, then alignment padding up to the next function; and a
/// C function whose name reads as an Itanium vendor type (`u8_…`).
const C_PROGRAM: &str = r#"
#include <unistd.h>
__asm__(".text\n"
        ".globl zero_label\n"
        ".type zero_label, @function\n"
        "zero_label:\n"
        "\tret\n"
        "\t.p2align 12\n");
__attribute__((noinline)) int sized_after(int x) { return x * 3 + 1; }
__attribute__((noinline)) int u8_xxxxxxx(int x) { return x * 5 + 2; }
int main(void) { pause(); return sized_after(1) + u8_xxxxxxx(2); }
"#;

#[test]
fn padding_after_a_size0_symbol_has_no_name() {
    let dir = Scratch::new("padding");
    let exe = build(&dir, "padded", "c", C_PROGRAM, &["-O1"]);
    let zero = symbol_addr(&exe, "zero_label");
    let sized = symbol_addr(&exe, "sized_after");
    let table = ElfTable::load(&exe).unwrap();
    // The label's own address may carry its name; the padding may not.
    let at = |a: u64| {
        table
            .lookup(a)
            .map(|h| format!("{}+{:#x}", h.name, h.offset))
    };
    assert_eq!(at(zero).as_deref(), Some("zero_label+0x0"));
    assert_eq!(at(zero + 0x10), None);
    assert_eq!(at(sized + 1).as_deref(), Some("sized_after+0x1"));
    // The same through the whole symbolizer, on the running program.
    let p = Running::start(&exe);
    let got = p.symbolize(&[zero + 0x10, zero + 0x800, sized + 1]);
    assert!(
        got[0].starts_with("NoSymbol") && got[1].starts_with("NoSymbol"),
        "{got:?}"
    );
    assert_eq!(got[2], "sized_after+0x1");
}

#[test]
fn c_names_are_not_demangled() {
    let dir = Scratch::new("cnames");
    for flags in [&["-O1"][..], &["-O1", "-g"]] {
        let exe = build(&dir, "cnames", "c", C_PROGRAM, flags);
        let f = symbol_addr(&exe, "u8_xxxxxxx");
        let got = Running::start(&exe).symbolize(&[f + 1]);
        assert_eq!(got, ["u8_xxxxxxx+0x1"], "{flags:?}");
    }
}

/// A C++ function GCC splits into a hot part and a `.cold` one.
const SPLIT: &str = r#"
#include <stdexcept>
#include <string>
#include <unistd.h>
namespace hb {
__attribute__((noinline)) int parse_number(const char *s) {
  int r = 0;
  for (; *s; s++) {
    if (__builtin_expect(*s < '0' || *s > '9', 0))
      throw std::runtime_error(std::string("bad digit in ") + s);
    r = r * 10 + (*s - '0');
  }
  return r;
}
}
const char *volatile arg = "12";
int main() { pause(); return hb::parse_number(arg); }
"#;

const HOT: &str = "_ZN2hb12parse_numberEPKc";
const COLD: &str = "_ZN2hb12parse_numberEPKc.cold";

/// Names of the hot part at +4 and the cold part at +0x10 of `exe` (which
/// `symbols` is, or is a copy of).
fn split_names(exe: &Path, symbols: &Path) -> Vec<String> {
    let (hot, cold) = (symbol_addr(symbols, HOT), symbol_addr(symbols, COLD));
    Running::start(exe).symbolize(&[hot + 4, cold + 0x10])
}

fn assert_demangled(got: &[String]) {
    assert_eq!(
        got,
        [
            "hb::parse_number(char const*)+0x4",
            "hb::parse_number(char const*) [clone .cold]+0x10"
        ]
    );
}

#[test]
fn cold_parts_of_cpp_functions_are_demangled() {
    let dir = Scratch::new("cold");
    let exe = build(&dir, "split", "c++", SPLIT, &["-O2", "-g"]);
    assert_demangled(&split_names(&exe, &exe));
    // The same without DWARF.
    let exe = build(&dir, "split-nodebug", "c++", SPLIT, &["-O2"]);
    assert_demangled(&split_names(&exe, &exe));
}

#[test]
fn symbols_found_through_gnu_debuglink() {
    let dir = Scratch::new("debuglink");
    let full = build(&dir, "split", "c++", SPLIT, &["-O2", "-g"]);
    // `stripped` keeps only .dynsym; its symbols are in split.debug, found
    // by the name in its .gnu_debuglink (no build-ID path has it).
    let debug = dir.0.join("split.debug");
    let stripped = dir.0.join("stripped");
    run(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(&full)
        .arg(&debug));
    run(Command::new("strip")
        .arg("--strip-all")
        .arg("-o")
        .arg(&stripped)
        .arg(&full));
    run(Command::new("objcopy")
        .arg("--add-gnu-debuglink=split.debug")
        .arg(&stripped)
        .current_dir(&dir.0));
    assert_demangled(&split_names(&stripped, &full));
    // In the .debug directory next to the binary, as Debian installs them.
    std::fs::create_dir(dir.0.join(".debug")).unwrap();
    std::fs::rename(&debug, dir.0.join(".debug/split.debug")).unwrap();
    assert_demangled(&split_names(&stripped, &full));
    // Another build's debug file under that name is not taken, even with
    // the same layout (only a string differs, and so the build ID).
    let src = SPLIT.replace("\"12\"", "\"34\"");
    let other = build(&dir, "other", "c++", &src, &["-O2", "-g"]);
    run(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(&other)
        .arg(dir.0.join(".debug/split.debug")));
    let got = split_names(&stripped, &full);
    assert!(got.iter().all(|g| g.starts_with("NoSymbol")), "{got:?}");
}

/// The first stubs of `.plt` in a static executable, each a `jmp
/// *slot(%rip)` through a slot an IRELATIVE relocation fills: 8 bytes
/// each from the start (non-PIE), or the usual 16 after the 16 of PLT0
/// (`push`; static PIE).
fn static_plt_stubs(exe: &Path) -> Vec<u64> {
    use object::ObjectSection;
    let data = std::fs::read(exe).unwrap();
    let obj = object::File::parse(&*data).unwrap();
    let plt = obj.section_by_name(".plt").expect(".plt");
    let (first, size) = match plt.data().unwrap() {
        [0xff, 0x25, ..] => (0, 8),
        [0xff, 0x35, ..] => (16, 16),
        other => panic!("unknown .plt: {:x?}", &other[..16]),
    };
    (0..3).map(|k| plt.address() + first + size * k).collect()
}

#[test]
fn static_ifunc_stubs_are_named() {
    let dir = Scratch::new("static");
    for flags in [&["-O1", "-static"][..], &["-O1", "-static-pie"]] {
        let exe = build(&dir, "static", "c", C_PROGRAM, flags);
        let table = ElfTable::load(&exe).unwrap();
        let names: Vec<_> = static_plt_stubs(&exe)
            .into_iter()
            .map(|a| table.lookup(a).map(|h| (h.name, h.offset, h.kind)))
            .collect();
        for n in &names {
            let ok = n.as_ref().is_some_and(|(name, off, kind)| {
                name.ends_with("@plt")
                    && !name.starts_with("*ABS*")
                    && *off == 0
                    && *kind == EntryKind::Plt
            });
            assert!(ok, "{flags:?}: {names:?}");
        }
    }
}

#[test]
fn plt_got_stubs_without_an_entry_size_are_named() {
    use object::{ObjectSection, SectionIndex};
    let dir = Scratch::new("pltgot");
    let exe = build(&dir, "pltgot", "c", C_PROGRAM, &["-O1"]);
    let mut data = std::fs::read(&exe).unwrap();
    let (index, stub): (SectionIndex, u64) = {
        let obj = object::File::parse(&*data).unwrap();
        let sec = obj.section_by_name(".plt.got").expect(".plt.got");
        (sec.index(), sec.address())
    };
    // Older linkers leave .plt.got's sh_entsize 0: patch it so (the field
    // is at 56 in an Elf64_Shdr).
    let shoff = u64::from_le_bytes(data[0x28..0x30].try_into().unwrap()) as usize;
    let shentsize = u16::from_le_bytes(data[0x3a..0x3c].try_into().unwrap()) as usize;
    let field = shoff + index.0 * shentsize + 56;
    assert_eq!(data[field..field + 8], 8u64.to_le_bytes());
    data[field..field + 8].copy_from_slice(&0u64.to_le_bytes());
    let table = ElfTable::from_image(&data).unwrap();
    let hit = table.lookup(stub + 2).map(|h| (h.name, h.offset, h.kind));
    assert_eq!(
        hit,
        Some(("__cxa_finalize@plt".to_string(), 2, EntryKind::Plt))
    );
}
