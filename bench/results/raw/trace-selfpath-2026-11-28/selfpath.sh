#!/bin/sh
# '*' --errors on an engine, with and without the self-path filter, under a syscall loop.
cd /work/main
B=target/debug/bpfmux
T=build/guest/trigger
eng=${1:-global}
for mode in keep filter; do
	extra=""
	[ $mode = keep ] && extra="--keep-self-path"
	echo "=== $eng $mode"
	( i=0; while [ $i -lt 400 ]; do $T getpgid 50 close-bad 2 >/dev/null 2>&1; i=$((i+1)); done ) &
	loop=$!
	$B trace --engine $eng --errors $extra --json -v -d 5 '*' > /tmp/star-$mode.json 2> /tmp/star-$mode.err
	echo "rc=$?"
	kill $loop 2>/dev/null; wait $loop 2>/dev/null
	grep -v "^    " /tmp/star-$mode.err | head -40
	python3 - /tmp/star-$mode.json <<'PY'
import json, sys
s = None
for line in open(sys.argv[1]):
    try:
        d = json.loads(line)
    except Exception:
        continue
    if d.get("type") == "summary" or "lost" in d:
        s = d
if not s:
    print("no summary"); sys.exit()
calls = sum(f.get("calls", 0) for f in s.get("functions", []))
lost = s.get("lost", {})
print("links", s.get("links"), "attached", s.get("functions_attached"), "calls", calls,
      "recursion_misses", lost.get("recursion_misses"), "nesting", lost.get("nesting"),
      "ratio %.4f%%" % (100.0 * lost.get("recursion_misses", 0) / max(calls, 1)))
print("keys", sorted(s.keys()))
PY
done
