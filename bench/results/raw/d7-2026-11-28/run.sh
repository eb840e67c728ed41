#!/usr/bin/env bash
# Issue 41, D7: the guest check gtramp detach-nofail on the image 'make kernel' built last.
# bench/results/raw/d7-2026-11-28/run.sh LABEL: builds the guest programs against that build,
# prints the image's tree (kernel/image-tree.sh), boots it single-threaded (the test patches
# text on every function) and keeps everything in LABEL.log next to this script.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../../.." && pwd)
label=${1:?usage: run.sh LABEL}
log=$here/$label.log
cd "$repo"
{
	echo "# $(date -u '+%F %T') UTC, checkout $(git rev-parse --short HEAD)"
	echo "# image: $(kernel/image-tree.sh "${BPFMUX_CACHE:-$HOME/.cache/bpfmux}/build")"
	make -s -C tests/guest || exit 1
	vm/run --kernel ours --single-thread --timeout 2400 -- \
		build/guest/gtramp detach-nofail 1000
	echo "# exit status $?"
} >"$log" 2>&1
tail -n 5 "$log"
