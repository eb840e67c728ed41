#!/bin/bash
cd /work/main
c=tests/guest/trace/check.py
t=build/guest/trigger
echo "=== NEW own-opens auto"; $c target/debug/bpfmux $t own-opens auto; echo "rc $?"
echo "=== NEW exited-stacks global"; $c target/debug/bpfmux $t exited-stacks global; echo "rc $?"
echo "=== NEW errors global"; $c target/debug/bpfmux $t errors global; echo "rc $?"
