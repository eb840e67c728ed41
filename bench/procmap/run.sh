#!/usr/bin/env bash
# Builds and runs the PROCMAP_QUERY normalization benchmark (release build)
# and writes bench/results/procmap.md. `--quick`: short run for CI smoke use
# (prints the table, writes nothing unless --out is given).
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release -p procmap-bench
if [[ "${1:-}" == "--quick" ]]; then
    exec target/release/procmap-bench "$@"
fi
mkdir -p bench/results
exec target/release/procmap-bench --out bench/results/procmap.md "$@"
