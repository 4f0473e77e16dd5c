# SPDX-License-Identifier: Apache-2.0
"""libsluice's lease renewer against a real sluiced (issue 14, item 4): work that runs three times
longer than a lease's duration keeps its slot while the renewer renews it in the background, over
Levee's /attempt (X-Concurrency: renew) and over the Gubernator API (a CONCURRENCY item with hits 0
and lease_id); released through the renewer, the slot is free at once; stopped, the lease runs out.

The library is the built libsluice-client.so, called through ctypes (only plain structs cross:
sl_attempt, sl_client_item, sl_client_lease_status)."""
import ctypes
import json
import os
import time

import pytest

from clientlib import CLIENT_LIB as LIB, Item, Request
from conftest import built, http, wait_for

pytestmark = built(LIB)

DURATION_MS = 1500
QUOTAS = """
limit:
  key_default: {rate: 100000, burst: 100000}
concurrency:
  key:
    short: {limit: 1, duration: %d}
""" % DURATION_MS


class Attempt(ctypes.Structure):
    _fields_ = [("resource", ctypes.c_char_p), ("prefix", ctypes.c_char_p),
                ("method", ctypes.c_char_p), ("req_id", ctypes.c_char_p),
                ("priority", ctypes.c_char_p)]


class LeaseStatus(ctypes.Structure):
    _fields_ = [("lost", ctypes.c_bool), ("renewals", ctypes.c_uint64),
                ("failures", ctypes.c_uint64)]


@pytest.fixture
def lib():
    L = ctypes.CDLL(LIB)
    vp = ctypes.c_void_p
    L.sl_client_new.argtypes = [ctypes.c_char_p, vp, ctypes.POINTER(vp)]
    L.sl_client_free.argtypes = [vp]
    L.sl_client_renewer_new.argtypes = [vp, vp, ctypes.POINTER(vp)]
    L.sl_client_renewer_free.argtypes = [vp]
    L.sl_client_renewer_add_levee.argtypes = [vp, ctypes.POINTER(Attempt), ctypes.c_char_p,
                                              ctypes.c_int64, ctypes.POINTER(ctypes.c_uint64)]
    L.sl_client_renewer_add_item.argtypes = [vp, ctypes.POINTER(Item), ctypes.c_char_p,
                                             ctypes.POINTER(ctypes.c_uint64)]
    L.sl_client_renewer_status.argtypes = [vp, ctypes.c_uint64, ctypes.POINTER(LeaseStatus)]
    L.sl_client_renewer_release.argtypes = [vp, ctypes.c_uint64, ctypes.c_int]
    L.sl_client_renewer_stop.argtypes = [vp, ctypes.c_uint64]
    return L


def acquire(node, resource):
    return http("POST", "http://%s/attempt" % node.addr, b"",
                {"X-Resource": resource, "X-Concurrency": "acquire"})


def grpc_item(node, hits, lease=None):
    item = {"name": "renewed", "unique_key": "job", "hits": hits, "limit": 1,
            "duration": DURATION_MS, "algorithm": 6}
    if lease:
        item["metadata"] = {"lease_id": lease}
    status, _, body = http("POST", "http://%s/v1/GetRateLimits" % node.addr,
                           json.dumps({"requests": [item]}))
    assert status == 200, body
    return json.loads(body)["responses"][0]


def test_work_three_times_longer_than_the_lease_keeps_its_slot(node_factory, tmp_path, lib):
    q = tmp_path / "quotas.yaml"
    q.write_text(QUOTAS)
    node = node_factory(["--workers", "1", "--standalone", "--quota-file", str(q)])
    client, renewer = ctypes.c_void_p(), ctypes.c_void_p()
    assert lib.sl_client_new(node.addr.encode(), None, ctypes.byref(client)) == 0
    assert lib.sl_client_renewer_new(client, None, ctypes.byref(renewer)) == 0
    try:
        # a Levee lease and a Gubernator lease, each the only slot of its limit
        st, h, _ = acquire(node, "short")
        assert st == 200
        levee_id = h["x-lease-id"]
        r = grpc_item(node, 1)
        assert r["status"] == "UNDER_LIMIT"
        gub_id = r["metadata"]["lease_id"]
        hl, hg = ctypes.c_uint64(), ctypes.c_uint64()
        att = Attempt(resource=b"short")
        assert lib.sl_client_renewer_add_levee(renewer, ctypes.byref(att), levee_id.encode(),
                                               DURATION_MS, ctypes.byref(hl)) == 0
        req = Request(name=b"renewed", name_len=7, unique_key=b"job", unique_key_len=3, hits=1,
                      limit=1, duration=DURATION_MS, algorithm=6)
        item = Item(req=req)
        assert lib.sl_client_renewer_add_item(renewer, ctypes.byref(item), gub_id.encode(),
                                              ctypes.byref(hg)) == 0

        # the work runs 3 durations: all along, nobody else gets either slot
        t_end = time.time() + 3 * DURATION_MS / 1000.0
        probes = 0
        while time.time() < t_end:
            assert acquire(node, "short")[0] == 429
            assert grpc_item(node, 1)["status"] == "OVER_LIMIT"
            probes += 1
            time.sleep(0.1)
        st_l, st_g = LeaseStatus(), LeaseStatus()
        assert lib.sl_client_renewer_status(renewer, hl, ctypes.byref(st_l)) == 0
        assert lib.sl_client_renewer_status(renewer, hg, ctypes.byref(st_g)) == 0
        assert not st_l.lost and not st_g.lost
        # every duration / 2: about 6 renewals in 3 durations (fewer on a slow machine)
        assert st_l.renewals >= 4 and st_g.renewals >= 4, (st_l.renewals, st_g.renewals)
        print("probes refused: %d; renewals: levee %d, gubernator %d; failures %d/%d"
              % (probes, st_l.renewals, st_g.renewals, st_l.failures, st_g.failures))

        # released through the renewer: the slot is free at once
        assert lib.sl_client_renewer_release(renewer, hl, 1000) == 0
        st, h, _ = acquire(node, "short")
        assert st == 200
        # stopped (not released): the lease runs out within one duration
        assert lib.sl_client_renewer_stop(renewer, hg) == 0
        assert wait_for(lambda: grpc_item(node, 1)["status"] == "UNDER_LIMIT",
                        3 * DURATION_MS / 1000.0, 0.1)
    finally:
        lib.sl_client_renewer_free(renewer)
        lib.sl_client_free(client)
