#!/usr/bin/env bash
# usage: run.sh IMAGE TAG (from the checkout) — the H2 checks (IPMODIFY next to a
# per-function trampoline), one boot, log to the results dir
img=$1 tag=$2
cd "$(dirname "$0")/../../../.."
out=bench/results/raw/kernel-fixes-2026-11-28
{
	echo "# $(date -u +%FT%TZ) image $(sha256sum "$img" | cut -c1-16) ($tag)"
	vm/run --kernel "$img" --single-thread --smp 2 --timeout 1500 -- sh -c '
		for t in "ipmodify-transient 200" "ipmodify-peer 20" "ipmodify 500" "coexist 500"; do
			echo "== gtramp $t"
			build/guest/gtramp $t || echo "== exit status $?"
		done'
	echo "# vm/run exit status: $?"
} > "$out/$tag-gtramp-ipmodify.log" 2>&1
