#!/usr/bin/python3
"""Runs in the guest: `bpfmux trace` checks with exact expectations.

usage: check.py BPFMUX TRIGGER CHECK [ARGS...]

  count ENGINE [--latency]   getpgid 1000x and getpriority 500x under -c: the summary
                             must count exactly that on the engine (auto: the best one)
  glob ENGINE MIN PATTERN... a glob set: >= MIN functions attached, the notrace
                             vfs_caches_init dropped, getpgid still counted exactly
  args ENGINE                --args on getpgid 3x: 3 entry and 3 exit events, in order
  unknown                    an unknown function: exit status != 0, a clear message
  unavailable ENGINE         a forced engine the kernel lacks: exit != 0, says why

ENGINE "auto" lets bpfmux choose; the expected choice is read from `bpfmux features`.
Each check prints "ok - ..." or "FAIL - ..." lines; exit status 0 when all hold.
"""
import json
import subprocess
import sys

GETPGID, GETPRIORITY = 1000, 500
failures = 0


def check(ok, msg):
    global failures
    print(f"{'ok' if ok else 'FAIL'} - {msg}", flush=True)
    failures += not ok


def run(bpfmux, args, timeout=600):
    p = subprocess.run([bpfmux, "trace", *args], capture_output=True, text=True, timeout=timeout)
    for line in p.stderr.splitlines():
        print(f"  stderr: {line}")
    return p


def parse(out):
    """JSON lines: every line must parse; returns (objects, summary)."""
    objs = [json.loads(line) for line in out.splitlines() if line.strip()]
    summary = [o for o in objs if o.get("type") == "summary"]
    return objs, summary[-1] if summary else None


def expected_engine(bpfmux):
    out = subprocess.run([bpfmux, "features", "--json"], capture_output=True, text=True)
    feats = {f["name"]: f["status"] for f in json.loads(out.stdout)["features"]}
    for feat, engine in [("global_trampoline", "global"), ("tracing_multi", "tracing-multi"),
                         ("kprobe.multi", "kprobe-multi"), ("fentry", "fentry-each")]:
        if feats.get(feat) == "yes":
            return engine
    return None


def engine_args(engine):
    return [] if engine == "auto" else ["--engine", engine]


def calls(summary, name):
    return {f["name"]: f for f in summary["functions"]}.get(name, {})


def traced(bpfmux, trigger, engine, extra, patterns, trig_args):
    args = [*engine_args(engine), "--json", "-c", f"{trigger} {trig_args}", *extra, *patterns]
    p = run(bpfmux, args)
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


def check_engine(bpfmux, engine, summary):
    want = expected_engine(bpfmux) if engine == "auto" else engine
    check(summary["engine"] == want, f"engine {summary['engine']} (want {want})")


def t_count(bpfmux, trigger, engine, *opts):
    latency = "--latency" in opts
    extra = ["--latency"] if latency else []
    _, s = traced(bpfmux, trigger, engine, extra, ["__x64_sys_getpgid", "__x64_sys_getpriority"],
                  f"getpgid {GETPGID} getpriority {GETPRIORITY}")
    if not s:
        return
    check_engine(bpfmux, engine, s)
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


def t_unknown(bpfmux, trigger):
    p = run(bpfmux, ["--json", "-d", "1", "no_such_function_bpfmux"])
    check(p.returncode != 0, f"unknown function: exit {p.returncode} (want != 0)")
    check("unknown function" in p.stderr and "no_such_function_bpfmux" in p.stderr,
          "the error names the unknown function")


def t_unavailable(bpfmux, trigger, engine):
    p = run(bpfmux, ["--engine", engine, "--json", "-c", f"{trigger} getpgid 1", "__x64_sys_getpgid"])
    check(p.returncode != 0, f"--engine {engine}: exit {p.returncode} (want != 0)")
    check(f"engine {engine} is not available" in p.stderr, "the error says the engine is unavailable")


def main():
    bpfmux, trigger, what, *rest = sys.argv[1:]
    {"count": t_count, "glob": t_glob, "args": t_args, "unknown": t_unknown,
     "unavailable": t_unavailable}[what](bpfmux, trigger, *rest)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
