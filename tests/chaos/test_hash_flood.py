# SPDX-License-Identifier: Apache-2.0
"""Issue 25, hash flooding: GLOBAL keys whose public key ids agree in the bits the GLOBAL table used
to take its shard (the top 4) and bucket (the low ones) from, brute-forced here with the public
seed as an attacker would (a small C helper over libxxhash). Sent as 1000-item GLOBAL batches to a
non-owner of half of them, they all went into one chain that every lookup walked; under the
table's keyed hash they spread like any keys. Measured: a good client's rate during this flood
against the same flood of keys that only share the ids' top 4 bits (the same ring sector, so the
same owners and work per item; a ratio, with a generous bound: the machine is shared)."""
import json
import os
import socket
import subprocess
import tempfile
import time

import pytest

import chaoslib as cl

SEED = 0x736c756963652121  # SL_KEY_ID_SEED: the public id seed
KEYS = 4000
ITEMS = 1000
NAME = "flood"
PACE = 100  # batches a second per attacker: the same offered load in both floods

HELPER = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
int main(int argc, char **argv)
{
    unsigned n = (unsigned)atoi(argv[1]), low = (unsigned)atoi(argv[2]);
    uint64_t mask = (UINT64_C(0xf) << 60) | ((UINT64_C(1) << low) - 1), want = 0;
    char buf[64];
    memcpy(buf, "flood_k", 7);
    unsigned got = 0;
    for (uint64_t i = 0; got < n; i++) {
        int len = 7 + snprintf(buf + 7, sizeof buf - 7, "%llu", (unsigned long long)i);
        uint64_t id = XXH3_64bits_withSeed(buf, (size_t)len, UINT64_C(0x736c756963652121));
        if (!got)
            want = id & mask;
        if ((id & mask) == want) {
            printf("%s\n", buf + 6);
            got++;
        }
    }
    return 0;
}
"""


def colliding_keys(n, low_bits):
    d = tempfile.mkdtemp()
    src, exe = os.path.join(d, "flood.c"), os.path.join(d, "flood")
    with open(src, "w") as f:
        f.write(HELPER)
    subprocess.run(["cc", "-O2", "-o", exe, src, "-lxxhash"], check=True)
    out = subprocess.run([exe, str(n), str(low_bits)], check=True, capture_output=True,
                         text=True).stdout.split()
    assert len(out) == n
    return out


def bodies(keys):
    out = []
    for i in range(0, len(keys), ITEMS):
        out.append(json.dumps({"requests": [
            {"name": NAME, "unique_key": k, "hits": 1, "limit": 1000000000, "duration": 600000,
             "behavior": 2}  # GLOBAL
            for k in keys[i:i + ITEMS]]}).encode())
    return out


def flood(addr, batches, sent):
    host, port = addr.rsplit(":", 1)

    def attack(stop, i):
        s = socket.create_connection((host, int(port)), timeout=10)
        try:
            j = i
            next_t = time.monotonic()
            while not stop.is_set():
                next_t += 1.0 / PACE
                delay = next_t - time.monotonic()
                if delay > 0:
                    stop.wait(delay)
                b = batches[j % len(batches)]
                j += 1
                s.sendall(b"POST /v1/GetRateLimits HTTP/1.1\r\nHost: x\r\nContent-Type: "
                          b"application/json\r\nContent-Length: %d\r\n\r\n" % len(b) + b)
                buf = b""
                while b"\r\n\r\n" not in buf:
                    buf += s.recv(1 << 16)
                head, _, rest = buf.partition(b"\r\n\r\n")
                n = int([ln for ln in head.split(b"\r\n")
                         if ln.lower().startswith(b"content-length:")][0].split(b":")[1])
                while len(rest) < n:
                    rest += s.recv(1 << 16)
                sent.append(1)
        finally:
            s.close()
    return attack


@pytest.mark.slow
def test_colliding_global_keys_flat(node_factory):
    a, b = "127.0.0.1:%d" % cl.free_port(), "127.0.0.1:%d" % cl.free_port()
    peers = "%s,%s" % (a, b)
    nodes = []
    for addr in (a, b):
        n = node_factory(["--workers", "2", "--listen-addr", addr, "--discovery", "static",
                          "--peers", peers], port=int(addr.rsplit(":", 1)[1]), start=False)
        n.addr = addr
        nodes.append(n)
    for n in nodes:
        n.start()
    node = nodes[0]
    # 4000 keys in this node's GLOBAL table (those another node owns, and the owner's touched
    # ones): one shard (top 4 bits) and one bucket of its 2048 (low 11 bits) under the old
    # bucketing. The ordinary flood's keys share the top 4 bits only, so that both floods fall
    # in the same sixteenth of the ring (the same owners, the same work per item) and differ
    # only in the low bits: under the old bucketing one shard with short chains.
    bad = bodies(colliding_keys(KEYS, 11))
    plain = bodies(colliding_keys(KEYS * 2, 0)[KEYS:])
    cl.warm(node)

    def during(batches):
        sent = []
        atk = cl.Attackers(flood(node.addr, batches, sent), n=2).start()
        try:
            time.sleep(1.0)
            r = cl.measure_rate(node.addr, 2.0)
        finally:
            assert atk.stop(), "attackers did not stop"
        assert node.proc.poll() is None, node.logs()[-4000:]
        return r["rate"], len(sent)

    unloaded = cl.measure_rate(node.addr, 2.0)["rate"]
    # plain, colliding, plain again: the machine's load drifts, the plain figure is their mean
    p1, np1 = during(plain)
    c, nc = during(bad)
    p2, np2 = during(plain)
    p = (p1 + p2) / 2
    ratio = c / p if p else 0.0
    batch_ratio = nc / ((np1 + np2) / 2) if np1 + np2 else 0.0
    figures = {"unloaded_rps": round(unloaded, 1), "plain_during_rps": round(p, 1),
               "colliding_during_rps": round(c, 1), "good_client_ratio": round(ratio, 2),
               "plain_batches": np1 + np2, "colliding_batches": nc,
               "batch_ratio": round(batch_ratio, 2),
               "global_local_answers": cl.metric(node.addr, "sluice_global_local_answers_total")
               or 0}
    cl.record("global-flood", figures)
    assert nc > 0 and np1 > 0 and np2 > 0
    assert figures["global_local_answers"] > 0  # the flood did go through the GLOBAL table
    # The attackers are paced (PACE batches/s each): the node keeps up with a colliding flood as
    # with an ordinary one, and the good client keeps a good part of its rate. Before (one run of
    # the same test against the old code, RelWithDebInfo): the colliding flood got 0.2 of the
    # ordinary flood's batches through and the good client 0.13 of its rate.
    assert batch_ratio >= 0.5, figures
    assert ratio >= 0.25, figures
