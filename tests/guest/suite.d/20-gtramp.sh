# Global-trampoline backend of the tracing multi-link (kernel series): on our kernel
# every behaviour; on stock 7.3.4 the flag must be refused with EINVAL (what user space
# probes for). 6.12 has no tracing multi-link at all. gtramp-ipmodify loads the test module
# build/guest/gtramp_kmod.ko (an IPMODIFY ftrace user, like livepatch); gtramp-ipmodify-peer
# adds a per-function trampoline on the same function, in every order; gtramp-ipmodify-multi
# a per-function multi-link of each kind (stock 7.3 refuses the exit kinds next to the module
# with EAGAIN); gtramp-ipmodify-other moves other functions between the backends meanwhile (a
# lockdep warning before ftrace asked only about the sites it changes). gtramp-detach-fault*
# fail the ftrace update of a detach with failslab (CONFIG_FAILSLAB, this thread only);
# gtramp-detach-nofail detaches global links (a few hundred functions, fentry and fexit;
# every safe function) with this thread's __GFP_NOFAIL allocations traced (tracefs kmem
# events) and every other allocation failing (failslab, fail_page_alloc): none may be
# __GFP_NOFAIL, and the functions must come back to their own code.
# gtramp-counter-fault fails only the in-flight counters' allocation (its stack filter).
if on ours; then
	run gtramp-basic "$bin/gtramp" basic 1000
	run gtramp-many "$bin/gtramp" many 1000 1000
	run gtramp-all "$bin/gtramp" all 300
	run gtramp-args "$bin/gtramp" args
	run gtramp-rollback "$bin/gtramp" rollback
	run gtramp-churn "$bin/gtramp" churn 60
	run gtramp-coexist "$bin/gtramp" coexist 500
	run gtramp-ipmodify "$bin/gtramp" ipmodify 500
	run gtramp-ipmodify-peer "$bin/gtramp" ipmodify-peer 20
	run gtramp-ipmodify-multi "$bin/gtramp" ipmodify-multi 20
	run gtramp-ipmodify-other "$bin/gtramp" ipmodify-other 200
	run gtramp-ipmodify-transient "$bin/gtramp" ipmodify-transient 200
	run gtramp-detach-fault "$bin/gtramp" detach-fault 1000
	run gtramp-detach-fault-all "$bin/gtramp" detach-fault 300 all
	run gtramp-detach-nofail "$bin/gtramp" detach-nofail 1000
	run gtramp-counter-fault "$bin/gtramp" counter-fault 1000
	run gtramp-alias "$bin/gtramp" alias 1000
	run gtramp-stress "$bin/gtramp" stress 10
fi
if on stock-7.3; then
	gtramp_refused() {
		"$bin/gtramp" probe
		[ $? = 3 ]
	}
	run gtramp-flag-refused-by-stock gtramp_refused
fi
