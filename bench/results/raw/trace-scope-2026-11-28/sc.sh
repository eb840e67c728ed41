#!/bin/sh
cd /work/wt-scope
rc=0
for e in $ENGINES; do
  for c in scope-cgroup scope-pidns; do
    echo "=== $c $e"
    tests/guest/trace/check.py target/debug/bpfmux build/guest/trigger $c $e || rc=1
  done
done
exit $rc
