# SPDX-License-Identifier: Apache-2.0
"""gRPC as the spec and grpc-go behave (issue 26, items 4 and 5), against a real sluiced with
python3-grpcio and curl: gzip and deflate channels, an unsupported grpc-encoding refused with
UNIMPLEMENTED and grpc-accept-encoding, a decompression bomb refused, grpc-timeout honoured (an
expired call is not decided), unknown methods answered at their headers, grpc.health.v1 Check and
Watch following the HealthCheck verdict, server reflection (v1 and v1alpha) listing the services
and serving descriptors that python3-protobuf parses. tests/system/js/ does the same with Node's
@grpc/grpc-js."""
import gzip
import json
import os
import queue
import signal
import struct
import subprocess
import threading
import time
import zlib

import grpc
import pytest
from google.protobuf import descriptor_pb2

from conftest import free_port, http, needs, pb_modules
from etcdproc import EtcdProc


def item(g, **kw):
    base = dict(name="api", unique_key="k", hits=1, limit=10, duration=60000)
    base.update(kw)
    return g.RateLimitReq(**base)


def get_rl(ch, g):
    return ch.unary_unary("/pb.gubernator.V1/GetRateLimits",
                          request_serializer=g.GetRateLimitsReq.SerializeToString,
                          response_deserializer=g.GetRateLimitsResp.FromString)


def remaining(ch, g, key):
    r = get_rl(ch, g)(g.GetRateLimitsReq(requests=[item(g, unique_key=key, hits=0)]), timeout=5)
    return r.responses[0].remaining


def frame(msg, compressed=False):
    return struct.pack(">BI", 1 if compressed else 0, len(msg)) + msg


def curl_grpc(addr, path, body, *headers, max_time=10):
    """One gRPC call by curl over h2c: (HTTP headers and trailers as a dict, body bytes)."""
    args = ["curl", "-s", "--http2-prior-knowledge", "-D", "-", "-o", "/dev/stderr",
            "--max-time", str(max_time), "-H", "content-type: application/grpc", "-H", "te: trailers",
            "--data-binary", "@-", "http://%s%s" % (addr, path)]
    for h in headers:
        args[1:1] = ["-H", h]
    p = subprocess.run(args, input=body, capture_output=True, timeout=max_time + 5)
    fields = {}
    for line in p.stdout.decode(errors="replace").splitlines():
        if ":" in line and not line.startswith("HTTP/"):
            k, v = line.split(":", 1)
            fields[k.strip().lower()] = v.strip()
    return fields, p.stderr


@pytest.fixture
def node(node_factory):
    return node_factory(["--standalone", "--workers", "2"])


@pytest.mark.parametrize("comp", [grpc.Compression.Gzip, grpc.Compression.Deflate])
def test_compressed_channel_get_rate_limits(node, comp):
    g, _ = pb_modules()
    with grpc.insecure_channel(node.addr, compression=comp) as ch:
        for i in range(3):
            r = get_rl(ch, g)(g.GetRateLimitsReq(requests=[item(g, unique_key="z%s" % comp)]),
                              timeout=5)
            assert r.responses[0].error == ""
            assert r.responses[0].remaining == 10 - 1 - i
        # a large, compressible batch too
        reqs = [item(g, unique_key="big%d" % i, name="n" * 50) for i in range(500)]
        r = get_rl(ch, g)(g.GetRateLimitsReq(requests=reqs), timeout=5)
        assert len(r.responses) == 500 and all(x.remaining == 9 for x in r.responses)


def test_answers_are_compressed_like_the_request(node):
    g, _ = pb_modules()
    msg = g.GetRateLimitsReq(requests=[item(g, unique_key="c1")]).SerializeToString()
    fields, body = curl_grpc(node.addr, "/pb.gubernator.V1/GetRateLimits",
                             frame(gzip.compress(msg), True), "grpc-encoding: gzip",
                             "grpc-accept-encoding: gzip")
    assert fields.get("grpc-status") == "0", fields
    assert fields.get("grpc-encoding") == "gzip"
    assert "gzip" in fields.get("grpc-accept-encoding", "")
    flag, n = struct.unpack(">BI", body[:5])
    assert flag == 1 and n == len(body) - 5
    r = g.GetRateLimitsResp.FromString(gzip.decompress(body[5:]))
    assert r.responses[0].remaining == 9
    # deflate is the zlib format
    fields, body = curl_grpc(node.addr, "/pb.gubernator.V1/GetRateLimits",
                             frame(zlib.compress(msg), True), "grpc-encoding: deflate",
                             "grpc-accept-encoding: deflate")
    assert fields.get("grpc-status") == "0" and fields.get("grpc-encoding") == "deflate"
    assert g.GetRateLimitsResp.FromString(zlib.decompress(body[5:])).responses[0].remaining == 8
    # a client that does not accept the encoding gets an uncompressed answer
    fields, body = curl_grpc(node.addr, "/pb.gubernator.V1/GetRateLimits",
                             frame(gzip.compress(msg), True), "grpc-encoding: gzip")
    assert fields.get("grpc-status") == "0" and "grpc-encoding" not in fields
    assert body[0] == 0 and g.GetRateLimitsResp.FromString(body[5:]).responses[0].remaining == 7


