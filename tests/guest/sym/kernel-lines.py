#!/usr/bin/env python3
"""bpfmux sym --kernel --vmlinux on the running kernel: every sampled kernel address that
the vmlinux's DWARF names gets the function, file:line and inlined calls that
`llvm-addr2line -a -f -i` reads from the same file (GNU addr2line 2.40 names the unit's own
file instead of the header for some functions a header defines: amd_brs_reset at
core.c:1535, not perf_event.h:1535 where it is); 'auto' finds the vmlinux under
/lib/modules/RELEASE/build; a file that is not the running kernel's vmlinux is refused by
build ID, and without --vmlinux no line is given. bpfmux trace --stacks --vmlinux: every
kernel frame of getpgid's stacks carries the lines llvm-addr2line gives for it (callers' return
addresses looked up one byte back, at their call), inlined calls as frames of their own.

usage: kernel-lines.py BPFMUX VMLINUX TRIGGER
"""
import json
import os
import subprocess
import sys

BPFMUX, VMLINUX, TRIGGER = sys.argv[1], sys.argv[2], sys.argv[3]
# Functions every kernel of the series runs, some with inlined calls.
KNOWN = ["__x64_sys_getpgid", "do_sys_openat2", "vfs_read", "ksys_read", "path_openat",
         "do_syscall_64", "__schedule", "kmem_cache_free"]
SAMPLE_EVERY = 400
failed = 0


def check(ok, what):
    global failed
    print(("ok - " if ok else "FAIL - ") + what, flush=True)
    failed += not ok


def sym(*args):
    return subprocess.run([BPFMUX, "sym", "--kernel", *args], capture_output=True, text=True)


def base(name):
    return name.split(".")[0]


def where(path, line):
    return f"{os.path.basename(path or '?')}:{line}"


if not os.access(VMLINUX, os.R_OK):
    print(f"FAIL - no vmlinux at {VMLINUX} (vm/run shows our kernel's there)")
    sys.exit(1)

# kallsyms: vmlinux functions, sorted; each gets its start and a point half-way to the next.
text = []
for line in open("/proc/kallsyms"):
    f = line.split()
    if len(f) == 3 and f[1] in "tT":
        text.append((int(f[0], 16), f[2]))
