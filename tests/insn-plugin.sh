#!/usr/bin/env bash
# Host checks of the instruction counter's build and loading (vm/insn; its counting is
# checked in the guest: tests/guest/suite.d/15-insn.sh). Called by tests/host.sh.
#   - vm/insn/build.sh fetches the header and builds a plugin exporting the plugin API
#   - the installed qemu-system-x86_64 loads it, with hazards=on|off too; bad arguments
#     are refused with our message
#   - vm/run --insn fails with one clear line on a QEMU without plugin support and on a
#     missing header
#   - bench/jcmiss/jcmiss.sh (real jump-cache misses) has usage and refuses bad arguments
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0 passed=0

ok() { echo "ok - $*"; passed=$((passed + 1)); }
bad() { echo "FAIL - $*"; failed=$((failed + 1)); }
check() { # check DESCRIPTION COMMAND...
	local what=$1
	shift
	if "$@"; then ok "$what"; else bad "$what"; fi
}
one_line() { [ "$(grep -c . "$1")" = 1 ] && grep -q "$2" "$1"; }
qemu_quit() { echo quit | timeout 60 qemu-system-x86_64 -machine none -nodefaults \
	-display none -monitor stdio "$@" >"$tmp/qemu.out" 2>"$tmp/qemu.err"; }

if ! so=$("$repo/vm/insn/build.sh" 2>"$tmp/build.err"); then
	bad "vm/insn/build.sh builds the plugin: $(cat "$tmp/build.err")"
	echo "insn-plugin checks: $passed passed, $failed failed"
	exit 1
fi
ok "vm/insn/build.sh builds $so"
check "a second build reuses the cached plugin" \
	test "$("$repo/vm/insn/build.sh")" = "$so"
syms=$(nm -D --defined-only "$so")
check "the plugin exports qemu_plugin_install" \
	grep -qw qemu_plugin_install <<<"$syms"
check "... and qemu_plugin_version" grep -qw qemu_plugin_version <<<"$syms"
check "the plugin needs no glib" eval "! ldd '$so' | grep -q glib"
check "qemu-system-x86_64 loads it (out=FILE)" qemu_quit -plugin "$so,out=$tmp/out"
check "the output file exists after loading" test -f "$tmp/out"
qemu_quit -plugin "$so,bogus=1"
check "an unknown argument is refused, saying which" grep -q "unknown argument 'bogus=1'" "$tmp/qemu.err"
check "hazards=on is accepted" qemu_quit -plugin "$so,out=$tmp/out,hazards=on"
check "hazards=off is accepted" qemu_quit -plugin "$so,out=$tmp/out,hazards=off"
qemu_quit -plugin "$so,out=$tmp/out,hazards=yes"
check "hazards=yes is refused, saying which" grep -q "unknown argument 'hazards=yes'" "$tmp/qemu.err"
qemu_quit -plugin "$so"
check "a missing out= is refused" grep -q "no output file" "$tmp/qemu.err"

# vm/run --insn on a QEMU without plugin support: a stand-in that lacks -plugin in -help
mkdir -p "$tmp/bin"
: >"$tmp/bzImage"
printf '#!/bin/sh\n[ "$1" = -help ] && echo "-kernel bzImage"\nexit 1\n' >"$tmp/bin/qemu-system-x86_64"
chmod +x "$tmp/bin/qemu-system-x86_64"
PATH=$tmp/bin:$PATH "$repo/vm/run" --kernel "$tmp/bzImage" --insn -- true 2>"$tmp/err"
rc=$?
check "vm/run --insn without plugin support: exit 125 (got $rc)" test "$rc" = 125
check "... and one line saying so: $(head -c 200 "$tmp/err")" one_line "$tmp/err" 'no TCG plugin support'
BPFMUX_QEMU_PLUGIN_H=$tmp/none/qemu-plugin.h "$repo/vm/run" --kernel "$tmp/bzImage" --insn -- true \
	2>"$tmp/err"
rc=$?
check "vm/run --insn with the header missing: exit 125 (got $rc)" test "$rc" = 125
check "... and one line saying so: $(head -c 200 "$tmp/err")" one_line "$tmp/err" 'qemu-plugin.h: no such file'

# bench/jcmiss/jcmiss.sh (the real jump-cache misses of a running guest): its arguments
jc=$repo/bench/jcmiss/jcmiss.sh
"$jc" --help >"$tmp/out" 2>&1 && grep -q '^usage: bench/jcmiss/jcmiss.sh' "$tmp/out" &&
	grep -q '^example' "$tmp/out"
check "jcmiss --help: exit 0, usage and an example" test $? = 0
jc_refuses() { # jc_refuses WHAT PATTERN ARGS...: exit 1 and one line matching PATTERN
	local what=$1 pattern=$2 rc
	shift 2
	"$jc" "$@" 2>"$tmp/err"
	rc=$?
	if [ "$rc" = 1 ] && one_line "$tmp/err" "$pattern"; then
		ok "jcmiss $what: exit 1 and one line"
	else
		bad "jcmiss $what: exit $rc, '$(head -c 200 "$tmp/err")'"
	fi
}
jc_refuses "with an unknown argument" "unknown argument '--bogus'" --bogus
jc_refuses "without --pid or a command" 'give --pid PID or -- COMMAND' --seconds 1
jc_refuses "with a missing System.map" 'none.map: no such file' --map "$tmp/none.map" --pid 1

echo "insn-plugin checks: $passed passed, $failed failed"
[ "$failed" = 0 ]
