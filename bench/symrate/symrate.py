#!/usr/bin/env python3
"""Symbolization throughput: `bpfmux sym --pid` next to `blazecli symbolize process` on the
same addresses of one live process (python3 sleeping), host only.

The addresses: N (default 1,000,000) drawn with a fixed seed, uniformly over the bytes of the
process's executable file mappings (python3, libc, libm, libz, libexpat, ld.so; not the
vDSO). Each tool runs R times (default 3) in two ways:
  - batches: both tools get the addresses as arguments, B (default 20,000) per invocation,
    one invocation after the other (blazecli reads no standard input), so both pay their
    start and their parse of each file once per batch;
  - stream (bpfmux only): all N on standard input, one invocation.
Reported: addresses per second (median of the runs), how many answers named a symbol, and
the agreement of the two tools' names on the addresses both named (names compared without
clone suffixes such as .cold or .part.0 and without versions such as @@GLIBC_2.2.5).
Then the same addresses as recorded frames keep them, (file, file offset), with no
process: `bpfmux sym --file PATH --file-offsets` next to `blazecli symbolize elf --path
PATH` (given the same places as virtual addresses, which it takes), per file, in batches of
B for both and, for bpfmux, all of a file's offsets on standard input.
Raw numbers go to --raw as JSON, the table to --out.

usage: symrate.py BPFMUX BLAZECLI --out FILE.md --raw DIR [--count N] [--runs R] [--batch B]
"""
import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import time


def executable_mappings(pid):
    maps = []
    for line in open(f"/proc/{pid}/maps"):
        f = line.split()
        if len(f) >= 6 and "x" in f[1] and f[5].startswith("/"):
            lo, hi = (int(x, 16) for x in f[0].split("-"))
            maps.append((lo, hi, f[5]))
    return maps


def file_offsets(pid, addrs):
    """{path: [file offset of each address in that file's mappings]} (in draw order)."""
    maps = []
    for line in open(f"/proc/{pid}/maps"):
        f = line.split()
        if len(f) >= 6 and "x" in f[1] and f[5].startswith("/"):
            lo, hi = (int(x, 16) for x in f[0].split("-"))
            maps.append((lo, hi, int(f[2], 16), f[5]))
    out = {}
    for a in addrs:
        lo, _, off, path = next(m for m in maps if m[0] <= a < m[1])
        out.setdefault(path, []).append(a - lo + off)
    return out


def load_segments(path):
    """PT_LOAD segments of an ELF file: (file offset, file size, virtual address)."""
    p = subprocess.run(["readelf", "-lW", path], capture_output=True, text=True, check=True)
    segs = []
    for line in p.stdout.splitlines():
        f = line.split()
        if f and f[0] == "LOAD":
            segs.append((int(f[1], 16), int(f[4], 16), int(f[2], 16)))
    return segs


def vaddr_of(segs, off):
    """The virtual address of a file offset: by the last segment starting at or below it (an
    offset in a mapping's page past the segment's bytes stays past them)."""
    o, _, v = max((s for s in segs if s[0] <= off), key=lambda s: s[0])
    return v + off - o


def draw(maps, n, seed):
    rnd = random.Random(seed)
    total = sum(hi - lo for lo, hi, _ in maps)
    out = []
    for _ in range(n):
        k = rnd.randrange(total)
        for lo, hi, _ in maps:
            if k < hi - lo:
                out.append(lo + k)
                break
            k -= hi - lo
    return out


def base(name):
    name = name.split("@")[0]
    return re.sub(r"\.(cold|part|isra|constprop|lto_priv|llvm)(\.\d+)*$", "", name)


ANSWER = re.compile(r"^(0x[0-9a-f]+):?\s+(\S+)")


def parse_bpfmux(text):
    """{addr: name or None} from bpfmux sym's text output (inlined lines skipped)."""
    out = {}
    for line in text.splitlines():
        m = ANSWER.match(line)
        if not m:
            continue
        name = m.group(2).split("+")[0]
        if name in ("??", "unmapped"):
            out[int(m.group(1), 16)] = None
        else:
            # A PLT stub keeps its "@plt" (base() would leave it off).
            out[int(m.group(1), 16)] = name if name.endswith("@plt") else base(name)
    return out


def parse_blazecli(text):
    """{addr: name or None} from blazecli's output: '0xADDR: name @ 0x...+0x.. file:line',
    '0xADDR: <no-symbol>' ; inlined calls are indented lines."""
    out = {}
    for line in text.splitlines():
        if not line.startswith("0x"):
            continue
        addr, _, rest = line.partition(":")
        rest = rest.strip()
        name = rest.split(" @ ")[0].strip() if " @ " in rest else None
        out[int(addr, 16)] = base(name) if name else None
    return out


