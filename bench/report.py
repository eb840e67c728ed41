#!/usr/bin/env python3
"""Writes REPORT.md and SVG plots from what bench/run.sh collected in OUT/raw/.

usage: bench/report.py OUT      (OUT: bench/results or build/bench-quick)

Only numbers measured in this run appear as "ours"; the seeds' published figures are
quoted as "theirs" (bare metal) for orientation. A row or table that did not run says
why (not available on this kernel, not built yet, failed), never a number.
"""

import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import svgplot  # noqa: E402

KERNELS = ["ours", "stock-7.3", "stock-6.12"]

# Published figures (M/s), quoted from the seeds: 000 = the v2 cover letter
# (mitigations=off), 001 = the LPC slides. Their multi rows are the global trampoline.
SEED_000 = {
    "usermode-count": (746.907, 0.323), "kernel-count": (313.423, 0.031),
    "syscall-count": (18.179, 0.013), "fentry": (107.149, 0.051),
    "fexit": (56.565, 0.019), "fmodret": (59.495, 0.024),
    "fentry.multi/global": (99.073, 0.087), "fentry.multi-all/global": (97.920, 0.095),
    "fexit.multi/global": (55.426, 0.045), "fmodret.multi/global": (56.589, 0.163),
    "rawtp": (166.774, 0.137), "tp": (61.947, 0.035), "kprobe": (43.719, 0.018),
    "kprobe.multi": (47.451, 0.087), "kretprobe": (18.358, 0.026),
    "kretprobe.multi": (24.523, 0.016),
}
SEED_001 = {
    "usermode-count": (930.223, 0.913), "kernel-count": (427.750, 0.512),
    "syscall-count": (31.799, 0.051), "fentry": (162.859, 0.483),
    "fexit": (80.086, 0.066), "fmodret": (85.933, 0.066),
    "fentry.multi/global": (123.506, 0.637), "fexit.multi/global": (74.695, 0.147),
    "fmodret.multi/global": (79.104, 0.142), "rawtp": (196.124, 0.306),
    "tp": (85.600, 0.063), "kprobe": (61.080, 0.070), "kprobe.multi": (63.278, 0.042),
    "kprobe.multi-all": (5.074, 0.005), "kretprobe": (23.936, 0.032),
    "kretprobe.multi": (28.505, 0.014), "kretprobe.multi-all": (4.117, 0.005),
}

# Targets for the ratio of hook instructions per call (issues 19 and 21), keyed like TARGETS.
INSN_TARGETS = {
    ("fentry.multi/global", "fentry"): "<= 1.02",
    ("fentry.multi-all/global", "fentry.multi/global"): "1.00 ± 0.02",
}

# Ratios the issues set as targets (issues 5 and 6), keyed (row, denominator row).
TARGETS = {
    ("fentry.multi/global", "fentry"): ">= 0.98",
    ("fentry.multi-all/global", "fentry.multi/global"): "1.00 ± 0.02",
    ("fexit.multi/global", "fexit"): ">= 0.98",
    ("fmodret.multi/global", "fmodret"): ">= 0.98",
}

HEADLINE = [
    ("fentry.multi/global", "fentry"),
    ("fentry.multi-all/global", "fentry.multi/global"),
    ("fentry.multi/per-function", "fentry"),
    ("fentry.multi-all/per-function", "fentry.multi/per-function"),
    ("fexit.multi/global", "fexit"),
    ("fexit.multi/per-function", "fexit"),
    ("fmodret.multi/global", "fmodret"),
    ("fmodret.multi/per-function", "fmodret"),
    ("fsession.multi/global", "fsession"),
    ("fsession.multi/per-function", "fsession"),
    ("kprobe.multi", "kprobe"),
    ("kprobe.multi-all", "kprobe.multi"),
    ("kretprobe.multi", "kretprobe"),
    ("kretprobe.multi-all", "kretprobe.multi"),
    ("fentry", "kprobe"),
]

OTHERS = [
    ("xdp", "XDP chaining (seed 002): bpfmux's dispatcher, tail call, libxdp"),
    ("xdpchain", "XDP chain calls in the kernel (seed 002)"),
    ("batchsym", "Exact-name and batch symbol attach (seed 003)"),
    ("procmap", "PROCMAP_QUERY address normalization (seed 004)"),
    ("trace-attach", "bpfmux trace: attach and detach per engine and size"),
    ("trace-filter", "bpfmux trace --filter: instructions per call, filter false and true"),
    ("capture", "bpfmux trace --stacks: user stacks normalized as they are captured"),
]

