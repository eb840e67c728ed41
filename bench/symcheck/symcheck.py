#!/usr/bin/env python3
"""How many addresses inside libc's functions `bpfmux sym` leaves unnamed or
names wrongly, next to addr2line (binutils) and eu-addr2line (elfutils) on
the same addresses.

The functions come from readelf: every defined FUNC/IFUNC symbol with a size,
from libc's .dynsym and, when the detached debug file is installed (Debian:
libc6-dbg), its full .symtab. Three addresses per distinct function range:
first byte, middle, last byte. An answer is right when it names one of the
symbols whose range covers the address (aliases, and a `.cold` part counts as
its own name). The target process is a `sleep` that maps libc.

Usage: symcheck.py BPFMUX [--out FILE]
"""
import os
import re
import subprocess
import sys
import time

LIBC = os.path.realpath("/lib/x86_64-linux-gnu/libc.so.6")
CHUNK = 4000


def run(cmd, stdin=None):
    return subprocess.run(cmd, input=stdin, capture_output=True, text=True, check=True).stdout


def build_id(path):
    out = run(["readelf", "-nW", path])
    m = re.search(r"Build ID: ([0-9a-f]+)", out)
    return m.group(1) if m else None


def debug_file(path):
    bid = build_id(path)
    if not bid:
        return None
    p = f"/usr/lib/debug/.build-id/{bid[:2]}/{bid[2:]}.debug"
    return p if os.path.exists(p) else None


def func_symbols(path):
    """(value, size, name) of defined FUNC/IFUNC symbols with a size."""
    out = run(["readelf", "-sW", path])
    syms = []
    for line in out.splitlines():
        f = line.split()
        if len(f) < 8 or not f[0].endswith(":"):
            continue
        _, value, size, typ, _bind, _vis, ndx, name = f[:8]
        if typ not in ("FUNC", "IFUNC") or ndx == "UND":
            continue
        size = int(size, 0) if size.startswith("0x") else int(size)
        if size == 0:
            continue
        syms.append((int(value, 16), size, name.split("@")[0]))
    return syms


def plt_stubs(path):
    """(address, objdump's synthetic name) of every PLT stub."""
    out = run(["objdump", "-d", "-j", ".plt", "-j", ".plt.sec", "-j", ".plt.got", path])
    stubs = []
    for line in out.splitlines():
        m = re.match(r"^([0-9a-f]+) <(.*@plt)>:$", line)
        if m:
            stubs.append((int(m.group(1), 16), m.group(2)))
    return stubs


def libc_base(pid):
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and parts[5] == LIBC and int(parts[2], 16) == 0:
                return int(parts[0].split("-")[0], 16)
    raise SystemExit("libc not mapped in the target")


def first_word(s):
    return s.split()[0] if s.split() else s