def test_unsupported_encoding_refused_with_accept_encoding(node):
    g, _ = pb_modules()
    msg = g.GetRateLimitsReq(requests=[item(g, unique_key="snap")]).SerializeToString()
    fields, _ = curl_grpc(node.addr, "/pb.gubernator.V1/GetRateLimits", frame(msg, True),
                          "grpc-encoding: snappy")
    assert fields.get("grpc-status") == "12", fields
    assert fields.get("grpc-accept-encoding") == "identity,deflate,gzip"
    with grpc.insecure_channel(node.addr) as ch:
        assert remaining(ch, g, "snap") == 10  # not decided


def test_decompression_bomb_refused(node):
    g, _ = pb_modules()
    # 64 MiB of zeros inflate from ~64 KiB: past the largest message served (--max-body-bytes)
    bomb = gzip.compress(b"\0" * (64 << 20), 9)
    assert len(bomb) < (1 << 20)
    fields, _ = curl_grpc(node.addr, "/pb.gubernator.V1/GetRateLimits", frame(bomb, True),
                          "grpc-encoding: gzip")
    assert fields.get("grpc-status") == "8", fields  # RESOURCE_EXHAUSTED
    assert "inflates past" in fields.get("grpc-message", "")
    fields, _ = curl_grpc(node.addr, "/pb.gubernator.V1/GetRateLimits", frame(b"not gzip", True),
                          "grpc-encoding: gzip")
    assert fields.get("grpc-status") == "3", fields  # INVALID_ARGUMENT
    with grpc.insecure_channel(node.addr) as ch:  # and the node serves on
        assert remaining(ch, g, "after-bomb") == 10


def test_expired_deadline_is_not_decided(node):
    g, _ = pb_modules()
    msg = g.GetRateLimitsReq(requests=[item(g, unique_key="late")]).SerializeToString()
    for t in ("0m", "0n"):
        # Gubernator's answer: the call OK, every item with the context's error, none decided
        fields, body = curl_grpc(node.addr, "/pb.gubernator.V1/GetRateLimits", frame(msg),
                                 "grpc-timeout: " + t)
        assert fields.get("grpc-status") == "0", fields
        r = g.GetRateLimitsResp.FromString(body[5:]).responses[0]
        assert r.error == "Error while iterating request items: context deadline exceeded"
    fields, _ = curl_grpc(node.addr, "/pb.gubernator.V1/GetRateLimits", frame(msg),
                          "grpc-timeout: soon")
    assert fields.get("grpc-status") == "3", fields
    with grpc.insecure_channel(node.addr) as ch:
        assert remaining(ch, g, "late") == 10  # no hit counted
        # a deadline in the future is decided as usual
        r = get_rl(ch, g)(g.GetRateLimitsReq(requests=[item(g, unique_key="late")]), timeout=2)
        assert r.responses[0].remaining == 9
    st, _, body = http("GET", "http://%s/metrics" % node.addr)
    assert "sluice_deadline_expired_total 2" in body.decode()


def test_unknown_method_answered_at_its_headers(node_factory):
    """The client never half-closes: the answer must come from the headers alone, long before
    --read-timeout, and the connection stays usable."""
    node = node_factory(["--standalone", "--read-timeout", "20s"])
    g, _ = pb_modules()
    stop = threading.Event()

    def never_ending():
        yield b"\0\0\0\0\0"
        stop.wait(30)

    with grpc.insecure_channel(node.addr) as ch:
        for path, code in (("/pb.gubernator.V1/NoSuchMethod", grpc.StatusCode.UNIMPLEMENTED),
                           ("/no.such.Service/Method", grpc.StatusCode.UNIMPLEMENTED),
                           # PeersV1 asks who calls first
                           ("/pb.gubernator.PeersV1/NoSuch", grpc.StatusCode.PERMISSION_DENIED)):
            call = ch.stream_stream(path)
            t0 = time.monotonic()
            with pytest.raises(grpc.RpcError) as e:
                for _ in call(never_ending(), timeout=15):
                    pass
            took = time.monotonic() - t0
            assert e.value.code() == code, e.value
            assert took < 3, took
        stop.set()
        assert remaining(ch, g, "same-conn") == 10


