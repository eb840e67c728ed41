#!/bin/sh
cd /work/main
C="tests/guest/trace/check.py /work/main/target/debug/bpfmux /work/main/build/guest/trigger"
for e in tracing-multi fentry-each global kprobe-multi; do $C kernel-stacks $e; echo "rc=$?"; done
$C exited-stacks global; echo "rc=$?"
