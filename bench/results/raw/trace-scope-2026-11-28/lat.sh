#!/bin/sh
cd /work/wt-scope
echo "$ bpfmux trace --min-latency 100ms --latency -c 'trigger nanosleep0 20 nanosleep200ms 2' __x64_sys_nanosleep"
target/debug/bpfmux trace --min-latency 100ms --latency -c 'build/guest/trigger nanosleep0 20 nanosleep200ms 2' __x64_sys_nanosleep
