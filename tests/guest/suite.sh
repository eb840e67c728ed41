#!/bin/sh
# Runs inside the guest: the checks that prove the kernel under test, chosen by its name
# (ours, stock-7.3, stock-6.12). Prints one line per check and "N passed, N failed" last.
set -u
kernel=${1:?usage: suite.sh KERNEL}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
bin=$repo/build/guest
passed=0 failed=0

run() {
	name=$1
	shift
	echo "== $name: $*"
	if "$@"; then
		passed=$((passed + 1)); echo "PASS $name"
	else
		failed=$((failed + 1)); echo "FAIL $name (exit $?)"
	fi
}

echo "guest: $(uname -r) on $(nproc) CPUs"
run features "$here/features-check.py" "$kernel" "$repo/target/debug/bpfmux"
case $kernel in
ours | stock-7.3)
	run fentry-count "$bin/smoke" fentry 1000
	run tracing-multi-1000 "$bin/smoke" tracing-multi 1000 1000
	run kprobe-multi-glob "$bin/smoke" kprobe-multi 1000
	;;
stock-6.12)
	run fentry-count "$bin/smoke" fentry 1000
	run kprobe-multi-glob "$bin/smoke" kprobe-multi 1000
	;;
*)
	echo "suite.sh: unknown kernel $kernel"; exit 2 ;;
esac
echo "$kernel: $passed passed, $failed failed"
[ "$failed" = 0 ]
