#!/usr/bin/env bash
# Builds the Debian image the image tests that need Python use (python3,
# python3-torch, python3-numpy: what a training job in an image imports;
# jupyter-notebook: what a notebook in an image serves), as a
# root file system's tar for `lathe image import`. Cached outside the clone,
# keyed by the packages' candidate versions, so a clean-clone CI does not build
# it again; a new torch or python3 in Debian makes a new key. Called by
# scripts/deps.sh; minutes the first time (mmdebstrap from this machine's apt
# sources), well under a second afterwards.
#   scripts/test-images.sh          build when missing; prints the tar's path
set -euo pipefail

CACHE=${LATHE_TEST_IMAGES:-/var/cache/lathe-test-images}
PKGS=(python3 python3-torch python3-numpy jupyter-notebook)
key=$(apt-cache policy "${PKGS[@]}" | awk '/^[a-z]/{p=$1} /Candidate/{print p, $2}' |
  sha256sum | cut -c1-16)
tar="$CACHE/debian-torch-$key.tar"
if [[ -s "$tar" ]]; then
  echo "$tar"
  exit 0
fi
if ! command -v mmdebstrap >/dev/null 2>&1; then
  echo "test-images: mmdebstrap is missing (scripts/deps.sh installs it)" >&2
  exit 1
fi
mkdir -p "$CACHE"
echo "test-images: building $tar (python3, python3-torch, jupyter-notebook; several minutes, once)" >&2
tmp="$tar.partial"  # a directory: mmdebstrap builds into it, then it is packed
rm -rf "$tmp"
# This machine's apt sources, so a mirror or a snapshot configured here is used.
sources=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.sources 2>/dev/null |
  grep -v '^#' || true)
mmdebstrap --quiet --variant=apt --include="$(IFS=,; echo "${PKGS[*]}")" \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
  --aptopt='Acquire::Retries "3"' \
  bookworm "$tmp" - <<<"$sources" >&2
rm -rf "$tmp"/var/cache/apt/archives/*.deb "$tmp"/var/lib/apt/lists/*
tar -C "$tmp" --numeric-owner -cf "$tar.tmp" .
mv "$tar.tmp" "$tar"
rm -rf "$tmp"
# Older keys' tars are a previous Debian's packages: not needed any more.
find "$CACHE" -name 'debian-torch-*.tar' ! -name "$(basename "$tar")" -delete
echo "$tar"