def health_stub(ch):
    # HealthCheckRequest{service=1}, HealthCheckResponse{status=1}: by hand, no generated code
    enc = lambda s: (b"\x0a" + bytes([len(s)]) + s.encode()) if s else b""  # noqa: E731
    dec = lambda b: b[1] if len(b) >= 2 and b[0] == 0x08 else 0  # noqa: E731
    check = ch.unary_unary("/grpc.health.v1.Health/Check", request_serializer=enc,
                           response_deserializer=dec)
    watch = ch.unary_stream("/grpc.health.v1.Health/Watch", request_serializer=enc,
                            response_deserializer=dec)
    return check, watch


SERVING, NOT_SERVING, SERVICE_UNKNOWN = 1, 2, 3


def admin_status(node):
    """GET /v1/admin/status on the node's admin socket."""
    st, _, body = node.admin("GET", "/v1/admin/status")
    assert st == 200, body
    return json.loads(body)


def test_status_document_history_version_config(node):
    """The page's chart starts from the server's recent past; version and configuration shown."""
    g, _ = pb_modules()
    deadline = time.time() + 10
    while not admin_status(node)["history"] and time.time() < deadline:  # sampling has begun
        time.sleep(0.2)
    with grpc.insecure_channel(node.addr) as ch:
        for i in range(5):
            get_rl(ch, g)(g.GetRateLimitsReq(requests=[item(g, unique_key="h%d" % i)]), timeout=5)
    while time.time() < deadline:
        doc = admin_status(node)
        if len(doc["history"]) >= 2 and sum(p["under"] for p in doc["history"]) > 0:
            break
        time.sleep(0.3)
    assert len(doc["history"]) >= 2 and sum(p["under"] for p in doc["history"]) > 0, doc["history"]
    assert all(set(p) == {"t_ms", "under", "over"} for p in doc["history"])
    assert doc["node"]["version"] and doc["node"]["commit"]
    assert doc["config"]["role"] == "limiter" and doc["config"]["store"] == "memory"
    assert doc["health"]["healthy"] is True
    _, _, metrics = http("GET", "http://%s/metrics" % node.addr)
    assert ('sluice_build_info{version="%s",commit="%s"} 1' % (doc["node"]["version"],
                                                                doc["node"]["commit"])
            in metrics.decode())


def test_health_check_and_watch_serving(node):
    with grpc.insecure_channel(node.addr) as ch:
        check, watch = health_stub(ch)
        for svc in ("", "pb.gubernator.V1", "envoy.service.ratelimit.v3.RateLimitService",
                    "grpc.health.v1.Health"):
            assert check(svc, timeout=5) == SERVING, svc
        with pytest.raises(grpc.RpcError) as e:
            check("no.such.Service", timeout=5)
        assert e.value.code() == grpc.StatusCode.NOT_FOUND
        w = watch("", timeout=5)
        assert next(w) == SERVING
        w.cancel()
        w = watch("no.such.Service", timeout=5)
        assert next(w) == SERVICE_UNKNOWN
        w.cancel()


@needs("etcd")
def test_health_follows_the_verdict_and_watch_streams_the_change(node_factory):
    """Quotas from an etcd that is not up yet: HealthCheck, grpc.health.v1 and the status say
    NOT_SERVING / unhealthy alike; once etcd is up and the quotas load, Watch sends SERVING."""
    e = EtcdProc()
    try:
        node = node_factory(["--standalone", "--storage-addrs", e.url,
                             "--storage-prefix", "/grpc-std-%d" % free_port()])
        g, _ = pb_modules()
        with grpc.insecure_channel(node.addr) as ch:
            check, watch = health_stub(ch)
            assert check("", timeout=5) == NOT_SERVING
            assert check("pb.gubernator.V1", timeout=5) == NOT_SERVING
            hc = ch.unary_unary("/pb.gubernator.V1/HealthCheck",
                                request_serializer=g.HealthCheckReq.SerializeToString,
                                response_deserializer=g.HealthCheckResp.FromString)
            with pytest.raises(grpc.RpcError) as err:
                hc(g.HealthCheckReq(), timeout=5)
            assert err.value.code() == grpc.StatusCode.UNAVAILABLE
            # the status document says the same (it said healthy here before)
            st = admin_status(node)
            assert st["health"]["healthy"] is False
            assert "quotas not loaded" in st["health"]["reason"]
            got = queue.Queue()
            w = watch("", timeout=60)
            threading.Thread(target=lambda: [got.put(x) for x in w], daemon=True).start()
            assert got.get(timeout=5) == NOT_SERVING
            e.start()
            assert got.get(timeout=30) == SERVING
            assert check("", timeout=5) == SERVING
            assert hc(g.HealthCheckReq(), timeout=5).status == "healthy"
            assert admin_status(node)["health"]["healthy"] is True
            w.cancel()
    finally:
        e.close()


