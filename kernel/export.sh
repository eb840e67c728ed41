#!/usr/bin/env bash
# make kernel-export: write the commits of the cache tree (base..bpfmux) back into
# kernel/patches/ as the series, the source of truth. Refuses to drop uncommitted edits.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${BPFMUX_CACHE:-$HOME/.cache/bpfmux}
tree=$cache/linux
cd "$tree"
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
	echo "kernel-export: $tree has uncommitted changes; commit them (git -C $tree commit) first" >&2
	exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# --no-signature and a fixed sha keep re-exports byte-identical when nothing changed.
git format-patch -q --no-signature --zero-commit --no-numbered -o "$tmp" base..HEAD
rm -f "$here"/patches/*.patch
if compgen -G "$tmp/*.patch" >/dev/null; then
	cp "$tmp"/*.patch "$here/patches/"
fi
n=$(ls "$here"/patches/*.patch 2>/dev/null | wc -l)
# Record that the tree now matches the exported series, so 'make kernel' keeps it as is.
printf '%s %s\n' "$(cat "$here"/patches/*.patch </dev/null 2>/dev/null | sha256sum | cut -d' ' -f1)" \
	"$(git rev-parse HEAD)" >.git/bpfmux-series
echo "kernel-export: $n patches in kernel/patches/" >&2
# On the commits, not the .patch files: in file mode checkpatch misreads the blank
# context lines of format-patch output as added trailing whitespace.
if [ -x "$tree/scripts/checkpatch.pl" ] && [ "$n" -gt 0 ]; then
	# The system python first: checkpatch's spdxcheck.py needs python3-ply and
	# python3-git (scripts/install-deps), which a python from elsewhere on PATH lacks.
	PATH=/usr/bin:$PATH "$tree/scripts/checkpatch.pl" --quiet --strict -g base..HEAD ||
		echo "kernel-export: checkpatch has remarks (above)" >&2
fi
