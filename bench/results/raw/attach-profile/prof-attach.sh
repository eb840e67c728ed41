#!/bin/sh
cd "$(dirname "$0")/../../../.." || exit 1
echo 0 > /proc/sys/kernel/kptr_restrict 2>/dev/null
echo -1 > /proc/sys/kernel/perf_event_paranoid 2>/dev/null
for e in global kprobe.multi; do
  perf record -q -e cpu-clock -F 4000 -g -o /tmp/perf-$e.data -- build/bench/attach --counts 0 $e 2>&1 | grep -v "^attach:"
  echo "== $e self"
  perf report -i /tmp/perf-$e.data -n --no-children --sort sym --stdio -g none --percent-limit 0.4 2>/dev/null | grep -E "^ +[0-9]|Samples" | head -45
  echo "== $e children"
  perf report -i /tmp/perf-$e.data -n --children --sort sym --stdio -g none --percent-limit 1.5 2>/dev/null | grep -E "^ +[0-9]|Samples" | head -60
done
