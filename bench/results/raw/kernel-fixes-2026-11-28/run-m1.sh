#!/usr/bin/env bash
# usage: run-m1.sh IMAGE TAG (from the checkout) — the M1 and alias checks (gtramp
# counter-fault, gtramp alias), one boot, log to the results dir
img=$1 tag=$2
cd "$(dirname "$0")/../../../.."
out=bench/results/raw/kernel-fixes-2026-11-28
{
	echo "# $(date -u +%FT%TZ) image $(sha256sum "$img" | cut -c1-16) ($tag)"
	vm/run --kernel "$img" --single-thread --smp 2 --timeout 1500 -- sh -c '
		for t in "counter-fault 1000" "alias 1000"; do
			echo "== gtramp $t"
			build/guest/gtramp $t || echo "== exit status $?"
		done'
	echo "# vm/run exit status: $?"
} > "$out/$tag-gtramp-m1.log" 2>&1
