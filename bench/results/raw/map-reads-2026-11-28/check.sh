#!/bin/sh
cd /work/main
echo "##### old binary (ci-a, 5895432)"
tests/guest/trace/check.py build/tmp/bpfmux-old build/guest/trigger map-reads kprobe-multi; echo "rc=$?"
echo "##### new binary"
tests/guest/trace/check.py target/debug/bpfmux build/guest/trigger map-reads kprobe-multi; echo "rc=$?"
