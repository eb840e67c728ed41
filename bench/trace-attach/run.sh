#!/usr/bin/env bash
# Attach benchmark of `bpfmux trace` (issue 4, item 7): attach + detach time for 10, 100,
# 1000, 10,000 and all traceable functions per engine (global where the kernel has it,
# tracing-multi, kprobe-multi, fentry-each), the engines of one kernel in the same guest
# boot, and the target: tracing_multi >= 100x faster than one fentry per function on
# stock 7.3.4, at the largest size measured for both (fentry-each is capped, never
# extrapolated). Writes $BENCH_OUT/trace-attach.md (contract: bench/README.md).
#
# usage: bench/trace-attach/run.sh [--quick] [--no-all] [--fentry-all] [--smp N] [--kernels "ours stock-7.3 stock-6.12"]
#   --quick    10 and 100 functions, fentry-each capped at 100, one run each, ours and
#              stock-7.3; into build/bench-quick/ unless BENCH_OUT says otherwise
#   --no-all   only the sizes up to 10,000 (one boot per kernel, no all-functions rows)
#   --fentry-all  also one fentry program per function on all functions (about an hour of
#              guest time per kernel under TCG: the all-functions target's own measurement)
#   --smp N    guest vCPUs (default 2), all run by one host thread (vm/run --single-thread):
#              multi-threaded TCG dies of the int3 issue of kernel/README "Known issues"
#              when it patches text another vCPU runs; single-threaded TCG does not
#   --kernels  which kernels to boot (default: ours stock-7.3 stock-6.12)
# env: BENCH_OUT (default bench/results; build/bench-quick with --quick), FENTRY_CAP
#      (default 1000), TRIALS (runs per size below 1000, default 3), FENTRY_ALL_S
#      (--fentry-all: seconds one run may take before it is stopped, default 7000;
#      a stopped run's row gives a lower bound on its attach time)
# Per kernel, two boots: the sizes up to 10,000; all functions for every engine
# (fentry-each capped unless --fentry-all), so the all-functions ratios come from one
# boot too. A boot that hits its time limit leaves its rows as "did not finish"; any
# other failure exits non-zero.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
quick= kernels= noall= fentry_all= smp=2
while [ $# -gt 0 ]; do
	case $1 in
	--quick) quick=1 ;;
	--no-all) noall=1 ;;
	--fentry-all) fentry_all=1 ;;
	--smp) smp=${2:?--smp needs a number}; shift ;;
	--kernels) kernels=${2:?--kernels needs a list}; shift ;;
	-h | --help) sed -n '2,/^[^#]/{/^#/p}' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "bench/trace-attach: unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
	shift
done
if [ -n "$quick" ]; then
	out=${BENCH_OUT:-$repo/build/bench-quick}
	kernels=${kernels:-ours stock-7.3}
	cap=${FENTRY_CAP:-100} trials=${TRIALS:-1}
else
	out=${BENCH_OUT:-$repo/bench/results}
	kernels=${kernels:-ours stock-7.3 stock-6.12}
	cap=${FENTRY_CAP:-1000} trials=${TRIALS:-3}
fi
fentry_s=${FENTRY_ALL_S:-7000}
raw=$out/raw/trace-attach
mkdir -p "$raw"
cache=${BPFMUX_CACHE:-$HOME/.cache/bpfmux}
kout=${BPFMUX_KERNEL_OUT:-$cache/build}
engines=global,tracing-multi,kprobe-multi,fentry-each
bpfmux=$repo/target/release/bpfmux
failed=0

say() { echo "trace-attach: $*" >&2; }

# Release build: attaching 50,000 functions must measure the kernel, not debug Rust.
if ! cargo build --quiet --release -p bpfmux-cli; then
	say "building bpfmux (release) failed"
	exit 1
fi

mode="${quick:+quick}${noall:+ --no-all}${fentry_all:+ --fentry-all}"
mode=${mode:-full}
commit=$(git rev-parse --short HEAD)
git diff --quiet HEAD -- crates bench/trace-attach || commit="$commit (+ uncommitted changes in crates/ or bench/trace-attach/)"
{
	echo "generated: $(date -u '+%Y-%m-%d %H:%M UTC') by \`bench/trace-attach/run.sh${quick:+ --quick}\`"
	echo "commit: $commit"
	echo "bpfmux: release build ($bpfmux)"
	echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, shared with other work; host load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
	if [ -n "$quick" ]; then
		echo "mode: quick (10 and 100 functions, one run; checks the harness, not results)"
	else
		echo "mode: full${noall:+, without the all-functions boots (--no-all)}"
	fi
} >"$raw/run.meta"

