#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Regenerate the accuracy figures in docs/img/ (run by `make plots` after the build): every figure
# comes from `sluice sim` with a fixed seed, so the same tree draws the same pictures. The commands
# are echoed as they run; docs/algorithms.md ("Accuracy against a perfect sliding window" and "Open
# loop: Criteo's figures") quotes them. The open-loop tables land in $KEEP/openloop_*.md.
#
#   SLUICE=path/to/sluice   binary to use (default: $BUILD/bin/sluice, BUILD defaulting to build)
#   KEEP=dir                keep the CSV files and the text output in dir (default: a temp dir)
set -euo pipefail
cd "$(dirname "$0")/.."

SLUICE=${SLUICE:-${BUILD:-build}/bin/sluice}
[ -x "$SLUICE" ] || { echo "plots.sh: $SLUICE not built (make build)" >&2; exit 1; }
command -v gnuplot >/dev/null || { echo "plots.sh: gnuplot not installed" >&2; exit 1; }
if [ -n "${KEEP:-}" ]; then
    DATA=$KEEP
    mkdir -p "$DATA"
else
    DATA=$(mktemp -d)
    trap 'rm -rf "$DATA"' EXIT
fi
IMG=docs/img
mkdir -p "$IMG"
GP=scripts/plots

run() { # name, sluice sim arguments...: output in $DATA/name.txt, the JSON line in $DATA/name.json
    local name=$1
    shift
    echo "+ sluice sim $*" >&2
    "$SLUICE" sim "$@" >"$DATA/$name.txt"
    tail -n 1 "$DATA/$name.txt" >"$DATA/$name.json"
}

# gcra:99 is a GCRA whose burst lets `limit` requests through at once (b + 1 = 100), for comparison
# with the engine's default GCRA burst of 0 (a pure shaper: one request every 600 ms).
# gnuplot's SVG wraps every element in its own style group, most of them left empty: dropping the
# empty ones makes a many-panel figure a fifth smaller and draws the same.
shrink_svg() { perl -0pi -e 's/<g [^>]*>\s*<\/g>\n?//g' "$1"; }

ALL=token_bucket,leaky_bucket,gcra,gcra:99,fixed_window,sliding_window:1,sliding_window:5,sliding_window:60,sliding_log
NALL=9

window() { # name, heading, sim arguments...
    local name=$1 heading=$2
    shift 2
    run "$name" --algorithms "$ALL" --limit 100 --duration 60000 --csv "$DATA/$name.csv" \
        --csv-step 5000 "$@"
    gnuplot -e "csv='$DATA/$name.csv'; out='$IMG/accuracy_$name.svg'" \
            -e "heading='$heading'; limit=100; ncols=$NALL" "$GP/window.gp"
    shrink_svg "$IMG/accuracy_$name.svg"
}

# Criteo's scenario: 100 requests per minute, random traffic a little above the limit.
window window_poisson "Poisson 2 req/s, limit 100 per 60 s: admitted in the trailing 60 s" \
    --traffic poisson --rate 2 --seconds 600 --seed 1
# On/off: 15 s at 10 req/s, then 45 s of silence (a burst of ~150 every minute).
window window_bursty "On/off 15 s at 10 req/s every 60 s, limit 100 per 60 s" \
    --traffic bursty --rate 10 --on-ms 15000 --off-ms 45000 --seconds 600 --seed 1
# The fixed window's worst case: 100 just before a minute boundary, 100 just after.
window window_edge "Edge pattern: 100 requests at B-1 ms and B ms, limit 100 per 60 s" \
    --traffic edge --seconds 600

sweep() { # name, csv, csv2, label1, label2, heading, xcol, xlabel, names, logx
    gnuplot -e "csv='$2'; csv2='$3'; label1='$4'; label2='$5'; out='$IMG/accuracy_$1.svg'" \
            -e "heading='$6'; xcol=$7; xlabel_text='$8'; names='$9'" \
            -e "logx=${10}" "$GP/sweep.gp"
    shrink_svg "$IMG/accuracy_$1.svg"
}

# Distribution: 10 keys at 240 req/s each (2x the limit of 120/s), split over k limiters.
DIST=(--traffic poisson --rate 240 --seconds 60 --keys 10 --seed 1 --limit 120 --duration 1000)
SPLIT_ALGS=gcra:12,token_bucket,sliding_window:1,sliding_log
run split_rr "${DIST[@]}" --algorithms "$SPLIT_ALGS" --split 1,2,3,4,5,6,8,10,12 \
    --split-mode rr --csv "$DATA/split_rr.csv"
