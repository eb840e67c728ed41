#!/bin/sh
cd /work/wt-trace-args
rc=0
for e in global tracing-multi kprobe-multi fentry-each; do
  echo "=== args-types $e kmod"
  tests/guest/trace/check.py target/debug/bpfmux build/guest/trigger args-types $e kmod || rc=1
done
for e in global; do
  echo "=== exports $e"
  tests/guest/trace/check.py target/debug/bpfmux build/guest/trigger exports $e || rc=1
done
echo "=== filter global"; tests/guest/trace/check.py target/debug/bpfmux build/guest/trigger filter global || rc=1
echo "=== args global"; tests/guest/trace/check.py target/debug/bpfmux build/guest/trigger args global || rc=1
exit $rc
