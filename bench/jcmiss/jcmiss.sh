#!/usr/bin/env bash
# Counts QEMU's real jump-cache misses per guest address while a guest runs (host side).
#
# Under TCG every indirect branch, return and cross-page jump looks its target up in a
# per-vCPU cache of translated blocks indexed by a hash of the guest address; two hot
# targets with the same index evict each other and every pass then searches QEMU's global
# hash table (qht_lookup_custom), far dearer than a hit. Which addresses collide depends on
# where the code sits, not on what it does, and it moves wall-time ratios between trigger
# rows by tens of percent. vm/insn's plugin models the cache (trigger --insn, "jc miss"),
# but only for the boot it ran in: BPF images sit elsewhere in every boot. This counts
# the misses of the boot being measured: a uprobe on qht_lookup_custom in the running
# qemu-system-x86_64 records the guest address of each search.
#
# usage: bench/jcmiss/jcmiss.sh [options] -- COMMAND...     run COMMAND (e.g. vm/run ...),
#                                                         sample while it runs
#        bench/jcmiss/jcmiss.sh [options] --pid PID       sample a running QEMU
#   --after REGEX   start sampling once COMMAND's output matches REGEX (default: at once)
#   --delay S       then wait S more seconds (default 0)
#   --seconds S     sample for S seconds (default 3)
#   --map FILE      System.map to name guest addresses (default: $BPFMUX_CACHE/build/System.map)
#   --top N         addresses to print (default 15)
# Prints the misses, then the last lines of COMMAND's output. Needs root, perf and uprobes
# on the host; removes its probe (and a tracefs mount perf made for it) on exit.
# example (the trigger names each row as it starts it; 15 s for its attach and warm-up):
#   bench/jcmiss/jcmiss.sh --after 'round 1/1' --delay 15 -- vm/run --smp 2 --single-thread \
#       -- build/bench/trigger --long-runs --samples 30 --rounds 1 fsession.multi/global
set -euo pipefail
cache=${BPFMUX_CACHE:-$HOME/.cache/bpfmux}
after="" delay=0 seconds=3 map=$cache/build/System.map top=15 pid=""
fail() { echo "jcmiss: $*" >&2; exit 1; }
while [ $# -gt 0 ]; do
	case $1 in
	--after) after=$2; shift 2 ;;
	--delay) delay=$2; shift 2 ;;
	--seconds) seconds=$2; shift 2 ;;
	--map) map=$2; shift 2 ;;
	--top) top=$2; shift 2 ;;
	--pid) pid=$2; shift 2 ;;
	-h | --help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	--) shift; break ;;
	*) fail "unknown argument '$1' (--help)" ;;
	esac
done
[ -n "$pid" ] || [ $# -gt 0 ] || fail "give --pid PID or -- COMMAND (--help)"
[ -f "$map" ] || fail "$map: no such file (--map)"
command -v perf >/dev/null || fail "perf not found (apt-get install linux-perf)"
qemu=$(command -v qemu-system-x86_64) || fail "qemu-system-x86_64 not found"

tmp=$(mktemp -d)
probe=""
cmdpid=""
# perf probe mounts tracefs if it is not mounted: leave the host as it was
tracing=/sys/kernel/tracing
had_tracefs=0
grep -q " $tracing tracefs " /proc/mounts && had_tracefs=1
cleanup() {
	[ -n "$probe" ] && perf probe -q -d "$probe" 2>/dev/null || true
	[ -n "$cmdpid" ] && kill "$cmdpid" 2>/dev/null || true
	if [ $had_tracefs = 0 ] && grep -q " $tracing tracefs " /proc/mounts; then
		umount "$tracing" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
# a probe left by a run that was killed
perf probe -q -d 'probe_qemu*:jcmiss' 2>/dev/null || true
# The search key is struct tb_desc, its first field the guest pc (QEMU 7.2).
perf probe -q -x "$qemu" 'jcmiss=qht_lookup_custom pc=+0(%si):x64' 2>"$tmp/probe.log" ||
	fail "cannot place a uprobe on qht_lookup_custom in $qemu: $(tail -n1 "$tmp/probe.log")"
probe=$(perf probe -l 2>/dev/null | awk '/:jcmiss /{print $1; exit}')
[ -n "$probe" ] || fail "perf probe placed no jcmiss probe (perf probe -l)"

if [ $# -gt 0 ]; then
	"$@" > "$tmp/out" 2>&1 &
	cmdpid=$!
	if [ -n "$after" ]; then
		until grep -Eq "$after" "$tmp/out"; do
			kill -0 "$cmdpid" 2>/dev/null || { cat "$tmp/out"; fail "COMMAND ended before its output matched '$after'"; }
			sleep 0.5
		done
	fi
	# the QEMU below COMMAND
	for _ in $(seq 60); do
		for q in $(pgrep -f '^qemu-system-x86_64 ' || true); do
			p=$q
			while [ "$p" -gt 1 ]; do
				[ "$p" = "$cmdpid" ] && { pid=$q; break 2; }
				p=$(awk '{print $4}' "/proc/$p/stat" 2>/dev/null || echo 1)
			done
		done
		[ -n "$pid" ] && break
		sleep 1
	done
	[ -n "$pid" ] || fail "no qemu-system-x86_64 below COMMAND"
fi
sleep "$delay"
perf record -q -a -e "$probe" -o "$tmp/perf.data" -- sleep "$seconds" 2>"$tmp/rec.log" ||
	fail "perf record failed: $(tail -n1 "$tmp/rec.log")"
perf script -i "$tmp/perf.data" -F pid,event,trace 2>/dev/null | python3 -c '
import bisect, collections, signal, sys
signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # a closed pipe ends the listing quietly
pid, seconds, top, mapfile = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
syms = []
for line in open(mapfile):
    f = line.split()
    if len(f) >= 3 and f[1] in "tTwW":
        syms.append((int(f[0], 16), f[2]))
syms.sort()
addrs = [a for a, _ in syms]
count = collections.Counter()
for line in sys.stdin:
    f = line.split()
    if len(f) >= 2 and f[0] == pid:
        for x in f[1:]:
            if x.startswith("pc="):
                count[int(x[3:], 16)] += 1
def name(a):
    i = bisect.bisect_right(addrs, a) - 1
    if i < 0 or a - addrs[i] > 0x10000:
        return "(not in System.map: BPF image, module or user)"
    return f"{syms[i][1]}+{a - addrs[i]:#x}"
total = sum(count.values())
print(f"jcmiss: qemu {pid}: {total / seconds:,.0f} jump-cache misses/s over {seconds:g} s, "
      f"{len(count)} guest addresses")
print("    misses/s  address             symbol")
for a, n in count.most_common(top):
    print(f"{n / seconds:12,.0f}  {a:#018x}  {name(a)}")
' "$pid" "$seconds" "$top" "$map"
if [ -n "$cmdpid" ]; then
	wait "$cmdpid" || true
	cmdpid=""
	echo "--- the last lines of COMMAND's output:"
	tail -n 15 "$tmp/out"
fi
