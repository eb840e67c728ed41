#!/bin/sh
cd /work/main
C="tests/guest/trace/check.py /work/main/target/debug/bpfmux /work/main/build/guest/trigger"
$C exited-stacks global; echo "rc=$?"
$C kernel-stacks global; echo "rc=$?"
$C kernel-stacks kprobe-multi; echo "rc=$?"
