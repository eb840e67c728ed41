#!/usr/bin/python3
"""Writes the trace-attach table (Markdown) from the guest runs' JSON lines.

usage: report.py RAWDIR OUT.md KERNEL...

RAWDIR holds, per kernel, KERNEL.jsonl (bench/trace-attach/guest.py, every boot of that
kernel appended) and KERNEL.meta (lines "key: value" from run.sh), plus run.meta.
"""
import json
import statistics
import sys

ENGINES = ["global", "tracing-multi", "kprobe-multi", "fentry-each"]
# (slower, faster): attach-time ratios worth a column when both were measured.
RATIOS = [("fentry-each", "tracing-multi"), ("fentry-each", "kprobe-multi"),
          ("fentry-each", "global"), ("tracing-multi", "global"), ("kprobe-multi", "global")]
TARGET = 100


def read_meta(path):
    meta = {}
    try:
        with open(path) as f:
            for line in f:
                k, _, v = line.partition(":")
                meta.setdefault(k.strip(), []).append(v.strip())
    except OSError:
        pass
    return meta


def read_runs(path):
    boots, runs = [], []
    try:
        with open(path) as f:
            for line in f:
                try:
                    o = json.loads(line)
                except ValueError:
                    continue
                if o.get("type") == "boot":
                    boots.append(o)
                elif o.get("type") == "run":
                    runs.append(o)
    except OSError:
        pass
    return boots, runs


