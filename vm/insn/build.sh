#!/usr/bin/env bash
# Builds the instruction-counting QEMU plugin (vm/insn/plugin.c) for the installed
# qemu-system-x86_64 and prints the path of the shared object. Cached in $BPFMUX_CACHE
# (rebuilt when the source, the header or the compiler changes); `vm/run --insn` calls it.
#
# The plugin API header is not in any Debian binary package: it comes from Debian's qemu
# source package of the installed version (scripts/debian-download --source, the
# machine's own archive), one file of the upstream tarball. BPFMUX_QEMU_PLUGIN_H names
# another header instead (e.g. of a QEMU built from source).
#
# usage: vm/insn/build.sh            prints the plugin's path; one line on stderr if it cannot
# exit status: 0, or 1 with one line saying what is missing
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${BPFMUX_CACHE:-$HOME/.cache/bpfmux}
fail() { echo "vm/insn/build.sh: $*" >&2; exit 1; }

header() {
	local ver dir tmp tarball member
	if [ -n "${BPFMUX_QEMU_PLUGIN_H:-}" ]; then
		[ -f "$BPFMUX_QEMU_PLUGIN_H" ] ||
			fail "BPFMUX_QEMU_PLUGIN_H=$BPFMUX_QEMU_PLUGIN_H: no such file"
		echo "$BPFMUX_QEMU_PLUGIN_H"
		return
	fi
	# the source version: the binary's own carries a rebuild suffix (+b3) apt-get source lacks
	ver=$(dpkg-query -W -f='${source:Version}' qemu-system-x86 2>/dev/null) ||
		fail "qemu-system-x86 is not installed (make deps), so no qemu source version to fetch the plugin header for"
	dir=$cache/qemu-plugin/$ver
	if [ ! -f "$dir/qemu-plugin.h" ]; then
		tmp=$(mktemp -d)
		# shellcheck disable=SC2064 # expand $tmp now
		trap "rm -rf '$tmp'" EXIT
		"$here/../../scripts/debian-download" --source "$tmp" "qemu=$ver" 2>"$tmp/log" ||
			fail "cannot download Debian's qemu source $ver for the plugin header: $(grep -v '^\s*$' "$tmp/log" | tail -n1)"
		tarball=$(ls "$tmp"/qemu_*.orig.tar.* 2>/dev/null | head -n1)
		[ -n "$tarball" ] || fail "Debian's qemu source $ver has no orig tarball"
		member=$(tar -tf "$tarball" | grep '^[^/]*/include/qemu/qemu-plugin.h$' | head -n1)
		[ -n "$member" ] || fail "$(basename "$tarball") has no include/qemu/qemu-plugin.h"
		# Debian's patches must leave the header alone, or this would be the wrong one.
		tar -xf "$tmp"/qemu_*.debian.tar.* -C "$tmp" debian/patches
		if grep -ls '^+++ [^ ]*/include/qemu/qemu-plugin.h' "$tmp"/debian/patches/* >/dev/null; then
			fail "a Debian patch of qemu $ver changes qemu-plugin.h: apply it, or set BPFMUX_QEMU_PLUGIN_H"
		fi
		tar -xf "$tarball" -C "$tmp" "$member"
		grep -q '^#define QEMU_PLUGIN_VERSION 1$' "$tmp/$member" ||
			fail "qemu-plugin.h of $ver is not plugin API version 1 (vm/insn/plugin.c is written for it)"
		mkdir -p "$dir"
		cp "$tmp/$member" "$dir/qemu-plugin.h.tmp"
		mv "$dir/qemu-plugin.h.tmp" "$dir/qemu-plugin.h"
	fi
	echo "$dir/qemu-plugin.h"
}

command -v cc >/dev/null || fail "no C compiler (cc): make deps"
hdr=$(header)
key=$({ cat "$here/plugin.c" "$hdr"; cc --version | head -n1; } | sha256sum | cut -c1-16)
so=$cache/insn/$key/insn.so
if [ ! -f "$so" ]; then
	mkdir -p "$(dirname "$so")"
	inc=$(mktemp -d)
	cp "$hdr" "$inc/qemu-plugin.h"
	if ! cc -O2 -g -Wall -Wextra -Werror -shared -fPIC -I"$inc" -o "$so.tmp" "$here/plugin.c" \
		2>"$inc/log"; then
		cat "$inc/log" >&2
		rm -rf "$inc"
		fail "compiling the plugin failed"
	fi
	rm -rf "$inc"
	mv "$so.tmp" "$so"
fi
echo "$so"
