#!/bin/bash
cd /work/main
c=tests/guest/trace/check.py
t=build/guest/trigger
k=$1
echo "=== OLD dafc0a2 own-opens auto"; $c build/tmp/bpfmux-dafc0a2 $t own-opens auto; echo "rc $?"
echo "=== NEW own-opens auto"; $c target/debug/bpfmux $t own-opens auto; echo "rc $?"
if [ "$k" = ours ]; then
for e in global tracing-multi; do
echo "=== NEW errors $e"; $c target/debug/bpfmux $t errors $e; echo "rc $?"
echo "=== NEW record $e"; $c target/debug/bpfmux $t record $e; echo "rc $?"
done
echo "=== NEW nulls global"; $c target/debug/bpfmux $t nulls global; echo "rc $?"
echo "=== NEW graph global"; $c target/debug/bpfmux $t graph global; echo "rc $?"
echo "=== NEW exited-stacks global"; $c target/debug/bpfmux $t exited-stacks global; echo "rc $?"
else
echo "=== NEW errors fentry-each"; $c target/debug/bpfmux $t errors fentry-each; echo "rc $?"
echo "=== NEW errors kprobe-multi"; $c target/debug/bpfmux $t errors kprobe-multi; echo "rc $?"
fi
