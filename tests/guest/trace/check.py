#!/usr/bin/python3
"""Runs in the guest: `bpfmux trace` checks with exact expectations.

usage: check.py BPFMUX TRIGGER CHECK [ARGS...]

  count ENGINE [--latency]   getpgid 1000x and getpriority 500x under -c: the summary
                             must count exactly that on the engine (auto: the best one)
  glob ENGINE MIN PATTERN... a glob set: >= MIN functions attached, the notrace
                             vfs_caches_init dropped, getpgid still counted exactly
  args ENGINE                --args on getpgid 3x: 3 entry and 3 exit events, in order
  args-types ENGINE [kmod]   --args prints every argument as its BTF type says, the 7th and
                             later (on the stack) too: 3 openat of a missing file make exactly 3
                             do_sys_openat2 calls with dfd=-100 and the file name as a string (a
                             user string), each returning -2 ENOENT; 2 mmap-self make exactly 2
                             do_mmap calls with len=12288, prot=1, flags=2 and pgoff=5 (its 7th
                             argument); the text form says the same; a glob within the cap
                             captures, one over it (vfs_* __x64_sys_*) is refused naming the cap
                             and the count, nothing attached. kmod (our kernel: the test module
                             targs_kmod, loaded and unloaded here): each function of the module
                             prints exactly its known values: nine integers of every size and
                             sign (three on the stack), a kernel string, a user string, an enum
                             by name, a bool, a function pointer and a text address (on the
                             stack) as symbols, NULL, a string cut at 63 bytes and whole with
                             --args-size 128, a struct by value, -EINVAL, ERR_PTR(-EINVAL), NULL.
                             --args-depth 1: do_sys_openat2's how prints {flags=N, mode=0,
                             resolve=0} after its address; kmod: bpfmux_targs_struct's struct
                             argument prints its exact fields (bitfields, an enum by name, an
                             embedded struct), with 2 and 3 also the struct its `inner` points
                             at ({id=42, tag="inner"}), with --args-size 16 cut after 3 fields
                             (`...`), without --args-depth its address alone
  filter-strings ENGINE [kmod]
                             --filter on strings in the kernel: of 3 opens of the missing file
                             and 2 of another in its directory, do_sys_openat2 passes exactly
                             3 for filename == FILE, 5 for ^= DIR, 2 for != FILE && ^= DIR, 3
                             for !(^= DIR/o) && ^= DIR, 5 with ret == -2, 0 for a longer or a
                             shorter name; --args sends only the 3 with that name; do_mmap's
                             7th argument: pgoff == 5 (and len) exactly the 2 mmap-self; a
                             string against a number and back, < on strings, ret ^= "x", an
                             unterminated string: exit != 0 at the column with a caret, nothing
                             attached. kmod: kernel strings of targs_kmod (name == "alpha" 1 of
                             3 calls per write, ^= 2, != 2, with ret 1; a kernel and a user
                             string together) and its 9th argument (i == 0x1122334455667788)
  own ENGINE                 -c runs the command itself (no shell in front, found through PATH):
                             5000 sigaction queries count exactly 5000 (dash makes 7 at startup)
  errors ENGINE              --errors on the openat path: 3 openat of a missing file make exactly
                             3 chains __x64_sys_openat > do_sys_openat2 > path_openat, each
                             call -2 ENOENT with nested durations, kernel stack through
                             do_sys_openat2; the summary counts 3 ENOENT in path_openat, nothing
                             lost; the text form says the same; getpgid 1000x makes no chain
  nulls ENGINE               when a NULL return is an error: 5 getpgid of a pid that cannot
                             exist (find_task_by_vpid returns NULL, getpgid -ESRCH). Tracing
                             find_task_by_vpid alone, each NULL is a lone one: no chain, the
                             summary counts 5 NULL-only chains left out and stderr says how to
                             see them; with --null all, 5 NULL chains of that one call; with
                             __x64_sys_getpgid traced too, 5 chains getpgid -3 ESRCH >
                             find_task_by_vpid NULL, none left out
  filter ENGINE              --filter/--min-latency in the kernel: of 1000 getpgid exactly the 37
                             of a missing pid pass 'errno == ESRCH' (963 pass 'ret >= 0'; the
                             summary sees 1000); find_task_by_vpid's `vnr` picks exactly the
                             37 missing and the 11 negative pids (signed, widened), alone and
                             with `ret == 0`; in one || with ret only on trampoline engines
                             (kprobe-multi: refused, nothing attached); --args, --stacks,
                             --errors and --graph record only what passed (the graph keeps
                             callers, a warning names the function lacking `vnr`);
                             --min-latency 100ms keeps exactly the 5 of 100 nanosleeps of
                             200 ms; bad filters (unknown name, type mismatch, unclosed `(`,
                             string on an integer, out of range) each exit != 0 with the
                             column and a caret, nothing attached
  exited-stacks ENGINE       --stacks on getpgid of exited-stack (main > exited_a > exited_b, which
                             makes the system call, 3x; main > exited_c > exited_b once), a
                             process that exits 1 s after its calls, before the summary:
                             under -c and --pid its user frames are named exited_b, exited_a
                             (exited_c), main, counts 3 and 1; the summary's user_stacks say
                             every address was normalized while the run went on, some from
                             the cache. With --stacks-at-end the same run shows addresses
                             only (the process is gone at the end: the names come from the
                             capture). The program exiting at once after its calls (-c and
                             --pid): the same names, every address not normalized before it
                             exited placed from the build ID and file offset the programs
                             recorded (user_stacks: failures == by_build_id)
  kernel-stacks ENGINE       kernel stacks start at the traced function, with no frame of the
                             tracing mechanism (BPF programs, trampolines, the global
                             trampoline, ftrace/fprobe/kprobe/rethook glue, JIT addresses) and
                             no caller twice: --stacks on getpgid 50x (the stack taken at the
                             entry, and with --filter 'ret >= 0' at the return) is exactly
                             __x64_sys_getpgid+0x0 > do_syscall_64 > entry_SYSCALL_64_after_hwframe,
                             50 calls; --errors on 3 openat of a missing file: each chain's
                             stack starts at path_openat+0x0 and ends do_sys_openat2 >
                             __x64_sys_openat > do_syscall_64 > entry_SYSCALL_64_after_hwframe,
                             each function once, and tracing path_openat alone gives the same
                             functions (traced callers leave no trace in the stack)
  recording ENGINE           --record FILE, then bpfmux report FILE in a fresh directory: the
                             trigger's 3 failing opens (--errors --stacks, gzipped) report the
                             same 3 chains (calls, returns, kernel and user stacks) and the same
                             summary (counts, error totals, stacks, user stack totals,
                             command_exit) as the live --json run, the trigger's user frames
                             named; exited-stack's run (--stacks) reports its two user stacks
                             named exited_b, exited_a (exited_c), main with counts 3 and 1, the
                             same as live; half of a recording is refused as truncated
  debuginfod ENGINE          a report that names frames from a debuginfod server: exited-stack
                             copied, traced (--stacks --record) and deleted; only its debug file
                             (objcopy --only-keep-debug) on a real debuginfod server (Debian's
                             debuginfod, on 127.0.0.1 in the guest, -F over one directory);
                             bpfmux report in a fresh directory with DEBUGINFOD_URLS and an empty
                             cache names the stacks as the live run did and says it downloaded
                             1 file; with the server stopped: exit 0, a warning naming the file,
                             its build ID and "connection refused", the frames of that file
                             addresses; then with the first report's cache: named again, "1 from
                             its cache"
  exports ENGINE             outputs for other tools. --stacks of exited-stack with --folded,
                             --flamegraph and --pprof: every folded line ends in the traced
                             getpgid, the counts add up to the summary's calls, those through
                             main;exited_a;exited_b to 3 and main;exited_c;exited_b to 1; the
                             SVG names those frames; the pprof (gunzipped, decoded here) has
                             type calls/count, the same totals, getpgid as every leaf; --folded -
                             writes only folded lines to stdout. --graph --latency under -c of
                             100 sigaction queries and 20 getpgid with --folded, --pprof and
                             --chrome-trace: folded values and pprof calls/time are the graph's
                             calls and exclusive times; the Chrome trace parses and has exactly
                             one slice per call (100, 100, 20), each do_sigaction inside an
                             rt_sigaction of its thread, and no event on stdout (no --args);
                             --chrome-trace of a glob: a slice per getpgid of a missing pid,
                             its args as --args prints them (regs a kernel pointer, return -3,
                             error ESRCH); over the cap (vfs_* __x64_sys_*): exit != 0, says
                             the count and the cap under --chrome-trace, nothing attached
  graph ENGINE               --graph under -c of 5000 sigaction queries and 1000 getpgid: the
                             tree is exactly __x64_sys_rt_sigaction x5000 > do_sigaction x5000
                             and __x64_sys_getpgid x1000, every node's exclusive time its
                             inclusive less its children's, nothing lost; the text form too
  scope-cgroup ENGINE        --cgroup counts a cgroup's subtree, --cgroup-exact that cgroup
                             only: cgroups P, P/child, P/child/grand and a sibling O of P
                             made here; getpgid 1000x in P/child, 200x in P/child/grand, 30x
                             in P, 700x in O and 50x in the root cgroup, each after bpfmux
                             attached: --cgroup P counts exactly 1230, --cgroup-exact P
                             exactly 30, --cgroup P/child exactly 1200; a path that is no
                             cgroup v2 directory is refused, nothing attached
  scope-pidns ENGINE         --pid with --pid-ns: three processes wait (trigger pause) while
                             bpfmux attaches: process 1 of a new pid namespace A (unshare
                             --pid --fork) that then calls getpgid 1000x, process 1 of
                             another new namespace B 700x, one of the initial namespace
                             300x. --pid 1 --pid-ns /proc/A/ns/pid counts exactly 1000 (and
                             names A's process by its ID here on stderr); --pid-ns A (by a
                             process ID) alone counts exactly 1000; --pid 1 --pid-ns B
                             exactly 700; a net namespace and a pid A lacks are refused,
                             nothing attached
  inject ENGINE              bpfmux inject --times 7 -e EPERM on getpgid under -c: of 20 calls
                             exactly 7 fail with EPERM (the command says so), the summary
                             counts 20 calls and 7 injected; a glob keeps only functions
                             the kernel allows fmod_ret on; the LSM hook
                             security_task_getpgid fails 3 of 5 getpgid(getpid()) with
                             EACCES; vfs_read (not allowed) is refused with a message naming
                             it and the list, nothing attached
  inject-unavailable ENGINE  an engine that cannot inject: exit != 0, says why
  inject-no-list ENGINE [lsm-only]
                             a kernel without function error injection (no list in debugfs):
                             as inject, the verifier's rule for such a build (system call
                             entry points and LSM hooks; lsm-only: a verifier that refuses
                             system calls, which must be refused by name), vfs_read refused
                             naming CONFIG_FUNCTION_ERROR_INJECTION
  not-found                  -c with a command that is not in PATH: exit 127 before attaching,
                             a message naming it
  unknown                    an unknown function: exit status != 0, a clear message
  unavailable ENGINE         a forced engine the kernel lacks: exit != 0, says why
  refused ENGINE             exact names with a notrace one (the kernel refuses it at attach,
                             found by bisection) and migrate_disable (denied): the rest attach
                             and count exactly, a warning names each refused one
  refused-all ENGINE         only names the kernel refuses: exit != 0, says so
  sigint ENGINE PATTERN      SIGINT while a long attach is under way: bpfmux stops the
                             attach, exits 130, and no link of it stays in the kernel
  sigterm ENGINE PATTERN     SIGTERM while tracing: a normal stop (summary, exit 0)
  record ENGINE              --errors --record-last 3 of the openat and close paths of a trigger
                             that pauses (--pid): SIGUSR1 dumps exactly the last 3 chains per
                             errno of 5 openat (ENOENT) and 4 close (EBADF), matched to each
                             call by its time; again on a second SIGUSR1; after 2 openat and 1
                             close more, SIGTERM: the summary's `recorded` holds the last 3 of 7
                             and of 5, its errors count every chain, no chain printed. Text
                             appended to --record-out with --record-on EBADF: a dump right after
                             the close's chain and one at exit. --record-by function
  star ENGINE [errors|record] every traceable function ('*', -d 1, stderr to a file): one
                             link per BTF object the set spans, none refused at attach,
                             the attach's own calls (text patching) not counted, whole
                             progress lines, nothing left attached or in enabled_functions;
                             errors: the same with --errors (an exit side on every
                             function: the selection predicts what the engine refuses);
                             record: '*' with --errors --record-last 3 --record-on EBADF
                             --record-out FILE left on: dumps after a trigger's bad closes,
                             on SIGUSR1 (holding one of them) and at exit (the summary's
                             `recorded` too), each within its bounds; nothing left attached
  star-sigint ENGINE SECS    '*' with SIGINT SECS seconds into the attach: a message at
                             once, exit 130 within a bound, nothing left in the kernel

Every check that starts bpfmux also checks that no `bpfmux trace` link is left in the
kernel afterwards (trace-links, next to TRIGGER: walks BPF_LINK_GET_NEXT_ID).

ENGINE "auto" lets bpfmux choose; the expected choice is read from `bpfmux features`.
Each check prints "ok - ..." or "FAIL - ..." lines; exit status 0 when all hold.
"""
import contextlib
import gzip
import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

GETPGID, GETPRIORITY = 1000, 500
# A system call /bin/sh makes at startup too (dash: 7 rt_sigaction), and the command
# exactly this often.
SIGACTION = 5000
# Not traceable, but in BTF: noinstr (no ftrace site), so only the kernel's attach
# says no; and one on the verifier's deny list, which bpfmux refuses itself.
NOTRACE, DENIED = "do_syscall_64", "migrate_disable"
# bpfmux trace's programs are all called trace_* (kernel names keep 15 bytes).
PROG_PREFIX = "trace_"
failures = 0
links_tool = None
last_stderr = ""  # of the latest run(): progress lines and warnings


def check(ok, msg):
    global failures
    print(f"{'ok' if ok else 'FAIL'} - {msg}", flush=True)
    failures += not ok


def trace_links():
    """Links of bpfmux trace programs in the kernel now (any holder)."""
    p = subprocess.run([links_tool, PROG_PREFIX], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"trace-links failed: {p.stderr.strip()}")
    return [line for line in p.stdout.splitlines() if not line.startswith("links:")]


def trace_programs():
    """bpfmux trace programs in the kernel now, linked or not, whoever holds them."""
    p = subprocess.run([links_tool, "--progs", PROG_PREFIX], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"trace-links --progs failed: {p.stderr.strip()}")
    return [line for line in p.stdout.splitlines() if not line.startswith("progs:")]


def still_there(listing, secs):
    """What listing() returns once it is empty, or after secs seconds (polled every 0.1 s)."""
    left = listing()
    for _ in range(int(secs * 10)):
        if not left:
            break
        time.sleep(0.1)
        left = listing()
    return left


def check_nothing_attached(what):
    # The links close with bpfmux's descriptors; give the kernel's release a moment.
    left = still_there(trace_links, 5)
    check(not left, f"no bpfmux trace link left in the kernel after {what} ({len(left)} left: "
          f"{left[:3]})")


def run(bpfmux, args, timeout=600, env=None):
    global last_stderr
    p = subprocess.run([bpfmux, "trace", *args], capture_output=True, text=True, timeout=timeout,
                       env=env)
    last_stderr = p.stderr
    for line in p.stderr.splitlines():
        print(f"  stderr: {line}")
    check_nothing_attached(f"bpfmux trace exited {p.returncode}")
    return p


def parse(out):
    """JSON lines: every line must parse; returns (objects, summary)."""
    objs = [json.loads(line) for line in out.splitlines() if line.strip()]
    summary = [o for o in objs if o.get("type") == "summary"]
    return objs, summary[-1] if summary else None


def features(bpfmux):
    out = subprocess.run([bpfmux, "features", "--json"], capture_output=True, text=True)
    return {f["name"]: f["status"] for f in json.loads(out.stdout)["features"]}


def expected_exit_side(bpfmux, engine):
    """How ENGINE must see exits: one session program wherever the kernel has one."""
    if engine == "fentry-each":
        return "pair"
    if engine == "global" and features(bpfmux).get("fsession.multi.global") != "yes":
        return "pair"
    return "session"


def expected_engine(bpfmux, inject=False):
    feats = features(bpfmux)
    if inject:
        for feat, engine in [("global_trampoline", "global"), ("tracing_multi", "tracing-multi"),
                             ("fmod_ret", "fentry-each")]:
            if feats.get(feat) == "yes" and (engine == "fentry-each" or
                                             feats.get("fmod_ret.multi") == "yes"):
                return engine
        return None
    for feat, engine in [("global_trampoline", "global"), ("tracing_multi", "tracing-multi"),
                         ("kprobe.multi", "kprobe-multi"), ("fentry", "fentry-each")]:
        if feats.get(feat) == "yes":
            return engine
    return None


def engine_args(engine):
    return [] if engine == "auto" else ["--engine", engine]


def calls(summary, name):
    return {f["name"]: f for f in summary["functions"]}.get(name, {})


def traced(bpfmux, trigger, engine, extra, patterns, trig_args, env=None):
    args = [*engine_args(engine), "--json", "-c", f"{trigger} {trig_args}", *extra, *patterns]
    p = run(bpfmux, args, env=env)
    check(p.returncode == 0, f"bpfmux trace {' '.join(args)} exits 0 (got {p.returncode})")
    if p.returncode != 0:
        return None, None
    try:
        objs, summary = parse(p.stdout)
    except json.JSONDecodeError as e:
        check(False, f"output is JSON lines ({e})")
        return None, None
    check(summary is not None, "a summary object ends the output")
    return objs, summary


OPENAT_MISSING = 3
OPENAT_CHAIN = ["__x64_sys_openat", "do_sys_openat2", "path_openat"]