def timed(cmd, stdin=None):
    t = time.monotonic()
    p = subprocess.run(cmd, input=stdin, capture_output=True, text=True)
    dt = time.monotonic() - t
    if p.returncode != 0:
        sys.exit(f"symrate: {' '.join(cmd[:4])} ... exited {p.returncode}: {p.stderr[-500:]}")
    return dt, p.stdout


def batches(addrs, b):
    for i in range(0, len(addrs), b):
        yield [hex(a) for a in addrs[i:i + b]]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bpfmux")
    ap.add_argument("blazecli")
    ap.add_argument("--out", required=True)
    ap.add_argument("--raw", required=True)
    ap.add_argument("--count", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=20_000)
    a = ap.parse_args()

    target = subprocess.Popen(["python3", "-c", "import time; time.sleep(3600)"])
    try:
        time.sleep(0.5)
        maps = executable_mappings(target.pid)
        addrs = draw(maps, a.count, seed=1)
        runs = {"bpfmux batches": [], "blazecli batches": [], "bpfmux stream": []}
        answers = {}
        for r in range(a.runs):
            for tool, exe in (("bpfmux", a.bpfmux), ("blazecli", a.blazecli)):
                total, text = 0.0, []
                for b in batches(addrs, a.batch):
                    cmd = ([exe, "sym", "--pid", str(target.pid), *b] if tool == "bpfmux" else
                           [exe, "symbolize", "process", "--pid", str(target.pid), *b])
                    dt, out = timed(cmd)
                    total += dt
                    text.append(out)
                runs[f"{tool} batches"].append(total)
                if r == 0:
                    answers[tool] = (parse_bpfmux if tool == "bpfmux" else parse_blazecli)(
                        "\n".join(text))
                print(f"run {r}: {tool} batches {total:.2f} s", flush=True)
            dt, out = timed([a.bpfmux, "sym", "--pid", str(target.pid)],
                            stdin="".join(f"{x:#x}\n" for x in addrs))
            runs["bpfmux stream"].append(dt)
            if r == 0:
                answers["bpfmux stream"] = parse_bpfmux(out)
            print(f"run {r}: bpfmux stream {dt:.2f} s", flush=True)
        by_file = file_offsets(target.pid, addrs)
    finally:
        target.kill()
        target.wait()

    # Recorded frames: (file, offset), no process.
    segs = {p: load_segments(p) for p in by_file}
    vaddrs = {p: [vaddr_of(segs[p], o) for o in offs] for p, offs in by_file.items()}
    for k in ("bpfmux files batches", "blazecli files batches", "bpfmux files stream"):
        runs[k] = []
    file_answers = {}
    for r in range(a.runs):
        for tool, exe in (("bpfmux", a.bpfmux), ("blazecli", a.blazecli)):
            total, got = 0.0, {}
            for path, offs in by_file.items():
                given = offs if tool == "bpfmux" else vaddrs[path]
                for b in batches(given, a.batch):
                    cmd = ([exe, "sym", "--file", path, "--file-offsets", *b] if tool == "bpfmux"
                           else [exe, "symbolize", "elf", "--path", path, *b])
                    dt, out = timed(cmd)
                    total += dt
                    if r == 0:
                        names = (parse_bpfmux if tool == "bpfmux" else parse_blazecli)(out)
                        back = dict(zip(vaddrs[path], offs)) if tool == "blazecli" else None
                        for x, n in names.items():
                            got[(path, back[x] if back else x)] = n
            runs[f"{tool} files batches"].append(total)
            if r == 0:
                file_answers[tool] = got
            print(f"run {r}: {tool} files batches {total:.2f} s", flush=True)
        total, got = 0.0, {}
        for path, offs in by_file.items():
            dt, out = timed([a.bpfmux, "sym", "--file", path, "--file-offsets"],
                            stdin="".join(f"{x:#x}\n" for x in offs))
            total += dt
            if r == 0:
                got.update({(path, x): n for x, n in parse_bpfmux(out).items()})
        runs["bpfmux files stream"].append(total)
        if r == 0:
            file_answers["bpfmux stream"] = got
        print(f"run {r}: bpfmux files stream {total:.2f} s", flush=True)

    distinct = sorted(set(addrs))
    ours, theirs = answers["bpfmux"], answers["blazecli"]
    both = [x for x in distinct if ours.get(x) and theirs.get(x)]
    same = lambda x: ours[x].removesuffix("@plt") == theirs[x]  # noqa: E731
    agree = sum(1 for x in both if same(x))
    differ = [(hex(x), ours[x], theirs[x]) for x in both if not same(x)]
    plt = sum(1 for _, o, _ in differ if o.endswith("@plt"))
    res = {
        "count": len(addrs), "distinct": len(distinct), "batch": a.batch, "runs": a.runs,
        "mappings": [{"start": hex(lo), "end": hex(hi), "path": p} for lo, hi, p in maps],
        "seconds": runs,
        "rate_median": {k: len(addrs) / statistics.median(v) for k, v in runs.items()},
        "named": {
            "bpfmux": sum(1 for x in distinct if ours.get(x)),
            "blazecli": sum(1 for x in distinct if theirs.get(x)),
            "bpfmux stream": sum(1 for x in distinct if answers["bpfmux stream"].get(x)),
        },
        "answered": {k: len(v) for k, v in answers.items()},
        "files": {
            "places": sum(len(v) for v in by_file.values()),
            "distinct": len({(p, o) for p, offs in by_file.items() for o in offs}),
            "named": {k: sum(1 for n in v.values() if n) for k, v in file_answers.items()},
            "both_named": sum(1 for k, n in file_answers["bpfmux"].items()
                              if n and file_answers["blazecli"].get(k)),
            "same_name": sum(1 for k, n in file_answers["bpfmux"].items()
                             if n and file_answers["blazecli"].get(k)
                             and n.removesuffix("@plt") == file_answers["blazecli"][k]),
        },
        "both_named": len(both), "same_name": agree, "differ": len(differ),
        "differ_bpfmux_plt": plt, "differ_sample": differ[:20] + [d for d in differ
                                                                 if not d[1].endswith("@plt")][:20],
        "versions": {
            "bpfmux": subprocess.run([a.bpfmux, "--version"], capture_output=True,
                                     text=True).stdout.strip(),
            "blazecli": subprocess.run([a.blazecli, "--version"], capture_output=True,
                                       text=True).stdout.strip(),
        },
        "host": os.uname().release, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    os.makedirs(a.raw, exist_ok=True)
    with open(os.path.join(a.raw, "symrate.json"), "w") as f:
        json.dump(res, f, indent=1)

    rate = res["rate_median"]
    lines = [
        "# Symbolization throughput: bpfmux sym next to blazecli",
        "",
        f"Generated by `bench/symrate/run.sh` on the host ({res['date']}, kernel {res['host']}); "
        f"raw numbers: `{os.path.join(a.raw, 'symrate.json')}`.",
        "",
        f"- {res['count']:,} addresses ({res['distinct']:,} distinct) drawn uniformly over the "
        f"executable file mappings of a sleeping python3 ({len(maps)} mappings: "
        + ", ".join(sorted({os.path.basename(p) for _, _, p in maps})) + ")",
        f"- each tool {a.runs} times; batches: {a.batch:,} addresses as arguments per "
        "invocation, one after the other (blazecli reads no standard input); stream: all on "
        "bpfmux's standard input",
        f"- {res['versions']['bpfmux']}; {res['versions']['blazecli']}",
        "",
        "| tool, mode | median s | addresses/s | ratio to blazecli | named (of distinct) |",
        "|---|---:|---:|---:|---:|",
    ]
    for k in ("bpfmux batches", "blazecli batches", "bpfmux stream"):
        tool = k.split()[0] if k != "bpfmux stream" else "bpfmux stream"
        lines.append(f"| {k} | {statistics.median(runs[k]):.2f} | {rate[k]:,.0f} | "
                     f"{rate[k] / rate['blazecli batches']:.2f} | "
                     f"{res['named'][tool]:,} |")
    lines += [
        "",
        f"Names: of the {len(both):,} distinct addresses both tools named, {agree:,} "
        f"({100 * agree / max(1, len(both)):.2f} %) have the same name (clone suffixes and "
        f"symbol versions left off). Of the {len(differ):,} that differ, bpfmux names {plt:,} "
        "as PLT stubs (`name@plt`) where blazecli says `_init` (the symbol before .plt, of "
        "size 0 or too small to cover them); the others in the raw file's sample are aliases at one "
        "address (bpfmux `fclose`, blazecli `_IO_new_fclose`).",
        "",
    ]
    fl = res["files"]
    lines += [
        "",
        "Recorded frames: the same addresses as (file, file offset), as a recording keeps",
        "them, with no process: `bpfmux sym --file PATH --file-offsets` next to `blazecli",
        f"symbolize elf --path PATH` (given the virtual addresses), per file ({len(by_file)} files).",
        "",
        "| tool, mode | median s | frames/s | ratio to blazecli | named (of distinct) |",
        "|---|---:|---:|---:|---:|",
    ]
    for k, tool in (("bpfmux files batches", "bpfmux"), ("blazecli files batches", "blazecli"),
                    ("bpfmux files stream", "bpfmux stream")):
        lines.append(f"| {k} | {statistics.median(runs[k]):.2f} | {rate[k]:,.0f} | "
                     f"{rate[k] / rate['blazecli files batches']:.2f} | "
                     f"{fl['named'][tool]:,} of {fl['distinct']:,} |")
    lines += [
        "",
        f"Of the {fl['both_named']:,} distinct frames both named, {fl['same_name']:,} "
        f"({100 * fl['same_name'] / max(1, fl['both_named']):.2f} %) have the same name.",
    ]
    with open(a.out, "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
