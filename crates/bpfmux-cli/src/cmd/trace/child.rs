//! `bpfmux trace -c`: the command, forked before attaching and held until
//! everything is attached.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

use anyhow::Context as _;

use crate::cmdline::{self, NeedsShell};

/// A command forked before attaching, held at a pipe until we are ready,
/// so its own calls are all traced and only its process is.
pub struct Child {
    pub pid: libc::pid_t,
    /// The programs it runs (the shell's too, under one): where its user
    /// frames are, when it exits before they are read.
    pub programs: Vec<std::path::PathBuf>,
    go: Option<OwnedFd>,
    status: Option<i32>,
}

impl Child {
    pub fn spawn(cmd: &str) -> anyhow::Result<Self> {
        // Everything the child needs is made here, before the fork: after
        // it, the child only reads the pipe and calls execve.
        let prog = cmdline::prepare(cmd)?;
        match &prog.shell {
            None => {}
            Some(NeedsShell::List(what)) => eprintln!(
                "bpfmux trace: note: -c runs a shell list or pipeline ({what}); only the \
                 shell's own process is traced (use --comm or --cgroup for its children)"
            ),
            Some(NeedsShell::Syntax(what)) => eprintln!(
                "bpfmux trace: note: -c uses shell syntax ({what}), so {} starts the command \
                 and its own startup calls are counted too (quote the characters, or give a \
                 plain command, to count only the command's calls)",
                cmdline::SHELL
            ),
        }
        let ptrs = |v: &[CString]| -> Vec<*const libc::c_char> {
            v.iter()
                .map(|a| a.as_ptr())
                .chain(std::iter::once(std::ptr::null()))
                .collect()
        };
        let (argv, envp) = (ptrs(&prog.argv), ptrs(&prog.env));
        let script_argv = (!prog.script_argv.is_empty()).then(|| ptrs(&prog.script_argv));
        let failed = format!(
            "bpfmux trace: -c: cannot execute {}\n",
            prog.path.to_string_lossy()
        );
        let mut fds = [0; 2];
        // SAFETY: fds has room for two descriptors.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(std::io::Error::last_os_error()).context("pipe for -c");
        }
        // SAFETY: the pipe descriptors are ours.
        let (rd, wr) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: the child only calls async-signal-safe functions (close,
        // read, execve, write, _exit) before exec.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(std::io::Error::last_os_error()).context("fork for -c");
        }
        if pid == 0 {
            // SAFETY: see above; everything was prepared before fork.
            unsafe {
                libc::close(wr.as_raw_fd());
                let mut b = 0u8;
                // EOF without a byte: the tracer gave up; do not run.
                if libc::read(rd.as_raw_fd(), &mut b as *mut u8 as *mut libc::c_void, 1) != 1 {
                    libc::_exit(127);
                }
                libc::execve(prog.path.as_ptr(), argv.as_ptr(), envp.as_ptr());
                let err = *libc::__errno_location();
                // A file the kernel cannot run (a script without #!): the
                // shell reads it, as execvp does.
                if let (libc::ENOEXEC, Some(sa)) = (err, &script_argv) {
                    libc::execve(sa[0], sa.as_ptr(), envp.as_ptr());
                }
                // Only if the file changed since the lookup.
                libc::write(2, failed.as_ptr() as *const libc::c_void, failed.len());
                libc::_exit(if err == libc::ENOENT { 127 } else { 126 });
            }
        }
        drop(rd);
        let mut programs = vec![std::path::PathBuf::from(std::ffi::OsStr::from_bytes(
            prog.path.as_bytes(),
        ))];
        if prog.shell.is_some() || !prog.script_argv.is_empty() {
            programs.push(cmdline::SHELL.into());
        }
        Ok(Self {
            pid,
            programs,
            go: Some(wr),
            status: None,
        })
    }

    pub fn release(&mut self) -> anyhow::Result<()> {
        if let Some(w) = self.go.take() {
            // SAFETY: valid descriptor, one byte from a valid buffer.
            let n = unsafe { libc::write(w.as_raw_fd(), b"g".as_ptr() as *const libc::c_void, 1) };
            if n != 1 {
                return Err(std::io::Error::last_os_error()).context("starting the -c command");
            }
        }
        Ok(())
    }

    pub fn exited(&mut self) -> bool {
        if self.status.is_some() {
            return true;
        }
        let mut st = 0;
        // SAFETY: our own child; WNOHANG does not block.
        let r = unsafe { libc::waitpid(self.pid, &mut st, libc::WNOHANG) };
        if r == self.pid {
            self.status = Some(st);
        }
        self.status.is_some()
    }
}

impl Child {
    /// The command's exit status, once it exited normally or by a signal.
    pub fn exit_code(&self) -> Option<i32> {
        self.status.map(|st| libc::WEXITSTATUS(st))
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if self.status.is_none() {
            // Not started or still running on an error path: don't leave it.
            // SAFETY: signalling and reaping our own child.
            unsafe {
                libc::kill(self.pid, libc::SIGKILL);
                libc::waitpid(self.pid, std::ptr::null_mut(), 0);
            }
        }
    }
}
