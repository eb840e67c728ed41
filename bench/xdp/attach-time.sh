#!/bin/bash
# Attach time of a two-program set (PASS -> DROP) per XDP engine, run in the guest by
# bench/xdp/run.sh after xdp-bench: wall time of one `bpfmux xdp attach` (process start to
# exit: object parsing, loads, the dispatcher, pins) and of its `bpfmux xdp detach`, median
# of ROUNDS, engines interleaved round by round on one veth. xdp-loader's two loads of the
# same programs into libxdp's dispatcher are timed alongside for reference.
# Prints a markdown table; an engine that cannot run says why.
# usage: attach-time.sh BPFMUX OBJ ROUNDS
set -u
bpfmux=${1:?usage: attach-time.sh BPFMUX OBJ ROUNDS}
obj=${2:?}
rounds=${3:?}
dev=xbtime0
[ -d /sys/module/veth ] || modprobe veth 2>/dev/null
ip link add $dev type veth peer name xbtime1 && ip link set $dev up ||
	{ echo "attach-time: cannot create a veth"; exit 1; }
trap 'ip link del $dev 2>/dev/null' EXIT

now() { date +%s%N; }
ms() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", (b - a) / 1e6 }'; }
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.1f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

engines=(dispatcher libxdp kernel-chain xdp-loader)
declare -A att det why
for e in "${engines[@]}"; do att[$e]= det[$e]= why[$e]=; done
command -v xdp-loader >/dev/null || why[xdp-loader]="xdp-loader not installed"

one() { # ENGINE: one attach and one detach, times appended
	local e=$1 t0 t1 t2 out
	t0=$(now)
	if [ "$e" = xdp-loader ]; then
		out=$(xdp-loader load -m native -n bench_pass -P 10 $dev "$obj" 2>&1 &&
			xdp-loader load -m native -n bench_drop -P 11 $dev "$obj" 2>&1)
	else
		out=$("$bpfmux" xdp attach $dev "$obj:bench_pass" "$obj:bench_drop" --engine "$e" 2>&1)
	fi || { why[$e]=$(tail -n1 <<<"$out" | cut -c1-120); return; }
	t1=$(now)
	if [ "$e" = xdp-loader ]; then
		out=$(xdp-loader unload $dev --all 2>&1)
	else
		out=$("$bpfmux" xdp detach $dev 2>&1)
	fi || { why[$e]="detach: $(tail -n1 <<<"$out" | cut -c1-110)"; return; }
	t2=$(now)
	att[$e]+="$(ms "$t0" "$t1") " det[$e]+="$(ms "$t1" "$t2") "
}

for e in "${engines[@]}"; do [ -z "${why[$e]}" ] && one "$e"; done   # warm-up, untimed
for e in "${engines[@]}"; do att[$e]= det[$e]=; done
for _ in $(seq "$rounds"); do
	for e in "${engines[@]}"; do [ -z "${why[$e]}" ] && one "$e"; done
done

echo "| engine (two programs) | attach, ms (median of $rounds) | detach, ms | attach ratio to dispatcher |"
echo "|---|---:|---:|---:|"
base=$(tr ' ' '\n' <<<"${att[dispatcher]}" | grep . | median)
for e in "${engines[@]}"; do
	name=$e
	case $e in
	dispatcher) name="bpfmux --engine dispatcher (bpfmux's freplace dispatcher)" ;;
	libxdp) name="bpfmux --engine libxdp (libxdp's dispatcher, through libxdp.so.1)" ;;
	kernel-chain) name="bpfmux --engine kernel-chain" ;;
	xdp-loader) name="xdp-loader load, twice (libxdp's dispatcher)" ;;
	esac
	if [ -n "${why[$e]}" ] || [ -z "${att[$e]}" ]; then
		echo "| $name | ${why[$e]:-not run} | | |"
		continue
	fi
	a=$(tr ' ' '\n' <<<"${att[$e]}" | grep . | median)
	d=$(tr ' ' '\n' <<<"${det[$e]}" | grep . | median)
	r=$(awk -v a="$a" -v b="${base:-0}" 'BEGIN { if (b > 0) printf "%.2fx", a / b }')
	echo "| $name | $a | $d | $r |"
done
