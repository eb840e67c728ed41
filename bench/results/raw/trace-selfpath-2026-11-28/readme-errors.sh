#!/bin/sh
cd /work/main
target/debug/bpfmux trace --errors -c 'cat /nonexistent' __x64_sys_openat do_sys_openat2 path_openat
