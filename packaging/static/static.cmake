# SPDX-License-Identifier: Apache-2.0
# make static (-DSLUICE_STATIC=ON): sluiced linked with -static against Debian's static archives
# (docs/operations.md "Static build"). Included at the end of CMakeLists.txt: it re-points the
# imported pkg-config targets at their .a files, and libcurl at packaging/static/nocurl.c (Debian's
# libcurl.a cannot be linked statically: it needs MIT Kerberos and p11-kit, which ship no .a).
# Only the sluiced target is meant to be built in this configuration.
set(SL_STATIC_ARCHIVES
  UV        "uv_a"                   # libuv1-dev names its archive libuv_a.a
  NGHTTP2   "nghttp2"
  PROTOBUFC "protobuf-c"
  JANSSON   "jansson"
  YAML      "yaml"
  XXHASH    "xxhash"
  OPENSSL   "ssl:crypto"
  HIREDIS   "hiredis"                 # the Redis store's reply reader
  ZLIB      "z")                      # gRPC message compression (api/grpczip.c)
list(LENGTH SL_STATIC_ARCHIVES n)
math(EXPR last "${n} - 1")
foreach(i RANGE 0 ${last} 2)
  math(EXPR j "${i} + 1")
  list(GET SL_STATIC_ARCHIVES ${i} pkg)
  list(GET SL_STATIC_ARCHIVES ${j} libs)
  string(REPLACE ":" ";" libs "${libs}")
  set(paths)
  foreach(l ${libs})
    find_library(SL_STATIC_LIB_${l} NAMES lib${l}.a REQUIRED)
    list(APPEND paths ${SL_STATIC_LIB_${l}})
  endforeach()
  set_property(TARGET PkgConfig::${pkg} PROPERTY INTERFACE_LINK_LIBRARIES ${paths})
endforeach()
# OpenSSL's and libuv's archives call into libdl/libpthread (in glibc's libc.a since 2.34)
set_property(TARGET PkgConfig::OPENSSL APPEND PROPERTY INTERFACE_LINK_LIBRARIES Threads::Threads)

add_library(sluice_nocurl STATIC ${CMAKE_SOURCE_DIR}/packaging/static/nocurl.c)
target_compile_options(sluice_nocurl PRIVATE ${SL_WARN})
target_include_directories(sluice_nocurl PRIVATE ${CURL_INCLUDE_DIRS})
set_property(TARGET PkgConfig::CURL PROPERTY INTERFACE_LINK_LIBRARIES sluice_nocurl)

target_compile_definitions(sluiced PRIVATE SLUICE_NO_CURL)
target_link_options(sluiced PRIVATE -static)
