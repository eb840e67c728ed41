#!/bin/bash
# Guest checks of `bpfmux xdp` over a veth pair between two network namespaces:
# xa (sender, xa0 10.47.0.1) -> xb (receiver, xb0 10.47.0.2, where the XDP set runs).
# The test programs (xdp_progs.bpf.c) count UDP packets to port 47000 per program
# in a pinned map; xdp-traffic sends numbered packets and counts what arrives.
#
# The libxdp-* cases share the interface with Debian's xdp-tools (xdp-loader, libxdp's
# dispatcher; `make deps` installs them): programs of both tools in one dispatcher.
#
# usage: check.sh CASE [ENGINE]    ENGINE: the --engine for sets of several programs
#                                  (default auto). Prints ok/FAIL lines; exit 1 on any FAIL.
set -u
case_name=${1:?usage: check.sh CASE}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
bin=$repo/build/guest
bpfmux=$repo/target/debug/bpfmux
obj=$bin/xdp_progs.bpf.o
traffic=$bin/xdp-traffic
engine=${2:-auto}
N=300     # packets per measurement
PPS=3000
failures=0

ok() { echo "ok - $*"; }
fail() { echo "FAIL - $*"; failures=$((failures + 1)); }
expect() { # NAME GOT WANT
	if [ "$2" = "$3" ]; then ok "$1: $2"; else fail "$1: got '$2', want '$3'"; fi
}

setup() {
	teardown
	# stock kernels build veth as a module, and nothing autoloads it in the guest
	[ -d /sys/module/veth ] || modprobe veth 2>/dev/null
	ip netns add xa && ip netns add xb || { fail "ip netns add"; exit 1; }
	ip -n xa link add xa0 type veth peer name xb0 netns xb || { fail "veth pair"; exit 1; }
	ip -n xa addr add 10.47.0.1/24 dev xa0
	ip -n xb addr add 10.47.0.2/24 dev xb0
	ip -n xa link set xa0 up
	ip -n xb link set xb0 up
	ip -n xa link set lo up
	ip -n xb link set lo up
	# static neighbours: no ARP in flight when counting starts
	ip -n xa neigh replace 10.47.0.2 lladdr "$(mac xb xb0)" dev xa0 nud permanent
	ip -n xb neigh replace 10.47.0.1 lladdr "$(mac xa xa0)" dev xb0 nud permanent
	"$traffic" reset 2>/dev/null || true
}

teardown() {
	# libxdp keeps its dispatcher's pins until it is unloaded: never leave one behind
	[ -e /run/netns/xb ] && command -v xdp-loader >/dev/null &&
		nsenter --net=/run/netns/xb xdp-loader unload xb0 --all >/dev/null 2>&1
	ip netns del xa 2>/dev/null
	ip netns del xb 2>/dev/null
	# the veth pair goes with its namespaces; give the kernel a moment to free it
	for _ in 1 2 3 4 5 6 7 8 9 10; do ip netns list | grep -q '^x[ab]' || break; sleep 0.1; done
	# no namespace left means no interface left: drop the sets' stale state too
	"$bpfmux" xdp detach --stale >/dev/null 2>&1
}

mac() { ip -n "$1" -o link show "$2" | sed -E 's/.*link\/ether ([0-9a-f:]+).*/\1/'; }

bx() { "${cpu[@]}" nsenter --net=/run/netns/xb "$bpfmux" xdp "$@"; }
cpu=()   # check_replace pins bpfmux and the traffic to one CPU

# Attach in xb; the output goes to $out, the status is returned.
attach() {
	out=$(bx attach xb0 "$@" 2>&1)
	local rc=$?
	echo "$out" | sed 's/^/    /'
	return $rc
}

# One measurement: resets the counters, sends N packets, sets sent/received/a..e.
measure() {
	"$traffic" reset || { fail "reset counters"; return 1; }
	local line
	line=$("$traffic" send xa xb 10.47.0.2 "$N" "$PPS") || { fail "xdp-traffic send"; return 1; }
	read -r _ sent _ received <<<"$line"
	hits
}

hits() {
	local line
	line=$("$traffic" hits) || { fail "read counters"; return 1; }
	eval "$line"   # a=N b=N c=N d=N e=N
	echo "    sent=$sent received=$received a=$a b=$b c=$c d=$d e=$e"
}

xdp_prog_id() { # the XDP program xb0 runs, or "none"
	local id
	id=$(ip -n xb -d link show xb0 | sed -nE 's/.*prog\/xdp id ([0-9]+).*/\1/p')
	echo "${id:-none}"
}

