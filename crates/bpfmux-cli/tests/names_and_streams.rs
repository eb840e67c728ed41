//! What `bpfmux maps` and `bpfmux sym` print for names that are bytes, not
//! text, on failed `--json` runs, for addresses streamed on standard input
//! by a caller who waits for each answer, and for a stripped program whose
//! debug file only an HTTP server has (a debuginfod's URL layout, served by
//! Python's http.server), by process and by file. Runs on the host (as
//! root: reads other processes' maps); needs cc, binutils and python3.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn bpfmux() -> Command {
    Command::new(env!("CARGO_BIN_EXE_bpfmux"))
}

#[path = "../../bpfmux/tests/common/scratch.rs"]
mod scratch;
use scratch::Scratch;

/// A child killed on drop.
struct Kill(Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Start of the executable mapping of `pid` whose name contains `part`,
/// once exec has mapped it.
fn code_start(pid: u32, part: &[u8]) -> u64 {
    for _ in 0..400 {
        let maps = std::fs::read(format!("/proc/{pid}/maps")).unwrap_or_default();
        let hit = maps.split(|&b| b == b'\n').find(|l| {
            l.windows(6).any(|w| w == b" r-xp ") && l.windows(part.len()).any(|w| w == part)
        });
        if let Some(l) = hit {
            let l = String::from_utf8_lossy(l);
            return u64::from_str_radix(l.split('-').next().unwrap(), 16).unwrap();
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("{} never mapped", String::from_utf8_lossy(part));
}

/// Starts `cmd`, a file this process just wrote. Another test thread that
/// forks meanwhile holds the written file open until its child execs (the
/// descriptor is close-on-exec, not close-on-fork): exec fails with ETXTBSY
/// until then, so try again for a while.
fn spawn_fresh(cmd: &mut Command) -> Child {
    for _ in 0..200 {
        match cmd.spawn() {
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) => {
                std::thread::sleep(Duration::from_millis(10));
            }
            r => return r.unwrap(),
        }
    }
    panic!("{cmd:?}: still busy after 2 s");
}

#[test]
fn names_that_are_not_utf8_come_out_escaped_in_json() {
    let dir = Scratch::new("bytes");
    let exe = dir.0.join(OsStr::from_bytes(b"sl\xffeep"));
    std::fs::copy("/bin/sleep", &exe).unwrap();
    let child = Kill(spawn_fresh(Command::new(&exe).arg("600")));
    let pid = child.0.id();
    let code = code_start(pid, b"sl\xffeep");
    let pid = pid.to_string();
    let addr = format!("{:#x}", code + 0x10);
    for args in [
        vec!["maps", "--pid", &pid, "--json"],
        vec!["maps", "--pid", &pid, "--json", &addr],
        vec!["sym", "--pid", &pid, "--json", &addr],
    ] {
        let out = bpfmux().args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{args:?}: {:?} {stderr}", out.status);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {stderr}"));
        let text = v.to_string();
        assert!(text.contains(r"sl\\xffeep"), "{args:?}: {text}");
    }
    // The text output escapes the same way.
    let out = bpfmux()
        .args(["sym", "--pid", &pid, &addr])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains(r"sl\xffeep"));
}

