#!/bin/sh
cd /work/wt-trace-args
B=target/debug/bpfmux
$B trace --engine global --args -c "build/guest/trigger openat-missing 1" do_sys_openat2 2>&1 | tail -8
insmod build/guest/targs_kmod.ko
grep targs /proc/kallsyms | head
ls -la /proc/bpfmux_targs
$B trace --engine global --args -c "build/guest/trigger targs 1" bpfmux_targs_nine bpfmux_targs_strings bpfmux_targs_pair 2>&1 | tail -20
$B trace --engine kprobe-multi --args -c "build/guest/trigger targs 1" bpfmux_targs_nine 2>&1 | tail -20
$B trace --engine global -c "build/guest/trigger targs 1" bpfmux_targs_nine 'targs_*' 2>&1 | tail -20
rmmod targs_kmod
