#!/usr/bin/python3
"""Runs in one guest boot under `vm/run --insn`: bench/bidcost/bidcost untraced, and under
`bpfmux trace --stacks --comm bidcost __x64_sys_getpgid` with each bpfmux binary given.

usage: guest.py BIDCOST OUT.json CHILDREN NAME=BPFMUX...

Per mode, the median over the children of the first and of the second getpgid call's
instructions (each child's first stack, and a repeat of it), and first - second. Writes
OUT.json: {"uname", "children", "modes": {mode: {"first": [...], "second": [...],
"first_median", "second_median", "extra_median", "second_profile": {symbol: count} of a
child whose second call counted the most frequent count}}}.
"""
import json
import os
import signal
import statistics
import subprocess
import sys
import time

FUNC = "__x64_sys_getpgid"


def counts(bidcost, children):
    p = subprocess.run([bidcost, str(children)], capture_output=True, text=True, timeout=1800)
    if p.returncode != 0:
        raise RuntimeError(f"bidcost exited {p.returncode}: {p.stderr.strip()}")
    first, second, prof = [], [], {}
    for line in p.stdout.splitlines():
        f = line.split()
        if f[0] == "prof":
            prof.setdefault(int(f[1]), {})[" ".join(f[2:-1])] = int(f[-1])
            continue
        first.append(int(f[3]))
        second.append(int(f[5]))
    # The profile of a child whose second call counted the most frequent count.
    mode = statistics.mode(second)
    typical = next((prof.get(i, {}) for i, s in enumerate(second) if s == mode), {})
    return first, second, typical


def traced(bpfmux, bidcost, children):
    err_path = "/tmp/bidcost.err"
    with open(err_path, "w+") as err:
        t = subprocess.Popen([bpfmux, "trace", "--json", "--stacks", "--comm", "bidcost", FUNC],
                             stdout=subprocess.PIPE, stderr=err, text=True)
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and t.poll() is None:
            with open(err_path) as f:
                if "bpfmux trace: attached" in f.read():
                    break
            time.sleep(0.05)
        if t.poll() is not None:
            with open(err_path) as f:
                raise RuntimeError(f"bpfmux trace exited {t.returncode}: {f.read().strip()}")
        try:
            result = counts(bidcost, children)
        finally:
            t.send_signal(signal.SIGTERM)
            out, _ = t.communicate(timeout=600)
    summary = [json.loads(line) for line in out.splitlines() if line.startswith("{")][-1]
    calls = sum(f["calls"] for f in summary["functions"] if f["name"] == FUNC)
    if calls != 2 * children:
        raise RuntimeError(f"{calls} getpgid calls counted (want {2 * children})")
    return result, summary.get("engine")


def main():
    bidcost, out, children, *tools = sys.argv[1:]
    children = int(children)
    res = {"uname": os.uname().release, "children": children, "modes": {}}
    runs = [("untraced", None)] + [tuple(t.split("=", 1)) for t in tools]
    for name, tool in runs:
        engine = None
        if tool is None:
            first, second, prof = counts(bidcost, children)
        else:
            (first, second, prof), engine = traced(tool, bidcost, children)
        m = {"binary": tool, "engine": engine, "first": first, "second": second,
             "first_median": statistics.median(first),
             "second_median": statistics.median(second),
             "extra_median": statistics.median(a - b for a, b in zip(first, second)),
             "second_profile": prof}
        res["modes"][name] = m
        print(f"bidcost: {name}: first {m['first_median']}, second {m['second_median']}, "
              f"first - second {m['extra_median']} (median of {children})", flush=True)
    with open(out, "w") as f:
        json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
