#!/usr/bin/env bash
# Host-side checks for the Rust workspace: formatting, lints, tests, docs; what
# `go tool pprof` makes of bpfmux's pprof profiles (tests/pprof-go.sh); the build of the
# instruction-counting QEMU plugin (tests/insn-plugin.sh); kernel/image-tree.sh
# (tests/image-tree.sh).
# Needs: Rust toolchain (rustfmt, clippy), clang, libelf-dev, zlib1g-dev,
# pkg-config; binutils (readelf, objdump, addr2line) and libc6-dbg for the
# symbolization checks, util-linux (unshare) and iproute2 for the namespace
# ones (scripts/install-deps installs them all). Run as root for the full
# test set (feature probes, mount and network namespaces, the cross-user
# ptrace test); Go (go on PATH, /usr/local/go, or Debian's golang-go) for
# tests/pprof-go.sh; exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo fmt --check"
cargo fmt --all --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings
echo "== cargo test"
cargo test --workspace
echo "== examples that run on the host"
cargo run --quiet -p bpfmux --example symbolize_self
cargo run --quiet -p bpfmux --example features >/dev/null
echo "== cargo doc (warnings are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet
echo "== go tool pprof reads bpfmux's profiles (tests/pprof-go.sh)"
tests/pprof-go.sh
echo "== instruction counter plugin (tests/insn-plugin.sh)"
tests/insn-plugin.sh
echo "== what tree an image was built from (tests/image-tree.sh)"
tests/image-tree.sh
