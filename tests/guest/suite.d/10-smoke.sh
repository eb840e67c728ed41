# The foundation's checks: feature probes, exact fentry counts, multi-attach on 7.3 and 6.12.
run features "$here/features-check.py" "$kernel" "$bpfmux"
run fentry-count "$bin/smoke" fentry 1000
on ours stock-7.3 && run tracing-multi-1000 "$bin/smoke" tracing-multi 1000 1000
run kprobe-multi-glob "$bin/smoke" kprobe-multi 1000
