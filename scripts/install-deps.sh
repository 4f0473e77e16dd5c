#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Installs the Debian packages one make target needs, and nothing more:
#
#   install-deps.sh [build]   build and run sluiced/sluice (make build, make run)
#   install-deps.sh test      + unit tests (cmocka, clang with ASan/UBSan) and system tests
#                               (pytest, grpcio, protobuf, PyYAML, etcd, redis-server, promtool,
#                               curl, wrk, groff for the man pages, man-db for systemd-analyze's
#                               check of the unit's Documentation=, chromium + chromedriver for the
#                               status page, nftables + iproute2 for the gossip loss test and the
#                               nemesis soak, faketime for its clock skew, git for the install
#                               test, umoci + ca-certificates for the image's test)
#                               (make test, make chaos, make soak, CI)
#   install-deps.sh bench     + the load tools and reference servers (nginx, wrk, h2load,
#                               valgrind for bench/instr.sh, redis-server and redis-benchmark for
#                               bench/redis.py)
#   install-deps.sh fuzz      + clang's libFuzzer
#   install-deps.sh plots     + gnuplot
#   install-deps.sh pkg       + the Debian packaging tools, debootstrap for the packages' test,
#                               pytest, git (the packaged source is what git tracks), file and
#                               openssl for the static build's test (make deb, make deb-test,
#                               make static, make static-test)
#   install-deps.sh fresh     + debootstrap and git (make fresh-test: make test in a new root)
#   install-deps.sh image     + umoci (the OCI image, built without a daemon), ca-certificates (its
#                               CA bundle), binutils (strip), git (the revision label), pytest
#                               for its test   (make image, make image-test)
#
# Every kind includes `build`. Idempotent: only missing packages are installed. apt only (no
# other registry). A test that finds a program missing fails under CI=true naming the package
# (tests/support/needs.py, tests/support/skip.h): add it here, to the kind whose target needs it.
set -euo pipefail
KIND=${1:-build}

BUILD=(
  build-essential cmake pkg-config
  libuv1-dev node-llhttp libnghttp2-dev libprotobuf-c-dev protobuf-c-compiler
  libcurl4-openssl-dev libyaml-dev libjansson-dev libxxhash-dev libssl-dev libhiredis-dev
  zlib1g-dev
)
TEST=(
  clang libclang-rt-14-dev libcmocka-dev
  etcd-server etcd-client prometheus
  python3 python3-pytest python3-grpcio python3-protobuf python3-yaml protobuf-compiler python3-cryptography
  curl wrk iproute2 nftables procps openssl git umoci ca-certificates faketime
  groff-base man-db binutils
  chromium chromium-driver
  redis-server redis-tools
  systemd
  nodejs npm
)
BENCH=(python3 nginx-light wrk nghttp2-client openssl redis-server redis-tools valgrind
       protobuf-compiler python3-protobuf)
FUZZ=(clang libclang-rt-14-dev)
PLOTS=(gnuplot-nox)
PKG=(debhelper dpkg-dev fakeroot lintian debootstrap python3 python3-pytest file openssl git)
FRESH=(debootstrap git)
IMAGE=(umoci ca-certificates binutils git python3 python3-pytest)

case "$KIND" in
  build) PKGS=("${BUILD[@]}") ;;
  test)  PKGS=("${BUILD[@]}" "${TEST[@]}") ;;
  bench) PKGS=("${BUILD[@]}" "${BENCH[@]}") ;;
  fuzz)  PKGS=("${BUILD[@]}" "${FUZZ[@]}") ;;
  plots) PKGS=("${BUILD[@]}" "${PLOTS[@]}") ;;
  pkg)   PKGS=("${BUILD[@]}" "${PKG[@]}") ;;
  fresh) PKGS=("${BUILD[@]}" "${FRESH[@]}") ;;
  image) PKGS=("${BUILD[@]}" "${IMAGE[@]}") ;;
  *) echo "usage: $0 [build|test|bench|fuzz|plots|pkg|fresh|image]" >&2; exit 2 ;;
esac

missing=()
for p in "${PKGS[@]}"; do
  # a Node.js that brings its own npm (nodesource's nodejs package does, and conflicts with
  # Debian's npm): the npm command is what the tests use
  if [ "$p" = npm ] && command -v npm >/dev/null 2>&1; then continue; fi
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps ($KIND): installing ${missing[*]}" >&2
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# The Debian etcd/nginx/prometheus packages may start system services; tests start their own.
for svc in etcd nginx prometheus prometheus-node-exporter redis-server; do
  if command -v systemctl >/dev/null 2>&1; then $SUDO systemctl stop "$svc" >/dev/null 2>&1 || true; fi
done
