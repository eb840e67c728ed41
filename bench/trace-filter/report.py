#!/usr/bin/python3
"""bench/trace-filter/run.sh's table from its raw JSON lines.

usage: report.py RAW_DIR OUT.md KERNEL...

Per kernel and engine: instructions per getpgid(0) call (median of the repeats) for each
row, and what the row adds to plain counting (or, for the exit rows, to the exit side
with its cheapest, always-true test).
"""
import json
import os
import sys

ROWS = [
    ("count", "plain counting", None),
    ("entry-false", "`regs == 0`: an argument, false", "count"),
    ("entry-true", "`regs != 0`: an argument, true", "count"),
    ("exit-side", "`latency >= 0ns`: the exit side, always true", "count"),
    ("exit-false", "`errno == ESRCH`: at the exit, false", "exit-side"),
    ("exit-true", "`errno == 0`: at the exit, true", "exit-side"),
    ("args", "`--args`: per-call events with the arguments", "count"),
    ("args-false", "`--args`, `regs == 0`: events a false filter keeps back", "args"),
]


def main():
    raw, out, kernels = sys.argv[1], sys.argv[2], sys.argv[3:]
    lines = ["# bpfmux trace --filter: instructions per call", "",
             "Guest instructions per `getpgid(0)` call (`__x64_sys_getpgid` traced) counted "
             "with the QEMU plugin (`vm/run --insn`, emulated guest), the median of the "
             "repeats of `insn_per_rep` (windows of 25 and 50 calls, fixed costs cancelled); "
             "the calls are the `-c` command's (`bench/trace-filter/trace-filter.c`). Every "
             "traced row checked that its filter passed all (true) or none (false) of the "
             "calls it saw. \"vs\": what the row adds to the row named, per call.", ""]
    failed = False
    for k in kernels:
        path = os.path.join(raw, f"{k}.jsonl")
        rows = [json.loads(l) for l in open(path) if l.strip()]
        meta = os.path.join(raw, f"{k}.meta")
        lines.append(f"## {k}")
        lines.append("")
        if os.path.exists(meta):
            lines += [f"- {m}" for m in open(meta).read().splitlines()]
            lines.append("")
        base = next((r for r in rows if r["row"] == "untraced"), None)
        if base and base["status"] == "ok":
            lines.append(f"Untraced: {base['insns_per_call']:.1f} instructions per call.")
            lines.append("")
        engines = []
        for r in rows:
            if r["engine"] != "-" and r["engine"] not in engines:
                engines.append(r["engine"])
        lines.append("| engine | row | insns/call | vs | added | clear |")
        lines.append("|---|---|---:|---|---:|---|")
        for e in engines:
            got = {r["row"]: r for r in rows if r["engine"] == e}
            for name, what, ref in ROWS:
                r = got.get(name)
                if r is None:
                    continue
                if r["status"] != "ok":
                    failed |= r["status"] == "failed"
                    why = "; ".join(r.get("error", []))
                    lines.append(f"| {e} | {what} | {r['status']} | | | {why} |")
                    continue
                v = r["insns_per_call"]
                b = got.get(ref) if ref else base
                refname = ref or "untraced"
                added = (f"{v - b['insns_per_call']:+.1f}"
                         if b and b.get("status") == "ok" else "")
                lines.append(f"| {e} | {what} | {v:.1f} | {refname} | {added} | "
                             f"{'yes' if r.get('clear') else 'no'} |")
        lines.append("")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