run split_random "${DIST[@]}" --algorithms "$SPLIT_ALGS" --split 1,2,3,4,5,6,8,10,12 \
    --split-mode random --csv "$DATA/split_random.csv"
sweep split_k "$DATA/split_rr.csv" "$DATA/split_random.csv" "rr" "random" \
    "Quota split over k limiters (limit/k, burst/k each), 2x overload" 1 "k (limiters per key)" \
    "${SPLIT_ALGS//,/ }" 0

# GLOBAL model: the same traffic over k nodes syncing every s ms.
GLOBAL_ALGS=token_bucket,leaky_bucket,gcra:12,sliding_window:1
for fwd in all admitted; do
    run "global_s_$fwd" "${DIST[@]}" --algorithms "$GLOBAL_ALGS" --global-nodes 4 \
        --global-sync 1,2,5,10,20,50,100,200,500,1000 --global-forward "$fwd" \
        --csv "$DATA/global_s_$fwd.csv"
    run "global_k_$fwd" "${DIST[@]}" --algorithms "$GLOBAL_ALGS" --global-nodes 1,2,3,4,6,8,12,16 \
        --global-sync 100 --global-forward "$fwd" --csv "$DATA/global_k_$fwd.csv"
done
sweep global_s "$DATA/global_s_all.csv" "$DATA/global_s_admitted.csv" "(all hits)" "(admitted)" \
    "GLOBAL model, 4 nodes: against the sync period s" 2 "s (ms)" "${GLOBAL_ALGS//,/ }" 1
sweep global_k "$DATA/global_k_all.csv" "$DATA/global_k_admitted.csv" "(all hits)" "(admitted)" \
    "GLOBAL model, sync every 100 ms: against the node count k" 1 "k (nodes)" \
    "${GLOBAL_ALGS//,/ }" 0

# Open loop (Criteo's figures): the same offered traffic fed to every estimator, nothing rejected,
# each one's count of the trailing 60 s against the true count; one y-scale per figure.
OPEN=token_bucket,leaky_bucket,gcra,fixed_window,sliding_window:1,sliding_window:5,sliding_window:60,sliding_log
openloop() { # name, heading, columns to draw (CSV headers, blank separated), sim arguments...
    local name=$1 heading=$2 want=$3
    shift 3
    run "openloop_$name" --open-loop --algorithms "$OPEN" --limit 100 --duration 60000 \
        --csv "$DATA/openloop_$name.csv" --csv-step 1000 "$@"
    # The markdown table docs/algorithms.md quotes: the lines of the output that start with '|'.
    grep '^|' "$DATA/openloop_$name.txt" >"$DATA/openloop_$name.md"
    local header cols="" w i ymax
    header=$(head -n 1 "$DATA/openloop_$name.csv")
    for w in $want; do
        i=$(tr ',' '\n' <<<"$header" | grep -nxF -- "$w" | cut -d: -f1)
        [ -n "$i" ] || { echo "plots.sh: no column $w in openloop_$name.csv" >&2; exit 1; }
        cols="$cols $i"
    done
    # One y-scale: the largest value drawn in any panel (true count included), rounded up to 20.
    ymax=$(awk -F, -v cols="$cols" 'NR > 1 { n = split(cols, c, " "); if ($2 > m) m = $2
               for (k = 1; k <= n; k++) if ($(c[k]) + 0 > m) m = $(c[k]) + 0 }
               END { print int((m + 19) / 20) * 20 }' "$DATA/openloop_$name.csv")
    gnuplot -e "csv='$DATA/openloop_$name.csv'; out='$IMG/openloop_$name.png'" \
            -e "heading='$heading'; limit=100; cols='$cols'; names='$want'; ymax=$ymax" \
            "$GP/openloop.gp"
}
# Criteo's scenario: random traffic a little above 100 per minute.
openloop poisson "Open loop, Poisson 2 req/s: count of the last 60 s per estimator (limit 100)" \
    "fixed_window sliding_window:1 sliding_window:5 sliding_log sliding_window:60 token_bucket" \
    --traffic poisson --rate 2 --seconds 600 --seed 1
# The leaky bucket's bias: exactly 2 req/s against 100 per minute, long enough for the bucket
# (full at the start) to run dry and for its second half to be steady.
openloop constant "Open loop, constant 2 req/s: buckets against the true count of the last 60 s (limit 100)" \
    "leaky_bucket_backlog leaky_bucket_admitted gcra_backlog gcra_admitted fixed_window sliding_window:5" \
    --traffic constant --rate 2 --seconds 1200

ls -l "$IMG"/accuracy_* "$IMG"/openloop_* >&2
