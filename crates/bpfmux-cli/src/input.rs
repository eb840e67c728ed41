//! Input the user hands us: files read with a size limit (`-f /dev/zero`
//! must fail, not fill memory) and addresses streamed from standard input
//! in batches of bounded size, so a million addresses take bounded memory;
//! a batch also ends when the input pauses, so a caller who waits for each
//! answer gets it.

use std::io::{self, BufRead, BufReader, Read};
use std::os::fd::{AsFd, AsRawFd};
use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context as _};

use crate::parse::parse_addr;

/// Largest text input file (`trace -f`): far beyond any real pattern list.
pub const MAX_TEXT_FILE: u64 = 16 << 20;

/// Longest line of an address stream (stated in `bpfmux sym --help`).
pub const MAX_LINE: u64 = 64 << 10;

/// How long the input may pause before the addresses read so far are
/// answered.
const IDLE: Duration = Duration::from_millis(50);

/// Addresses symbolized or normalized per batch when streaming.
pub const BATCH: usize = 4096;

/// Reads a UTF-8 text file (`-`: standard input) of at most `limit` bytes.
pub fn read_text(path: &Path, limit: u64) -> anyhow::Result<String> {
    let what = || {
        if path.as_os_str() == "-" {
            "standard input".to_string()
        } else {
            path.display().to_string()
        }
    };
    let mut buf = Vec::new();
    let n = if path.as_os_str() == "-" {
        io::stdin().lock().take(limit + 1).read_to_end(&mut buf)
    } else {
        let f = std::fs::File::open(path).with_context(|| format!("opening {}", what()))?;
        if f.metadata().is_ok_and(|m| m.is_dir()) {
            bail!("{} is a directory", what());
        }
        f.take(limit + 1).read_to_end(&mut buf)
    }
    .with_context(|| format!("reading {}", what()))?;
    if n as u64 > limit {
        bail!(
            "{} is larger than {} MiB; not reading further",
            what(),
            limit >> 20
        );
    }
    String::from_utf8(buf).with_context(|| format!("{} is not UTF-8 text", what()))
}

/// A reader that can say whether more input is at hand.
pub trait Pending: Read {
    /// Whether a read would return data (or end of input) within
    /// `timeout`. Memory always has its data at hand.
    fn ready(&self, _timeout: Duration) -> bool {
        true
    }
}

impl Pending for &[u8] {}

impl Pending for std::fs::File {
    fn ready(&self, timeout: Duration) -> bool {
        let mut p = libc::pollfd {
            fd: self.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
        // SAFETY: one valid pollfd for the call's duration. An error
        // (EINTR) counts as ready: the read that follows decides.
        unsafe { libc::poll(&mut p, 1, ms) != 0 }
    }
}

/// Addresses from a reader: whitespace-separated, any number per line,
/// `#` starts a comment. Yields batches of at most [`BATCH`] addresses; a
/// batch ends early when the input pauses for [`IDLE`] after a line.
pub struct AddrStream<R> {
    reader: BufReader<R>,
    line: Vec<u8>,
    lineno: u64,
    done: bool,
}

impl<R: Pending> AddrStream<R> {
    pub fn new(reader: R) -> Self {
        Self {
            reader: BufReader::new(reader),
            line: Vec::new(),
            lineno: 0,
            done: false,
        }
    }

    /// The next batch; empty at the end of the input.
    pub fn next_batch(&mut self, out: &mut Vec<u64>) -> anyhow::Result<()> {
        out.clear();
        while !self.done && out.len() < BATCH {
            // Nothing buffered and nothing coming: answer what we have.
            if !out.is_empty()
                && self.reader.buffer().is_empty()
                && !self.reader.get_ref().ready(IDLE)
            {
                break;
            }
            self.line.clear();
            let n = (&mut self.reader)
                .take(MAX_LINE + 1)
                .read_until(b'\n', &mut self.line)
                .context("reading addresses from standard input")?;
            if n == 0 {
                self.done = true;
                break;
            }
            self.lineno += 1;
            if n as u64 > MAX_LINE {
                bail!(
                    "standard input line {}: longer than {} KiB",
                    self.lineno,
                    MAX_LINE >> 10
                );
            }
            let text = std::str::from_utf8(&self.line)
                .with_context(|| format!("standard input line {}: not UTF-8", self.lineno))?;
            let text = text.split('#').next().unwrap_or("");
            for word in text.split_ascii_whitespace() {
                let a = parse_addr(word)
                    .map_err(|e| anyhow::anyhow!("standard input line {}: {e}", self.lineno))?;
                out.push(a);
            }
        }
        Ok(())
    }
}

/// Where a verb's addresses come from.
pub enum Addrs {
    Args(Vec<u64>),
    Stdin,
}

impl Addrs {
    /// `-` alone (or, with `stdin_if_none`, no addresses at all) reads
    /// standard input; otherwise every argument must be an address.
    pub fn from_args(args: &[String], stdin_if_none: bool) -> anyhow::Result<Self> {
        match args {
            [] if stdin_if_none => Ok(Self::Stdin),
            [one] if one == "-" => Ok(Self::Stdin),
            _ => Ok(Self::Args(
                args.iter()
                    .map(|s| parse_addr(s).map_err(anyhow::Error::msg))
                    .collect::<anyhow::Result<_>>()?,
            )),
        }
    }

