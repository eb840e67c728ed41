# The benchmark harness still runs (make bench-quick does the whole thing; this is the
# in-guest part, short): trigger rows count exactly 100 target calls per driver run before
# they are timed (a miscount exits non-zero), attach reports what the kernel accepts.
# Rows a kernel lacks print "not available on this kernel" and do not fail.
bench_bin=$repo/build/bench
bench_trigger_quick() {
	local rows="usermode-count kernel-count fentry fexit kprobe kprobe.multi rawtp"
	on ours stock-7.3 && rows="$rows fentry.multi/per-function"
	on ours && rows="$rows fentry.multi/global"
	# shellcheck disable=SC2086 # a list of row names
	"$bench_bin/trigger" --duration 0.1 --samples 1 --warmup 0 --rounds 1 $rows >/tmp/trigger.out &&
		cat /tmp/trigger.out && ! grep -q 'not available' /tmp/trigger.out
}
run bench-trigger-quick bench_trigger_quick
bench_attach_quick() {
	local engines="kprobe.multi fentry"
	on ours stock-7.3 && engines="$engines tracing_multi"
	on ours && engines="$engines global"
	# shellcheck disable=SC2086 # a list of engine names
	"$bench_bin/attach" --quick --counts 1,50 $engines >/tmp/attach.out &&
		cat /tmp/attach.out && ! grep -q 'not available\|skipped' /tmp/attach.out
}
run bench-attach-quick bench_attach_quick
# The XDP chain-call benchmark (bench/xdpchain) needs the series' chain calls: ours only.
on ours && run bench-xdpchain-quick "$bench_bin/xdpchain" 1 2000
# The batch symbol lookup benchmark (bench/batchsym) runs on every kernel.
run bench-batchsym-quick "$bench_bin/batchsym-bench" lookup 1 2 64
