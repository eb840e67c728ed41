#!/bin/bash
B=/work/main/target/debug/bpfmux
V=/run/bpfmux-kernel/vmlinux
a=$(grep " T vfs_read$" /proc/kallsyms | cut -d' ' -f1)
b=$(grep " T do_sys_openat2$" /proc/kallsyms | cut -d' ' -f1)
b2=$(printf "%x" $((0x$(grep " [tT] do_sys_openat2$" /proc/kallsyms | cut -d" " -f1) + 0x50)))
a2=$(printf '%x' $((0x$a + 0x6a)))
echo "\$ bpfmux sym --kernel --vmlinux auto $a2 $b2"
mount -t tmpfs tmp /lib/modules; mkdir -p /lib/modules/$(uname -r)/build; ln -s $V /lib/modules/$(uname -r)/build/vmlinux
s=$(date +%s.%N); $B sym --kernel --vmlinux auto $a2 $b2; e=$(date +%s.%N)
echo "# with --vmlinux: $(echo "$e - $s" | bc) s"
s=$(date +%s.%N); $B sym --kernel $a2 $b2 >/dev/null; e=$(date +%s.%N)
echo "# without: $(echo "$e - $s" | bc) s"
echo "\$ bpfmux trace --stacks --vmlinux auto -c 'cat /nonexistent' path_openat"
$B trace --stacks --vmlinux auto -c 'cat /nonexistent' path_openat
umount /lib/modules
