#!/usr/bin/env bash
# The TCG int3 experiment (kernel/README "Known issues"): boot our kernel RUNS times with
# two vCPUs under multi-threaded TCG and RUNS times under single-threaded TCG
# (vm/run --single-thread), each boot running `gtramp stress SECS all-cpus` (attach/detach
# of the global backend in a loop while two workers call the functions on both CPUs),
# and count the boots that die of a kernel splat (vm/run exit 126) or hang (124).
# usage: bench/int3/run.sh [RUNS] [SECS]    (default 20 runs of 10 s each way)
# Output: one line per boot, then a table; exit 0 when every boot ran.
set -uo pipefail
runs=${1:-20}
secs=${2:-10}
repo=$(cd "$(dirname "$0")/../.." && pwd)
bin=$repo/build/guest/gtramp
[ -x "$bin" ] || { echo "int3: $bin missing: run 'make -C tests/guest' first" >&2; exit 2; }
declare -A died=([multi]=0 [single]=0) hung=([multi]=0 [single]=0) ok=([multi]=0 [single]=0)
for i in $(seq 1 "$runs"); do
	for mode in multi single; do
		opt=()
		[ "$mode" = single ] && opt=(--single-thread)
		"$repo/vm/run" "${opt[@]}" --smp 2 --timeout $((secs * 6 + 60)) -- \
			"$bin" stress "$secs" all-cpus >/tmp/int3-$$.log 2>&1
		rc=$?
		case $rc in
		0) ok[$mode]=$((ok[$mode] + 1)); what=ok ;;
		126) died[$mode]=$((died[$mode] + 1))
		     what="died: $(grep -m1 -E 'Oops|BUG|WARNING|int3' /tmp/int3-$$.log | tr -s ' ' | cut -c1-100)" ;;
		124) hung[$mode]=$((hung[$mode] + 1)); what=hung ;;
		*) what="exit $rc (test failure)" ;;
		esac
		echo "run $i $mode: $what"
	done
done
rm -f /tmp/int3-$$.log
echo
echo "| TCG | boots | clean | died (splat) | hung |"
echo "|---|---:|---:|---:|---:|"
for mode in multi single; do
	echo "| thread=$mode | $runs | ${ok[$mode]} | ${died[$mode]} | ${hung[$mode]} |"
done
