#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# make bench: every benchmark, each against a reference measured in the same run (ratios, not
# absolute thresholds). Options are passed through to bench.py (see bench.py --help).
set -euo pipefail
cd "$(dirname "$0")/.."
exec /usr/bin/python3 bench/bench.py "$@"
