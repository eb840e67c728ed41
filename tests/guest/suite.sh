#!/bin/bash
# Runs inside the guest: every check for the kernel under test, chosen by its name
# (ours, stock-7.3, stock-6.12). Each file in suite.d/ adds checks with `run NAME CMD...`
# and reads $kernel to pick what applies. Prints one line per check and
# "KERNEL: N passed, N failed" last. Extra arguments pick parts of suite.d/ by name
# prefix, e.g. `suite.sh ours 20 25` for the global-trampoline checks only.
set -u
kernel=${1:?usage: suite.sh KERNEL [PART...]}
shift
parts=("$@")
case $kernel in
ours | stock-7.3 | stock-6.12) ;;
*) echo "suite.sh: unknown kernel $kernel"; exit 2 ;;
esac
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
bin=$repo/build/guest
bpfmux=$repo/target/debug/bpfmux
# What a check leaves for the host to read after the guest has gone (tests/guest/run.sh).
export BPFMUX_HANDOFF=$repo/build/guest-handoff/$kernel
passed=0 failed=0

run() {
	local name=$1 start=$SECONDS
	shift
	echo "== $name: $*"
	if "$@"; then
		passed=$((passed + 1)); echo "PASS $name ($((SECONDS - start)) s)"
	else
		local rc=$?
		failed=$((failed + 1)); echo "FAIL $name (exit $rc, $((SECONDS - start)) s)"
	fi
}

# Is this kernel one of the named ones?  e.g.  on ours stock-7.3 && run ...
on() {
	local k
	for k in "$@"; do [ "$k" = "$kernel" ] && return 0; done
	return 1
}

echo "guest: $(uname -r) on $(nproc) CPUs"
picked() {
	local p
	[ ${#parts[@]} = 0 ] && return 0
	for p in "${parts[@]}"; do [[ $(basename "$1") == "$p"* ]] && return 0; done
	return 1
}
for part in "$here"/suite.d/*.sh; do
	picked "$part" || continue
	# shellcheck source=/dev/null
	. "$part"
done
echo "$kernel: $passed passed, $failed failed"
[ "$failed" = 0 ]
