#!/usr/bin/env bash
# Host test of kernel/image-tree.sh, which tells the benchmarks what tree an image was built
# from: with no record, with a record that matches the image, with uncommitted edits, and
# after the image was rebuilt behind kernel/build.sh's back.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
tool=$repo/kernel/image-tree.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
check() {
	local name=$1 want=$2 got
	got=$("$tool" "$tmp/out")
	if [ "$got" = "$want" ]; then
		passed=$((passed + 1)); echo "PASS $name"
	else
		failed=$((failed + 1)); echo "FAIL $name: got '$got', wanted '$want'"
	fi
}
record() {
	{
		echo "tree: 0123456789abcdef0123456789abcdef01234567 bpf: Do a thing"
		echo "commits on base: 29"
		echo "edits: $1"
		echo "bzImage sha256: $(sha256sum "$tmp/out/arch/x86/boot/bzImage" | cut -d' ' -f1)"
	} >"$tmp/out/bpfmux-image.txt"
}

check "no image" "unknown (no image in $tmp/out)"
mkdir -p "$tmp/out/arch/x86/boot"
echo one >"$tmp/out/arch/x86/boot/bzImage"
check "image without a record" "unknown (the image was not built by kernel/build.sh)"
record none
check "record of this image" "0123456789ab bpf: Do a thing, 29 commits on base"
record "uncommitted changes in the tree"
check "built with edits" "0123456789ab bpf: Do a thing, 29 commits on base, with uncommitted changes"
echo two >"$tmp/out/arch/x86/boot/bzImage"
check "image rebuilt since" "unknown (the image was rebuilt outside kernel/build.sh after its last run)"
echo "image-tree: $passed passed, $failed failed"
[ "$failed" = 0 ]
