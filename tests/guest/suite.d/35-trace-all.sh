# `bpfmux trace '*'` on every traceable function: one link per BTF object
# (with --errors too on the global engine, whose exit side refuses some prototypes)
# where the engine allows, no function refused at attach (the selection predicts the
# kernel), counts that leave out the attach's own text patching, whole progress lines on a
# file, and SIGINT mid-attach answered at once with nothing left in the kernel.
# tests/guest/run.sh boots this part under single-threaded TCG: attaching 38,000
# functions patches text the other vCPU runs (kernel/README "Known issues").
# fentry-each on all functions would take about 16 minutes here (one program and
# trampoline each): it is only interrupted, 20 s into its attach.
tc() { "$here/trace/check.py" "$bpfmux" "$bin/trigger" "$@"; }
if on ours; then
	for e in global tracing-multi kprobe-multi; do
		run "trace-all-$e" tc star "$e"
	done
	run trace-all-errors-global tc star global errors
	# The tracer's own path left out of '*' (trace::selfpath): 10 times fewer calls turned
	# away by the recursion guard than with it kept.
	run trace-all-self-global tc star-self global
	# The recorder left on '*', dumping on SIGUSR1 and after EBADF: the trigger's bad
	# closes reach it now that the tracer's own path is left out.
	run trace-all-record-global tc star global record
	run trace-all-sigint-global tc star-sigint global 1
	run trace-all-sigint-kprobe-multi tc star-sigint kprobe-multi 1
	run trace-all-sigint-fentry-each tc star-sigint fentry-each 20
fi
