#!/bin/sh
# A/B as kmab.sh, bpfmux and its -c command pinned to CPU 0 (taskset -c 0).
cd /work/main
T=build/guest/trigger
lo=0 ln=0
for i in $(seq 1 ${N:-12}); do
  for b in old new; do
    B=target/debug/bpfmux; [ $b = old ] && B=build/tmp/bpfmux-old
    out=$(taskset -c 0 $B trace --engine kprobe-multi --errors --stacks -c "$T openat-missing 3" __x64_sys_openat do_sys_openat2 path_openat 2>&1 >/dev/null | grep -E "recursion guard" | grep -v "nothing lost")
    if [ -n "$out" ]; then
      echo "$b run $i: $out"
      [ $b = old ] && lo=$((lo+1)) || ln=$((ln+1))
    fi
  done
done
echo "RESULT old: $lo of ${N:-12} runs lost calls; new: $ln of ${N:-12}"
