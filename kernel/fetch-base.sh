#!/usr/bin/env bash
# Create the kernel work tree: $BPFMUX_CACHE/linux, a git repository whose first commit
# (tag "base") is the pristine tarball named in kernel/BASE. The series is applied on top of
# it by kernel/build.sh. Idempotent: an existing tree with the right base is left alone.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${BPFMUX_CACHE:-$HOME/.cache/bpfmux}
tree=$cache/linux
# shellcheck source=/dev/null
. <(grep -E '^[a-z0-9_]+=' "$here/BASE")

if git -C "$tree" rev-parse -q --verify refs/tags/base >/dev/null 2>&1; then
	have=$(git -C "$tree" log -1 --format=%B base | sed -n 's/^Tarball-sha256: //p')
	if [ "$have" = "$sha256" ]; then
		exit 0
	fi
	echo "fetch-base: $tree has another base ($have); move it away first" >&2
	exit 1
fi

debs=$cache/debs
deb=$(ls "$debs/${package}_${version//\~/\~}_"*.deb 2>/dev/null | head -n1 || true)
if [ -z "$deb" ]; then
	echo "fetch-base: downloading $package=$version ($suite)" >&2
	"$here/../scripts/debian-download" "$debs" "$package=$version"
	deb=$(ls "$debs/${package}_"*.deb | head -n1)
fi

tmp=$(mktemp -d "$cache/unpack.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$tmp" "./$tarball"
got=$(sha256sum "$tmp/$tarball" | cut -d' ' -f1)
if [ "$got" != "$sha256" ]; then
	echo "fetch-base: sha256 mismatch for $tarball: got $got, want $sha256" >&2
	exit 1
fi
echo "fetch-base: unpacking $tarball" >&2
mkdir -p "$tmp/src"
tar -xJf "$tmp/$tarball" -C "$tmp/src" --strip-components=1
rm -rf "$tree"
mv "$tmp/src" "$tree"
cd "$tree"
git init -q -b bpfmux
git config user.name >/dev/null || git config user.name "bpfmux builder"
git config user.email >/dev/null || git config user.email "bpfmux@localhost"
git config gc.auto 0
# The tarball ships its own .gitignore files; keep every file of the base regardless.
git add -A -f .
git commit -q -m "base: $package $version" -m "Tarball-sha256: $sha256"
git tag base
echo "fetch-base: $tree ready at tag base" >&2
