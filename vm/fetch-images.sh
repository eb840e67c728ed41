#!/usr/bin/env bash
# Fetch the stock Debian kernels the tests compare against, into $BPFMUX_CACHE/images/NAME:
#   stock-7.3   linux 7.3.4+deb13 (trixie-backports): the same base as our series, unpatched
#   stock-6.12  the newest linux-image-6.12.*+deb12-amd64-unsigned (bookworm-security):
#               no tracing_multi, has kprobe.multi and kprobe.session
# Each image dir holds vmlinuz, lib/modules/VERSION (with modules.dep) and VERSION.
# usage: vm/fetch-images.sh [NAME...]   (default: all)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${BPFMUX_CACHE:-$HOME/.cache/bpfmux}
dl=$here/../scripts/debian-download

fetch() {
	local name=$1 dir=$cache/images/$1 debs=() pkg ver tmp
	case $name in
	stock-7.3)
		debs=(linux-binary-7.3.4+deb13-amd64 linux-modules-7.3.4+deb13-amd64) ;;
	stock-6.12)
		pkg=$("$dl" --newest "$cache/debs" 'linux-image-6\.12\.[0-9]+\+deb12-amd64-unsigned')
		[ -n "$pkg" ] || { echo "fetch-images: no linux-image-6.12.*+deb12-amd64-unsigned in the archive" >&2; exit 1; }
		debs=("$pkg") ;;
	*) echo "fetch-images: unknown image $name (stock-7.3, stock-6.12)" >&2; exit 2 ;;
	esac
	if [ -f "$dir/VERSION" ] && [ "$(cat "$dir/PACKAGES" 2>/dev/null)" = "${debs[*]}" ]; then
		return 0
	fi
	echo "fetch-images: $name <- ${debs[*]}" >&2
	tmp=$(mktemp -d "$cache/img.XXXXXX")
	(cd "$tmp" && "$dl" "$tmp/debs" "${debs[@]}")
	for d in "$tmp"/debs/*.deb; do dpkg-deb -x "$d" "$tmp/root"; done
	# Debian moved modules from /lib to /usr/lib between 12 and 13; accept both.
	local mods
	mv "$(find "$tmp/root" -name 'vmlinuz*' -type f | head -n1)" "$tmp/vmlinuz"
	mods=$(find "$tmp/root" -maxdepth 4 -type d -path '*lib/modules/*' -prune | head -n1)
	ver=$(basename "$mods")
	mkdir -p "$tmp/img/lib/modules"
	mv "$mods" "$tmp/img/lib/modules/$ver"
	mv "$tmp/vmlinuz" "$tmp/img/vmlinuz"
	# Packages ship no modules.dep (postinst makes it); build it so modprobe works in the guest.
	depmod -b "$tmp/img" "$ver" 2>/dev/null
	echo "$ver" >"$tmp/img/VERSION"
	echo "${debs[*]}" >"$tmp/img/PACKAGES"
	rm -rf "$dir"
	mkdir -p "$cache/images"
	mv "$tmp/img" "$dir"
	rm -rf "$tmp"
	echo "fetch-images: $name ready ($ver)" >&2
}

[ $# -gt 0 ] || set -- stock-7.3 stock-6.12
for n in "$@"; do fetch "$n"; done
