#!/bin/sh
cd /work/main
echo 0 > /proc/sys/kernel/kptr_restrict
echo -1 > /proc/sys/kernel/perf_event_paranoid
for e in "$@"; do
  perf record -q -e cpu-clock -F 2000 -g -o /tmp/perf-$e.data -- build/bench/attach --counts 0 $e 2>&1 | grep -E "^$e "
  perf report -i /tmp/perf-$e.data -n --children --sort sym --stdio -g none --percent-limit 0.4 2>/dev/null | grep -E "^ +[0-9]|Samples|Event count" | head -120 > build/ab/prof-$e.txt
  perf report -i /tmp/perf-$e.data -n --no-children --sort sym --stdio -g caller,0.5,callee --percent-limit 2 2>/dev/null | head -400 > build/ab/prof-$e-callers.txt
done
