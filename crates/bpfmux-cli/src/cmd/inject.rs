//! `bpfmux inject`: make calls of kernel functions fail with an errno, for
//! testing error paths. The run is `bpfmux trace`'s (the library's
//! `trace::Session`) with fmod_ret programs instead of tracing ones.

use anyhow::anyhow;
use bpfmux::trace::inject::{InjectError, Injection};
use bpfmux::trace::{self, Filters, JsonLines, PlainText};

use super::trace::exports::Exports;
use super::trace::{execute, inputs, Output, Shared, Which};

/// Make kernel functions return an errno: every function the patterns
/// select that the kernel allows fmod_ret on, through one fmod_ret.multi
/// link (this series) or one fmod_ret program per function.
#[derive(clap::Args)]
#[command(after_help = "\
Only the functions the kernel allows fmod_ret on can be made to fail, by the
verifier's rule: LSM hooks (security_*) that return an error number, always;
with CONFIG_FUNCTION_ERROR_INJECTION, the functions of the error-injection list
(/sys/kernel/debug/error_injection/list: ALLOW_ERROR_INJECTION, with an errno or
an ERR_PTR); without it (Debian's stock kernels), the system call entry points
(__x64_sys_*). A function named exactly that is not allowed is an error; one a
glob matched is dropped (-v says why). A chosen call does not run: it returns
-ERRNO (ERR_PTR(-ERRNO) for functions returning a pointer). bpfmux's own calls
never fail. Injection starts once every function is attached and stops before
detaching; Ctrl-C, the end of -c or -d stops it, and everything is detached
before bpfmux exits. The summary counts calls and calls made to fail per
function.

Engines: global and tracing-multi (fmod_ret.multi, this series' kernels),
fentry-each (one fmod_ret per function, any kernel with trampolines); the
first one the kernel accepts unless --engine says.

Examples:
  bpfmux inject -c 'cat /etc/hostname' --errno ENOMEM --times 1 __x64_sys_openat
                                     the command's first openat fails with ENOMEM
  bpfmux inject --comm nginx -P 0.01 -e EIO '__x64_sys_*read*'
                                     1% of nginx's read system calls fail with EIO
  bpfmux inject -e EACCES -c 'cat /etc/hostname' security_file_open
                                     the command's files cannot be opened (its exec
                                     fails first: exec opens the program)
  bpfmux inject -d 10 should_failslab   slab allocations fail (with ENOMEM) for 10 s")]
pub struct Args {
    /// Functions to make fail (exact names, globs, module:glob).
    #[arg(value_name = "PATTERN", required = true)]
    patterns: Vec<String>,
    /// Leave out functions matching this pattern (repeatable).
    #[arg(short = 'x', long = "exclude", value_name = "PATTERN")]
    excludes: Vec<String>,
    /// The error to return: a name (ENOMEM, EIO, ...) or a number.
    #[arg(short, long, default_value = "ENOMEM", value_name = "ERRNO")]
    errno: String,
    /// The chance that a call fails, in (0, 1].
    #[arg(short = 'P', long, default_value_t = 1.0, value_name = "P")]
    probability: f64,
    /// Make this many calls fail, over all functions, then no more.
    #[arg(short, long, value_name = "N")]
    times: Option<u64>,
    /// Attach mechanism (default: best available).
    #[arg(long, value_name = "ENGINE")]
    engine: Option<String>,
    #[command(flatten)]
    which: Which,
    /// JSON: the summary as one object.
    #[arg(long)]
    json: bool,
    /// Say which functions were dropped and why.
    #[arg(short, long, action = clap::ArgAction::Count)]
    verbose: u8,
}

/// `ENOMEM`, `12` or `-12` → 12.
fn parse_errno(s: &str) -> anyhow::Result<i32> {
    crate::parse::parse_errno(s).map_err(|e| anyhow!("--errno {e}"))
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let engine = inputs::engine(args.engine.as_deref())?;
    let injection = Injection::new(parse_errno(&args.errno)?, args.probability, args.times)
        .map_err(|e| match e {
            InjectError::Times => anyhow!("--times 0 would inject nothing"),
            e => e.into(),
        })?;
    let shared = Shared {
        who: "bpfmux inject",
        which: &args.which,
        verbose: args.verbose,
        kernel_lines: None,
        debuginfod: None,
    };
    let scope = shared.check()?;
    let opts = trace::TraceOptions {
        patterns: inputs::patterns(&args.patterns)?,
        excludes: inputs::patterns(&args.excludes)?,
        engine,
        inject: Some(injection),
        filters: Filters::default(),
        ..Default::default()
    };
    let json = args.json;
    execute(
        &shared,
        scope,
        opts,
        &mut Exports::none(),
        None,
        |out, notes| {
            if json {
                Output::Json(JsonLines::new(out, false).with_notes(notes))
            } else {
                Output::Plain(PlainText::new(out, false, None, false).with_notes(notes))
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errnos_by_name_or_number() {
        assert_eq!(parse_errno("ENOMEM").unwrap(), 12);
        assert_eq!(parse_errno("eio").unwrap(), 5);
        assert_eq!(parse_errno("12").unwrap(), 12);
        assert_eq!(parse_errno("-2").unwrap(), 2);
        assert!(parse_errno("ENOPE").is_err());
        assert!(parse_errno("5000").is_err());
    }
}
