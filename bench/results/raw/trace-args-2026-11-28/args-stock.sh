#!/bin/sh
cd /work/wt-trace-args
rc=0
for e in $ENGINES; do
  echo "=== args-types $e"
  tests/guest/trace/check.py target/debug/bpfmux build/guest/trigger args-types $e || rc=1
  echo "=== args $e"
  tests/guest/trace/check.py target/debug/bpfmux build/guest/trigger args $e || rc=1
done
for e in $EXPORTS; do
  echo "=== exports $e"
  tests/guest/trace/check.py target/debug/bpfmux build/guest/trigger exports $e || rc=1
done
exit $rc