pins_left() { # entries under bpfmux's state for xb's namespace, and libxdp's pins
	find /sys/fs/bpf/bpfmux/xdp /sys/fs/bpf/xdp -mindepth 2 2>/dev/null | grep -c . || true
}

# Waits until no loaded program has one of our names (freeing is deferred).
progs_gone() {
	local i
	for i in $(seq 1 30); do
		if ! "$traffic" progs | grep -qE ' (bpfmux_xdp_dis|xdp_dispatcher|pass_[abc]|drop_d|aborted_e)$'; then
			return 0
		fi
		sleep 0.1
	done
	"$traffic" progs | grep -E ' (bpfmux_xdp_dis|xdp_dispatcher|pass_[abc]|drop_d|aborted_e)$' |
		sed 's/^/    still loaded: /'
	return 1
}

# Our kernel has the series' chain calls, which `auto` must prefer; stock kernels do not.
has_kernel_chain() { [ "${XDP_KERNEL:-}" = ours ]; }

multi_engine() { # the engine line `list` must show for a set of several programs
	case $engine in
	auto) has_kernel_chain && echo kernel-chain || echo dispatcher ;;
	*) echo "$engine" ;;
	esac
}

check_chain_pass() {
	attach "$obj:pass_a" "$obj:pass_b" "$obj:pass_c" --engine "$engine" || { fail "attach a,b,c"; return; }
	expect "engine shown by attach" "$(grep -oE 'engine [a-z-]+' <<<"$out")" "engine $(multi_engine)"
	measure || return
	expect "PASS continues: a" "$a" "$N"
	expect "PASS continues: b" "$b" "$N"
	expect "PASS continues: c" "$c" "$N"
	expect "all passed packets arrive" "$received" "$N"
	list=$(bx list)
	echo "$list" | sed 's/^/    /'
	expect "list: one set of 3" "$(grep -c '3 programs, engine' <<<"$list")" 1
	expect "list: no problems" "$(grep -c 'problem' <<<"$list")" 0
	expect "list: run order" "$(awk '$1 ~ /^[0-9]+$/ {printf "%s ", $2}' <<<"$list")" "pass_a pass_b pass_c "
}

check_chain_drop() {
	attach "$obj:pass_a" "$obj:drop_d" "$obj:pass_c" --engine "$engine" || { fail "attach a,d,c"; return; }
	measure || return
	expect "first runs: a" "$a" "$N"
	expect "DROP runs: d" "$d" "$N"
	expect "DROP stops the chain: c" "$c" 0
	expect "dropped packets do not arrive" "$received" 0
}

check_chain_on() {
	# drop_d continues on DROP; pass_a only on DROP too, so its PASS is final
	attach "$obj:drop_d" "$obj:pass_a" "$obj:pass_b" --chain-on drop --engine "$engine" ||
		{ fail "attach d,a,b"; return; }
	measure || return
	expect "chain on drop: d" "$d" "$N"
	expect "chain on drop: a runs after DROP" "$a" "$N"
	expect "PASS not in the set stops: b" "$b" 0
	expect "verdict is the last program run (a: PASS)" "$received" "$N"
	# several actions: pass_a continues on PASS or TX, drop_d on PASS only
	attach "$obj:pass_a" "$obj:drop_d" "$obj:pass_c" --chain-on pass,tx --chain-on pass \
		--chain-on pass --engine "$engine" || { fail "attach a,d,c"; return; }
	measure || return
	expect "chain on pass,tx: a" "$a" "$N"
	expect "chain on pass,tx: d runs" "$d" "$N"
	expect "DROP not in the set stops: c" "$c" 0
	expect "verdict is d's DROP" "$received" 0
	# wildcard: every return code continues
	attach "$obj:aborted_e" "$obj:drop_d" "$obj:pass_c" --chain-on any --engine "$engine" ||
		{ fail "attach e,d,c"; return; }
	measure || return
	expect "wildcard after ABORTED: e" "$e" "$N"
	expect "wildcard after ABORTED: d" "$d" "$N"
	expect "wildcard after DROP: c" "$c" "$N"
	expect "wildcard: verdict is c's PASS" "$received" "$N"
	# a program after one that continues on nothing could never run
	attach "$obj:pass_a" "$obj:pass_b" --chain-on none --engine "$engine"
	expect "chain on none before a program: refused" "$?" 1
	expect "refusal says why" "$(grep -c 'can never run' <<<"$out")" 1
	list=$(bx list)
	expect "refused set left the live one: list" "$(grep -c 'aborted_e' <<<"$list")" 1
}

