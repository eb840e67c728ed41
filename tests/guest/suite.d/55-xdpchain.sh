# Kernel XDP chain calls (kernel series): on our kernel every behaviour of
# BPF_PROG_CHAIN_ADD/DEL/GET; on stock kernels the three commands must be refused with
# EINVAL, which is what user space (bpfmux xdp) probes for before falling back to its
# freplace dispatcher.
if on ours; then
	run xdpchain-probe "$bin/xdpchain" probe
	run xdpchain-follow "$bin/xdpchain" follow
	run xdpchain-api "$bin/xdpchain" api
	run xdpchain-limits "$bin/xdpchain" limits
	run xdpchain-stats "$bin/xdpchain" stats
	run xdpchain-release "$bin/xdpchain" release
	run xdpchain-interp "$bin/xdpchain" interp
	run xdpchain-capacity "$bin/xdpchain" capacity
	run xdpchain-race "$bin/xdpchain" race 5
	run xdpchain-info-loop "$bin/xdpchain" info-loop 5
	run xdpchain-veth "$bin/xdpchain" veth 200
else
	run xdpchain-refused-by-stock "$bin/xdpchain" refused
fi