SEED_OTHERS = {
    "xdp": [
        ("single XDP_DROP program", "31.2 Mpps (31.0 before the patch)"),
        ("PASS → DROP via a plain tail call", "26.6 Mpps, 5.3 ns per hop"),
        ("PASS → DROP via chain call, wildcard", "26.8 Mpps, 5.3 ns per hop"),
        ("PASS → DROP via chain call, XDP_PASS", "27.2 Mpps, 4.7 ns per hop"),
        ("later version, loop in BPF_PROG_RUN (ANCHORS §2)", "3.8 ns per hop"),
        ("libxdp dispatcher (ANCHORS §2)", "a call + branch per program; up to 11 % of AF_XDP"),
    ],
    "batchsym": [
        ("50 kprobe.session programs, 50 exact names: before", "7,488 ms"),
        ("patched libbpf only (no /proc/kallsyms parse)", "858 ms"),
        ("libbpf + ftrace (kallsyms binary search)", "52 ms"),
        ("traditional kprobe entry+return pairs (100 programs)", "132 ms"),
    ],
    "procmap": [
        ("blazesym normalize, 5 addresses: text /proc/PID/maps", "49.98 µs"),
        ("blazesym normalize, 5 addresses: PROCMAP_QUERY", "10.39 µs (≈ 4.8× faster)"),
        ("batch of 3244 addresses over 655 VMAs: text vs ioctl", "333 µs vs 8 µs (≈ 40×)"),
    ],
}
SEED_OTHERS["xdpchain"] = SEED_OTHERS["xdp"]
SEED_OTHERS["trace-attach"] = [
    ("seed 000: global trampoline, attach of 50,000 functions", "0.328 s"),
    ("one fentry program per function today (ANCHORS §1)", "~60 s per 1000 functions"),
    ("target (issue 4): tracing_multi vs one fentry per function, stock 7.3.4", ">= 100x faster"),
]


