#!/usr/bin/python3
"""Runs in one guest boot (vm/run --insn): instructions per traced call with a filter.

usage: guest.py BPFMUX TRACE_FILTER OUT.jsonl --engines global,tracing-multi,...
                [--windows N] [--repeats N]

Every row counts guest instructions per getpgid(0) call (TRACE_FILTER: the instruction
counting program, bench/trace-filter/trace-filter.c), REPEATS times; the JSON line keeps
every repeat and their median. Rows, per engine:

  count          bpfmux trace __x64_sys_getpgid                 (entry programs only)
  entry-false    --filter 'regs == 0'     an argument, false    (entry programs only)
  entry-true     --filter 'regs != 0'     an argument, true     (entry programs only)
  exit-side      --filter 'latency >= 0ns'  always true: the exit side and the
                                          cheapest exit test (the reference for the
                                          two rows below)
  exit-false     --filter 'errno == ESRCH'  false: getpgid(0) succeeds
  exit-true      --filter 'errno == 0'    true
  args           --args                   per-call events: the arguments by their BTF
                                          types at the entry, the return at the exit,
                                          each sent through the ring buffer
  args-false     --args --filter 'regs == 0'  per-call events that a false entry
                                          filter keeps from being sent

and once "untraced" (the program alone). Each traced row also checks the run's summary:
the calls the filter saw, and that it passed all of them (true) or none (false), so a row
measures what its name says. A row an engine cannot run says why ("not available").
"""
import argparse
import json
import statistics
import subprocess
import sys

FUNC = "__x64_sys_getpgid"
ROWS = [
    ("count", [], None),
    ("entry-false", ["--filter", "regs == 0"], False),
    ("entry-true", ["--filter", "regs != 0"], True),
    ("exit-side", ["--filter", "latency >= 0ns"], True),
    ("exit-false", ["--filter", "errno == ESRCH"], False),
    ("exit-true", ["--filter", "errno == 0"], True),
    ("args", ["--args"], None),
    ("args-false", ["--args", "--filter", "regs == 0"], False),
]


def log(msg):
    print(f"trace-filter: {msg}", file=sys.stderr, flush=True)


def counted(stdout):
    """The counting program's line in an output (bpfmux's JSON lines around it)."""
    for line in stdout.splitlines():
        if line.startswith("insns_per_call "):
            f = line.split()
            return {"insns_per_call": float(f[1]), "clear": f[3] == "1",
                    "hits": int(f[5]), "windows": int(f[7])}
    return None


def summary_of(stdout):
    for line in stdout.splitlines():
        if line.startswith("{"):
            o = json.loads(line)
            if o.get("type") == "summary":
                return o
    return None


def run_row(bpfmux, prog, windows, engine, name, extra, truth):
    cmd = f"{prog} {windows}"
    if engine is None:
        args = [prog, str(windows)]
    else:
        args = [bpfmux, "trace", "--engine", engine, "--json", *extra, "-c", cmd, FUNC]
    p = subprocess.run(args, capture_output=True, text=True, timeout=1800)
    flt_args = extra[extra.index("--filter") + 1:] if "--filter" in extra else []
    out = {"engine": engine or "-", "row": name, "filter": " ".join(flt_args) or None}
    if p.returncode != 0:
        not_here = "is not available" in p.stderr
        out["status"] = "not available" if not_here else "failed"
        out["error"] = p.stderr.strip().splitlines()[-1:] if p.stderr.strip() else []
        return out
    c = counted(p.stdout)
    if c is None:
        out["status"] = "failed"
        out["error"] = ["no insns_per_call line from the counting program"]
        return out
    out.update(c)
    out["status"] = "ok"
    if engine is not None:
        s = summary_of(p.stdout)
        calls = {f["name"]: f["calls"] for f in (s or {}).get("functions", [])}.get(FUNC, 0)
        flt = (s or {}).get("filter") or {}
        out["calls"], out["seen"], out["passed"] = calls, flt.get("seen"), flt.get("passed")
        out["exit_side"] = (s or {}).get("exit_side")
        if truth is not None and (not flt.get("seen") or flt.get("passed") !=
                                  (flt.get("seen") if truth else 0)):
            out["status"] = "failed"
            out["error"] = [f"the filter passed {flt.get('passed')} of {flt.get('seen')} "
                            f"calls (want {'all' if truth else 'none'})"]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bpfmux")
    ap.add_argument("prog")
    ap.add_argument("out")
    ap.add_argument("--engines", default="global,tracing-multi,kprobe-multi,fentry-each")
    ap.add_argument("--windows", type=int, default=15)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    failed = 0
    with open(a.out, "w") as f:
        plan = [(None, "untraced", [], None)]
        for e in a.engines.split(","):
            plan += [(e, name, extra, truth) for name, extra, truth in ROWS]
        for engine, name, extra, truth in plan:
            runs = []
            for i in range(a.repeats):
                r = run_row(a.bpfmux, a.prog, a.windows, engine, name, extra, truth)
                runs.append(r)
                if r["status"] != "ok":
                    break
            last = runs[-1]
            if last["status"] == "ok":
                last["repeats"] = [r["insns_per_call"] for r in runs]
                last["insns_per_call"] = statistics.median(last["repeats"])
                last["clear"] = all(r["clear"] for r in runs)
            failed += last["status"] == "failed"
            log(f"{last['engine']} {name}: {last['status']} "
                f"{last.get('insns_per_call', '')} {last.get('error', '')}")
            f.write(json.dumps(last) + "\n")
            f.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
