#!/usr/bin/env bash
# Installs the Debian packages sluice needs to build, test, benchmark and run.
# Idempotent: only missing packages are installed. apt only (no other registry).
set -euo pipefail
PKGS=(
  build-essential cmake pkg-config clang libclang-rt-14-dev
  libuv1-dev node-llhttp libnghttp2-dev libprotobuf-c-dev protobuf-c-compiler
  libcurl4-openssl-dev libyaml-dev libjansson-dev libxxhash-dev libcmocka-dev
  etcd-server etcd-client
  python3 python3-pytest python3-grpcio python3-protobuf protobuf-compiler
  prometheus nginx-light wrk nghttp2-client gnuplot-nox curl iproute2 procps
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]}" >&2
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# The Debian etcd/nginx/prometheus packages may start system services; tests start their own.
for svc in etcd nginx prometheus prometheus-node-exporter; do
  if command -v systemctl >/dev/null 2>&1; then $SUDO systemctl stop "$svc" >/dev/null 2>&1 || true; fi
done