check_replace() {
	# QEMU TCG sometimes oopses ("int3" at a patched site, kernel/README "Known issues")
	# when the kernel patches code another vCPU is running, and every XDP program swap
	# does: the kernel re-patches its XDP bpf_dispatcher (seen on stock 6.12 and ours),
	# and on ours every kernel-chain change does too. Swaps and traffic therefore share
	# one CPU on every kernel
	# (still interleaved by the scheduler, so packets do cross swaps).
	cpu=(taskset -c 0)
	echo "note - swaps and traffic run on CPU 0 only (kernel text-poke oops under TCG)"
	attach "$obj:pass_a" "$obj:pass_b" --engine "$engine" || { fail "attach a,b"; return; }
	"$traffic" reset
	"${cpu[@]}" "$traffic" send xa xb 10.47.0.2 0 "$PPS" >/tmp/xdp-traffic.out &
	local pid=$! i swaps=0
	sleep 0.5
	# alternate sets: [a,b] -> [a,c] (a kept running) -> [c] (one program, direct) -> ...
	for i in 1 2 3; do
		attach "$obj:pass_a" "$obj:pass_c" --engine "$engine" >/dev/null && swaps=$((swaps + 1))
		# the dispatcher keeps a running program's extension link; kernel chains
		# are always loaded afresh (entries of a live program are never edited)
		if [ "$(multi_engine)" = dispatcher ]; then
			grep -q '1 of 2 programs kept running' <<<"$out" || fail "swap $i: pass_a was not kept running"
		fi
		attach "$obj:pass_c" >/dev/null && swaps=$((swaps + 1))
		attach "$obj:pass_a" "$obj:pass_b" --engine "$engine" >/dev/null && swaps=$((swaps + 1))
	done
	sleep 0.3
	kill -TERM "$pid"
	wait "$pid"
	read -r _ sent _ received </tmp/xdp-traffic.out
	hits
	expect "swaps under traffic" "$swaps" 9
	[ "$sent" -gt 500 ] && ok "traffic ran through the swaps ($sent packets)" ||
		fail "too little traffic: $sent packets"
	expect "no packet lost across swaps" "$received" "$sent"
	expect "every packet ran exactly one set (b + c = sent)" "$((b + c))" "$sent"
	[ "$b" -gt 0 ] && [ "$c" -gt 0 ] && ok "both sets saw traffic (b=$b c=$c)" ||
		fail "one set saw no traffic (b=$b c=$c)"
	list=$(bx list)
	expect "list after swaps: no problems" "$(grep -c 'problem' <<<"$list")" 0
	expect "replaced sets were released" "$(find /sys/fs/bpf/bpfmux/xdp -name 'gen-*' | wc -l)" 1
}

check_detach() {
	attach "$obj:pass_a" "$obj:drop_d" --engine "$engine" || { fail "attach a,d"; return; }
	[ "$(xdp_prog_id)" != none ] && ok "xb0 runs XDP program $(xdp_prog_id)" || fail "nothing attached"
	bx detach xb0 || fail "detach"
	expect "no XDP program on xb0" "$(xdp_prog_id)" none
	expect "no pins left" "$(pins_left)" 0
	progs_gone && ok "dispatcher and programs unloaded" || fail "programs still loaded after detach"
	measure || return
	expect "traffic passes untouched after detach" "$received" "$N"
	expect "no program counted after detach" "$a$d" 00
	out=$(bx detach xb0 2>&1)
	expect "second detach is an error" "$?" 1
	expect "second detach says why" "$(grep -c 'nothing attached to xb0 by bpfmux' <<<"$out")" 1
}

