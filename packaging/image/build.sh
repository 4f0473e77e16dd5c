#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# make image: an OCI image of sluiced, built without a container daemon (docs/operations.md
# "Container image"). umoci (Debian's package) makes an OCI image layout from a root filesystem
# assembled here from the built programs and the Debian files they need:
#
#   /usr/bin/sluiced, /usr/bin/sluice    the programs of `make build` (debug info stripped)
#   /usr/lib/..., /lib64/ld-linux-*      the shared libraries they load (as ldd resolves them on
#                                        this machine) and the dynamic loader; no shell, no
#                                        package manager, nothing else runnable
#   /etc/passwd, /etc/group              root and the user sluice (uid/gid 65532), which runs it
#   /etc/nsswitch.conf                   hosts from files, then DNS
#   /etc/ssl/certs/ca-certificates.crt   Debian's CA bundle, for TLS to etcd, Redis and the
#                                        Kubernetes API when no --*-ca is given
#   /var/lib/sluice, /run/sluice, /tmp   writable by sluice (state, sockets)
#   /usr/share/doc/...                   sluice's LICENSE and NOTICE, each library's copyright file
#
# By default the dynamically linked programs, not the static sluiced of `make static`: that one
# is built without libcurl, so it refuses the etcd control plane and --discovery k8s, which
# docs/deploy/k8s.yaml uses, and the CLI is not built statically. IMAGE_STATIC=1 (make
# image-static) makes the smaller image of the static sluiced alone instead: no loader, no
# libraries (their copyright files are those of the static archives it was linked with), no CLI.
#
#   [IMAGE_STATIC=1] build.sh BUILD_DIR OUT_DIR TAG [SOURCE]
#
# writes OUT_DIR/sluice (OUT_DIR/sluice-static with IMAGE_STATIC=1: the OCI layout, reference
# TAG) and OUT_DIR/sluice-TAG.oci.tar (the same layout as an OCI archive: skopeo's oci-archive:,
# podman load, ctr images import).
set -euo pipefail
BUILD=${1:?usage: build.sh BUILD_DIR OUT_DIR TAG [SOURCE]}
OUT=${2:?usage: build.sh BUILD_DIR OUT_DIR TAG [SOURCE]}
TAG=${3:?usage: build.sh BUILD_DIR OUT_DIR TAG [SOURCE]}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VERSION=$(cat "$ROOT/VERSION")
SOURCE=${4:-$(git -C "$ROOT" config --get remote.origin.url 2>/dev/null || true)}
SOURCE=${SOURCE:-unknown}
REVISION=$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)
# every timestamp (files, layer, config) is the last commit's, so a rebuild of one commit is the
# same image; SOURCE_DATE_EPOCH overrides it
EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$ROOT" log -1 --format=%ct 2>/dev/null || date +%s)}
CREATED=$(date -u -d "@$EPOCH" +%Y-%m-%dT%H:%M:%SZ)
UID_=65532
ARCH=$(dpkg --print-architecture)
MULTIARCH=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
PORT=5454
STATIC=${IMAGE_STATIC:-0}
if [ "$STATIC" = 1 ]; then PROGS=(sluiced); NAME=sluice-static; else PROGS=(sluiced sluice); NAME=sluice; fi

for tool in umoci ldd strip readelf dpkg dpkg-query; do
  command -v "$tool" >/dev/null || { echo "image: $tool is missing (scripts/install-deps.sh image)" >&2; exit 1; }
done
for prog in "${PROGS[@]}"; do
  [ -x "$BUILD/bin/$prog" ] || { echo "image: $BUILD/bin/$prog is not built (make build, make static)" >&2; exit 1; }
done
if [ "$STATIC" = 1 ] && readelf -l "$BUILD/bin/sluiced" | grep -q "program interpreter"; then
  echo "image: IMAGE_STATIC=1 but $BUILD/bin/sluiced is dynamically linked (make static)" >&2; exit 1
fi
CA=/etc/ssl/certs/ca-certificates.crt
[ -s "$CA" ] || { echo "image: $CA is missing (apt-get install ca-certificates)" >&2; exit 1; }

ROOTLESS=()
[ "$(id -u)" -eq 0 ] || ROOTLESS=(--rootless)

