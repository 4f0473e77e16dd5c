#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# make run: a standalone sluiced with real limits — Gubernator's API (limits sent with each call)
# and Levee's POST /attempt (limits from examples/quotas.yaml) on one port, no etcd needed.
# Extra arguments go to sluiced (e.g. make run RUN_ARGS="--listen-addr 127.0.0.1:6000").
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BUILD:-build}/bin
cat >&2 <<'MSG'
sluiced on 127.0.0.1:5454 (Ctrl-C stops it gracefully). Try, in another terminal:
  curl -s -XPOST localhost:5454/v1/GetRateLimits \
       -d '{"requests":[{"name":"demo","unique_key":"me","hits":1,"limit":5,"duration":10000}]}'
  curl -si -XPOST localhost:5454/attempt -H 'X-Resource: api' -H 'X-Method: DELETE'
  build/bin/sluice check --addr 127.0.0.1:5454 --name demo --key me --limit 5 --duration 10s
  build/bin/sluice health --addr 127.0.0.1:5454
  curl -s localhost:5454/metrics
MSG
exec "$BIN/sluiced" --config examples/sluiced.yaml "$@"
