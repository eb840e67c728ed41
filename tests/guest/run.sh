#!/usr/bin/env bash
# Host side of the guest tests: build the test programs (and bench/, whose harness
# suite.d/90-bench-quick.sh checks), then boot each kernel and run suite.sh in it.
# A guest that cannot start is a failure, never a skip.
# usage: tests/guest/run.sh [KERNEL...]   (default: ours stock-7.3 stock-6.12)
#
# Each kernel's parts are cut into a few boots ("jobs"), and the jobs of all kernels run
# LANES at a time, longest first: every guest runs under single-threaded TCG (or has one
# vCPU), so it keeps one host core busy and LANES defaults to the number of cores
# (BPFMUX_GUEST_LANES=1 runs them one after the other). A job's output is printed whole
# when it ends, one job at a time; a line says when each one starts.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
[ $# -gt 0 ] || set -- ours stock-7.3 stock-6.12
for k in "$@"; do
	case $k in
	ours | stock-7.3 | stock-6.12) ;;
	*) echo "usage: tests/guest/run.sh [ours|stock-7.3|stock-6.12]..."; exit 2 ;;
	esac
done
lanes=${BPFMUX_GUEST_LANES:-$(nproc)}
[[ $lanes =~ ^[1-9][0-9]*$ ]] || { echo "guest tests: BPFMUX_GUEST_LANES must be a positive number"; exit 2; }

if ! make -s -C "$here" || ! make -s -C "$repo/bench" || ! (cd "$repo" && cargo build --quiet --bin bpfmux); then
	echo "guest tests: building the test programs failed"
	echo "guest: 0 passed, 1 failed"
	exit 1
fi

