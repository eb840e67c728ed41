#!/bin/sh
# kprobe-multi: how often does a short -c run lose its calls to the recursion guard?
cd /work/main
B=target/debug/bpfmux T=build/guest/trigger
for mode in ${MODES:-stacks nostacks}; do
  lost=0 runs=0
  for i in $(seq 1 ${N:-12}); do
    if [ $mode = stacks ]; then extra="--stacks"; else extra=""; fi
    out=$($B trace --engine kprobe-multi --errors $extra -c "$T openat-missing 3" __x64_sys_openat do_sys_openat2 path_openat 2>&1 >/dev/null | grep -E "recursion guard" | grep -v "nothing lost")
    runs=$((runs+1))
    [ -n "$out" ] && { lost=$((lost+1)); echo "$mode run $i: $out"; }
  done
  echo "RESULT $mode: $lost of $runs runs lost calls"
done
