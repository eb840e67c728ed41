#!/usr/bin/python3
"""Runs in the guest: the numbers `make demo` shows must add up.

usage: check.py BPFMUX

Runs the demo's first scene (demo.sh BPFMUX --json: the same bpfmux trace command, with
JSON lines instead of the live table; both are made from the same rows) and checks every
interval object: no function's calls in an interval (what the table's CALLS/s and CALLS
columns show) exceed its total, a total never decreases and grows by exactly the
interval's calls, rows come busiest first, and the summary's totals are at least the last
interval's. Prints "ok - ..." / "FAIL - ..." lines; exit status 0 when all hold.
"""
import json
import os
import subprocess
import sys

# The scene's -d, and what the workload must show within it.
MIN_INTERVALS = 4
MIN_FUNCS = 300
failures = 0


def check(ok, msg):
    global failures
    print(f"{'ok' if ok else 'FAIL'} - {msg}", flush=True)
    failures += not ok


def main():
    bpfmux = sys.argv[1]
    demo = os.path.join(os.path.dirname(os.path.abspath(__file__)), "demo.sh")
    p = subprocess.run([demo, bpfmux, "--json"], capture_output=True, text=True, timeout=900)
    for line in p.stderr.splitlines():
        print(f"  stderr: {line}")
    check(p.returncode == 0, f"demo.sh --json exits 0 (got {p.returncode})")
    try:
        objs = [json.loads(line) for line in p.stdout.splitlines() if line.strip()]
    except json.JSONDecodeError as e:
        check(False, f"output is JSON lines ({e})")
        return 1
    intervals = [o for o in objs if o.get("type") == "interval"]
    summary = ([o for o in objs if o.get("type") == "summary"] or [None])[-1]
    check(summary is not None, "a summary ends the output")
    check(len(intervals) >= MIN_INTERVALS, f"{len(intervals)} intervals (want >= {MIN_INTERVALS})")
    if summary is None:
        return 1
    check(summary["engine"] == "global", f"engine {summary['engine']} (want global)")
    check(summary["functions_attached"] >= MIN_FUNCS,
          f"{summary['functions_attached']} functions attached (want >= {MIN_FUNCS})")

    totals = {}  # function -> its total as of the latest interval that listed it
    bad = []  # (interval, function, what): the first few are printed
    elapsed = 0.0
    for k, iv in enumerate(intervals, 1):
        if not (iv["interval_s"] > 0 and iv["elapsed_s"] > elapsed):
            bad.append((k, "-", f"interval_s {iv['interval_s']}, elapsed_s {iv['elapsed_s']} "
                        f"after {elapsed}"))
        elapsed = iv["elapsed_s"]
        rows = iv["functions"]
        keys = [(-r["calls"], r["name"]) for r in rows]
        if keys != sorted(keys):
            bad.append((k, "-", "rows not busiest first"))
        for r in rows:
            name, calls, total = r["name"], r["calls"], r["total"]
            before = totals.get(name, 0)
            if not 0 < calls <= total:
                bad.append((k, name, f"{calls} calls in the interval, {total} in total "
                            f"({calls / iv['interval_s']:.0f}/s)"))
            if total < before:
                bad.append((k, name, f"total went down: {before} -> {total}"))
            elif total != before + calls:
                bad.append((k, name, f"total {before} + {calls} calls != new total {total}"))
            totals[name] = total
    n_rows = sum(len(iv["functions"]) for iv in intervals)
    check(not bad, f"{n_rows} interval rows: calls <= total, totals grow by exactly the "
          f"interval's calls ({len(bad)} wrong)")
    for k, name, what in bad[:10]:
        print(f"  interval {k}: {name}: {what}")
    busy = sorted(totals.items(), key=lambda kv: -kv[1])
    check(len(totals) >= 20, f"{len(totals)} functions called during the scene (want >= 20; "
          f"busiest {busy[:3]})")
    final = {f["name"]: f["calls"] for f in summary["functions"]}
    behind = [(n, t, final.get(n)) for n, t in totals.items() if final.get(n, 0) < t]
    check(not behind, f"summary totals >= the last interval's ({behind[:3]})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
