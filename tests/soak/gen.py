# SPDX-License-Identifier: Apache-2.0
"""The soak's open-loop load generator: calls on a fixed seeded schedule (never waiting for an
answer before sending the next), Gubernator GetRateLimits batches over gRPC and over the JSON
gateway, and Levee POST /attempt, spread over the nodes. Every decision is one JSON line in the
record: [key index, sent ms, answered ms, admitted (1, 0, or -1 for an error/timeout), node
index, reset_time ms (0 if none), dialect ("g" gRPC, "j" JSON, "a" /attempt)].

Runs inside the soak's hub network namespace (tests/soak/soak.py starts it with ip netns exec).
    gen.py PLAN.json RECORD.jsonl
PLAN: {"nodes": [...host:port], "keys": [...], "seconds": s, "rate": calls/s, "seed": n,
       "pb_dir": dir with gubernator_pb2}"""
import http.client
import json
import queue
import random
import sys
import threading
import time

TIMEOUT = 2.0


def main():
    plan = json.load(open(sys.argv[1]))
    out = open(sys.argv[2], "w")
    sys.path.insert(0, plan["pb_dir"])
    import grpc
    import gubernator_pb2 as g

    nodes, keys = plan["nodes"], plan["keys"]
    rng = random.Random(plan["seed"])
    gub = [i for i, k in enumerate(keys) if k["alg"] != "levee" and not k.get("hot")]
    hot = [i for i, k in enumerate(keys) if k.get("hot")]
    lev = [i for i, k in enumerate(keys) if k["alg"] == "levee"]
    lock = threading.Lock()
    buf = []

    def record(rows):
        with lock:
            buf.extend(rows)

    def flush():
        with lock:
            rows = buf[:]
            del buf[:]
        for r in rows:
            out.write(json.dumps(r, separators=(",", ":")) + "\n")
        out.flush()

    chans = [grpc.insecure_channel(n) for n in nodes]
    grpc_get = [c.unary_unary("/pb.gubernator.V1/GetRateLimits",
                              request_serializer=g.GetRateLimitsReq.SerializeToString,
                              response_deserializer=g.GetRateLimitsResp.FromString)
                for c in chans]

    def item_dict(k):
        d = {"name": k["name"], "unique_key": k["key"], "hits": 1, "limit": k["limit"],
             "duration": k["duration"], "algorithm": 1 if k["alg"] == "lb" else 0}
        if k["alg"] == "tbg":
            d["behavior"] = "GLOBAL"
        return d

    def grpc_call(ni, idx, sent):
        req = g.GetRateLimitsReq()
        for i in idx:
            k = keys[i]
            r = req.requests.add(name=k["name"], unique_key=k["key"], hits=1, limit=k["limit"],
                                 duration=k["duration"], algorithm=1 if k["alg"] == "lb" else 0)
            if k["alg"] == "tbg":
                r.behavior = g.GLOBAL
        fut = grpc_get[ni].future(req, timeout=TIMEOUT)

        def done(f):
            ans = time.time() * 1000
            try:
                resp = f.result()
                rows = []
                for i, r in zip(idx, resp.responses):
                    adm = -1 if r.error else (1 if r.status == g.UNDER_LIMIT else 0)
                    rows.append([i, sent, ans, adm, ni, r.reset_time, "g"])
            except Exception:  # noqa: BLE001  (any failure is an unanswered call)
                rows = [[i, sent, ans, -1, ni, 0, "g"] for i in idx]
            record(rows)
        fut.add_done_callback(done)

    tls = threading.local()

    def conn(ni):
        cs = getattr(tls, "conns", None)
        if cs is None:
            cs = tls.conns = {}
        c = cs.get(ni)
        if c is None:
            host, port = nodes[ni].rsplit(":", 1)
            c = cs[ni] = http.client.HTTPConnection(host, int(port), timeout=TIMEOUT)
        return c

    def drop_conn(ni):
        c = tls.conns.pop(ni, None)
        if c:
            c.close()

    def json_call(ni, idx, sent):
        body = json.dumps({"requests": [item_dict(keys[i]) for i in idx]})
        try:
            c = conn(ni)
            c.request("POST", "/v1/GetRateLimits", body=body,
                      headers={"Content-Type": "application/json"})
            r = c.getresponse()
            data = r.read()
            ans = time.time() * 1000
            if r.status != 200:
                raise OSError("status %d" % r.status)
            rows = []
            for i, x in zip(idx, json.loads(data)["responses"]):
                adm = -1 if x.get("error") else (1 if x.get("status") == "UNDER_LIMIT" else 0)
                rows.append([i, sent, ans, adm, ni, int(x.get("reset_time") or 0), "j"])
        except Exception:  # noqa: BLE001
            drop_conn(ni)
            ans = time.time() * 1000
            rows = [[i, sent, ans, -1, ni, 0, "j"] for i in idx]
        record(rows)

    def attempt_call(ni, i, sent):
        try:
            c = conn(ni)
            c.request("POST", "/attempt", body=b"", headers={"X-Resource": keys[i]["name"]})
            r = c.getresponse()
            r.read()
            ans = time.time() * 1000
            adm = 1 if r.status == 200 else (0 if r.status == 429 else -1)
        except Exception:  # noqa: BLE001
            drop_conn(ni)
            ans = time.time() * 1000
            adm = -1
        record([[i, sent, ans, adm, ni, 0, "a"]])

    work = queue.Queue()

    def worker():
        while True:
            job = work.get()
            if job is None:
                return
            fn, ni, arg = job
            fn(ni, arg, time.time() * 1000)

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(plan.get("threads", 24))]
    for t in threads:
        t.start()

    period = 1.0 / plan["rate"]
    start = time.time()
    end = start + plan["seconds"]
    nxt = start
    last_flush = start
    while True:
        now = time.time()
        if now >= end:
            break
        if nxt > now:
            time.sleep(min(nxt - now, 0.05))
            continue
        nxt += period
        u = rng.random()
        if u < 0.25 and lev:
            i = rng.choice(lev)
            group = keys[i]["group"]
            work.put((attempt_call, group[rng.randrange(len(group))], i))
        else:
            idx = rng.sample(gub, rng.randint(1, 4))
            if hot and rng.random() < 0.45:
                idx.append(rng.choice(hot))
            ni = rng.randrange(len(nodes))
            if u < 0.625:
                grpc_call(ni, idx, time.time() * 1000)
            else:
                work.put((json_call, ni, idx))
        if now - last_flush > 1.0:
            flush()
            last_flush = now
    for _ in threads:
        work.put(None)
    for t in threads:
        t.join(TIMEOUT * 3)
    time.sleep(TIMEOUT + 0.5)  # gRPC answers still due
    flush()
    out.close()
    for c in chans:
        c.close()


if __name__ == "__main__":
    main()
