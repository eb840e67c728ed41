#!/usr/bin/python3
"""capture.md from the raw runs of guest.py (standard library only).

usage: report.py RAW_DIR OUT.md KERNEL...

RAW_DIR holds KERNEL.jsonl (guest.py's lines) and KERNEL.meta (run.sh's facts) per
kernel. Per kernel and linger, a row per mode with medians over the rounds; "vs
untraced" is the median of each round's ratio to that round's untraced run.
"""
import json
import os
import statistics
import sys


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, nd=1, unit=""):
    return "–" if x is None else f"{x:.{nd}f}{unit}"


def rows_of(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def per_event(num, events):
    return None if num is None or not events else num / events


def table(runs):
    base = {r["round"]: r["wall_s"] for r in runs if r["mode"] == "baseline"}
    out = ["| mode | workload s | vs untraced | tracer CPU ms | tracer CPU µs/event | "
           "capture ms | capture µs/event | stack events | stacks | addresses: kernel / "
           "cache / failed | of the failed, placed by build ID | hit rate | program ns/run |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for mode, label in [("baseline", "untraced"), ("on", "as captured"),
                        ("off", "at the end (--stacks-at-end)"),
                        ("cmp", "as captured, the `--compare` binary")]:
        rs = [r for r in runs if r["mode"] == mode]
        if not rs:
            continue
        wall = median([r["wall_s"] for r in rs])
        ratio = median([r["wall_s"] / base[r["round"]] for r in rs if base.get(r["round"])])
        if mode == "baseline":
            out.append(f"| {label} | {fmt(wall, 3)} | 1.00 | | | | | | | | | | |")
            continue
        cpu = median([r["tracer_cpu_s"] * 1e3 for r in rs])
        cpu_ev = median([per_event(r["tracer_cpu_s"] * 1e6, r["stack_events"]) for r in rs])
        us = [r.get("user_stacks") or {} for r in rs]
        cap = median([u.get("capture_ms") for u in us])
        cap_ev = median([per_event((u.get("capture_ms") or 0) * 1e3, r["stack_events"])
                         for u, r in zip(us, rs)]) if mode in ("on", "cmp") else None
        prog = median([r["prog_run_ns"] / r["prog_runs"] for r in rs if r.get("prog_runs")])
        events = median([r["stack_events"] for r in rs])
        stacks = median([u.get("stacks") for u in us])
        kern = median([u.get("normalized") for u in us])
        hits = median([u.get("cache_hits") for u in us])
        fail = median([u.get("failures") for u in us])
        by_bid = median([u.get("by_build_id") for u in us])
        rate = median([u.get("hit_rate") for u in us])
        out.append(
            f"| {label} | {fmt(wall, 3)} | {fmt(ratio, 2)} | {fmt(cpu, 0)} | {fmt(cpu_ev, 1)} | "
            f"{fmt(cap, 1)} | {fmt(cap_ev, 1)} | {fmt(events, 0)} | {fmt(stacks, 0)} | "
            f"{fmt(kern, 0)} / {fmt(hits, 0)} / {fmt(fail, 0)} | {fmt(by_bid, 0)} | "
            f"{fmt(None if rate is None else rate * 100, 0, ' %')} | {fmt(prog, 0)} |")
    return out


def main():
    raw, out_path, *kernels = sys.argv[1:]
    lines = ["# Capture-time normalization of user stacks (issue 44)", ""]
    meta = os.path.join(raw, "run.meta")
    if os.path.exists(meta):
        lines += [f"- {m.rstrip()}" for m in open(meta) if m.strip()] + [""]
    lines += [
        "Emulated guest (QEMU TCG): compare rows of one kernel, not absolute times. The",
        "workload is `exited-stack spawn K N LINGER` (a fork and an exec per child; each",
        "child makes N + 1 getpgid calls over two user stacks, sleeps LINGER ms, exits),",
        "traced with `bpfmux trace --stacks --comm exited-stack __x64_sys_getpgid`. *Tracer",
        "CPU* is bpfmux's user + system time while the workload ran (10 ms ticks); *capture*",
        "is the time bpfmux measured in its own scans and normalization (the summary's",
        "`user_stacks.capture_ms`), per stack event (getpgid call counted). Addresses are",
        "those of the distinct (process, stack) pairs: asked of the kernel, found in the",
        "cache, or failed (the process was gone before its stack was read; those the programs'",
        "build-ID stack placed in a file found here are counted apart). The in-kernel",
        "cost of taking a stack is the same in every traced row of one binary: *program",
        "ns/run* is the trace programs' own time per run (kernel.bpf_stats_enabled, their",
        "fdinfo), in emulated nanoseconds.",
    ]
    failed = False
    for k in kernels:
        path = os.path.join(raw, f"{k}.jsonl")
        if not os.path.exists(path):
            lines += ["", f"## {k}", "", "no results (the boot did not run)"]
            failed = True
            continue
        rows = rows_of(path)
        boot = next((r for r in rows if r.get("type") == "boot"), {})
        runs = [r for r in rows if r.get("type") == "run"]
        bad = [r for r in runs if r.get("status") != "ok"]
        lines += ["", f"## {k}", ""]
        kmeta = os.path.join(raw, f"{k}.meta")
        if os.path.exists(kmeta):
            lines += [f"- {m.rstrip()}" for m in open(kmeta) if m.strip()]
        if boot.get("compare"):
            lines.append(f"- binaries: {boot.get('bpfmux')} (on, off); {boot['compare']} (cmp)")
        lines.append(f"- guest: {boot.get('uname', '?')}, {boot.get('cpus', '?')} vCPUs; "
                     f"{boot.get('children', '?')} children x {boot.get('calls', '?')} + 1 "
                     f"calls, {boot.get('rounds', '?')} rounds")
        for r in bad:
            lines.append(f"- failed: linger {r.get('linger_ms')} ms, round {r.get('round')}, "
                         f"{r.get('mode')}: {r.get('error')}")
        failed |= bool(bad)
        ok = [r for r in runs if r.get("status") == "ok"]
        for linger in sorted({r["linger_ms"] for r in ok}):
            lines += ["", f"### children linger {linger} ms", ""]
            lines += table([r for r in ok if r["linger_ms"] == linger])
    with open(out_path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
