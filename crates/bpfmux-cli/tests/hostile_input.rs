//! The CLI against what a careless or hostile user hands it: closed output
//! pipes, endless or huge input files, malformed numbers and addresses,
//! wrong paths, a million addresses on standard input. Every case must end
//! with a clear message or quietly, never a panic. Runs as root on the host
//! (reads /proc/kallsyms addresses and other processes' maps).

use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, Stdio};

fn bpfmux() -> Command {
    Command::new(env!("CARGO_BIN_EXE_bpfmux"))
}

/// A process to point `--pid` at, killed on drop.
struct Target(Child);

impl Target {
    fn sleep() -> Self {
        let c = Command::new("sleep")
            .arg("600")
            .spawn()
            .expect("spawn sleep");
        // Wait until exec has mapped sleep and its libc (the last step).
        for _ in 0..400 {
            let maps = std::fs::read_to_string(format!("/proc/{}/maps", c.id()));
            if maps.is_ok_and(|m| m.contains("/sleep") && m.contains("libc.so")) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        Self(c)
    }

    fn pid(&self) -> String {
        self.0.id().to_string()
    }

    /// Start of its first executable mapping.
    fn code_addr(&self) -> u64 {
        let maps = std::fs::read_to_string(format!("/proc/{}/maps", self.0.id())).unwrap();
        let line = maps
            .lines()
            .find(|l| l.contains(" r-xp ") && l.ends_with("/sleep"))
            .expect("sleep's code mapping");
        u64::from_str_radix(line.split('-').next().unwrap(), 16).unwrap()
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs with stdout a pipe whose reader is already gone: the first write
/// meets a closed pipe. `block_sigpipe`: started with SIGPIPE blocked, as
/// some parents leave it, so a write would see EPIPE instead.
fn closed_pipe(args: &[&str], block_sigpipe: bool) -> (std::process::ExitStatus, String) {
    use std::os::unix::process::CommandExt;
    let mut cmd = bpfmux();
    cmd.args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .stdin(Stdio::null());
    if block_sigpipe {
        // SAFETY: only sigprocmask between fork and exec, on a local set.
        unsafe {
            cmd.pre_exec(|| {
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut set);
                libc::sigaddset(&mut set, libc::SIGPIPE);
                libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
                Ok(())
            });
        }
    }
    let mut c = cmd.spawn().unwrap();
    drop(c.stdout.take());
    let out = c.wait_with_output().unwrap();
    (
        out.status,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn every_verb_ends_quietly_on_a_closed_pipe() {
    let t = Target::sleep();
    let pid = t.pid();
    let addr = format!("{:#x}", t.code_addr());
    let kaddr = kernel_text_addr();
    let cases: Vec<Vec<&str>> = vec![
        vec!["--help"],
        vec!["features"],
        vec!["features", "--json"],
        vec!["maps", "--pid", &pid],
        vec!["maps", "--pid", &pid, "--json"],
        vec!["maps", "--pid", &pid, &addr],
        vec!["sym", "--pid", &pid, &addr],
        vec!["sym", "--pid", &pid, "--json", &addr],
        vec!["sym", "--kernel", &kaddr],
        vec!["trace", "--list", "vfs_read", "vfs_write"],
        vec!["xdp", "--help"],
    ];
    for args in &cases {
        for block in [false, true] {
            let (st, err) = closed_pipe(args, block);
            let quiet = st.code() == Some(0) || st.signal() == Some(libc::SIGPIPE);
            assert!(
                quiet && err.is_empty(),
                "bpfmux {args:?} (SIGPIPE blocked: {block}): {st:?}, stderr: {err}"
            );
        }
    }
    // A full disk is an error, one line naming standard output, not a panic.
    for args in cases.iter().filter(|a| !a.contains(&"--help")) {
        let full = std::fs::File::create("/dev/full").unwrap();
        let out = bpfmux()
            .args(args)
            .stdout(full)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.code() == Some(1)
                && err.lines().count() == 1
                && err.starts_with("bpfmux: error: writing to standard output: No space left"),
            "bpfmux {args:?} > /dev/full: {:?}, stderr: {err}",
            out.status
        );
    }
}

fn kernel_text_addr() -> String {
    let k = std::fs::read_to_string("/proc/kallsyms").unwrap();
    let line = k
        .lines()
        .find(|l| l.ends_with(" T vfs_read") || l.ends_with(" t vfs_read"))
        .expect("vfs_read in kallsyms");
    format!("0x{}", line.split(' ').next().unwrap())
}

/// Exit status and stderr of a run that must fail with a clear message.
fn fails(args: &[&str]) -> String {
    let out = bpfmux().args(args).stdin(Stdio::null()).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        matches!(out.status.code(), Some(1 | 2)),
        "bpfmux {args:?}: {:?}, stderr: {err}",
        out.status
    );
    assert!(!err.contains("panicked"), "bpfmux {args:?} panicked: {err}");
    err
}

#[test]
fn numbers_and_addresses_are_strict() {
    for bad in ["nan", "inf", "-inf", "1e308", "-1", "+5", "5s", ""] {
        for opt in ["--duration", "--interval"] {
            let err = fails(&["trace", &format!("{opt}={bad}"), "vfs_read"]);
            assert!(err.contains("seconds"), "{opt}={bad}: {err}");
        }
    }
    let err = fails(&["trace", "-i", "0", "vfs_read"]);
    assert!(err.contains("too short"), "{err}");
    // Filters that would trace everything or nothing instead of what they say.
    let err = fails(&["trace", "--pid", "0", "vfs_read"]);
    assert!(err.contains("--pid 0 is not a process"), "{err}");
    let err = fails(&["trace", "--pid", "4194305", "vfs_read"]);
    assert!(err.contains("no such process"), "{err}");
    // A thread ID is not the process ID the filter compares.
    let (tx, rx) = std::sync::mpsc::channel();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let t = std::thread::spawn(move || {
        // SAFETY: gettid has no preconditions.
        tx.send(unsafe { libc::gettid() }).unwrap();
        let _ = done_rx.recv();
    });
    let tid = rx.recv().unwrap().to_string();
    let err = fails(&["trace", "--pid", &tid, "vfs_read"]);
    drop(done_tx);
    t.join().unwrap();
    let own = std::process::id();
    assert!(
        err.contains(&format!("is a thread of process {own}")),
        "{err}"
    );
    let err = fails(&["trace", "--comm", "", "vfs_read"]);
    assert!(err.contains("empty task name"), "{err}");
    let me = std::process::id().to_string();
    for bad in [
        "+10",
        "0x+10",
        "0b101",
        "-1",
        "0x",
        "1_0",
        "0x1ffffffffffffffff",
    ] {
        for verb in ["sym", "maps"] {
            let err = fails(&[verb, "--pid", &me, "--", bad]);
            assert!(err.contains("not an address"), "{verb} {bad}: {err}");
        }
    }
}

#[test]
fn input_files_are_bounded_and_checked() {
    let err = fails(&["trace", "-f", "/dev/zero"]);
    assert!(err.contains("larger than 16 MiB"), "{err}");
    let err = fails(&["trace", "-f", "/"]);
    assert!(err.contains("is a directory"), "{err}");
    let err = fails(&["trace", "--cgroup", "/etc/passwd", "vfs_read"]);
    assert!(err.contains("not a cgroup v2 directory"), "{err}");
    let err = fails(&["trace", "--cgroup", "/tmp", "vfs_read"]);
    assert!(err.contains("not a cgroup v2 directory"), "{err}");
    let err = fails(&["xdp", "attach", "lo", "x.o", "--chain-on", "any,none"]);
    assert!(
        err.contains("'any' stands alone") && !err.contains("expected"),
        "{err}"
    );
}

/// --cgroup, --cgroup-exact and --pid-ns say what is wrong with what they
/// were given, for `trace` and `inject` alike, before anything is loaded.
#[test]
fn scoping_inputs_are_checked() {
    for verb in ["trace", "inject"] {
        for opt in ["--cgroup", "--cgroup-exact"] {
            let err = fails(&[verb, opt, "/proc", "vfs_read"]);
            assert!(
                err.contains(&format!(
                    "{opt} /proc: not a cgroup v2 directory (cgroup v2 "
                )),
                "{err}"
            );
            let err = fails(&[verb, opt, "/nonexistent-bpfmux", "vfs_read"]);
            assert!(
                err.contains(&format!("{opt} /nonexistent-bpfmux: No such file")),
                "{err}"
            );
        }
        let err = fails(&[verb, "--cgroup", "/a", "--cgroup-exact", "/b", "vfs_read"]);
        assert!(err.contains("cannot be used with"), "{err}");
        let err = fails(&[verb, "--pid-ns", "/etc/hostname", "vfs_read"]);
        assert!(
            err.contains("--pid-ns /etc/hostname: not a namespace file (e.g. /proc/PID/ns/pid)"),
            "{err}"
        );
        let err = fails(&[verb, "--pid-ns", "/proc/self/ns/net", "vfs_read"]);
        assert!(
            err.contains("a net namespace, not a pid namespace"),
            "{err}"
        );
        let err = fails(&[verb, "--pid-ns", "2147483647", "vfs_read"]);
        assert!(
            err.contains("--pid-ns 2147483647: no such process"),
            "{err}"
        );
        let err = fails(&[
            verb,
            "--pid-ns",
            "/proc/self/ns/pid",
            "-c",
            "true",
            "vfs_read",
        ]);
        assert!(err.contains("cannot be used with"), "{err}");
        // A process ID the namespace does not have; 0.
        let me = std::process::id().to_string();
        let err = fails(&[verb, "--pid-ns", &me, "--pid", "2147483647", "vfs_read"]);
        assert!(
            err.contains("--pid 2147483647: no process with this ID in pid namespace pid:["),
            "{err}"
        );
        let err = fails(&[verb, "--pid-ns", &me, "--pid", "0", "vfs_read"]);
        assert!(err.contains("--pid 0 is not a process"), "{err}");
    }
}

/// `trace --list 'vfs_*'` after the shell commands `setup`, in a private
/// mount namespace: (status, stderr).
fn list_in_mount_ns(setup: &str) -> (Option<i32>, String) {
    let out = Command::new("unshare")
        .args(["--mount", "sh", "-c"])
        .arg(format!("{setup} && exec \"$B\" trace --list 'vfs_*'"))
        .env("B", env!("CARGO_BIN_EXE_bpfmux"))
        .stdout(Stdio::null())
        .output()
        .expect("run unshare (needs root)");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn list_says_why_the_kernel_gives_no_listing() {
    // No tracefs anywhere: said once, with the fix, not as "No such file".
    let (st, err) = list_in_mount_ns(
        "for d in /sys/kernel/tracing /sys/kernel/debug; do \
         [ ! -d $d ] || mount -t tmpfs none $d || exit 9; done",
    );
    assert!(
        st == Some(1)
            && err.lines().count() == 1
            && err.contains("tracefs is not mounted at /sys/kernel/tracing")
            && err.contains("mount -t tracefs")
            && !err.contains("No such file"),
        "{st:?}: {err}"
    );
    // tracefs mounted: a listing, or a refusal that says so (EPERM under
    // lockdown, as on this project's hosts), never "not mounted". A host
    // that has it mounted already (systemd, perf) refuses a second mount.
    let (st, err) = list_in_mount_ns(
        "grep -q ' /sys/kernel/tracing tracefs ' /proc/self/mounts || \
         mount -t tracefs nodev /sys/kernel/tracing",
    );
    if st != Some(0) {
        assert!(
            st == Some(1)
                && err.lines().count() == 1
                && !err.contains("not mounted")
                && !err.contains("No such file"),
            "{st:?}: {err}"
        );
    }
}

/// Runs `args` with `input` on stdin, its heap and other private writable
/// memory capped at `data_mib` MiB (RLIMIT_DATA, counted afresh for the
/// new program, where its peak RSS would include this test process's: the
/// kernel carries it over the exec); stdout. It must exit 0.
fn with_stdin(args: &[&str], input: &[u8], data_mib: Option<u64>) -> Vec<u8> {
    use std::os::unix::process::CommandExt;
    let mut cmd = bpfmux();
    cmd.args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(mib) = data_mib {
        let lim = libc::rlimit {
            rlim_cur: mib << 20,
            rlim_max: mib << 20,
        };
        // SAFETY: only setrlimit between fork and exec, on a local struct.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setrlimit(libc::RLIMIT_DATA, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let mut c = cmd.spawn().unwrap();
    let mut stdin = c.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = c.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(
        out.status.success(),
        "bpfmux {args:?} (data limit {data_mib:?} MiB): {:?}, stderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// A pattern list repeating one name a million times (9 MB) costs what one
/// name costs; it used to take half a gigabyte, and a repeated glob was
/// tried on every kernel function once per line.
#[test]
fn repeated_patterns_are_selected_once() {
    let names = "vfs_read\n".repeat(1_000_000);
    let out = with_stdin(&["trace", "--list", "-f", "-"], names.as_bytes(), Some(48));
    assert_eq!(String::from_utf8_lossy(&out), "vfs_read\n");
}

#[test]
fn a_million_addresses_stream_in_bounded_memory() {
    let t = Target::sleep();
    let pid = t.pid();
    let base = t.code_addr();
    let input = |n: u64| -> Vec<u8> {
        (0..n)
            .map(|i| format!("{:#x}\n", base + (i * 64) % 0x1000))
            .collect::<String>()
            .into_bytes()
    };
    // The input alone is 10 MB and the output over 100 MB: holding either
    // (as bytes and as 8 MB of addresses) would not fit in 16 MiB.
    let big = input(1_000_000);
    let out_big = with_stdin(&["maps", "--pid", &pid, "-"], &big, Some(16));
    assert_eq!(out_big.split(|&b| b == b'\n').count() - 1, 1_000_000);
    assert!(String::from_utf8_lossy(&out_big[..200]).contains("file+"));
    let out = with_stdin(&["sym", "--pid", &pid, "-"], &big, Some(16));
    assert_eq!(out.split(|&b| b == b'\n').count() - 1, 1_000_000);
    // sym reads standard input when given no addresses at all.
    let out = with_stdin(&["sym", "--pid", &pid], &input(20_000), None);
    let text = String::from_utf8_lossy(&out);
    assert_eq!(text.lines().count(), 20_000);
    assert!(
        text.lines().all(|l| !l.contains("unmapped")),
        "{}",
        &text[..300]
    );
    // JSON output stays one valid array across batches.
    let out = with_stdin(&["sym", "--pid", &pid, "--json", "-"], &input(5000), None);
    let v: serde_json::Value = serde_json::from_slice(&out).expect("valid JSON");
    assert_eq!(v.as_array().map(Vec::len), Some(5000));
    // Addresses as maps writes them: 64-bit values survive jq's doubles.
    assert_eq!(v[0]["addr"], format!("{base:#x}"));
    let out = with_stdin(
        &["sym", "--kernel", "--json", "ffffffffffffffff"],
        b"",
        None,
    );
    let v: serde_json::Value = serde_json::from_slice(&out).expect("valid JSON");
    assert_eq!(v[0]["addr"], "0xffffffffffffffff");
}

/// A copy of libc grown to 3 GiB (sparse), mapped executable by this
/// process: `sym` names code in it from the file's symbol tables without
/// reading the file into memory (it used to read up to 1 GiB of it, then
/// give up and leave the address unnamed).
#[test]
fn symbols_of_a_huge_mapped_file_take_little_memory() {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let (libc_path, libc_base) = maps
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.len() >= 6 && f[5].contains("/libc.so") && f[2] == "00000000")
        .map(|f| {
            let start = f[0].split('-').next().unwrap();
            (f[5].to_string(), u64::from_str_radix(start, 16).unwrap())
        })
        .expect("libc mapped");
    let dir = std::env::temp_dir().join(format!("bpfmux-huge-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let copy = dir.join("libc-huge.so");
    std::fs::copy(&libc_path, &copy).unwrap();
    let f = std::fs::OpenOptions::new().write(true).open(&copy).unwrap();
    f.set_len(3 << 30).unwrap();
    let f = std::fs::File::open(&copy).unwrap();
    let len = 8 << 20;
    // SAFETY: a fresh read-only mapping of a file we own, unmapped below.
    let at = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_EXEC,
            libc::MAP_PRIVATE,
            std::os::fd::AsRawFd::as_raw_fd(&f),
            0,
        )
    };
    assert_ne!(at, libc::MAP_FAILED);
    // fputs, at the same offset in the copy as in the libc this process runs.
    let off = libc::fputs as *const () as u64 - libc_base;
    let addr = format!("{:#x}", at as u64 + off + 4);
    let me = std::process::id().to_string();
    // The file is mapped, not read: it does not count against the limit.
    let out = with_stdin(&["sym", "--pid", &me, &addr], b"", Some(64));
    // SAFETY: the mapping made above, no longer used.
    unsafe { libc::munmap(at, len) };
    let _ = std::fs::remove_dir_all(&dir);
    let text = String::from_utf8_lossy(&out);
    assert!(
        text.contains("fputs+0x4") && text.contains("libc-huge.so"),
        "{text}"
    );
}

/// The [vsyscall] page is in /proc/PID/maps but is no VMA of the process:
/// both backends call its addresses unmapped, as both verbs' help says.
#[test]
fn vsyscall_is_unmapped_as_documented() {
    for verb in ["maps", "sym"] {
        let out = bpfmux().args([verb, "--help"]).output().unwrap();
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(
            help.contains("[vsyscall]") && help.contains("unmapped"),
            "{verb} --help:\n{help}"
        );
    }
    let t = Target::sleep();
    let pid = t.pid();
    let vsyscall = "0xffffffffff600000";
    let mut answers = Vec::new();
    for args in [
        vec!["maps", "--pid", &pid, "--backend", "ioctl", vsyscall],
        vec!["maps", "--pid", &pid, "--backend", "text", vsyscall],
        vec!["sym", "--pid", &pid, vsyscall],
    ] {
        let out = bpfmux().args(&args).output().unwrap();
        assert!(out.status.success(), "bpfmux {args:?}: {out:?}");
        answers.push(String::from_utf8_lossy(&out.stdout).trim().to_string());
    }
    assert!(
        answers
            .iter()
            .all(|a| *a == format!("{vsyscall}  unmapped")),
        "{answers:?}"
    );
}
