# SPDX-License-Identifier: Apache-2.0
# The shared libraries export their public API and nothing else: every project object is compiled
# with hidden visibility and include/sluice/*.h mark each function SL_EXPORT (sluice/export.h).
# For each library given, the names `nm -D --defined-only` shows must be exactly those listed in
# <SYMBOLS>/<library name without .so...>.symbols (packaging/symbols/libsluice.symbols, ...), and
# every one must begin with sl_. A name added or removed fails the test, naming it: a change of a
# list is a change of the ABI (think about the SONAME and the version, docs/operations.md
# "Installing"), never a side effect.
# Run by ctest (test_exports): cmake -DSYMBOLS=<dir> -P exports.cmake <lib.so>...
# Regenerate the lists after an intended change: the same with -DUPDATE=ON, e.g.
#   cmake -DSYMBOLS=packaging/symbols -DUPDATE=ON -P tests/link/exports.cmake \
#     build/lib/libsluice.so build/lib/libsluice-client.so
cmake_minimum_required(VERSION 3.18)
if(NOT SYMBOLS)
  message(FATAL_ERROR "SYMBOLS (the directory of the .symbols lists) not set")
endif()
find_program(NM nm REQUIRED)

# the libraries: the arguments after the script's name (cmake ... -P exports.cmake <lib>...)
set(libs)
set(script_at -1)
math(EXPR last "${CMAKE_ARGC} - 1")
foreach(i RANGE 1 ${last})
  if(script_at GREATER_EQUAL 0 AND i GREATER script_at AND NOT CMAKE_ARGV${i} STREQUAL "--")
    list(APPEND libs "${CMAKE_ARGV${i}}")
  elseif(script_at LESS 0 AND CMAKE_ARGV${i} STREQUAL "-P")
    math(EXPR script_at "${i} + 1")
  endif()
endforeach()
if(NOT libs)
  message(FATAL_ERROR "no library given: cmake -DSYMBOLS=<dir> -P exports.cmake <lib.so>...")
endif()

set(failed)
foreach(lib ${libs})
  get_filename_component(name ${lib} NAME)
  string(REGEX REPLACE "\\.so(\\..*)?$" "" base "${name}")
  set(list_file ${SYMBOLS}/${base}.symbols)

  execute_process(COMMAND ${NM} -D --defined-only ${lib}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "nm -D --defined-only ${lib} failed (${rc}): ${err}")
  endif()
  # "<address> <type> <name>" per line: the name is the last field
  string(REGEX REPLACE "[^\n]* ([^ \n]+)\n" "\\1;" exported "${out}")
  list(REMOVE_ITEM exported "")
  list(REMOVE_DUPLICATES exported)
  list(SORT exported)
  list(LENGTH exported n_exported)

  if(UPDATE)
    string(REPLACE ";" "\n" body "${exported}")
    file(WRITE ${list_file}
"# SPDX-License-Identifier: Apache-2.0
# The names ${base}.so exports (nm -D --defined-only), one a line, sorted:
# what include/sluice/*.h declare SL_EXPORT that this library holds. ctest test_exports
# (tests/link/exports.cmake) fails when the library's exports differ from this list.
# A change of this list is an ABI change: think about the SONAME and the version
# (docs/operations.md \"Installing\": from 1.0 on, a name added wants a new minor version, a name
# removed a new SONAME). Regenerate from a build:
#   cmake -DSYMBOLS=packaging/symbols -DUPDATE=ON -P tests/link/exports.cmake \\
#     build/lib/libsluice.so build/lib/libsluice-client.so
${body}
")
    message(STATUS "${list_file}: ${n_exported} names written")
    continue()
  endif()

  if(NOT EXISTS ${list_file})
    message(FATAL_ERROR "${name}: no list ${list_file}")
  endif()
  file(STRINGS ${list_file} listed REGEX "^[^#]")
  list(TRANSFORM listed STRIP)
  list(REMOVE_ITEM listed "")
  set(sorted ${listed})
  list(REMOVE_DUPLICATES sorted)
  list(SORT sorted)
  if(NOT sorted STREQUAL listed)
    message(SEND_ERROR "${list_file} is not sorted or lists a name twice")
    list(APPEND failed ${name})
  endif()

  set(added ${exported})
  if(listed)
    list(REMOVE_ITEM added ${listed})
  endif()
  set(removed ${listed})
  if(exported)
    list(REMOVE_ITEM removed ${exported})
  endif()
  set(unprefixed ${exported})
  list(FILTER unprefixed EXCLUDE REGEX "^sl_")

  if(added OR removed OR unprefixed)
    list(APPEND failed ${name})
    list(LENGTH listed n_listed)
    message("${name} exports ${n_exported} names, ${list_file} lists ${n_listed}:")
    foreach(s ${added})
      message("  + ${s}    (exported, not in the list)")
    endforeach()
    foreach(s ${removed})
      message("  - ${s}    (in the list, not exported)")
    endforeach()
    foreach(s ${unprefixed})
      message("  ! ${s}    (exported without the sl_ prefix)")
    endforeach()
  else()
    message(STATUS "${name}: exports the ${n_exported} names of ${list_file}")
  endif()
endforeach()

if(failed)
  list(JOIN failed ", " failed)
  message(FATAL_ERROR "the exports of ${failed} changed. An internal function marked SL_EXPORT "
    "or visibility(\"default\")? Else, for an intended change of the public API (an ABI change: "
    "think about the SONAME and the version), regenerate the list with -DUPDATE=ON and commit it.")
endif()
