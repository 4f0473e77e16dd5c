#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# make fresh-test: the README's test command (`make test`, with CI=true as CI runs it) inside a
# fresh Debian 12 root, so that a package the build or a test uses without scripts/install-deps.sh
# installing it fails here instead of on a user's machine.
#
#   fresh-test.sh [CACHE_DIR]        (default build/fresh; root only: chroot, mount, unshare)
#
# The root is `debootstrap --variant=minbase bookworm` from the Debian archive this machine's apt
# uses, made once and cached as a tarball in CACHE_DIR; every run unpacks a new copy, so nothing a
# run installed is there for the next. Inside it goes only a `git clone` of this checkout's HEAD
# (commit first: uncommitted changes are not tested, as in CI) and the one package a user must
# install by hand to type `make` at all (make; the README says so). The one other thing kept between
# runs is apt's download cache (CACHE_DIR/apt-archives, bind-mounted), which saves the downloads
# but not a single install step: every package is still installed by `make test`'s own
# scripts/install-deps.sh. Everything runs in a mount namespace of its own, so the root's mounts
# (proc, sys, dev, and those the tests make for network namespaces) end with it. The root shares
# the machine's network (apt needs the archive; the tests use only loopback and namespaces of
# their own). FRESH_KEEP=1 keeps the root for a look afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=$(pwd)
CACHE=${1:-build/fresh}
SUITE=bookworm
start=$(date +%s)

[ "$(id -u)" -eq 0 ] || { echo "fresh-test: needs root (chroot, mount, unshare)" >&2; exit 2; }
for tool in debootstrap git unshare chroot; do
  command -v "$tool" >/dev/null || { echo "fresh-test: $tool missing (scripts/install-deps.sh fresh)" >&2; exit 2; }
done

# The Debian archive this machine's apt uses (not the security one), as tests/pkg/test_deb.py.
mirror() {
  local f uri
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    uri=$(grep -hoE '^(URIs:[[:space:]]*|deb[[:space:]]+(\[[^]]*\][[:space:]]+)?)[^[:space:]]+' "$f" |
          awk '{print $NF}' | grep debian | grep -v security | head -n1 || true)
    [ -n "$uri" ] && { echo "$uri"; return; }
  done
  echo "http://deb.debian.org/debian"
}

mkdir -p "$CACHE/apt-archives/partial"
CACHE=$(cd "$CACHE" && pwd)
TAR=$CACHE/$SUITE-minbase.tar
if [ ! -f "$TAR" ]; then
  echo "fresh-test: debootstrap $SUITE (minbase) from $(mirror), once" >&2
  tmp=$(mktemp -d "$CACHE/debootstrap-XXXXXX")
  debootstrap --variant=minbase "$SUITE" "$tmp" "$(mirror)" >"$CACHE/debootstrap.log" 2>&1 ||
    { tail -20 "$CACHE/debootstrap.log" >&2; rm -rf "$tmp"; exit 1; }
  tar -C "$tmp" -cf "$TAR.part" . && mv "$TAR.part" "$TAR"
  rm -rf "$tmp"
fi

ROOT=$(mktemp -d "$CACHE/root-XXXXXX")
cleanup() {
  if [ "${FRESH_KEEP:-0}" = 1 ]; then echo "fresh-test: root kept in $ROOT" >&2; else rm -rf "$ROOT"; fi
}
trap cleanup EXIT
tar -C "$ROOT" -xf "$TAR"
git clone -q --no-hardlinks "$SRC" "$ROOT/src/sluice"
echo "fresh-test: $(git -C "$ROOT/src/sluice" log -1 --format='%h %s' | cut -c1-100)" >&2
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
# what every machine of this workplace has in its image and no project installs: the local
# certificate authorities (ca-certificates, once apt installs it, adds them to the bundle) and
# npm's settings for the registry (its CA file), so that the npm registry answers in here as it
# does on the machine itself
if [ -d /usr/local/share/ca-certificates ]; then
  mkdir -p "$ROOT/usr/local/share/ca-certificates"
  cp -r /usr/local/share/ca-certificates/. "$ROOT/usr/local/share/ca-certificates/"
fi
if [ -f "$HOME/.npmrc" ]; then
  mkdir -p "$ROOT/root"
  cp "$HOME/.npmrc" "$ROOT/root/.npmrc"
fi
# what Debian's installer (and any container runtime) writes and debootstrap does not: without it
# "localhost" resolves nowhere, as on no real machine
printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$ROOT/etc/hosts"

# Inside a private mount namespace: the mounts a Debian machine has, then make test as CI runs it.
unshare --mount --propagation private bash -euo pipefail -c '
  R=$1; A=$2
  mount --bind "$R" "$R"   # its / a mount point, as on a machine (ip netns and unshare need one)
  mount -t proc proc "$R/proc"
  mount -t sysfs sys "$R/sys"
  mount --rbind /dev "$R/dev"
  mount -t tmpfs -o mode=1777 tmp "$R/tmp"
  mount -t tmpfs run "$R/run"
  mkdir -p "$R/run/lock" "$R/dev/shm"
  mount -t tmpfs -o mode=1777 shm "$R/dev/shm"
  mount --bind "$A" "$R/var/cache/apt/archives"
  exec chroot "$R" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/root LANG=C.UTF-8 CI=true DEBIAN_FRONTEND=noninteractive \
    bash -c "apt-get update -qq && apt-get install -y -qq --no-install-recommends make >/dev/null &&
             cd /src/sluice && make test"
' fresh "$ROOT" "$CACHE/apt-archives" && rc=0 || rc=$?
if [ $rc -eq 0 ]; then
  echo "fresh-test: make test passed in a fresh $SUITE root, $(( $(date +%s) - start )) s in all" >&2
else
  echo "fresh-test: make test FAILED (exit $rc) in a fresh $SUITE root after $(( $(date +%s) - start )) s" >&2
fi
exit $rc
