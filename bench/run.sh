#!/usr/bin/env bash
# Every benchmark, one report: the trigger and attach benchmarks in guest boots per
# kernel, then the other benchmarks' own run scripts (contract: bench/README.md),
# then bench/report.py writes REPORT.md and the plots. `make bench` / `make bench-quick`.
#
# usage: bench/run.sh [--quick] [--kernels LIST] [--phases LIST] [--no-others | --others LIST]
#                     [--no-guests] [--insn-hazards]
#   --quick      short samples, few functions: checks the harness end to end in minutes;
#                writes to build/bench-quick/ so the committed results stay as they are
#   --kernels    which kernels to boot (default: ours stock-7.3 stock-6.12)
#   --phases     guest phases (bench/guest.sh; default "insn rates attach all allpf",
#                quick: "insn rates attach")
#   --no-others  skips the other bench/*/run.sh
#   --others     which of them (default: procmap symcheck symrate xdp xdpchain batchsym
#                trace-attach trace-filter capture)
#   --no-guests  only the other benchmarks (and the report from raw/)
#   --insn-hazards  the insn phase boots with `vm/run --insn-hazards`: the trigger rows
#                also count indirect branches, return mispredicts and cache lines, which
#                the report shows next to the instructions (the phase runs slower)
# env: BENCH_OUT (default bench/results, build/bench-quick with --quick), BPFMUX_CACHE,
#   BENCH_<NAME>_ARGS: more arguments for bench/<name>/run.sh (NAME upper case, - as _),
#   e.g. BENCH_BATCHSYM_ARGS='--kernels ours,stock-7.3 --parts session50' (no quoting)
# Exit status non-zero when any part failed; the report says which.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
quick= kernels="ours stock-7.3 stock-6.12" others=1 guests=1 phase_list= insn_vm=--insn
other_list="procmap symcheck symrate xdp xdpchain batchsym trace-attach trace-filter capture"
while [ $# -gt 0 ]; do
	case $1 in
	--quick) quick=--quick ;;
	--kernels) kernels=${2:?--kernels needs a list}; shift ;;
	--phases) phase_list=${2:?--phases needs a list}; shift ;;
	--no-others) others= ;;
	--others) other_list=${2:?--others needs a list}; shift ;;
	--no-guests) guests= ;;
	--insn-hazards) insn_vm=--insn-hazards ;;
	-h | --help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "bench/run.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
	shift
done
if [ -n "$quick" ]; then
	out=${BENCH_OUT:-$repo/build/bench-quick}
	guest_timeout=900
else
	out=${BENCH_OUT:-$repo/bench/results}
	guest_timeout=5400
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
raw=$out/raw
cache=${BPFMUX_CACHE:-$HOME/.cache/bpfmux}
kout=${BPFMUX_KERNEL_OUT:-$cache/build}
failed=0

say() { echo "bench: $*" >&2; }

if ! make -s -C bench CACHE="$cache" KOUT="$kout"; then
	say "building the benchmark programs failed"
	exit 1
fi

# What the numbers ran on: commit, host; per kernel its image and config (report.py).
mkdir -p "$raw"
{
	echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "start: $(date +%s)"
	echo "commit: $(git rev-parse HEAD)"
	if git diff --quiet HEAD -- bench tests/guest/lib ':!bench/results'; then
		echo "tree: clean (bench/, tests/guest/lib/)"
	else
		echo "tree: uncommitted changes in bench/ or tests/guest/lib/"
	fi
	echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"
	echo "mode: ${quick:-full}"
} >"$raw/meta.txt"
kernel_facts() {
	local k=$1 img d
	echo "host load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
	case $k in
	ours)
		img=$kout/arch/x86/boot/bzImage
		echo "image: bzImage sha256 $(sha256sum "$img" | cut -c1-16), built $(date -u -r "$img" '+%Y-%m-%d %H:%M UTC')"
		echo "image sha256: $(sha256sum "$img" | cut -d' ' -f1)"
		# what kernel/build.sh recorded next to the image, not the tree's HEAD now
		tree=$("$repo/kernel/image-tree.sh" "$kout")
		echo "kernel commit: ${tree%% *}"
		echo "tree: the image was built from $tree"
		echo "config: x86_64_defconfig + kvm_guest.config + kernel/config/bpfmux.config (.config sha256 $(sha256sum "$kout/.config" 2>/dev/null | cut -c1-16))"
		;;
	stock-*)
		d=$cache/images/$k
		echo "image: Debian $(cat "$d/PACKAGES" 2>/dev/null || echo '?') ($(cat "$d/VERSION" 2>/dev/null || echo '?'))"
		echo "image sha256: $(sha256sum "$d/vmlinuz" 2>/dev/null | cut -d' ' -f1)"
		echo "kernel commit: none (Debian package $(cat "$d/VERSION" 2>/dev/null || echo '?'))"
		echo "config: Debian's"
		;;
	*) echo "image: $k" ;;
	esac
}

