#!/bin/sh
cd /work/main
C="tests/guest/trace/check.py /work/main/target/debug/bpfmux /work/main/build/guest/trigger"
for e in global tracing-multi fentry-each kprobe-multi; do
	echo "##### kernel-stacks $e"; $C kernel-stacks $e; echo "rc=$?"
done
echo "##### star-self global"; $C star-self global; echo "rc=$?"
echo "##### star global record"; $C star global record; echo "rc=$?"
echo "##### star global errors"; $C star global errors; echo "rc=$?"