text.sort()
picked = []
for i, (a, n) in enumerate(text[:-1]):
    nxt = text[i + 1][0]
    if (n in KNOWN or i % SAMPLE_EVERY == 0) and nxt > a:
        picked.append((a + (nxt - a) // 2, n))
addrs = [a for a, _ in picked]
check(len(picked) > 50, f"{len(picked)} kernel addresses sampled")



def addr2line(addrs):
    """{address: [(function, file, line), ...] innermost first} from llvm-addr2line -a -f -i."""
    out = subprocess.run(["llvm-addr2line", "-a", "-f", "-i", "-e", VMLINUX] + [hex(a) for a in addrs],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    chains, cur, i = {}, None, 0
    while i < len(out):
        if out[i].startswith("0x"):
            cur = int(out[i], 16)
            chains[cur] = []
            i += 1
            continue
        fl = out[i + 1].split(" (discriminator")[0]
        file, _, line = fl.rpartition(":")
        chains[cur].append((out[i], file, line))
        i += 2
    return chains


theirs = addr2line(addrs)

r = sym("--vmlinux", VMLINUX, "--json", *[hex(a) for a in addrs])
check(r.returncode == 0, f"bpfmux sym --kernel --vmlinux exits 0 ({r.returncode}: {r.stderr.strip()[:300]})")
ours = {int(e["addr"], 16): e["result"] for e in json.loads(r.stdout or "[]")}

compared, bad, named = 0, [], {}
for a, n in picked:
    frames = theirs.get(a) or []
    # DWARF knows the address as this function: ours must say what addr2line says.
    if not frames or frames[-1][0] != base(n) or frames[-1][2] in ("0", "?"):
        continue
    compared += 1
    e = ours.get(a, {})
    mine = [(e.get("name"), where(e.get("file"), e.get("line")))]
    mine += [(f["name"], where(f.get("file"), f.get("line"))) for f in e.get("inlined", [])]
    want = [(base(n), where(frames[-1][1], frames[-1][2]))]
    want += [(f, where(p, l)) for f, p, l in reversed(frames[:-1])]
    if [(base(x or ""), w) for x, w in mine] != want:
        bad.append(f"{a:#x} {n}: ours {mine}, addr2line {want}")
    if n in KNOWN:
        named[n] = mine[0][1]
check(compared >= len(picked) // 2,
      f"{compared} of {len(picked)} addresses are functions DWARF names; compared")
check(not bad, f"every one has addr2line's function, file:line and inlined calls "
               f"({len(bad)} differ: {bad[:5]})")
check(set(named) == set(KNOWN) and all(not w.startswith("?") for w in named.values()),
      f"the known functions have lines: {named}")
inl = sum(1 for a in addrs if ours.get(a, {}).get("inlined"))
check(inl > 0, f"{inl} addresses come with inlined calls")

# 'auto': the vmlinux under /lib/modules/RELEASE/build (a tmpfs over the host's tree).
rel = os.uname().release
subprocess.run(["mount", "-t", "tmpfs", "tmp", "/lib/modules"], check=True)
try:
    os.makedirs(f"/lib/modules/{rel}/build")
    os.symlink(VMLINUX, f"/lib/modules/{rel}/build/vmlinux")
    few = [hex(a) for a in addrs[:20]]
    auto = sym("--vmlinux", "auto", "--json", *few)
    given = sym("--vmlinux", VMLINUX, "--json", *few)
    check(auto.returncode == 0 and auto.stdout == given.stdout,
          f"--vmlinux auto finds /lib/modules/{rel}/build/vmlinux ({auto.stderr.strip()[:200]})")
finally:
    subprocess.run(["umount", "/lib/modules"], check=True)
auto = sym("--vmlinux", "auto", hex(addrs[0]))
check(auto.returncode != 0 and "no vmlinux of the running kernel" in auto.stderr,
      f"--vmlinux auto with none there: a clear error ({auto.stderr.strip()[:300]})")

other = sym("--vmlinux", "/bin/bash", hex(addrs[0]))
check(other.returncode != 0 and "is not the running kernel's vmlinux" in other.stderr,
      f"another ELF file is refused by build ID ({other.stderr.strip()[:200]})")
plain = sym("--json", *[hex(a) for a in addrs[:20]])
check(plain.returncode == 0 and all(e["result"].get("file") is None and not e["result"].get("inlined")
                                    for e in json.loads(plain.stdout or "[]")),
      "without --vmlinux: names only")
# bpfmux trace --stacks --vmlinux: getpgid's kernel frames, each as addr2line reads it.
func_addr = {n: a for a, n in text}
t = subprocess.run([BPFMUX, "trace", "--json", "--stacks", "--vmlinux", VMLINUX, "-c",
                    f"{TRIGGER} getpgid 5", "__x64_sys_getpgid"],
                   capture_output=True, text=True, timeout=600)
check(t.returncode == 0, f"bpfmux trace --stacks --vmlinux exits 0 ({t.returncode}: "
                         f"{t.stderr.strip()[-300:]})")
summary = [o for o in map(json.loads, filter(str.strip, t.stdout.splitlines()))
           if o.get("type") == "summary"]
stacks = [st for st in (summary[-1].get("stacks") or [] if summary else [])
          if st.get("function") == "__x64_sys_getpgid"]
check(sum(st.get("count", 0) for st in stacks) == 5, f"5 getpgid calls in {len(stacks)} stacks")
for st in stacks:
    frames = st["frames"][:st["frames"].index("--")] if "--" in st["frames"] else st["frames"]
    # Real frames ("name+0xoff at F:L"), each after its inlined calls ("name (inlined) at F:L").
    groups, pending = [], []
    for f in frames:
        if " (inlined)" in f:
            pending.append(f)
        else:
            groups.append((f, pending))
            pending = []
    check(groups and groups[0][0].startswith("__x64_sys_getpgid+0x0 at ") and not pending,
          f"the first frame is getpgid's entry with its line ({frames})")
    wanted, got = [], []
    for k, (f, inl) in enumerate(groups):
        name, _, off = f.split(" at ")[0].partition("+")
        if name not in func_addr or not off:
            wanted.append((0, f, inl))  # no symbol: addr2line says "??", a difference
            continue
        addr = func_addr[name] + int(off, 16) - (1 if k else 0)
        wanted.append((addr, f, inl))
    a2l = addr2line([a for a, _, _ in wanted])
    bad = []
    for addr, f, inl in wanted:
        chain = a2l.get(addr, [])
        want = [f"{fn} (inlined) at {where(p, ln)}" for fn, p, ln in chain[:-1]]
        want.append(where(chain[-1][1], chain[-1][2]) if chain else "?")
        mine = [x.split(" (inlined) at ")[0] + " (inlined) at " + os.path.basename(x.split(" at ")[1])
                for x in inl]
        mine.append(os.path.basename(f.split(" at ")[1]) if " at " in f else "no line")
        if mine != want:
            bad.append(f"{f}: ours {mine}, addr2line {want}")
    check(not bad and len(groups) >= 3,
          f"all {len(groups)} kernel frames as addr2line reads them ({bad[:4]}; frames {frames})")
print(f"kernel-lines: {'FAILED' if failed else 'passed'}")
sys.exit(1 if failed else 0)
