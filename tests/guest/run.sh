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

passed=0 failed=0
for k in "$@"; do
	log=$(mktemp)
	for attempt in 1 2; do
		"$repo/vm/run" --kernel "$k" --timeout 1500 -- "$here/suite.sh" "$k" 2>&1 | tee "$log"
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
		echo "FAIL $k: vm/run exited $rc"
	fi
	passed=$((passed + p)) failed=$((failed + f))
	rm -f "$log"
done
echo "guest: $passed passed, $failed failed"
[ "$failed" = 0 ]