def key(row):
    return f"{row['name']}/{row['backend']}" if row.get("backend") else row["name"]


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def read_text(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def kv_lines(text):
    out = {}
    for line in (text or "").splitlines():
        if ": " in line:
            k, v = line.split(": ", 1)
            out.setdefault(k, v)
    return out


def fmt_rate(r):
    return f"{r[0]:.3f} ± {r[1]:.3f}"


def status_text(s):
    return s if s != "ok" else ""


PHASES = ["rates", "attach", "all", "allpf"]


def phase_of(k):
    """The bench/guest.sh phase that measures trigger row k."""
    if "-all" in k:
        return "allpf" if k.endswith("/per-function") else "all"
    return "rates"


def quantile(v, q):
    v = sorted(v)
    x = (len(v) - 1) * q
    lo = int(x)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (x - lo)


class Run:
    """One kernel's guest results, over the phases (separate boots) that ran."""

    def __init__(self, raw, kernel):
        d = os.path.join(raw, kernel)
        self.kernel = kernel
        self.meta = kv_lines(read_text(os.path.join(d, "meta.txt")))
        text = read_text(os.path.join(d, "guest.txt")) or ""
        self.guest = kv_lines(text)
        if not text:    # a run without the rates phase: the insn phase saw the same
            text = read_text(os.path.join(d, "guest-insn.txt")) or ""
            self.guest = kv_lines(text)
        self.ftrace = [ln.split(": ", 1)[1] for ln in text.splitlines()
                       if ln.startswith("ftrace site: ")]
        self.rc = {}        # phase -> (exit status, seconds)
        self.vcpus = {}     # phase -> guest vCPUs (older runs did not record it: 2)
        self.trigger = {}   # phase -> trigger JSON
        self.phase_rows = {}  # phase -> {row key: row}
        self.attach_results = []
        self.attach_info = None
        for ph in PHASES:
            rc = (read_text(os.path.join(d, f"vm-{ph}.rc")) or "").split()
            if rc:
                self.rc[ph] = (rc[0], rc[1] if len(rc) > 1 else "?")
                self.vcpus[ph] = rc[2] if len(rc) > 2 else "2"
            t = load_json(os.path.join(d, f"trigger-{ph}.json"))
            if t:
                self.trigger[ph] = t
                self.phase_rows[ph] = {key(r): r for r in t.get("rows", [])}
            a = load_json(os.path.join(d, f"attach-{ph}.json"))
            if a:
                self.attach_info = self.attach_info or a
                for r in a["results"]:
                    r["phase"] = ph
                    self.attach_results.append(r)
        self.rows = {}
        for ph in PHASES:
            for k, r in self.phase_rows.get(ph, {}).items():
                if phase_of(k) == ph or k not in self.rows:
                    self.rows[k] = r
        # Instructions per call (phase insn, bench/trigger --insn): row key -> result
        rc = (read_text(os.path.join(d, "vm-insn.rc")) or "").split()
        if rc:
            self.rc["insn"] = (rc[0], rc[1] if len(rc) > 1 else "?")
            self.vcpus["insn"] = rc[2] if len(rc) > 2 else "2"
        t = load_json(os.path.join(d, "trigger-insn.json")) or {}
        self.insn_meta = t
        self.insn_base = t.get("insn_baseline")
        self.insn_rows = {key(r): r for r in t.get("rows", [])}
        self.xdp_insn = load_json(os.path.join(d, "xdpchain-insn.json"))

    def insn(self, k):
        """(per call, hook per call, spread, runs) of row k, or None."""
        r = self.insn_rows.get(k)
        if not (r and r.get("insn") and self.insn_base):
            return None
        i = r["insn"]
        return (i["per_call"], i["per_call"] - self.insn_base["per_call"], i["spread"], i["runs"])

    def hazards(self, k):
        """Row k's hazards (bench/trigger --insn under vm/run --insn-hazards) as medians
        over the repeats, and the hook's (row minus the baseline), or None."""
        r = self.insn_rows.get(k)
        if not (r and r.get("insn") and self.insn_base):
            return None
        return hazard_medians(r["insn"], self.insn_base)

    def insn_ratio(self, num, den):
        a, b = self.insn(num), self.insn(den)
        if a and b and b[1] > 0:
            return a[1] / b[1]
        return None

    def insn_why_missing(self, k):
        r = self.insn_rows.get(k)
        if r:
            if r["status"].startswith("did not finish"):
                return "did not finish: " + self.rc_text("insn")
            return r["status"]
        if "insn" not in self.rc:
            return "not counted (phase insn was not part of this run)"
        return f"not reached: phase insn exited {self.rc['insn'][0]}"

    @staticmethod
    def _rate(r):
        if r and r["status"] == "ok" and r["samples"]:
            return (r["mean"], r["stddev"])
        return None

    def rate(self, k):
        return self._rate(self.rows.get(k))

    def ratio(self, num, den):
        """num/den from one phase (one boot) that measured both, the phase of num first:
        (median, 25th, 75th percentile, rounds) of the per-round ratios. Rows are measured
        next to each other in every round, so a ratio within a round sees the same host
        load on both sides; the median over rounds drops the rounds the host disturbed."""
        order = [phase_of(num)] + [p for p in PHASES if p != phase_of(num)]
        for ph in order:
            rows = self.phase_rows.get(ph, {})
            a, b = rows.get(num), rows.get(den)
            if not (self._rate(a) and self._rate(b)):
                continue
            spr = max(int(self.trigger[ph].get("samples", 1)), 1)
            n = min(len(a["samples"]), len(b["samples"])) // spr
            per_round = []
            for i in range(n):
                x = sum(a["samples"][i * spr:(i + 1) * spr])
                y = sum(b["samples"][i * spr:(i + 1) * spr])
                if y > 0:
                    per_round.append(x / y)
            if per_round:
                return (quantile(per_round, 0.5), quantile(per_round, 0.25),
                        quantile(per_round, 0.75), len(per_round))
        return None

    def rc_text(self, ph):
        """How the guest boot of phase ph ended, in words."""
        if ph not in self.rc:
            return f"phase {ph} did not run"
        rc, secs = self.rc[ph]
        if rc == "124":
            return f"phase {ph} was killed at its time limit after {secs} s"
        if rc == "126":
            return (f"the guest kernel of phase {ph} splatted (oops/WARN) after {secs} s, "
                    f"console in raw/{self.kernel}/vm-{ph}.log")
        return f"phase {ph} exited {rc} after {secs} s"

    def status(self, r, ph):
        if r["status"].startswith("did not finish"):
            return "did not finish: " + self.rc_text(ph)
        return r["status"]

    def why_missing(self, k):
        r = self.rows.get(k)
        if r:
            return self.status(r, phase_of(k))
        ph = phase_of(k)
        if ph not in self.rc:
            return f"not run (phase {ph} was not part of this run)"
        rc, secs = self.rc[ph]
        if rc == "124":
            return f"not reached: phase {ph} hit its time limit ({secs} s under TCG)"
        return f"not reached: phase {ph} exited {rc}"


def seed_ratio(seed, num, den):
    if num in seed and den in seed:
        return seed[num][0] / seed[den][0]
    return None


def label(k):
    name, _, backend = k.partition("/")
    return f"{name} ({backend})" if backend else name


def row_order(runs, attr):
    """Row keys of every kernel's runs.<attr> dict, first seen first."""
    order = []
    for r in runs.values():
        for k in getattr(r, attr):
            if k not in order:
                order.append(k)
    return order


def trigger_section(runs, out, lines):
    ours = runs.get("ours")
    lines.append("## Trigger: M target calls/s seen by the attached program (seeds 000/001)\n")
    lines.append(
        "bench_trigger method (`bench/trigger`): a producer thread test-runs a raw_tp driver "
        "that calls `bpf_modify_return_test_tp()` 100× per run; the program under test bumps "
        "a per-CPU counter. Every tracing program checks `bpf_get_func_ip(ctx)` against the "
        "target (so a program on all functions counts only the target's calls, and every "
        "tracing row pays the same check); rawtp/tp count the `bpf_trigger_tp` tracepoint "
        "that the same function fires. Each row is checked to count exactly 100 calls per "
        "run before it is timed. Mean ± stddev over the samples of all rounds; `(0.97×)` is "
        "the median per-round ratio to the row's single-attach counterpart in the same guest "
        "run (see the headline).\n")
    present = [k for k in KERNELS if k in runs]
    for k in present:
        t = runs[k].trigger.get("rates")
        if t:
            lines.append(
                f"- {k}: {t['rounds']} round(s) × {t['samples']} sample(s) of "
                f"{t['duration_s']} s after {t['warmup']} warm-up sample(s), rows interleaved "
                f"per round, {t['cpus']} vCPUs, target `{t['target']}`")
    lines.append("")
    order = row_order(runs, "rows")
    hdr = ("| row | theirs: seed 000 (bare metal) | theirs: seed 001 slides (bare metal) | "
           + " | ".join(f"ours: {k} (guest)" for k in present) + " |")
    lines.append(hdr)
    lines.append("|---|---:|---:|" + "---:|" * len(present))
    for k in order:
        cells = [label(k)]
        for seed in (SEED_000, SEED_001):
            cells.append(fmt_rate(seed[k]) if k in seed else "")
        for kern in present:
            run = runs[kern]
            rate = run.rate(k)
            if rate:
                row = run.rows[k]
                s = fmt_rate(rate)
                if row.get("single"):
                    q = run.ratio(k, row["single"])
                    if q:
                        s += f" ({q[0]:.2f}×)"
                cells.append(s)
            else:
                cells.append(run.why_missing(k))
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    alls = []
    for kern in present:
        for k, r in runs[kern].rows.items():
            if r.get("all") and r["status"] == "ok":
                alls.append(f"{label(k)} on {kern}: {r['funcs']} functions, "
                            f"attached in {r['attach_s']:.2f} s")
    if alls:
        lines.append("-all rows: " + "; ".join(alls) + ".\n")
    lines.append(
        "The -all rows run in their own guest boot (phase `all`, or `allpf` for the "
        "per-function backend) together with the rows they are compared with; their ratio "
        "is taken within that boot. Other rows come from phase `rates`.\n")
    insn_table(runs, lines)

    # Plots: M/s per row (ours kernel), and multi/single ratios per kernel.
    if ours and ours.rows:
        keys = [k for k in ours.rows if not k.endswith("-count")]
        svgplot.hbar_groups(
            "Trigger rates in one guest run (QEMU TCG, our kernel)", "M calls/s",
            [label(k) for k in keys],
            [("ours (guest)", [(ours.rate(k) or (None,))[0] for k in keys],
              [(ours.rate(k) or (0, 0))[1] for k in keys])],
            os.path.join(out, "trigger-rates.svg"),
            note="Emulated CPU: compare rows with each other, not with bare metal.")
        lines.append("![trigger rates](trigger-rates.svg)\n")
    ratio_keys = [(n, d) for n, d in HEADLINE if n.split("/")[0].endswith(("multi", "multi-all"))
                  and any(runs[k].ratio(n, d) for k in present)]
    if ratio_keys:
        def half_iqr(q):
            return (q[2] - q[1]) / 2 if q else 0

        series = [(f"ours: {k} (guest)", [(runs[k].ratio(n, d) or (None,))[0]
                                          for n, d in ratio_keys],
                   [half_iqr(runs[k].ratio(n, d)) for n, d in ratio_keys])
                  for k in present]
        series.append(("theirs: seed 000 (bare metal)",
                       [seed_ratio(SEED_000, n, d) for n, d in ratio_keys], None))
        svgplot.hbar_groups(
            "multi / single, same run: median per-round ratio, bar = half the IQR", "ratio",
            [f"{label(n)} / {label(d)}" for n, d in ratio_keys], series,
            os.path.join(out, "trigger-ratios.svg"), ref=1.0)
        lines.append("![multi/single ratios](trigger-ratios.svg)\n")


# Hazard fields of bench/trigger's JSON: the first four per call, the others per window.
HAZARD_PER_CALL = ["indirect", "calls", "returns", "return_mispredicts"]
HAZARD_PER_WINDOW = ["code_lines", "data_lines", "indirect_sites", "indirect_targets",
                     "max_targets_per_site"]


def hazard_medians(insn, base):
    """{field: (row, hook)} of one row's hazards, medians over its repeats; hook = row
    minus the baseline's (max_targets_per_site: the row's own). None without hazards."""
    h, b = insn.get("hazards"), (base or {}).get("hazards")
    if not (h and b):
        return None
    out = {}
    for f in HAZARD_PER_CALL + HAZARD_PER_WINDOW:
        if not (h.get(f) and b.get(f)):
            return None
        v, bv = quantile(h[f], 0.5), quantile(b[f], 0.5)
        out[f] = (v, v if f == "max_targets_per_site" else v - bv)
    out["full"] = h.get("full", 0)
    return out


def hazard_cell(hz):
    """The report's hazard cell of a row: hook per call and per window."""
    c = (f"{hz['indirect'][1]:+.2f} ind, {hz['return_mispredicts'][1]:+.2f} ret miss, "
         f"{hz['code_lines'][1]:+.0f}/{hz['data_lines'][1]:+.0f} lines, "
         f"{hz['max_targets_per_site'][0]:.0f} max tgts")
    if hz["full"]:
        c += " (a set overflowed: lower bounds)"
    return c


def insn_table(runs, lines):
    present = [k for k in KERNELS if k in runs and runs[k].insn_base]
    if not present:
        return
    lines.append("### Instructions per target call (phase `insn`)\n")
    lines.append(
        "Same rows counted by the QEMU plugin (`vm/insn/README.md`): per repeat, many windows "
        "around one driver run making 25 calls and one making 50, the most frequent count "
        "of each (a window a timer tick or another interrupt hit counts more and differs "
        "from the others; windows are added until that count is clear), the difference / "
        "25: the target calls alone, without the "
        "syscall around them (nor, for -all rows, the hooks on the functions along it). The "
        "cell is the median over the repeats as *hook (total)*: total = the call with the "
        "driver's loop, hook = total minus the baseline (the driver alone); `×` = hook / "
        "the single counterpart's hook. Spread = (max − min) / median over the repeats.\n")
    for k in present:
        m, b = runs[k].insn_meta, runs[k].insn_base
        lines.append(f"- {k}: {m.get('insn_repeats')} repeats × {m.get('insn_windows')} "
                     f"windows per size, {m.get('cpus')} vCPUs (one host thread); baseline "
                     f"{b['per_call']:.2f} instructions per call, spread {b['spread']:.2%}, "
                     f"{b['undisturbed']}/{b['windows']} windows undisturbed")
    lines.append("")
    order = row_order(runs, "insn_rows")
    # kernels whose insn phase ran under vm/run --insn-hazards: a hazard column each
    hz = [k for k in present if (runs[k].insn_base or {}).get("hazards")]
    if hz:
        m = runs[hz[0]].insn_base["hazards"].get("window_calls", 25)
        lines.append(
            "Hazards (phase `insn` under `vm/run --insn-hazards`, `vm/insn/README.md` "
            "\"Hazards\"), the hook's (row minus baseline): *ind* = indirect branches per "
            "call (thunks included), *ret miss* = returns per call that a 16-entry return "
            "stack model mispredicts, *lines* = distinct 64-byte code / data lines a window "
            f"of {m} calls touches beyond the baseline's, *max tgts* = the most targets of "
            "one indirect site in that window (the row's own). Counted on the emulated CPU "
            "from the instruction stream: what hardware would face, not what it paid.\n")
    lines.append("| row | " + " | ".join(f"ours: {k}: hook (total), spread"
                                         + (f" | ours: {k}: hazards (hook)" if k in hz else "")
                                         for k in present) + " |")
    lines.append("|---|" + "---:|" * (len(present) + len(hz)))
    for k in order:
        cells = [label(k)]
        for kern in present:
            run = runs[kern]
            v = run.insn(k)
            h = run.hazards(k) if kern in hz else None
            if not v:
                cells.append(run.insn_why_missing(k))
                if kern in hz:
                    cells.append("")
                continue
            c = f"{v[1]:.2f} ({v[0]:.2f})"
            single = run.insn_rows[k].get("single")
            if single and run.insn_ratio(k, single):
                c += f" {run.insn_ratio(k, single):.3f}×"
            c += f", {v[2]:.2%}"
            if run.insn_rows[k]["insn"].get("unclear"):
                c += f" (no clear mode in {run.insn_rows[k]['insn']['unclear']} repeats)"
            cells.append(c)
            if kern in hz:
                cells.append(hazard_cell(h) if h else "")
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")


def headline_section(runs, lines):
    present = [k for k in KERNELS if k in runs]
    counted = [k for k in present if runs[k].insn_base]
    lines.append("## Headline: multi / single, instructions first\n")
    lines.append(
        "**Instructions** (first columns): guest instructions per target call counted by a "
        "QEMU TCG plugin (`vm/insn`, phase `insn`: `bench/trigger --insn`) minus the same "
        "driver with nothing attached, i.e. the hook's own instructions; the cell divides "
        "the hook instructions of two rows of one boot (the counts in brackets). They are "
        "exact per kernel build and do not move with the host's load (medians of repeats, "
        "spreads in the trigger section), but they are not times: instructions differ in "
        "cost. Where one call's instructions go: "
        + (", ".join(f"[insn-profile-{k}.md](insn-profile-{k}.md)" for k in counted
                     if runs[k].insn_meta.get("profile_copied")) or "no profile in this run")
        + ".\n")
    lines.append(
        "**Wall time** (next columns): each ratio divides two rows measured in one boot of one "
        "kernel: every round measures each row once, a row next to the one it is compared "
        "with, so both sides of a ratio see the same host load; the cell is the median of "
        "the per-round ratios with the 25th–75th percentile in brackets. The host is shared "
        "(2 cores, other guests and kernel builds running), so single samples swing "
        "several-fold and a wide bracket means the ratio is not resolved. Theirs are the "
        "seeds' bare-metal figures (ratios of their means). A rate ratio and an instruction "
        "ratio point opposite ways: 0.98 of the rate is about 1.02 of the instructions.\n")
    if not counted:
        lines.append("No instruction counts in this run: "
                     + "; ".join(f"{k}: {runs[k].rc_text('insn')}" for k in present) + ".\n")
    lines.append("| ratio | " + " | ".join(f"ours: {k}, instructions" for k in counted)
                 + (" | " if counted else "")
                 + " | ".join(f"ours: {k}, wall time" for k in present)
                 + " | theirs: seed 000 | theirs: seed 001 | target |")
    lines.append("|---|" + "---:|" * (len(counted) + len(present)) + "---:|---:|---|")
    for num, den in HEADLINE:
        cells = [f"{label(num)} / {label(den)}"]
        for k in counted:
            q = runs[k].insn_ratio(num, den)
            a, b = runs[k].insn(num), runs[k].insn(den)
            cells.append(f"**{q:.3f}** ({a[1]:.1f} / {b[1]:.1f})" if q else "n/a")
        for k in present:
            q = runs[k].ratio(num, den)
            cells.append(f"{q[0]:.3f} [{q[1]:.2f}–{q[2]:.2f}], {q[3]} rounds" if q else "n/a")
        for seed in (SEED_000, SEED_001):
            q = seed_ratio(seed, num, den)
            cells.append(f"{q:.3f}" if q else "")
        targets = []
        t = INSN_TARGETS.get((num, den))
        if t:
            v = runs["ours"].insn_ratio(num, den) if "ours" in runs else None
            if v:
                ok = v <= 1.02 if t.startswith("<=") else abs(v - 1) <= 0.02
                t += " — " + ("met" if ok else "not met") + " on ours"
            targets.append("instructions " + t)
        t = TARGETS.get((num, den))
        if t:
            v = runs["ours"].ratio(num, den) if "ours" in runs else None
            if v:
                ok = v[0] >= 0.98 if t.startswith(">=") else abs(v[0] - 1) <= 0.02
                t += " — " + ("met" if ok else "not met") + " on ours"
            targets.append("wall time " + t)
        cells.append("; ".join(targets))
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("n/a: one of the two rows is not available on that kernel or failed (the "
                 "trigger section says which and why).\n")


def attach_section(runs, out, lines):
    present = [k for k in KERNELS if k in runs]
    lines.append("## Attach: time and kernel memory for 1, 1000, 10,000 and all functions\n")
    lines.append(
        "`bench/attach`: one empty program attached to the first N safe traceable functions "
        "(BTF order), per engine: `global` = tracing multi-link through the series' global "
        "trampoline, `tracing_multi` = upstream tracing multi-link (a trampoline per function), "
        "`kprobe.multi`, `fentry` = one program and one link per function (its program loads "
        "are timed separately as *load*). Kernel memory = change of Slab + VmallocUsed + Percpu "
        "in /proc/meminfo from before the load to after the attach; *avail* = drop of "
        "MemAvailable (cross-check); *left* = what is still allocated after the detach once "
        "kernel memory stops shrinking (deferred frees; also waited for before each row, at "
        "most ~15 s). Each engine is attached once on one function first so one-time "
        "setup is not billed to a row. The same attaches counted in guest instructions, "
        "symbol by symbol (`bench/attach --insn`): [attach-insn.md](attach-insn.md).\n")
    lines.append("| what | theirs (seed 001, bare metal) | "
                 + " | ".join(f"ours: {k} (guest)" for k in present) + " |")
    lines.append("|---|---|" + "---|" * len(present))

    def cell(k, engine, want_all, n=None):
        for r in runs[k].attach_results:
            total = runs[k].attach_info["funcs_total"] if runs[k].attach_info else -1
            if r["engine"] == engine and (r["want"] == total if want_all else r["want"] == n):
                if r["status"] == "ok":
                    return (f"{r['attach_s']:.2f} s attach ({r['got']} functions)"
                            + (f" + {r['load_s']:.2f} s loading programs"
                               if engine == "fentry" else ""))
                return runs[k].status(r, r["phase"])
        return "not measured"

    lines.append("| global trampoline, all functions | 0.328 s for 50,000 functions | "
                 + " | ".join(cell(k, "global", True) for k in present) + " |")
    lines.append("| one fentry per function, 1000 functions | ~60 s (before the single "
                 "direct ftrace_ops) | "
                 + " | ".join(cell(k, "fentry", False, 1000) for k in present) + " |")
    lines.append("")
    for k in present:
        a = runs[k].attach_info
        if not a:
            lines.append(f"### {k}\n\nno attach results (guest phases: {runs[k].rc}).\n")
            continue
        lines.append(f"### {k} ({a['kernel']}, guest): {a['funcs_total']} safe traceable "
                     f"functions with up to {a['max_args']} arguments\n")
        for ph in ("attach", "all", "allpf"):
            if ph in runs[k].rc and runs[k].rc[ph][0] != "0":
                lines.append(f"Note: {runs[k].rc_text(ph)}.\n")
        lines.append("| engine | functions | load s | attach s | detach s | kernel mem MB | "
                     "MemAvailable drop MB | left after detach MB | status |")
        lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---|")
        for r in runs[k].attach_results:
            if r["got"]:
                lines.append(
                    f"| {r['engine']} | {r['got']} | {r['load_s']:.3f} | {r['attach_s']:.3f} | "
                    f"{r['detach_s']:.3f} | {r['kmem_kb'] / 1024:.1f} | "
                    f"{r['avail_kb'] / 1024:.1f} | {r['left_kb'] / 1024:.1f} | "
                    f"{status_text(r['status'])} |")
            else:
                lines.append(f"| {r['engine']} | {r['want']} | | | | | | | "
                             f"{runs[k].status(r, r['phase'])} |")
        lines.append("")
        res = {(r["engine"], r["want"]): r for r in runs[k].attach_results
               if r["status"] == "ok"}
        total = a["funcs_total"]
        g, u = res.get(("global", total)), res.get(("tracing_multi", total))
        if g and u:
            tg = g["attach_s"] + g["detach_s"]
            tu = u["attach_s"] + u["detach_s"]
            mem = (f"{u['kmem_kb'] / g['kmem_kb']:.1f}× less kernel memory"
                   if g["kmem_kb"] > 0 else
                   f"kernel memory {g['kmem_kb']} kB vs {u['kmem_kb']} kB")
            lines.append(f"All {total} functions on {k}: global backend attach+detach "
                         f"{tg:.2f} s vs upstream {tu:.2f} s = {tu / tg:.1f}× faster, {mem} "
                         "(targets, issue 5: ≥ 5× faster, ≥ 10× less memory).\n")
        series = {}
        for r in runs[k].attach_results:
            if r["got"] and not r["status"].startswith("error"):
                series.setdefault(r["engine"], []).append((r["got"], r))
        if series:
            svgplot.loglog_lines(
                f"Attach + detach time, {k} (guest)", "functions", "seconds",
                [(e, [(n, r["attach_s"] + r["detach_s"] + r["load_s"]) for n, r in s])
                 for e, s in series.items()], os.path.join(out, f"attach-time-{k}.svg"),
                note="Includes program load (one per function for fentry). QEMU TCG.")
            svgplot.loglog_lines(
                f"Kernel memory (Slab+Vmalloc+Percpu), {k}", "functions", "kB",
                [(e, [(n, r["kmem_kb"]) for n, r in s]) for e, s in series.items()],
                os.path.join(out, f"attach-memory-{k}.svg"),
                note="Points with no measurable growth (<= 0 kB) are not drawn.")
            lines.append(f"![attach time {k}](attach-time-{k}.svg) "
                         f"![attach memory {k}](attach-memory-{k}.svg)\n")


def others_section(out, raw, meta, lines):
    start = float(meta.get("start", "0") or 0)
    for name, title in OTHERS:
        lines.append(f"## {title}\n")
        # A benchmark of a feature issue has no seed figures to set beside it.
        if name in SEED_OTHERS:
            lines.append("Theirs (the seed, bare metal):\n")
            lines.append("| what | theirs |")
            lines.append("|---|---|")
            for what, v in SEED_OTHERS[name]:
                lines.append(f"| {what} | {v} |")
            lines.append("")
        rc = (read_text(os.path.join(raw, f"{name}.rc")) or "").split()
        md = os.path.join(out, f"{name}.md")
        if not rc:
            lines.append(f"Ours: not run in this report (`bench/{name}/run.sh`).\n")
            continue
        if rc[0] == "missing":
            lines.append(f"Ours: not built yet (`bench/{name}/run.sh` does not exist).\n")
            continue
        began = float(rc[2]) if len(rc) > 2 else start
        fresh = os.path.exists(md) and os.path.getmtime(md) >= began
        if rc[0] != "0":
            lines.append(f"Ours: `bench/{name}/run.sh` failed (exit {rc[0]}); its log is "
                         f"`raw/{name}.log`.")
            if os.path.exists(md) and not fresh:
                lines.append(f" `{name}.md` is from an earlier run and is not included.")
            lines.append("\n")
            continue
        if not fresh:
            lines.append(f"Ours: `bench/{name}/run.sh` succeeded but wrote no fresh "
                         f"`{name}.md`.\n")
            continue
        lines.append(f"Ours (`bench/{name}/run.sh`, {rc[1] if len(rc) > 1 else '?'} s; "
                     f"full table in [{name}.md]({name}.md)):\n")
        for line in read_text(md).splitlines():
            # demote its headings below this section's
            lines.append("#" + line if line.startswith("#") else line)
        lines.append("")


def crashes_section(out, lines):
    """Guest kernel crashes kept from runs of this harness (bench/results/crashes/)."""
    d = os.path.join(out, "crashes")
    if not os.path.isdir(d):
        return
    lines.append("## Guest kernel crashes seen while benchmarking\n")
    lines.append("Console logs kept in `crashes/` (kernel bugs to look at, not results):\n")
    for name in sorted(os.listdir(d)):
        text = read_text(os.path.join(d, name)) or ""
        first = next((ln[2:] for ln in text.splitlines() if ln.startswith("# ")), "")
        lines.append(f"- [{name}](crashes/{name}): {first.strip()}")
    lines.append("")


def write_insn_json(runs, out, meta):
    """insn.json: per kernel, per row, instructions per call with what they ran on."""
    doc = {"generated": meta.get("date"), "bench_commit": meta.get("commit"),
           "mode": meta.get("mode"),
           "unit": "guest instructions per target call (xdpchain: per packet)",
           "method": "vm/insn/README.md; insns_per_call is the median over runs, spread = "
                     "(max - min) / median, hook = minus the baseline", "kernels": {}}
    for k, r in runs.items():
        if not (r.insn_base or r.xdp_insn):
            continue    # (an xdpchain file alone still names its kernel below)
        kd = {"uname": r.insn_meta.get("kernel") or r.guest.get("uname"),
              "image_sha256": r.meta.get("image sha256"),
              "commit": r.meta.get("kernel commit"), "rows": {}}
        if r.insn_base:
            b = r.insn_base
            kd["baseline"] = {"insns_per_call": b["per_call"], "spread": b["spread"],
                              "runs": b["runs"]}
            for key_, row in r.insn_rows.items():
                v = r.insn(key_)
                if v:
                    kd["rows"][key_] = {"insns_per_call": v[0],
                                        "hook_insns_per_call": round(v[1], 4),
                                        "spread": v[2], "runs": v[3]}
                    hz = r.hazards(key_)
                    if hz:  # medians: (row, hook)
                        kd["rows"][key_]["hazards"] = {
                            f: {"row": round(hz[f][0], 4), "hook": round(hz[f][1], 4)}
                            for f in HAZARD_PER_CALL + HAZARD_PER_WINDOW}
                else:
                    kd["rows"][key_] = {"status": r.insn_why_missing(key_)}
        rc = (read_text(os.path.join(out, "raw", "xdpchain.rc")) or "").split()
        xdp_file = os.path.join(out, "raw", k, "xdpchain-insn.json")
        fresh = (len(rc) > 2 and rc[0] == "0" and os.path.exists(xdp_file)
                 and os.path.getmtime(xdp_file) >= float(rc[2]))
        if r.xdp_insn and fresh:
            kd["xdpchain"] = {x["name"]: {"insns_per_packet": x["insns_per_packet"],
                                          "added_per_hop": x["added_per_hop"],
                                          "spread": x["spread"], "runs": x["runs"]}
                              for x in r.xdp_insn.get("rows", [])}
        doc["kernels"][k] = kd
    with open(os.path.join(out, "insn.json"), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = os.path.abspath(sys.argv[1])
    raw = os.path.join(out, "raw")
    meta = kv_lines(read_text(os.path.join(raw, "meta.txt")))
    runs = {k: Run(raw, k) for k in KERNELS if os.path.isdir(os.path.join(raw, k))}
    lines = ["# bpfmux benchmarks\n"]
    quick = meta.get("mode") == "--quick"
    lines.append(
        f"Generated by `make bench{'-quick' if quick else ''}` (`bench/run.sh`) on "
        f"{meta.get('date', '?')}, commit `{meta.get('commit', '?')[:12]}` "
        f"({meta.get('tree', '?')}).\n")
    if meta.get("start", "").isdigit() and meta.get("end", "").isdigit():
        took = int(meta["end"]) - int(meta["start"])
        lines.append(f"Every part of it ran in this one run, which took {took // 60} min "
                     f"{took % 60} s from start to end.\n")
    lines.append(
        "**Every guest number is emulated**: the kernels run under QEMU TCG (no KVM; the host "
        "refuses trampoline BPF), so absolute rates and times are far below bare metal and "
        "drift with the host's load. Read the **ratios measured in the same guest run**; the "
        "seeds' published figures are shown next to ours as *theirs (bare metal)* for "
        "orientation only.\n")
    if quick:
        lines.append("**Quick mode**: very short samples and few functions; it checks that "
                     "the harness runs end to end, its numbers are not results.\n")
    lines.append("## What it ran on\n")
    lines.append(f"- host: {meta.get('host', '?')}")
    for k in KERNELS:
        if k in runs:
            r = runs[k]
            lines.append(f"- **{k}**: `{r.guest.get('uname', 'did not boot')}`, "
                         f"{r.meta.get('image', '?')}")
            for item in ("tree", "config", "host load at start"):
                if item in r.meta:
                    lines.append(f"  - {item}: {r.meta[item]}")
            lines.append(f"  - guest: {r.guest.get('cpus', '?')} vCPUs, "
                         f"{r.guest.get('memory', '?')}, cmdline `{r.guest.get('cmdline', '?')}`")
            lines.append("  - in available_filter_functions (a real call with an ftrace site): "
                         + ", ".join(r.ftrace or ["?"]))
            lines.append("  - guest boots (phases): "
                         + (", ".join(f"{ph}: exit {v[0]} after {v[1]} s, {r.vcpus[ph]} vCPU"
                                      for ph, v in r.rc.items()) or "none"))
    lines.append("")
    for k, r in runs.items():
        src = os.path.join(raw, k, "insn-profile.md")
        if r.insn_base and os.path.exists(src):
            shutil.copyfile(src, os.path.join(out, f"insn-profile-{k}.md"))
            r.insn_meta["profile_copied"] = True
    write_insn_json(runs, out, meta)
    headline_section(runs, lines)
    trigger_section(runs, out, lines)
    attach_section(runs, out, lines)
    others_section(out, raw, meta, lines)
    crashes_section(out, lines)
    with open(os.path.join(out, "REPORT.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
