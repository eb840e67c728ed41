#!/usr/bin/env bash
# make kernel: bring the cache tree to exactly base + kernel/patches/*.patch, then build a
# bzImage for the guest in a separate output directory.
#
# Incremental by design: the output directory and ccache live in $BPFMUX_CACHE, and files
# whose content did not change keep their old mtime even when the series is re-applied, so
# editing one patch recompiles only what that patch touches.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
cache=${BPFMUX_CACHE:-$HOME/.cache/bpfmux}
tree=$cache/linux
out=${BPFMUX_KERNEL_OUT:-$cache/build}
flavor=${BPFMUX_KCONFIG_EXTRA:-}
stamp=$tree/.git/bpfmux-series
jobs=$(nproc)

# One kernel build at a time on this machine (2 cores): later callers wait their turn.
exec 9>"${TMPDIR:-/tmp}/bpfmux-kernel-build.lock"
if ! flock -n 9; then
	echo "build: another kernel build is running; waiting for it" >&2
	flock 9
fi

"$here/fetch-base.sh"
cd "$tree"

series_hash() {
	local patches=("$repo"/kernel/patches/*.patch)
	[ -e "${patches[0]}" ] || patches=()
	cat "${patches[@]}" </dev/null | sha256sum | cut -d' ' -f1
}

# Apply the series on a fresh branch from base, restoring mtimes of unchanged files.
sync_series() {
	local want=$1 head_before changed
	head_before=$(git rev-parse HEAD)
	git checkout -q -B bpfmux-apply base
	if compgen -G "$repo/kernel/patches/*.patch" >/dev/null; then
		if ! git am -q --keep-cr "$repo"/kernel/patches/*.patch; then
			git am --abort || true
			git checkout -q -f bpfmux
			echo "build: the series does not apply on base (see git am output above)" >&2
			exit 1
		fi
	fi
	changed=$(git diff --name-only "$head_before" HEAD)
	# Files identical to the previous build keep its mtime: git wrote them anew when it
	# switched branches, but make must not see them as changed.
	local f
	git diff --name-only base "$head_before" | while read -r f; do
		if [ -e "$f" ] && ! grep -qxF -- "$f" <<<"$changed"; then
			touch -d "@$(cat ".git/bpfmux-mtimes/$f" 2>/dev/null || stat -c %Y "$f")" -- "$f"
		fi
	done
	git branch -q -f bpfmux HEAD
	git checkout -q bpfmux
	git branch -q -D bpfmux-apply
	printf '%s %s\n' "$want" "$(git rev-parse HEAD)" >"$stamp"
}

# Remember the mtime of every file the series touches, for the next sync.
save_mtimes() {
	local f
	rm -rf .git/bpfmux-mtimes
	git diff --name-only base HEAD | while read -r f; do
		[ -e "$f" ] || continue
		mkdir -p ".git/bpfmux-mtimes/$(dirname "$f")"
		stat -c %Y "$f" >".git/bpfmux-mtimes/$f"
	done
}

want=$(series_hash)
have_hash= have_head=
[ -f "$stamp" ] && read -r have_hash have_head <"$stamp"
dirty=$(git status --porcelain --untracked-files=no)
if [ "${have_hash:-}" = "$want" ] && [ "${have_head:-}" = "$(git rev-parse HEAD)" ] && [ -z "$dirty" ]; then
	: # tree already is base + series
elif [ -n "${have_head:-}" ] && { [ "$have_head" != "$(git rev-parse HEAD)" ] || [ -n "$dirty" ]; } &&
	[ "${CI:-}" != "true" ] && [ "${BPFMUX_FORCE:-0}" != 1 ]; then
	# Kernel development loop: someone is editing the cache tree. Build it as it is.
	echo "build: $tree has commits or edits not in kernel/patches; building it as is." >&2
	echo "build: run 'make kernel-export' to save them, or BPFMUX_FORCE=1 to discard them." >&2
else
	if [ -n "$dirty" ] || { [ -n "${have_head:-}" ] && [ "$have_head" != "$(git rev-parse HEAD)" ]; }; then
		git branch -f "bpfmux-saved-$(date +%s)" HEAD
		git stash -q || true
		echo "build: saved the tree's own work as branch bpfmux-saved-* before re-applying" >&2
	fi
	echo "build: applying $(ls "$repo"/kernel/patches/*.patch 2>/dev/null | wc -l) patches on base" >&2
	sync_series "$want"
fi
save_mtimes

# Config: defconfig + kvm_guest + our fragment (+ an optional extra fragment, e.g. KASAN).
mkdir -p "$out"
frags=("$repo/kernel/config/bpfmux.config")
# Extra fragments: one name or several joined by '+' (kasan+lockdep).
for f in ${flavor//+/ }; do
	[ -f "$repo/kernel/config/$f.config" ] || { echo "build: no kernel/config/$f.config" >&2; exit 1; }
	frags+=("$repo/kernel/config/$f.config")
done
cfgsum=$(cat arch/x86/configs/x86_64_defconfig kernel/configs/kvm_guest.config "${frags[@]}" | sha256sum)
if [ ! -f "$out/.config" ] || [ "$(cat "$out/.bpfmux-config-sum" 2>/dev/null)" != "$cfgsum" ]; then
	echo "build: generating .config" >&2
	make -s O="$out" x86_64_defconfig
	KCONFIG_CONFIG="$out/.config" scripts/kconfig/merge_config.sh -m -O "$out" "$out/.config" \
		kernel/configs/kvm_guest.config "${frags[@]}" >/dev/null
	make -s O="$out" olddefconfig
	# Every line of our fragments must have survived olddefconfig, or a dependency is missing.
	bad=0
	for frag in "${frags[@]}"; do
		while IFS= read -r line; do
			case "$line" in CONFIG_*=n) sym=${line%%=*}
				grep -q "^$sym=[ym]" "$out/.config" && { echo "build: $sym is still set" >&2; bad=1; } ;;
			CONFIG_*) grep -qxF "$line" "$out/.config" || { echo "build: $line did not stick" >&2; bad=1; } ;;
			esac
		done <"$frag"
	done
	[ $bad = 0 ] || exit 1
	echo "$cfgsum" >"$out/.bpfmux-config-sum"
fi

export CCACHE_DIR=${CCACHE_DIR:-$cache/ccache} CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-8G}
# base_dir covers tree and build dir so a second cache (another worktree) hits the same ccache.
export CCACHE_BASEDIR=$cache CCACHE_NOHASHDIR=1
export KBUILD_BUILD_TIMESTAMP='1970-01-01' KBUILD_BUILD_USER=bpfmux KBUILD_BUILD_HOST=bpfmux
start=$(date +%s)
echo "build: make -j$jobs bzImage modules_prepare (output in $out)" >&2
# A first build is long: say so before it starts (measured from scratch on 2 cores,
# empty ccache: 914 s, bench/results/raw/kernel-build-scratch-after.log; 1,293 s on a
# slower machine).
if [ ! -e "$out/vmlinux" ]; then
	echo "build: first build in $out: about 15 min on 2 cores (less with more cores or a warm ccache)" >&2
fi
# modules_prepare: guest tests build small test modules out of tree against this directory.
make -s O="$out" -j"$jobs" CC="ccache gcc" HOSTCC="ccache gcc" bzImage modules_prepare
echo "build: bzImage ready in $(($(date +%s) - start)) s: $out/arch/x86/boot/bzImage" >&2
# What the image was built from, for the benchmarks' reports (kernel/image-tree.sh): the
# tree's HEAD may move on while an older image is being measured.
{
	echo "tree: $(git log -1 --format='%H %s')"
	echo "commits on base: $(git rev-list --count base..HEAD)"
	if [ -z "$(git status --porcelain --untracked-files=no)" ]; then
		echo "edits: none"
	else
		echo "edits: uncommitted changes in the tree"
	fi
	echo "bzImage sha256: $(sha256sum "$out/arch/x86/boot/bzImage" | cut -d' ' -f1)"
} >"$out/bpfmux-image.txt"

# libbpf of the same tree (it carries the series' libbpf patches) for the guest tests,
# plus the tree's UAPI headers: the tests must see this kernel's bpf.h, not the host's.
lib=$out/libbpf
mkdir -p "$lib/obj"
make -s -C tools/lib/bpf OUTPUT="$lib/obj/" DESTDIR="$lib" prefix=/ BUILD_STATIC_ONLY=1 \
	CC="ccache gcc" install_lib install_headers >/dev/null
mkdir -p "$lib/include/linux"
cp tools/include/uapi/linux/bpf.h tools/include/uapi/linux/bpf_common.h \
	tools/include/uapi/linux/btf.h "$lib/include/linux/"
echo "build: libbpf $(sed -n 's/.*MINOR_VERSION \([0-9]*\)/1.\1/p' tools/lib/bpf/libbpf_version.h) in $lib" >&2
