# SPDX-License-Identifier: Apache-2.0
"""sluiced speaks Gubernator v2: gRPC and the HTTP/JSON gateway on one port, the same answers."""
import json
import os
import signal
import socket
import subprocess
import threading
import time

import grpc
import pytest

from conftest import SLUICED, free_port, http, needs


def stubs(pb, addr):
    g, _ = pb
    ch = grpc.insecure_channel(addr)
    get = ch.unary_unary("/pb.gubernator.V1/GetRateLimits",
                         request_serializer=g.GetRateLimitsReq.SerializeToString,
                         response_deserializer=g.GetRateLimitsResp.FromString)
    health = ch.unary_unary("/pb.gubernator.V1/HealthCheck",
                            request_serializer=g.HealthCheckReq.SerializeToString,
                            response_deserializer=g.HealthCheckResp.FromString)
    live = ch.unary_unary("/pb.gubernator.V1/LiveCheck",
                          request_serializer=g.LiveCheckReq.SerializeToString,
                          response_deserializer=g.LiveCheckResp.FromString)
    return ch, get, health, live


def item(g, **kw):
    base = dict(name="test", unique_key="k", hits=1, limit=10, duration=60000)
    base.update(kw)
    return g.RateLimitReq(**base)


def post_json(node, body):
    st, hdrs, data = http("POST", "http://%s/v1/GetRateLimits" % node.addr,
                          body if isinstance(body, (str, bytes)) else json.dumps(body),
                          {"Content-Type": "application/json"})
    return st, hdrs, json.loads(data) if data else None


def test_token_bucket_over_grpc(node, pb):
    g, _ = pb
    ch, get, _, _ = stubs(pb, node.addr)
    rems = []
    for _ in range(3):
        r = get(g.GetRateLimitsReq(requests=[item(g, unique_key="tb", limit=2)])).responses[0]
        rems.append((r.status, r.remaining, r.limit))
    assert rems == [(g.UNDER_LIMIT, 1, 2), (g.UNDER_LIMIT, 0, 2), (g.OVER_LIMIT, 0, 2)]
    # reset_time is epoch ms about one duration ahead
    r = get(g.GetRateLimitsReq(requests=[item(g, unique_key="tb", limit=2, hits=0)])).responses[0]
    now = time.time() * 1000
    assert now < r.reset_time <= now + 60000 + 1000
    ch.close()


def test_leaky_bucket_and_peek(node, pb):
    g, _ = pb
    ch, get, _, _ = stubs(pb, node.addr)
    req = item(g, unique_key="lb", limit=5, duration=5000, algorithm=g.LEAKY_BUCKET)
    r = get(g.GetRateLimitsReq(requests=[req])).responses[0]
    assert (r.status, r.remaining, r.limit) == (g.UNDER_LIMIT, 4, 5)
    peek = item(g, unique_key="lb", limit=5, duration=5000, algorithm=g.LEAKY_BUCKET, hits=0)
    r = get(g.GetRateLimitsReq(requests=[peek])).responses[0]
    assert r.remaining == 4 and r.status == g.UNDER_LIMIT
    ch.close()


def test_responses_in_request_order_and_per_item_errors(node, pb):
    g, _ = pb
    ch, get, _, _ = stubs(pb, node.addr)
    reqs = [item(g, unique_key="o%d" % i, limit=i + 1) for i in range(5)]
    reqs.insert(2, item(g, unique_key=""))
    reqs.insert(4, item(g, name=""))
    resp = get(g.GetRateLimitsReq(requests=reqs)).responses
    assert len(resp) == 7
    assert resp[2].error == "field 'unique_key' cannot be empty"
    assert resp[4].error == "field 'namespace' cannot be empty"
    limits = [r.limit for i, r in enumerate(resp) if i not in (2, 4)]
    assert limits == [1, 2, 3, 4, 5]
    ch.close()


def test_batch_of_1000_and_1001(node, pb):
    g, _ = pb
    ch, get, _, _ = stubs(pb, node.addr)
    reqs = [item(g, unique_key="b%d" % i) for i in range(1000)]
    resp = get(g.GetRateLimitsReq(requests=reqs)).responses
    assert len(resp) == 1000 and all(r.remaining == 9 for r in resp)
    reqs.append(item(g, unique_key="one-too-many"))
    with pytest.raises(grpc.RpcError) as e:
        get(g.GetRateLimitsReq(requests=reqs))
    assert e.value.code() == grpc.StatusCode.OUT_OF_RANGE
    assert "max size is '1000'" in e.value.details()
    # over HTTP the same is a 400 with a JSON error
    body = {"requests": [{"name": "n", "unique_key": "h%d" % i, "hits": 1, "limit": 5,
                          "duration": 1000} for i in range(1001)]}
    st, _, data = post_json(node, body)
    assert st == 400 and data["code"] == 11 and "max size is '1000'" in data["message"]
    body["requests"].pop()
    st, _, data = post_json(node, body)
    assert st == 200 and len(data["responses"]) == 1000
    ch.close()


