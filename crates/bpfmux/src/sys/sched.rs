//! Keeping the calling thread from being preempted by ordinary tasks for a
//! stretch of code: [`Unpreempted`].
//!
//! Why a tracer needs it: reading most BPF maps from user space raises the
//! kernel's per-CPU `bpf_prog_active` for the length of the copy
//! (`bpf_disable_instrumentation()`), and on kernels built with
//! `PREEMPT_RCU` (preemptible and lazy preemption) that stretch can be
//! preempted. kprobe and kprobe.multi programs run only where that count is
//! zero, so while a thread preempted inside a map read waits for its CPU,
//! every kprobe program on that CPU skips its calls (counted as recursion
//! misses) — and what takes the CPU is usually the workload being traced.
//! A thread in the `SCHED_FIFO` class is not preempted by tasks of the
//! normal classes, so its map reads end before the workload runs again.

use std::io;

/// While alive, the calling thread runs `SCHED_FIFO` at the lowest real-time
/// priority; the policy it had comes back when it is dropped. Needs
/// `CAP_SYS_NICE` (or an `RLIMIT_RTPRIO` above zero).
#[derive(Debug)]
pub struct Unpreempted {
    policy: libc::c_int,
    param: libc::sched_param,
}

impl Unpreempted {
    /// Moves the calling thread to `SCHED_FIFO`, priority 1, unless it is
    /// real-time already (then nothing changes).
    pub fn enter() -> io::Result<Self> {
        // SAFETY: pid 0 is the calling thread; `param` outlives the calls.
        let mut param = libc::sched_param { sched_priority: 0 };
        let policy = unsafe { libc::sched_getscheduler(0) };
        if policy < 0 || unsafe { libc::sched_getparam(0, &mut param) } < 0 {
            return Err(io::Error::last_os_error());
        }
        if policy & !libc::SCHED_RESET_ON_FORK != libc::SCHED_FIFO
            && policy & !libc::SCHED_RESET_ON_FORK != libc::SCHED_RR
        {
            let fifo = libc::sched_param { sched_priority: 1 };
            // SAFETY: as above.
            if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &fifo) } < 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(Self { policy, param })
    }
}

impl Drop for Unpreempted {
    fn drop(&mut self) {
        // SAFETY: as in `enter`. Setting back what the thread had cannot
        // need a privilege it lacked.
        unsafe { libc::sched_setscheduler(0, self.policy, &self.param) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> libc::c_int {
        // SAFETY: pid 0 is the calling thread.
        unsafe { libc::sched_getscheduler(0) }
    }

    #[test]
    fn the_policy_comes_back() {
        let before = policy();
        match Unpreempted::enter() {
            Ok(g) => {
                let now = policy() & !libc::SCHED_RESET_ON_FORK;
                assert!(now == libc::SCHED_FIFO || now == libc::SCHED_RR, "{now}");
                drop(g);
            }
            // Without CAP_SYS_NICE the thread keeps its policy.
            Err(e) => assert_eq!(e.raw_os_error(), Some(libc::EPERM)),
        }
        assert_eq!(policy(), before);
    }
}