# One boot per kernel and phase (bench/guest.sh): a phase that hangs, crashes or hits
# its time limit costs only its own rows, which the report then names.
declare -A limits=([insn]=1800 [rates]=1500 [attach]=1800 [all]=1200 [allpf]=900)
# The attach phases patch up to tens of thousands of call sites; with a second vCPU
# running through them, multi-threaded QEMU TCG can oops on a half-written int3
# (kernel/README "Known issues", seen in the kretprobe.multi-all row and at 10,000
# functions). They keep two vCPUs but run them in one host thread (--single-thread),
# where no vCPU runs while the other patches kernel text (bench/int3/run.sh: no boot died
# that way). The trigger rows keep two multi-threaded vCPUs: the producer and the rest of
# the system. The insn phase counts instructions with the QEMU plugin (vm/insn), also in
# one host thread.
declare -A vcpus=([insn]=2 [rates]=2 [attach]=2 [all]=2 [allpf]=2)
declare -A vm_opts=([insn]="$insn_vm --single-thread" [attach]="--single-thread"
	[all]="--single-thread" [allpf]="--single-thread")
[ -n "$quick" ] && limits=([insn]=900 [rates]=600 [attach]=600)
if [ -z "$phase_list" ]; then
	phase_list="insn rates attach all allpf"
	[ -n "$quick" ] && phase_list="insn rates attach"
fi
[ -n "$guests" ] || kernels=
for k in $kernels; do
	dir=$raw/$k
	mkdir -p "$dir"
	kernel_facts "$k" >"$dir/meta.txt"
	for phase in $phase_list; do
		limit=${limits[$phase]:?unknown phase $phase}
		# only this phase's files: other phases may come from another run
		rm -f "$dir"/*-"$phase".* "$dir/vm-$phase"*
		[ "$phase" = insn ] && rm -f "$dir/insn-profile.md"
		for attempt in 1 2; do
			say "$k: phase $phase (attempt $attempt, ${vcpus[$phase]} vCPU, at most $limit s)"
			start=$(date +%s)
			read -ra opts <<<"${vm_opts[$phase]:-}"
			vm/run --kernel "$k" --smp "${vcpus[$phase]}" "${opts[@]}" --timeout "$limit" -- \
				"$repo/bench/guest.sh" "$dir" "$phase" $quick >"$dir/vm-$phase.log" 2>&1
			rc=$?
			echo "$rc $(($(date +%s) - start)) ${vcpus[$phase]}" >"$dir/vm-$phase.rc"
			# A splat while booting (before any benchmark started) is retried once;
			# any failure after that is a result.
			if [ "$rc" = 126 ] && ! grep -q '^== ' "$dir/vm-$phase.log" && [ $attempt = 1 ]; then
				say "$k: the guest failed while booting (exit 126), retrying once"
				cp "$dir/vm-$phase.log" "$dir/vm-$phase-boot-failure.log"
				continue
			fi
			break
		done
		if [ "$rc" != 0 ]; then
			say "$k: phase $phase: guest run exited $rc (log: $dir/vm-$phase.log)"
			grep -v '^\[' "$dir/vm-$phase.log" | tail -n 15 >&2
			failed=1
		fi
		# the counts are the point of this phase: show them as they come
		if [ "$phase" = insn ] && [ -f "$dir/trigger-insn.log" ]; then
			say "$k: instructions per call:"
			sed -n '/^instructions per target call/,$p' "$dir/trigger-insn.log" | tr -d '\r' >&2
		fi
	done
done

# The other benchmarks, through their own run scripts (bench/README.md).
if [ -n "$others" ]; then
	for name in $other_list; do
		script=bench/$name/run.sh
		log=$raw/$name.log
		rm -f "$raw/$name.rc" "$log"
		if [ ! -x "$script" ]; then
			say "$name: $script is not there yet"
			echo missing >"$raw/$name.rc"
			continue
		fi
		var=BENCH_$(tr a-z- A-Z_ <<<"$name")_ARGS
		read -ra extra <<<"${!var:-}"
		say "$name: $script $quick ${extra[*]}"
		start=$(date +%s)
		BENCH_OUT=$out "$script" $quick "${extra[@]}" >"$log" 2>&1
		rc=$?
		echo "$rc $(($(date +%s) - start)) $start" >"$raw/$name.rc"
		if [ "$rc" != 0 ]; then
			say "$name: $script exited $rc (log: $log)"
			tail -n 10 "$log" >&2
			failed=1
		elif [ "$name" = xdpchain ]; then
			say "xdpchain: instructions per packet:"
			sed -n '/^## Instructions per packet/,/^## Wall time/p' "$out/xdpchain.md" |
				grep -E '^([|]|- )' >&2
		fi
	done
fi

# The whole run's length, for the report's first line (only a run of every part has it).
if [ -n "$guests" ] && [ -n "$others" ]; then
	echo "end: $(date +%s)" >>"$raw/meta.txt"
fi
if ! python3 bench/report.py "$out"; then
	say "writing the report failed"
	exit 1
fi
say "wrote $out/REPORT.md"
exit $failed
