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
