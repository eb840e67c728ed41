#!/bin/sh
# A/B: old binary (no unpreempted reads) vs new, alternating, same boot, same command as km.sh.
cd /work/main
T=build/guest/trigger
lo=0 ln=0
for i in $(seq 1 ${N:-20}); do
  for b in old new; do
    B=target/debug/bpfmux; [ $b = old ] && B=build/tmp/bpfmux-old
    out=$($B trace --engine kprobe-multi --errors --stacks -c "$T openat-missing 3" __x64_sys_openat do_sys_openat2 path_openat 2>&1 >/dev/null | grep -E "recursion guard" | grep -v "nothing lost")
    if [ -n "$out" ]; then
      echo "$b run $i: $out"
      [ $b = old ] && lo=$((lo+1)) || ln=$((ln+1))
    fi
  done
done
echo "RESULT old: $lo of ${N:-20} runs lost calls; new: $ln of ${N:-20}"