# The XDP parts boot one vCPU. Every XDP test run (BPF_PROG_TEST_RUN) re-patches the
# kernel's XDP dispatcher, and under QEMU TCG with 2 vCPUs a CPU sometimes runs a stale
# int3 from that patching and dies (kernel/README "Known issues"; a CI run died so in
# xdpchain-stats).
one_cpu_parts="50 55"
# The instruction counter's own checks need its QEMU plugin with its hazards (vm/run
# --insn-hazards), which slows everything else down: their own boot.
insn_parts="15"
# Every other part keeps 2 vCPUs so the trampolines meet SMP, in single-threaded TCG: the
# vCPUs take turns, and patching text that the other one runs does not die of a stale int3
# (bench/int3/run.sh; with a thread per vCPU, CI runs died so in kprobe.multi attach, in
# attaching every function and in the batch symbol checks). They take three boots: the
# kernel-side parts (below 30), the tracer's checks (30, the longest), and the rest of
# the tracer's parts. A boot has 2400 s: a timeout is for a guest that hangs, not for a
# slow one.
trace_parts="30"
kernel_parts= rest_parts=
for f in "$here"/suite.d/*.sh; do
	n=$(basename "$f" | cut -d- -f1)
	[[ " $one_cpu_parts $insn_parts $trace_parts " == *" $n "* ]] && continue
	if [ "$n" -lt 30 ]; then
		kernel_parts="$kernel_parts $n"
	else
		rest_parts="$rest_parts $n"
	fi
done

# The boots, longest first ("KERNEL|SMP|VM_RUN_OPTIONS|PARTS"): the tracer's checks of
# every kernel, then our kernel's other boots, then the stock kernels' short ones.
boots=()
for k in "$@"; do boots+=("$k|2|--single-thread|$trace_parts"); done
for k in "$@"; do
	[ "$k" = ours ] && boots+=("$k|2|--single-thread|$rest_parts" "$k|2|--single-thread|$kernel_parts")
done
for k in "$@"; do
	[ "$k" = ours ] || boots+=("$k|2|--single-thread|$rest_parts" "$k|2|--single-thread|$kernel_parts")
done
for k in "$@"; do
	boots+=("$k|1||$one_cpu_parts" "$k|2|--insn-hazards --single-thread|$insn_parts")
done

# What the guests leave for the host checks below: only this run's.
handoff=$repo/build/guest-handoff
rm -rf "$handoff"

out=$(mktemp -d /tmp/bpfmux-guest.XXXXXX)
trap 'rm -rf "$out"' EXIT

# job I SPEC: one boot running suite.sh on the job's parts; writes "PASSED FAILED" to
# $out/I.res and prints its output when done
job() {
	local i=$1 k smp opts parts log rc attempt counts p f
	IFS='|' read -r k smp opts parts <<<"$2"
	log=$out/$i.log
	read -ra opts <<<"$opts"
	read -ra parts <<<"$parts"
	for attempt in 1 2; do
		"$repo/vm/run" --kernel "$k" --smp "$smp" "${opts[@]}" --timeout 2400 -- \
			"$here/suite.sh" "$k" "${parts[@]}" >"$log.run" 2>&1
		rc=$?
		cat "$log.run" >>"$log"
		# A kernel that dies while booting, before suite.sh printed its first line, ran no
		# test: boot it once more, saying so. Under QEMU TCG with 2 vCPUs, boot-time code
		# patching sometimes dies of an unclaimed int3, stock kernels included (kernel/README
		# "Known issues"). A crash once the suite runs is always a failure.
		if [ "$rc" = 126 ] && ! grep -q '^guest: ' "$log.run" && [ $attempt = 1 ]; then
			echo "guest tests: $k crashed while booting, before any test ran; booting it again" >>"$log"
			continue
		fi
		break
	done
	# Take the counts the guest printed; a guest that died before printing them fails.
	counts=$(grep -E "^$k: [0-9]+ passed, [0-9]+ failed" "$log.run" | tail -n1)
	if [ -n "$counts" ]; then
		p=$(sed -E 's/.*: ([0-9]+) passed.*/\1/' <<<"$counts")
		f=$(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$counts")
	else
		p=0 f=1
	fi
	if [ "$rc" != 0 ] && [ "$f" = 0 ]; then
		f=1   # the suite passed but the run did not (splat, timeout): count it
		echo "FAIL $k (parts ${parts[*]}): vm/run exited $rc" >>"$log"
	fi
	echo "$p $f" >"$out/$i.res"
	{
		flock 9
		echo "=================== guest job $i: $k, parts ${parts[*]} ($smp vCPUs ${opts[*]})"
		cat "$log"
		echo "=================== guest job $i: $k, parts ${parts[*]}: $p passed, $f failed"
	} 9>"$out/print.lock"
}

echo "guest tests: ${#boots[@]} boots, $lanes at a time"
for i in "${!boots[@]}"; do
	while [ "$(jobs -rp | wc -l)" -ge "$lanes" ]; do wait -n; done
	echo "guest tests: job $i starts: ${boots[$i]//|/ | } ($(date -u +%H:%M:%S))"
	job "$i" "${boots[$i]}" &
done
wait

# On the host, once the guests are done: the recording a guest made (suite.d/30,
# trace-debuginfod-global) reported here with a local debuginfod, another machine than
# the one that recorded it.
host_checks() {
	local k=$1
	echo "=================== host: $k's recording reported on the host"
	python3 "$here/trace/check.py" "$repo/target/debug/bpfmux" - host-debuginfod \
		"$handoff/$k/debuginfod"
}
host_passed=0 host_failed=0
for k in "$@"; do
	[ "$k" = ours ] || continue
	if host_checks "$k"; then
		host_passed=$((host_passed + 1))
	else
		host_failed=$((host_failed + 1))
		echo "FAIL host-debuginfod-$k"
	fi
done

passed=$host_passed failed=$host_failed
for i in "${!boots[@]}"; do
	if [ -f "$out/$i.res" ]; then
		read -r p f <"$out/$i.res"
	else
		p=0 f=1
		echo "FAIL guest job $i (${boots[$i]}): no result"
	fi
	passed=$((passed + p)) failed=$((failed + f))
done
echo "guest: $passed passed, $failed failed"
[ "$failed" = 0 ]
