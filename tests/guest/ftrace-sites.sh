#!/bin/bash
# Runs inside the guest: ftrace enables exactly the call sites its filters name, through
# small and large filter changes, a second ftrace user on the same functions, and the
# tracers going away. Our series updates only the records a small change touched
# (kernel/README.md, "Small updates"); the same checks run on the stock kernels, where every
# update walks all records. The ftrace users are the function tracer of the top instance and
# of a second instance: every step compares the call sites enabled by the test (in
# enabled_functions, less those enabled before it) with the union of the filters, with
# their counts, and checks that a traced function shows up in the trace or, when off, not.
set -u
T=/sys/kernel/tracing
I=$T/instances/bpfmux-ftrace-sites
bad=0
ok() { echo "ok - $*"; }
fail() { echo "not ok - $*"; bad=1; }

if [ ! -w "$T/set_ftrace_filter" ]; then
	echo "not ok - no writable $T/set_ftrace_filter: the function tracer is not built in"
	exit 1
fi
tmp=$(mktemp -d)

# "function count" of every enabled call site, sorted.
sites() { awk '{ print $1, $2 }' "$T/enabled_functions" | sort; }
sites >"$tmp/base"
# The enabled call sites the test added, with their counts.
ours() { sites | comm -23 - "$tmp/base"; }
# The filter of tracer directory @1, when its tracer is on.
filter() {
	[ "$(cat "$1/current_tracer")" = function ] || return 0
	sed 's/ .*//' "$1/set_ftrace_filter" | grep -v '^#'
}

# The sites we enabled equal the union of the filters, with counts: @1 names the step.
same() {
	{ filter "$T"; [ -d "$I" ] && filter "$I"; } | sort | uniq -c |
		awk '{ printf "%s (%d)\n", $2, $1 }' | sort >"$tmp/want"
	ours >"$tmp/got"
	if cmp -s "$tmp/want" "$tmp/got"; then
		ok "$1: $(grep -c . "$tmp/got") call sites enabled, as filtered"
	else
		fail "$1: enabled call sites differ from the filters (< wanted, > enabled):"
		diff "$tmp/want" "$tmp/got" | head -n 10
	fi
}

# Does running @2 leave @1 in the trace of directory @4 (default: the top instance)?
# @3: want (1) or not (0).
traced() {
	local fn=$1 cmd=$2 want=$3 dir=${4:-$T} n
	echo >"$dir/trace"
	echo 1 >"$dir/tracing_on"
	eval "$cmd"
	# Off while reading: reading the trace calls vfs_read, which may be traced.
	echo 0 >"$dir/tracing_on"
	n=$(grep -c " $fn <-" "$dir/trace")
	if [ "$want" = 1 ] && [ "$n" -gt 0 ]; then
		ok "$fn traced in ${dir#"$T"}/ ($n entries)"
	elif [ "$want" = 0 ] && [ "$n" = 0 ]; then
		ok "$fn not traced in ${dir#"$T"}/"
	else
		fail "$fn: $n trace entries in ${dir#"$T"}/, wanted $([ "$want" = 1 ] && echo some || echo none)"
	fi
}

cleanup() {
	if [ -d "$I" ]; then
		echo nop >"$I/current_tracer"
		rmdir "$I"
	fi
	echo 1 >"$T/tracing_on"
	echo nop >"$T/current_tracer"
	echo >"$T/set_ftrace_filter"
	rm -rf "$tmp"
}
trap cleanup EXIT

echo nop >"$T/current_tracer"
echo >"$T/set_ftrace_filter"

read_file='cat /proc/version >/dev/null'
write_file='echo x >/dev/null'

echo vfs_read >"$T/set_ftrace_filter"
echo function >"$T/current_tracer"
same "one function"
traced vfs_read "$read_file" 1

echo vfs_write >>"$T/set_ftrace_filter"
same "a second function added"
traced vfs_write "$write_file" 1

echo '!vfs_read' >>"$T/set_ftrace_filter"
same "the first removed"
traced vfs_read "$read_file" 0
traced vfs_write "$write_file" 1

# More than the series' 256 of a small update, in one step and back.
echo 'tcp_*' >>"$T/set_ftrace_filter"
n=$(filter "$T" | grep -c .)
if [ "$n" -gt 256 ]; then
	ok "large filter: $n functions"
else
	fail "large filter: only $n functions match tcp_*, wanted more than 256"
fi
same "large filter added"
echo '!tcp_*' >>"$T/set_ftrace_filter"
same "large filter removed"
traced vfs_write "$write_file" 1

# A second user of the same call site and of another: counts 2 and 1, then back to 1.
mkdir "$I"
printf 'vfs_write\nvfs_read\n' >"$I/set_ftrace_filter"
echo function >"$I/current_tracer"
same "a second instance on vfs_write and vfs_read"
traced vfs_write "$write_file" 1 "$I"
traced vfs_write "$write_file" 1
traced vfs_read "$read_file" 1 "$I"
echo '!vfs_write' >>"$I/set_ftrace_filter"
same "the second instance leaves vfs_write"
traced vfs_write "$write_file" 1
echo nop >"$I/current_tracer"
same "the second instance's tracer off"
traced vfs_read "$read_file" 0
rmdir "$I"

echo nop >"$T/current_tracer"
if [ ! -s "$(ours >"$tmp/got"; echo "$tmp/got")" ]; then
	ok "tracer off: no call site of ours enabled"
else
	fail "tracer off: still enabled: $(head -n 5 "$tmp/got" | tr '\n' ' ')"
fi
echo vfs_write >"$T/set_ftrace_filter"
echo function >"$T/current_tracer"
same "tracer on again with one function"
traced vfs_write "$write_file" 1
echo nop >"$T/current_tracer"
same "tracer off again"

exit "$bad"
