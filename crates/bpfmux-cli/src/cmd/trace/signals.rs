//! `bpfmux trace`'s signals: the first SIGINT, SIGTERM or SIGHUP asks for
//! a clean stop (or abandons an attach in progress, answered at once); a
//! second one of the same kind ends the process. While error chains are
//! recorded (`--record-last`), SIGUSR1 asks for a dump of them, each time.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use anyhow::Context as _;

/// Set by the first SIGINT/SIGTERM/SIGHUP: stop tracing, or abandon the attach.
pub static STOP: AtomicBool = AtomicBool::new(false);
/// Which signal set STOP.
static STOP_SIGNAL: AtomicI32 = AtomicI32::new(0);

/// Set by SIGUSR1 while error chains are recorded: write them out. Cleared
/// by the recorder when it has (signals between two turns of the session's
/// loop make one dump).
pub static DUMP: AtomicBool = AtomicBool::new(false);

/// Set while attaching: a signal then gets an answer at once, since the
/// link being created can take seconds to come back.
static ATTACHING: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(sig: libc::c_int) {
    STOP_SIGNAL.store(sig, Ordering::Relaxed);
    STOP.store(true, Ordering::Relaxed);
    if ATTACHING.load(Ordering::Relaxed) {
        const MSG: &[u8] =
            b"\nbpfmux trace: stopping: the attach is abandoned and what it attached \
            is detached (a second signal exits at once)\n";
        // SAFETY: write(2) is async-signal-safe; the buffer is static.
        unsafe { libc::write(2, MSG.as_ptr() as *const libc::c_void, MSG.len()) };
    }
}

extern "C" fn on_dump(_sig: libc::c_int) {
    DUMP.store(true, Ordering::Relaxed);
}

const STOP_SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// Blocks (or unblocks) the stop signals, and SIGUSR1, in the calling
/// thread. The main thread blocks them while attaching: it can sit for
/// seconds in one link_create, and a signal waits for its thread to leave
/// the kernel. The thread [`install`] starts takes them meanwhile (a
/// SIGUSR1 then asks for a dump at the first turn of the run).
fn mask_stop_signals(block: bool) {
    // SAFETY: a local, emptied set; pthread_sigmask on the calling thread.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in STOP_SIGNALS.into_iter().chain([libc::SIGUSR1]) {
            libc::sigaddset(&mut set, sig);
        }
        let how = if block {
            libc::SIG_BLOCK
        } else {
            libc::SIG_UNBLOCK
        };
        libc::pthread_sigmask(how, &set, std::ptr::null_mut());
    }
}

/// One-shot handlers (SA_RESETHAND): the first signal asks for a clean stop,
/// a second one of the same kind kills the process, and the kernel closes
/// the links with the descriptors (nothing is pinned). A thread that only
/// sleeps is there to run the handler while the main thread blocks them.
pub fn install() -> anyhow::Result<()> {
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(|| loop {
            std::thread::park();
        })
        .context("starting the signal thread")?;
    for sig in STOP_SIGNALS {
        handle(sig, on_signal, libc::SA_RESETHAND | libc::SA_RESTART)?;
    }
    Ok(())
}

/// SIGUSR1 asks for a dump of the recorded error chains ([`DUMP`]), as
/// often as it comes; without this (no recorder) it keeps its default
/// action. The stop signals are not touched.
pub fn install_dump() -> anyhow::Result<()> {
    handle(libc::SIGUSR1, on_dump, libc::SA_RESTART)
}

/// Installs `handler` for `sig` with `flags`.
fn handle(
    sig: libc::c_int,
    handler: extern "C" fn(libc::c_int),
    flags: libc::c_int,
) -> anyhow::Result<()> {
    // SAFETY: a zeroed sigaction plus handler and flags is valid; the
    // handlers only store to atomics and write(2) (async-signal-safe).
    let r = unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler as *const () as libc::sighandler_t;
        sa.sa_flags = flags;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(sig, &sa, std::ptr::null_mut())
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error()).context("installing signal handlers");
    }
    Ok(())
}

/// While attaching: the main thread leaves the stop signals to the signal
/// thread, and a signal is answered at once.
pub fn attaching(on: bool) {
    if on {
        ATTACHING.store(true, Ordering::Relaxed);
        mask_stop_signals(true);
    } else {
        mask_stop_signals(false);
        ATTACHING.store(false, Ordering::Relaxed);
    }
}

/// Whether a stop signal came.
pub fn stopped() -> bool {
    STOP.load(Ordering::Relaxed)
}

/// The signal that asked for the stop (0 if none).
pub fn signal() -> i32 {
    STOP_SIGNAL.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The handler installed for `sig`, and its flags.
    fn installed(sig: libc::c_int) -> (libc::sighandler_t, libc::c_int) {
        // SAFETY: a zeroed sigaction is valid for sigaction to fill.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            libc::sigaction(sig, std::ptr::null(), &mut old);
            (old.sa_sigaction, old.sa_flags)
        }
    }

    /// SIGUSR1 asks for a dump every time it comes, and leaves the stop
    /// signals as they were: one-shot, to the stop handler.
    #[test]
    fn sigusr1_asks_for_dumps_and_leaves_the_stop_signals_alone() {
        install().unwrap();
        install_dump().unwrap();
        for _ in 0..3 {
            DUMP.store(false, Ordering::Relaxed);
            // SAFETY: raise(3) on this thread; the handler only stores.
            unsafe { libc::raise(libc::SIGUSR1) };
            assert!(DUMP.load(Ordering::Relaxed));
        }
        assert!(!stopped(), "SIGUSR1 is no stop");
        let (handler, flags) = installed(libc::SIGUSR1);
        assert_eq!(handler, on_dump as *const () as libc::sighandler_t);
        assert_eq!(flags & libc::SA_RESETHAND, 0, "not one-shot");
        for sig in STOP_SIGNALS {
            let (handler, flags) = installed(sig);
            assert_eq!(handler, on_signal as *const () as libc::sighandler_t);
            assert_ne!(flags & libc::SA_RESETHAND, 0, "one-shot");
        }
    }
}