image_of() {
	case $1 in
	ours) echo "bzImage sha256 $(sha256sum "$kout/arch/x86/boot/bzImage" | cut -c1-16), built $(date -u -r "$kout/arch/x86/boot/bzImage" '+%Y-%m-%d %H:%M UTC'); built from $("$repo/kernel/image-tree.sh" "$kout")" ;;
	stock-*) echo "Debian $(cat "$cache/images/$1/VERSION" 2>/dev/null || echo '?')" ;;
	*) echo "$1" ;;
	esac
}

# unfinished JSONL LIMIT --sizes S --engines E: a "did not finish" row for every engine
# and size of a boot that has none (the boot ran out of time before it)
unfinished() {
	python3 - "$@" <<'PY'
import json, sys
path, limit, args = sys.argv[1], sys.argv[2], sys.argv[3:]
sizes = args[args.index("--sizes") + 1].split(",")
engines = args[args.index("--engines") + 1].split(",")
rows = [json.loads(l) for l in open(path) if l.strip()] if __import__("os").path.exists(path) else []
have = {(r.get("engine"), r.get("size")) for r in rows if r.get("type") == "run"}
with open(path, "a") as f:
    for s in sizes:
        for e in engines:
            if (e, s) not in have:
                f.write(json.dumps({"type": "run", "engine": e, "size": s, "want": 0, "trial": 0,
                                    "status": "did not finish",
                                    "error": f"within the guest's {limit} s limit"}) + "\n")
PY
}

# boot KERNEL NAME LIMIT GUEST-ARGS...: one guest boot running guest.py
boot() {
	local k=$1 name=$2 limit=$3 rc start
	shift 3
	say "$k: $name (at most $limit s)"
	start=$(date +%s)
	echo "host load: $name: $(cut -d' ' -f1-3 /proc/loadavg) at the start; guest vCPUs: $smp (single-threaded TCG)" >>"$raw/$k.meta"
	"$repo/vm/run" --kernel "$k" --smp "$smp" --single-thread --mem "${mem:-2G}" --timeout "$limit" -- \
		"$repo/bench/trace-attach/guest.py" "$bpfmux" "$raw/$k.jsonl" \
		--funcs "$raw/$k-funcs.txt" --fentry-cap "$cap" --trials "$trials" "$@" \
		>"$raw/$k-$name.log" 2>&1
	rc=$?
	echo "boots: $name: exit $rc after $(($(date +%s) - start)) s (log: raw/trace-attach/$k-$name.log)" >>"$raw/$k.meta"
	grep -E '^trace-attach:' "$raw/$k-$name.log" >&2
	if [ "$rc" = 124 ]; then
		say "$k: $name: hit its $limit s limit; its unfinished rows are reported as such"
		unfinished "$raw/$k.jsonl" "$limit" "$@"
	elif [ "$rc" != 0 ]; then
		say "$k: $name: guest run exited $rc (log: $raw/$k-$name.log)"
		grep -v '^\[' "$raw/$k-$name.log" | tail -n 15 >&2
		failed=1
	fi
}

for k in $kernels; do
	rm -f "$raw/$k.jsonl" "$raw/$k.meta" "$raw/$k-funcs.txt" "$raw/$k"-*.log
	{
		echo "run: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $commit, $mode"
		echo "image: $(image_of "$k")"
	} >"$raw/$k.meta"
	if [ -n "$quick" ]; then
		boot "$k" sizes 900 --sizes 10,100 --engines "$engines"
		continue
	fi
	boot "$k" sizes 3600 --sizes 10,100,1000,10000 --engines "$engines"
	[ -n "$noall" ] && continue
	# fentry-each last: if it runs out of time, the others' rows are in
	if [ -n "$fentry_all" ]; then
		# 45,000 programs, trampolines and links: 4 GiB, and hours of limit; a run stopped
		# at its limit records how far its attach got, then detaches
		cap=1000000 mem=4G boot "$k" all $((fentry_s + 1800)) --sizes all --engines "$engines" \
			--timeout "$fentry_s"
	else
		boot "$k" all 1800 --sizes all --engines "$engines"
	fi
done

# every kernel with results, also those of an earlier run (--kernels reruns only some)
reported=
for k in ours stock-7.3 stock-6.12; do
	[ -s "$raw/$k.jsonl" ] && reported="$reported $k"
done
python3 "$repo/bench/trace-attach/report.py" "$raw" "$out/trace-attach.md" $reported || failed=1
say "wrote $out/trace-attach.md"
exit $failed
