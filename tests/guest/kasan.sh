#!/usr/bin/env bash
# make test-kasan: the series' own guest checks (ftrace call sites after small updates,
# global trampoline, fexit/fmod_ret multi, among them a detach while threads sleep inside a
# traced function; XDP chain calls) on
# the KASAN build of our kernel. vm/run fails the run on any KASAN report (or other splat) in the console.
# The KASAN guest is several times slower than the normal one; not part of 'make test'.
# Then the UAPI fuzzer (suite part 27) with more operations, a boot per seed:
# UAPI_FUZZ_OPS operations (default 10000) at each seed of UAPI_FUZZ_SEEDS (default "1").
# `tests/guest/kasan.sh fuzz` runs the fuzzer alone; the long run, a million
# operations: UAPI_FUZZ_OPS=100000 UAPI_FUZZ_SEEDS="$(seq -s ' ' 1 10)" tests/guest/kasan.sh fuzz
set -uo pipefail
only_fuzz=0
[ "${1:-}" = fuzz ] && only_fuzz=1
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
# BPFMUX_KASAN_OUT picks another KASAN build, e.g. make kernel-debug's (with lockdep).
kout=${BPFMUX_KASAN_OUT:-${BPFMUX_CACHE:-$HOME/.cache/bpfmux}/build-kasan}
img=$kout/arch/x86/boot/bzImage
if [ ! -f "$img" ]; then
	echo "test-kasan: no KASAN kernel at $img (run 'make kernel-kasan')" >&2
	exit 1
fi
make -s -C "$here" || exit 1
# Test modules are built against the KASAN build: a module must match its kernel's
# struct module, which debug options (lockdep) change.
kmods=$repo/build/guest-kasan
make -s -C "$here" KOUT="$kout" OUT="$kmods" kmods || exit 1
rc=0
if [ $only_fuzz = 0 ]; then
	# Two vCPUs in one host thread, as in make test (kernel/README.md, "Known issues").
	"$repo/vm/run" --kernel "$img" --single-thread --timeout 3000 -- \
		env BPFMUX_KMOD_DIR="$kmods" "$here/suite.sh" ours 18 20 25 || rc=1
	# XDP chain calls: images, dispatcher retargeting and their freeing. One vCPU, as in
	# make test (tests/guest/run.sh: every dispatcher update re-patches text).
	"$repo/vm/run" --kernel "$img" --smp 1 --timeout 3000 -- "$here/suite.sh" ours 55 || rc=1
fi
# Two vCPUs in one host thread as for part 27 in make test: its XDP commands re-patch the
# dispatcher, which single-threaded TCG survives. The timeout allows 2 operations a second.
fuzz_ops=${UAPI_FUZZ_OPS:-10000}
for seed in ${UAPI_FUZZ_SEEDS:-1}; do
	echo "== uapi-fuzz $fuzz_ops $seed (KASAN)"
	"$repo/vm/run" --kernel "$img" --single-thread --timeout $((600 + fuzz_ops / 2)) -- \
		env BPFMUX_KMOD_DIR="$kmods" "$repo/build/guest/uapi-fuzz" "$fuzz_ops" "$seed" ||
		rc=1
done
exit $rc
