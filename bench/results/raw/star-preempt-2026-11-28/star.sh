#!/bin/sh
# '*' --errors on the global engine under a syscall loop, self path left out: recursion misses vs calls.
cd /work/main
B=target/debug/bpfmux
T=build/guest/trigger
for r in 1 2; do
	echo "=== run $r"
	( i=0; while [ $i -lt 400 ]; do $T getpgid 50 close-bad 2 >/dev/null 2>&1; i=$((i+1)); done ) &
	loop=$!
	$B trace --engine global --errors --json -d 5 '*' > /tmp/star.json 2> /tmp/star.err
	echo "rc=$?"
	kill $loop 2>/dev/null; wait $loop 2>/dev/null
	grep -v "^    " /tmp/star.err | grep -E "engine|not recorded|nothing lost|links" | head
	python3 - /tmp/star.json <<'PY'
import json, sys
s = None
for line in open(sys.argv[1]):
    try:
        d = json.loads(line)
    except Exception:
        continue
    if d.get("type") == "summary":
        s = d
if not s:
    print("no summary"); sys.exit()
calls = sum(f.get("calls", 0) for f in s.get("functions", []))
lost = s.get("lost", {})
print("RESULT links", s.get("links"), "attached", s.get("functions_attached"), "calls", calls,
      "recursion_misses", lost.get("recursion_misses"), "nesting", lost.get("nesting"),
      "ratio %.4f%%" % (100.0 * lost.get("recursion_misses", 0) / max(calls, 1)))
PY
done