def reflection(ch, version):
    return ch.stream_stream("/grpc.reflection.%s.ServerReflection/ServerReflectionInfo" % version)


def refl_req(field, value):
    v = value.encode()
    return bytes([field << 3 | 2, len(v)]) + v


def read_fields(b):
    """A message's top-level fields as (number, bytes-or-int) pairs (enough for these answers)."""
    out, i = [], 0
    while i < len(b):
        key, i = varint(b, i)
        f, wt = key >> 3, key & 7
        if wt == 2:
            n, i = varint(b, i)
            out.append((f, b[i:i + n]))
            i += n
        elif wt == 0:
            v, i = varint(b, i)
            out.append((f, v))
        else:
            raise AssertionError("wire type %d" % wt)
    return out


def varint(b, i):
    x = s = 0
    while True:
        c = b[i]
        i += 1
        x |= (c & 0x7f) << s
        s += 7
        if c < 0x80:
            return x, i


@pytest.mark.parametrize("version", ["v1", "v1alpha"])
def test_reflection_lists_services_and_serves_descriptors(node, version):
    reqs = queue.Queue()
    answers = queue.Queue()

    def gen():
        while True:
            r = reqs.get()
            if r is None:
                return
            yield r

    with grpc.insecure_channel(node.addr) as ch:
        call = reflection(ch, version)(gen(), timeout=20)
        threading.Thread(target=lambda: [answers.put(a) for a in call], daemon=True).start()
        # one request at a time, the stream left open, as grpcurl does
        reqs.put(refl_req(7, "*"))
        a = dict(read_fields(answers.get(timeout=5)))
        names = [dict(read_fields(s))[1].decode() for f, s in read_fields(a[6]) if f == 1]
        for want in ("pb.gubernator.V1", "pb.gubernator.PeersV1",
                     "envoy.service.ratelimit.v3.RateLimitService", "grpc.health.v1.Health",
                     "grpc.reflection.v1.ServerReflection",
                     "grpc.reflection.v1alpha.ServerReflection"):
            assert want in names
        reqs.put(refl_req(4, "pb.gubernator.V1"))
        a = dict(read_fields(answers.get(timeout=5)))
        files = [descriptor_pb2.FileDescriptorProto.FromString(fd)
                 for f, fd in read_fields(a[4]) if f == 1]
        assert files[0].name == "gubernator.proto" and files[0].package == "pb.gubernator"
        assert [m.name for m in files[0].service[0].method][:1] == ["GetRateLimits"]
        reqs.put(refl_req(4, "envoy.service.ratelimit.v3.RateLimitService.ShouldRateLimit"))
        a = dict(read_fields(answers.get(timeout=5)))
        names = {descriptor_pb2.FileDescriptorProto.FromString(fd).name
                 for f, fd in read_fields(a[4]) if f == 1}
        assert "envoy/service/ratelimit/v3/rls.proto" in names
        assert "google/protobuf/duration.proto" in names  # its imports come along
        reqs.put(refl_req(3, "grpc/health/v1/health.proto"))
        a = dict(read_fields(answers.get(timeout=5)))
        fd = descriptor_pb2.FileDescriptorProto.FromString(dict(read_fields(a[4]))[1])
        assert fd.service[0].name == "Health"
        reqs.put(refl_req(4, "no.such.Symbol"))
        a = dict(read_fields(answers.get(timeout=5)))
        assert dict(read_fields(a[7]))[1] == 5  # NOT_FOUND
        reqs.put(None)


def test_watch_ends_at_shutdown(node_factory):
    """A Watch does not hold the drain to its grace period: at SIGTERM the watcher hears
    NOT_SERVING and the stream ends UNAVAILABLE, and sluiced stops at once."""
    node = node_factory(["--standalone", "--workers", "1", "--shutdown-timeout", "10s"])
    with grpc.insecure_channel(node.addr) as ch:
        _, watch = health_stub(ch)
        w = watch("", timeout=30)
        assert next(w) == SERVING
        t0 = time.monotonic()
        node.signal(signal.SIGTERM)
        node.proc.wait(15)
        took = time.monotonic() - t0
        assert next(w) == NOT_SERVING
        with pytest.raises(grpc.RpcError) as e:
            next(w)
        assert e.value.code() == grpc.StatusCode.UNAVAILABLE
        assert took < 3, took  # not the 10 s grace
