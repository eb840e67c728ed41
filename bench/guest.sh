#!/bin/bash
# Runs inside one guest boot (vm/run): one phase of the trigger and attach benchmarks on
# the running kernel, results into OUTDIR as trigger-PHASE.json / attach-PHASE.json with
# their logs. Phases are separate boots so a slow or crashing part costs only itself:
#   rates   trigger: every row but the -all ones, short samples in many rounds so rows
#           measured next to each other can be compared round by round
#   attach  attach: 1, 1000, 10000 functions per engine
#   all     the -all rows of the global backend and kprobe.multi with their references;
#           attach of all functions for global, kprobe.multi (and fentry: over its cap)
#   allpf   the per-function tracing_multi backend on all functions (attach, then trigger)
#   insn    trigger: instructions per call of every row, -all rows included, and the
#           per-symbol profile of each (needs `vm/run --insn`: the QEMU plugin)
# usage: bench/guest.sh OUTDIR PHASE [--quick]
set -u
out=${1:?usage: bench/guest.sh OUTDIR PHASE [--quick]}
phase=${2:?usage: bench/guest.sh OUTDIR PHASE [--quick]}
quick=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
bin=$here/../build/bench
mkdir -p "$out"
rc=0

if [ "$phase" = rates ] || [ "$phase" = insn ]; then
	{
		echo "uname: $(uname -r)"
		echo "version: $(cat /proc/version)"
		echo "cmdline: $(cat /proc/cmdline)"
		echo "cpus: $(nproc)"
		echo "memory: $(grep MemTotal /proc/meminfo | tr -s ' ')"
		# The benchmark's target and the seeds' must be real calls with an ftrace site.
		for f in bpf_modify_return_test_tp bpf_get_numa_node_id; do
			if grep -qx "$f" /sys/kernel/tracing/available_filter_functions; then
				echo "ftrace site: $f yes"
			else
				echo "ftrace site: $f no"
			fi
		done
	} >"$out/guest-$phase.txt"
	cat "$out/guest-$phase.txt"
	[ "$phase" = rates ] && cp "$out/guest-$phase.txt" "$out/guest.txt"
fi

# bench NAME ARGS...: run build/bench/NAME, output to the console and NAME-PHASE.log
bench() {
	local b=$1 r
	shift
	echo "== $b $phase: $*"
	"$bin/$b" "$@" --json "$out/$b-$phase.json" 2>&1 | tee "$out/$b-$phase.log"
	r=${PIPESTATUS[0]}
	sync
	if [ "$r" != 0 ]; then
		echo "bench/guest.sh: $b ($phase) exited $r"
		rc=1
	fi
}

# shellcheck disable=SC2086 # $quick is empty or one flag
case $phase in
rates)
	rows=$("$bin/trigger" --list | grep -v -- '-all')
	if [ -n "$quick" ]; then
		bench trigger --quick $rows
	else
		# Shared host: many short rounds, each row next to its counterpart (report.py).
		bench trigger --duration 0.5 --samples 1 --warmup 1 --rounds 30 $rows
	fi
	;;
attach)
	if [ -n "$quick" ]; then
		bench attach --quick
	else
		bench attach --counts 1,1000,10000
	fi
	;;
all)
	# attach first: the kretprobe.multi-all trigger row has crashed a guest: int3 oops
	bench attach $quick --counts 0 global kprobe.multi fentry
	bench trigger $quick --rounds 3 fentry.multi/global fentry.multi-all/global kprobe.multi \
		kprobe.multi-all kretprobe.multi kretprobe.multi-all
	;;
allpf)
	bench attach $quick --counts 0 tracing_multi
	bench trigger $quick --rounds 3 fentry.multi/per-function fentry.multi-all/per-function
	;;
insn)
	# Counts barely vary (vm/insn/README.md): quick mode only takes fewer windows.
	if [ -n "$quick" ]; then
		bench trigger --insn --insn-windows 9 --profile "$out/insn-profile.md"
	else
		bench trigger --insn --insn-windows 21 --insn-repeats 5 --profile "$out/insn-profile.md"
	fi
	;;
*)
	echo "bench/guest.sh: unknown phase $phase"
	exit 2
	;;
esac
exit $rc
