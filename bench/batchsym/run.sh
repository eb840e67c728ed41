#!/usr/bin/env bash
# Batch symbol lookup benchmark (issue 8, seed 003): kprobe.multi attach by name for batch
# sizes 1 ... 39,000 (our kernel has ~39.7k unique traceable functions) and the seed's
# 50-program kprobe.session table, one guest boot per kernel; writes $BENCH_OUT/batchsym.md
# (default bench/results/) from the raw outputs.
#
# usage: bench/batchsym/run.sh [--quick] [--before BZIMAGE] [--kernels "ours stock-7.3"]
#                               [--parts "lookup attach session50"]
#   --quick          sizes 1, 2, 8, 64, 1024 only: checks the harness end to end
#   --before IMAGE   also boot IMAGE as "before": our config without the batch lookup
#                    patch, the cleanest before/after (same symbols, same config)
#   --kernels LIST   kernels for vm/run (default: ours stock-7.3; spaces or commas)
#   --parts LIST     which measurements (default: all three); kernels not named keep
#                    their earlier raw results, a kernel run for some parts keeps its
#                    other parts' results, and the report says when each part ran on what
# environment: BENCH_OUT; BPFMUX_CACHE / BPFMUX_KERNEL_OUT select our kernel build
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
all_parts="lookup attach session50"
quick= before= kernels="ours stock-7.3" parts=$all_parts
while [ $# -gt 0 ]; do
	case $1 in
	--quick) quick=1 ;;
	--before) before=${2:?--before needs a bzImage}; shift ;;
	--kernels) kernels=${2:?--kernels needs a list}; kernels=${kernels//,/ }; shift ;;
	--parts) parts=${2:?--parts needs a list}; parts=${parts//,/ }; shift ;;
	-h | --help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "bench/batchsym/run.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
	shift
done
if [ -n "$quick" ]; then
	out=${BENCH_OUT:-$repo/build/bench-quick}
	sizes="1 2 8 64 1024"
else
	out=${BENCH_OUT:-$repo/bench/results}
	sizes="1 2 4 8 16 32 64 128 256 512 1024 2048 4096 8192 16384 32768 39000"
fi
cache=${BPFMUX_CACHE:-$HOME/.cache/bpfmux}
kout=${BPFMUX_KERNEL_OUT:-$cache/build}
raw=$out/raw/batchsym
mkdir -p "$raw"

make -s -C bench CACHE="$cache" KOUT="$kout"
bench=$repo/build/bench/batchsym-bench

# label=vm/run kernel argument
runs=()
for k in $kernels; do
	case $k in
	ours) runs+=("ours=$kout/arch/x86/boot/bzImage") ;;
	*) runs+=("$k=$k") ;;
	esac
done
[ -n "$before" ] && runs+=("before=$before")

# The guest command: info, then the parts asked for, in one boot.
cmd="$bench info"
for p in $parts; do
	case $p in
	lookup | attach) cmd+=" && $bench $p $sizes" ;;
	session50) cmd+=" && $bench session50" ;;
	*) echo "bench/batchsym/run.sh: unknown part $p (lookup, attach, session50)" >&2; exit 2 ;;
	esac
done

# meta.txt: this run's facts, then per kernel its image and when it ran ("ran LABEL ...").
# Kernels this run does not boot keep their earlier results and lines.
labels=" ${runs[*]%%=*} "
old=$(cat "$raw/meta.txt" 2>/dev/null || true)
keep_line() { # "image L" / "ran L" / "tree" lines of kernels not run now (or run in part)
	local kind label
	read -r kind label _ <<<"$1"
	case $kind in
	image | ran) [[ $labels != *" $label "* ]] || [ "$parts" != "$all_parts" ] ;;
	tree) [[ $labels != *" ours "* ]] ;;
	*) false ;;
	esac
}
commit="$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- bench/batchsym tests/guest/batchsym || echo ' (+ uncommitted changes in bench/batchsym or tests/guest/batchsym)')"
when=$(date -u '+%Y-%m-%d %H:%M UTC')
{
	echo "date $when"
	echo "commit $commit"
	echo "host $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "mode $([ -n "$quick" ] && echo quick || echo full)"
	while IFS= read -r line; do
		[ -n "$line" ] && keep_line "$line" && echo "$line"
	done <<<"$old"
	for r in "${runs[@]}"; do
		label=${r%%=*} k=${r#*=}
		case $label in
		ours | before)
			echo "image $label $(sha256sum "$k" | cut -c1-16) $(date -u -r "$k" '+%Y-%m-%d %H:%M')" ;;
		*) echo "image $label Debian $(cat "$cache/images/$k/PACKAGES" 2>/dev/null || echo '?')" ;;
		esac
		echo "ran $label $when, commit $commit, parts: $parts"
	done
	if [[ $labels == *" ours "* ]]; then
		echo "tree $("$repo/kernel/image-tree.sh" "$kout")"
	fi
	echo "guest 2 vCPUs run by one host thread (single-threaded TCG)"
} >"$raw/meta.txt.new"
mv "$raw/meta.txt.new" "$raw/meta.txt"

failed=0
for r in "${runs[@]}"; do
	label=${r%%=*} k=${r#*=}
	echo "batchsym: $label: booting $k" >&2
	# One host thread for both vCPUs: attaching patches text the other vCPU may run, and
	# under multi-threaded TCG that (or the boot's own patching) can die of an unclaimed
	# int3, stock kernels included (kernel/README.md, "Known issues"); a make bench-quick
	# on a busy host lost stock-7.3's boot to it.
	if ! vm/run --kernel "$k" --single-thread --timeout 3600 -- sh -c "$cmd" \
		>"$raw/$label.txt.new" 2>"$raw/$label.log"; then
		echo "batchsym: $label: the guest run failed (log: $raw/$label.log)" >&2
		tail -n 20 "$raw/$label.log" >&2
		# a full run's old results are stale now; a partial run keeps the other parts
		[ "$parts" = "$all_parts" ] && rm -f "$raw/$label.txt"
		rm -f "$raw/$label.txt.new"
		failed=1
		continue
	fi
	# The parts not run now keep this kernel's earlier lines (same image, same names).
	keep_re="^(progress: )?($(tr ' ' '|' <<<"info $parts")) "
	{
		if [ -f "$raw/$label.txt" ]; then grep -Ev "$keep_re" "$raw/$label.txt" || true; fi
		cat "$raw/$label.txt.new"
	} >"$raw/$label.txt.merged"
	mv "$raw/$label.txt.merged" "$raw/$label.txt"
	rm -f "$raw/$label.txt.new"
done
[ $failed = 0 ] || exit 1
python3 bench/batchsym/report.py "$raw" >"$out/batchsym.md"
cat "$out/batchsym.md"
