#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Run every libFuzzer binary named fuzz_* in BIN_DIR for SECONDS each, one after the other, on a
# temporary copy of its seed corpus (tests/fuzz/corpus/<fuzzer name>/, if there is one), so runs
# never grow the repository. Exits non-zero if any fuzzer crashes, leaks, times out or fails to
# start; the reproducer inputs are kept in ${FUZZ_ARTIFACTS:-BIN_DIR/fuzz-artifacts}/<name>/.
#
#   cmake -S . -B build-fuzz -DSLUICE_FUZZ=ON -DCMAKE_C_COMPILER=clang && cmake --build build-fuzz
#   tests/fuzz/run.sh build-fuzz/bin 30
set -u

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
    echo "usage: $0 BIN_DIR [SECONDS]" >&2
    exit 2
fi
bin_dir=$1
secs=${2:-30}
here=$(cd "$(dirname "$0")" && pwd)
artifacts=${FUZZ_ARTIFACTS:-$bin_dir/fuzz-artifacts}
case $secs in '' | *[!0-9]*) echo "SECONDS must be a whole number" >&2; exit 2 ;; esac

failed=()
ran=0
for bin in "$bin_dir"/fuzz_*; do
    [ -f "$bin" ] && [ -x "$bin" ] || continue
    name=$(basename "$bin")
    ran=$((ran + 1))
    work=$(mktemp -d "${TMPDIR:-/tmp}/$name.XXXXXX")
    mkdir -p "$work/corpus" "$work/crashes"
    if [ -d "$here/corpus/$name" ]; then
        cp -R "$here/corpus/$name/." "$work/corpus/"
    fi
    echo "== $name: ${secs}s, $(find "$work/corpus" -type f | wc -l) seed(s)"
    "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
        -print_final_stats=1 -artifact_prefix="$work/crashes/" "$work/corpus" >"$work/log" 2>&1
    rc=$?
    grep -E '^(#[0-9]+[[:space:]]+DONE|stat::number_of_executed_units|stat::peak_rss_mb)' \
        "$work/log" | sed 's/^/   /'
    if [ $rc -ne 0 ] || [ -n "$(ls -A "$work/crashes")" ]; then
        echo "!! $name failed (exit $rc); last lines of its log:"
        tail -n 40 "$work/log" | sed 's/^/   /'
        mkdir -p "$artifacts/$name"
        cp -R "$work/crashes/." "$artifacts/$name/" 2>/dev/null
        cp "$work/log" "$artifacts/$name/log"
        echo "   reproducers and log in $artifacts/$name/"
        failed+=("$name")
    else
        echo "   ok: $(find "$work/corpus" -type f | wc -l) corpus entries"
    fi
    rm -rf "$work"
done

if [ $ran -eq 0 ]; then
    echo "no fuzz_* binaries in $bin_dir (configure with -DSLUICE_FUZZ=ON -DCMAKE_C_COMPILER=clang)" >&2
    exit 2
fi
if [ ${#failed[@]} -ne 0 ]; then
    echo "FAILED: ${failed[*]}"
    exit 1
fi
echo "all $ran fuzzer(s) ran clean"