def check_nothing_lost(lost, what="nothing lost"):
    """Nothing the run could not record, but for calls the kernel's recursion guard turned
    away: it acts before a program runs, so before the process filter, and a call of any
    process made on a CPU where a program of the run is preempted is turned away (bpfmux's
    own reading of the traced process's /proc files while it runs, for one). Every caller
    also checks the traced process's counts exactly, which any of its own calls turned away
    would make short."""
    others = {k: v for k, v in lost.items() if k != "recursion_misses"}
    check(others and set(others.values()) == {0}, f"{what} ({lost})")
    if lost.get("recursion_misses"):
        print(f"  note: {lost['recursion_misses']} calls turned away by the recursion guard, "
              "none of them the traced process's (its counts are exact)")


def check_nothing_lost_text(stderr):
    """The text form of check_nothing_lost: "nothing lost", or a loss line that has only
    calls the recursion guard turned away, with the line saying they may be other
    processes'."""
    if "bpfmux trace: nothing lost" in stderr:
        check(True, "text: says nothing was lost")
        return
    m = re.search(r"not recorded: (\d+) events, (\d+) error chains \(ring buffers full\), "
                  r"(\d+) call graph paths \(map full\), (\d+) stacks, (\d+) calls too deeply "
                  r"nested; (\d+) calls skipped by the kernel's recursion guard", stderr)
    only_guard = m is not None and set(m.groups()[:5]) == {"0"} and int(m.group(6)) > 0
    check(only_guard and "before any process filter" in stderr,
          "text: says nothing was lost, or only calls the recursion guard turned away, which "
          "may be other processes'")


def t_errors(bpfmux, trigger, engine):
    objs, s = traced(bpfmux, trigger, engine, ["--errors"], OPENAT_CHAIN,
                     f"openat-missing {OPENAT_MISSING}")
    if not s:
        return
    check_engine(bpfmux, engine, s)
    chains = [o for o in objs if o.get("type") == "error"]
    check(len(chains) == OPENAT_MISSING, f"{len(chains)} error chains (want {OPENAT_MISSING})")
    for i, c in enumerate(chains):
        names = [k.get("function") for k in c.get("calls", [])]
        check(names == OPENAT_CHAIN, f"chain {i}: {names} (want {OPENAT_CHAIN})")
        check((c.get("error"), c.get("errno"), c.get("function")) == ("ENOENT", 2, "path_openat"),
              f"chain {i}: {c.get('error')} ({c.get('errno')}) in {c.get('function')} "
              f"(want ENOENT (2) in path_openat)")
        rets = [(k.get("ret"), k.get("error")) for k in c.get("calls", [])]
        check(rets == [(-2, "ENOENT")] * 3, f"chain {i}: returns {rets} (want -2 ENOENT each)")
        d = [k.get("duration_ns") for k in c.get("calls", [])]
        check(all(isinstance(x, int) and x > 0 for x in d) and d == sorted(d, reverse=True),
              f"chain {i}: durations {d} are known and nested (outer >= inner)")
        check(c.get("comm") == "trigger" and c.get("overflow") == 0,
              f"chain {i}: comm {c.get('comm')}, overflow {c.get('overflow')} (want trigger, 0)")
        ks = c.get("kernel_stack", [])
        check(any(f.startswith("do_sys_openat2+") for f in ks),
              f"chain {i}: kernel stack symbolized through do_sys_openat2 ({ks[:6]})")
    want = [{"count": OPENAT_MISSING, "errno": 2, "error": "ENOENT",
             "functions": [{"count": OPENAT_MISSING, "function": "path_openat"}]}]
    check(s.get("errors") == want, f"summary errors {s.get('errors')} (want {want})")
    lost = s.get("lost", {})
    check("chains" in lost, f"the losses name error chains ({lost})")
    check_nothing_lost(lost)
    # The text form: a head line per chain, the summary per error, the loss line.
    args = [*engine_args(engine), "--errors", "-c", f"{trigger} openat-missing {OPENAT_MISSING}",
            *OPENAT_CHAIN]
    p = run(bpfmux, args)
    heads = re.findall(r"\] ENOENT in path_openat, 3 calls$", p.stdout, re.M)
    check(p.returncode == 0 and len(heads) == OPENAT_MISSING,
          f"text: exit {p.returncode}, {len(heads)} chain head lines (want 0, {OPENAT_MISSING})")
    check(re.search(rf"^ENOENT \(2\) +{OPENAT_MISSING}  path_openat {OPENAT_MISSING}$", p.stdout,
                    re.M) is not None, "text: the summary counts the chains per error")
    check_nothing_lost_text(p.stderr)
    # Calls that all succeed make no chain.
    objs, s = traced(bpfmux, trigger, engine, ["--errors"], ["__x64_sys_getpgid"],
                     f"getpgid {GETPGID}")
    if not s:
        return
    n = len([o for o in objs if o.get("type") == "error"])
    check(n == 0 and s.get("errors") == [], f"getpgid: {n} chains, {s.get('errors')} (want none)")
    f = calls(s, "__x64_sys_getpgid")
    check(f.get("calls") == GETPGID, f"getpgid: {f.get('calls')} calls (want {GETPGID})")


# --record-last: the openat chain and a close of a bad descriptor (-EBADF).
RECORD_LAST = 3
CLOSE_CHAIN = ["__x64_sys_close"]
RECORD_FUNCS = [*OPENAT_CHAIN, *CLOSE_CHAIN]
RECORD_HEAD = (r"^=== \d{4}-\d\d-\d\d \d\d:\d\d:\d\d recorded error chains \((.*?)\): last (\d+) "
               r"per (\w+), (\d+) held of (\d+) seen \((.*)\)$")
RECORDING = f"recording the last {RECORD_LAST} error chains per errno"


