//! `bpfmux trace --errors --record-last N`: the error recorder's options
//! (the library's `trace::recorder`), where its dumps go, and what the run
//! says about it.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;

use anyhow::Context as _;
use bpfmux::trace::errors::Failure;
use bpfmux::trace::recorder::{RecordBy, RecordOptions, Recorder, DEFAULT_MAX_KEYS};

/// The options, as `bpfmux trace` takes them.
#[derive(clap::Args, Default)]
pub struct RecordArgs {
    /// With --errors: keep the last N error chains per errno (or per failing
    /// function: --record-by) instead of printing each, in bounded memory,
    /// and write them out on SIGUSR1, after a --record-on error and at exit.
    #[arg(long, value_name = "N", requires = "errors",
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub record_last: Option<u32>,
    /// With --record-last: what the last chains are kept per.
    #[arg(long, value_name = "KEY", value_enum, default_value_t = By::Errno,
          requires = "record_last")]
    pub record_by: By,
    /// With --record-last: append the dumps to FILE (created if need be)
    /// instead of writing them to standard output.
    #[arg(long, value_name = "FILE", requires = "record_last")]
    pub record_out: Option<PathBuf>,
    /// With --record-last: also write a dump right after each chain in
    /// which a call returned this error (a name such as EBADF, a number, or
    /// NULL; repeatable, or comma-separated).
    #[arg(long, value_name = "ERROR", requires = "record_last", value_delimiter = ',',
          value_parser = parse_failure)]
    pub record_on: Vec<Failure>,
}

/// `--record-by`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum By {
    /// The error the failing call returned (ENOENT, ..., NULL).
    #[default]
    Errno,
    /// The failing call's function.
    Function,
}

/// `--record-on`: an errno by name or number, or NULL.
fn parse_failure(s: &str) -> Result<Failure, String> {
    if s.eq_ignore_ascii_case("null") {
        return Ok(Failure::Null);
    }
    crate::parse::parse_errno(s).map(Failure::Errno)
}

/// Where the dumps go.
pub enum Sink {
    Stdout(crate::out::Stdout),
    /// A file opened to append, its name in its errors.
    File(BufWriter<File>, PathBuf),
}

impl Sink {
    fn named(path: &std::path::Path, e: io::Error) -> io::Error {
        io::Error::new(e.kind(), format!("writing to {}: {e}", path.display()))
    }
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Sink::Stdout(o) => o.write(buf),
            Sink::File(f, path) => f.write(buf).map_err(|e| Sink::named(path, e)),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Sink::Stdout(o) => o.flush(),
            Sink::File(f, path) => f.flush().map_err(|e| Sink::named(path, e)),
        }
    }
}

/// A recorder ready to run: the store, its sink, its form.
pub struct Setup {
    pub recorder: Recorder,
    pub sink: Sink,
    /// Dumps as JSON lines (--json), else text.
    pub json: bool,
}

impl Setup {
    /// Whether the dumps go to standard output.
    pub fn to_stdout(&self) -> bool {
        matches!(self.sink, Sink::Stdout(_))
    }

    /// What the run says once attached, on standard error.
    pub fn announce(&self, who: &str) -> String {
        let o = self.recorder.options();
        let to = match &self.sink {
            Sink::Stdout(_) => "standard output".to_string(),
            Sink::File(_, p) => p.display().to_string(),
        };
        let on: Vec<String> = o.on.iter().map(|f| f.name()).collect();
        let after = if on.is_empty() {
            String::new()
        } else {
            format!(", after each {}", on.join(" or "))
        };
        format!(
            "{who}: recording the last {} error chains per {} (at most {} {}s); written to \
             {to} on SIGUSR1 (kill -USR1 {}){after} and at exit",
            o.last,
            o.by.name(),
            o.max_keys,
            o.by.name(),
            std::process::id(),
        )
    }
}