def test_json_gateway_conventions(node):
    # camelCase input, int64 as string, enum by name; output snake_case, int64 strings, every field
    st, hdrs, data = post_json(node, {"requests": [{"name": "j", "uniqueKey": "x", "hits": "2",
                                                    "limit": "10", "duration": 60000,
                                                    "algorithm": "TOKEN_BUCKET",
                                                    "behavior": "BATCHING"}]})
    assert st == 200 and hdrs["content-type"].startswith("application/json")
    r = data["responses"][0]
    assert set(r) >= {"status", "limit", "remaining", "reset_time", "error", "metadata"}
    assert r["status"] == "UNDER_LIMIT" and r["limit"] == "10" and r["remaining"] == "8"
    assert r["error"] == ""
    # enum by number, int64 as number
    st, _, data = post_json(node, {"requests": [{"name": "j", "unique_key": "y", "hits": 1,
                                                 "limit": 3, "duration": 1000, "algorithm": 1}]})
    assert st == 200 and data["responses"][0]["remaining"] == "2"


def test_grpc_and_json_give_the_same_answers(node, pb):
    g, _ = pb
    ch, get, _, _ = stubs(pb, node.addr)
    for i in range(4):
        if i % 2 == 0:
            r = get(g.GetRateLimitsReq(requests=[item(g, unique_key="same", limit=3)])).responses[0]
            got = (g.Status.Name(r.status), r.remaining)
        else:
            _, _, data = post_json(node, {"requests": [{"name": "test", "unique_key": "same",
                                                        "hits": 1, "limit": 3, "duration": 60000}]})
            r = data["responses"][0]
            got = (r["status"], int(r["remaining"]))
        assert got == (["UNDER_LIMIT", "UNDER_LIMIT", "UNDER_LIMIT", "OVER_LIMIT"][i], max(0, 2 - i))
    ch.close()


def test_health_and_live(node, pb):
    g, _ = pb
    ch, _, health, live = stubs(pb, node.addr)
    h = health(g.HealthCheckReq())
    assert h.status == "healthy" and h.peer_count == 1
    live(g.LiveCheckReq())
    st, _, body = http("GET", "http://%s/v1/HealthCheck" % node.addr)
    d = json.loads(body)
    assert st == 200 and d["status"] == "healthy" and d["peer_count"] == 1
    st, _, body = http("GET", "http://%s/v1/LiveCheck" % node.addr)
    assert st == 200 and json.loads(body) == {}
    ch.close()


