#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Instructions per request, counted by callgrind (repeatable whatever else the machine does, unlike
# requests per second): sluiced (1 worker) under valgrind answers N1 and then N2 requests of each
# kind in two runs, and (Ir(N2) - Ir(N1)) / (N2 - N1) is what one more request costs, start-up
# cancelled out. Give two builds to compare them in one run:
#
#   [KINDS="a c d r"] bench/instr.sh build [/path/to/other/build]      (kinds: a gRPC 1 item, c JSON, d /attempt,
#                                                     r Envoy RLS 1 descriptor)
#
# Needs valgrind, h2load (nghttp2-client), protoc and python3-protobuf (install-deps.sh bench/test).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
N1=${N1:-2000}
N2=${N2:-12000}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
protoc --proto_path="$ROOT/proto" --python_out="$TMP" "$ROOT/proto/gubernator.proto"
/usr/bin/python3 - "$TMP" <<'PY'
import json, struct, sys
sys.path.insert(0, sys.argv[1])
import gubernator_pb2 as g
req = g.GetRateLimitsReq()
r = req.requests.add()
r.name, r.unique_key, r.hits, r.limit, r.duration = "bench", "key1", 1, 1000000000, 60000
m = req.SerializeToString()
open(sys.argv[1] + "/grpc1.bin", "wb").write(struct.pack(">BI", 0, len(m)) + m)
open(sys.argv[1] + "/json1.json", "w").write(json.dumps({"requests": [
    {"name": "bench", "unique_key": "key1", "hits": 1, "limit": 1000000000, "duration": 60000}]}))
open(sys.argv[1] + "/one", "w").write("x")
# RLS: one domain, and a RateLimitRequest with one descriptor (domain 1, descriptors 2 > entries 1)
import os
os.makedirs(sys.argv[1] + "/rls", exist_ok=True)
open(sys.argv[1] + "/rls/bench.yaml", "w").write(
    "domain: bench\ndescriptors:\n  - key: user\n    rate_limit:\n"
    "      unit: second\n      requests_per_unit: 1000000000\n")
def field(num, b):
    return bytes([num << 3 | 2, len(b)]) + b
m = field(1, b"bench") + field(2, field(1, field(1, b"user") + field(2, b"key1")))
open(sys.argv[1] + "/rls1.bin", "wb").write(struct.pack(">BI", 0, len(m)) + m)
open(sys.argv[1] + "/quota.yaml", "w").write(
    "limit:\n  key_default: {rate: 1000000000, burst: 1000}\nfactor:\n  default: 1\n")
PY

free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# total Ir of one sluiced run answering $3 requests of kind $2 (build $1)
run() {
  local bin=$1/bin/sluiced kind=$2 n=$3 port out pid
  port=$(free_port)
  out=$TMP/cg.out
  valgrind --tool=callgrind --callgrind-out-file="$out" "$bin" --listen-addr 127.0.0.1:"$port" \
    --workers 1 --standalone --quota-file "$TMP/quota.yaml" --rls-config-dir "$TMP/rls" \
    >"$TMP/sluiced.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 300); do (echo >/dev/tcp/127.0.0.1/"$port") 2>/dev/null && break; sleep 0.1; done
  case $kind in
    a) h2load -n "$n" -c 2 -m 8 -d "$TMP/grpc1.bin" -H 'content-type: application/grpc' \
         -H 'te: trailers' "http://127.0.0.1:$port/pb.gubernator.V1/GetRateLimits" ;;
    c) h2load --h1 -n "$n" -c 2 -d "$TMP/json1.json" -H 'content-type: application/json' \
         "http://127.0.0.1:$port/v1/GetRateLimits" ;;
    d) h2load --h1 -n "$n" -c 2 -d "$TMP/one" -H 'X-Resource: res1' \
         "http://127.0.0.1:$port/attempt" ;;
    r) h2load -n "$n" -c 2 -m 8 -d "$TMP/rls1.bin" -H 'content-type: application/grpc' \
         -H 'te: trailers' \
         "http://127.0.0.1:$port/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit" ;;
  esac >"$TMP/h2load.log" 2>&1
  grep -q "$n succeeded" "$TMP/h2load.log" || { echo "instr.sh: not every request succeeded" >&2; cat "$TMP/h2load.log" >&2; }
  kill -TERM "$pid"; wait "$pid" || true
  awk '/^(summary|totals):/ {print $2; exit}' "$out"
}

for build in "$@"; do
  line="$build:"
  for kind in ${KINDS:-a c d r}; do
    x=$(run "$build" $kind "$N1"); y=$(run "$build" $kind "$N2")
    line="$line  $kind $(( (y - x) / (N2 - N1) )) Ir/request"
  done
  echo "$line"
done