class Trigger:
    """The trigger in the background: told to go on at each pause, its lines read as they
    come (openat-timed/close-timed: "what START END" per call, kept in calls[what])."""

    def __init__(self, trigger, args):
        print(f"  running {trigger} {' '.join(args)}")
        self.p = subprocess.Popen([trigger, *args], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        self.lines = queue.Queue()
        self.calls = {"openat": [], "close": []}
        threading.Thread(target=self.read, daemon=True).start()

    def read(self):
        for line in self.p.stdout:
            self.lines.put(line)

    def until_paused(self, timeout=60):
        """Reads the lines up to the next "paused"; whether it came."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=max(0.01, deadline - time.monotonic())).split()
            except queue.Empty:
                break
            if line == ["paused"]:
                return True
            if len(line) == 3 and line[0] in self.calls:
                self.calls[line[0]].append((int(line[1]), int(line[2])))
        return False

    def go(self):
        self.p.stdin.write("\n")
        self.p.stdin.flush()

    def end(self):
        self.p.stdin.close()
        try:
            rc = self.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.p.kill()
            rc = self.p.wait()
        check(rc == 0, f"the trigger exits 0 (got {rc})")


def check_recorded(dump, how, want):
    """A dump's groups per errno: want = {errno: (error, seen, call windows, calls, function)},
    the chains exactly those of the calls in the windows (one each, oldest first)."""
    groups = dump.get("groups", [])
    got = sorted(g.get("errno") for g in groups)
    check(got == sorted(want), f"{how}: groups of errnos {got} (want {sorted(want)})")
    for errno, (error, seen, windows, calls_want, function) in want.items():
        g = next((g for g in groups if g.get("errno") == errno), {})
        chains = g.get("chains", [])
        check(g.get("error") == error and g.get("key") == f"{error} ({errno})" and
              g.get("seen") == seen and len(chains) == len(windows),
              f"{how}: {error}: {len(chains)} chains held of {g.get('seen')} seen (want "
              f"{len(windows)} of {seen})")
        ts = [c.get("ts_ns") for c in chains]
        check(len(ts) == len(windows) and
              all(isinstance(t, int) and a <= t <= b for t, (a, b) in zip(ts, windows)),
              f"{how}: {error}: the chains are those of the last {len(windows)} calls, oldest "
              f"first (chain times {ts}; calls {windows})")
        for i, c in enumerate(chains):
            names = [k.get("function") for k in c.get("calls", [])]
            check(names == calls_want and c.get("function") == function and
                  c.get("errno") == errno and c.get("comm") == "trigger",
                  f"{how}: {error} chain {i}: {c.get('comm')}: {names}, {c.get('error')} in "
                  f"{c.get('function')} (want trigger: {calls_want}, {error} in {function})")
    held = sum(len(g.get("chains", [])) for g in groups)
    check(dump.get("chains_held") == held and dump.get("keys_evicted") == 0 and
          dump.get("by") == "errno" and dump.get("last") == RECORD_LAST,
          f"{how}: {dump.get('chains_held')} chains held (the groups hold {held}), "
          f"{dump.get('keys_evicted')} keys evicted, by {dump.get('by')}, last {dump.get('last')}")


def recorded_lines(lines):
    """The dumps among JSON lines (not the summary, whose `recorded` is one too)."""
    dumps = []
    for line in lines:
        if '"recorded"' not in line:
            continue
        try:
            o = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line still being written
        if o.get("type") == "recorded":
            dumps.append(o)
    return dumps


def t_record(bpfmux, trigger, engine):
    """--errors --record-last 3 on the openat and close paths of one process.

    The trigger waits at a pause while bpfmux attaches (--pid: its calls only), then fails 5
    openat (ENOENT) and 4 close (EBADF), each call timed with the clock of the chains, and
    pauses: SIGUSR1 must dump exactly the last 3 of each errno (those calls' chains, oldest
    first; 5 and 4 seen), and a second SIGUSR1 the same again. 2 openat and 1 close more,
    then SIGTERM: the summary's `recorded` (the exit dump) holds the last 3 of 7 and of 5,
    its errors count every chain, no chain was printed. Then the text form to a file with
    --record-on EBADF under -c: a dump right after the close's chain, one at exit, both
    appended; and --record-by function."""
    t = Trigger(trigger, ["pause", "1", "openat-timed", "5", "close-timed", "4", "pause", "1",
                          "openat-timed", "2", "close-timed", "1", "pause", "1"])
    if not t.until_paused():
        check(False, "the trigger starts and pauses")
        t.end()
        return
    r = Running([bpfmux, "trace", *engine_args(engine), "--errors", "--record-last",
                 str(RECORD_LAST), "--json", "--pid", str(t.p.pid), *RECORD_FUNCS])
    announced = r.wait_for(lambda: RECORDING in r.stderr())
    check(announced and f"kill -USR1 {r.p.pid}" in r.stderr(),
          "once attached, bpfmux says it records, and its PID for SIGUSR1")
    dumps = []
    if announced:
        t.go()
        check(t.until_paused(), "the trigger made its first calls")
        openat, close = t.calls["openat"], t.calls["close"]
        check(len(openat) == 5 and len(close) == 4, f"{len(openat)} openat, {len(close)} close "
              "timed (want 5, 4)")
        for n in (1, 2):
            r.p.send_signal(signal.SIGUSR1)
            got = r.wait_for(lambda: len(recorded_lines(r.outs)) >= n, timeout=30, interval=0.05)
            check(got, f"SIGUSR1 {n}: a dump on standard output within 30 s")
            if not got:
                break
        dumps = recorded_lines(r.outs)
        for n, d in enumerate(dumps[:2], 1):
            check(d.get("trigger") == "request" and "trigger_error" not in d,
                  f"dump {n}: trigger {d.get('trigger')} (want request)")
            check_recorded(d, f"dump {n} (SIGUSR1)", {
                2: ("ENOENT", 5, openat[2:5], OPENAT_CHAIN, "path_openat"),
                9: ("EBADF", 4, close[1:4], CLOSE_CHAIN, "__x64_sys_close"),
            })
        t.go()
        check(t.until_paused(), "the trigger made its last calls")
    rc, _ = r.stop(signal.SIGTERM)
    t.end()
    check(rc == 0, f"exit status {rc} after SIGTERM while recording (want 0)")
    try:
        objs, s = parse(r.out)
    except json.JSONDecodeError as e:
        check(False, f"output is JSON lines ({e})")
        return
    if not announced or s is None:
        check(s is not None, "a summary ends the output")
        return
    openat, close = t.calls["openat"], t.calls["close"]
    chains = [o for o in objs if o.get("type") == "error"]
    check(not chains, f"no chain printed as it came ({len(chains)} printed)")
    check(len(recorded_lines(r.out.splitlines())) == 2,
          "two dumps on standard output: the exit one is the summary's `recorded`")
    rec = s.get("recorded") or {}
    check(rec.get("trigger") == "exit", f"the summary's recorded: trigger {rec.get('trigger')} "
          "(want exit)")
    check_recorded(rec, "exit dump", {
        2: ("ENOENT", 7, openat[4:7], OPENAT_CHAIN, "path_openat"),
        9: ("EBADF", 5, close[2:5], CLOSE_CHAIN, "__x64_sys_close"),
    })
    if len(dumps) >= 1:
        kept = [c.get("ts_ns") for g in dumps[0]["groups"] for c in g["chains"]]
        still = [c.get("ts_ns") for g in rec.get("groups", []) for c in g["chains"]]
        check(sorted(set(kept) & set(still)) == sorted([kept[2], kept[4], kept[5]]),
              "the exit dump kept the newest of the first dump's chains, evicting the oldest")
    want = [{"count": 7, "errno": 2, "error": "ENOENT",
             "functions": [{"count": 7, "function": "path_openat"}]},
            {"count": 5, "errno": 9, "error": "EBADF",
             "functions": [{"count": 5, "function": "__x64_sys_close"}]}]
    check(s.get("errors") == want, f"summary errors {s.get('errors')} (want {want})")
    check_nothing_lost(s.get("lost", {}))

    # Text, appended to a file, with a dump right after each chain where a call gave EBADF.
    path = "/tmp/bpfmux-record.txt"
    with open(path, "w") as f:
        f.write("before\n")
    args = [*engine_args(engine), "--errors", "--record-last", str(RECORD_LAST), "--record-on",
            "EBADF", "--record-out", path, "-c",
            f"{trigger} openat-missing 4 close-bad 1 openat-missing 1", *RECORD_FUNCS]
    p = run(bpfmux, args)
    check(p.returncode == 0, f"bpfmux trace {' '.join(args)} exits 0 (got {p.returncode})")
    check("after each EBADF and at exit" in p.stderr, "text: says when it dumps")
    with open(path) as f:
        text = f.read()
    print("  " + "\n  ".join(text.splitlines()))
    check(text.startswith("before\n"), "text: dumps are appended to the file")
    heads = re.findall(RECORD_HEAD, text, re.M)
    whys = [h[0] for h in heads]
    check(whys == ["after EBADF", "at exit"], f"text: dumps {whys} (want after EBADF, at exit)")
    blocks = text.split("=== end of recorded error chains")
    for i, (seen, enoent) in enumerate([(5, 4), (6, 5)][:len(blocks) - 1]):
        b = blocks[i]
        n_enoent = len(re.findall(r"^\d\d:\d\d:\d\d\.\d{3} trigger\[\d+/\d+\] ENOENT in "
                                  r"path_openat, 3 calls$", b, re.M))
        n_ebadf = len(re.findall(r"^\d\d:\d\d:\d\d\.\d{3} trigger\[\d+/\d+\] EBADF in "
                                 r"__x64_sys_close, 1 call$", b, re.M))
        check(f"--- ENOENT (2): last 3 of {enoent}\n" in b and
              "--- EBADF (9): last 1 of 1\n" in b and n_enoent == 3 and n_ebadf == 1 and
              f"held of {seen} seen" in b,
              f"text: dump {i + 1}: 3 of {enoent} ENOENT chains, 1 of 1 EBADF, {seen} seen "
              f"({n_enoent} and {n_ebadf} chain head lines)")
    check(" in path_openat, 3 calls" not in p.stdout, "text: no chain on standard output")
    check(re.search(r"^ENOENT \(2\) +5  path_openat 5$", p.stdout, re.M) is not None and
          re.search(r"^EBADF \(9\) +1  __x64_sys_close 1$", p.stdout, re.M) is not None,
          "text: the summary counts every chain per error")

    # Per failing function, the last one each.
    objs, s = traced(bpfmux, trigger, engine, ["--errors", "--record-last", "1", "--record-by",
                                               "function"], RECORD_FUNCS,
                     "openat-missing 2 close-bad 2")
    if not s:
        return
    rec = s.get("recorded") or {}
    keys = [(g.get("function"), g.get("seen"), len(g.get("chains", []))) for g in
            rec.get("groups", [])]
    want = [("__x64_sys_close", 2, 1), ("path_openat", 2, 1)]
    check(rec.get("by") == "function" and keys == want,
          f"--record-by function: {rec.get('by')}, groups {keys} (want {want})")
    n = len([o for o in objs if o.get("type") == "recorded"])
    check(n == 0, f"--record-by function: {n} dump lines (want 0: the summary has the exit one)")


EXITED_CALLS = 3
EXITED_LINGER_MS = 1000
EXITED_CHAINS = {EXITED_CALLS: ["exited_b", "exited_a", "main"], 1: ["exited_b", "exited_c", "main"]}
GETPGID_FUNC = "__x64_sys_getpgid"
# Where exited_a and exited_c call exited_b (tests/guest/trace/exited-stack.c).
EXITED_CALL_LINES = ["exited-stack.c:49", "exited-stack.c:54"]


def user_frames(stack):
    """The user frames of a summary stack, as printed, calls inlined there included."""
    frames = stack.get("frames", [])
    return frames[frames.index("--") + 1:] if "--" in frames else []


def user_names(stack):
    """The function of each user frame of a summary stack ("name+0xoff" -> name)."""
    return [f.split("+")[0] for f in user_frames(stack)]


def getpgid_stacks(s):
    return [st for st in s.get("stacks") or [] if st.get("function") == GETPGID_FUNC]


def check_call_lines(stacks, how):
    """exited_a and exited_c at the line of their call of exited_b (a caller is looked up one
    byte before its return address)."""
    lines = sorted(re.sub(r".*/", "", f.split(" at ")[-1]) for st in stacks
                   for f in user_frames(st)[1:2])
    check(lines == EXITED_CALL_LINES, f"{how}: the callers' file:line {lines} "
          f"(want {EXITED_CALL_LINES})")


def check_exited_names(s, how):
    """exited-stack's two user stacks, named, with their counts; user_stacks says how."""
    stacks = getpgid_stacks(s)
    got = sorted((st.get("count"), user_names(st)[:3]) for st in stacks)
    want = sorted((n, chain) for n, chain in EXITED_CHAINS.items())
    check(got == want, f"{how}: getpgid user stacks {got} (want {want}; frames: "
          f"{[st.get('frames') for st in stacks]})")
    check_call_lines(stacks, how)
    u = s.get("user_stacks") or {}
    check(u.get("during_run") is True and u.get("failures") == 0 and u.get("normalized", 0) > 0
          and u.get("cache_hits", 0) > 0,
          f"{how}: every user address normalized while the run went on, some from the cache "
          f"({u})")


def t_exited_stacks(bpfmux, trigger, engine):
    prog = os.path.join(os.path.dirname(trigger), "exited-stack")
    work = f"{EXITED_CALLS} {EXITED_LINGER_MS}"
    # -c: the run ends when the command has exited; the summary is made after.
    _, s = traced(bpfmux, prog, engine, ["--stacks"], [GETPGID_FUNC], work)
    if s:
        check_engine(bpfmux, engine, s)
        check_exited_names(s, "-c")
    # The control: normalized only at the end, when the process is gone, nothing is named.
    _, s = traced(bpfmux, prog, engine, ["--stacks", "--stacks-at-end"], [GETPGID_FUNC], work)
    if s:
        stacks = getpgid_stacks(s)
        names = [user_names(st) for st in stacks]
        u = s.get("user_stacks") or {}
        check(len(stacks) == 2 and all(n and all(re.fullmatch(r"0x[0-9a-f]+", f) for f in n)
                                       for n in names),
              f"--stacks-at-end: the exited process's user frames are addresses ({names})")
        check(u.get("during_run") is False and u.get("failures", 0) > 0,
              f"--stacks-at-end: its addresses could not be normalized at the end ({u})")
    # --pid: a process started first, traced by pid, gone before the run ends.
    pid, s = traced_pid(bpfmux, prog, engine, EXITED_LINGER_MS, "--pid")
    if s:
        check(all(st.get("pid") == pid for st in getpgid_stacks(s)),
              f"--pid: the stacks are process {pid}'s")
        check_exited_names(s, "--pid")
    # Exiting at once after the calls, before the loop reads the stacks: named from the
    # build IDs and file offsets the programs recorded with them (-c and --pid).
    _, s = traced(bpfmux, prog, engine, ["--stacks"], [GETPGID_FUNC], f"{EXITED_CALLS} 0")
    if s:
        check_at_once_names(s, "-c, exiting at once")
    _, s = traced_pid(bpfmux, prog, engine, 0, "--pid, exiting at once")
    if s:
        check_at_once_names(s, "--pid, exiting at once")


def traced_pid(bpfmux, prog, engine, linger_ms, how):
    """exited-stack started first (EXITED_CALLS calls, then linger_ms), traced with --stacks
    --pid from before its calls until after it exited: (its pid, the summary or None)."""
    p = subprocess.Popen([prog, "-w", str(EXITED_CALLS), str(linger_ms)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        pid = int(p.stdout.readline().split()[1])
        r = Running([bpfmux, "trace", *engine_args(engine), "--json", "--stacks", "--pid",
                     str(pid), GETPGID_FUNC])
        attached = r.wait_for(lambda: "bpfmux trace: attached" in r.stderr())
        p.stdin.write("go\n")
        p.stdin.flush()
        rc = p.wait(timeout=60)
        rc_trace, _ = r.stop(signal.SIGTERM)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    check(attached and rc == 0 and rc_trace == 0,
          f"{how} {pid}: attached, the program exited 0 before the run's end, bpfmux trace "
          f"exited 0 ({attached}, {rc}, {rc_trace})")
    check_nothing_attached(how)
    try:
        return pid, parse(r.out)[1]
    except json.JSONDecodeError as e:
        check(False, f"{how}: output is JSON lines ({e})")
        return pid, None

def check_at_once_names(s, how):
    """exited-stack's two user stacks named although the process may have exited before the
    loop read them: every address it could not normalize was placed by build ID."""
    stacks = getpgid_stacks(s)
    got = sorted((st.get("count"), user_names(st)[:3]) for st in stacks)
    want = sorted((n, chain) for n, chain in EXITED_CHAINS.items())
    check(got == want, f"{how}: getpgid user stacks {got} (want {want})")
    check_call_lines(stacks, how)
    u = s.get("user_stacks") or {}
    check(u.get("failures", 0) == u.get("by_build_id", 0),
          f"{how}: every address not normalized in time was placed by build ID ({u})")
    print(f"note - {how}: {u.get('failures', 0)} addresses not normalized in time, "
          f"{u.get('by_build_id', 0)} placed by build ID")


# Frames of the tracing mechanism, none of which may be in a kernel stack: BPF programs and
# trampolines, the global trampoline, ftrace, fprobe, kprobe and rethook glue, the stack
# helpers, JIT code kallsyms did not name, and bare addresses.
MECHANISM_FRAME = re.compile(
    r"^(bpf_prog_|bpf_trampoline_|bpf_global_|bpf_dispatcher_|ftrace_|arch_ftrace_|fprobe|"
    r"__fprobe|kprobe_|kretprobe|__kretprobe|rethook|arch_rethook|return_to_handler|"
    r"function_graph_enter|__bpf_prog_enter|__bpf_prog_exit|__bpf_tramp|bpf_trace_run|"
    r"__bpf_trace_run|trace_call_bpf|bpf_get_stack|__bpf_get_stack|get_perf_callchain|"
    r"perf_callchain|0x)|\[bpf/jit\?\]")
GETPGID_KERNEL = [GETPGID_FUNC, "do_syscall_64", "entry_SYSCALL_64_after_hwframe"]
OPENAT_KERNEL_TAIL = ["do_sys_openat2", "__x64_sys_openat", "do_syscall_64",
                      "entry_SYSCALL_64_after_hwframe"]
KERNEL_STACK_CALLS = 50


def kernel_frames(frames):
    """The kernel part of a summary stack's frames (before "--")."""
    return frames[:frames.index("--")] if "--" in frames else frames


def check_kernel_stack(how, ks, func):
    """ks starts at func itself, has no frame of the mechanism, no function twice."""
    names = [f.split("+")[0] for f in ks]
    check(bool(ks) and ks[0] == f"{func}+0x0",
          f"{how}: the first kernel frame is {func}+0x0 ({ks})")
    mech = [f for f in ks if MECHANISM_FRAME.search(f)]
    check(not mech, f"{how}: no frame of the tracing mechanism ({mech})")
    check(len(names) == len(set(names)), f"{how}: no function twice ({names})")
    return names


def t_kernel_stacks(bpfmux, trigger, engine):
    work = f"getpgid {KERNEL_STACK_CALLS}"
    # Taken at the entry, then (a test on ret) at the return.
    for how, extra in [("--stacks", []), ("--stacks at the return", ["--filter", "ret >= 0"])]:
        _, s = traced(bpfmux, trigger, engine, ["--stacks", *extra], [GETPGID_FUNC], work)
        if not s:
            continue
        check_engine(bpfmux, engine, s)
        stacks = getpgid_stacks(s)
        n = sum(st.get("count", 0) for st in stacks)
        check(stacks and n == KERNEL_STACK_CALLS,
              f"{how}: {n} getpgid calls in {len(stacks)} stacks (want {KERNEL_STACK_CALLS})")
        for i, st in enumerate(stacks):
            ks = kernel_frames(st.get("frames", []))
            names = check_kernel_stack(f"{how}: stack {i}", ks, GETPGID_FUNC)
            check(names == GETPGID_KERNEL,
                  f"{how}: stack {i} is {names} (want {GETPGID_KERNEL}; frames {ks})")
    # Error chains: taken at path_openat's failing return, its callers traced or not.
    seen = {}
    for how, funcs in [("--errors", OPENAT_CHAIN), ("--errors path_openat alone",
                                                     ["path_openat"])]:
        objs, s = traced(bpfmux, trigger, engine, ["--errors"], funcs,
                         f"openat-missing {OPENAT_MISSING}")
        if not s:
            continue
        # ENOENT ones: traced alone, a path walk retried (ECHILD) would be a chain of its own.
        chains = [o for o in objs if o.get("type") == "error" and o.get("error") == "ENOENT"]
        check(len(chains) == OPENAT_MISSING,
              f"{how}: {len(chains)} ENOENT chains (want {OPENAT_MISSING})")
        for i, c in enumerate(chains):
            ks = c.get("kernel_stack", [])
            names = check_kernel_stack(f"{how}: chain {i}", ks, "path_openat")
            check(names[-len(OPENAT_KERNEL_TAIL):] == OPENAT_KERNEL_TAIL,
                  f"{how}: chain {i} ends {OPENAT_KERNEL_TAIL} ({names})")
            seen.setdefault(tuple(names), []).append(how)
    check(len(seen) == 1,
          f"the same functions in every chain's stack, callers traced or not "
          f"({ {k: len(v) for k, v in seen.items()} })")


def report_recording(bpfmux, path, how):
    """bpfmux report --json PATH, run in a fresh directory holding only a copy of the file:
    (objects, summary, the text form's stdout), Nones if it fails."""
    fresh = tempfile.mkdtemp(prefix="bpfmux-report-")
    try:
        shutil.copy(path, fresh)
        name = os.path.basename(path)
        outs = []
        for extra in (["--json"], []):
            p = subprocess.run([bpfmux, "report", *extra, name], cwd=fresh, capture_output=True,
                               text=True, timeout=600)
            for line in p.stderr.splitlines():
                print(f"  report stderr: {line}")
            check(p.returncode == 0, f"{how}: bpfmux report {' '.join(extra)} exits 0 "
                  f"(got {p.returncode})")
            outs.append(p.stdout if p.returncode == 0 else None)
    finally:
        shutil.rmtree(fresh, ignore_errors=True)
    if outs[0] is None:
        return None, None, None
    try:
        objs, s = parse(outs[0])
    except json.JSONDecodeError as e:
        check(False, f"{how}: the report's --json is JSON lines ({e})")
        return None, None, None
    return objs, s, outs[1]


def same_as_live(live, replayed, what):
    """A check that a report printed what the live run printed, naming the first difference."""
    if live == replayed:
        check(True, f"{what}: the same in the report")
        return
    diff = next((k for k in sorted(set(live) | set(replayed)) if live.get(k) != replayed.get(k)),
                None) if isinstance(live, dict) and isinstance(replayed, dict) else None
    extra = f" (first: {diff}: {live.get(diff)} vs {replayed.get(diff)})" if diff else ""
    check(False, f"{what}: differs in the report{extra}\n    live: {live}\n  report: {replayed}")


def t_recording(bpfmux, trigger, engine):
    """--record FILE, then bpfmux report FILE in a fresh directory: the same chains, counts and
    symbolized stacks as the live run printed, for processes that exited before the report."""
    work = tempfile.mkdtemp(prefix="bpfmux-recording-")
    try:
        # The trigger's failing opens: error chains and stacks, recorded gzipped.
        path = os.path.join(work, "openat.jsonl.gz")
        objs, s = traced(bpfmux, trigger, engine, ["--errors", "--stacks", "--record", path],
                         OPENAT_CHAIN, f"openat-missing {OPENAT_MISSING}")
        if not s:
            return
        check(re.search(r"--record .*: 3 error chains, \d+ stacks", last_stderr) is not None,
              "bpfmux trace says what it recorded")
        with open(path, "rb") as f:
            check(f.read(2) == b"\x1f\x8b", "a .gz recording is gzipped")
        live_chains = [o for o in objs if o.get("type") == "error"]
        check(len(live_chains) == OPENAT_MISSING,
              f"live: {len(live_chains)} chains (want {OPENAT_MISSING})")
        robjs, rs, text = report_recording(bpfmux, path, "openat")
        if rs is None:
            return
        chains = [o for o in robjs if o.get("type") == "error"]
        same_as_live(live_chains, chains, "the error chains (calls, returns, kernel and user stacks)")
        same_as_live(s, rs, "the summary (counts, errors, stacks, user stack totals, command_exit)")
        # The trigger exits within a turn of its calls, so its user frames may stay
        # addresses live (a known limit); the exited-stack run below holds named ones.
        heads = re.findall(r"\] ENOENT in path_openat, 3 calls$", text or "", re.M)
        check(len(heads) == OPENAT_MISSING and "busiest stacks:" in (text or ""),
              f"text: {len(heads)} chain head lines (want {OPENAT_MISSING}) and the stacks")
        # exited-stack: named user stacks of a process gone long before the report.
        prog = os.path.join(os.path.dirname(trigger), "exited-stack")
        path = os.path.join(work, "exited.jsonl")
        _, s = traced(bpfmux, prog, engine, ["--stacks", "--record", path], [GETPGID_FUNC],
                      f"{EXITED_CALLS} {EXITED_LINGER_MS}")
        if not s:
            return
        _, rs, _ = report_recording(bpfmux, path, "exited-stack")
        if rs is None:
            return
        check_exited_names(rs, "report of the exited process's recording")
        same_as_live(s.get("stacks"), rs.get("stacks"), "exited-stack's stacks")
        same_as_live(s, rs, "exited-stack's summary")
        # A recording cut short is refused, saying so.
        cut = os.path.join(work, "cut.jsonl")
        with open(path, "rb") as f, open(cut, "wb") as g:
            data = f.read()
            g.write(data[:len(data) // 2])
        p = subprocess.run([bpfmux, "report", cut], capture_output=True, text=True)
        check(p.returncode == 1 and "truncated after" in p.stderr,
              f"a cut recording: exit {p.returncode}, {p.stderr.strip()}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


DEBUGINFOD_PORT = 8002


def report_with(bpfmux, path, env_extra, how):
    """bpfmux report --json PATH in a fresh directory holding only a copy of the file, with
    env_extra in the environment: (exit status, summary or None, stderr)."""
    fresh = tempfile.mkdtemp(prefix="bpfmux-report-")
    try:
        shutil.copy(path, fresh)
        env = dict(os.environ, **env_extra)
        p = subprocess.run([bpfmux, "report", "--json", "-v", os.path.basename(path)],
                           cwd=fresh, capture_output=True, text=True, timeout=600, env=env)
    finally:
        shutil.rmtree(fresh, ignore_errors=True)
    for line in p.stderr.splitlines():
        print(f"  report stderr ({how}): {line}")
    try:
        _, s = parse(p.stdout) if p.returncode == 0 else (None, None)
    except json.JSONDecodeError as e:
        check(False, f"{how}: the report's --json is JSON lines ({e})")
        s = None
    return p.returncode, s, p.stderr


def served(url, deadline):
    """Whether GET url answers 200 before deadline (time.monotonic())."""
    import urllib.error
    import urllib.request
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                if r.status == 200:
                    return True
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(1)
    return False


def start_debuginfod(server, port, served_dir, work, build_id):
    """Debian's debuginfod serving served_dir on 127.0.0.1:port, once it answers for build_id:
    (its process or None, its URL)."""
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([server, "-F", "-p", str(port), "-d",
                             os.path.join(work, "db.sqlite"), "-t", "0", "-g", "0",
                             served_dir], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    ready = served(f"{url}/buildid/{build_id}/debuginfo", time.monotonic() + 180)
    check(ready, f"debuginfod on {url} serves the debug file of {build_id}")
    if not ready:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return None, url
    return proc, url


def debuginfod_reports(bpfmux, path, served_dir, build_id, exe, live, work, port):
    """bpfmux report of the recording at path (its binary exe gone), in a fresh directory,
    with a real debuginfod serving served_dir: the same stacks as the live run; with the
    server stopped, a warning and addresses; then from the first report's cache alone."""
    server = shutil.which("debuginfod")
    check(server is not None, "debuginfod is installed (scripts/install-deps)")
    if server is None:
        return
    check(not os.path.exists(exe), f"the recorded binary {exe} is not here")
    proc, url = start_debuginfod(server, port, served_dir, work, build_id)
    if proc is None:
        return
    try:
        cache = os.path.join(work, "cache")
        env = {"DEBUGINFOD_URLS": url, "DEBUGINFOD_CACHE_PATH": cache,
               "DEBUGINFOD_TIMEOUT": "30"}
        rc, rs, err = report_with(bpfmux, path, env, "server up")
        check(rc == 0 and rs is not None, f"with the server: exit {rc}")
        if rs is None:
            return
        check_exited_names(rs, "report with the binary gone, from debuginfod")
        same_as_live(live.get("stacks"), rs.get("stacks"), "stacks named from debuginfod")
        check(f"debuginfod: 1 file(s) downloaded from {url}, 0 from its cache" in err
              and f"named from its debug file from {url}" in err,
              "the report says what it downloaded, and from where")
        check(os.path.isfile(os.path.join(cache, build_id, "debuginfo")),
              "the debug file is in DEBUGINFOD_CACHE_PATH/ID/debuginfo")
        # The server stopped: a clear warning, addresses, exit 0.
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
        proc = None
        env_cold = dict(env, DEBUGINFOD_CACHE_PATH=os.path.join(work, "cold"))
        rc, rs, err = report_with(bpfmux, path, env_cold, "server down")
        check(rc == 0 and rs is not None, f"with the server stopped: exit {rc}")
        warned = re.search(rf"warning: {re.escape(exe)} \(build ID {build_id}\): not found "
                           rf"here.*debuginfod debuginfo: {re.escape(url)}: connection refused",
                           err)
        check(warned is not None, "a warning names the file, its build ID and the refused "
              "connection")
        if rs is not None:
            frames = [f for st in getpgid_stacks(rs) for f in
                      st["frames"][st["frames"].index("--") + 1:][:3]]
            check(frames and all(re.fullmatch(r"0x[0-9a-f]+", f) for f in frames),
                  f"the file's frames are addresses ({frames})")
        # The first report's cache alone names them again.
        rc, rs, err = report_with(bpfmux, path, env, "from the cache")
        check(rc == 0 and rs is not None
              and "debuginfod: 0 file(s) downloaded, 1 from its cache" in err,
              f"from the cache with the server stopped: exit {rc}")
        if rs is not None:
            same_as_live(live.get("stacks"), rs.get("stacks"), "stacks named from the cache")
    finally:
        if proc is not None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def t_debuginfod(bpfmux, trigger, engine):
    """A recording whose binary is gone, named from a real debuginfod server; the live run of
    a stripped copy named from it too. With $BPFMUX_HANDOFF set, the recording, the debug file
    and the live summary are left there for the host to report (check.py - - host-debuginfod)."""
    server = shutil.which("debuginfod")
    check(server is not None, "debuginfod is installed (scripts/install-deps)")
    if server is None:
        return
    work = tempfile.mkdtemp(prefix="bpfmux-debuginfod-")
    proc = None
    try:
        prog = os.path.join(os.path.dirname(trigger), "exited-stack")
        exe = os.path.join(work, "exited-stack")
        shutil.copy(prog, exe)
        served_dir = os.path.join(work, "served")
        os.mkdir(served_dir)
        debug = os.path.join(served_dir, "exited-stack.debug")
        subprocess.run(["objcopy", "--only-keep-debug", exe, debug], check=True)
        path = os.path.join(work, "exited.jsonl")
        _, live = traced(bpfmux, exe, engine, ["--stacks", "--record", path], [GETPGID_FUNC],
                         f"{EXITED_CALLS} {EXITED_LINGER_MS}")
        if not live:
            return
        check_exited_names(live, "live run of the copy")
        with open(path) as f:
            ids = {o["build_id"] for o in map(json.loads, f)
                   if o.get("type") == "object" and o.get("path") == exe}
        check(len(ids) == 1, f"the recording has the copy's build ID ({ids})")
        if len(ids) != 1:
            return
        build_id = ids.pop()
        handoff = os.environ.get("BPFMUX_HANDOFF")
        if handoff:
            d = os.path.join(handoff, "debuginfod")
            shutil.rmtree(d, ignore_errors=True)
            os.makedirs(os.path.join(d, "served"))
            shutil.copy(path, d)
            shutil.copy(debug, os.path.join(d, "served"))
            with open(os.path.join(d, "meta.json"), "w") as f:
                json.dump({"exe": exe, "build_id": build_id, "live": live}, f)
            print(f"  left the recording for the host in {d}")
        # A stripped copy traced live: its frames named from the server's debug file.
        stripped = os.path.join(work, "stripped", "exited-stack")
        os.mkdir(os.path.dirname(stripped))
        subprocess.run(["strip", "-s", "-o", stripped, exe], check=True)
        proc, url = start_debuginfod(server, DEBUGINFOD_PORT, served_dir, work, build_id)
        if proc is None:
            return
        env = dict(os.environ, DEBUGINFOD_URLS=url,
                   DEBUGINFOD_CACHE_PATH=os.path.join(work, "live-cache"))
        _, s = traced(bpfmux, stripped, engine, ["--stacks"], [GETPGID_FUNC],
                      f"{EXITED_CALLS} {EXITED_LINGER_MS}", env=env)
        if s:
            check_exited_names(s, "live run of the stripped copy, debug file from debuginfod")
            check(f"bpfmux trace: debuginfod: 1 file(s) downloaded from {url}, 0 from its cache"
                  in last_stderr, "bpfmux trace says what it downloaded, and from where")
        # The control: without debuginfod the stripped copy's frames have no such names.
        _, s = traced(bpfmux, stripped, engine, ["--stacks", "--no-debuginfod"],
                      [GETPGID_FUNC], f"{EXITED_CALLS} {EXITED_LINGER_MS}", env=env)
        if s:
            names = sorted(user_names(st)[:3] for st in getpgid_stacks(s))
            check(names and not any(n in EXITED_CHAINS.values() for n in names),
                  f"--no-debuginfod: the stripped copy's frames are not named so ({names})")
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
        proc = None
        os.unlink(exe)
        debuginfod_reports(bpfmux, path, served_dir, build_id, exe, live, work,
                           DEBUGINFOD_PORT)
    finally:
        if proc is not None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        shutil.rmtree(work, ignore_errors=True)


def host_debuginfod(bpfmux, handoff):
    """On the host: the guest's recording (t_debuginfod, left in handoff) reported in a fresh
    directory with only the recording and a local debuginfod serving the debug file."""
    bpfmux, handoff = os.path.abspath(bpfmux), os.path.abspath(handoff)
    meta = os.path.join(handoff, "meta.json")
    check(os.path.isfile(meta), f"the guest left its recording in {handoff}")
    if not os.path.isfile(meta):
        return
    with open(meta) as f:
        m = json.load(f)
    work = tempfile.mkdtemp(prefix="bpfmux-host-debuginfod-")
    try:
        served_dir = os.path.join(work, "served")
        shutil.copytree(os.path.join(handoff, "served"), served_dir)
        with socket.socket() as so:
            so.bind(("127.0.0.1", 0))
            port = so.getsockname()[1]
        print(f"  host: {os.uname().release}, the guest's recording of {m['exe']}")
        debuginfod_reports(bpfmux, os.path.join(handoff, "exited.jsonl"), served_dir,
                           m["build_id"], m["exe"], m["live"], work, port)
    finally:
        shutil.rmtree(work, ignore_errors=True)


GRAPH_FUNCS = ["__x64_sys_rt_sigaction", "do_sigaction", "__x64_sys_getpgid"]


def graph_shape(nodes):
    return sorted((n["function"], n["calls"], graph_shape(n["children"])) for n in nodes)


def graph_times_add_up(n):
    inner = sum(c["inclusive_ns"] for c in n["children"])
    return (n["inclusive_ns"] > 0 and n["exclusive_ns"] == n["inclusive_ns"] - inner
            and all(graph_times_add_up(c) for c in n["children"]))


def folded_lines(text):
    """Folded stacks: [(frames root first, count)]; None if a line is not one."""
    out = []
    for line in text.splitlines():
        m = re.fullmatch(r"(\S.*) (\d+)", line)
        if not m:
            return None
        out.append((m.group(1).split(";"), int(m.group(2))))
    return out


def has_run(frames, run):
    return any(frames[i:i + len(run)] == run for i in range(len(frames)))


def pb_varint(buf, i):
    """The varint at buf[i]: (its value, where what follows starts)."""
    v = shift = 0
    while True:
        b = buf[i]
        i += 1
        v |= (b & 0x7f) << shift
        shift += 7
        if b < 0x80:
            return v, i


def pb_fields(buf):
    """A protobuf message's (field, value): an int for a varint, bytes for the rest."""
    i, out = 0, []
    while i < len(buf):
        key, i = pb_varint(buf, i)
        if key & 7 == 0:
            v, i = pb_varint(buf, i)
        elif key & 7 == 2:
            n, i = pb_varint(buf, i)
            v, i = buf[i:i + n], i + n
        else:
            raise ValueError(f"wire type {key & 7}")
        out.append((key >> 3, v))
    return out


def pb_ints(fields, number):
    """A repeated integer field, packed or not."""
    out = []
    for f, v in fields:
        if f == number and isinstance(v, int):
            out.append(v)
        elif f == number:
            i = 0
            while i < len(v):
                x, i = pb_varint(v, i)
                out.append(x)
    return out


def pprof(path):
    """A gzipped profile.proto: (sample types, [(function names leaf first, values)])."""
    with open(path, "rb") as f:
        p = pb_fields(gzip.decompress(f.read()))
    strings = [v.decode() for f, v in p if f == 6]
    one = lambda m, n: dict((k, v) for k, v in pb_fields(m) if isinstance(v, int)).get(n, 0)
    types = [(strings[one(v, 1)], strings[one(v, 2)]) for f, v in p if f == 1]
    funcs = {one(v, 1): strings[one(v, 2)] for f, v in p if f == 5}
    locs = {one(v, 1): [funcs[one(l, 1)] for k, l in pb_fields(v) if k == 4]
            for f, v in p if f == 4}
    samples = []
    for f, v in p:
        if f == 2:
            fields = pb_fields(v)
            names = [n for i in pb_ints(fields, 1) for n in locs[i]]
            samples.append((names, pb_ints(fields, 2)))
    return types, samples


EXPORT_SIGACTION, EXPORT_GETPGID = 100, 20
EXPORT_MISSING = 3


def chrome_slices(path, what):
    """The complete ("X") events of a Chrome trace file; none, failing a check, if unreadable."""
    try:
        with open(path) as fh:
            trace = json.load(fh)["traceEvents"]
    except (OSError, ValueError, KeyError) as e:
        check(False, f"{what}: a JSON trace ({e!r})")
        return []
    return [e for e in trace if e.get("ph") == "X"]


def t_exports(bpfmux, trigger, engine):
    d = tempfile.mkdtemp(prefix="bpfmux-exports-")
    prog = os.path.join(os.path.dirname(trigger), "exited-stack")
    work = f"{EXITED_CALLS} {EXITED_LINGER_MS}"
    f = {k: os.path.join(d, f"stacks.{k}") for k in ("folded", "svg", "pb.gz")}
    _, s = traced(bpfmux, prog, engine, ["--stacks", "--folded", f["folded"], "--flamegraph",
                                         f["svg"], "--pprof", f["pb.gz"]], [GETPGID_FUNC], work)
    if s:
        check_engine(bpfmux, engine, s)
        total = calls(s, GETPGID_FUNC).get("calls")
        check(s["lost"]["stacks"] == 0, f"no stack lost ({s['lost']})")
        with open(f["folded"]) as fh:
            folded = folded_lines(fh.read())
        check(folded is not None and all(fr[-1] == GETPGID_FUNC for fr, _ in folded)
              and sum(n for _, n in folded) == total,
              f"--folded: lines ending in {GETPGID_FUNC}, {total} calls in all ({folded})")
        for n, chain in EXITED_CHAINS.items():
            run_ = chain[::-1]
            got = sum(c for fr, c in folded or [] if has_run(fr, run_))
            check(got == n, f"--folded: {got} calls through {';'.join(run_)} (want {n})")
        with open(f["svg"]) as fh:
            svg = fh.read()
        for name in ["main", "exited_a", "exited_b", "exited_c", GETPGID_FUNC]:
            check(f"<title>{name} (" in svg, f"--flamegraph: the SVG draws {name}")
        try:
            types, samples = pprof(f["pb.gz"])
        except (OSError, ValueError, KeyError, IndexError) as e:
            types, samples = None, []
            check(False, f"--pprof: a gzipped profile.proto ({e!r})")
        check(types == [("calls", "count")], f"--pprof: sample type calls/count ({types})")
        check(samples and all(names[0] == GETPGID_FUNC for names, _ in samples)
              and sum(v[0] for _, v in samples) == total,
              f"--pprof: every sample's leaf is {GETPGID_FUNC}, {total} calls in all")
        via_a = sum(v[0] for names, v in samples if has_run(names, EXITED_CHAINS[3]))
        check(via_a == 3, f"--pprof: {via_a} calls through exited_b < exited_a < main (want 3)")
        check(f"--pprof {f['pb.gz']}: a pprof profile of" in last_stderr,
              "stderr says what --pprof wrote")
    # To standard output: only the folded lines, whatever else was asked.
    p = run(bpfmux, [*engine_args(engine), "--json", "--stacks", "--folded", "-", "-c",
                     f"{prog} {work}", GETPGID_FUNC])
    folded = folded_lines(p.stdout)
    check(p.returncode == 0 and folded and sum(n for _, n in folded) == EXITED_CALLS + 1,
          f"--folded -: only folded lines on stdout, {EXITED_CALLS + 1} calls ({p.stdout[:300]!r})")
    # --graph and --latency: profiles of the call graph, and a timeline of every call.
    f = {k: os.path.join(d, f"graph.{k}") for k in ("folded", "pb.gz", "json")}
    objs, s = traced(bpfmux, trigger, engine,
                     ["--graph", "--latency", "--folded", f["folded"], "--pprof", f["pb.gz"],
                      "--chrome-trace", f["json"]], GRAPH_FUNCS,
                     f"sigaction {EXPORT_SIGACTION} getpgid {EXPORT_GETPGID}")
    if not s:
        return
    want = {"__x64_sys_rt_sigaction": EXPORT_SIGACTION, "do_sigaction": EXPORT_SIGACTION,
            "__x64_sys_getpgid": EXPORT_GETPGID}
    paths = {}

    def walk(nodes, path):
        for n in nodes:
            paths[";".join(path + [n["function"]])] = (n["calls"], n["exclusive_ns"])
            walk(n["children"], path + [n["function"]])
    walk(s.get("graph") or [], [])
    with open(f["folded"]) as fh:
        folded = folded_lines(fh.read()) or []
    got = {";".join(fr): n for fr, n in folded}
    check(got == {k: v[1] for k, v in paths.items() if v[1] > 0},
          f"--graph --folded: the exclusive ns of each path ({got}; graph {paths})")
    try:
        types, samples = pprof(f["pb.gz"])
    except (OSError, ValueError, KeyError, IndexError) as e:
        types, samples = None, []
        check(False, f"--graph --pprof: a gzipped profile.proto ({e!r})")
    check(types == [("calls", "count"), ("time", "nanoseconds")],
          f"--graph --pprof: sample types calls/count, time/nanoseconds ({types})")
    got = {";".join(names[::-1]): tuple(v) for names, v in samples}
    check(got == paths, f"--graph --pprof: calls and exclusive ns per path ({got})")
    check(not [o for o in objs if o.get("type") == "event"],
          "--chrome-trace without --args: no event on stdout")
    slices = chrome_slices(f["json"], "--chrome-trace")
    per = {name: sum(1 for e in slices if e["name"] == name) for name in want}
    check(per == want and len(slices) == sum(want.values()),
          f"--chrome-trace: one slice per call {per} (want {want}, {len(slices)} in all)")
    check(all(e["dur"] > 0 and e["pid"] == slices[0]["pid"] for e in slices),
          "--chrome-trace: every slice has a duration, all of the command's process")
    outer = [e for e in slices if e["name"] == "__x64_sys_rt_sigaction"]
    inside = lambda e, o: (o["tid"] == e["tid"] and o["ts"] <= e["ts"]
                           and e["ts"] + e["dur"] <= o["ts"] + o["dur"] + 0.001)
    nested = sum(1 for e in slices if e["name"] == "do_sigaction"
                 and any(inside(e, o) for o in outer))
    check(nested == EXPORT_SIGACTION,
          f"--chrome-trace: {nested} do_sigaction slices inside an rt_sigaction slice "
          f"(want {EXPORT_SIGACTION})")
    lat = {n: calls(s, n).get("latency_ns", {}).get("count") for n in want}
    check(lat == want and s["lost"]["events"] == 0,
          f"--latency counts the same calls ({lat}), no event lost ({s['lost']})")
    # A glob sends per-call events too; the slices' args are the text --args prints.
    _, s = traced(bpfmux, trigger, engine, ["--chrome-trace", f["json"]], ["__x64_sys_getpg*"],
                  f"getpgid-missing {EXPORT_MISSING}")
    if s:
        args = [e.get("args", {}) for e in chrome_slices(f["json"], "--chrome-trace of a glob")
                if e.get("name") == GETPGID_FUNC]
        typed = [a for a in args if (a.get("return"), a.get("error")) == ("-3", "ESRCH")
                 and kernel_pointer(a.get("regs"))]
        check(len(typed) == EXPORT_MISSING,
              f"--chrome-trace of a glob: {len(typed)} {GETPGID_FUNC} slices with a kernel "
              f"pointer regs, return -3 and error ESRCH (want {EXPORT_MISSING}; {args[:4]})")
    # Over the cap on per-call events: refused before anything is attached, under its name.
    p = run(bpfmux, [*engine_args(engine), "--chrome-trace", f["json"], "-d", "1", "vfs_*",
                     "__x64_sys_*"])
    m = re.search(r"--chrome-trace: per-call events on (\d+) functions: at most 256", p.stderr)
    check(p.returncode != 0 and m is not None and int(m.group(1)) > 256
          and "attached" not in p.stderr,
          f"--chrome-trace over the cap: exit {p.returncode}, says the count and the cap, "
          "nothing attached")


NULL_MISSING = 5
NULL_FUNC = "find_task_by_vpid"


GUARD_RUNS = 10

# GUARD_RUNS runs back to back from a shell, text to /dev/null, the summary's lines
# through grep: the way the loss was found (bench/results/raw/map-reads-2026-11-28/km.sh).
# Each run prints "run N: CHAINS chains: LINE", LINE the summary's line of what was lost.
GUARD_LOOP = r"""
i=1
while [ $i -le "$RUNS" ]; do
	err=$("$BPFMUX" trace $ENGINE --errors --stacks -c "$TRIGGER openat-missing 3" $FUNCS \
		2>&1 >"$OUT") || { echo "run $i: exit $?: $err"; exit 1; }
	echo "run $i: $(grep -c 'ENOENT in path_openat, 3 calls$' "$OUT") chains: $(echo "$err" |
		grep -E 'not recorded|nothing lost')"
	i=$((i + 1))
done
"""


def t_map_reads(bpfmux, trigger, engine):
    """kprobe programs are turned away while a map read of bpfmux's is preempted on their
    CPU (the read holds the CPU-wide bpf_prog_active; sys/sched.rs): short -c runs with
    --errors --stacks, whose session reads the stack maps while the command runs, must
    keep every call. Not in `make test`, as it did not fail before the fix: before bpfmux
    read maps unpreempted, runs of a shell script booted as the guest's
    command lost calls in 5 of 44 (0 of 56 after), but 76 runs of the old binary from
    this script (as here, and with pauses between runs) lost none
    (bench/results/raw/map-reads-2026-11-28)."""
    with tempfile.NamedTemporaryFile() as out:
        env = dict(os.environ, RUNS=str(GUARD_RUNS), BPFMUX=bpfmux, TRIGGER=trigger,
                   ENGINE=" ".join(engine_args(engine)), FUNCS=" ".join(OPENAT_CHAIN),
                   OUT=out.name)
        p = subprocess.run(["sh", "-c", GUARD_LOOP], env=env, capture_output=True, text=True,
                           timeout=1200)
    lines = p.stdout.splitlines()
    for line in lines:
        print(f"  {line}")
    check_nothing_attached("the runs back to back")
    check(p.returncode == 0 and len(lines) == GUARD_RUNS,
          f"{len(lines)} of {GUARD_RUNS} runs exit 0 (loop: exit {p.returncode}, {p.stderr!r})")
    want = f"{OPENAT_MISSING} chains: bpfmux trace: nothing lost"
    lost = [line for line in lines if want not in line]
    check(not lost, f"{len(lines) - len(lost)} of {len(lines)} runs kept every call "
          f"({'; '.join(lost) or 'none lost'})")


def t_nulls(bpfmux, trigger, engine):
    n = NULL_MISSING
    trig = f"getpgid-missing {n}"

    def errors_of(objs):
        return [o for o in objs if o.get("type") == "error"]

    # A lone NULL (find_task_by_vpid is the outermost traced call): left out and counted.
    objs, s = traced(bpfmux, trigger, engine, ["--errors"], [NULL_FUNC], trig)
    if not s:
        return
    check_engine(bpfmux, engine, s)
    k = len(errors_of(objs))
    check(k == 0 and s.get("errors") == [], f"lone NULL: {k} chains, {s.get('errors')} (want none)")
    check(s.get("null_only_chains_left_out") == n,
          f"lone NULL: {s.get('null_only_chains_left_out')} NULL-only chains left out (want {n})")
    f = calls(s, NULL_FUNC)
    check(f.get("calls", 0) >= n, f"lone NULL: {f.get('calls')} calls of {NULL_FUNC} (want >= {n})")
    check(f"left out {n} error chains that only ended in NULL" in last_stderr
          and "(--null all shows them)" in last_stderr,
          "lone NULL: stderr says how many were left out and how to see them")
    # --null all: every one of them is a chain.
    objs, s = traced(bpfmux, trigger, engine, ["--errors", "--null", "all"], [NULL_FUNC], trig)
    if not s:
        return
    chains = errors_of(objs)
    check(len(chains) == n, f"--null all: {len(chains)} chains (want {n})")
    for i, c in enumerate(chains):
        got = ([(k.get("function"), k.get("ret"), k.get("error")) for k in c.get("calls", [])],
               c.get("error"), "errno" in c)
        check(got == ([(NULL_FUNC, 0, "NULL")], "NULL", False),
              f"--null all: chain {i}: {got} (want one call of {NULL_FUNC} returning NULL)")
    want = [{"count": n, "error": "NULL", "functions": [{"count": n, "function": NULL_FUNC}]}]
    check(s.get("errors") == want, f"--null all: summary errors {s.get('errors')} (want {want})")
    check(s.get("null_only_chains_left_out") == 0,
          f"--null all: {s.get('null_only_chains_left_out')} left out (want 0)")
    # A NULL under a traced caller that failed with an errno: reported by default.
    outer = ["__x64_sys_getpgid", NULL_FUNC]
    objs, s = traced(bpfmux, trigger, engine, ["--errors"], outer, trig)
    if not s:
        return
    chains = errors_of(objs)
    check(len(chains) == n, f"under ESRCH: {len(chains)} chains (want {n})")
    for i, c in enumerate(chains):
        rets = [(k.get("function"), k.get("ret"), k.get("error")) for k in c.get("calls", [])]
        want_rets = [("__x64_sys_getpgid", -3, "ESRCH"), (NULL_FUNC, 0, "NULL")]
        check(rets == want_rets and (c.get("error"), c.get("function")) == ("NULL", NULL_FUNC),
              f"under ESRCH: chain {i}: {rets}, {c.get('error')} in {c.get('function')} "
              f"(want {want_rets}, NULL in {NULL_FUNC})")
    check(s.get("null_only_chains_left_out") == 0,
          f"under ESRCH: {s.get('null_only_chains_left_out')} left out (want 0)")
    check_nothing_lost(s.get("lost", {}), "under ESRCH: nothing lost")


def t_graph(bpfmux, trigger, engine):
    work = f"sigaction {SIGACTION} getpgid {GETPGID}"
    _, s = traced(bpfmux, trigger, engine, ["--graph"], GRAPH_FUNCS, work)
    if not s:
        return
    check_engine(bpfmux, engine, s)
    g = s.get("graph") or []
    want = [("__x64_sys_getpgid", GETPGID, []),
            ("__x64_sys_rt_sigaction", SIGACTION, [("do_sigaction", SIGACTION, [])])]
    check(graph_shape(g) == want, f"graph {graph_shape(g)} (want {want})")
    check(all(graph_times_add_up(n) for n in g),
          "every node: inclusive time > 0, exclusive = inclusive less its children's")
    lost = s.get("lost", {})
    check("graph" in lost, f"the losses name call graph paths ({lost})")
    check_nothing_lost(lost)
    p = run(bpfmux, [*engine_args(engine), "--graph", "-c", f"{trigger} {work}", *GRAPH_FUNCS])
    lines = p.stdout.splitlines()
    for pat in [rf"__x64_sys_rt_sigaction \u00d7{SIGACTION} ", rf"  do_sigaction \u00d7{SIGACTION} ",
                rf"__x64_sys_getpgid \u00d7{GETPGID} "]:
        check(p.returncode == 0 and any(re.match(pat + r" *\S+ incl +\S+ excl$", l) for l in lines),
              f"text: a line {pat!r} with inclusive and exclusive times")


FILTER_MISSING, FILTER_NEGATIVE, FILTER_SELF, FILTER_GETPGID = 37, 11, 20, 963
SLEEPS, SLEEPS_LONG = 95, 5
FIND = "find_task_by_vpid"


def filter_totals(s):
    return (s.get("filter") or {}).get("seen"), (s.get("filter") or {}).get("passed")


def t_filter(bpfmux, trigger, engine):
    """--filter and --min-latency decide in the kernel which calls are recorded."""
    # kprobe.session reads no argument at a function's exit (auto then takes another engine).
    kprobe = engine == "kprobe-multi"
    # errno: of 1000 getpgid calls, exactly the 37 of a pid that cannot exist fail (ESRCH).
    work = f"getpgid {FILTER_GETPGID} getpgid-missing {FILTER_MISSING}"
    total = FILTER_GETPGID + FILTER_MISSING
    for flt, extra, want in [("errno == ESRCH", [], FILTER_MISSING),
                             ("ret >= 0", [], FILTER_GETPGID),
                             ("!errno", ["--latency"], FILTER_GETPGID)]:
        _, s = traced(bpfmux, trigger, engine, ["--filter", flt, *extra], ["__x64_sys_getpgid"],
                      work)
        if not s:
            continue
        check_engine(bpfmux, engine, s)
        f = calls(s, "__x64_sys_getpgid")
        check(f.get("calls") == want, f"--filter '{flt}': {f.get('calls')} calls (want {want})")
        check(filter_totals(s) == (total, want) and s["filter"]["expression"] == flt,
              f"--filter '{flt}': summary filter {s.get('filter')} (want seen {total}, "
              f"passed {want})")
        if extra:
            lat = f.get("latency_ns", {})
            check(lat.get("count") == want and sum(lat.get("log2_hist", [])) == want,
                  f"--filter '{flt}' --latency: {lat.get('count')} latencies (want {want})")
    # An argument by its BTF name (find_task_by_vpid(pid_t vnr)): signed, widened from 32
    # bits; with the return value (split at the top-level &&: kprobe-multi too).
    work = (f"getpgid-missing {FILTER_MISSING} getpgid-negative {FILTER_NEGATIVE} "
            f"getpgid-self {FILTER_SELF}")
    cases = [("vnr == 2147483647", FILTER_MISSING), ("vnr < 0", FILTER_NEGATIVE),
             ("vnr == 0x7fffffff && ret == 0", FILTER_MISSING)]
    # An argument in one || with the return value: read at the exit, not by kprobe.session.
    mixed = "vnr == 2147483647 || (vnr < 0 && ret == 0)"
    if not kprobe:
        cases.append((mixed, FILTER_MISSING + FILTER_NEGATIVE))
    for flt, want in cases:
        _, s = traced(bpfmux, trigger, engine, ["--filter", flt], [FIND], work)
        if not s:
            continue
        got = calls(s, FIND).get("calls")
        check(got == want, f"--filter '{flt}': {got} calls of {FIND} (want {want})")
        seen, passed = filter_totals(s)
        least = FILTER_MISSING + FILTER_NEGATIVE + FILTER_SELF
        check(passed == want and seen is not None and seen >= least,
              f"--filter '{flt}': the summary saw {seen}, passed {passed} (want >= {least}, "
              f"{want})")
    if kprobe:
        p = run(bpfmux, [*engine_args(engine), "--json", "--filter", mixed, "-c",
                         f"{trigger} {work}", FIND])
        check(p.returncode != 0 and "reads no arguments at a function's exit" in p.stderr
              and "attached" not in p.stderr,
              f"kprobe-multi, '{mixed}': exit {p.returncode}, says it cannot read arguments "
              "at the exit, nothing attached")
    # --args: only the calls the filter passes make events; with a return-value term the
    # entry event comes at the exit, just before the exit event (trampolines only).
    for flt in ["vnr < 0"] + ([] if kprobe else ["vnr < 0 && ret == 0"]):
        objs, s = traced(bpfmux, trigger, engine, ["--args", "--filter", flt], [FIND], work)
        if not s:
            continue
        ev = [o for o in objs if o.get("type") == "event" and o["function"] == FIND]
        kinds = [e["kind"] for e in ev]
        check(kinds == ["entry", "exit"] * FILTER_NEGATIVE,
              f"--args --filter '{flt}': {len(ev)} events, entry/exit pairs (want "
              f"{FILTER_NEGATIVE} of each)")
        vnrs = {str(e["args"].get("vnr")) for e in ev if e["kind"] == "entry"}
        check(vnrs == {"-1"}, f"--args --filter '{flt}': entry events have vnr {vnrs} (want -1)")
    # --stacks: the stacks of the calls that passed, taken at the return with an errno term.
    _, s = traced(bpfmux, trigger, engine, ["--stacks", "--filter", "errno == ESRCH"],
                  ["__x64_sys_getpgid"],
                  f"getpgid {FILTER_GETPGID} getpgid-missing {FILTER_MISSING}")
    if s:
        st = [k for k in s.get("stacks") or [] if k["function"] == "__x64_sys_getpgid"]
        n = sum(k["count"] for k in st)
        check(n == FILTER_MISSING and len(st) < 10,
              f"--stacks --filter 'errno == ESRCH': {n} calls in {len(st)} stacks (want "
              f"{FILTER_MISSING})")
    # --errors: the filter chooses which failing calls start a chain. A NULL of
    # find_task_by_vpid carries no errno: each chain is getpgid's ESRCH alone.
    pair = ["__x64_sys_getpgid", FIND]
    work2 = f"getpgid {FILTER_GETPGID} getpgid-missing {FILTER_MISSING}"
    objs, s = traced(bpfmux, trigger, engine, ["--errors", "--filter", "errno == ESRCH"], pair,
                     work2)
    if s:
        chains = [o for o in objs if o.get("type") == "error"]
        heads = {(c.get("function"), c.get("error"), len(c.get("calls", []))) for c in chains}
        check(len(chains) == FILTER_MISSING and heads == {("__x64_sys_getpgid", "ESRCH", 1)},
              f"--errors --filter 'errno == ESRCH': {len(chains)} chains {heads} (want "
              f"{FILTER_MISSING} of ('__x64_sys_getpgid', 'ESRCH', 1 call))")
    # --graph: calls counted under their path of callers, callers shown either way;
    # getpgid has no `vnr`: it never passes, and a warning says so.
    for flt, want in [("errno == ESRCH", [("__x64_sys_getpgid", FILTER_MISSING, [])]),
                      ("vnr == 2147483647",
                       [("__x64_sys_getpgid", 0, [(FIND, FILTER_MISSING, [])])])]:
        _, s = traced(bpfmux, trigger, engine, ["--graph", "--filter", flt], pair, work2)
        if not s:
            continue
        g = graph_shape(s.get("graph") or [])
        check(g == want, f"--graph --filter '{flt}': {g} (want {want})")
    check("never passes 1 function lacking what it reads: __x64_sys_getpgid (no argument "
          "`vnr`)" in last_stderr, "a warning names the function that lacks `vnr`")
    # Latency: 5 of 100 nanosleeps take 200 ms, the others 0 ns.
    work = f"nanosleep0 {SLEEPS} nanosleep200ms {SLEEPS_LONG}"
    for extra, want in [(["--min-latency", "100ms", "--latency"], SLEEPS_LONG),
                        (["--filter", "latency < 100ms"], SLEEPS)]:
        _, s = traced(bpfmux, trigger, engine, extra, ["__x64_sys_nanosleep"], work)
        if not s:
            continue
        f = calls(s, "__x64_sys_nanosleep")
        check(f.get("calls") == want and filter_totals(s) == (SLEEPS + SLEEPS_LONG, want),
              f"{' '.join(extra)}: {f.get('calls')} calls, filter {s.get('filter')} (want "
              f"{want} of {SLEEPS + SLEEPS_LONG})")
        if "--latency" in extra:
            lat = f.get("latency_ns", {})
            h = lat.get("log2_hist", [])
            check(lat.get("count") == want and sum(h[26:]) == want,
                  f"--min-latency: {lat.get('count')} latencies, {sum(h[26:])} of them of "
                  f"67 ms or more (want {want})")
    # Bad filters: one clear error each, with the column and a caret; nothing attached.
    for flt, said in [("nr == 5", "unknown argument `nr`: no selected function has it "
                                  f"({FIND}(vnr))"),
                      ("vnr == 1ms", "type mismatch: `1ms` is a duration"),
                      ("(errno == ESRCH", "this `(` is never closed"),
                      ('vnr == "abc"', "a string compares only with a `char *` argument"),
                      ("vnr == 4294967295", "out of range: 4294967295 is not a value of `vnr`")]:
        p = run(bpfmux, [*engine_args(engine), "--json", "--filter", flt, "-c",
                         f"{trigger} getpgid 1", FIND])
        lines = p.stderr.splitlines()
        caret = any(re.fullmatch(r" *\^+", l) for l in lines)
        check(p.returncode != 0 and said in p.stderr and "column " in p.stderr and caret
              and "attached" not in p.stderr and not p.stdout.strip(),
              f"--filter '{flt}': exit {p.returncode}, says {said!r} at a column with a caret, "
              "nothing attached")


OPENAT_OTHER = 2
MISSING_DIR = "/nonexistent-bpfmux-trigger/"


def t_filter_strings(bpfmux, trigger, engine, *opts):
    """--filter on strings (==, !=, ^=) and on the 7th and later arguments, in the kernel."""
    work = f"openat-missing {OPENAT_MISSING} openat-other {OPENAT_OTHER}"
    both = OPENAT_MISSING + OPENAT_OTHER
    # The loader's own opens (ld.so.cache, libc) have other names: exact counts.
    cases = [(f'filename == "{MISSING_FILE}"', OPENAT_MISSING),
             (f'filename ^= "{MISSING_DIR}"', both),
             (f'filename != "{MISSING_FILE}" && filename ^= "{MISSING_DIR}"', OPENAT_OTHER),
             (f'!(filename ^= "{MISSING_DIR}o") && filename ^= "{MISSING_DIR}"', OPENAT_MISSING),
             (f'filename ^= "{MISSING_DIR}" && ret == -2', both),
             (f'filename == "{MISSING_FILE}x"', 0),
             (f'filename == "{MISSING_FILE[:-1]}"', 0)]
    for flt, want in cases:
        _, s = traced(bpfmux, trigger, engine, ["--filter", flt], ["do_sys_openat2"], work)
        if not s:
            continue
        check_engine(bpfmux, engine, s)
        got = calls(s, "do_sys_openat2").get("calls", 0)
        check(got == want, f"--filter '{flt}': {got} calls of do_sys_openat2 (want {want})")
        seen, passed = filter_totals(s)
        check(passed == want and seen is not None and seen >= both,
              f"--filter '{flt}': the summary saw {seen}, passed {passed} (want >= {both}, {want})")
    # --args: only the calls that passed, each naming the file.
    objs, s = traced(bpfmux, trigger, engine, ["--args", "--filter", f'filename == "{MISSING_FILE}"'],
                     ["do_sys_openat2"], work)
    if s:
        names = [e["args"].get("filename") for e, _ in calls_of(objs, "do_sys_openat2")]
        check(names == [f'"{MISSING_FILE}"'] * OPENAT_MISSING,
              f"--args --filter 'filename == ...': entry events {names} (want {OPENAT_MISSING} "
              f"of {MISSING_FILE})")
    # The 7th argument (on the stack): do_mmap's pgoff.
    for flt, want in [("pgoff == 5 && len == 12288", MMAPS), ("pgoff == 6 && len == 12288", 0)]:
        _, s = traced(bpfmux, trigger, engine, ["--filter", flt], ["do_mmap"], f"mmap-self {MMAPS}")
        if s:
            got = calls(s, "do_mmap").get("calls", 0)
            check(got == want, f"--filter '{flt}': {got} calls of do_mmap (want {want})")
    # Strings against numbers, and the other way round: clear errors, nothing attached.
    for flt, col, said in [("filename == 5", 13, "`filename` is a string (`char *`) in "
                                                 "do_sys_openat2: compare it with a string"),
                           ('dfd == "x"', 8, "a string compares only with a `char *` argument"),
                           ('filename < "b"', 10, "strings compare with `==`, `!=` or `^=`"),
                           ('ret ^= "x"', 8, "ret is a number"),
                           ('filename == "/etc', 13, "expected a closing")]:
        p = run(bpfmux, [*engine_args(engine), "--json", "--filter", flt, "-c",
                         f"{trigger} openat-missing 1", "do_sys_openat2"])
        lines = p.stderr.splitlines()
        caret = any(re.fullmatch(r" *\^+", l) for l in lines)
        check(p.returncode != 0 and said in p.stderr and f"column {col}:" in p.stderr and caret
              and "attached" not in p.stderr and not p.stdout.strip(),
              f"--filter '{flt}': exit {p.returncode}, says {said!r} at column {col} with a "
              "caret, nothing attached")
    if "kmod" not in opts:
        return
    # Kernel strings, and the 9th argument, of the test module's functions.
    with targs_module(trigger) as loaded:
        if not loaded:
            return
        for flt, func, want in [('name == "alpha"', "bpfmux_targs_struct", TARGS_WRITES),
                                ('name ^= "alpha"', "bpfmux_targs_struct", 2 * TARGS_WRITES),
                                ('name != "alpha"', "bpfmux_targs_struct", 2 * TARGS_WRITES),
                                ('name == "alpha" && ret == 43', "bpfmux_targs_struct",
                                 TARGS_WRITES),
                                ('kname == "kernel string" && uname == "user-string"',
                                 "bpfmux_targs_strings", TARGS_WRITES),
                                ("i == 0x1122334455667788 && h == -9", "bpfmux_targs_nine",
                                 TARGS_WRITES),
                                ("i == 1", "bpfmux_targs_nine", 0)]:
            _, s = traced(bpfmux, trigger, engine, ["--filter", flt], [func],
                          f"targs {TARGS_WRITES}")
            if s:
                got = calls(s, f"targs_kmod:{func}").get("calls", 0)
                check(got == want, f"--filter '{flt}': {got} calls of {func} (want {want})")
CGROOT = "/sys/fs/cgroup"


def in_cgroup(path):
    """preexec_fn moving the new process into the cgroup at path (before it execs)."""
    def move():
        with open(os.path.join(path, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
    return move


def scoped_run(bpfmux, engine, scope, workloads):
    """bpfmux trace --json with the scope options on __x64_sys_getpgid, stopped by SIGTERM
    once every workload() (run after the attach, in turn) is done: the calls counted, or
    None (a failure said)."""
    r = Running([bpfmux, "trace", *engine_args(engine), "--json", *scope, "__x64_sys_getpgid"])
    attached = r.wait_for(lambda: "bpfmux trace: attached" in r.stderr())
    if attached:
        for w in workloads:
            w()
    rc, _ = r.stop(signal.SIGTERM)
    what = f"bpfmux trace {' '.join(scope)}"
    check(attached, f"{what}: attached (stderr above)")
    check(rc == 0, f"{what}: exit status {rc} after SIGTERM (want 0)")
    check_nothing_attached(what)
    if not attached or rc != 0:
        return None
    try:
        _, s = parse(r.out)
    except json.JSONDecodeError as e:
        check(False, f"{what}: output is JSON lines ({e})")
        return None
    check(s is not None, f"{what}: a summary object ends the output")
    if s is None:
        return None
    check_engine(bpfmux, engine, s)
    return calls(s, "__x64_sys_getpgid").get("calls", 0), r.stderr()


def t_scope_cgroup(bpfmux, trigger, engine):
    """--cgroup: the cgroup and every cgroup below it; --cgroup-exact: that cgroup only."""
    parent = os.path.join(CGROOT, "bpfmux-scope")
    child, sibling = os.path.join(parent, "child"), os.path.join(CGROOT, "bpfmux-scope-other")
    grand = os.path.join(child, "grand")
    for d in (grand, child, parent, sibling):  # left by an earlier run that was killed
        if os.path.isdir(d):
            os.rmdir(d)
    made = []
    try:
        for d in (parent, child, grand, sibling):
            os.mkdir(d)
            made.append(d)
    except OSError as e:
        check(False, f"making test cgroups under {CGROOT} (is cgroup v2 mounted there?): {e}")
        for d in reversed(made):
            os.rmdir(d)
        return
    # (cgroup or None for the root, getpgid calls)
    plan = [(child, 1000), (grand, 200), (parent, 30), (sibling, 700), (None, 50)]

    def workload(cg, n):
        def go():
            p = subprocess.run([trigger, "getpgid", str(n)],
                               preexec_fn=in_cgroup(cg) if cg else None)
            check(p.returncode == 0, f"trigger getpgid {n} in {cg or 'the root cgroup'} exits 0 "
                  f"(got {p.returncode})")
        return go
    workloads = [workload(cg, n) for cg, n in plan]
    try:
        for scope, want, why in [
                (["--cgroup", parent], 1000 + 200 + 30, "P, P/child and P/child/grand"),
                (["--cgroup-exact", parent], 30, "P only"),
                (["--cgroup", child], 1000 + 200, "P/child and P/child/grand")]:
            got = scoped_run(bpfmux, engine, scope, workloads)
            if got is not None:
                check(got[0] == want, f"{' '.join(scope)}: {got[0]} getpgid calls counted (want "
                      f"exactly {want}: {why}; not the sibling's 700 nor the root's 50)")
        p = run(bpfmux, [*engine_args(engine), "--json", "--cgroup", "/proc", "__x64_sys_getpgid"])
        check(p.returncode != 0 and "--cgroup /proc: not a cgroup v2 directory" in p.stderr,
              f"--cgroup /proc: exit {p.returncode}, says it is no cgroup v2 directory")
    finally:
        for d in reversed(made):
            try:
                os.rmdir(d)
            except OSError as e:
                check(False, f"removing test cgroup {d}: {e}")


class Waiting:
    """trigger pause 1 getpgid N, in a new pid namespace (as its process 1) if ns: waiting for
    its go (a line on stdin) once it has printed "paused"."""

    def __init__(self, trigger, n, ns):
        cmd = [trigger, "pause", "1", "getpgid", str(n)]
        if ns:
            cmd = ["unshare", "--pid", "--fork", "--kill-child", *cmd]
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.ready = self.p.stdout.readline().strip() == "paused"
        check(self.ready, f"{' '.join(cmd)}: paused")
        # The trigger itself: unshare's child in a new namespace.
        self.pid = self.p.pid
        if ns:
            kids = [pid for pid in os.listdir("/proc") if pid.isdigit() and ppid(pid) == self.p.pid]
            self.pid = int(kids[0]) if len(kids) == 1 else None
            check(self.pid is not None, f"unshare {self.p.pid}'s one child: {kids}")

    def go(self):
        if self.p.stdin:
            try:
                self.p.stdin.write("go\n")
                self.p.stdin.close()
            except OSError:
                pass
            self.p.stdin = None
        rc = self.p.wait(timeout=120)
        check(rc == 0, f"trigger of pid {self.pid} exits 0 (got {rc})")

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


def ppid(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("PPid:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def nspid(pid):
    """A process's ID in its innermost pid namespace (NSpid's last field)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("NSpid:"):
                return int(line.split()[-1])
    return None


def t_scope_pidns(bpfmux, trigger, engine):
    """--pid N --pid-ns NS: the process N of that pid namespace, not process N elsewhere."""
    for scope, want, why in [(lambda a, b: ["--pid", "1", "--pid-ns", f"/proc/{a}/ns/pid"], 1000,
                              "A's process 1"),
                             (lambda a, b: ["--pid-ns", str(a)], 1000, "every process of A"),
                             (lambda a, b: ["--pid", "1", "--pid-ns", f"/proc/{b}/ns/pid"], 700,
                              "B's process 1")]:
        procs = [Waiting(trigger, 1000, True), Waiting(trigger, 700, True),
                 Waiting(trigger, 300, False)]
        try:
            if not all(w.ready and w.pid for w in procs):
                return
            a, b = procs[0].pid, procs[1].pid
            check(nspid(a) == 1 and nspid(b) == 1,
                  f"processes {a} and {b} are process 1 of their namespaces ({nspid(a)}, {nspid(b)})")
            args = scope(a, b)
            got = scoped_run(bpfmux, engine, args, [w.go for w in procs])
            if got is None:
                continue
            n, err = got
            check(n == want, f"{' '.join(args)}: {n} getpgid calls counted (want exactly {want}: "
                  f"{why}; calls of 1000, 700 and 300 were made)")
            if "--pid" in args:
                here = a if want == 1000 else b
                check(f"is process {here} here" in err,
                      f"stderr names the process by its ID here ({here})")
        finally:
            for w in procs:
                w.kill()
    p = run(bpfmux, [*engine_args(engine), "--json", "--pid-ns", "/proc/self/ns/net",
                     "__x64_sys_getpgid"])
    check(p.returncode != 0 and "a net namespace, not a pid namespace" in p.stderr,
          f"--pid-ns of a net namespace: exit {p.returncode}, says it is no pid namespace")
    w = Waiting(trigger, 1, True)
    try:
        p = run(bpfmux, [*engine_args(engine), "--json", "--pid", "2", "--pid-ns", str(w.pid),
                         "__x64_sys_getpgid"])
        check(p.returncode != 0 and "--pid 2: no process with this ID in pid namespace" in p.stderr,
              f"--pid 2 of a namespace with process 1 only: exit {p.returncode}, says so")
    finally:
        w.kill()


def run_inject(bpfmux, args):
    global last_stderr
    p = subprocess.run([bpfmux, "inject", *args], capture_output=True, text=True, timeout=600)
    last_stderr = p.stderr
    for line in p.stderr.splitlines():
        print(f"  stderr: {line}")
    check_nothing_attached(f"bpfmux inject exited {p.returncode}")
    return p


INJECT_CALLS, INJECT_TIMES = 20, 7


def t_inject(bpfmux, trigger, engine, fei=True, syscalls=True):
    if not syscalls:
        # A verifier that refuses system calls to fmod_ret when built without error
        # injection (6.12; 7.3 takes them): refused by name, before anything is attached.
        p = run_inject(bpfmux, [*engine_args(engine), "-c", f"{trigger} getpgid-errors 5",
                                "__x64_sys_getpgid"])
        check(p.returncode != 0 and "__x64_sys_getpgid" in p.stderr
              and "only on LSM hooks" in p.stderr and "attached" not in p.stderr
              and "failed " not in p.stdout,
              f"__x64_sys_getpgid: exit {p.returncode}, refused (LSM hooks only), the command "
              "not run")
    else:
        t_inject_getpgid(bpfmux, trigger, engine)
    t_inject_lsm_and_refusal(bpfmux, trigger, engine, fei)


def t_inject_getpgid(bpfmux, trigger, engine):
    args = [*engine_args(engine), "--json", "-e", "EPERM", "--times", str(INJECT_TIMES),
            "-c", f"{trigger} getpgid-errors {INJECT_CALLS}", "__x64_sys_getpgid"]
    p = run_inject(bpfmux, args)
    check(p.returncode == 0, f"bpfmux inject {' '.join(args)} exits 0 (got {p.returncode})")
    # The command's line and bpfmux's JSON summary share standard output.
    lines = p.stdout.splitlines()
    said = [l for l in lines if l.startswith("failed ")]
    want = f"failed {INJECT_TIMES} errno 1"
    check(said == [want], f"the command says {said} (want ['{want}']: EPERM is 1)")
    s = [json.loads(l) for l in lines if l.startswith("{")]
    s = s[-1] if s else {}
    check(s.get("type") == "summary", "a JSON summary ends the output")
    if s.get("type") != "summary":
        return
    check_engine(bpfmux, engine, s, inject=True)
    f = calls(s, "__x64_sys_getpgid")
    check((f.get("calls"), f.get("injected"), s.get("injected")) ==
          (INJECT_CALLS, INJECT_TIMES, INJECT_TIMES),
          f"summary: {f.get('calls')} calls, {f.get('injected')} injected, {s.get('injected')} "
          f"in all (want {INJECT_CALLS}, {INJECT_TIMES}, {INJECT_TIMES})")
    # A glob: only the functions the kernel allows fmod_ret on stay.
    args = [*engine_args(engine), "--json", "--times", "2", "-c", f"{trigger} getpgid-errors 5",
            "__x64_sys_getpgi[d]", "vfs_rea[d]"]
    p = run_inject(bpfmux, args)
    lines = p.stdout.splitlines()
    s = [json.loads(l) for l in lines if l.startswith("{")]
    s = s[-1] if s else {}
    check(p.returncode == 0 and "failed 2 errno 12" in lines,
          f"glob: exit {p.returncode}, the command says {[l for l in lines if l.startswith('failed')]}"
          " (want 0, 'failed 2 errno 12': ENOMEM by default)")
    check((s.get("functions_attached"), s.get("functions_dropped")) == (1, 1),
          f"glob: {s.get('functions_attached')} attached, {s.get('functions_dropped')} dropped "
          "(want 1: getpgid; 1: vfs_read, not allowed)")


def t_inject_lsm_and_refusal(bpfmux, trigger, engine, fei):
    # An LSM hook: the kernel allows fmod_ret on security_* whatever its build.
    args = [*engine_args(engine), "--json", "-e", "EACCES", "--times", "3",
            "-c", f"{trigger} getpgid-self-errors 5", "security_task_getpgid"]
    p = run_inject(bpfmux, args)
    said = [l for l in p.stdout.splitlines() if l.startswith("failed ")]
    check(p.returncode == 0 and said == ["failed 3 errno 13"],
          f"security_task_getpgid: exit {p.returncode}, the command says {said} (want "
          "['failed 3 errno 13']: EACCES is 13)")
    # Named exactly and not allowed: refused before anything is attached, with the rule of
    # this kernel's build.
    p = run_inject(bpfmux, [*engine_args(engine), "vfs_read"])
    why = "error-injection list" if fei else "CONFIG_FUNCTION_ERROR_INJECTION"
    check(p.returncode != 0 and "vfs_read" in p.stderr and why in p.stderr
          and "attached" not in p.stderr,
          f"vfs_read: exit {p.returncode}, refused with a message naming it and '{why}'")


def t_inject_no_list(bpfmux, trigger, engine, *opts):
    """A kernel built without function error injection: fmod_ret on system call entry points
    and LSM hooks only, as its verifier says (lsm-only: a verifier that refuses system
    calls)."""
    check(os.path.isdir("/sys/kernel/debug/tracing") and
          not os.path.exists("/sys/kernel/debug/error_injection"),
          "debugfs is mounted and has no error_injection directory (the premise)")
    t_inject(bpfmux, trigger, engine, fei=False, syscalls="lsm-only" not in opts)


def t_inject_unavailable(bpfmux, trigger, engine):
    p = run_inject(bpfmux, ["--engine", engine, "__x64_sys_getpgid"])
    check(p.returncode != 0 and f"engine {engine} is not available" in p.stderr,
          f"exit {p.returncode}, says the engine cannot inject")


def check_engine(bpfmux, engine, summary, inject=False):
    want = expected_engine(bpfmux, inject) if engine == "auto" else engine
    check(summary["engine"] == want, f"engine {summary['engine']} (want {want})")


def t_count(bpfmux, trigger, engine, *opts):
    latency = "--latency" in opts
    extra = ["--latency"] if latency else []
    _, s = traced(bpfmux, trigger, engine, extra, ["__x64_sys_getpgid", "__x64_sys_getpriority"],
                  f"getpgid {GETPGID} getpriority {GETPRIORITY}")
    if not s:
        return
    check_engine(bpfmux, engine, s)
    if latency:
        want = expected_exit_side(bpfmux, s["engine"])
        check(s.get("exit_side") == want, f"exit side {s.get('exit_side')} (want {want})")
    check(s["functions_attached"] == 2, f"2 functions attached ({s['functions_attached']})")
    for name, want in [("__x64_sys_getpgid", GETPGID), ("__x64_sys_getpriority", GETPRIORITY)]:
        f = calls(s, name)
        check(f.get("calls") == want, f"{name}: {f.get('calls')} calls counted (want {want})")
        if latency:
            lat = f.get("latency_ns", {})
            check(lat.get("count") == want and sum(lat.get("log2_hist", [])) == want,
                  f"{name}: {lat.get('count')} latencies, histogram of "
                  f"{sum(lat.get('log2_hist', []))} (want {want} each)")
    check(s["attach_ms"] > 0 and s["detach_ms"] > 0,
          f"attach {s['attach_ms']} ms, detach {s['detach_ms']} ms reported")


def t_glob(bpfmux, trigger, engine, min_funcs, *patterns):
    objs, s = traced(bpfmux, trigger, engine, ["-v"], list(patterns), f"getpgid {GETPGID}")
    if not s:
        return
    check_engine(bpfmux, engine, s)
    n = s["functions_attached"]
    check(n >= int(min_funcs), f"{n} functions attached (want >= {min_funcs}) "
          f"in {s['attach_ms']} ms, detached in {s['detach_ms']} ms, {s['links']} links")
    check(s["functions_dropped"] >= 1, f"{s['functions_dropped']} dropped (vfs_caches_init is notrace)")
    got = calls(s, "__x64_sys_getpgid").get("calls")
    check(got == GETPGID, f"__x64_sys_getpgid: {got} calls among {n} (want {GETPGID})")
    if n > 100:
        # stderr is a pipe here: progress comes as lines, not as an invisible bar
        done = re.findall(r"attaching: (\d+)/(\d+) functions, ", last_stderr)
        check(done and done[-1][0] == done[-1][1],
              f"progress lines on a non-terminal stderr end with all attached ({done[-1:]})")
        check(f"detaching {n} functions" in last_stderr, "a line says detaching has started")


def t_args(bpfmux, trigger, engine):
    objs, s = traced(bpfmux, trigger, engine, ["--args"], ["__x64_sys_getpgid"], "getpgid 3")
    if not s:
        return
    ev = [o for o in objs if o.get("type") == "event" and o["function"] == "__x64_sys_getpgid"]
    kinds = [e["kind"] for e in ev]
    check(kinds == ["entry", "exit"] * 3, f"events entry/exit x3 (got {kinds})")
    check(all("regs" in e["args"] for e in ev if e["kind"] == "entry"),
          "entry events name the argument (regs)")
    check(all(e["duration_ns"] > 0 for e in ev if e["kind"] == "exit"), "exit events have durations")
    check(s["events"] == 6, f"summary counts 6 events ({s['events']})")


MISSING_FILE = "/nonexistent-bpfmux-trigger/file"
MMAPS = 2
TARGS_LONG = ("0123456789abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
              "-_-_-_-_-_-_-_-_-_")
# What targs_kmod's functions are called with, and return, on every write (targs.c).
TARGS = {
    "bpfmux_targs_nine": (
        {"a": "-1", "b": "4000000000", "c": "-5000000000", "d": str(0xfedcba9876543210),
         "e": "-7", "f": "200", "g": "-123456789012", "h": "-9", "i": str(0x1122334455667788)},
        ("-22", "EINVAL")),
    "bpfmux_targs_strings": (
        {"kname": '"kernel string"', "uname": '"user-string"', "mode": "TARGS_MODE_B",
         "flag": "true", "cb": "targs_cb+0x0", "nothing": "NULL",
         "ip": re.compile(r"0xffffffff[0-9a-f]{8} <bpfmux_targs_nine\+0x0>")},
        ("-2", "ENOENT")),
    "bpfmux_targs_long": ({"s": f'"{TARGS_LONG[:63]}"...'}, ("100", None)),
    "bpfmux_targs_pair": ({"p": "{0x11, 0x22}", "after": "5"}, ("51", None)),
}
TARGS_WRITES = 2


def calls_of(objs, function):
    """(entry, exit) event pairs of one function, in order (one thread: entry, then exit)."""
    ev = [o for o in objs if o.get("type") == "event" and o.get("function") == function]
    pairs = []
    for e in ev:
        if e["kind"] == "entry":
            pairs.append([e, None])
        elif pairs and pairs[-1][1] is None:
            pairs[-1][1] = e
    return pairs


def kernel_pointer(s):
    """A kernel address as --args prints a pointer: hex, in the upper half (0xffff8880... with
    4-level paging, 0xff11... or a vmalloc'd stack at 0xffa0... with 5-level)."""
    return s is not None and re.fullmatch(r"0x[0-9a-f]{16}", s) is not None and int(s, 16) >= 1 << 63


def same(got, want):
    """Argument objects equal, a compiled pattern matching its whole value."""
    return set(got) == set(want) and all(
        w.fullmatch(got[k]) if isinstance(w, re.Pattern) else got[k] == w
        for k, w in want.items())


def t_args_types(bpfmux, trigger, engine, *opts):
    """--args: every argument by its BTF type, stack-passed ones and strings included."""
    work = f"openat-missing {OPENAT_MISSING} mmap-self {MMAPS}"
    # A glob within the cap captures as an exact name would.
    objs, s = traced(bpfmux, trigger, engine, ["--args"], ["do_sys_opena[t]2", "do_mmap"], work)
    if s:
        check_engine(bpfmux, engine, s)
        opens = [(e, x) for e, x in calls_of(objs, "do_sys_openat2")
                 if e["args"].get("filename") == f'"{MISSING_FILE}"']
        check(len(opens) == OPENAT_MISSING,
              f"{len(opens)} do_sys_openat2 calls name {MISSING_FILE} (want {OPENAT_MISSING})")
        for e, x in opens:
            a = e["args"]
            check(a.get("dfd") == "-100" and kernel_pointer(a.get("how")),
                  f"do_sys_openat2 arguments {a} (want dfd=-100, how a kernel pointer)")
            got = x and (x.get("ret"), x.get("error"))
            check(got == ("-2", "ENOENT"), f"do_sys_openat2 returns {got} (want -2 ENOENT)")
        # The loader's and exec's mappings have other offsets and lengths.
        maps = [(e, x) for e, x in calls_of(objs, "do_mmap")
                if (e["args"].get("pgoff"), e["args"].get("len")) == ("5", "12288")]
        check(len(maps) == MMAPS, f"{len(maps)} do_mmap calls with pgoff=5 (its 7th argument) "
              f"and len=12288 (want {MMAPS})")
        for e, x in maps:
            a = e["args"]
            got = {k: a.get(k) for k in ("addr", "len", "prot", "flags", "pgoff")}
            want = {"addr": "0", "len": "12288", "prot": "1", "flags": "2", "pgoff": "5"}
            check(got == want, f"do_mmap arguments {got} (want {want})")
            check(kernel_pointer(a.get("populate")),
                  f"do_mmap populate={a.get('populate')}: a kernel pointer (the 8th argument)")
            check(x is not None and x.get("ret", "").isdigit() and int(x["ret"]) > 0,
                  f"do_mmap returns an address ({x and x.get('ret')})")
    # The text form.
    p = run(bpfmux, [*engine_args(engine), "--args", "-c", f"{trigger} openat-missing 1",
                     "do_sys_openat2"])
    check(p.returncode == 0 and re.search(
        rf"\] -> do_sys_openat2\(dfd=-100, filename=\"{MISSING_FILE}\", how=0xff[0-9a-f]{{14}}\)$",
        p.stdout, re.M) is not None and re.search(
        r"\] <- do_sys_openat2 = -2 ENOENT \(", p.stdout, re.M) is not None,
        f"text: exit {p.returncode}, a call line with the string and its return with ENOENT")
    # Over the cap: refused before anything is attached, naming the cap and the count.
    p = run(bpfmux, [*engine_args(engine), "--args", "-d", "1", "vfs_*", "__x64_sys_*"])
    m = re.search(r"--args: per-call events on (\d+) functions: at most 256", p.stderr)
    check(p.returncode != 0 and m is not None and int(m.group(1)) > 256
          and "attached" not in p.stderr,
          f"--args over the cap: exit {p.returncode}, says the count and the cap, nothing "
          "attached")
    # --args-depth: the struct `how` points at, by its fields.
    objs, s = traced(bpfmux, trigger, engine, ["--args", "--args-depth", "1"], ["do_sys_openat2"],
                     f"openat-missing {OPENAT_MISSING}")
    if s:
        hows = [e["args"].get("how", "") for e, _ in calls_of(objs, "do_sys_openat2")
                if e["args"].get("filename") == f'"{MISSING_FILE}"']
        good = [h for h in hows if re.fullmatch(
            r"0xff[0-9a-f]{14} \{flags=\d+, mode=0, resolve=0\}", h)]
        check(len(hows) == OPENAT_MISSING and good == hows,
              f"--args-depth 1: do_sys_openat2 how={hows} (want {OPENAT_MISSING} of "
              "'0x... {flags=N, mode=0, resolve=0}')")
    if "kmod" not in opts:
        return
    with targs_module(trigger) as loaded:
        if loaded:
            t_args_types_kmod(bpfmux, trigger, engine)


@contextlib.contextmanager
def targs_module(trigger):
    """targs_kmod loaded for the block (yields whether it could be), unloaded after it."""
    kmod_dir = os.environ.get("BPFMUX_KMOD_DIR", os.path.dirname(trigger))
    ko = os.path.join(kmod_dir, "targs_kmod.ko")
    r = subprocess.run(["insmod", ko], capture_output=True, text=True)
    check(r.returncode == 0, f"insmod {ko} ({r.stderr.strip()})")
    if r.returncode != 0:
        yield False
        return
    try:
        yield True
    finally:
        r = subprocess.run(["rmmod", "targs_kmod"], capture_output=True, text=True)
        check(r.returncode == 0, f"rmmod targs_kmod ({r.stderr.strip()})")


# bpfmux_targs_struct's first argument (targs.c), with --args-depth 1 and 2.
TARGS_OUTER = (r"a=-5, b=7, mode=TARGS_MODE_B, inner=0xff[0-9a-f]{14}%s, "
               r"pair=\{a=17, b=34\}, flags=5, more=-15")
TARGS_INNER = r' \{id=42, tag="inner"\}'


def t_args_types_kmod(bpfmux, trigger, engine):
    """The test module's functions, each argument and return value to its exact text."""
    funcs = [*TARGS, "bpfmux_targs_errptr"]
    objs, s = traced(bpfmux, trigger, engine, ["--args"], funcs, f"targs {TARGS_WRITES}")
    if s:
        check_engine(bpfmux, engine, s)
        for f, (want, (ret, err)) in TARGS.items():
            pairs = calls_of(objs, f"targs_kmod:{f}")
            check(len(pairs) == TARGS_WRITES, f"{f}: {len(pairs)} calls (want {TARGS_WRITES})")
            for e, x in pairs:
                check(same(e["args"], want), f"{f}: arguments {e['args']} (want {want})")
                got = x and (x.get("ret"), x.get("error"))
                check(got == (ret, err), f"{f}: returns {got} (want {(ret, err)})")
        rets = [(e["args"].get("null"), x and x.get("ret"), x and x.get("error"))
                for e, x in calls_of(objs, "targs_kmod:bpfmux_targs_errptr")]
        want = [("0", "ERR_PTR(-EINVAL)", "EINVAL"), ("1", "NULL", None)] * TARGS_WRITES
        check(rets == want, f"bpfmux_targs_errptr: {rets} (want {want})")
    # A larger bound reads the long string whole.
    objs, s = traced(bpfmux, trigger, engine, ["--args", "--args-size", "128"],
                     ["bpfmux_targs_long"], "targs 1")
    if s:
        got = [e["args"].get("s") for e, _ in calls_of(objs, "targs_kmod:bpfmux_targs_long")]
        check(got == [f'"{TARGS_LONG}"'], f"--args-size 128: {got} (the whole string)")
    p = run(bpfmux, [*engine_args(engine), "--args", "-c", f"{trigger} targs 1",
                     "bpfmux_targs_nine"])
    # A module's function is named with its module, as the kernel's own listings do.
    line = ("-> targs_kmod:bpfmux_targs_nine(a=-1, b=4000000000, c=-5000000000, "
            "d=18364758544493064720, "
            "e=-7, f=200, g=-123456789012, h=-9, i=1234605616436508552)")
    check(p.returncode == 0 and any(l.endswith(line) for l in p.stdout.splitlines())
          and any(l.endswith("<- targs_kmod:bpfmux_targs_nine = -22 EINVAL") or
                  "<- targs_kmod:bpfmux_targs_nine = -22 EINVAL (" in l
                  for l in p.stdout.splitlines()),
          f"text: exit {p.returncode}, the call line and its return with EINVAL")
    # --args-depth: the struct argument by its fields; 2: the struct its `inner` points at
    # too; a budget of 16 bytes cuts the outer struct after its third field.
    for extra, inner in [(["--args-depth", "1"], ""), (["--args-depth", "2"], TARGS_INNER),
                         (["--args-depth", "3"], TARGS_INNER)]:
        want = r"0xff[0-9a-f]{14} \{" + TARGS_OUTER % inner + r"\}"
        check_struct_arg(bpfmux, trigger, engine, extra, want)
    check_struct_arg(bpfmux, trigger, engine, ["--args-depth", "2", "--args-size", "16"],
                     r"0xff[0-9a-f]{14} \{a=-5, b=7, mode=TARGS_MODE_B, \.\.\.\}")
    # Without --args-depth: the address alone.
    check_struct_arg(bpfmux, trigger, engine, [], r"0xff[0-9a-f]{14}")


def check_struct_arg(bpfmux, trigger, engine, extra, want):
    """bpfmux_targs_struct's `o` prints as `want` (a regex) in each of its calls."""
    objs, s = traced(bpfmux, trigger, engine, ["--args", *extra], ["bpfmux_targs_struct"],
                     f"targs {TARGS_WRITES}")
    if not s:
        return
    got = [e["args"].get("o", "") for e, _ in calls_of(objs, "targs_kmod:bpfmux_targs_struct")]
    check(len(got) == 3 * TARGS_WRITES and all(re.fullmatch(want, g) for g in got),
          f"--args {' '.join(extra)}: bpfmux_targs_struct o={got[:2]}... ({len(got)} calls; "
          f"want {3 * TARGS_WRITES} of {want!r})")


def t_own(bpfmux, trigger, engine):
    """-c counts the command's own calls only, like bpftrace -c: a /bin/sh started first
    would add its startup's rt_sigaction calls (and its loader's opens and reads)."""
    # By name through PATH, with a quoted argument: split like sh, found like execvp.
    env = dict(os.environ, PATH=f"{os.path.dirname(trigger)}:{os.environ.get('PATH', '')}")
    name = os.path.basename(trigger)
    _, s = traced(bpfmux, name, engine, [], ["__x64_sys_rt_sigaction"], f"sigaction '{SIGACTION}'",
                  env)
    if not s:
        return
    check_engine(bpfmux, engine, s)
    got = calls(s, "__x64_sys_rt_sigaction").get("calls")
    check(got == SIGACTION, f"__x64_sys_rt_sigaction: {got} calls counted (want exactly "
          f"{SIGACTION}, the command's own)")
    check(s.get("command_exit") == 0, f"the command exited 0 ({s.get('command_exit')})")
    check("note:" not in last_stderr, "no note about a shell for a simple command")


def t_not_found(bpfmux, trigger):
    p = run(bpfmux, ["--json", "-c", "no-such-command-bpfmux --x", "__x64_sys_getpgid"])
    check(p.returncode == 127, f"-c with an unknown command: exit {p.returncode} (want 127)")
    check("no-such-command-bpfmux: command not found" in p.stderr,
          "the error names the command that was not found")
    check("attached" not in p.stderr, "nothing was attached")


def t_unknown(bpfmux, trigger):
    p = run(bpfmux, ["--json", "-d", "1", "no_such_function_bpfmux"])
    check(p.returncode != 0, f"unknown function: exit {p.returncode} (want != 0)")
    check("unknown function" in p.stderr and "no_such_function_bpfmux" in p.stderr,
          "the error names the unknown function")


def t_unavailable(bpfmux, trigger, engine):
    p = run(bpfmux, ["--engine", engine, "--json", "-c", f"{trigger} getpgid 1", "__x64_sys_getpgid"])
    check(p.returncode != 0, f"--engine {engine}: exit {p.returncode} (want != 0)")
    check(f"engine {engine} is not available" in p.stderr, "the error says the engine is unavailable")


def listed(bpfmux, pattern, n):
    """The first n functions `bpfmux trace --list` selects for pattern."""
    p = subprocess.run([bpfmux, "trace", "--list", pattern], capture_output=True, text=True)
    check(p.returncode == 0, f"bpfmux trace --list {pattern} exits 0 (got {p.returncode})")
    names = p.stdout.split()
    check(len(names) >= n, f"--list {pattern}: {len(names)} functions (want >= {n})")
    return names[:n]


def t_refused(bpfmux, trigger, engine):
    good = ["__x64_sys_getpgid", "__x64_sys_getpriority"]
    good += [n for n in listed(bpfmux, "vfs_*", 20) if n not in good]
    # The refused names first: more of them than attach before them.
    names = [NOTRACE, DENIED, *good]
    _, s = traced(bpfmux, trigger, engine, [], names, f"getpgid {GETPGID} getpriority {GETPRIORITY}")
    if not s:
        return
    check_engine(bpfmux, engine, s)
    check(s["functions_attached"] == len(good),
          f"{s['functions_attached']} functions attached (want {len(good)})")
    skipped = {k["function"]: k["reason"] for k in s.get("skipped", [])}
    check(set(skipped) == {NOTRACE, DENIED}, f"skipped {skipped} (want {NOTRACE}, {DENIED})")
    check("refused at attach" in skipped.get(NOTRACE, ""),
          f"{NOTRACE}: refused by the kernel at attach ({skipped.get(NOTRACE)})")
    for name, want in [("__x64_sys_getpgid", GETPGID), ("__x64_sys_getpriority", GETPRIORITY)]:
        got = calls(s, name).get("calls")
        check(got == want, f"{name}: {got} calls counted (want {want})")


def t_refused_all(bpfmux, trigger, engine):
    p = run(bpfmux, [*engine_args(engine), "--json", "-d", "1", NOTRACE, "vfs_caches_init"])
    check(p.returncode != 0, f"only refused functions: exit {p.returncode} (want != 0)")
    check("refused every function" in p.stderr, "the error says the kernel refused every function")


class Running:
    """bpfmux trace in the background, its stderr collected line by line."""

    def __init__(self, args):
        print(f"  running {' '.join(args)}")
        self.p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # One thread per pipe owns it to the end: nothing else reads or closes them.
        self.err = []
        self.outs = []
        self.readers = [threading.Thread(target=lambda: self.err.extend(self.p.stderr), daemon=True),
                        threading.Thread(target=lambda: self.outs.extend(self.p.stdout), daemon=True)]
        for t in self.readers:
            t.start()
        self.out = ""

    def wait_for(self, cond, timeout=300, interval=0.2):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.p.poll() is None:
            if cond():
                return True
            time.sleep(interval)
        return False

    def stop(self, sig, timeout=120):
        """Sends sig, waits for the exit; returns (exit status, seconds it took)."""
        t0 = time.monotonic()
        self.p.send_signal(sig)
        try:
            self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            check(False, f"bpfmux trace did not stop within {timeout} s of signal {sig}")
        for t in self.readers:
            t.join(10)
            check(not t.is_alive(), "bpfmux trace's output ended with it")
        self.out = "".join(self.outs)
        for line in self.err:
            print(f"  stderr: {line.rstrip()}")
        return self.p.returncode, time.monotonic() - t0

    def stderr(self):
        return "".join(self.err)


def t_sigint(bpfmux, trigger, engine, *patterns):
    """SIGINT in the middle of a long attach (fentry-each: a program per function).

    The engine loads every program before it creates the links, so counting links races
    with a burst; the signal goes right after bpfmux announces the function set instead,
    with patterns wide enough that the attach takes a while (hundreds of links per second
    under TCG)."""
    r = Running([bpfmux, "trace", *engine_args(engine), "--json", "-d", "30", *patterns])
    announced = r.wait_for(lambda: "functions with engine" in r.stderr(), interval=0.02)
    time.sleep(0.1)
    under_way = announced and "bpfmux trace: attached" not in r.stderr()
    rc, took = r.stop(signal.SIGINT)
    check(under_way, "attach under way when interrupted")
    err = r.stderr()
    check(rc == 128 + signal.SIGINT,
          f"exit status {rc} (want {128 + signal.SIGINT}) {took:.1f} s after SIGINT")
    check("while attaching" in err and "detached" in err, "it says the attach was abandoned")
    check("bpfmux trace: attached" not in err, "the attach did not run to its end")
    check_nothing_attached("SIGINT during the attach")


def t_sigterm(bpfmux, trigger, engine, pattern):
    """SIGTERM while tracing: the same stop as the end of --duration."""
    r = Running([bpfmux, "trace", *engine_args(engine), "--json", pattern])
    attached = r.wait_for(lambda: "bpfmux trace: attached" in r.stderr())
    n = len(trace_links())
    check(attached and n >= 1, f"tracing, with {n} links in the kernel")
    rc, _ = r.stop(signal.SIGTERM)
    check(rc == 0, f"exit status {rc} after SIGTERM while tracing (want 0)")
    try:
        _, s = parse(r.out)
    except json.JSONDecodeError as e:
        s = None
        check(False, f"output is JSON lines ({e})")
    check(s is not None and s["detach_ms"] > 0, "a summary with the detach time ends the output")
    check_nothing_attached("SIGTERM while tracing")


ENABLED = "/sys/kernel/tracing/enabled_functions"
# Called many times by the kernel's text patching while a set is attached or detached
# (sorting the batch of patch sites), not otherwise: counting must start after the
# attach and stop before the detach. (is_endbr is no such marker: fprobe calls it on
# every kprobe.multi hit.)
PATCHING = ["change_cmp"]


def check_nothing_enabled(what):
    with open(ENABLED) as f:
        left = [line for line in f if line.strip()]
    check(not left, f"enabled_functions empty after {what} ({len(left)} left: {left[:2]})")


def star_selection(bpfmux, extra=()):
    """The '*' selection: (its names, the BTF objects it spans: 'vmlinux' or modules)."""
    p = subprocess.run([bpfmux, "trace", "--list", *extra, "*"], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"bpfmux trace --list '*' failed: {p.stderr.strip()}")
    names = [line for line in p.stdout.splitlines() if line]
    return set(names), {n.split(":", 1)[0] if ":" in n else "vmlinux" for n in names}


def t_star(bpfmux, trigger, engine, mode="count"):
    if mode == "record":
        return t_star_record(bpfmux, trigger, engine)
    mode_args = {"count": [], "errors": ["--errors"]}[mode]
    selected, objects = star_selection(bpfmux, [*engine_args(engine), *mode_args])
    with open("/tmp/star.err", "w+") as err:
        args = [bpfmux, "trace", *engine_args(engine), *mode_args, "--json", "-v", "-d", "1",
                "*"]
        print(f"  running {' '.join(args)} 2>/tmp/star.err")
        t0 = time.monotonic()
        p = subprocess.run(args, stdout=subprocess.PIPE, stderr=err, text=True, timeout=1200)
        took = time.monotonic() - t0
        err.seek(0)
        text = err.read()
    for line in text.splitlines():
        if not line.startswith("    "):  # -v lists dropped functions, indented
            print(f"  stderr: {line}")
    check(p.returncode == 0, f"exit 0 (got {p.returncode}) after {took:.1f} s")
    check_nothing_attached("'*'")
    check_nothing_enabled("'*'")
    if p.returncode != 0:
        return
    check("\r" not in text, "stderr to a file has no carriage returns")
    lines = text.splitlines()
    check(any(re.match(r"bpfmux trace: attached \d+ functions in ", l) for l in lines),
          "the 'attached' line is a whole line of its own")
    _, s = parse(p.stdout)
    want = len(objects) if engine in ("global", "tracing-multi") else 1
    check(s["links"] == want, f"{s['links']} links (want {want}: BTF objects {sorted(objects)})")
    refused = [w for w in s["skipped"] if "refused at attach" in w["reason"]]
    check(not refused, f"the selection predicted every refusal ({len(refused)} refused at "
          f"attach: {refused[:3]})")
    b = s["attach_breakdown"]
    check(b["refused_tries"] == 0 and b["links"] == s["links"],
          f"breakdown: {b['links']} links, {b['refused_tries']} refused tries")
    if mode != "count":
        return
    n = {f["name"]: f["calls"] for f in s["functions"]}
    for name in PATCHING:
        if name in selected:
            check(n.get(name, 0) == 0, f"{name}: {n.get(name, 0)} calls counted (want 0: only the attach "
                  "and detach call it)")


def t_star_self(bpfmux, trigger, engine):
    """'*' --errors for 5 s under a syscall loop, with the tracer's own path left out (the
    default) and kept (--keep-self-path): left out, the -v notes name what and why (the hash
    map lookup the errors program calls directly among them), none of it is attached, and
    the recursion guard turns away at least 10 times fewer calls than with it kept."""
    runs = {}
    for mode, extra in (("keep", ["--keep-self-path"]), ("default", [])):
        loop = subprocess.Popen(["sh", "-c", f"while :; do {trigger} getpgid 50 close-bad 2; done"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            args = [bpfmux, "trace", *engine_args(engine), "--errors", *extra, "--json", "-vv",
                    "-d", "5", "*"]
            print(f"  running {' '.join(args)}")
            p = subprocess.run(args, capture_output=True, text=True, timeout=1200)
        finally:
            loop.kill()
            loop.wait()
        check(p.returncode == 0, f"{mode}: exit 0 (got {p.returncode}: {p.stderr[-300:]})")
        check_nothing_attached(f"'*' ({mode})")
        if p.returncode != 0:
            return
        _, s = parse(p.stdout)
        misses = s["lost"]["recursion_misses"]
        calls = sum(f.get("calls", 0) for f in s["functions"])
        print(f"  {mode}: {s['functions_attached']} attached, {calls} calls counted, "
              f"{misses} turned away by the recursion guard")
        runs[mode] = (s, misses, p.stderr)
    s, misses, err = runs["default"]
    m = re.search(r"tracer's own path: (\d+) functions .*?, (\d+) glob matches left out", err)
    check(m and int(m.group(2)) > 0, f"the notes say what was left out ({m and m.group(0)})")
    left = set(re.findall(r"left out (\S+): run by the tracer's own path", err))
    check("__htab_map_lookup_elem" in left, f"__htab_map_lookup_elem is left out "
          f"({len(left)} named)")
    attached = {f["name"] for f in s["functions"]}
    both = sorted(left & attached)
    check(not both, f"nothing left out is attached ({both[:5]})")
    keep = runs["keep"][1]
    check(misses * 10 <= keep, f"recursion guard: {misses} calls turned away with the path left "
          f"out, {keep} with it kept (want at least 10 times fewer)")


def t_star_record(bpfmux, trigger, engine):
    """'*' with --errors --record-last 3 --record-on EBADF --record-out FILE --json, left on:
    3 closes of a bad descriptor by the trigger make dumps (after EBADF; the first holds the
    trigger's chain through __x64_sys_close -EBADF), SIGUSR1 one more, SIGTERM the exit dump, which
    is also the summary's `recorded`; every dump within its bounds (at most 3 chains per
    errno, its counts adding up); nothing left attached."""
    out = "/tmp/star-record.json"
    if os.path.exists(out):
        os.remove(out)
    r = Running([bpfmux, "trace", *engine_args(engine), "--errors", "--record-last",
                 str(RECORD_LAST), "--record-on", "EBADF", "--record-out", out, "--json", "*"])
    t0 = time.monotonic()
    announced = r.wait_for(lambda: RECORDING in r.stderr(), timeout=600)
    check(announced, f"attached and recording after {time.monotonic() - t0:.1f} s")

    def dumps():
        try:
            with open(out) as f:
                return recorded_lines(f.read().splitlines())
        except FileNotFoundError:
            return []

    if announced:
        # On '*' the recursion guard turns away a share of all calls (the run's summary
        # counts them), sometimes all of a round's: up to 8 rounds of 3 failing closes.
        # A CI run lost all 3 calls of its one round (2026-11-28).
        for rounds in range(1, 9):
            p = subprocess.run([trigger, "close-bad", "3"], capture_output=True, text=True)
            check(p.returncode == 0,
                  f"trigger close-bad 3 exits 0 (got {p.returncode}: {p.stderr})")
            got = r.wait_for(lambda: any(d.get("trigger") == "error" for d in dumps()),
                             timeout=10 if rounds < 8 else 30)
            if got:
                break
        check(got, f"a dump after EBADF, after {rounds} round(s) of close-bad 3")
        r.p.send_signal(signal.SIGUSR1)
        got = r.wait_for(lambda: any(d.get("trigger") == "request" for d in dumps()), timeout=30)
        check(got, "a dump within 30 s of SIGUSR1")
    rc, took = r.stop(signal.SIGTERM, timeout=300)
    check(rc == 0, f"exit 0 after SIGTERM (got {rc}, {took:.1f} s after it)")
    check_nothing_attached("'*' recording")
    check_nothing_enabled("'*' recording")
    if not announced or rc != 0:
        return
    ds = dumps()
    whys = [d.get("trigger") for d in ds]
    print(f"  dumps: {whys}")
    check(whys.count("request") == 1 and whys[-1:] == ["exit"] and "error" in whys,
          f"dumps after EBADF, one on SIGUSR1, one at exit last ({whys})")
    for i, d in enumerate(ds):
        groups = d.get("groups", [])
        sizes = [(g.get("key"), len(g.get("chains", [])), g.get("seen")) for g in groups]
        held = sum(n for _, n, _ in sizes)
        check(all(0 < n <= RECORD_LAST and seen >= n for _, n, seen in sizes) and
              d.get("chains_held") == held and held <= RECORD_LAST * len(groups) and
              d.get("chains_seen", 0) >= held and (d.get("bytes_held", 0) > 0) == (held > 0),
              f"dump {i + 1} ({d.get('trigger')}): within bounds: {d.get('chains_held')} held "
              f"of {d.get('chains_seen')} seen, {d.get('bytes_held')} bytes, groups {sizes}")
        if d.get("trigger") == "error":
            check(d.get("trigger_error") == "EBADF", f"dump {i + 1}: after "
                  f"{d.get('trigger_error')} (want EBADF)")

    def trigger_close(d):
        return any(c.get("comm") == "trigger" and
                   any(k.get("function") == "__x64_sys_close" and k.get("error") == "EBADF"
                       for k in c.get("calls", []))
                   for g in d.get("groups", []) for c in g.get("chains", []))

    # The chain that made a dump is in it (the newest of its group); a later dump may
    # hold it no more: on '*' other NULL chains of the kernel push it out of the last 3.
    after = [d for d in ds if d.get("trigger") == "error"]
    check(any(trigger_close(d) for d in after),
          "a dump after EBADF holds the trigger's chain through __x64_sys_close -EBADF")
    try:
        _, s = parse(r.out)
    except json.JSONDecodeError as e:
        check(False, f"output is JSON lines ({e})")
        return
    check(s is not None and ds and s.get("recorded") == ds[-1],
          "the summary's `recorded` is the exit dump written to the file")
    check(s is not None and s.get("functions_attached", 0) > 10000,
          f"{s and s.get('functions_attached')} functions attached")


def t_sleeper(bpfmux, trigger, engine):
    """A traced call that sleeps through the run and after it keeps no program loaded.

    What a kernel thread's main loop does to a traced function (its call never returns),
    made deterministic: a process enters clock_nanosleep once everything is attached and
    sleeps on after bpfmux trace --latency has exited. Every program of the run must be
    gone within 10 s while it still sleeps."""
    args = [bpfmux, "trace", *engine_args(engine), "--latency", "-d", "4",
            "__x64_sys_clock_nanosleep"]
    print(f"  running {' '.join(args)} 2>/tmp/sleeper.err")
    with open("/tmp/sleeper.err", "w+") as err:
        p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=err)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and p.poll() is None:
            with open("/tmp/sleeper.err") as f:
                if "bpfmux trace: attached" in f.read():
                    break
            time.sleep(0.05)
        sleeper = subprocess.Popen(["sleep", "600"])

        def sleeping():
            try:
                with open(f"/proc/{sleeper.pid}/wchan") as f:
                    return "nanosleep" in f.read()
            except OSError:
                return False
        for _ in range(100):
            if sleeping():
                break
            time.sleep(0.02)
        entered = sleeping()
        try:
            rc = p.wait(timeout=120)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = p.wait()
        with open("/tmp/sleeper.err") as f:
            for line in f.read().splitlines():
                print(f"  stderr: {line}")
    try:
        check(entered, "a process sleeps in clock_nanosleep while everything is attached")
        check(rc == 0, f"exit 0 (got {rc})")
        check_nothing_attached("the run")
        left = still_there(trace_programs, 10)
        check(not left and sleeping(), f"no bpfmux trace program left 10 s after the run while "
              f"the traced call still sleeps ({len(left)} left: {left[:3]}; asleep: {sleeping()})")
    finally:
        sleeper.kill()
        sleeper.wait()


def t_fds(bpfmux, trigger, engine):
    """The -c command starts with its standard descriptors only: none of bpfmux's.

    The command is forked before anything is attached and inherits bpfmux's descriptors
    until it execs; every one of them is close-on-exec, so execve closes them (which is
    why its execve makes more fput calls than a command started otherwise)."""
    p = run(bpfmux, [*engine_args(engine), "--json", "-c", "ls -1 /proc/self/fd",
                     "__x64_sys_getpgid"])
    check(p.returncode == 0, f"exit 0 (got {p.returncode})")
    fds = sorted(int(line) for line in p.stdout.splitlines() if line.strip().isdigit())
    # 3: the directory ls reads /proc/self/fd through
    check(fds == [0, 1, 2, 3], f"the command's descriptors: {fds} (want [0, 1, 2, 3])")


def t_own_opens(bpfmux, trigger, engine):
    """bpfmux opens no file while the -c command runs (strace -f), but the command's own
    /proc/PID/maps, stat and map_files to normalize its user stacks as they are captured.

    A traced openat path meets every open of the machine: one of bpfmux's own made while a
    program of the run is preempted on that CPU is turned away by the kernel's recursion
    guard and counted as a skipped call. The session opens what it reads as it goes
    (/proc/kallsyms, read on a thread of its own for --errors and --stacks) before the
    command starts."""
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "strace.log")
        args = ["strace", "-f", "-tt", "-o", log, "-e", "trace=open,openat,openat2,creat,execve",
                bpfmux, "trace", *engine_args(engine), "--errors", "--stacks", "-c",
                f"{trigger} openat-missing {OPENAT_MISSING}", *OPENAT_CHAIN]
        print(f"  running {' '.join(args)}")
        p = subprocess.run(args, capture_output=True, text=True, timeout=600)
        for line in p.stderr.splitlines():
            print(f"  stderr: {line}")
        check_nothing_attached(f"bpfmux trace under strace exited {p.returncode}")
        check(p.returncode == 0, f"bpfmux trace under strace exits 0 (got {p.returncode})")
        with open(log) as f:
            lines = f.read().splitlines()
    cmd, start, end = None, None, None
    for i, line in enumerate(lines):
        pid = line.split(maxsplit=1)[0]
        # (strace splits a call another thread interrupts: "<unfinished ...>", then
        # "<... execve resumed>) = 0")
        if cmd is None and f'execve("{trigger}"' in line:
            cmd, start = pid, i
        elif cmd is not None and pid == cmd and "+++ exited" in line:
            end = i
            break
    check(cmd is not None and end is not None,
          f"strace saw the command start (line {start}) and exit (line {end})")
    if cmd is None or end is None:
        return
    opens = [line for line in lines[start:end]
             if line.split(maxsplit=1)[0] != cmd and re.search(r"\bopen(at2?)?\(|\bcreat\(", line)]
    # Normalizing the command's user stacks as they are captured reads its /proc files
    # while it runs: that cannot be done earlier (its mappings are those after its exec).
    normalizing = re.compile(rf'"/proc/{cmd}/(maps|stat|map_files/[0-9a-f-]+)"')
    own = [line for line in opens if not normalizing.search(line)]
    for line in opens:
        print(f"  bpfmux's open while the command ran: {line}")
    check(not own, f"bpfmux opened {len(own)} files while the command ran other than the "
          f"command's /proc/{cmd}/maps, stat and map_files (want 0)")


def t_star_sigint(bpfmux, trigger, engine, secs):
    """SIGINT SECS seconds into the attach of '*'; stderr goes to a file (whole lines)."""
    args = [bpfmux, "trace", *engine_args(engine), "--json", "-d", "30", "*"]
    print(f"  running {' '.join(args)} 2>/tmp/star-sigint.err")
    with open("/tmp/star-sigint.err", "w+") as err:
        p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=err)

        def text():
            with open("/tmp/star-sigint.err") as f:
                return f.read()

        def wait_for(cond, timeout):
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and p.poll() is None:
                if cond():
                    return True
                time.sleep(0.02)
            return cond()

        announced = wait_for(lambda: "functions with engine" in text(), 120)
        time.sleep(float(secs))
        under_way = announced and "bpfmux trace: attached" not in text()
        t0 = time.monotonic()
        p.send_signal(signal.SIGINT)
        said = wait_for(lambda: "stopping" in text(), 5)
        said_after = time.monotonic() - t0
        try:
            rc = p.wait(timeout=600)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = p.wait()
            check(False, "bpfmux trace did not stop within 600 s of SIGINT")
        took = time.monotonic() - t0
    out = text()
    for line in out.splitlines():
        print(f"  stderr: {line}")
    check(under_way, f"attach under way {secs} s in")
    check(said and said_after <= 1.0, f"a message {said_after:.2f} s after SIGINT (want <= 1 s)")
    check(rc == 128 + signal.SIGINT, f"exit status {rc} (want 130), {took:.1f} s after SIGINT")
    check("while attaching" in out and "detached" in out, "it says the attach was abandoned")
    check("\r" not in out, "stderr to a file has no carriage returns")
    # Whatever was attached is detached before the process ends: nothing to wait for.
    left = trace_links()
    check(not left, f"no link left the moment bpfmux exited ({len(left)} left)")
    check_nothing_enabled("SIGINT during the '*' attach")


def main():
    global links_tool
    bpfmux, trigger, what, *rest = sys.argv[1:]
    if what == "host-debuginfod":
        host_debuginfod(bpfmux, *rest)
        return 1 if failures else 0
    links_tool = os.path.join(os.path.dirname(trigger), "trace-links")
    check_nothing_attached("earlier checks (before this one)")
    {"count": t_count, "glob": t_glob, "args": t_args, "unknown": t_unknown, "own": t_own,
     "not-found": t_not_found, "errors": t_errors, "map-reads": t_map_reads, "nulls": t_nulls, "graph": t_graph, "inject": t_inject,
     "exited-stacks": t_exited_stacks, "kernel-stacks": t_kernel_stacks, "exports": t_exports,
     "inject-unavailable": t_inject_unavailable, "inject-no-list": t_inject_no_list,
     "unavailable": t_unavailable, "refused": t_refused, "refused-all": t_refused_all,
     "sigint": t_sigint, "sigterm": t_sigterm, "star": t_star, "sleeper": t_sleeper,
     "fds": t_fds, "own-opens": t_own_opens, "star-sigint": t_star_sigint, "star-self": t_star_self, "filter": t_filter,
     "filter-strings": t_filter_strings, "args-types": t_args_types,
     "record": t_record, "recording": t_recording, "debuginfod": t_debuginfod, "scope-cgroup": t_scope_cgroup,
     "scope-pidns": t_scope_pidns}[what](bpfmux, trigger, *rest)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
