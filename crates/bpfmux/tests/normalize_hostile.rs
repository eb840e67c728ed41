//! A deliberately hostile process against both backends: file names with a
//! newline and with a literal `\012`, a name ending in " (deleted)" that is
//! not deleted, a deleted file, a memfd (with a newline in its name),
//! PROT_NONE file and anonymous mappings, and ELF files with 20- and
//! 32-byte build IDs. The text backend and PROCMAP_QUERY must return the
//! same mappings, names and build IDs (run as root: the text backend reads
//! deleted and memfd files through /proc/PID/map_files). Again as a user
//! without the capability map_files/ needs: the text backend then reads
//! those two build IDs from the process's memory, and neither it nor the
//! symbolizer opens the FIFO the process put at the deleted file's name.
//!
//! The helpers are this test binary re-executed (`--ignored --exact`).

use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::fd::FromRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use bpfmux::normalize::{Backend, Mapping, Normalizer, Options, VmaFilter};
use bpfmux::symbolize::{SymResult, UserSymbolizer};

const ENV: &str = "BPFMUX_TEST_HOSTILE_DIR";
const UNPRIVILEGED_ENV: &str = "BPFMUX_TEST_HOSTILE_UNPRIVILEGED";
/// nobody: the unprivileged user the root run switches to.
const NOBODY: u32 = 65534;
const PAGE: usize = 4096;

/// A minimal ELF64 shared object: header, one PT_LOAD, one PT_NOTE holding
/// a GNU build-ID note of `id.len()` bytes. Two pages.
fn elf_with_build_id(id: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; 2 * PAGE];
    f[..4].copy_from_slice(b"\x7fELF");
    f[4] = 2; // 64-bit
    f[5] = 1; // little endian
    f[6] = 1;
    f[16..18].copy_from_slice(&3u16.to_le_bytes()); // ET_DYN
    f[18..20].copy_from_slice(&62u16.to_le_bytes()); // x86-64
    f[20..24].copy_from_slice(&1u32.to_le_bytes());
    f[32..40].copy_from_slice(&64u64.to_le_bytes()); // e_phoff
    f[52..54].copy_from_slice(&64u16.to_le_bytes()); // e_ehsize
    f[54..56].copy_from_slice(&56u16.to_le_bytes()); // e_phentsize
    f[56..58].copy_from_slice(&2u16.to_le_bytes()); // e_phnum
    let note_off = 256u64;
    let note_len = 16 + id.len() as u64;
    let ph = |f: &mut Vec<u8>, at: usize, ty: u32, flags: u32, off: u64, size: u64| {
        f[at..at + 4].copy_from_slice(&ty.to_le_bytes());
        f[at + 4..at + 8].copy_from_slice(&flags.to_le_bytes());
        for (k, v) in [off, off, off, size, size, 4].into_iter().enumerate() {
            f[at + 8 + 8 * k..at + 16 + 8 * k].copy_from_slice(&v.to_le_bytes());
        }
    };
    ph(&mut f, 64, 1, 5, 0, 2 * PAGE as u64); // PT_LOAD r-x
    ph(&mut f, 120, 4, 4, note_off, note_len); // PT_NOTE
    let n = note_off as usize;
    f[n..n + 4].copy_from_slice(&4u32.to_le_bytes());
    f[n + 4..n + 8].copy_from_slice(&(id.len() as u32).to_le_bytes());
    f[n + 8..n + 12].copy_from_slice(&3u32.to_le_bytes()); // NT_GNU_BUILD_ID
    f[n + 12..n + 16].copy_from_slice(b"GNU\0");
    f[n + 16..n + 16 + id.len()].copy_from_slice(id);
    f
}

fn map(fd: i32, len: usize, prot: i32) {
    // SAFETY: a fresh mapping of a descriptor we own; never unmapped.
    let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_PRIVATE, fd, 0) };
    assert_ne!(p, libc::MAP_FAILED, "{}", std::io::Error::last_os_error());
}

