//! The helper process for the batch cases: many small file mappings.

use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::process::{Child, ChildStdin, Command, Stdio};

use anyhow::{bail, Context, Result};

const PAGE: usize = 4096;

/// A process with `n` one-page file mappings (of its own executable),
/// alternating r-- and r-x with one-page gaps.
pub struct Helper {
    child: Child,
    pub pid: u32,
    _stdin: ChildStdin,
}

impl Helper {
    pub fn spawn(n: usize) -> Result<Self> {
        let mut child = Command::new(std::env::current_exe()?)
            .args(["helper", &n.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let stdin = child.stdin.take().context("stdin")?;
        let mut line = String::new();
        BufReader::new(child.stdout.take().context("stdout")?).read_line(&mut line)?;
        if line.trim() != "READY" {
            bail!("helper failed: {line:?}");
        }
        Ok(Self {
            pid: child.id(),
            child,
            _stdin: stdin,
        })
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The helper's side: map, say READY, wait for stdin to close.
pub fn run(n: usize) -> Result<()> {
    let exe = std::fs::File::open("/proc/self/exe")?;
    let pages = (exe.metadata()?.len() as usize / PAGE).max(1);
    // SAFETY: mmap/munmap of memory this helper owns.
    unsafe {
        let span = 2 * n * PAGE;
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
        let base = libc::mmap(std::ptr::null_mut(), span, libc::PROT_NONE, flags, -1, 0);
        if base == libc::MAP_FAILED {
            bail!("reserve");
        }
        libc::munmap(base, span);
        for i in 0..n {
            let prot = if i % 2 == 0 {
                libc::PROT_READ
            } else {
                libc::PROT_READ | libc::PROT_EXEC
            };
            let at = (base as usize + 2 * i * PAGE) as *mut libc::c_void;
            let off = ((i % pages) * PAGE) as libc::off_t;
            let flags = libc::MAP_PRIVATE | libc::MAP_FIXED_NOREPLACE;
            if libc::mmap(at, PAGE, prot, flags, exe.as_raw_fd(), off) != at {
                bail!("mmap {i}");
            }
        }
    }
    println!("READY");
    std::io::stdout().flush()?;
    let mut s = String::new();
    let _ = std::io::stdin().read_line(&mut s);
    Ok(())
}
