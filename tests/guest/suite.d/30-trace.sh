# bpfmux trace: exact counts on every engine the kernel has (-c: the command's own calls
# only, no shell in front), globs of hundreds of
# functions, per-call events, clear errors, refused functions skipped by name, nothing
# left attached after an error or a signal, --errors chains with exact calls and errnos
# (NULL-only chains left out unless --null all), the error recorder (--record-last: exactly
# the last chains per errno on SIGUSR1, after --record-on, at exit: trace-record-*),
# --graph call trees with exact counts per node, no program left behind by a traced call
# that sleeps past the run (trace-sleeper-*), --stacks naming the user frames of a process
# that exited before the run's end (trace-exited-stacks-*), kernel stacks (--stacks,
# --errors) that start at the traced function with no frame of the mechanism, the same on
# every engine (trace-kernel-stacks-*), the outputs other tools load
# (folded stacks, flame graph, pprof, Chrome trace: trace-exports-*), bpfmux report naming
# the frames of a binary gone from a debuginfod server (trace-debuginfod-global),
# bpfmux inject failing exactly --times calls and refusing functions not on the list,
# --filter/--min-latency deciding in the kernel which calls count (trace-filter-*),
# --args printing every argument by its BTF type, stack-passed ones and strings included, and
# its cap on globs, --args-depth printing the structs behind pointers (trace-args-types-*; on
# our kernel with the test module targs_kmod), --filter on strings and on the 7th and later
# arguments (trace-filter-strings-*; on our kernel with targs_kmod's kernel strings too),
# --cgroup/--cgroup-exact and --pid/--pid-ns decided in the kernel (trace-scope-*).
# The checks live in trace/check.py.
tc() { "$here/trace/check.py" "$bpfmux" "$bin/trigger" "$@"; }

# kprobe.multi is upstream's code, which the series does not touch: its checks run on
# the stock kernels, and on ours only where they compare the engines (kernel stacks, the
# recording) or read targs_kmod's arguments.
km=kprobe-multi
on ours && km=
# not_ours CMD...: run CMD except on our kernel
not_ours() { on ours || "$@"; }

# Every kernel: the -c command gets none of bpfmux's descriptors, and bpfmux opens no
# file while it runs (one would meet a traced openat path: trace-own-opens).
run trace-fds tc fds auto
run trace-own-opens tc own-opens auto

# Our kernel: the series' global trampoline (fsession.multi for the exit side: the
# summary must say so), and the automatic choice must take it.
if on ours; then
	run trace-count-global tc count global
	run trace-own-global tc own global
	run trace-latency-global tc count global --latency
	run trace-glob-global tc glob global 300 'vfs_*' '__x64_sys_*'
	run trace-args-global tc args global
	run trace-refused-global tc refused global
	run trace-sigterm-global tc sigterm global 'vfs_*'
	run trace-errors-global tc errors global
	run trace-record-global tc record global
	run trace-exited-stacks-global tc exited-stacks global
	for e in global tracing-multi kprobe-multi fentry-each; do
		run "trace-kernel-stacks-$e" tc kernel-stacks "$e"
	done
	# --record FILE, then bpfmux report FILE in a fresh directory: what the live run
	# printed (the recorder is the same code on every kernel).
	run trace-recording-global tc recording global
	run trace-recording-kprobe-multi tc recording kprobe-multi
	# bpfmux report naming a gone binary's frames from a local debuginfod server.
	run trace-debuginfod-global tc debuginfod global
	run trace-exports-global tc exports global
	run trace-nulls-global tc nulls global
	run trace-graph-global tc graph global
	run trace-filter-global tc filter global
	# fentry-each reads arguments as tracing-multi does (a per-function trampoline's
	# context); it has these checks on both stock kernels.
	for e in global tracing-multi kprobe-multi; do
		run "trace-args-types-$e" tc args-types "$e" kmod
		run "trace-filter-strings-$e" tc filter-strings "$e" kmod
	done
	run trace-sleeper-global tc sleeper global
	# bpfmux inject: fmod_ret.multi through the global trampoline and the plain backend,
	# one fmod_ret per function, and the automatic choice.
	run inject-global tc inject global
	run inject-tracing-multi tc inject tracing-multi
	run inject-fentry-each tc inject fentry-each
	run inject-auto tc inject auto
fi
# Debian's stock kernels are built without function error injection (no list in debugfs):
# the verifier of 7.3 allows fmod_ret on system call entry points and LSM hooks, that of
# 6.12 on LSM hooks only, and bpfmux inject takes exactly those.
if on stock-7.3; then
	run inject-no-list-fentry-each tc inject-no-list fentry-each
	run inject-no-list-auto tc inject-no-list auto
fi
if on stock-6.12; then
	run inject-no-list-fentry-each tc inject-no-list fentry-each lsm-only
	run inject-no-list-auto tc inject-no-list auto lsm-only