def main():
    bpfmux = sys.argv[1]
    out_path = sys.argv[sys.argv.index("--out") + 1] if "--out" in sys.argv else None
    dbg = debug_file(LIBC)
    syms = func_symbols(LIBC) + (func_symbols(dbg) if dbg else [])
    ranges = {}
    for v, s, n in syms:
        ranges.setdefault((v, s), set()).add(n)
    # Every name covering an address (for the "right name" check).
    spans = sorted(ranges.items())
    addrs = sorted({a for (v, s) in ranges for a in (v, v + s // 2, v + s - 1)})
    # PLT stubs: first and sixth byte of each (.plt.got stubs are 8 bytes).
    stubs = {a + d: name for a, name in plt_stubs(LIBC) for d in (0, 5)}
    addrs = sorted(set(addrs) | set(stubs))

    def covering(a):
        names = set()
        for (v, s), ns in spans:
            if v > a:
                break
            if a < v + s:
                names |= ns
        return names

    import bisect
    starts = [v for (v, _), _ in spans]
    maxsize = max(s for (_, s) in ranges)

    def covering_fast(a):
        names = set()
        i = bisect.bisect_right(starts, a)
        j = i - 1
        while j >= 0 and starts[j] + maxsize > a:
            (v, s), ns = spans[j]
            if a < v + s:
                names |= ns
            j -= 1
        return names

    target = subprocess.Popen(["sleep", "600"])
    try:
        time.sleep(0.2)
        base = libc_base(target.pid)
        answers = {}
        t0 = time.monotonic()
        for i in range(0, len(addrs), CHUNK):
            chunk = addrs[i:i + CHUNK]
            out = run([bpfmux, "sym", "--pid", str(target.pid)] + [hex(base + a) for a in chunk])
            # One line per address; inlined calls follow, indented.
            heads = [l for l in out.splitlines() if not l.startswith(" ")]
            for a, line in zip(chunk, heads):
                rest = line.split(None, 1)[1] if " " in line else ""
                answers[a] = rest
        bpfmux_s = time.monotonic() - t0
    finally:
        target.kill()
        target.wait()

    def base(name):
        """A compiler clone (`f.cold`, `f.part.0`, `f.isra.0`) is named `f`
        in DWARF: compare names without the suffix."""
        return name.split("@")[0].split(".")[0]

    def right(name, a):
        return base(name) in {base(n) for n in covering_fast(a)}

    def plt_right(got, want):
        """objdump names ifunc stubs *ABS*+0xRESOLVER@plt; bpfmux names
        them after the resolver's symbol. Others must match exactly."""
        return got == want or (want.startswith("*ABS*") and got.endswith("@plt"))

    rows = {}
    plt_rows = {}
    # bpfmux
    miss = wrong = 0
    pm = pw = 0
    examples_miss, examples_wrong = [], []
    for a in sorted(stubs):
        ans = answers.get(a, "")
        if ans.startswith("??") or ans.startswith("unmapped") or not ans:
            pm += 1
        elif not plt_right(first_word(ans).rsplit("+0x", 1)[0], stubs[a]):
            pw += 1
            if len(examples_wrong) < 8:
                examples_wrong.append(f"{a:#x} [{stubs[a]}]: {ans}")
    plt_rows["bpfmux sym"] = (pm, pw)
    for a in addrs:
        if a in stubs:
            continue
        ans = answers.get(a, "")
        if ans.startswith("??") or ans.startswith("unmapped") or not ans:
            miss += 1
            if len(examples_miss) < 8:
                examples_miss.append(f"{a:#x} {sorted(covering_fast(a))[:2]}: {ans}")
            continue
        name = first_word(ans).rsplit("+0x", 1)[0]
        if not right(name, a):
            wrong += 1
            if len(examples_wrong) < 8:
                examples_wrong.append(f"{a:#x} {sorted(covering_fast(a))[:2]}: {ans}")
    rows["bpfmux sym"] = (miss, wrong)

    for tool, cmd in (("addr2line (binutils)", ["addr2line", "-f", "-e", LIBC]),
                      ("eu-addr2line (elfutils)", ["eu-addr2line", "-f", "-e", LIBC])):
        try:
            out = run(cmd, stdin="".join(f"{a:#x}\n" for a in addrs)).splitlines()
        except (FileNotFoundError, subprocess.CalledProcessError) as e:
            rows[tool] = None
            print(f"{tool}: {e}", file=sys.stderr)
            continue
        names = out[0::2]
        m = w = 0
        pm = pw = 0
        for a, n in zip(addrs, names):
            n = n.strip()
            if a in stubs:
                if n in ("??", ""):
                    pm += 1
                elif not plt_right(n, stubs[a]):
                    pw += 1
                continue
            if n in ("??", ""):
                m += 1
            elif not right(n, a):
                w += 1
        rows[tool] = (m, w)
        plt_rows[tool] = (pm, pw)

    lines = [
        "# sym miss rate on libc",
        "",
        "Generated by `bench/symcheck/run.sh` on the host.",
        "",
        f"- libc: `{LIBC}` (build ID {build_id(LIBC)}), debug file: "
        f"{'`' + dbg + '`' if dbg else 'not installed'}",
        f"- functions: {len(ranges)} distinct sized FUNC/IFUNC ranges (readelf: .dynsym"
        f"{' + debug .symtab' if dbg else ''}); addresses: {len(addrs) - len(stubs)} (first, middle, last byte)",
        f"- bpfmux sym: {bpfmux_s:.1f} s for all addresses ({CHUNK} per call)",
        "",
        "| tool | no name | wrong name | miss rate |",
        "|---|---:|---:|---:|",
    ]
    for tool, r in rows.items():
        if r is None:
            lines.append(f"| {tool} | not available | | |")
        else:
            nf = len(addrs) - len(stubs)
            lines.append(f"| {tool} | {r[0]} | {r[1]} | {100.0 * r[0] / nf:.3f}% |")
    nf = len(addrs) - len(stubs)
    lines = [l.replace("| miss rate |", f"| miss rate (of {nf}) |") for l in lines]
    lines += [
        "",
        f"PLT stubs ({len(stubs)} addresses: first and sixth byte of each of "
        f"{len(stubs) // 2} stubs objdump names):",
        "",
        "| tool | no name | wrong name |",
        "|---|---:|---:|",
    ]
    for tool, r in plt_rows.items():
        lines.append(f"| {tool} | {r[0]} | {r[1]} |")
    lines += ["", "A wrong name is one that is not the name of any symbol covering the address "
              "(compared without clone suffixes such as `.cold`, `.part.0`). addr2line and "
              "eu-addr2line name the innermost inlined function, which is often not a "
              "symbol: their wrong names are mostly that.", ""]
    if examples_miss:
        lines += ["bpfmux misses (first few):", "", "```"] + examples_miss + ["```", ""]
    if examples_wrong:
        lines += ["bpfmux wrong names (first few):", "", "```"] + examples_wrong + ["```", ""]
    text = "\n".join(lines)
    print(text)
    if out_path:
        with open(out_path, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
