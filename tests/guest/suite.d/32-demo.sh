# make demo's first scene (demo/demo.sh: bpfmux trace --engine global on every vfs_* and
# __x64_sys_* function, a workload running), with JSON lines instead of the live table: the
# numbers it shows must add up at every interval (demo/check.py). Global engine: ours only.
if on ours; then
	run demo-trace-numbers "$here/demo/check.py" "$bpfmux"
fi