#[test]
#[ignore = "helper process for hostile_process_gets_the_same_answer_from_both_backends"]
fn hostile_helper() {
    let Ok(dir) = std::env::var(ENV) else {
        panic!("run only as a helper");
    };
    let dir = PathBuf::from(dir);
    let exe = std::fs::read("/proc/self/exe").unwrap();
    let rx = libc::PROT_READ | libc::PROT_EXEC;
    let files: [(&[u8], Vec<u8>); 5] = [
        (b"new\nline", exe.clone()),
        (b"literal\\012escape", exe.clone()),
        (b"not (deleted)", elf_with_build_id(&[0x20; 20])),
        (b"id32", elf_with_build_id(&[0x32; 32])),
        (b"gone", exe.clone()),
    ];
    for (name, data) in &files {
        let p = dir.join(std::ffi::OsStr::from_bytes(name));
        std::fs::write(&p, data).unwrap();
        let f = std::fs::File::open(&p).unwrap();
        map(f.as_raw_fd(), 2 * PAGE, rx);
        if *name == b"gone" {
            std::fs::remove_file(&p).unwrap();
            // Where the name as shown would lead: a FIFO, whose open
            // blocks until a writer comes.
            let fifo =
                std::ffi::CString::new(dir.join("gone (deleted)").as_os_str().as_bytes()).unwrap();
            // SAFETY: a NUL-terminated path.
            assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        }
    }
    // PROT_NONE: a file page and an anonymous region.
    let f = std::fs::File::open(dir.join("id32")).unwrap();
    map(f.as_raw_fd(), PAGE, libc::PROT_NONE);
    // SAFETY: anonymous mapping and a memfd we own.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            4 * PAGE,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        assert_ne!(p, libc::MAP_FAILED);
        let fd = libc::memfd_create(c"hostile\nmemfd".as_ptr(), 0);
        assert!(fd >= 0);
        let mut m = std::fs::File::from_raw_fd(fd);
        m.write_all(&exe).unwrap();
        map(m.as_raw_fd(), 2 * PAGE, rx);
    }
    println!("READY");
    std::io::stdout().flush().unwrap();
    let _ = std::io::stdin().read_line(&mut String::new());
}

struct Helper {
    child: Child,
    dir: PathBuf,
}

impl Drop for Helper {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn spawn() -> Helper {
    let dir = std::env::temp_dir().join(format!("bpfmux-hostile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "hostile_helper", "--nocapture"])
        .env(ENV, &dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "helper exited early");
        if line.trim_end().ends_with("READY") {
            break;
        }
    }
    std::mem::forget(out);
    Helper { child, dir }
}

fn mappings(pid: u32, backend: Backend) -> Vec<Mapping> {
    Normalizer::new(Options {
        backend,
        build_ids: true,
        cache: false,
        keep_maps_open: false,
    })
    .mappings(pid, VmaFilter::ALL)
    .unwrap()
}

fn named<'a>(ms: &'a [Mapping], suffix: &str) -> Vec<&'a Mapping> {
    ms.iter()
        .filter(|m| {
            m.name
                .as_deref()
                .is_some_and(|n| n.as_os_str().as_bytes().ends_with(suffix.as_bytes()))
        })
        .collect()
}

#[test]
fn hostile_process_gets_the_same_answer_from_both_backends() {
    let h = spawn();
    let pid = h.child.id();
    let text = mappings(pid, Backend::Text);
    let ioctl = mappings(pid, Backend::ProcmapQuery);
    assert_eq!(text.len(), ioctl.len());
    for (t, i) in text.iter().zip(&ioctl) {
        assert_eq!(t, i, "text vs ioctl");
    }
    // Names: the kernel's one escape, in both.
    let nl = named(&text, "/new\\012line");
    assert_eq!(nl.len(), 1, "newline name as \\012");
    assert!(
        text.iter().all(|m| !m
            .name
            .as_deref()
            .is_some_and(|n| n.as_os_str().as_bytes().contains(&b'\n'))),
        "no raw newline in any name"
    );
    assert_eq!(named(&text, "/literal\\012escape").len(), 1);
    // Build IDs: the executable's through the escaped name, the deleted file
    // and the memfd (through map_files), the 20-byte one; not the 32-byte
    // one (longer than the kernel's BUILD_ID_SIZE_MAX).
    let exe_id = nl[0].build_id.expect("build ID of the newline-named file");
    let deleted = named(&text, "/gone (deleted)");
    assert_eq!(deleted.len(), 1);
    assert_eq!(deleted[0].build_id, Some(exe_id));
    let memfd = named(&text, "/memfd:hostile\\012memfd (deleted)");
    assert_eq!(memfd.len(), 1, "memfd: {text:#?}");
    assert_eq!(memfd[0].build_id, Some(exe_id));
    let id20 = named(&text, "/not (deleted)");
    assert_eq!(
        id20[0].build_id.map(|b| b.to_string()),
        Some("20".repeat(20))
    );
    let id32 = named(&text, "/id32");
    assert_eq!(id32.len(), 2);
    assert!(id32.iter().all(|m| m.build_id.is_none()));
    // PROT_NONE mappings are listed, file-backed and anonymous.
    assert!(id32.iter().any(|m| m.perms.to_string() == "---p"));
    assert!(text
        .iter()
        .any(|m| m.perms.to_string() == "---p" && m.name.is_none() && m.end - m.start >= 4 * 4096));
    // Normalizing into each of them agrees too, with the exec filter.
    let addrs: Vec<u64> = text.iter().map(|m| m.start + 1).collect();
    let norm = |b| {
        Normalizer::new(Options {
            backend: b,
            ..Options::default()
        })
        .normalize(pid, &addrs, VmaFilter::EXEC)
        .unwrap()
    };
    assert_eq!(norm(Backend::Text), norm(Backend::ProcmapQuery));
}

