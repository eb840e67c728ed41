#!/usr/bin/env bash
# Builds and runs the PROCMAP_QUERY normalization benchmark (release build,
# on the host: the ioctl is upstream since 6.11) and writes procmap.md to
# $BENCH_OUT (default bench/results; with --quick, build/bench-quick, so a
# smoke run never replaces the real results). See bench/README.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
quick=
[[ "${1:-}" == "--quick" ]] && quick=--quick
out=${BENCH_OUT:-$([[ -n $quick ]] && echo build/bench-quick || echo bench/results)}
cargo build --release -p procmap-bench
mkdir -p "$out"
echo "load average before: $(cat /proc/loadavg)" >&2
exec target/release/procmap-bench $quick --out "$out/procmap.md"
