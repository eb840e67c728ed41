#!/usr/bin/env bash
# How many addresses inside libc's functions and PLT stubs `bpfmux sym`
# leaves unnamed or misnames, next to addr2line and eu-addr2line on the same
# addresses (host; needs binutils, elfutils for eu-addr2line, and libc6-dbg
# for the full symbol table). Writes symcheck.md to $BENCH_OUT (default
# bench/results; with --quick, build/bench-quick). See bench/README.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
quick=
[[ "${1:-}" == "--quick" ]] && quick=1
out=${BENCH_OUT:-$([[ -n $quick ]] && echo build/bench-quick || echo bench/results)}
cargo build --release -p bpfmux-cli
mkdir -p "$out"
exec python3 bench/symcheck/symcheck.py target/release/bpfmux --out "$out/symcheck.md"
