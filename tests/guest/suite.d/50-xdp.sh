# bpfmux xdp: several XDP programs on one veth interface, chained by return code.
# Every kernel runs the same checks; sets of several programs run on the kernel's chain
# calls where it has them (ours: the default engine) and otherwise on the freplace
# dispatcher, which ours checks too. Each case sets up and tears down its own namespaces.
for case in chain-pass chain-drop chain-on replace detach failure bad-inputs; do
	run "xdp-$case" env XDP_KERNEL="$kernel" "$here/xdp/check.sh" "$case"
done
if on ours; then
	for case in chain-pass chain-drop chain-on replace detach failure; do
		run "xdp-$case-dispatcher" env XDP_KERNEL="$kernel" "$here/xdp/check.sh" "$case" dispatcher
	done
fi
# bpfmux next to Debian's xdp-tools (xdp-loader, libxdp's dispatcher) on one interface, in
# both orders; every kernel (libxdp's dispatcher needs freplace, which all three have).
for case in libxdp-bpfmux-first libxdp-loader-first libxdp-force; do
	run "xdp-$case" env XDP_KERNEL="$kernel" "$here/xdp/check.sh" "$case"
done
