# The global trampoline's attach/detach loop with the workers on both vCPUs.
# tests/guest/run.sh boots this part under single-threaded TCG (vm/run --single-thread):
# with multi-threaded TCG, patching call sites that the other vCPU is executing dies of an
# unclaimed int3, stock kernels too (bench/int3/run.sh measures it; kernel/README
# "Known issues"); 20-gtramp.sh keeps the pinned variant for the default boot.
if on ours; then
	run gtramp-stress-all-cpus "$bin/gtramp" stress 10 all-cpus
	run gtramp-stress-all-cpus-per-function "$bin/gtramp" stress 10 per-function all-cpus
fi
