//! What `bpfmux maps` and `bpfmux sym` print for names that are bytes, not
//! text, on failed `--json` runs, and for addresses streamed on standard
//! input by a caller who waits for each answer. Runs on the host (as root:
//! reads other processes' maps).

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::ffi::OsStrExt;
use std::process::{Child, Command, Stdio};
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
