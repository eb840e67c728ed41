//! Standard output for every verb's results. A write that fails says it
//! was standard output (`bpfmux: error: writing to standard output: No
//! space left on device`), never a panic; a reader that went away is not
//! an error at all ([`is_closed_pipe`]: the process ends quietly).

use std::fmt;
use std::io::{self, StdoutLock, Write};

/// Why a write to standard output failed. Carried inside the `io::Error`
/// the writer returns, so its kind (e.g. `BrokenPipe`) is kept.
#[derive(Debug)]
pub struct OutputError(io::Error);

impl fmt::Display for OutputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The OS error is part of this one line: not a `source`, or `{:#}`
        // would print it twice.
        write!(f, "writing to standard output: {}", self.0)
    }
}

impl std::error::Error for OutputError {}

/// Locked standard output whose errors are [`OutputError`]s (or nothing,
/// see [`nowhere`]).
pub struct Stdout(Option<StdoutLock<'static>>);

pub fn stdout() -> Stdout {
    Stdout(Some(io::stdout().lock()))
}

/// In the place of standard output for a report whose standard output
/// another output took (`bpfmux trace --folded -`): writes nothing.
pub fn nowhere() -> Stdout {
    Stdout(None)
}

fn named(e: io::Error) -> io::Error {
    io::Error::new(e.kind(), OutputError(e))
}

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &mut self.0 {
            Some(o) => o.write(buf).map_err(named),
            None => Ok(buf.len()),
        }
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match &mut self.0 {
            Some(o) => o.write_all(buf).map_err(named),
            None => Ok(()),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.0 {
            Some(o) => o.flush().map_err(named),
            None => Ok(()),
        }
    }
}

/// A JSON array written element by element as results come, one element
/// per line, each line complete as soon as it is written (`[` alone, then
/// `  {…}`, then `, {…}` for every further one, `]` last), so a reader
/// waiting line by line gets each answer at once. `[` goes out with the
/// first element: a run that fails before it has any leaves standard output
/// empty; one that fails later still closes the array.
#[derive(Default)]
pub struct JsonArray {
    open: bool,
}

impl JsonArray {
    /// Writes one element.
    pub fn push(&mut self, out: &mut impl Write, v: &impl serde::Serialize) -> anyhow::Result<()> {
        let text = serde_json::to_string(v)?;
        let lead = if self.open { ", " } else { "[\n  " };
        writeln!(out, "{lead}{text}")?;
        self.open = true;
        Ok(())
    }

    /// Ends the array after the run's `result`: `[]` if it succeeded with no
    /// element, `]` if any was written (best effort after a failure, whose
    /// error is what is returned).
    pub fn end(self, out: &mut impl Write, result: anyhow::Result<()>) -> anyhow::Result<()> {
        let tail = match (&result, self.open) {
            (_, true) => "]\n",
            (Ok(()), false) => "[]\n",
            (Err(_), false) => "",
        };
        let written = out.write_all(tail.as_bytes()).and_then(|()| out.flush());
        result?;
        Ok(written?)
    }
}

/// Whether `e` is standard output's reader having gone away (EPIPE with
/// SIGPIPE not delivered): the output was cut short on purpose, as by
/// `bpfmux ... | head`.
pub fn is_closed_pipe(e: &anyhow::Error) -> bool {
    let closed = |io: &io::Error| {
        io.kind() == io::ErrorKind::BrokenPipe
            && io.get_ref().is_some_and(|i| i.is::<OutputError>())
    };
    e.chain().any(|c| {
        c.downcast_ref::<io::Error>().is_some_and(closed)
            // A trace report's write error, as the library hands it back.
            || matches!(c.downcast_ref(), Some(bpfmux::trace::Error::Report(io)) if closed(io))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_standard_output_once() {
        let e = named(io::Error::from_raw_os_error(libc::ENOSPC));
        assert_eq!(e.kind(), io::ErrorKind::StorageFull);
        let e = anyhow::Error::from(e);
        let text = format!("{e:#}");
        assert!(text.starts_with("writing to standard output: "), "{text}");
        assert_eq!(text.matches("No space left").count(), 1, "{text}");
        assert!(!is_closed_pipe(&e));
    }

    #[test]
    fn only_a_closed_standard_output_is_quiet() {
        let pipe = named(io::Error::from_raw_os_error(libc::EPIPE));
        assert!(is_closed_pipe(
            &anyhow::Error::from(pipe).context("listing")
        ));
        let report = named(io::Error::from_raw_os_error(libc::EPIPE));
        assert!(is_closed_pipe(&anyhow::Error::from(
            bpfmux::trace::Error::Report(report)
        )));
        // EPIPE from anything else (a -c child's pipe) is a real error.
        let other = io::Error::from_raw_os_error(libc::EPIPE);
        assert!(!is_closed_pipe(&anyhow::Error::from(other)));
    }
}
