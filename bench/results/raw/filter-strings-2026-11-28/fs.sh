#!/bin/sh
cd /work/wt-filter-str
rc=0
for e in $ENGINES; do
  for c in filter-strings args-types; do
    echo "=== $c $e $KMOD"
    tests/guest/trace/check.py target/debug/bpfmux build/guest/trigger $c $e $KMOD || rc=1
  done
done
for e in $FILTER; do
  echo "=== filter $e"
  tests/guest/trace/check.py target/debug/bpfmux build/guest/trigger filter $e || rc=1
done
exit $rc
