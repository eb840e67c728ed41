#!/usr/bin/env bash
# Cost of a filter in the kernel (issue 45): guest instructions per traced call of
# __x64_sys_getpgid, counted with the QEMU plugin (vm/run --insn), untraced, with plain
# counting, and with a filter that is false and one that is true at the entry (an
# argument) and at the exit (errno), per engine; one guest boot per kernel. Writes
# $BENCH_OUT/trace-filter.md (contract: bench/README.md). Instruction counts, not times:
# exact for a kernel build, whatever the host's load.
#
# usage: bench/trace-filter/run.sh [--quick] [--kernels "ours stock-7.3 stock-6.12"]
#   --quick    one repeat of 7 windows per row, ours and stock-7.3; into build/bench-quick/
#              unless BENCH_OUT says otherwise
#   --kernels  which kernels to boot (default: ours stock-7.3 stock-6.12)
# env: BENCH_OUT (default bench/results), REPEATS (runs per row, default 3), WINDOWS
#      (windows of each size per run, default 15)
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
quick= kernels=
while [ $# -gt 0 ]; do
	case $1 in
	--quick) quick=1 ;;
	--kernels) kernels=${2:?--kernels needs a list}; kernels=${kernels//,/ }; shift ;;
	-h | --help) sed -n '2,/^[^#]/{/^#/p}' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "bench/trace-filter: unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
	shift
done
if [ -n "$quick" ]; then
	out=${BENCH_OUT:-$repo/build/bench-quick}
	kernels=${kernels:-ours stock-7.3}
	repeats=${REPEATS:-1} windows=${WINDOWS:-7}
else
	out=${BENCH_OUT:-$repo/bench/results}
	kernels=${kernels:-ours stock-7.3 stock-6.12}
	repeats=${REPEATS:-3} windows=${WINDOWS:-15}
fi
raw=$out/raw/trace-filter
mkdir -p "$raw" build/bench
cache=${BPFMUX_CACHE:-$HOME/.cache/bpfmux}
kout=${BPFMUX_KERNEL_OUT:-$cache/build}
say() { echo "trace-filter: $*" >&2; }

if ! make -s -C bench CACHE="$cache" KOUT="$kout" "$repo/build/bench/trace-filter" ||
	! cargo build --quiet --bin bpfmux; then
	say "building the counting program or bpfmux failed"
	exit 1
fi
commit=$(git rev-parse --short HEAD)
git diff --quiet HEAD -- crates bench/trace-filter || commit="$commit (+ uncommitted changes in crates/ or bench/trace-filter/)"

failed=0
for k in $kernels; do
	case $k in
	ours) engines=global,tracing-multi,kprobe-multi,fentry-each
		image="bzImage sha256 $(sha256sum "$kout/arch/x86/boot/bzImage" | cut -c1-16), built from $("$repo/kernel/image-tree.sh" "$kout")" ;;
	stock-6.12) engines=kprobe-multi,fentry-each
		image="Debian $(cat "$cache/images/$k/VERSION" 2>/dev/null || echo '?')" ;;
	*) engines=tracing-multi,kprobe-multi,fentry-each
		image="Debian $(cat "$cache/images/$k/VERSION" 2>/dev/null || echo '?')" ;;
	esac
	rm -f "$raw/$k.jsonl"
	{
		echo "run: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $commit, ${quick:+quick, }$repeats repeats of $windows windows per row"
		echo "image: $image"
		echo "host load at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
	} >"$raw/$k.meta"
	say "$k: engines $engines"
	# One vCPU runs everything (--single-thread): the counted thread is pinned, and
	# attaching patches text no other vCPU runs meanwhile (kernel/README "Known issues").
	"$repo/vm/run" --kernel "$k" --insn --single-thread --timeout 3600 -- \
		"$repo/bench/trace-filter/guest.py" "$repo/target/debug/bpfmux" \
		"$repo/build/bench/trace-filter" "$raw/$k.jsonl" --engines "$engines" \
		--repeats "$repeats" --windows "$windows" >"$raw/$k.log" 2>&1
	rc=$?
	grep -E '^trace-filter:' "$raw/$k.log" >&2
	if [ "$rc" != 0 ]; then
		say "$k: guest run exited $rc (log: $raw/$k.log)"
		failed=1
	fi
done

reported=
for k in ours stock-7.3 stock-6.12; do
	[ -s "$raw/$k.jsonl" ] && reported="$reported $k"
done
python3 "$repo/bench/trace-filter/report.py" "$raw" "$out/trace-filter.md" $reported || failed=1
say "wrote $out/trace-filter.md"
exit $failed
