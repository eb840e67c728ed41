# bpfmux trace: exact counts on every engine the kernel has, globs of hundreds of
# functions, per-call events, clear errors. The checks live in trace/check.py.
tc() { "$here/trace/check.py" "$bpfmux" "$bin/trigger" "$@"; }

# Our kernel and stock 7.3: tracing_multi (fsession.multi for latency), kprobe.multi/
# kprobe.session, one fentry(+fexit) per function; the automatic choice too.
if on ours stock-7.3; then
	for e in auto tracing-multi kprobe-multi fentry-each; do
		run "trace-count-$e" tc count "$e"
		run "trace-latency-$e" tc count "$e" --latency
	done
	run trace-glob-tracing-multi tc glob tracing-multi 300 'vfs_*' '__x64_sys_*'
	run trace-args-tracing-multi tc args tracing-multi
fi
# Stock 6.12 has no tracing_multi: the automatic choice falls back to kprobe.multi.
if on stock-6.12; then
	run trace-count-auto tc count auto
	run trace-count-kprobe-multi tc count kprobe-multi
	run trace-latency-kprobe-multi tc count kprobe-multi --latency
	run trace-count-fentry-each tc count fentry-each
	run trace-latency-fentry-each tc count fentry-each --latency
	run trace-no-tracing-multi tc unavailable tracing-multi
fi
run trace-glob-kprobe-multi tc glob kprobe-multi 300 'vfs_*' '__x64_sys_*'
run trace-glob-fentry-each tc glob fentry-each 50 'vfs_*' __x64_sys_getpgid
run trace-args-kprobe-multi tc args kprobe-multi
run trace-args-fentry-each tc args fentry-each
run trace-unknown-function tc unknown
