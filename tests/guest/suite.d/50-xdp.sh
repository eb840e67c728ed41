# bpfmux xdp: several XDP programs on one veth interface, chained by return code.
# Every kernel runs the same checks; on kernels without chain calls (stock 6.12 and 7.3,
# and ours until its kernel-chain engine is wired) sets of several programs run on the
# freplace dispatcher. Each case sets up and tears down its own namespaces.
for case in chain-pass chain-drop chain-on replace detach failure bad-inputs; do
	run "xdp-$case" env XDP_KERNEL="$kernel" "$here/xdp/check.sh" "$case"
done
