#!/usr/bin/env bash
# Symbolization throughput of `bpfmux sym --pid` next to blazecli (blazesym's own CLI) on
# the same 1,000,000 addresses of a live python3 (host; issue 44). blazecli comes from
# crates.io, installed into the cache on first use. Writes symrate.md to $BENCH_OUT
# (default bench/results; with --quick, 20,000 addresses into build/bench-quick) and the
# raw numbers to bench/results/raw/symrate-DATE/ (--quick: build/bench-quick/raw-symrate).
set -euo pipefail
cd "$(dirname "$0")/../.."
quick=
[[ "${1:-}" == "--quick" ]] && quick=1
out=${BENCH_OUT:-$([[ -n $quick ]] && echo build/bench-quick || echo bench/results)}
cache=${BPFMUX_CACHE:-$HOME/.cache/bpfmux}
blazecli=$cache/tools/bin/blazecli
if [ ! -x "$blazecli" ]; then
	echo "symrate: installing blazecli 0.1.14 from crates.io into $cache/tools"
	cargo install --quiet --locked --version 0.1.14 --root "$cache/tools" blazecli
fi
cargo build --quiet --release -p bpfmux-cli
mkdir -p "$out"
if [ -n "$quick" ]; then
	exec python3 bench/symrate/symrate.py target/release/bpfmux "$blazecli" --count 20000 \
		--runs 1 --out "$out/symrate.md" --raw "$out/raw-symrate"
fi
exec python3 bench/symrate/symrate.py target/release/bpfmux "$blazecli" \
	--out "$out/symrate.md" --raw "bench/results/raw/symrate-$(date -u +%F)"
