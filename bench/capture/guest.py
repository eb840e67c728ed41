#!/usr/bin/python3
"""Runs in one guest boot: what normalizing user stacks as they are captured costs.

usage: guest.py BPFMUX WORKLOAD OUT.jsonl [--engine E] [--rounds N] [--children K]
                [--calls N] [--lingers MS,MS]

WORKLOAD is build/guest/exited-stack: `exited-stack spawn K N LINGER` forks and execs K
children one after another; each makes N getpgid calls through main > exited_a >
exited_b and one through main > exited_c > exited_b (two user stacks in the same
mappings), sleeps LINGER ms and exits. Per round and linger, three runs of it, in an
order that rotates with the round:
  baseline  nothing traced
  on        under `bpfmux trace --stacks --comm exited-stack __x64_sys_getpgid`: user
            stacks normalized as they are captured (the default)
  off       the same with --stacks-at-end: normalized at the end only
  cmp       (with --compare OTHER) as `on`, with another bpfmux binary: e.g. one built
            before a change to the trace programs, to show what the change costs them
With kernel.bpf_stats_enabled set for the boot, traced runs also keep the trace
programs' run time and run count (their fdinfo, read just before the tracer stops):
the kernel side of each stack event.
Each line of OUT.jsonl is one run: the workload's wall time; for on and off the
tracer's CPU time (user + system, /proc/PID/stat) from just before the workload to
0.3 s after it (its last scan), the stack events (getpgid calls counted) and the
summary's user_stacks (stacks, addresses asked of the kernel, cache hits, failures,
scans, capture_ms). report.py turns them into costs per stack event.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import time

FUNC = "__x64_sys_getpgid"
TICK = os.sysconf("SC_CLK_TCK")


def log(msg):
    print(f"capture: {msg}", flush=True)


def cpu_s(pid):
    """User + system CPU time of a process, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def prog_stats(pid):
    """(run_time_ns, run_cnt) summed over the BPF programs process pid holds."""
    ns = cnt = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                info = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
        except OSError:
            continue
        if "prog_type" in info and "run_cnt" in info:
            ns += int(info["run_time_ns"])
            cnt += int(info["run_cnt"])
    return ns, cnt


def workload(prog, children, calls, linger):
    t0 = time.monotonic()
    p = subprocess.run([prog, "spawn", str(children), str(calls), str(linger)])
    if p.returncode != 0:
        raise RuntimeError(f"{prog} spawn exited {p.returncode}")
    return time.monotonic() - t0


def traced(bpfmux, engine, prog, children, calls, linger, at_end):
    args = [bpfmux, "trace", *([] if engine == "auto" else ["--engine", engine]), "--json",
            "--stacks", *(["--stacks-at-end"] if at_end else []), "--comm", "exited-stack", FUNC]
    err_path = "/tmp/capture-bench.err"
    with open(err_path, "w+") as err:
        p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=err, text=True)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and p.poll() is None:
            with open(err_path) as f:
                if "bpfmux trace: attached" in f.read():
                    break
            time.sleep(0.05)
        if p.poll() is not None:
            with open(err_path) as f:
                raise RuntimeError(f"bpfmux trace exited {p.returncode}: {f.read().strip()}")
        cpu0 = cpu_s(p.pid)
        wall = workload(prog, children, calls, linger)
        time.sleep(0.3)
        cpu1 = cpu_s(p.pid)
        run_ns, runs = prog_stats(p.pid)
        p.send_signal(signal.SIGTERM)
        out, _ = p.communicate(timeout=600)
    if p.returncode != 0:
        with open(err_path) as f:
            raise RuntimeError(f"bpfmux trace exited {p.returncode}: {f.read().strip()}")
    objs = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    summary = [o for o in objs if o.get("type") == "summary"][-1]
    events = sum(f["calls"] for f in summary["functions"] if f["name"] == FUNC)
    return {"wall_s": round(wall, 4), "tracer_cpu_s": round(cpu1 - cpu0, 3),
            "stack_events": events, "lost": summary["lost"], "engine": summary["engine"],
            "user_stacks": summary.get("user_stacks"), "prog_run_ns": run_ns,
            "prog_runs": runs}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bpfmux")
    ap.add_argument("workload")
    ap.add_argument("out")
    ap.add_argument("--engine", default="auto")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--children", type=int, default=100)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--lingers", default="0,200",
                    help="ms each child sleeps after its calls, one row set per value")
    ap.add_argument("--compare", metavar="BPFMUX",
                    help="another bpfmux binary, run as `on` (mode cmp)")
    a = ap.parse_args()
    modes = ["baseline", "on", "off"] + (["cmp"] if a.compare else [])
    with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
        f.write("1\n")
    rc = 0
    with open(a.out, "a") as out:
        def emit(row):
            out.write(json.dumps(row) + "\n")
            out.flush()

        emit({"type": "boot", "uname": os.uname().release, "cpus": os.cpu_count(),
              "children": a.children, "calls": a.calls, "rounds": a.rounds,
              "bpfmux": a.bpfmux, "compare": a.compare,
              "guest_loadavg": open("/proc/loadavg").read().split()[:3]})
        for linger in [int(x) for x in a.lingers.split(",")]:
            for r in range(a.rounds):
                n = len(modes)
                for mode in modes[r % n:] + modes[:r % n]:
                    row = {"type": "run", "mode": mode, "linger_ms": linger, "round": r}
                    try:
                        if mode == "baseline":
                            row["wall_s"] = round(workload(a.workload, a.children, a.calls,
                                                           linger), 4)
                        else:
                            tool = a.compare if mode == "cmp" else a.bpfmux
                            row.update(traced(tool, a.engine, a.workload, a.children,
                                              a.calls, linger, mode == "off"))
                        row["status"] = "ok"
                    except (RuntimeError, OSError, ValueError, IndexError, KeyError,
                            subprocess.TimeoutExpired) as e:
                        row.update(status="failed", error=str(e))
                        rc = 1
                    emit(row)
                    log(f"linger {linger} ms, round {r}, {mode}: {row.get('status')} "
                        f"{row.get('wall_s', '')} s")
    return rc


if __name__ == "__main__":
    sys.exit(main())
