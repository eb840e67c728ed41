#!/bin/sh
cd /work/wt-filter-str
insmod build/guest/targs_kmod.ko
echo '$ bpfmux trace --args --args-depth 2 -c '"'"'trigger targs 1'"'"' bpfmux_targs_struct'
target/debug/bpfmux trace --args --args-depth 2 -c 'build/guest/trigger targs 1' bpfmux_targs_struct
rmmod targs_kmod
echo '$ bpfmux trace --args --filter '"'"'filename == "/nonexistent-bpfmux-trigger/file"'"'"' -c '"'"'trigger openat-missing 3 openat-other 2'"'"' do_sys_openat2'
target/debug/bpfmux trace --args --filter 'filename == "/nonexistent-bpfmux-trigger/file"' -c 'build/guest/trigger openat-missing 3 openat-other 2' do_sys_openat2
echo '$ bpfmux trace --args --args-depth 1 -c '"'"'trigger openat-missing 1'"'"' do_sys_openat2'
target/debug/bpfmux trace --args --args-depth 1 -c 'build/guest/trigger openat-missing 1' do_sys_openat2
