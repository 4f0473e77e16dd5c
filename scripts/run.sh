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
  build/bin/sluice top        # the admin API, on the node's admin socket
MSG
# The admin socket's default directory is the runtime directory ($RUNTIME_DIRECTORY, else
# $XDG_RUNTIME_DIR/sluice, else /run/sluice): without either variable, a user who is not root
# cannot create /run/sluice, so the socket goes to the runtime directory the CLI reads too.
if [ -z "${RUNTIME_DIRECTORY:-}${XDG_RUNTIME_DIR:-}" ] && [ "$(id -u)" != 0 ]; then
    export RUNTIME_DIRECTORY="${TMPDIR:-/tmp}/sluice-run-$(id -u)"
    mkdir -p -m 0700 "$RUNTIME_DIRECTORY"
    if [ "$(stat -c %u:%a "$RUNTIME_DIRECTORY")" != "$(id -u):700" ]; then
        echo "$RUNTIME_DIRECTORY is not yours alone (mode 700): remove it, or set XDG_RUNTIME_DIR" >&2
        exit 2
    fi
    echo "(admin socket: $RUNTIME_DIRECTORY/admin.sock; RUNTIME_DIRECTORY=$RUNTIME_DIRECTORY build/bin/sluice top)" >&2
fi
exec "$BIN/sluiced" --config examples/sluiced.yaml "$@"
