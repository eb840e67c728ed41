#!/usr/bin/env bash
# What normalizing user stacks as they are captured costs (issue 44): `bpfmux trace
# --stacks` on a workload that forks and execs (build/guest/exited-stack spawn), with
# normalization as captured (the default) and at the end only (--stacks-at-end), next to
# the workload untraced; per stack event: the tracer's CPU time and its own capture time,
# and the cache hit rate. One guest boot per kernel runs bench/capture/guest.py; writes
# $BENCH_OUT/capture.md (contract: bench/README.md).
#
# usage: bench/capture/run.sh [--quick] [--kernels "ours stock-7.3"] [--engine E]
#                             [--rounds N] [--children K] [--calls N] [--lingers MS,MS]
#   --quick     2 rounds of 20 children, one kernel (ours); into build/bench-quick/ unless
#               BENCH_OUT says otherwise
#   --kernels   which kernels to boot (default: ours stock-7.3)
#   --engine    bpfmux trace's engine (default: its own choice)
#   --rounds    runs of each mode per linger (default 5)
#   --children  forks + execs per run (default 100)
#   --calls     getpgid calls per child through the first stack (default 20; one more
#               through the second)
#   --lingers   ms each child sleeps after its calls, a table per value (default 0,200:
#               exiting at once, and living past the tracer's next scan)
#   --compare B another bpfmux binary, run as "as captured" too (e.g. one built before a
#               change to the trace programs): its programs' cost next to ours
# environment: BENCH_OUT; BPFMUX_CACHE / BPFMUX_KERNEL_OUT select our kernel build
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
quick= kernels= engine=auto rounds= children= calls=20 lingers=0,200 compare_bin= compare=()
while [ $# -gt 0 ]; do
	case $1 in
	--quick) quick=1 ;;
	--kernels) kernels=${2:?--kernels needs a list}; kernels=${kernels//,/ }; shift ;;
	--engine) engine=${2:?--engine needs an engine}; shift ;;
	--rounds) rounds=${2:?--rounds needs a number}; shift ;;
	--children) children=${2:?--children needs a number}; shift ;;
	--calls) calls=${2:?--calls needs a number}; shift ;;
	--lingers) lingers=${2:?--lingers needs a list}; shift ;;
	--compare) compare_bin=$(realpath "${2:?--compare needs a binary}"); shift ;;
	-h | --help) sed -n '2,/^[^#]/{/^#/p}' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "bench/capture: unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
	shift
done
if [ -n "$quick" ]; then
	out=${BENCH_OUT:-$repo/build/bench-quick}
	kernels=${kernels:-ours} rounds=${rounds:-2} children=${children:-20}
else
	out=${BENCH_OUT:-$repo/bench/results}
	kernels=${kernels:-ours stock-7.3} rounds=${rounds:-5} children=${children:-100}
fi
cache=${BPFMUX_CACHE:-$HOME/.cache/bpfmux}
kout=${BPFMUX_KERNEL_OUT:-$cache/build}
raw=$out/raw/capture
mkdir -p "$raw"
bpfmux=$repo/target/release/bpfmux
say() { echo "capture: $*" >&2; }

# Release build: the capture cost is the tracer's own code.
if ! cargo build --quiet --release -p bpfmux-cli; then
	say "building bpfmux (release) failed"
	exit 1
fi
if ! make -s -C tests/guest CACHE="$cache" KOUT="$kout"; then
	say "building the guest programs (exited-stack) failed"
	exit 1
fi

# The guest sees this checkout, not the host's /tmp: the other binary goes into build/.
if [ -n "$compare_bin" ]; then
	mkdir -p build/bench-compare
	cp "$compare_bin" build/bench-compare/bpfmux || exit 1
	compare=(--compare "$repo/build/bench-compare/bpfmux")
fi

commit=$(git rev-parse --short HEAD)
git diff --quiet HEAD -- crates bench/capture tests/guest/trace ||
	commit="$commit (+ uncommitted changes)"
{
	echo "generated: $(date -u '+%Y-%m-%d %H:%M UTC') by \`bench/capture/run.sh${quick:+ --quick}\`, commit $commit"
	echo "bpfmux: release build; engine: $engine"
	echo "host: $(nproc) cores, shared with other work; load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
	[ -n "$quick" ] && echo "mode: quick (checks the harness, not results)"
	[ -n "$compare_bin" ] && echo "compare (cmp rows): $compare_bin, sha256 $(sha256sum "$compare_bin" | cut -c1-16)"
} >"$raw/run.meta"

failed=0
for k in $kernels; do
	rm -f "$raw/$k.jsonl"
	case $k in
	ours) image="bzImage sha256 $(sha256sum "$kout/arch/x86/boot/bzImage" | cut -c1-16)" ;;
	*) image="Debian $(cat "$cache/images/$k/VERSION" 2>/dev/null || echo '?')" ;;
	esac
	echo "image: $image; guest vCPUs: 2 (single-threaded TCG)" >"$raw/$k.meta"
	say "$k: $rounds rounds x $children children, lingers $lingers ms"
	"$repo/vm/run" --kernel "$k" --smp 2 --single-thread --timeout 3600 -- \
		"$repo/bench/capture/guest.py" "$bpfmux" "$repo/build/guest/exited-stack" \
		"$raw/$k.jsonl" --engine "$engine" --rounds "$rounds" --children "$children" \
		--calls "$calls" --lingers "$lingers" "${compare[@]}" >"$raw/$k.log" 2>&1
	rc=$?
	if [ "$rc" != 0 ]; then
		say "$k: guest run exited $rc (log: $raw/$k.log)"
		grep -v '^\[' "$raw/$k.log" | tail -n 15 >&2
		failed=1
	fi
done
# shellcheck disable=SC2086 # the kernel list is words
python3 "$repo/bench/capture/report.py" "$raw" "$out/capture.md" $kernels || failed=1
say "wrote $out/capture.md"
exit $failed
