#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# `make install` as an operator and an embedder see it (issue 16, item 1): install the build tree
# into a scratch DESTDIR, check the layout (programs, versioned shared libraries with their SONAME,
# static archives, headers, pkg-config files, man pages), then build examples/embedded.c and
# examples/middleware.c OUT OF TREE against the installed tree with `pkg-config --cflags --libs`
# only, and run them: the embedded node decides and answers over gRPC; the middleware serves one
# request, failing open (no sluiced at the address it is given). embedded.c is also linked with
# the static archive libsluice.a.
# Run by ctest: install.sh <build dir> <source dir> <configured CMAKE_INSTALL_PREFIX>
set -eu
BUILD=$1
SRC=$2
PREFIX=$3
T=$(mktemp -d)
trap 'kill $MW 2>/dev/null || true; rm -rf "$T"' EXIT
MW=
DEST=$T/root
DESTDIR=$DEST cmake --install "$BUILD" >/dev/null
R=$DEST$PREFIX
LIBDIR=$(cd "$R" && ls -d lib lib/*-linux-gnu 2>/dev/null | while read d; do
  [ -e "$R/$d/libsluice.so" ] && echo "$d"; done | head -1)
[ -n "$LIBDIR" ] || { echo "no libsluice.so under $R/lib"; exit 1; }
L=$R/$LIBDIR
for f in sbin/sluiced bin/sluice include/sluice/client.h include/sluice/node.h \
         include/sluice/shed.h include/sluice/engine.h include/sluice/clock.h \
         include/sluice/export.h $LIBDIR/libsluice.a $LIBDIR/libsluice-client.a \
         $LIBDIR/pkgconfig/sluice.pc $LIBDIR/pkgconfig/sluice-client.pc \
         share/man/man8/sluiced.8 share/man/man1/sluice.1 \
         share/bash-completion/completions/sluice; do
  [ -e "$R/$f" ] || { echo "missing after install: $f"; exit 1; }
done
for lib in libsluice libsluice-client; do
  soname=$(readelf -d "$L/$lib.so" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
  case "$soname" in $lib.so.[0-9]*) ;; *) echo "$lib.so: SONAME '$soname'"; exit 1;; esac
  [ -e "$L/$soname" ] || { echo "$lib: $soname not installed"; exit 1; }
done
# the client library carries nothing of the server side
if nm -D --defined-only "$L/libsluice-client.so" | grep -E ' (sl_router_|sl_server_|sl_node_|sl_config_)'; then
  echo "libsluice-client.so exports server-side symbols"; exit 1
fi
if readelf -d "$L/libsluice-client.so" | grep -E 'libyaml|libcurl|libuv'; then
  echo "libsluice-client.so needs a server-side library"; exit 1
fi

export PKG_CONFIG_PATH=$L/pkgconfig PKG_CONFIG_SYSROOT_DIR=$DEST
export LD_LIBRARY_PATH=$L
cd "$T"
# shellcheck disable=SC2046
cc -std=gnu11 -Wall -Wextra -Werror -o embedded "$SRC/examples/embedded.c" \
   $(pkg-config --cflags --libs sluice)
# llhttp is the middleware's own HTTP server parser, not sluice's: Debian ships it as sources
cc -std=gnu11 -w -c -I/usr/share/include/llhttp /usr/share/llhttp/llhttp.c /usr/share/llhttp/api.c \
   /usr/share/llhttp/http.c
# shellcheck disable=SC2046
cc -std=gnu11 -Wall -Wextra -Werror -Wno-unused-parameter -o middleware \
   "$SRC/examples/middleware.c" -I/usr/share/include/llhttp llhttp.o api.o http.o \
   $(pkg-config --cflags --libs sluice-client libuv) -lpthread
# both resolve libsluice from the installed tree, not from the build
ldd ./embedded | grep -q "$L/libsluice.so" || { ldd ./embedded; exit 1; }
ldd ./middleware | grep -q "$L/libsluice-client.so" || { ldd ./middleware; exit 1; }
if ldd ./middleware | grep -q 'libsluice\.so'; then echo "middleware pulls libsluice"; exit 1; fi

timeout 60 ./embedded
# the static archive: libsluice.a, then the libraries sluice.pc requires (Requires.private), shared
# (Debian's libcurl cannot be linked with `pkg-config --static`: its .pc names libraries whose -dev
# packages are not installed)
A=$(pkg-config --variable=libdir sluice)/libsluice.a  # pkgconf adds the sysroot, pkg-config not
[ -e "$A" ] || A=$DEST$A
# shellcheck disable=SC2046
cc -std=gnu11 -Wall -Wextra -Werror -o embedded-static "$SRC/examples/embedded.c" \
   $(pkg-config --cflags sluice) "$A" $(pkg-config --libs $(pkg-config --print-requires-private sluice)) \
   -lpthread -lm
if ldd ./embedded-static | grep -q libsluice; then echo "embedded-static uses libsluice.so"; exit 1; fi
timeout 60 ./embedded-static
"$R/sbin/sluiced" --version | grep -q '^sluiced [0-9]'
"$R/bin/sluice" --version | grep -q '^sluice [0-9]'

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
DEAD=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
./middleware --listen 127.0.0.1:$PORT --sluice 127.0.0.1:$DEAD --resource demo --timeout 200 &
MW=$!
i=0
until out=$(curl -s -i --max-time 5 http://127.0.0.1:$PORT/hello 2>/dev/null) && [ -n "$out" ]; do
  i=$((i + 1)); [ $i -lt 100 ] || { echo "middleware did not answer"; exit 1; }; sleep 0.1
done
echo "$out" | grep -q '^HTTP/1.1 200' || { echo "$out"; exit 1; }
echo "$out" | grep -qi '^X-Sluice: failed-open' || { echo "$out"; exit 1; }
echo "install + out-of-tree examples: ok"