impl RecordArgs {
    /// The recorder and its sink, the file opened (before anything is
    /// attached: a path that cannot be written fails first); `None` without
    /// --record-last.
    pub fn open(&self, json: bool) -> anyhow::Result<Option<Setup>> {
        let Some(last) = self.record_last else {
            return Ok(None);
        };
        let opts = RecordOptions {
            last: last as usize,
            by: match self.record_by {
                By::Errno => RecordBy::Errno,
                By::Function => RecordBy::Function,
            },
            max_keys: DEFAULT_MAX_KEYS,
            on: self.record_on.clone(),
        };
        let recorder = Recorder::new(opts).context("--record-last")?;
        let sink = match &self.record_out {
            Some(path) => {
                let f = OpenOptions::new()
                    .append(true)
                    .create(true)
                    .open(path)
                    .with_context(|| format!("--record-out {}", path.display()))?;
                Sink::File(BufWriter::new(f), path.clone())
            }
            None => Sink::Stdout(crate::out::stdout()),
        };
        Ok(Some(Setup {
            recorder,
            sink,
            json,
        }))
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        trace: super::super::Args,
    }

    fn parse(a: &[&str]) -> Result<super::super::Args, clap::Error> {
        Cli::try_parse_from([&["bpfmux"], a].concat()).map(|c| c.trace)
    }

    #[test]
    fn options_need_errors_and_each_other() {
        let t = parse(&["--errors", "--record-last", "3", "f"]).unwrap();
        let r = &t.record;
        assert_eq!((r.record_last, r.record_by), (Some(3), By::Errno));
        assert!(r.record_on.is_empty() && r.record_out.is_none());
        let t = parse(&[
            "--errors",
            "--record-last=5",
            "--record-by",
            "function",
            "--record-on",
            "EBADF,22",
            "--record-on",
            "null",
            "--record-out",
            "/tmp/x",
            "f",
        ])
        .unwrap();
        let r = &t.record;
        assert_eq!(r.record_by, By::Function);
        assert_eq!(
            r.record_on,
            [Failure::Errno(9), Failure::Errno(22), Failure::Null]
        );
        for bad in [
            &["--record-last", "3", "f"][..],
            &["--errors", "--record-last", "0", "f"],
            &["--errors", "--record-last", "10001", "f"],
            &["--errors", "--record-on", "EBADF", "f"],
            &["--errors", "--record-out", "/tmp/x", "f"],
            &["--errors", "--record-by", "function", "f"],
            &[
                "--errors",
                "--record-last",
                "3",
                "--record-on",
                "ENOPE",
                "f",
            ],
            &["--errors", "--record-last", "3", "--record-by", "pid", "f"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
        let e = parse(&["--record-last", "3", "f"])
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("--errors"), "{e}");
    }

    #[test]
    fn opens_its_file_to_append_and_says_where_dumps_go() {
        let path = std::env::temp_dir().join(format!("bpfmux-record-{}", std::process::id()));
        std::fs::write(&path, "before\n").unwrap();
        let path_arg = path.to_string_lossy().into_owned();
        let t = parse(&[
            "--errors",
            "--record-last",
            "2",
            "--record-on",
            "EBADF",
            "--record-out",
            &path_arg,
            "f",
        ])
        .unwrap();
        let mut setup = t.record.open(false).unwrap().unwrap();
        assert!(!setup.to_stdout());
        let said = setup.announce("bpfmux trace");
        assert!(
            said.starts_with(
                "bpfmux trace: recording the last 2 error chains per errno (at most 1024 \
                 errnos); written to "
            ) && said.ends_with(", after each EBADF and at exit"),
            "{said}"
        );
        setup.sink.write_all(b"dump\n").unwrap();
        setup.sink.flush().unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "before\ndump\n");
        let _ = std::fs::remove_file(&path);
        // Without --record-last, nothing; a directory is an error naming the option.
        assert!(parse(&["--errors", "f"])
            .unwrap()
            .record
            .open(false)
            .unwrap()
            .is_none());
        let t = parse(&["--errors", "--record-last", "2", "--record-out", "/", "f"]).unwrap();
        let e = format!("{:#}", t.record.open(true).err().unwrap());
        assert!(e.starts_with("--record-out /: "), "{e}");
    }
}
