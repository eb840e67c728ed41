#!/usr/bin/env bash
# What the trace programs spend on a process's first user stack since they also keep it by
# build ID (issue 44), in guest instructions: bench/bidcost/bidcost forks CHILDREN children,
# each counting (vm/run --insn) a first and a repeated getpgid() from one call site, untraced
# and under `bpfmux trace --stacks --comm bidcost` with this tree's bpfmux and, with
# --compare, another binary (e.g. one built before the build-ID stacks). One boot of our
# kernel; writes $BENCH_OUT/bidcost.md and raw/bidcost/ours.json (contract: bench/README.md).
#
# usage: bench/bidcost/run.sh [--children N] [--compare BPFMUX]
#   --children  forked children, each one sample (default 60)
#   --compare   another bpfmux binary, run as a third mode
# environment: BENCH_OUT (default bench/results); BPFMUX_CACHE / BPFMUX_KERNEL_OUT
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
children=60 compare_bin=
while [ $# -gt 0 ]; do
	case $1 in
	--children) children=${2:?--children needs a number}; shift ;;
	--compare) compare_bin=$(realpath "${2:?--compare needs a binary}"); shift ;;
	-h | --help) sed -n '2,/^[^#]/{/^#/p}' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "bench/bidcost: unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
	shift
done
out=${BENCH_OUT:-$repo/bench/results}
cache=${BPFMUX_CACHE:-$HOME/.cache/bpfmux}
kout=${BPFMUX_KERNEL_OUT:-$cache/build}
raw=$out/raw/bidcost
mkdir -p "$raw"
say() { echo "bidcost: $*" >&2; }
if ! cargo build --quiet --release -p bpfmux-cli || ! make -s -C bench CACHE="$cache" KOUT="$kout"; then
	say "building bpfmux (release) or the bench programs failed"
	exit 1
fi
tools=("this=$repo/target/release/bpfmux")
# The guest sees this checkout, not the host's /tmp: the other binary goes into build/.
if [ -n "$compare_bin" ]; then
	mkdir -p build/bench-compare
	cp "$compare_bin" build/bench-compare/bpfmux-bidcost || exit 1
	tools+=("compare=$repo/build/bench-compare/bpfmux-bidcost")
fi
commit=$(git rev-parse --short HEAD)
git diff --quiet HEAD -- crates bench/bidcost || commit="$commit (+ uncommitted changes)"
{
	echo "generated: $(date -u '+%Y-%m-%d %H:%M UTC') by \`bench/bidcost/run.sh\`, commit $commit"
	echo "image: bzImage sha256 $(sha256sum "$kout/arch/x86/boot/bzImage" | cut -c1-16); 2 vCPUs, single-threaded TCG, vm/run --insn"
	echo "this: target/release/bpfmux of that commit"
	if [ -n "$compare_bin" ]; then
		echo "compare: $compare_bin, sha256 $(sha256sum "$compare_bin" | cut -c1-16)"
	fi
} >"$raw/run.meta"
rm -f "$raw/ours.json"
"$repo/vm/run" --insn --single-thread --timeout 3600 -- "$repo/bench/bidcost/guest.py" \
	"$repo/build/bench/bidcost" "$raw/ours.json" "$children" "${tools[@]}" >"$raw/ours.log" 2>&1
rc=$?
grep '^bidcost:' "$raw/ours.log" >&2
if [ "$rc" != 0 ] || [ ! -s "$raw/ours.json" ]; then
	say "guest run exited $rc (log: $raw/ours.log)"
	grep -v '^\[' "$raw/ours.log" | tail -n 15 >&2
	exit 1
fi
python3 - "$raw" "$out/bidcost.md" <<'PY'
import json, os, sys
raw, md = sys.argv[1:]
r = json.load(open(os.path.join(raw, "ours.json")))
meta = [m.rstrip() for m in open(os.path.join(raw, "run.meta")) if m.strip()]
lines = ["# A process's first user stack: what the trace programs spend on it", ""]
lines += [f"- {m}" for m in meta]
lines += [f"- guest: {r['uname']}; {r['children']} children, one sample each", "",
          "Guest instructions of one getpgid() call (from entering the syscall to its return,",
          "timer ticks included when one fell in the window; medians over the children): a",
          "process's first call from a call site, whose user stack the programs see for the",
          "first time (a new entry in their stack maps; since the build-ID stacks, also the",
          "stack as build IDs and file offsets), and a second call from the same site.",
          "`bpfmux trace --stacks --comm bidcost __x64_sys_getpgid`.", "",
          "| mode | engine | first call | second call | first - second (median) |",
          "|---|---|---:|---:|---:|"]
for name, m in r["modes"].items():
    lines.append(f"| {name} | {m['engine'] or '–'} | {m['first_median']:,.0f} | "
                 f"{m['second_median']:,.0f} | {m['extra_median']:,.0f} |")
modes = r["modes"]
if "this" in modes and "compare" in modes:
    d = modes["this"]["extra_median"] - modes["compare"]["extra_median"]
    lines += ["", f"The first call's extra cost, this binary minus the compared one: {d:,.0f} "
              "instructions per new (process, user stack)."]
    a, b = modes["this"]["second_profile"], modes["compare"]["second_profile"]
    rows = sorted(set(a) | set(b), key=lambda k: -abs(a.get(k, 0) - b.get(k, 0)))[:15]
    lines += ["", "The second call by kernel symbol (a profile window of a child that counted the",
              "most frequent count; 40 symbols per profile), largest differences first:", "",
              "| symbol | this | compare | this - compare |", "|---|---:|---:|---:|"]
    lines += [f"| `{k}` | {a.get(k, 0):,} | {b.get(k, 0):,} | {a.get(k, 0) - b.get(k, 0):+,} |"
              for k in rows]
open(md, "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
say "wrote $out/bidcost.md"
