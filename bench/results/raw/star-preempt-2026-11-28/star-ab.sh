#!/bin/sh
cd /work/main
for k in cur exp-preempt; do
  echo "######## kernel $k"
  vm/run --kernel /work/images/$k-bzImage --single-thread --timeout 1500 -- build/tmp/star.sh 2>&1 | grep -vE "^\[ *[0-9]"
done
