#!/usr/bin/env bash
# Host side of the guest tests: build the test programs (and bench/, whose harness
# suite.d/90-bench-quick.sh checks), then boot each kernel and run suite.sh in it.
# A guest that cannot start is a failure, never a skip.
# usage: tests/guest/run.sh [KERNEL...]   (default: ours stock-7.3 stock-6.12)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
[ $# -gt 0 ] || set -- ours stock-7.3 stock-6.12

if ! make -s -C "$here" || ! make -s -C "$repo/bench" || ! (cd "$repo" && cargo build --quiet --bin bpfmux); then
	echo "guest tests: building the test programs failed"
	echo "guest: 0 passed, 1 failed"
	exit 1
fi

# The XDP parts boot one vCPU. Every XDP test run (BPF_PROG_TEST_RUN) re-patches the
# kernel's XDP dispatcher, and under QEMU TCG with 2 vCPUs a CPU sometimes runs a stale
# int3 from that patching and dies (kernel/README "Known issues"; a CI run died so in
# xdpchain-stats). The other parts keep 2 vCPUs so the trampolines meet SMP, in
# single-threaded TCG: the vCPUs take turns, and patching text that the other one runs
# does not die of a stale int3 (bench/int3/run.sh). With a thread per vCPU, a CI run died
# so in the two-vCPU boot (the trace part's kprobe.multi attach, rcu_preempt in
# __schedule on the other vCPU).
one_cpu_parts="50 55"
# The instruction counter's own checks need its QEMU plugin with its hazards (vm/run
# --insn-hazards), which slows everything else down: their own boot.
insn_parts="15"
# Attach/detach under load on both vCPUs, attaching every traceable function, and the batch
# symbol checks (kprobe.multi attached by name again and again; stock 6.12 once died of it
# in CI on a busy host): single-threaded TCG, where patching text that the other vCPU runs
# does not die of a stale int3 (bench/int3/run.sh). Every kernel gets this boot; parts that
# need our kernel skip themselves elsewhere.
single_thread_parts="22 35 40"
# The other parts keep 2 vCPUs, in two boots: the kernel-side parts (below 30), then the
# tracer's (30 on). In one boot our kernel's parts took close to the timeout, then
# 1500 s, and a CI run on a busy host passed it; on an idle host part 30 alone then took
# more than 1500 s (2026-11-28), so a boot now has 2400 s: a timeout is for a guest that
# hangs, not for a slow one.
two_cpu_parts= two_cpu_parts_late=
for f in "$here"/suite.d/*.sh; do
	n=$(basename "$f" | cut -d- -f1)
	[[ " $one_cpu_parts $insn_parts $single_thread_parts " == *" $n "* ]] && continue
	if [ "$n" -lt 30 ]; then
		two_cpu_parts="$two_cpu_parts $n"
	else
		two_cpu_parts_late="$two_cpu_parts_late $n"
	fi
done

passed=0 failed=0
# boot KERNEL SMP VM_RUN_OPTIONS PARTS...: one boot running suite.sh on those parts; adds
# to the counts
boot() {
	local k=$1 smp=$2 log rc attempt counts p f opts
	read -ra opts <<<"$3"
	shift 3
	log=$(mktemp)
	for attempt in 1 2; do
		"$repo/vm/run" --kernel "$k" --smp "$smp" "${opts[@]}" --timeout 2400 -- \
			"$here/suite.sh" "$k" "$@" 2>&1 |
			tee "$log"
		rc=${PIPESTATUS[0]}
		# A kernel that dies while booting, before suite.sh printed its first line, ran no
		# test: boot it once more, saying so. Under QEMU TCG with 2 vCPUs, boot-time code
		# patching sometimes dies of an unclaimed int3, stock kernels included (kernel/README
		# "Known issues"). A crash once the suite runs is always a failure.
		if [ "$rc" = 126 ] && ! grep -q '^guest: ' "$log" && [ $attempt = 1 ]; then
			echo "guest tests: $k crashed while booting, before any test ran; booting it again"
			continue
		fi
		break
	done
	# Take the counts the guest printed; a guest that died before printing them fails.
	counts=$(grep -E "^$k: [0-9]+ passed, [0-9]+ failed" "$log" | tail -n1)
	if [ -n "$counts" ]; then
		p=$(sed -E 's/.*: ([0-9]+) passed.*/\1/' <<<"$counts")
		f=$(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$counts")
	else
		p=0 f=1
	fi
	if [ "$rc" != 0 ] && [ "$f" = 0 ]; then
		f=1   # the suite passed but the run did not (splat, timeout): count it
		echo "FAIL $k (parts $*): vm/run exited $rc"
	fi
	passed=$((passed + p)) failed=$((failed + f))
	rm -f "$log"
}

for k in "$@"; do
	# shellcheck disable=SC2086 # the part lists are words
	boot "$k" 2 "--single-thread" $two_cpu_parts
	# shellcheck disable=SC2086
	boot "$k" 2 "--single-thread" $two_cpu_parts_late
	# shellcheck disable=SC2086
	boot "$k" 1 "" $one_cpu_parts
	# shellcheck disable=SC2086
	boot "$k" 2 "--insn-hazards --single-thread" $insn_parts
	# shellcheck disable=SC2086
	boot "$k" 2 "--single-thread" $single_thread_parts
done
echo "guest: $passed passed, $failed failed"
[ "$failed" = 0 ]
