#!/bin/bash
cd /work/main
c=tests/guest/trace/check.py
t=build/guest/trigger
for i in 1 2; do
echo "=== OLD dafc0a2 own-opens auto"; $c build/tmp/bpfmux-dafc0a2 $t own-opens auto; echo "rc $?"
echo "=== NEW own-opens auto"; $c target/debug/bpfmux $t own-opens auto; echo "rc $?"
done