fi
# Our kernel and stock 7.3: tracing_multi (fsession.multi for latency), kprobe.multi/
# kprobe.session, one fentry(+fexit) per function; the automatic choice too.
if on ours stock-7.3; then
	for e in auto tracing-multi $km fentry-each; do
		run "trace-count-$e" tc count "$e"
		run "trace-latency-$e" tc count "$e" --latency
	done
	for e in tracing-multi $km fentry-each; do
		run "trace-own-$e" tc own "$e"
	done
	run trace-glob-tracing-multi tc glob tracing-multi 300 'vfs_*' '__x64_sys_*'
	run trace-args-tracing-multi tc args tracing-multi
	run trace-refused-tracing-multi tc refused tracing-multi
	run trace-refused-all-tracing-multi tc refused-all tracing-multi
	run trace-sigterm-tracing-multi tc sigterm tracing-multi 'vfs_*'
	run trace-errors-tracing-multi tc errors tracing-multi
	run trace-record-tracing-multi tc record tracing-multi
	run trace-exited-stacks-tracing-multi tc exited-stacks tracing-multi
	run trace-exports-tracing-multi tc exports tracing-multi
	run trace-nulls-tracing-multi tc nulls tracing-multi
	run trace-graph-tracing-multi tc graph tracing-multi
	for e in tracing-multi $km fentry-each; do
		run "trace-sleeper-$e" tc sleeper "$e"
	done
	for e in tracing-multi $km fentry-each; do
		run "trace-filter-$e" tc filter "$e"
	done
fi
if on stock-7.3; then
	for e in tracing-multi kprobe-multi fentry-each; do
		run "trace-args-types-$e" tc args-types "$e"
		run "trace-filter-strings-$e" tc filter-strings "$e"
	done
fi
# Stock 6.12 has no tracing_multi: the automatic choice falls back to kprobe.multi.
if on stock-6.12; then
	run trace-count-auto tc count auto
	run trace-count-kprobe-multi tc count kprobe-multi
	run trace-own-kprobe-multi tc own kprobe-multi
	run trace-latency-kprobe-multi tc count kprobe-multi --latency
	run trace-count-fentry-each tc count fentry-each
	run trace-own-fentry-each tc own fentry-each
	run trace-latency-fentry-each tc count fentry-each --latency
	run trace-sleeper-kprobe-multi tc sleeper kprobe-multi
	run trace-sleeper-fentry-each tc sleeper fentry-each
	run trace-filter-kprobe-multi tc filter kprobe-multi
	run trace-filter-fentry-each tc filter fentry-each
	run trace-args-types-kprobe-multi tc args-types kprobe-multi
	run trace-args-types-fentry-each tc args-types fentry-each
	run trace-filter-strings-kprobe-multi tc filter-strings kprobe-multi
	run trace-filter-strings-fentry-each tc filter-strings fentry-each
	run trace-no-tracing-multi tc unavailable tracing-multi
fi
not_ours run trace-glob-kprobe-multi tc glob kprobe-multi 300 'vfs_*' '__x64_sys_*'
run trace-glob-fentry-each tc glob fentry-each 50 'vfs_*' __x64_sys_getpgid
not_ours run trace-args-kprobe-multi tc args kprobe-multi
run trace-args-fentry-each tc args fentry-each
not_ours run trace-refused-kprobe-multi tc refused kprobe-multi
run trace-refused-fentry-each tc refused fentry-each
run trace-refused-all-fentry-each tc refused-all fentry-each
# fentry-each loads a program per function: a long attach to interrupt.
run trace-sigint-fentry-each tc sigint fentry-each 'vfs_*' '__x64_sys_*'
not_ours run trace-sigterm-kprobe-multi tc sigterm kprobe-multi 'vfs_*'
# --errors: the failing chain of an openat, on every engine with an exit side.
not_ours run trace-errors-kprobe-multi tc errors kprobe-multi
# --errors --record-last: the last 3 chains per errno, dumped on SIGUSR1, after --record-on
# EBADF and at exit (trace-record-*).
not_ours run trace-record-kprobe-multi tc record kprobe-multi
run trace-errors-fentry-each tc errors fentry-each
# --stacks: user frames of a process that exited before the run's end, named from what was
# normalized while it ran (-c and --pid), and only addresses with --stacks-at-end.
not_ours run trace-exited-stacks-kprobe-multi tc exited-stacks kprobe-multi
run trace-exited-stacks-fentry-each tc exited-stacks fentry-each
# --folded, --flamegraph, --pprof of --stacks and --graph, --chrome-trace of every call.
not_ours run trace-exports-kprobe-multi tc exports kprobe-multi
run trace-exports-fentry-each tc exports fentry-each
# When a NULL return is an error: a lone NULL left out and counted, all with --null all,
# a NULL under an outer errno reported.
not_ours run trace-nulls-kprobe-multi tc nulls kprobe-multi
run trace-nulls-fentry-each tc nulls fentry-each
# --graph: the call tree of a command with exact counts per node, on the same engines.
not_ours run trace-graph-kprobe-multi tc graph kprobe-multi
run trace-graph-fentry-each tc graph fentry-each
# No injection through kprobe.multi (bpf_override_return is not implemented), on any kernel.
run inject-no-kprobe-multi tc inject-unavailable kprobe-multi
# Scoping, on every engine the kernel has: --cgroup with the cgroups below it, --cgroup-exact,
# --pid with --pid-ns (process 1 of one new pid namespace, not of another), in the kernel.
scope_engines="$km fentry-each"
on ours stock-7.3 && scope_engines="tracing-multi $scope_engines"
on ours && scope_engines="global $scope_engines"
for e in $scope_engines; do
	run "trace-scope-cgroup-$e" tc scope-cgroup "$e"
	run "trace-scope-pidns-$e" tc scope-pidns "$e"
done
run trace-unknown-function tc unknown
run trace-c-not-found tc not-found