@needs("promtool")
def test_metrics_pass_promtool(node, pb, tmp_path):
    g, _ = pb
    ch, get, health, _ = stubs(pb, node.addr)
    get(g.GetRateLimitsReq(requests=[item(g, unique_key="m1")]))
    health(g.HealthCheckReq())
    post_json(node, "{not json")
    st, hdrs, body = http("GET", "http://%s/metrics" % node.addr)
    assert st == 200 and hdrs["content-type"].startswith("text/plain")
    text = body.decode()
    for needle in ['sluice_calls_total{method="GetRateLimits",transport="grpc",code="OK"} 1',
                   'sluice_calls_total{method="GetRateLimits",transport="http",code="INVALID_ARGUMENT"} 1',
                   'sluice_call_duration_seconds_bucket{method="GetRateLimits",transport="grpc",le="+Inf"} 1',
                   'sluice_decisions_total{algorithm="TOKEN_BUCKET",status="UNDER_LIMIT"} 1',
                   'sluice_keys{kind="keys"} 1', "sluice_connections_open",
                   'sluice_keys_removed_total{reason="evicted"} 0']:
        assert needle in text, needle
    p = tmp_path / "metrics.txt"
    p.write_text(text)
    res = subprocess.run(["promtool", "check", "metrics"], stdin=open(p), capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    ch.close()


def raw(node, data, read=True, timeout=3):
    s = socket.create_connection(("127.0.0.1", node.port), timeout=timeout)
    s.sendall(data)
    out = b""
    if read:
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                out += chunk
        except socket.timeout:
            pass
    s.close()
    return out


def test_bad_input_at_every_layer(node, pb):
    g, _ = pb
    # garbage instead of HTTP
    assert raw(node, b"\x00\x01garbage\r\n\r\n").startswith(b"HTTP/1.1 400")
    # malformed request line
    assert raw(node, b"GET /v1/LiveCheck HTTP/9\r\n\r\n").startswith(b"HTTP/1.1 400")
    # oversized header block
    big = b"GET /v1/LiveCheck HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 70000 + b"\r\n\r\n"
    assert raw(node, big).split(b"\r\n")[0] in (b"HTTP/1.1 431 Request Header Fields Too Large",)
    # oversized body (over 1 MiB)
    st, _, _ = http("POST", "http://%s/v1/GetRateLimits" % node.addr, b"x" * (2 << 20),
                    {"Content-Type": "application/json"})
    assert st == 413
    # bad JSON, wrong types
    st, _, data = post_json(node, "{not json")
    assert st == 400 and data["code"] == 3
    st, _, data = post_json(node, {"requests": [{"name": 5}]})
    assert st == 400 and data["message"]
    st, _, data = post_json(node, {"requests": "no"})
    assert st == 400
    # unknown route and wrong method
    assert http("GET", "http://%s/nope" % node.addr)[0] == 404
    assert http("GET", "http://%s/v1/GetRateLimits" % node.addr)[0] == 405
    # HTTP/2: a broken preface / garbage after the preface closes only that connection
    out = raw(node, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\xff" * 64)
    assert b"HTTP/1.1" not in out
    # gRPC: not protobuf, bad framing, unknown method
    ch = grpc.insecure_channel(node.addr)
    bad = ch.unary_unary("/pb.gubernator.V1/GetRateLimits", request_serializer=lambda x: x,
                         response_deserializer=lambda x: x)
    with pytest.raises(grpc.RpcError) as e:
        bad(b"\xff\xff\xff\xff\x0f")
    assert e.value.code() in (grpc.StatusCode.INTERNAL, grpc.StatusCode.INVALID_ARGUMENT)
    nope = ch.unary_unary("/pb.gubernator.V1/Nope", request_serializer=lambda x: x,
                          response_deserializer=lambda x: x)
    with pytest.raises(grpc.RpcError) as e:
        nope(b"")
    assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED
    # extreme integers give per-item answers, never a crash
    _, get, _, _ = stubs(pb, node.addr)
    I64 = 2 ** 63 - 1
    reqs = [item(g, unique_key="x%d" % i, hits=h, limit=l, duration=d)
            for i, (h, l, d) in enumerate([(I64, I64, I64), (-I64 - 1, -1, -1), (1, 0, 0),
                                           (-5, 10, 1000), (1, I64, 1), (I64, 1, I64)])]
    resp = get(g.GetRateLimitsReq(requests=reqs)).responses
    assert len(resp) == len(reqs)
    ch.close()
    # after all of that the node still answers everyone
    st, _, data = post_json(node, {"requests": [{"name": "n", "unique_key": "after", "hits": 1,
                                                 "limit": 1, "duration": 1000}]})
    assert st == 200 and data["responses"][0]["status"] == "UNDER_LIMIT"
    st, _, body = http("GET", "http://%s/metrics" % node.addr)
    assert "sluice_protocol_errors_total" in body.decode()
    errs = [l for l in body.decode().splitlines() if l.startswith("sluice_protocol_errors_total ")]
    assert errs and float(errs[0].split()[1]) >= 3


def test_bad_client_does_not_disturb_others(node, pb):
    g, _ = pb
    stop = threading.Event()

    def slowloris():
        socks = []
        while not stop.is_set() and len(socks) < 50:
            s = socket.create_connection(("127.0.0.1", node.port))
            s.sendall(b"POST /v1/GetRateLimits HTTP/1.1\r\nContent-Length: 100000\r\n\r\nxx")
            socks.append(s)
        stop.wait(5)
        for s in socks:
            s.close()

    t = threading.Thread(target=slowloris)
    t.start()
    try:
        ch, get, _, _ = stubs(pb, node.addr)
        t0 = time.time()
        for i in range(50):
            r = get(g.GetRateLimitsReq(requests=[item(g, unique_key="good%d" % i)]), timeout=2)
            assert r.responses[0].remaining == 9
        assert time.time() - t0 < 5
        ch.close()
    finally:
        stop.set()
        t.join()


def test_max_conns(node_factory):
    n = node_factory(["--workers", "1", "--max-conns", "5"])
    time.sleep(0.3)  # let the readiness probe's connection close
    socks = []
    for _ in range(5):  # five keep-alive connections, each proven served
        s = socket.create_connection(("127.0.0.1", n.port), timeout=2)
        s.sendall(b"GET /v1/LiveCheck HTTP/1.1\r\nHost: x\r\n\r\n")
        assert s.recv(4096).startswith(b"HTTP/1.1 200")
        socks.append(s)
    extra = socket.create_connection(("127.0.0.1", n.port), timeout=2)
    extra.sendall(b"GET /v1/LiveCheck HTTP/1.1\r\nHost: x\r\n\r\n")
    try:
        got = extra.recv(100)
    except (ConnectionResetError, socket.timeout):
        got = b""
    assert got == b""  # refused: closed without an answer
    for s in socks:
        s.close()
    time.sleep(0.3)
    assert http("GET", "http://%s/v1/LiveCheck" % n.addr)[0] == 200
    st, _, body = http("GET", "http://%s/metrics" % n.addr)
    assert 'sluice_connections_total{event="refused"} 1' in body.decode()


def test_idle_connections_are_closed(node_factory):
    n = node_factory(["--workers", "1", "--idle-timeout", "300ms", "--read-timeout", "500ms"])
    # a keep-alive connection that went quiet after an answer
    s = socket.create_connection(("127.0.0.1", n.port), timeout=5)
    s.sendall(b"GET /v1/LiveCheck HTTP/1.1\r\nHost: x\r\n\r\n")
    assert s.recv(4096).startswith(b"HTTP/1.1 200")
    t0 = time.time()
    assert s.recv(10) == b""
    assert time.time() - t0 < 3
    # a connection that never sends a whole request
    s = socket.create_connection(("127.0.0.1", n.port), timeout=5)
    s.sendall(b"GET /v1/Li")
    t0 = time.time()
    while s.recv(4096):
        pass
    assert time.time() - t0 < 3


def test_config_precedence_file_env_flag(tmp_path, node_factory):
    port_file, port_env, port_flag = free_port(), free_port(), free_port()
    cfg = tmp_path / "sluice.yaml"
    cfg.write_text("listen-addr: 127.0.0.1:%d\nworkers: 1\ngc-max-keys: 1000\n" % port_file)
    run = {"RUNTIME_DIRECTORY": str(tmp_path)}  # the admin socket's directory, as args are replaced
    # file only
    n = node_factory(["--config", str(cfg)], env=run, port=port_file, start=False)
    n.args = ["--config", str(cfg)]
    n.start()
    assert http("GET", "http://127.0.0.1:%d/v1/LiveCheck" % port_file)[0] == 200
    n.stop()
    # env beats file
    n = node_factory([], env=dict(run, SLUICE_LISTEN_ADDR="127.0.0.1:%d" % port_env), port=port_env,
                     start=False)
    n.args = ["--config", str(cfg)]
    n.start()
    assert http("GET", "http://127.0.0.1:%d/v1/LiveCheck" % port_env)[0] == 200
    n.stop()
    # flag beats env
    n = node_factory([], env=dict(run, SLUICE_LISTEN_ADDR="127.0.0.1:%d" % port_env), port=port_flag,
                     start=False)
    n.args = ["--config", str(cfg), "--listen-addr", "127.0.0.1:%d" % port_flag]
    n.start()
    assert http("GET", "http://127.0.0.1:%d/v1/LiveCheck" % port_flag)[0] == 200


def test_help_documents_every_option():
    out = subprocess.run([SLUICED, "--help"], capture_output=True, text=True)
    assert out.returncode == 0
    for opt in ["--listen-addr", "--workers", "--config", "verbose", "--max-conns",
                "--max-body-bytes", "--idle-timeout", "--gc-max-keys", "--shutdown-timeout",
                "SLUICE_LISTEN_ADDR"]:
        assert opt in out.stdout, opt


def test_bad_config_is_a_clear_error(tmp_path):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("listen-addr: 127.0.0.1:1\nno-such-option: 3\n")
    out = subprocess.run([SLUICED, "--config", str(cfg)], capture_output=True, text=True, timeout=10)
    assert out.returncode != 0 and "no-such-option" in out.stderr


def test_graceful_shutdown_under_load(node_factory, pb):
    g, _ = pb
    n = node_factory(["--workers", "2"])
    errors, done = [], []
    stop = threading.Event()

    def load():
        ch = grpc.insecure_channel(n.addr)
        get = ch.unary_unary("/pb.gubernator.V1/GetRateLimits",
                             request_serializer=g.GetRateLimitsReq.SerializeToString,
                             response_deserializer=g.GetRateLimitsResp.FromString)
        req = g.GetRateLimitsReq(requests=[item(g, unique_key="load%d" % i) for i in range(100)])
        while not stop.is_set():
            try:
                get(req, timeout=5)
                done.append(1)
            except grpc.RpcError as e:
                # after the drain starts, new calls are refused (UNAVAILABLE); nothing else
                if e.code() != grpc.StatusCode.UNAVAILABLE:
                    errors.append(e.code())
                break
        ch.close()

    threads = [threading.Thread(target=load) for _ in range(4)]
    for t in threads:
        t.start()
    time.sleep(1.0)
    assert len(done) > 10
    t0 = time.time()
    n.signal(signal.SIGTERM)
    rc = n.proc.wait(timeout=10)
    elapsed = time.time() - t0
    stop.set()
    for t in threads:
        t.join()
    assert rc == 0
    assert elapsed < 5
    assert not errors, errors
    assert "shutting down" in n.logs()