mkdir -p "$OUT"
WORK=$(mktemp -d "$OUT/.rootfs.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
RFS=$WORK/rootfs
mkdir -p "$RFS"/usr/bin "$RFS"/usr/lib "$RFS"/usr/lib64 "$RFS"/etc/ssl/certs \
         "$RFS"/var/lib/sluice "$RFS"/run/sluice "$RFS"/tmp "$RFS"/usr/share/doc/sluice
ln -s usr/lib "$RFS/lib"
ln -s usr/lib64 "$RFS/lib64"

for prog in "${PROGS[@]}"; do
  strip --strip-debug -o "$RFS/usr/bin/$prog" "$BUILD/bin/$prog"
  chmod 0755 "$RFS/usr/bin/$prog"
done

# llhttp's source (node-llhttp) is compiled into sluiced
pkgs=(node-llhttp)
owner() { # the Debian package holding a file
  local p
  p=$(dpkg-query -S "$1" 2>/dev/null || dpkg-query -S "$(readlink -f "$1")" 2>/dev/null || true)
  [ -z "$p" ] || echo "${p%%:*}"
}
if [ "$STATIC" = 1 ]; then
  # the static archives packaging/static/static.cmake found, and glibc's
  for a in $(sed -n 's/^SL_STATIC_LIB_[^:]*:FILEPATH=//p' "$BUILD/CMakeCache.txt") \
           "/usr/lib/$MULTIARCH/libc.a"; do
    p=$(owner "$a"); [ -z "$p" ] || pkgs+=("$p")
  done
else
  # the libraries and the loader, at the paths ldd names (through the lib -> usr/lib links)
  libs=$( { ldd "$BUILD/bin/sluiced"; ldd "$BUILD/bin/sluice"; } |
          awk '/=> \// {print $3} /^[[:space:]]*\/[^ ]*ld-linux/ {print $1}' | sort -u)
  # glibc loads libgcc_s at run time for thread cancellation and unwinding
  for gcc_s in "/lib/$MULTIARCH/libgcc_s.so.1" "/usr/lib/$MULTIARCH/libgcc_s.so.1"; do
    if [ -e "$gcc_s" ]; then libs="$libs $gcc_s"; break; fi
  done
  for lib in $libs; do
    mkdir -p "$RFS$(dirname "$lib")"
    cp -L "$lib" "$RFS$lib"
    chmod 0644 "$RFS$lib"
    p=$(owner "$lib"); [ -z "$p" ] || pkgs+=("$p")
  done
  # the loader (the programs' PT_INTERP) runs; the libraries need not
  loader=$(ldd "$BUILD/bin/sluiced" | awk '/^[[:space:]]*\/[^ ]*ld-linux/ {l = $1} END {print l}')
  [ -n "$loader" ] || { echo "image: ldd names no dynamic loader for sluiced" >&2; exit 1; }
  chmod 0755 "$RFS$loader"
fi
for pkg in $(printf '%s\n' "${pkgs[@]}" | sort -u); do
  if [ -f "/usr/share/doc/$pkg/copyright" ]; then
    mkdir -p "$RFS/usr/share/doc/$pkg"
    cp "/usr/share/doc/$pkg/copyright" "$RFS/usr/share/doc/$pkg/copyright"
  fi
done
cp "$ROOT/LICENSE" "$ROOT/NOTICE" "$RFS/usr/share/doc/sluice/"
mkdir -p "$RFS/usr/share/doc/ca-certificates"
cp /usr/share/doc/ca-certificates/copyright "$RFS/usr/share/doc/ca-certificates/" 2>/dev/null || true

cp "$CA" "$RFS/etc/ssl/certs/ca-certificates.crt"
# OpenSSL's default verify paths on Debian (OPENSSLDIR /usr/lib/ssl) lead to the same bundle
mkdir -p "$RFS/usr/lib/ssl"
ln -s /etc/ssl/certs "$RFS/usr/lib/ssl/certs"
ln -s /etc/ssl/certs/ca-certificates.crt "$RFS/usr/lib/ssl/cert.pem"

cat > "$RFS/etc/passwd" <<PASSWD
root:x:0:0:root:/root:/usr/sbin/nologin
sluice:x:$UID_:$UID_:sluice:/var/lib/sluice:/usr/sbin/nologin
PASSWD
cat > "$RFS/etc/group" <<GROUP
root:x:0:
sluice:x:$UID_:
GROUP
echo "hosts: files dns" > "$RFS/etc/nsswitch.conf"
chmod 0644 "$RFS"/etc/passwd "$RFS"/etc/group "$RFS"/etc/nsswitch.conf
chmod 1777 "$RFS/tmp"
if [ "$(id -u)" -eq 0 ]; then
  chown -R 0:0 "$RFS"
  chown "$UID_:$UID_" "$RFS/var/lib/sluice" "$RFS/run/sluice"
  chmod 0750 "$RFS/var/lib/sluice" "$RFS/run/sluice"
else
  # a rootless build cannot hand the directories to uid 65532: leave them writable by all
  echo "image: not root, so /var/lib/sluice and /run/sluice are mode 1777 in the image" >&2
  chmod 1777 "$RFS/var/lib/sluice" "$RFS/run/sluice"
fi
find "$RFS" -exec touch -h -d "@$EPOCH" {} +

LAYOUT=$OUT/$NAME
rm -rf "$LAYOUT"
umoci init --layout "$LAYOUT"
umoci new --image "$LAYOUT:$TAG"
umoci insert "${ROOTLESS[@]}" --image "$LAYOUT:$TAG" --history.created "$CREATED" \
  --history.created_by "packaging/image/build.sh" "$RFS" /
umoci config --image "$LAYOUT:$TAG" --created "$CREATED" --history.created "$CREATED" \
  --history.created_by "packaging/image/build.sh" \
  --os linux --architecture "$ARCH" \
  --config.user "$UID_:$UID_" \
  --config.entrypoint /usr/bin/sluiced \
  --config.cmd --listen-addr --config.cmd "0.0.0.0:$PORT" \
  --config.exposedports "$PORT/tcp" \
  --config.workingdir /var/lib/sluice \
  --config.stopsignal SIGTERM \
  --config.env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
  --config.label org.opencontainers.image.title=sluice \
  --config.label "org.opencontainers.image.description=sluiced, a distributed rate-limiting service" \
  --config.label org.opencontainers.image.licenses=Apache-2.0 \
  --config.label "org.opencontainers.image.version=$VERSION" \
  --config.label "org.opencontainers.image.revision=$REVISION" \
  --config.label "org.opencontainers.image.source=$SOURCE" \
  --config.label "org.opencontainers.image.created=$CREATED"
umoci gc --layout "$LAYOUT"

ARCHIVE=$OUT/sluice-$TAG.oci.tar
tar --sort=name --mtime="@$EPOCH" --owner=0 --group=0 --numeric-owner -C "$LAYOUT" -cf "$ARCHIVE" .
echo "image: $LAYOUT:$TAG ($(du -sh "$LAYOUT" | cut -f1)), $ARCHIVE"
