# SPDX-License-Identifier: Apache-2.0
# The fail-open client stands alone (issue 10, item 5): a program built against sluice_client only
# (examples/middleware.c) runs, and carries nothing of the server side — no router, peer, etcd,
# quota, server or GOAWAY-handling server session symbol, no engine (key store, algorithms) and no
# JSON codec, and no libyaml, libcurl or jansson dependency.
# Run by ctest: cmake -DEXE=<example_middleware> -P client_alone.cmake
if(NOT EXE)
  message(FATAL_ERROR "EXE not set")
endif()
find_program(NM nm REQUIRED)
find_program(READELF readelf REQUIRED)

execute_process(COMMAND ${EXE} --help RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "--sluice")
  message(FATAL_ERROR "${EXE} --help failed (${rc}): ${out}${err}")
endif()

execute_process(COMMAND ${NM} ${EXE} RESULT_VARIABLE rc OUTPUT_VARIABLE syms)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nm ${EXE} failed")
endif()
foreach(want sl_client_new sl_h2c_submit sl_h2conn_submit)
  if(NOT syms MATCHES " ${want}\n")
    message(FATAL_ERROR "${EXE} lacks ${want}: not built from the client library?")
  endif()
endforeach()
foreach(bad sl_router_ sl_peer_ sl_etcd_ sl_quota sl_server_ sl_http_ sl_config_ sl_node_
            sl_store_ sl_engine_ sl_tb_ sl_gcra_ sl_gubjson json_ yaml_ curl_)
  string(REGEX MATCH "[^\n]* [TtDdBbRrU] ${bad}[^\n]*" hit "${syms}")
  if(hit)
    message(FATAL_ERROR "${EXE} pulls in ${bad}*: ${hit}")
  endif()
endforeach()

execute_process(COMMAND ${READELF} -d ${EXE} OUTPUT_VARIABLE dyn)
foreach(bad libyaml libcurl libjansson)
  if(dyn MATCHES "NEEDED[^\n]*${bad}")
    message(FATAL_ERROR "${EXE} needs ${bad}")
  endif()
endforeach()
message(STATUS "${EXE}: the client library alone")
