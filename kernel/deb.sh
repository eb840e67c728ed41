#!/usr/bin/env bash
# make kernel-deb: Debian packages of the patched kernel (linux-image, linux-headers,
# linux-libc-dev; `make bindeb-pkg`) for booting it on a real machine, into
# build/kernel-deb/ (kernel/README.md, "Booting the series on a real machine").
#
# Packaging bumps the kernel's build number and relinks it, which must not change the
# image the tests and benchmarks boot: it runs in a copy of the build directory
# ($BPFMUX_CACHE/deb/build), refreshed from `make kernel`'s whenever that one is newer,
# so only the packaging steps and the few modules are built.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cache=${BPFMUX_CACHE:-$HOME/.cache/bpfmux}
tree=$cache/linux
out=${BPFMUX_KERNEL_OUT:-$cache/build}
debdir=$cache/deb
work=$debdir/build
dest=$repo/build/kernel-deb
jobs=$(nproc)

say() { echo "kernel-deb: $*" >&2; }

if [ ! -e "$out/arch/x86/boot/bzImage" ]; then
	say "no kernel build in $out: run 'make kernel' first"
	exit 1
fi
# bindeb-pkg's build dependencies beyond `make deps` (debian/rules calls debhelper).
"$repo/scripts/install-deps" debhelper rsync libdw-dev
if [ ! -e "$work/vmlinux" ] || [ "$out/vmlinux" -nt "$work/vmlinux" ]; then
	say "copying the build directory ($(du -sh "$out" | cut -f1)) to $work"
	rm -rf "$work"
	mkdir -p "$debdir"
	cp -a "$out" "$work"
fi
rm -f "$debdir"/*.deb "$debdir"/*.buildinfo "$debdir"/*.changes
export CCACHE_DIR=${CCACHE_DIR:-$cache/ccache} CCACHE_BASEDIR=$cache CCACHE_NOHASHDIR=1
export KBUILD_BUILD_TIMESTAMP='1970-01-01' KBUILD_BUILD_USER=bpfmux KBUILD_BUILD_HOST=bpfmux
# No linux-image-*-dbg package: hundreds of MB of debug info that the build directory's
# vmlinux already has.
export DEB_BUILD_PROFILES=${DEB_BUILD_PROFILES:-pkg.linux-upstream.nokerneldbg}
start=$(date +%s)
say "make -j$jobs bindeb-pkg in $work (a few minutes; the whole kernel if the copy is stale)"
make -s -C "$tree" O="$work" -j"$jobs" CC="ccache gcc" HOSTCC="ccache gcc" bindeb-pkg >&2
mkdir -p "$dest"
rm -f "$dest"/*.deb
mv "$debdir"/*.deb "$dest"/
# The image as the package installs it, for booting it in the guest (make kernel-deb).
image=$(ls "$dest"/linux-image-*.deb)
dpkg-deb -x "$image" "$dest/root"
mkdir -p "$dest/boot"
rm -f "$dest"/boot/vmlinuz-*
mv "$dest"/root/boot/vmlinuz-* "$dest/boot/"
rm -rf "$dest/root"
say "packages in $((($(date +%s) - start))) s:"
for d in "$dest"/*.deb "$dest"/boot/vmlinuz-*; do
	echo "  $d ($(du -h "$d" | cut -f1))"
done
