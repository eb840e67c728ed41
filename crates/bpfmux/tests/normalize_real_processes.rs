//! Normalization against real processes: the PROCMAP_QUERY path and the
//! text path must agree exactly; bad targets give clear errors.
//!
//! Helper processes are this test binary re-executed with `--ignored --exact
//! <helper>` and an environment variable saying what to do; the helpers are
//! `#[ignore]`d so a normal run lists them as ignored, never as passes.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use bpfmux::normalize::{Backend, NormalizeError, Normalized, Normalizer, Options, VmaFilter};

const PAGE: usize = 4096;
const MAPPER_ENV: &str = "BPFMUX_TEST_MAPPER";
const QUERY_ENV: &str = "BPFMUX_TEST_QUERY_PID";

/// A child process holding many file mappings until dropped.
struct Mapper {
    child: Child,
    stdin: Option<ChildStdin>,
    /// Kept open so the helper's own test-harness output has a reader.
    _stdout: BufReader<ChildStdout>,
}

impl Mapper {
    fn spawn(n_maps: usize) -> Self {
        let exe = std::env::current_exe().unwrap();
        let mut child = Command::new(exe)
            .args([
                "--ignored",
                "--exact",
                "mapper_helper",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(MAPPER_ENV, n_maps.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn mapper");
        let stdin = child.stdin.take();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        loop {
            line.clear();
            assert!(out.read_line(&mut line).unwrap() > 0, "mapper exited early");
            // libtest prints "test mapper_helper ... " before the test runs.
            if line.trim_end().ends_with("READY") {
                break;
            }
        }
        Self {
            child,
            stdin,
            _stdout: out,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Mapper {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Maps this executable (an ELF with a build ID) `n` times, a page each,
/// alternating r-- and r-x with one-page gaps; plus a deleted file and an
/// anonymous region. Then waits for stdin to close.
#[test]
#[ignore = "helper process for other tests"]
fn mapper_helper() {
    let Ok(n) = std::env::var(MAPPER_ENV) else {
        panic!("run only as a helper by the other tests");
    };
    let n: usize = n.parse().unwrap();
    let exe = std::fs::File::open("/proc/self/exe").unwrap();
    let exe_pages = (exe.metadata().unwrap().len() as usize / PAGE).max(1);
    use std::os::fd::AsRawFd;
    // SAFETY: plain mmap/munmap calls on memory this helper owns.
    unsafe {
        let span = 2 * n * PAGE;
        let base = libc::mmap(
            std::ptr::null_mut(),
            span,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        assert_ne!(base, libc::MAP_FAILED);
        libc::munmap(base, span);
        for i in 0..n {
            let prot = if i % 2 == 0 {
                libc::PROT_READ
            } else {
                libc::PROT_READ | libc::PROT_EXEC
            };
            let at = (base as usize + 2 * i * PAGE) as *mut libc::c_void;
            let off = ((i % exe_pages) * PAGE) as libc::off_t;
            let p = libc::mmap(
                at,
                PAGE,
                prot,
                libc::MAP_PRIVATE | libc::MAP_FIXED_NOREPLACE,
                exe.as_raw_fd(),
                off,
            );
            assert_eq!(p, at, "mmap {i}");
        }
        let path = std::env::temp_dir().join(format!("bpfmux-deleted-{}", std::process::id()));
        std::fs::write(&path, vec![7u8; 2 * PAGE]).unwrap();
        let f = std::fs::File::open(&path).unwrap();
        let p = libc::mmap(
            std::ptr::null_mut(),
            2 * PAGE,
            libc::PROT_READ,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        );
        assert_ne!(p, libc::MAP_FAILED);
        std::fs::remove_file(&path).unwrap();
        let p = libc::mmap(
            std::ptr::null_mut(),
            8 * PAGE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        assert_ne!(p, libc::MAP_FAILED);
    }
    println!("READY");
    std::io::stdout().flush().unwrap();
    let mut sink = String::new();
    let _ = std::io::stdin().read_line(&mut sink);
}

fn normalizer(backend: Backend, build_ids: bool, cache: bool) -> Normalizer {
    normalizer_keeping(backend, build_ids, cache, true)
}

fn normalizer_keeping(
    backend: Backend,
    build_ids: bool,
    cache: bool,
    keep_maps_open: bool,
) -> Normalizer {
    Normalizer::new(Options {
        backend,
        build_ids,
        cache,
        keep_maps_open,
    })
}

/// Interesting addresses: every VMA's edges and middle, the gaps around
/// them, and a few that are never mapped.
fn probe_addrs(pid: u32) -> Vec<u64> {
    let all = normalizer(Backend::Text, false, false)
        .mappings(pid, VmaFilter::ALL)
        .unwrap();
    let mut v = vec![0, 1, 0xffff_ffff_ff60_0000, u64::MAX];
    for m in &all {
        v.extend([
            m.start.saturating_sub(1),
            m.start,
            m.start + 1,
            (m.start + m.end) / 2,
            m.end - 1,
            m.end,
        ]);
    }
    // Unsorted, with duplicates: the normalizer must cope.
    v.reverse();
    v.extend_from_slice(&v.clone()[..10.min(v.len())]);
    v
}

const FILTERS: [VmaFilter; 4] = [
    VmaFilter {
        exec_only: false,
        file_backed_only: false,
    },
    VmaFilter {
        exec_only: true,
        file_backed_only: false,
    },
    VmaFilter {
        exec_only: false,
        file_backed_only: true,
    },
    VmaFilter {
        exec_only: true,
        file_backed_only: true,
    },
];

fn assert_backends_agree(pid: u32, addrs: &[u64]) {
    for filter in FILTERS {
        for build_ids in [false, true] {
            for cache in [false, true] {
                for keep in [false, true] {
                    let mut ioctl =
                        normalizer_keeping(Backend::ProcmapQuery, build_ids, cache, keep);
                    let mut text = normalizer_keeping(Backend::Text, build_ids, cache, keep);
                    let ctx = format!("{filter:?} build_ids={build_ids} cache={cache} keep={keep}");
                    // Three times: later calls run from the caches and the
                    // kept maps file (read again from its start).
                    for round in 0..3 {
                        let a = ioctl.normalize(pid, addrs, filter).unwrap();
                        let b = text.normalize(pid, addrs, filter).unwrap();
                        assert_eq!(ioctl.last_backend(), Some(Backend::ProcmapQuery));
                        assert_eq!(text.last_backend(), Some(Backend::Text));
                        let ctx = format!("{ctx} round={round}");
                        assert_same(&a, &b, &ctx);
                        sanity(&a, addrs, build_ids, &ctx);
                    }
                    let a = ioctl.mappings(pid, filter).unwrap();
                    let b = text.mappings(pid, filter).unwrap();
                    assert_eq!(a, b, "mappings {ctx}");
                    assert!(!a.is_empty());
                    // The maps file is opened once per call, or once in all.
                    for (name, n) in [("ioctl", &ioctl), ("text", &text)] {
                        let opens = n.kernel_calls().opens;
                        let want = if keep { 1 } else { 4 };
                        // With everything cached the text path reads nothing.
                        let ok = opens == want || (cache && !keep && name == "text" && opens == 1);
                        assert!(ok, "{ctx}: {name} opened the maps file {opens} times");
                    }
                }
            }
        }
    }
}

/// Equality with a readable first difference.
fn assert_same(a: &Normalized, b: &Normalized, ctx: &str) {
    if a == b {
        return;
    }
    for (i, (x, y)) in a.mappings.iter().zip(&b.mappings).enumerate() {
        assert_eq!(x, y, "{ctx}: mapping {i} differs (left ioctl, right text)");
    }
    assert_eq!(a.mappings.len(), b.mappings.len(), "{ctx}: mapping count");
    for (x, y) in a.addrs.iter().zip(&b.addrs) {
        assert_eq!(
            x, y,
            "{ctx}: address result differs (left ioctl, right text)"
        );
    }
    panic!("{ctx}: results differ");
}

fn sanity(n: &Normalized, addrs: &[u64], build_ids: bool, ctx: &str) {
    assert_eq!(n.addrs.len(), addrs.len(), "{ctx}");
    for (i, a) in n.addrs.iter().enumerate() {
        assert_eq!(a.addr, addrs[i], "{ctx}: order kept");
        if let Some(r) = a.resolved {
            let m = &n.mappings[r.mapping];
            assert!(m.contains(a.addr), "{ctx}");
            assert_eq!(r.file_offset, a.addr - m.start + m.offset);
        }
    }
    for &u in &[0u64, u64::MAX, 0xffff_ffff_ff60_0000] {
        if let Some(i) = addrs.iter().position(|&a| a == u) {
            assert_eq!(n.addrs[i].resolved, None, "{ctx}: {u:#x} is never mapped");
        }
    }
    if build_ids {
        // The helper maps its own executable, which has a build ID.
        let exe_ids = n.mappings.iter().filter(|m| m.build_id.is_some()).count();
        assert!(
            exe_ids > 0 || n.mappings.is_empty(),
            "{ctx}: build IDs expected"
        );
    } else {
        assert!(n.mappings.iter().all(|m| m.build_id.is_none()), "{ctx}");
    }
}

#[test]
fn ioctl_and_text_agree_on_many_mappings() {
    let m = Mapper::spawn(300);
    let addrs = probe_addrs(m.pid());
    assert!(
        addrs.len() > 1500,
        "expected hundreds of VMAs, got {} addrs",
        addrs.len()
    );
    assert_backends_agree(m.pid(), &addrs);
    // The deleted file shows up with its suffix through both paths.
    let maps = normalizer(Backend::ProcmapQuery, false, false)
        .mappings(m.pid(), VmaFilter::ALL)
        .unwrap();
    assert!(maps.iter().any(|v| v
        .name
        .as_ref()
        .is_some_and(|p| p.to_string_lossy().ends_with(" (deleted)"))));
}

#[test]
fn ioctl_and_text_agree_on_a_plain_program() {
    let mut child = Command::new("sleep").arg("30").spawn().unwrap();
    let pid = child.id();
    // Startup (exec, libc init, locale loading) over: mappings are stable.
    wait_in_syscall(pid, SLEEP_SYSCALLS);
    assert_backends_agree(pid, &probe_addrs(pid));
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn build_ids_match_the_files() {
    let m = Mapper::spawn(8);
    let exe = std::fs::File::open(std::env::current_exe().unwrap()).unwrap();
    let want = bpfmux::normalize::read_build_id(&exe)
        .unwrap()
        .expect("test binary has a build ID");
    for backend in [Backend::ProcmapQuery, Backend::Text] {
        let maps = normalizer(backend, true, false)
            .mappings(m.pid(), VmaFilter::EXEC)
            .unwrap();
        let exe_path = std::env::current_exe().unwrap();
        let own: Vec<_> = maps
            .iter()
            .filter(|v| v.name.as_deref() == Some(exe_path.as_path()))
            .collect();
        assert!(!own.is_empty(), "{backend:?}: mapper maps its executable");
        for v in own {
            assert_eq!(v.build_id.as_ref(), Some(&want), "{backend:?}");
        }
    }
}

#[test]
fn nonexistent_pid_is_a_clear_error() {
    // pid_max is at most 2^22 on 64-bit: this pid cannot exist.
    for backend in [Backend::Auto, Backend::ProcmapQuery, Backend::Text] {
        let err = normalizer(backend, true, true)
            .normalize(4_194_305, &[0x1000], VmaFilter::ALL)
            .unwrap_err();
        assert!(
            matches!(err, NormalizeError::NoSuchProcess { pid: 4_194_305 }),
            "{backend:?}: {err}"
        );
    }
}

#[test]
fn unmapped_addresses_are_reported_unmapped() {
    let m = Mapper::spawn(4);
    for backend in [Backend::ProcmapQuery, Backend::Text] {
        let out = normalizer(backend, true, false)
            .normalize(
                m.pid(),
                &[0, 8, u64::MAX, 0xffff_8000_0000_0000],
                VmaFilter::ALL,
            )
            .unwrap();
        assert!(
            out.addrs.iter().all(|a| a.resolved.is_none()),
            "{backend:?}"
        );
        assert!(out.mappings.is_empty());
    }
}

// The caller reaps the zombie this returns.
#[allow(clippy::zombie_processes)]
fn spawn_and_kill_unreaped() -> Child {
    let mut child = Command::new("sleep").arg("30").spawn().unwrap();
    child.kill().unwrap();
    // Wait until it is a zombie (state Z) without reaping it.
    let pid = child.id();
    for _ in 0..1000 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        if stat
            .rsplit(')')
            .next()
            .is_some_and(|s| s.trim_start().starts_with('Z'))
        {
            return child;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let _ = child.wait();
    panic!("child never became a zombie");
}

#[test]
fn exited_process_is_a_clear_error() {
    // A zombie: /proc/<pid>/maps opens, but the address space is gone — the
    // same state a query meets when its target exits mid-query.
    let mut zombie = spawn_and_kill_unreaped();
    for backend in [Backend::Auto, Backend::ProcmapQuery, Backend::Text] {
        let err = normalizer(backend, true, false)
            .normalize(zombie.id(), &[0x1000], VmaFilter::ALL)
            .unwrap_err();
        assert!(
            matches!(err, NormalizeError::NoAddressSpace { .. }),
            "{backend:?}: {err}"
        );
    }
    zombie.wait().unwrap();
}

#[test]
fn exit_between_cached_queries_is_a_clear_error() {
    let m = Mapper::spawn(4);
    let pid = m.pid();
    let mut n = normalizer(Backend::ProcmapQuery, true, true);
    let addrs = probe_addrs(pid);
    n.normalize(pid, &addrs, VmaFilter::ALL).unwrap();
    drop(m); // killed and reaped; our cached maps fd still points at it
    let far = [0x10u64]; // not in the VMA cache: forces a kernel query
    let err = n.normalize(pid, &far, VmaFilter::ALL).unwrap_err();
    assert!(
        matches!(
            err,
            NormalizeError::NoSuchProcess { .. } | NormalizeError::NoAddressSpace { .. }
        ),
        "{err}"
    );
}

/// Runs as another user and reports what normalizing a pid gave.
#[test]
#[ignore = "helper process for other tests"]
fn query_helper() {
    let Ok(pid) = std::env::var(QUERY_ENV) else {
        panic!("run only as a helper by the other tests");
    };
    let pid: u32 = pid.parse().unwrap();
    for backend in [Backend::ProcmapQuery, Backend::Text] {
        match normalizer(backend, true, false).normalize(pid, &[0x1000], VmaFilter::ALL) {
            Err(NormalizeError::PermissionDenied { .. }) => println!("RESULT {backend:?} denied"),
            other => println!("RESULT {backend:?} {other:?}"),
        }
    }
}

#[test]
fn process_of_another_user_is_a_clear_error() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        // Unprivileged: init belongs to root, which we may not inspect.
        let err = normalizer(Backend::Auto, true, false)
            .normalize(1, &[0x1000], VmaFilter::ALL)
            .unwrap_err();
        assert!(
            matches!(err, NormalizeError::PermissionDenied { pid: 1 }),
            "{err}"
        );
        return;
    }
    // As root: a target running as `nobody` (65534), queried by a different
    // unprivileged uid (65533), which ptrace rules forbid.
    let mut target = Command::new("sleep")
        .arg("30")
        .uid(65534)
        .gid(65534)
        .spawn()
        .unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "query_helper",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(QUERY_ENV, target.id().to_string())
        .uid(65533)
        .gid(65533)
        .output()
        .unwrap();
    target.kill().unwrap();
    target.wait().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("RESULT ProcmapQuery denied") && stdout.contains("RESULT Text denied"),
        "helper said:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A kept maps file answers about the address space as it is now: a
/// mapping made after the first call is found, one removed is gone.
#[test]
fn kept_maps_file_sees_later_mappings() {
    let me = std::process::id();
    let mut kept = normalizer_keeping(Backend::ProcmapQuery, true, false, true);
    let mut kept_text = normalizer_keeping(Backend::Text, true, false, true);
    let probe = [kept_maps_file_sees_later_mappings as *const () as usize as u64];
    kept.normalize(me, &probe, VmaFilter::ALL).unwrap();
    kept_text.normalize(me, &probe, VmaFilter::ALL).unwrap();

    use std::os::fd::AsRawFd;
    let exe = std::fs::File::open("/proc/self/exe").unwrap();
    // SAFETY: a fresh private read-only mapping of our own executable.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            PAGE,
            libc::PROT_READ,
            libc::MAP_PRIVATE,
            exe.as_raw_fd(),
            0,
        )
    };
    assert_ne!(p, libc::MAP_FAILED);
    let addrs = [p as u64 + 8];
    let fresh = normalizer_keeping(Backend::Text, true, false, false)
        .normalize(me, &addrs, VmaFilter::ALL)
        .unwrap();
    assert!(fresh.addrs[0].resolved.is_some(), "new mapping visible");
    for n in [&mut kept, &mut kept_text] {
        let got = n.normalize(me, &addrs, VmaFilter::ALL).unwrap();
        assert_same(&got, &fresh, "kept file after mmap");
    }
    // SAFETY: unmapping exactly what we mapped above.
    assert_eq!(unsafe { libc::munmap(p, PAGE) }, 0);
    for n in [&mut kept, &mut kept_text] {
        let got = n.normalize(me, &addrs, VmaFilter::ALL).unwrap();
        // Something else may have been mapped there since; it must not be
        // our page of the executable at file offset 0 any more.
        if let Some(m) = got.mapping_of(0) {
            assert!(!(m.start == p as u64 && m.offset == 0 && m.end == p as u64 + PAGE as u64));
        }
        assert_eq!(n.kernel_calls().opens, 1, "one open for every call");
    }
}

/// Waits until `pid` is blocked in one of `syscalls` (x86_64 numbers):
/// its startup is over and its mappings no longer change.
fn wait_in_syscall(pid: u32, syscalls: &[&str]) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let sc = std::fs::read_to_string(format!("/proc/{pid}/syscall")).unwrap_or_default();
        if syscalls.contains(&sc.split_whitespace().next().unwrap_or("")) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{pid} never blocked in {syscalls:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// nanosleep, clock_nanosleep: where `sleep` waits.
const SLEEP_SYSCALLS: &[&str] = &["35", "230"];

/// After an exec the kept file's address space is dead (ESRCH): the
/// normalizer opens the maps file again and answers about the new program.
#[test]
fn exec_replaces_the_kept_maps_file() {
    let mut child = Command::new("sh")
        .args(["-c", "read line; exec sleep 30"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    // The shell blocked in read(): its startup is over.
    wait_in_syscall(pid, &["0"]);
    let mut kept: Vec<_> = [Backend::ProcmapQuery, Backend::Text]
        .into_iter()
        .map(|b| normalizer_keeping(b, true, false, true))
        .collect();
    let before: Vec<_> = kept
        .iter_mut()
        .map(|n| n.mappings(pid, VmaFilter::EXEC).unwrap())
        .collect();
    assert_eq!(before[0], before[1]);
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "go").unwrap();
    // `sleep` in its sleep: exec and dynamic loading are over.
    wait_in_syscall(pid, SLEEP_SYSCALLS);
    let fresh = normalizer_keeping(Backend::Text, true, false, false)
        .mappings(pid, VmaFilter::EXEC)
        .unwrap();
    assert_ne!(fresh, before[0], "exec changed the code mappings");
    for n in &mut kept {
        let after = n.mappings(pid, VmaFilter::EXEC).unwrap();
        let backend = n.last_backend();
        assert_eq!(after, fresh, "{backend:?}: after exec = a fresh read");
        assert_eq!(n.kernel_calls().opens, 2, "{backend:?}: reopened once");
    }
    child.kill().unwrap();
    child.wait().unwrap();
}

/// A child that forked but has not exec'd may share its parent's address
/// space (vfork, posix_spawn) and swap it on exec: its maps file is never
/// kept, and results are still right.
#[test]
fn forked_child_without_exec_is_not_kept() {
    // SAFETY: the child only calls async-signal-safe pause/_exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        unsafe {
            libc::pause();
            libc::_exit(0);
        }
    }
    let pid = pid as u32;
    let probe = [forked_child_without_exec_is_not_kept as *const () as usize as u64];
    let mut n = normalizer_keeping(Backend::ProcmapQuery, false, false, true);
    let a = n.normalize(pid, &probe, VmaFilter::EXEC).unwrap();
    let b = n.normalize(pid, &probe, VmaFilter::EXEC).unwrap();
    let opens = n.kernel_calls().opens;
    // SAFETY: pid is our own child.
    unsafe {
        libc::kill(pid as i32, libc::SIGKILL);
        libc::waitpid(pid as i32, std::ptr::null_mut(), 0);
    }
    assert!(a.addrs[0].resolved.is_some(), "child runs our code");
    assert_eq!(a, b);
    assert_eq!(opens, 2, "opened per call, not kept");
}

/// The ioctl walk asks the kernel once per VMA that covers addresses, however
/// many addresses fall in it.
#[test]
fn one_query_per_vma_touched() {
    let m = Mapper::spawn(50);
    let code = normalizer(Backend::Text, false, false)
        .mappings(m.pid(), VmaFilter::EXEC)
        .unwrap();
    // Ten addresses inside each code VMA, shuffled a little (reversed).
    let mut addrs: Vec<u64> = code
        .iter()
        .flat_map(|v| (0..10).map(move |i| v.start + (v.end - v.start) * i / 10))
        .collect();
    addrs.reverse();
    for keep in [false, true] {
        let mut n = normalizer_keeping(Backend::ProcmapQuery, false, false, keep);
        let out = n.normalize(m.pid(), &addrs, VmaFilter::EXEC).unwrap();
        assert_eq!(out.mappings.len(), code.len());
        assert!(out.addrs.iter().all(|a| a.resolved.is_some()));
        assert_eq!(n.kernel_calls().queries, code.len() as u64, "keep={keep}");
    }
}
