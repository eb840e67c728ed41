#!/usr/bin/python3
"""Runs in one guest boot: attach + detach time of `bpfmux trace` per engine and size.

usage: guest.py BPFMUX OUT.jsonl --sizes 10,100,all --engines global,tracing-multi,...
                [--trials N] [--trials-from N] [--fentry-cap N] [--funcs FILE]

The function set is what `bpfmux trace --list '*'` selects on this kernel (every
traceable function; kept in --funcs FILE so later boots of the same kernel reuse it).
Size N < all is an evenly spaced sample of it, so no size is one corner of the kernel.
Every run is `bpfmux trace --engine E --json -d 0 -f LIST`: the functions go in as
exact names, the engine attaches them and detaches right away, and its JSON summary
gives attach_ms (loading the program(s) and creating the links) and detach_ms.
Within a trial the engines run one after another at each size, so a change of host
load hits every engine of a row alike.

Each line of OUT.jsonl is one run: {"engine", "size", "want", "trial", "status", ...};
status "ok" with the summary's numbers, "capped" (fentry-each above --fentry-cap: not
run, never extrapolated), "not available on this kernel" (with bpfmux's reason),
"did not finish" (stopped at --timeout: the attach time if the attach had finished,
else attach_at_least_ms from bpfmux's last progress line), or "failed" (with the error).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time


def log(msg):
    print(f"trace-attach: {msg}", flush=True)


def function_set(bpfmux, path):
    if os.path.exists(path) and os.path.getsize(path) > 0:
        with open(path) as f:
            names = f.read().split()
        log(f"{len(names)} functions from {path} (listed in an earlier boot)")
        return names
    t0 = time.monotonic()
    p = subprocess.run([bpfmux, "trace", "--list", "*"], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"trace-attach: bpfmux trace --list '*' failed: {p.stderr.strip()}")
    names = p.stdout.split()
    with open(path, "w") as f:
        f.write(p.stdout)
    log(f"{len(names)} traceable functions listed in {time.monotonic() - t0:.1f} s "
        f"({p.stderr.strip()})")
    return names


def sample(names, n):
    """n names spread evenly over the list (all of them for n >= len)."""
    if n >= len(names):
        return list(names)
    return [names[(2 * i + 1) * len(names) // (2 * n)] for i in range(n)]


def run_one(bpfmux, engine, names, list_path, timeout):
    """One attach + detach. Returns (row, proc): proc is a run stopped at its timeout
    (SIGTERM: bpfmux abandons the attach and detaches what it attached), still to be
    reaped by the caller after the row is written."""
    with open(list_path, "w") as f:
        f.write("\n".join(names) + "\n")
    args = [bpfmux, "trace", "--engine", engine, "--json", "-d", "0", "-f", list_path]
    t0 = time.monotonic()
    # files, not pipes: on a timeout, stderr's progress lines say how far it got
    with open(list_path + ".out", "w+") as outf, open(list_path + ".err", "w+") as errf:
        p = subprocess.Popen(args, stdout=outf, stderr=errf, text=True)
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.terminate()
            errf.seek(0)
            return unfinished_row(errf.read(), len(names), timeout), p
        wall = time.monotonic() - t0
        outf.seek(0)
        errf.seek(0)
        stdout, err = outf.read(), errf.read().strip()
    if p.returncode != 0:
        if f"engine {engine} is not available" in err:
            why = err.split("not available on this kernel:", 1)[-1].strip()
            return {"status": "not available on this kernel", "error": why}, None
        return {"status": "failed",
                "error": err.splitlines()[-1] if err else f"exit {p.returncode}"}, None
    summary = None
    for line in stdout.splitlines():
        try:
            o = json.loads(line)
        except ValueError:
            continue
        if o.get("type") == "summary":
            summary = o
    if summary is None:
        return {"status": "failed", "error": "no JSON summary in the output"}, None
    return {
        "status": "ok",
        "attached": summary["functions_attached"],
        "skipped": len(summary.get("skipped", [])),
        "links": summary["links"],
        "select_ms": summary["select_ms"],
        "prepare_ms": summary["prepare_ms"],
        "attach_ms": summary["attach_ms"],
        "detach_ms": summary["detach_ms"],
        "wall_s": round(wall, 3),
        # where the attach time went (bpfmux since issue 26; absent before)
        "breakdown": summary.get("attach_breakdown"),
    }, None


ATTACHED = re.compile(r"attached (\d+) functions in ([\d.]+) ms")
ATTACHING = re.compile(r"attaching: (\d+)/(\d+) functions, ([\d.]+) s after the first")


def unfinished_row(stderr, want, timeout):
    """A run stopped at its timeout, from bpfmux's stderr: the attach time if the
    attach had finished, else a lower bound on it (the last progress line's time)."""
    row = {"status": "did not finish", "ran_s": timeout}
    done = ATTACHED.findall(stderr)
    if done:
        row["attached"], row["attach_ms"] = int(done[-1][0]), float(done[-1][1])
        row["error"] = f"detach did not finish within the run's {timeout} s"
        return row
    steps = ATTACHING.findall(stderr)
    if steps:
        k, _, secs = steps[-1]
        row["attached_by_then"], row["attach_at_least_ms"] = int(k), float(secs) * 1e3
        row["error"] = (f"attach did not finish within the run's {timeout} s: "
                        f"{k} of {want} attached, {float(secs):.0f} s after the first")
    else:
        row["error"] = f"did not finish within the run's {timeout} s (no progress line)"
    return row


def reap(p, grace):
    """Wait for a stopped run to detach and exit; kill it if that takes too long."""
    try:
        p.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bpfmux")
    ap.add_argument("out")
    ap.add_argument("--sizes", required=True)
    ap.add_argument("--engines", required=True)
    ap.add_argument("--trials", type=int, default=1, help="runs per row")
    ap.add_argument("--trials-from", type=int, default=1000,
                    help="sizes from this one up run once")
    ap.add_argument("--fentry-cap", type=int, default=1000)
    ap.add_argument("--funcs", default="/tmp/trace-attach-funcs.txt")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per run")
    ap.add_argument("--grace", type=int, default=600,
                    help="seconds a run stopped at its timeout has to detach and exit")
    a = ap.parse_args()

    names = function_set(a.bpfmux, a.funcs)
    total = len(names)
    sizes = [total if s == "all" else min(int(s), total) for s in a.sizes.split(",")]
    engines = a.engines.split(",")
    unavailable = {}
    list_path = "/tmp/trace-attach-list.txt"
    rc = 0
    with open(a.out, "a") as out:
        def emit(row):
            out.write(json.dumps(row) + "\n")
            out.flush()
            os.fsync(out.fileno())

        emit({"type": "boot", "uname": os.uname().release, "funcs_total": total,
              "sizes": sizes, "engines": engines, "fentry_cap": a.fentry_cap,
              "guest_loadavg": open("/proc/loadavg").read().split()[:3]})
        for size, label in zip(sizes, a.sizes.split(",")):
            trials = a.trials if size < a.trials_from else 1
            for trial in range(trials):
                for engine in engines:
                    base = {"type": "run", "engine": engine, "size": label, "want": size,
                            "trial": trial}
                    if engine in unavailable:
                        emit({**base, **unavailable[engine]})
                        continue
                    if engine == "fentry-each" and size > a.fentry_cap:
                        emit({**base, "status": "capped",
                              "error": f"one program per function is capped at {a.fentry_cap}"})
                        continue
                    r, stopped = run_one(a.bpfmux, engine, sample(names, size), list_path,
                                         a.timeout)
                    if r["status"] == "not available on this kernel":
                        unavailable[engine] = r
                    if r["status"] == "failed":
                        rc = 1
                    emit({**base, **r})
                    if stopped is not None:
                        log(f"{engine} {label} ({size}) #{trial}: {r['error']}; detaching")
                        reap(stopped, a.grace)
                        continue
                    if r["status"] == "ok":
                        log(f"{engine} {label} ({size}) #{trial}: attach {r['attach_ms']:.1f} ms, "
                            f"detach {r['detach_ms']:.1f} ms, {r['attached']} attached, "
                            f"{r['links']} links")
                    else:
                        log(f"{engine} {label} ({size}) #{trial}: {r['status']}: {r.get('error')}")
        emit({"type": "end", "guest_loadavg": open("/proc/loadavg").read().split()[:3]})
    return rc


if __name__ == "__main__":
    sys.exit(main())