check_failure() {
	# (1) nothing attached yet: the verifier refuses the 2nd program
	attach "$obj:pass_a" "$obj:bad_verify" --engine "$engine"
	expect "bad program: attach fails" "$?" 1
	expect "bad program: error names it" "$(grep -c 'error: .*bad_verify' <<<"$out")" 1
	expect "bad program: no XDP program left" "$(xdp_prog_id)" none
	expect "bad program: no pins left" "$(pins_left)" 0
	progs_gone && ok "bad program: nothing left loaded" || fail "bad program: programs leaked"
	# (2) failure after everything is loaded and pinned, just before the commit
	BPFMUX_XDP_FAILPOINT=before-commit attach "$obj:pass_a" "$obj:pass_b" --engine "$engine"
	expect "failpoint: attach fails" "$?" 1
	expect "failpoint: no XDP program left" "$(xdp_prog_id)" none
	expect "failpoint: no pins left" "$(pins_left)" 0
	progs_gone && ok "failpoint: nothing left loaded" || fail "failpoint: programs leaked"
	# (3) a live set survives a failed replacement unchanged
	attach "$obj:pass_a" "$obj:pass_b" --engine "$engine" || { fail "attach a,b"; return; }
	local head before after
	head=$(xdp_prog_id)
	before=$(bx list)
	attach "$obj:pass_c" "$obj:bad_verify" --engine "$engine"
	expect "failed replacement: attach fails" "$?" 1
	BPFMUX_XDP_FAILPOINT=before-commit attach "$obj:pass_c" "$obj:drop_d" --engine "$engine"
	expect "failed replacement at commit: attach fails" "$?" 1
	after=$(bx list)
	expect "failed replacement: same head program" "$(xdp_prog_id)" "$head"
	[ "$before" = "$after" ] && ok "failed replacement: list unchanged" || fail "list changed: $after"
	expect "failed replacement: one generation pinned" "$(find /sys/fs/bpf/bpfmux/xdp -name 'gen-*' | wc -l)" 1
	measure || return
	expect "old set still runs: a" "$a" "$N"
	expect "old set still runs: b" "$b" "$N"
	expect "old set still runs: c" "$c" 0
}

# Expects attach to fail with a message matching PATTERN.
refuse() { # NAME PATTERN ARGS...
	local name=$1 pattern=$2
	shift 2
	out=$(bx attach "$@" 2>&1)
	local rc=$?
	if [ $rc -ne 0 ] && grep -qE "$pattern" <<<"$out"; then
		ok "$name: $(grep -E "$pattern" <<<"$out" | head -1 | cut -c1-150)"
	else
		fail "$name: exit $rc, output: $out"
	fi
}

check_bad_inputs() {
	refuse "missing interface" "no interface 'nosuch0'" nosuch0 "$obj:pass_a"
	refuse "missing object" "BPF object /nonexistent.o: No such file" xb0 /nonexistent.o
	refuse "not an object" "not a BPF object" xb0 /etc/hostname
	refuse "missing section" "no program or section 'nosuch'" xb0 "$obj:nosuch"
	refuse "ambiguous object" "several XDP programs; pick one" xb0 "$obj"
	refuse "not XDP" "not XDP" xb0 "$obj:not_xdp"
	refuse "bad chain-on" "unknown XDP action 'bogus'" xb0 "$obj:pass_a" "$obj:pass_b" --chain-on bogus
	refuse "chain-on count" "3 --chain-on for 2 programs" xb0 "$obj:pass_a" "$obj:pass_b" \
		--chain-on pass --chain-on pass --chain-on pass
	local many=() i
	for i in $(seq 17); do many+=("$obj:pass_a"); done
	refuse "too many programs" "17 programs, the dispatcher has 16 slots" xb0 "${many[@]}"
	if has_kernel_chain; then
		refuse "too many programs for kernel chains" "17 programs, the kernel follows chains of at most 16" \
			xb0 "${many[@]}" --engine kernel-chain
	else
		refuse "kernel chain engine" "kernel chain calls not available on this kernel" \
			xb0 "$obj:pass_a" "$obj:pass_b" --engine kernel-chain
	fi
	expect "bad inputs: no XDP program left" "$(xdp_prog_id)" none
	expect "bad inputs: no pins left" "$(pins_left)" 0
	# an XDP program that another tool attached is reported, never replaced
	nsenter --net=/run/netns/xb "$traffic" foreign xb0 "$obj" pass_b >/dev/null ||
		{ fail "foreign attach in xb"; return; }
	local foreign
	foreign=$(xdp_prog_id)
	refuse "foreign program" "already runs XDP program $foreign, which bpfmux did not attach" xb0 "$obj:pass_a"
	expect "foreign program untouched" "$(xdp_prog_id)" "$foreign"
	expect "list shows the foreign program" \
		"$(bx list | grep -c "xb0 (ifindex [0-9]*): XDP program $foreign (not attached by bpfmux)")" 1
	out=$(bx detach xb0 2>&1)
	expect "detach refuses the foreign program" "$(grep -c 'which bpfmux did not attach' <<<"$out")" 1
}

# --- bpfmux and libxdp (xdp-loader) on one interface ---

