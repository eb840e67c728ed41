#!/usr/bin/env bash
# usage: run.sh IMAGE TAG (from the checkout; TAG before or after) — the issue-41 checks, one boot each, logs to the results dir
img=$1 tag=$2
cd /work/main
out=bench/results/raw/kernel-fixes-2026-11-27
b=target/debug/bpfmux
one() {
	local name=$1; shift
	{
		echo "# $(date -u +%FT%TZ) image $(sha256sum "$img" | cut -c1-16) ($tag): $*"
		vm/run --kernel "$img" --single-thread --smp 2 --timeout 900 "$@"
		echo "# vm/run exit status: $?"
	} > "$out/$tag-$name.log" 2>&1
}
one gtramp-detach-fault -- build/guest/gtramp detach-fault 1000
one gtramp-detach-fault-all -- build/guest/gtramp detach-fault 300 all
one gexit-pinned-detach -- build/guest/gexit pinned-detach
one gexit-sleep -- build/guest/gexit sleep
one trace-sleeper-global -- tests/guest/trace/check.py $b build/guest/trigger sleeper global
one xdpchain-api --  build/guest/xdpchain api
echo finished
