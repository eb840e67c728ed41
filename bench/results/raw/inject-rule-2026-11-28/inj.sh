#!/bin/sh
cd /work/wt-inject
B=target/debug/bpfmux
T=/work/main/build/guest/trigger
ls /sys/kernel/debug/error_injection 2>&1 | head -2
grep -c " within_error_injection_list" /proc/kallsyms
for e in fentry-each; do
  echo "=== $e getpgid"
  $B inject --engine $e -c "$T getpgid-errors 5" __x64_sys_getpgid 2>&1 | tail -8
  echo "=== $e security_file_open"
  $B inject --engine $e --errno EACCES --times 2 -c "$T openat-missing 3" security_file_open 2>&1 | tail -8
  echo "=== $e glob"
  $B inject --engine $e -v --times 1 -d 1 'security_file_*' 'vfs_rea*' 2>&1 | tail -12
done
echo "=== auto glob"; $B inject -v --times 1 -d 1 "security_file_*" "vfs_rea*" 2>&1 | tail -5
