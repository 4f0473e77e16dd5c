# SPDX-License-Identifier: Apache-2.0
"""All or nothing for a Gubernator batch (request metadata all_or_nothing=true, docs/api.md): the
items so marked are counted only if every one of them passes; a refused batch gives back what
the others took, and says so (OVER_LIMIT, metadata all_or_nothing: given back). Over the JSON
gateway and gRPC, on one node and on 3 nodes whose keys have different owners."""
import threading

import test_gubernator as gub
from conftest import free_port


def batch(node, narrow, hits=1, aon=True, name="aon"):
    md = {"all_or_nothing": "true"} if aon else {}
    body = {"requests": [
        {"name": name, "unique_key": narrow, "hits": hits, "limit": 2, "duration": 3600000,
         "metadata": md},
        {"name": name, "unique_key": "broad", "hits": hits, "limit": 100, "duration": 3600000,
         "metadata": md}]}
    st, _, data = gub.post_json(node, body)
    assert st == 200
    return data["responses"]


def broad_left(node, name="aon"):
    st, _, data = gub.post_json(node, {"requests": [
        {"name": name, "unique_key": "broad", "hits": 0, "limit": 100, "duration": 3600000}]})
    return int(data["responses"][0]["remaining"])


def test_refused_batch_takes_nothing(node_factory):
    n = node_factory([])
    got = [batch(n, "user-a") for _ in range(3)]
    assert [[r["status"] for r in g] for g in got[:2]] == [["UNDER_LIMIT"] * 2] * 2
    third = got[2]
    assert third[0]["status"] == "OVER_LIMIT"
    assert third[1]["status"] == "OVER_LIMIT"
    assert third[1]["metadata"]["all_or_nothing"] == "given back"
    assert third[1]["remaining"] == "98"  # what is left once the hit is back
    assert broad_left(n) == 98
    # without the key, each item counts on its own (Gubernator's way): the broad limit drains
    for _ in range(3):
        batch(n, "user-b", aon=False, name="plain")
    assert broad_left(n, "plain") == 97


def test_all_or_nothing_across_three_nodes(node_factory):
    ports = [free_port() for _ in range(3)]
    peers = ",".join("127.0.0.1:%d" % p for p in ports)
    nodes = [node_factory(["--workers", "2", "--discovery", "static", "--peers", peers],
                          port=p, start=False) for p in ports]
    for nd in nodes:
        nd.start(wait=False)
    for nd in nodes:
        nd.wait_ready()
    users = ["u%d" % i for i in range(20)]
    admitted = {u: 0 for u in users}
    lock = threading.Lock()

    def run(t):
        for _ in range(5):
            for u in users[t % 2::2]:
                r = batch(nodes[t % 3], u)
                with lock:
                    admitted[u] += all(x["status"] == "UNDER_LIMIT" for x in r)

    threads = [threading.Thread(target=run, args=(t,)) for t in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert admitted == {u: 2 for u in users}, admitted
    import time
    for _ in range(50):  # the last give-backs are fire and forget
        if broad_left(nodes[1]) == 100 - 2 * len(users):
            break
        time.sleep(0.05)
    assert broad_left(nodes[1]) == 100 - 2 * len(users)
