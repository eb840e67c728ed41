#!/usr/bin/env bash
# kernel/image-tree.sh OUTDIR: one line saying which kernel tree commit the bzImage in OUTDIR
# was built from, as kernel/build.sh recorded it next to the image ("<sha> <subject>, N
# commits on base"). The cache tree's HEAD is no answer: it may have moved on since the image
# was built. An image built some other way, or rebuilt since, gives "unknown (...)".
set -uo pipefail
out=${1:?usage: kernel/image-tree.sh OUTDIR}
img=$out/arch/x86/boot/bzImage
rec=$out/bpfmux-image.txt
field() { sed -n "s/^$1: //p" "$rec" | head -n1; }
if [ ! -f "$img" ]; then
	echo "unknown (no image in $out)"
elif [ ! -f "$rec" ]; then
	echo "unknown (the image was not built by kernel/build.sh)"
elif [ "$(field 'bzImage sha256')" != "$(sha256sum "$img" | cut -d' ' -f1)" ]; then
	echo "unknown (the image was rebuilt outside kernel/build.sh after its last run)"
else
	tree=$(field tree)
	line="${tree:0:12} ${tree#* }, $(field 'commits on base') commits on base"
	[ "$(field edits)" = none ] || line+=", with uncommitted changes"
	echo "$line"
fi
