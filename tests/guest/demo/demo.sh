#!/bin/bash
# `make demo`, in the guest: bpfmux trace on this kernel's global trampoline, two scenes.
#
#   demo.sh BPFMUX           for a person: the live table of scene 1, then scene 2's
#                            latencies (on a terminal; vm/run gives the guest one)
#   demo.sh BPFMUX --json    scene 1 only, as JSON lines on stdout: what the guest check
#                            suite.d/32-demo.sh reads (demo/check.py)
#
# Scene 1: one BPF program on every vfs_* and __x64_sys_* function the kernel lets a
# trampoline take (several hundred), one tracing_multi link, calls per second while a small
# workload runs. Scene 2: per-call latency of a few of them (avg, max, log2 histograms).
# Banners go to stderr, so stdout holds only bpfmux's own output.
set -u
bpfmux=${1:?usage: demo.sh BPFMUX [--json]}
json=${2:-}
[ -x "$bpfmux" ] || { echo "demo.sh: no bpfmux at $bpfmux" >&2; exit 1; }

SECONDS1=8 SECONDS2=5
SCENE1=(--engine global -d "$SECONDS1" -n 15 'vfs_*' '__x64_sys_*')
SCENE2=(--engine global --latency -d "$SECONDS2" -n 10
	vfs_read vfs_write vfs_open vfs_statx __x64_sys_getdents64)

# A small file-system workload, a few rounds a second under emulation: directory walks and
# stats, opens, reads, writes, short processes.
workload() {
	while :; do
		ls -lR /etc >/dev/null 2>&1
		find /usr/share/doc -maxdepth 1 -newer /etc/hostname >/dev/null 2>&1
		cat /proc/self/status /etc/passwd >/dev/null
		dd if=/dev/zero of=/tmp/bpfmux-demo bs=64k count=16 status=none
		sha1sum /tmp/bpfmux-demo /bin/bash >/dev/null
		rm -f /tmp/bpfmux-demo
	done
}
workload &
load=$!
stop_workload() {
	kill "$load" 2>/dev/null
	wait "$load" 2>/dev/null
}
trap stop_workload EXIT

say() { printf '%s\n' "$@" >&2; }
shown() { printf ' %q' "$@"; }

if [ "$json" = --json ]; then
	"$bpfmux" trace "${SCENE1[@]}" --json
	exit
fi

say "" "== bpfmux demo 1/2: $(uname -r)" \
	"One BPF program on every vfs_* and __x64_sys_* function this kernel lets a trampoline" \
	"take, attached through the series' global trampoline (one tracing_multi link), counting" \
	"calls while a small file-system workload runs, for $SECONDS1 seconds:" \
	"" "\$ bpfmux trace$(shown "${SCENE1[@]}")" ""
"$bpfmux" trace "${SCENE1[@]}" || exit
say "" "== bpfmux demo 2/2: the latency of every call of a few of them, from entry to exit" \
	"(average and maximum live, log2 histograms at the end), for $SECONDS2 seconds:" \
	"" "\$ bpfmux trace$(shown "${SCENE2[@]}")" ""
"$bpfmux" trace "${SCENE2[@]}" || exit
say "" "== That was bpfmux trace. More: 'bpfmux trace --help' in an interactive guest" \
	"(vm/run with no command, the checkout is at the same path), and the README."
