//! `bpfmux`: attach BPF at scale. This binary is a thin shell over the
//! `bpfmux` library; each subcommand lives in `cmd/`.

mod cmd;
mod cmdline;
mod debuginfod;
mod input;
mod out;
mod parse;
mod progress;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "bpfmux",
    version,
    about = "Attach BPF at scale: kernel feature probes, address normalization, symbolization",
    after_help = "\
Examples:
  bpfmux features                    what this kernel offers (probed, not guessed)
  bpfmux features --json             the same as JSON
  bpfmux maps --pid 1234             all mappings of process 1234
  bpfmux maps --pid 1234 --exec-only 0x7f3a12345678 0x55d0c0ffee00
                                     mapping + file offset + build ID per address
  bpfmux sym --pid 1234 0x55d0c0ffee00
                                     function+offset (file:line with DWARF)
  bpfmux sym --kernel 0xffffffff81234567
  bpfmux trace 'vfs_*'              live call counts of every vfs_ function
  bpfmux trace --latency -d 5 'tcp_*'
                                     per-function latency for 5 seconds
  bpfmux trace --errors -c 'cat /nope' __x64_sys_openat do_sys_openat2 path_openat
                                     the chain of calls that failed, with each errno
  bpfmux trace --errors --stacks --record run.jsonl.gz -c 'cat /nope' do_sys_openat2
  bpfmux report run.jsonl.gz         the same run printed later, here or elsewhere
  bpfmux inject -c 'cat /etc/hostname' --times 1 -e ENOMEM __x64_sys_openat
                                     make the command's first openat fail
  bpfmux xdp attach eth0 fw.o count.o several XDP programs on one interface"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    Features(cmd::features::Args),
    Inject(cmd::inject::Args),
    Maps(cmd::maps::Args),
    Report(cmd::report::Args),
    Sym(cmd::sym::Args),
    // Boxed: its options are many times the others' size.
    Trace(Box<cmd::trace::Args>),
    Xdp(cmd::xdp::Args),
}

fn main() {
    // Rust ignores SIGPIPE, so a closed output pipe (`bpfmux ... | head`)
    // would turn every print into an EPIPE error or a panic. Restore the
    // default, and unblock it in case the parent blocked it: the process
    // ends quietly, status 141, like other tools.
    // SAFETY: a signal disposition and the signal mask set before any
    // thread, from a local, emptied set.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGPIPE);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    }
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Features(a) => cmd::features::run(a),
        Command::Inject(a) => cmd::inject::run(a),
        Command::Maps(a) => cmd::maps::run(a),
        Command::Report(a) => cmd::report::run(a),
        Command::Sym(a) => cmd::sym::run(a),
        Command::Trace(a) => cmd::trace::run(*a),
        Command::Xdp(a) => cmd::xdp::run(a),
    };
    if let Err(e) = result {
        // Should SIGPIPE still not end us (EPIPE all the same): quietly too.
        if out::is_closed_pipe(&e) {
            std::process::exit(128 + libc::SIGPIPE);
        }
        eprintln!("bpfmux: error: {e:#}");
        // A `trace -c` command that cannot run: the status a shell gives it.
        let status = e
            .chain()
            .find_map(|c| c.downcast_ref::<cmdline::CommandError>())
            .map_or(1, |c| c.status);
        std::process::exit(status);
    }
}