/// Deleted-file and memfd build IDs from both backends, for a hostile
/// process this process starts (so ptrace rules let it read its memory).
fn deleted_and_memfd_build_ids_agree() {
    let h = spawn();
    let pid = h.child.id();
    let gone = named_one(pid, "/gone (deleted)");
    let map_files = format!("/proc/{pid}/map_files/{:x}-{:x}", gone.0, gone.1);
    assert!(
        std::fs::File::open(&map_files).is_err(),
        "{map_files} opens: this user is not unprivileged enough for the check"
    );
    let text = mappings(pid, Backend::Text);
    let ioctl = mappings(pid, Backend::ProcmapQuery);
    let exe_id = named(&text, "/new\\012line")[0]
        .build_id
        .expect("build ID of the newline-named file");
    for suffix in ["/gone (deleted)", "/memfd:hostile\\012memfd (deleted)"] {
        let t = named(&text, suffix);
        let i = named(&ioctl, suffix);
        assert_eq!(t.len(), 1, "{suffix}: {text:#?}");
        assert_eq!(t[0].build_id, Some(exe_id), "text backend, {suffix}");
        assert_eq!(i[0].build_id, Some(exe_id), "ioctl backend, {suffix}");
    }
    assert_eq!(text, ioctl, "text vs ioctl");
    // Symbolizing there must not open the FIFO at "gone (deleted)" either.
    let sym = UserSymbolizer::default()
        .symbolize(pid, &[gone.0 + 1])
        .unwrap();
    assert!(
        matches!(sym[0].result, SymResult::NoSymbol { .. }),
        "{:?}",
        sym[0].result
    );
}

/// (start, end) of the one mapping whose name ends in `suffix`.
fn named_one(pid: u32, suffix: &str) -> (u64, u64) {
    let ms = mappings(pid, Backend::ProcmapQuery);
    let m = named(&ms, suffix);
    assert_eq!(m.len(), 1, "{suffix}");
    (m[0].start, m[0].end)
}

#[test]
#[ignore = "helper process for unprivileged_text_backend_reads_build_ids_from_memory"]
fn unprivileged_helper() {
    assert!(
        std::env::var(UNPRIVILEGED_ENV).is_ok(),
        "run only as a helper"
    );
    deleted_and_memfd_build_ids_agree();
    println!("RESULT agreed");
}

/// Without CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE, /proc/PID/map_files/ is
/// closed, so the text backend cannot open a deleted file or a memfd; it
/// must still give the build IDs PROCMAP_QUERY gives. As root the check runs
/// as nobody; as any other user, as that user.
#[test]
fn unprivileged_text_backend_reads_build_ids_from_memory() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        deleted_and_memfd_build_ids_agree();
        return;
    }
    use std::os::unix::process::CommandExt;
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "unprivileged_helper",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(UNPRIVILEGED_ENV, "1")
        .uid(NOBODY)
        .gid(NOBODY)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run this test binary as nobody (every directory on its path must let nobody in)");
    // A backend that opens the FIFO hangs: fail instead of waiting forever.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the unprivileged helper hung (a FIFO opened?)");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("RESULT agreed"),
        "helper as uid {NOBODY} said:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
