#!/bin/sh
cd /work/wt-inject
rc=0
for e in $ENGINES; do
  echo "=== $CHECK $e"
  tests/guest/trace/check.py target/debug/bpfmux build/guest/trigger $CHECK $e $OPTS || rc=1
done
exit $rc
