#!/bin/sh
# Guest-side profile of one '*' attach + detach per engine (perf, cpu-clock, kernel and
# user stacks). Run from the repo root as:
#   vm/run --single-thread -- bench/results/raw/attach-profile/prof.sh global kprobe-multi
# writes build/attach-profile-ENGINE.txt (OUT=dir to change).
cd "$(dirname "$0")/../../../.." || exit 1
echo 0 > /proc/sys/kernel/kptr_restrict 2>/dev/null
echo -1 > /proc/sys/kernel/perf_event_paranoid 2>/dev/null
./target/release/bpfmux trace --list '*' > /tmp/all.txt 2>/dev/null
for e in "$@"; do
  perf record -q -e cpu-clock -F 2000 -g -o /tmp/perf-$e.data -- ./target/release/bpfmux trace --engine $e -d 0 -f /tmp/all.txt -v 2>&1 | grep -E "attach:|attached"
  perf report -i /tmp/perf-$e.data -n --children --sort sym --stdio -g none --percent-limit 0.5 2>/dev/null | grep -E "^ +[0-9]|Samples|Event count" | head -90 > ${OUT:-build}/attach-profile-$e.txt
done
