# SPDX-License-Identifier: Apache-2.0
#
# The layers of libsluice and what each may use: the one table of the walls. CMakeLists.txt reads
# it (sl_layer() links a layer to exactly the layers listed here), and so does the include check
# (tests/link/includes.cmake, ctest test_layer_includes), which fails when a file under
# src/<layer>/ includes a header of a layer that is not listed here for it, directly: a layer
# reached only through another's USES does not count, so transitive linking hides no edge.
#
# A layer is a directory, src/<layer>/, built into the static library sluice_<layer>; `proto` is
# the code protoc-c generates from proto/*.proto (sluice_proto). SL_LAYERS is ordered lowest
# first, and a layer may use only layers before it: an upward edge fails the check too.
# Public headers (include/sluice/) belong to the layer that implements them (SL_PUBLIC_<header>);
# including one is using that layer.

set(SL_LAYERS
  proto      # generated protobuf-c code
  base       # byte buffers, strings, UTF-8, hex, string map, file reading, growable arrays
  runtime    # clock, log, metrics registry and renderers, stop-wait, the worker-load shedder
  core       # the engine: algorithms, the in-memory key store, snapshots
  wire       # gRPC framing and status, the protobuf wire format, hand-written (no JSON)
  decide     # the unit of work every decider takes, sl_batch, and the decider interface
  sim        # the accuracy simulator (sluice sim)
  json       # the Gubernator JSON gateway's codecs (jansson)
  tls        # the TLS record layer over OpenSSL, sans-I/O
  h2client   # one HTTP/2 client session (nghttp2) and its socket calls
  auth       # bearer tokens, client identities, address checks
  ctlplane   # the control planes' clients: etcd (v3 JSON gateway) and the Kubernetes API
  config     # options, YAML/env/flags, quota, kill-switch and RLS sources
  gossip     # SWIM: wire codec, protocol, key ring (sans-I/O), and its libuv driver and seeds
  protect    # Stripe's protections as a service: leases, fleet, ladder, kill switches
  net        # event loops, listeners, HTTP/1.1 and HTTP/2 server sessions
  api        # one adapter per dialect: Gubernator, Levee /attempt, Envoy RLS
  redis      # the Redis store (--store redis): connections, scripts, slots
  cluster    # pickers, membership, peers, the PeersV1 codec, forwarding, GLOBAL, hand-off
  levee      # Levee's cluster roles: the observer and the client-proxy
  client     # the fail-open client library (libsluice-client)
  node       # one node wired together: service, admin, roles, reload
)
# the two programs: thin mains over the library (checked like layers, not part of libsluice;
# what src/daemon/ holds besides main.c, sd_notify, is sluiced's alone)
set(SL_PROGRAMS daemon cli)

set(SL_USES_proto)
set(SL_USES_base)
# runtime/shed.c implements what include/sluice/shed.h declares (the shedder's options)
set(SL_USES_runtime  base)
set(SL_USES_core     base runtime)
set(SL_USES_decide   base core wire)
set(SL_USES_sim      core)
set(SL_USES_wire     base)
set(SL_USES_json     base proto)
set(SL_USES_tls      base)
set(SL_USES_h2client base tls)
set(SL_USES_auth     base)
set(SL_USES_ctlplane base runtime)
set(SL_USES_config   base runtime core ctlplane)
# the protocol files (swim*, keyring) use base only: sans-I/O; the driver the rest
set(SL_USES_gossip   base runtime auth ctlplane config)
set(SL_USES_protect  base runtime core config)
set(SL_USES_net      base runtime wire tls)
set(SL_USES_api      base runtime core decide wire json config protect)
set(SL_USES_redis    base runtime core decide tls)
set(SL_USES_cluster  base runtime proto core decide wire tls h2client auth ctlplane config gossip net)
set(SL_USES_levee    base runtime wire h2client ctlplane config gossip net cluster)
set(SL_USES_client   base runtime proto wire tls h2client)
set(SL_USES_node     base runtime core decide wire tls auth config gossip protect net api redis
                     cluster levee)
set(SL_USES_daemon   runtime config node)
set(SL_USES_cli      base runtime core sim auth ctlplane config client)

# public header -> the layer that implements it
set(SL_PUBLIC_engine.h core)
set(SL_PUBLIC_clock.h  runtime)
set(SL_PUBLIC_shed.h   runtime)
set(SL_PUBLIC_client.h client)
set(SL_PUBLIC_node.h   node)
set(SL_PUBLIC_export.h base)  # SL_EXPORT: a macro every public header uses
set(SL_PUBLIC_types.h  base)  # the protocol's numbers (algorithms, behaviours, statuses): header only