# xdp-loader in xb; the output goes to $out, the status is returned. -p: the test map's pin
# directory, so xdp-loader's programs count in the same map as bpfmux's.
xl() {
	out=$(nsenter --net=/run/netns/xb xdp-loader "$@" 2>&1)
	local rc=$?
	echo "$out" | sed 's/^/    /'
	return $rc
}
xl_load() { # PROG PRIO
	xl load -m native -p /sys/fs/bpf -n "$1" -P "$2" xb0 "$obj"
}

# "prio name chain-actions" per program of xdp-loader status, in run order
xl_programs() {
	nsenter --net=/run/netns/xb xdp-loader status xb0 |
		awk '$1 == "=>" { printf "%s %s %s; ", $2, $3, $NF }'
}
# "prio name chain-on owner" per program of bpfmux xdp list, in run order
bx_programs() {
	bx list | awk '$1 ~ /^[0-9]+$/ && NF >= 7 { printf "%s %s %s %s; ", $4, $2, $5, $6 }'
}

libxdp_ready() { # the tools must be there: a missing one fails, it never skips
	local o
	command -v xdp-loader >/dev/null ||
		{ fail "xdp-loader missing (xdp-tools; make deps installs it)"; return 1; }
	o=$(ls /usr/lib/*/bpf/xdp-dispatcher.o 2>/dev/null)
	[ -n "$o" ] || { fail "libxdp's xdp-dispatcher.o missing (libxdp1)"; return 1; }
	ok "xdp-tools $(dpkg-query -W -f='${Version}' xdp-tools 2>/dev/null), $o"
}

# bpfmux first, then xdp-loader adds to the dispatcher bpfmux made
check_libxdp_bpfmux_first() {
	libxdp_ready || return
	attach "$obj:pass_a" "$obj:pass_b" --engine libxdp --priority 10 ||
		{ fail "bpfmux attach a,b (libxdp)"; return; }
	expect "attach: engine libxdp" "$(grep -oE 'engine [a-z-]+' <<<"$out")" "engine libxdp"
	xl_load drop_d 20 || { fail "xdp-loader load drop_d on bpfmux's dispatcher"; return; }
	xl_load pass_c 30 || { fail "xdp-loader load pass_c"; return; }
	measure || return
	expect "bpfmux's a runs (prio 10)" "$a" "$N"
	expect "bpfmux's b runs after a's PASS (prio 11)" "$b" "$N"
	expect "xdp-loader's d runs after b's PASS (prio 20)" "$d" "$N"
	expect "d's DROP is not in its chain actions: c" "$c" 0
	expect "dropped packets do not arrive" "$received" 0
	xl status xb0 >/dev/null
	expect "xdp-loader status: all four" "$(xl_programs)" \
		"10 pass_a XDP_PASS; 11 pass_b XDP_PASS; 20 drop_d XDP_PASS; 30 pass_c XDP_PASS; "
	list=$(bx list)
	echo "$list" | sed 's/^/    /'
	expect "bpfmux list: all four" "$(bx_programs)" \
		"10 pass_a pass bpfmux; 11 pass_b pass bpfmux; 20 drop_d pass other; 30 pass_c pass other; "
	expect "bpfmux list: no problems" "$(grep -c 'problem' <<<"$list")" 0
	# bpfmux goes, xdp-loader's programs stay
	out=$(bx detach xb0 2>&1)
	echo "$out" | sed 's/^/    /'
	expect "bpfmux detach: says what stays" "$(grep -c 'keeps running other tools' <<<"$out")" 1
	expect "xdp-loader status after bpfmux detach" "$(xl_programs)" \
		"20 drop_d XDP_PASS; 30 pass_c XDP_PASS; "
	measure || return
	expect "after bpfmux detach: a" "$a$b" 00
	expect "after bpfmux detach: d still runs" "$d" "$N"
	expect "after bpfmux detach: c" "$c" 0
	expect "after bpfmux detach: still dropped" "$received" 0
	expect "no bpfmux state left" "$(find /sys/fs/bpf/bpfmux/xdp -mindepth 2 | grep -c .)" 0
	xl unload xb0 --all || fail "xdp-loader unload --all"
	expect "after both: no XDP program" "$(xdp_prog_id)" none
	expect "after both: nothing pinned" "$(pins_left)" 0
	progs_gone && ok "after both: nothing loaded" || fail "programs still loaded"
	measure || return
	expect "after both: traffic untouched" "$received$a$b$c$d" "${N}0000"
}

# xdp-loader first, then bpfmux adds to libxdp's dispatcher (auto engine)
check_libxdp_loader_first() {
	libxdp_ready || return
	xl_load pass_c 40 || { fail "xdp-loader load pass_c"; return; }
	# d continues on DROP, a on PASS: both chain actions decide
	attach "$obj:drop_d" "$obj:pass_a" --chain-on drop --chain-on pass --priority 10 ||
		{ fail "bpfmux attach d,a on xdp-loader's dispatcher"; return; }
	expect "auto picks libxdp" "$(grep -oE 'engine [a-z-]+' <<<"$out")" "engine libxdp"
	measure || return
	expect "bpfmux's d runs first" "$d" "$N"
	expect "d's DROP chains on: a" "$a" "$N"
	expect "a's PASS chains on: xdp-loader's c" "$c" "$N"
	expect "verdict is c's PASS" "$received" "$N"
	expect "xdp-loader status: all three" "$(xl_programs)" \
		"10 drop_d XDP_DROP; 11 pass_a XDP_PASS; 40 pass_c XDP_PASS; "
	expect "bpfmux list: all three" "$(bx_programs)" \
		"10 drop_d drop bpfmux; 11 pass_a pass bpfmux; 40 pass_c pass other; "
	# another engine cannot take the interface: the hint is libxdp's
	refuse "other engine on libxdp's dispatcher" "xdp-loader unload xb0 --all" xb0 "$obj:pass_b" \
		--engine dispatcher
	# replacing bpfmux's set leaves xdp-loader's program alone
	attach "$obj:pass_b" --priority 10 || { fail "replace bpfmux's set"; return; }
	expect "replace: old set named" "$(grep -c "replaced bpfmux.s set in libxdp.s dispatcher on xb0" <<<"$out")" 1
	measure || return
	expect "replaced: b runs" "$b" "$N"
	expect "replaced: a and d gone" "$a$d" 00
	expect "replaced: c still runs" "$c" "$N"
	expect "xdp-loader status after replace" "$(xl_programs)" \
		"10 pass_b XDP_PASS; 40 pass_c XDP_PASS; "
	# xdp-loader removes its program; bpfmux's keeps running
	local cid
	cid=$(nsenter --net=/run/netns/xb xdp-loader status xb0 | awk '$1 == "=>" && $3 == "pass_c" { print $4 }')
	xl unload xb0 -i "$cid" || { fail "xdp-loader unload pass_c (id $cid)"; return; }
	measure || return
	expect "after xdp-loader unload: b runs" "$b" "$N"
	expect "after xdp-loader unload: c" "$c" 0
	expect "after xdp-loader unload: passes" "$received" "$N"
	expect "bpfmux list: one left" "$(bx_programs)" "10 pass_b pass bpfmux; "
	bx detach xb0 || fail "bpfmux detach"
	expect "after both: no XDP program" "$(xdp_prog_id)" none
	expect "after both: nothing pinned" "$(pins_left)" 0
	progs_gone && ok "after both: nothing loaded" || fail "programs still loaded"
}

# a libxdp dispatcher bpfmux has no part in: the hint, then --force
check_libxdp_force() {
	libxdp_ready || return
	xl_load pass_c 40 || { fail "xdp-loader load pass_c"; return; }
	out=$(bx detach xb0 2>&1)
	expect "detach without bpfmux's programs fails" "$?" 1
	expect "detach hint: xdp-loader unload" "$(grep -c 'xdp-loader unload xb0 --all' <<<"$out")" 1
	expect "list shows libxdp's dispatcher" "$(bx list | grep -c 'libxdp dispatcher .* none of them bpfmux')" 1
	expect "list shows its program" "$(bx_programs)" "40 pass_c pass other; "
	out=$(bx detach xb0 --force 2>&1)
	echo "$out" | sed 's/^/    /'
	expect "detach --force removes it" "$(grep -c 'removed libxdp.s dispatcher' <<<"$out")" 1
	expect "after --force: no XDP program" "$(xdp_prog_id)" none
	expect "after --force: nothing pinned" "$(pins_left)" 0
	progs_gone && ok "after --force: nothing loaded" || fail "programs still loaded"
}

[ -x "$bpfmux" ] || { echo "FAIL - $bpfmux missing"; exit 1; }
[ -f "$obj" ] && [ -x "$traffic" ] || { echo "FAIL - test programs missing in $bin"; exit 1; }
fn=check_${case_name//-/_}
declare -F "$fn" >/dev/null || { echo "FAIL - unknown case $case_name"; exit 2; }
setup
"$fn"
teardown
progs_gone || fail "programs left loaded after the case"
[ "$failures" = 0 ]