class Cell:
    """One (engine, size): the median of its ok runs, or why there is no number."""

    def __init__(self, runs):
        ok = [r for r in runs if r["status"] == "ok"]
        self.n = len(ok)
        self.status = None if ok else (runs[0]["status"], runs[0].get("error", "")) if runs else None
        self.attach = statistics.median(r["attach_ms"] for r in ok) if ok else None
        self.detach = statistics.median(r["detach_ms"] for r in ok) if ok else None
        self.attached = min(r["attached"] for r in ok) if ok else None
        self.links = ok[0]["links"] if ok else None
        # the breakdown of the median run (by attach time), where recorded
        self.run = sorted(ok, key=lambda r: r["attach_ms"])[len(ok) // 2] if ok else None
        # a run stopped at its time limit: its attach time, or a lower bound on it
        stopped = [r for r in runs if r["status"] == "did not finish"]
        self.stopped = stopped[0] if stopped and not ok else None

    def attach_at_least(self):
        """(milliseconds, exact?) of a run stopped before it finished, if it tells."""
        r = self.stopped
        if r is None:
            return None
        if "attach_ms" in r:
            return r["attach_ms"], True
        if "attach_at_least_ms" in r:
            return r["attach_at_least_ms"], False
        return None

    def text(self, want):
        if self.attach is None:
            if self.status is None:
                return "not run"
            status, error = self.status
            if status == "capped":
                return f"not measured ({error})"
            if status == "not available on this kernel":
                return "not available on this kernel"
            bound = self.attach_at_least()
            if bound is not None:
                v, exact = bound
                return (f"{ms(v)} / did not finish" if exact else
                        f"more than {ms(v)} / - ({error})")
            return f"{status}: {error}"
        s = f"{ms(self.attach)} / {ms(self.detach)}"
        if self.attached != want:
            s += f" ({self.attached} of {want} attached)"
        return s


def ms(v):
    return f"{v:,.0f}" if v >= 100 else f"{v:.1f}"


def kernel_section(kernel, boots, runs, meta):
    lines = []
    uname = boots[0]["uname"] if boots else "?"
    total = boots[0]["funcs_total"] if boots else None
    # the all-functions boot decides whether fentry-each ran on all of them; the
    # sizes boot's cap is the largest sample it was measured on
    cap = max((b["fentry_cap"] for b in boots), default=None)
    sizes_cap = min((b["fentry_cap"] for b in boots), default=None)
    lines.append(f"## {kernel} ({uname})")
    lines.append("")
    for k in ("run", "image", "host load", "guest load", "boots"):
        for v in meta.get(k, []):
            lines.append(f"- {k}: {v}")
    if any("guest vCPUs: 1" in v for v in meta.get("host load", [])):
        lines.append("- one guest vCPU (`--smp 1`, against the TCG int3 issue of kernel/README "
                     "\"Known issues\"): fentry-each's worker threads cannot load programs in "
                     "parallel here, as they can with two")
    if total is not None:
        lines.append(f"- traceable functions (`bpfmux trace --list '*'`): {total}; "
                     + ("fentry-each on all of them (`--fentry-all`)" if cap >= total else
                        f"fentry-each capped at {cap} functions"))
    lines.append("")
    # (label, functions), in the order measured; a "did not finish" row has no count
    wants = {}
    for r in runs:
        wants[r["size"]] = max(wants.get(r["size"], 0), r["want"])
    sizes = list(wants.items())
    cells = {(e, s): Cell([r for r in runs if r["engine"] == e and r["size"] == s])
             for e in ENGINES for s, _ in sizes}
    engines = [e for e in ENGINES if any(cells[(e, s)].status or cells[(e, s)].n
                                         for s, _ in sizes)]
    lines.append("Attach / detach time, ms (median of the runs; emulated guest):")
    lines.append("")
    lines.append("| functions | " + " | ".join(engines) + " |")
    lines.append("|---:|" + "---|" * len(engines))
    for s, want in sizes:
        label = f"all ({want})" if s == "all" else f"{want:,}"
        runs_n = max(cells[(e, s)].n for e in engines)
        lines.append(f"| {label} (x{runs_n}) | "
                     + " | ".join(cells[(e, s)].text(want) for e in engines) + " |")
    lines.append("")
    cols = [(a, b) for a, b in RATIOS
            if any(cells[(a, s)].attach and cells[(b, s)].attach for s, _ in sizes)]
    if cols:
        lines.append("Attach time ratios (same guest run; how many times faster the second engine "
                     "attaches):")
        lines.append("")
        lines.append("| functions | " + " | ".join(f"{a} ÷ {b}" for a, b in cols) + " |")
        lines.append("|---:|" + "---:|" * len(cols))
        for s, want in sizes:
            row = []
            for a, b in cols:
                ca, cb = cells[(a, s)], cells[(b, s)]
                if ca.attach and cb.attach:
                    row.append(f"{ca.attach / cb.attach:,.1f}x")
                elif cb.attach and ca.attach_at_least():
                    v, exact = ca.attach_at_least()
                    row.append(f"{v / cb.attach:,.1f}x" if exact else
                               f"more than {v / cb.attach:,.1f}x")
                else:
                    row.append("")
            label = f"all ({want})" if s == "all" else f"{want:,}"
            lines.append(f"| {label} | " + " | ".join(row) + " |")
        lines.append("")
    lines += breakdown_lines(cells, sizes, ENGINES)
    return lines, cells, sizes, total, sizes_cap


def breakdown_lines(cells, sizes, engines):
    """Where the attach time went at the largest size: the kernel's link creation apart
    from program loads and bpfmux's own share (maps, bookkeeping)."""
    s, want = max(sizes, key=lambda x: x[1])
    rows = []
    for e in engines:
        c = cells.get((e, s))
        r = c.run if c is not None else None
        b = r.get("breakdown") if r else None
        if not b:
            continue
        other = r["attach_ms"] - b["load_ms"] - b["link_ms"] - b["refused_ms"]
        rows.append(f"| {e} | {ms(r['select_ms'])} | {ms(r['prepare_ms'])} | "
                    f"{b['program_loads']} / {ms(b['load_ms'])} | "
                    f"{b['links']} / {ms(b['link_ms'])} | "
                    f"{b['refused_tries']} / {ms(b['refused_ms'])} | {ms(other)} | "
                    f"{ms(r['attach_ms'])} |")
    if not rows:
        return []
    label = f"all {want:,}" if s == "all" else f"{want:,}"
    return [f"Where the time went at {label} functions, ms (the median run; programs and "
            "links: count / time; fentry-each sums its worker threads; select is the "
            "exact-names lookup of LIST, prepare the maps):", "",
            "| engine | select | prepare | program loads | links (kernel) | refused tries | "
            "rest of attach | attach |",
            "|---|---:|---:|---:|---:|---:|---:|---:|", *rows, ""]


def target_lines(kernel, cells, sizes, total, cap):
    """tracing_multi vs fentry-each at the largest size measured for both."""
    both = [(s, want) for s, want in sizes
            if cells[("tracing-multi", s)].attach and cells[("fentry-each", s)].attach]
    if not both:
        return [f"- {kernel}: no size was measured with both tracing-multi and fentry-each: "
                "target not evaluated"]
    s, want = max(both, key=lambda x: x[1])
    tm, fe = cells[("tracing-multi", s)], cells[("fentry-each", s)]
    ratio = fe.attach / tm.attach
    both_ratio = (fe.attach + fe.detach) / (tm.attach + tm.detach)
    verdict = "met" if ratio >= TARGET else "NOT met"
    scope = ("all traceable functions" if s == "all" else
             f"{want:,} of {total:,} traceable functions (the largest sample both ran; "
             f"the sizes boot caps fentry-each at {cap} and nothing is extrapolated)")
    line = (f"- {kernel}: at {scope}: tracing-multi attaches {ratio:,.1f}x faster than "
            f"fentry-each ({ms(tm.attach)} ms vs {ms(fe.attach)} ms; attach + detach "
            f"{both_ratio:,.1f}x) — target >= {TARGET}x: **{verdict} at this size**")
    tm_all = cells.get(("tracing-multi", "all"))
    fe_all = cells.get(("fentry-each", "all"))
    if s == "all" or tm_all is None or not tm_all.attach:
        return [line]
    line += (f"; tracing-multi on all {total:,} functions: {ms(tm_all.attach)} ms attach, "
             f"{ms(tm_all.detach)} ms detach")
    bound = fe_all.attach_at_least() if fe_all is not None else None
    if bound is not None:
        # fentry-each on all functions was stopped: its attach took at least this long
        v, exact = bound
        ratio = v / tm_all.attach
        kind = "" if exact else "at least "
        verdict = "met" if ratio >= TARGET else "not decided (the bound is below it)"
        line += (f". All {total:,} functions in one boot: fentry-each was stopped "
                 f"({fe_all.stopped['error']}), so tracing-multi attaches {kind}{ratio:,.1f}x "
                 f"faster ({ms(tm_all.attach)} ms vs {kind}{ms(v)} ms) — target >= {TARGET}x "
                 f"on all functions: **{verdict}**")
    elif fe_all is not None and fe_all.status is not None:
        line += (f". All functions: fentry-each {fe_all.status[0]} ({fe_all.status[1]}), "
                 "no bound on its attach time recorded")
    return [line]


def main():
    raw, out_path, *kernels = sys.argv[1:]
    run_meta = read_meta(f"{raw}/run.meta")
    out = ["# bpfmux trace: attach and detach time per engine", ""]
    # the latest run; --kernels reruns only some kernels, each section says when it ran
    for k in ("generated", "commit", "bpfmux", "host", "mode"):
        for v in run_meta.get(k, []):
            out.append(f"- {k} (latest run): {v}" if k in ("generated", "commit", "mode")
                       else f"- {k}: {v}")
    out += [
        "- method: `bpfmux trace --engine E --json -d 0 -f LIST` in a QEMU TCG guest per kernel "
        "(emulated: compare ratios within one kernel's table, not absolute times). LIST is the "
        "kernel's traceable set (`bpfmux trace --list '*'`) or an evenly spaced sample of it, "
        "given as exact names; attach = loading the program(s) + creating the links "
        "(the summary's attach_ms), detach = closing them (detach_ms). At each size the "
        "engines run one after another in the same boot; sizes below 1,000 are the median "
        "of several runs. `all` runs in a boot of its own, every engine one after another, "
        "fentry-each last.",
        "- engines: global = this series' global trampoline (tracing_multi link with "
        "BPF_F_TRACING_MULTI_GLOBAL); tracing-multi = upstream tracing_multi (a trampoline "
        "per function, one link); kprobe-multi = one kprobe.multi link; fentry-each = one "
        "fentry program and link per function, loaded on worker threads (what bpftrace "
        "and retsnoop's fentry mode do).",
        "",
    ]
    sections, targets = [], []
    for k in kernels:
        boots, runs = read_runs(f"{raw}/{k}.jsonl")
        meta = read_meta(f"{raw}/{k}.meta")
        if not runs:
            sections += [f"## {k}", "", "No runs recorded (see the guest log).", ""]
            targets.append(f"- {k}: no runs recorded")
            continue
        lines, cells, sizes, total, cap = kernel_section(k, boots, runs, meta)
        sections += lines
        targets += target_lines(k, cells, sizes, total, cap)
    out += ["## Target: tracing_multi >= 100x faster than one fentry per function (stock 7.3.4)",
            ""] + targets + [""] + sections
    with open(out_path, "w") as f:
        f.write("\n".join(out))


if __name__ == "__main__":
    main()
