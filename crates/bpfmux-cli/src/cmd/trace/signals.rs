//! `bpfmux trace`'s signals: the first SIGINT, SIGTERM or SIGHUP asks for
//! a clean stop (or abandons an attach in progress, answered at once); a
//! second one of the same kind ends the process.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use anyhow::Context as _;

/// Set by the first SIGINT/SIGTERM/SIGHUP: stop tracing, or abandon the attach.
pub static STOP: AtomicBool = AtomicBool::new(false);
/// Which signal set STOP.
static STOP_SIGNAL: AtomicI32 = AtomicI32::new(0);

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

const STOP_SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// Blocks (or unblocks) the stop signals in the calling thread. The main
/// thread blocks them while attaching: it can sit for seconds in one
/// link_create, and a signal waits for its thread to leave the kernel. The
/// thread [`install`] starts takes them meanwhile.
fn mask_stop_signals(block: bool) {
    // SAFETY: a local, emptied set; pthread_sigmask on the calling thread.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in STOP_SIGNALS {
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
        // SAFETY: a zeroed sigaction plus handler and flags is valid; the
        // handler only stores to atomics (async-signal-safe).
        let r = unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as libc::sighandler_t;
            sa.sa_flags = libc::SA_RESETHAND | libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut())
        };
        if r != 0 {
            return Err(std::io::Error::last_os_error()).context("installing signal handlers");
        }
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
