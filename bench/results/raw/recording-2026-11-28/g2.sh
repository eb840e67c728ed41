#!/bin/sh
cd /work/wt-record
C="tests/guest/trace/check.py /work/wt-record/target/debug/bpfmux /work/wt-record/build/guest/trigger"
for e in ${ENGINES:-global kprobe-multi}; do
	echo "##### recording $e"; $C recording $e; echo "rc=$?"
done