#[test]
fn a_failed_json_run_leaves_no_open_array() {
    // No such process (above the largest pid_max).
    for verb in ["sym", "maps"] {
        let out = bpfmux()
            .args([verb, "--pid", "4194303", "--json", "0x1000"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{verb}");
        assert!(!out.stderr.is_empty(), "{verb}: no message");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.is_empty() || serde_json::from_str::<serde_json::Value>(&stdout).is_ok(),
            "{verb}: stdout is {stdout:?}"
        );
    }
}

/// `bpfmux sym --pid PID --json` reading addresses from a pipe, each
/// answer awaited as a caller symbolizing a live stack would.
struct SymStream {
    sym: Kill,
    stdin: Option<std::process::ChildStdin>,
    rx: std::sync::mpsc::Receiver<String>,
    reader: std::thread::JoinHandle<()>,
    /// Every line of standard output so far.
    lines: Vec<String>,
}

impl SymStream {
    fn start(pid: u32) -> Self {
        let mut sym = Kill(
            bpfmux()
                .args(["sym", "--pid", &pid.to_string(), "--json"])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        let stdin = sym.0.stdin.take();
        let (tx, rx) = std::sync::mpsc::channel();
        let stdout = sym.0.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            for l in BufReader::new(stdout).lines() {
                let Ok(l) = l else { break };
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        Self {
            sym,
            stdin,
            rx,
            reader,
            lines: Vec::new(),
        }
    }

    /// Writes one address and waits (at most 5 s) for its answer line.
    fn ask(&mut self, addr: u64) -> String {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{addr:#x}").unwrap();
        stdin.flush().unwrap();
        let t = Instant::now();
        // "[" comes first, alone.
        loop {
            let l = self
                .rx
                .recv_timeout(Duration::from_secs(5).saturating_sub(t.elapsed()))
                .unwrap_or_else(|_| panic!("{addr:#x}: no answer within 5 s"));
            self.lines.push(l.clone());
            if l.contains("\"addr\"") {
                return l;
            }
        }
    }

    /// Writes `addr`, ends the input; the exit status and the whole output.
    fn finish(mut self, addr: u64) -> (Option<i32>, String) {
        let mut stdin = self.stdin.take().unwrap();
        writeln!(stdin, "{addr:#x}").unwrap();
        drop(stdin);
        let status = self.sym.0.wait().unwrap();
        self.reader.join().unwrap();
        self.lines.extend(self.rx.try_iter());
        (status.code(), self.lines.join("\n"))
    }
}

/// Writes one address at a time to `bpfmux sym` and waits for its answer,
/// as a caller symbolizing a live stack would; then the target exits.
#[test]
fn streamed_addresses_are_answered_without_a_full_batch() {
    let target = Kill(Command::new("sleep").arg("600").spawn().unwrap());
    let pid = target.0.id();
    let code = code_start(pid, b"/sleep");
    let mut sym = SymStream::start(pid);
    for k in 0..3u64 {
        sym.ask(code + 0x40 * k);
    }
    // The target goes away: what was answered stays; the last address is
    // answered from the mappings already read, or the run says why not.
    drop(target);
    let (status, text) = sym.finish(code);
    let v: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
    let answers = v.as_array().map_or(0, Vec::len);
    match status {
        Some(0) => assert_eq!(answers, 4, "{text}"),
        Some(1) => assert_eq!(answers, 3, "{text}"),
        other => panic!("exit {other:?}: {text}"),
    }
}

/// An address asked again after its process exited gets the answer it had
/// while the process lived: the file it is in was looked at already. The
/// target is a bpfmux waiting for addresses (a binary with symbols and
/// DWARF that is always at hand).
#[test]
fn a_file_looked_at_still_answers_after_its_process_exits() {
    let mut target = Kill(
        bpfmux()
            .args(["maps", "--pid", "1", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let pid = target.0.id();
    let code = code_start(pid, b"/bpfmux");
    let mut sym = SymStream::start(pid);
    let addrs: Vec<u64> = (1..6).map(|k| code + 0x4000 * k + 0x10).collect();
    let live: Vec<String> = addrs.iter().map(|&a| sym.ask(a)).collect();
    let named = |l: &String| l.contains("\"kind\":\"symbol\"");
    assert!(live.iter().any(named), "{live:#?}");
    drop(target.0.stdin.take());
    target.0.wait().unwrap();
    let after: Vec<String> = addrs.iter().map(|&a| sym.ask(a)).collect();
    // Lines differ only in their lead ("  " or ", ").
    let body = |l: &String| l.trim_start_matches([' ', ',']).to_string();
    assert_eq!(
        live.iter().map(body).collect::<Vec<_>>(),
        after.iter().map(body).collect::<Vec<_>>()
    );
    let (status, text) = sym.finish(code + 0x10);
    assert_eq!(status, Some(0), "{text}");
}

#[test]
fn help_states_the_input_line_limit() {
    for verb in ["sym", "maps"] {
        let out = bpfmux().args([verb, "--help"]).output().unwrap();
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(help.contains("at most 64 KiB"), "{verb}: {help}");
    }
}

fn ok(c: &mut Command) -> Output {
    let out = c
        .output()
        .unwrap_or_else(|e| panic!("{c:?} (cc, binutils and python3 are needed): {e}"));
    assert!(
        out.status.success(),
        "{c:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Where `pid` maps file offset 0 of the file whose name ends with `name`.
fn load_base(pid: u32, name: &str) -> u64 {
    for _ in 0..400 {
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
        let hit = maps.lines().find(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() >= 6 && f[2] == "00000000" && f[5].ends_with(name)
        });
        if let Some(l) = hit {
            return u64::from_str_radix(l.split('-').next().unwrap(), 16).unwrap();
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("{name} never mapped");
}

#[test]
fn sym_names_a_stripped_program_from_debuginfod() {
    let dir = Scratch::new("sym-debuginfod");
    let src = dir.0.join("prog.c");
    std::fs::write(
        &src,
        "#include <stdio.h>\n\
         static int __attribute__((noinline)) hidden_helper(int x)\n{\n\treturn x * 3 + 1;\n}\n\
         int main(int argc, char **argv)\n{\n\t(void)argv;\n\twhile (getchar() != EOF)\n\
         \t\targc = hidden_helper(argc);\n\treturn argc;\n}\n",
    )
    .unwrap();
    let exe = dir.0.join("prog");
    let debug = dir.0.join("prog.debug");
    ok(Command::new("cc")
        .args(["-g", "-O1", "-Wl,--build-id", "-o"])
        .arg(&exe)
        .arg(&src));
    ok(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(&exe)
        .arg(&debug));
    let full = dir.0.join("prog.full");
    std::fs::copy(&exe, &full).unwrap();
    ok(Command::new("strip").arg("-s").arg(&exe));
    let id = bpfmux::normalize::read_build_id(&std::fs::File::open(&exe).unwrap())
        .unwrap()
        .expect("a build ID")
        .to_string();
    // debuginfod's layout: /buildid/ID/debuginfo.
    let served = dir.0.join("served");
    std::fs::create_dir_all(served.join("buildid").join(&id)).unwrap();
    std::fs::copy(&debug, served.join("buildid").join(&id).join("debuginfo")).unwrap();
    let nm = ok(Command::new("nm").arg(&debug));
    let vaddr = String::from_utf8_lossy(&nm.stdout)
        .lines()
        .find(|l| l.ends_with(" hidden_helper"))
        .and_then(|l| u64::from_str_radix(l.split(' ').next()?, 16).ok())
        .expect("hidden_helper in the debug file");

    let mut http = Command::new("python3");
    http.args([
        "-u",
        "-m",
        "http.server",
        "--bind",
        "127.0.0.1",
        "0",
        "--directory",
    ])
    .arg(&served)
    .stdout(Stdio::piped())
    .stderr(Stdio::null());
    let mut http = Kill(http.spawn().unwrap());
    let mut line = String::new();
    BufReader::new(http.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line
        .split_whitespace()
        .skip_while(|w| *w != "port")
        .nth(1)
        .unwrap_or_else(|| panic!("no port in {line:?}"));
    let url = format!("http://127.0.0.1:{port}");

    let prog = Kill(Command::new(&exe).stdin(Stdio::piped()).spawn().unwrap());
    let pid = prog.0.id();
    let addr = format!("{:#x}", load_base(pid, "/prog") + vaddr + 1);
    let cache = dir.0.join("cache");
    let sym = |extra: &[&str]| {
        let out = ok(Command::new(env!("CARGO_BIN_EXE_bpfmux"))
            .args(["sym", "--pid", &pid.to_string()])
            .args(extra)
            .arg(&addr)
            .env("DEBUGINFOD_URLS", &url)
            .env("DEBUGINFOD_CACHE_PATH", &cache));
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let named = |out: &str| out.contains(" hidden_helper+0x1 at ") && out.contains("prog.c:");

    let (out, err) = sym(&["--no-debuginfod"]);
    assert!(!named(&out) && err.is_empty(), "{out}{err}");
    let (out, err) = sym(&[]);
    assert!(named(&out), "{out}{err}");
    assert!(
        err.contains(&format!(
            "bpfmux sym: debuginfod: 1 file(s) downloaded from {url}, 0 from its cache"
        )),
        "{err}"
    );
    assert!(Path::new(&cache).join(&id).join("debuginfo").is_file());
    let (out, err) = sym(&[]);
    assert!(named(&out), "{out}{err}");
    assert!(
        err.contains("bpfmux sym: debuginfod: 0 file(s) downloaded, 1 from its cache"),
        "{err}"
    );
    drop(prog);

    // --file: the same place in the files, no process. The unstripped
    // build by virtual address and by file offset; the stripped one from
    // the debuginfod cache.
    let file_sym = |file: &Path, extra: &[&str], at: u64| {
        let out = ok(Command::new(env!("CARGO_BIN_EXE_bpfmux"))
            .arg("sym")
            .arg("--file")
            .arg(file)
            .args(extra)
            .arg(format!("{at:#x}"))
            .env("DEBUGINFOD_URLS", &url)
            .env("DEBUGINFOD_CACHE_PATH", &cache));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let by_file = |out: &str| out.contains(" hidden_helper+0x1 at ") && out.contains("prog.c:");
    let out = file_sym(&full, &["--no-debuginfod"], vaddr + 1);
    assert!(by_file(&out), "{out}");
    let readelf = ok(Command::new("readelf").arg("-lW").arg(&full));
    let off = String::from_utf8_lossy(&readelf.stdout)
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|f| f.first() == Some(&"LOAD"))
        .find_map(|f| {
            let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok();
            let (o, v, size) = (hex(f[1])?, hex(f[2])?, hex(f[4])?);
            (v..v + size).contains(&vaddr).then(|| vaddr - v + o)
        })
        .expect("a PT_LOAD holds the helper");
    let out = file_sym(&full, &["--no-debuginfod", "--file-offsets"], off + 1);
    assert!(by_file(&out), "{out}");
    assert!(!by_file(&file_sym(&exe, &["--no-debuginfod"], vaddr + 1)));
    let out = file_sym(&exe, &[], vaddr + 1);
    assert!(by_file(&out), "{out}");
    // A file that is not ELF is refused up front, not answered "??".
    let out = Command::new(env!("CARGO_BIN_EXE_bpfmux"))
        .args(["sym", "--file"])
        .arg(&src)
        .arg("0x1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && out.stdout.is_empty() && err.contains("not an ELF file"),
        "{err}"
    );
}
