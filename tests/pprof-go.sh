#!/usr/bin/env bash
# What `go tool pprof` makes of bpfmux's pprof profiles (trace::export::pprof), written by
# `cargo run --example export_profiles` from a made-up run. Called by tests/host.sh.
#   - a stack profile: type calls, 2 s; __x64_sys_getpgid flat 4 (every call), main and
#     exited_b cum 4, exited_a cum 3, exited_c cum 1; -traces has the process's pid label
#   - a call-graph profile: type time by default, __x64_sys_rt_sigaction flat 1950.50us
#     cum 2400us, do_sigaction 449.50us, __x64_sys_getpgid 38us; -sample_index=calls:
#     50, 50 and 10 calls
# Needs Go: `go` on PATH, or /usr/local/go/bin/go, or Debian's golang-go (/usr/lib/go/bin).
# Without it this fails, saying so: it does not skip.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0 passed=0

ok() { echo "ok - $*"; passed=$((passed + 1)); }
bad() { echo "FAIL - $*"; failed=$((failed + 1)); }
done_() {
	echo "pprof-go checks: $passed passed, $failed failed"
	[ "$failed" = 0 ]
	exit
}

go=$(command -v go || true)
for g in /usr/local/go/bin/go /usr/lib/go/bin/go; do
	[ -n "$go" ] || { [ -x "$g" ] && go=$g; }
done
if [ -z "$go" ]; then
	bad "no Go toolchain (go on PATH, /usr/local/go, or Debian's golang-go): \
go tool pprof cannot read the profiles; install golang-go"
	done_
fi
echo "pprof-go: $("$go" version)"

if ! (cd "$repo" && cargo run --quiet -p bpfmux --example export_profiles -- "$tmp") \
	>"$tmp/example.out" 2>&1; then
	bad "the export_profiles example writes the profiles: $(cat "$tmp/example.out")"
	done_
fi

# pprof TOP FILE [ARGS...]: go tool pprof -top's output, into $tmp/TOP.
pprof() {
	local out=$tmp/$1 file=$2
	shift 2
	if ! timeout 600 "$go" tool pprof "$@" "$tmp/$file" >"$out" 2>&1; then
		bad "go tool pprof $* $file: $(cat "$out")"
		return 1
	fi
	sed 's/^/  /' "$out"
}
# row TOP FUNCTION: "flat cum" of FUNCTION's row.
row() { awk -v f="$2" '$6 == f { print $1, $4 }' "$tmp/$1"; }
expect() { # expect TOP FUNCTION "FLAT CUM"
	local got
	got=$(row "$1" "$2")
	if [ "$got" = "$3" ]; then ok "$1: $2 $got"; else bad "$1: $2 flat/cum '$got' (want '$3')"; fi
}
has() { # has TOP TEXT
	if grep -qF -- "$2" "$tmp/$1"; then ok "$1: '$2'"; else bad "$1: no '$2'"; fi
}

if pprof stacks stacks.pb.gz -top; then
	has stacks "Type: calls"
	has stacks "Duration: 2s, Total samples = 4"
	expect stacks __x64_sys_getpgid "4 4"
	expect stacks main "0 4"
	expect stacks exited_b "0 4"
	expect stacks exited_a "0 3"
	expect stacks exited_c "0 1"
	expect stacks "[libc.so.6]" "0 4"
	first=$(awk '$1 ~ /^[0-9]/ && NF == 6 { print $6; exit }' "$tmp/stacks")
	if [ "$first" = __x64_sys_getpgid ]; then ok "stacks: the top function is the traced one"
	else bad "stacks: top function '$first' (want __x64_sys_getpgid)"; fi
fi
if pprof traces stacks.pb.gz -traces; then
	has traces "pid:  91"
fi
if pprof graph graph.pb.gz -top; then
	has graph "Type: time"
	expect graph __x64_sys_rt_sigaction "1950.50us 2400us"
	expect graph do_sigaction "449.50us 449.50us"
	expect graph __x64_sys_getpgid "38us 38us"
fi
if pprof calls graph.pb.gz -top -sample_index=calls; then
	expect calls __x64_sys_rt_sigaction "50 100"
	expect calls do_sigaction "50 50"
	expect calls __x64_sys_getpgid "10 10"
fi
done_
