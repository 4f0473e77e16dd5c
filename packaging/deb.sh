#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# make deb: the Debian binary packages of this checkout (debian/, dh with the cmake build system)
# into OUT (default build/deb): sluice, libsluice0.1, libsluice-client0.1, libsluice-dev, then
# lintian over them (its errors fail the build; its warnings are printed).
#
# The source is copied first (the files git tracks or would track, so uncommitted edits count
# and build trees do not), because dpkg-buildpackage writes its results into the parent
# directory; the copy has no .git, so the version is VERSION's, as from a tarball.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$ROOT/build/deb}
JOBS=${JOBS:-2}
VERSION=$(head -1 "$ROOT/VERSION" | tr -d '[:space:]')
rm -rf "$OUT"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd) # the build runs in the copy: every path below is absolute
SRC=$OUT/src/sluice-$VERSION
mkdir -p "$SRC"
(cd "$ROOT" && git ls-files -co --exclude-standard -z | xargs -0 tar -cf - --no-recursion) |
  tar -xf - -C "$SRC"
(cd "$SRC" && DEB_BUILD_OPTIONS="parallel=$JOBS" dpkg-buildpackage -b -us -uc >"$OUT/build.log" 2>&1) || {
  tail -40 "$OUT/build.log"; echo "deb: dpkg-buildpackage failed (log: $OUT/build.log)" >&2; exit 1; }
mv "$OUT"/src/*.deb "$OUT"/src/*.changes "$OUT"/src/*.buildinfo "$OUT"/ 2>/dev/null || true
mv "$OUT"/src/*.ddeb "$OUT"/ 2>/dev/null || true
rm -rf "$OUT/src"
ls -1 "$OUT"/*.deb
# lintian: E: fails, W:/I: are reported (what it says of this tree: docs/operations.md "Debian packages")
set +e
lintian --fail-on error --tag-display-limit 0 "$OUT"/*.changes >"$OUT/lintian.txt" 2>&1
rc=$?
set -e
cat "$OUT/lintian.txt"
echo "lintian: $(grep -c '^E:' "$OUT/lintian.txt") errors, $(grep -c '^W:' "$OUT/lintian.txt") warnings"
exit $rc