    /// Calls `f` once per batch, in input order.
    pub fn for_each_batch(
        self,
        mut f: impl FnMut(&[u64]) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        match self {
            Self::Args(v) => v.chunks(BATCH).try_for_each(f),
            Self::Stdin => {
                // Our own buffer over the descriptor, so that what is
                // buffered is known (to answer on a pause).
                let fd = match io::stdin().as_fd().try_clone_to_owned() {
                    Ok(fd) => fd,
                    // Closed: no addresses, as std reads a closed stdin.
                    Err(e) if e.raw_os_error() == Some(libc::EBADF) => return Ok(()),
                    Err(e) => return Err(anyhow::Error::from(e).context("standard input")),
                };
                let mut s = AddrStream::new(std::fs::File::from(fd));
                let mut batch = Vec::with_capacity(BATCH);
                loop {
                    s.next_batch(&mut batch)?;
                    if batch.is_empty() {
                        return Ok(());
                    }
                    f(&batch)?;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batches(input: &str) -> anyhow::Result<Vec<Vec<u64>>> {
        let mut s = AddrStream::new(input.as_bytes());
        let mut out = Vec::new();
        let mut b = Vec::new();
        loop {
            s.next_batch(&mut b)?;
            if b.is_empty() {
                return Ok(out);
            }
            out.push(b.clone());
        }
    }

    #[test]
    fn reads_words_lines_and_comments() {
        let b = batches("0x10 0x20\n# comment\n\n30 # trailing\n").unwrap();
        assert_eq!(b, vec![vec![0x10, 0x20, 0x30]]);
    }

    #[test]
    fn batches_are_bounded() {
        let text: String = (0..BATCH * 2 + 5).map(|i| format!("{i:x}\n")).collect();
        let b = batches(&text).unwrap();
        assert_eq!(
            b.iter().map(Vec::len).collect::<Vec<_>>(),
            [BATCH, BATCH, 5]
        );
        assert_eq!(b[2][4], (BATCH * 2 + 4) as u64);
    }

    #[test]
    fn errors_name_the_line() {
        let e = batches("0x10\n+10\n").unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("not an address"), "{e}");
        let long = "0".repeat(MAX_LINE as usize + 10);
        let e = batches(&long).unwrap_err().to_string();
        assert!(e.contains("longer than"), "{e}");
    }

    #[test]
    fn a_pause_ends_the_batch() {
        use std::io::Write;
        let mut fds = [0; 2];
        // SAFETY: a fresh pipe; each end is owned by one File below.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let (r, mut w) = unsafe {
            use std::os::fd::FromRawFd;
            (
                std::fs::File::from_raw_fd(fds[0]),
                std::fs::File::from_raw_fd(fds[1]),
            )
        };
        w.write_all(b"10 11\n").unwrap();
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(2));
            w.write_all(b"20\n").unwrap();
        });
        let mut s = AddrStream::new(r);
        let mut b = Vec::new();
        let t = std::time::Instant::now();
        s.next_batch(&mut b).unwrap();
        assert_eq!(
            (b.as_slice(), t.elapsed() < Duration::from_secs(1)),
            (&[0x10, 0x11][..], true)
        );
        s.next_batch(&mut b).unwrap();
        assert_eq!(b, [0x20]);
        writer.join().unwrap();
        s.next_batch(&mut b).unwrap();
        assert!(b.is_empty());
    }

    #[test]
    fn text_files_have_a_limit() {
        let e = read_text(Path::new("/dev/zero"), 1 << 20).unwrap_err();
        assert!(format!("{e:#}").contains("larger than 1 MiB"), "{e:#}");
        let e = read_text(Path::new("/"), 1 << 20).unwrap_err();
        assert!(format!("{e:#}").contains("is a directory"), "{e:#}");
    }
}
