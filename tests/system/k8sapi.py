# SPDX-License-Identifier: Apache-2.0
"""A test stand-in for the Kubernetes API server, for tests/system/test_k8s.py: it serves the
EndpointSlices of one namespace over HTTPS (a certificate from a CA the test makes with the
`openssl` command), checks a bearer token, and follows the published list/watch protocol as far
as sluice's client uses it:

  GET /apis/discovery.k8s.io/v1/namespaces/<ns>/endpointslices?labelSelector=kubernetes.io/service-name=<svc>
      a list: {"kind": "EndpointSliceList", "metadata": {"resourceVersion": ...}, "items": [...]}
  ... &watch=1&resourceVersion=<rv>&allowWatchBookmarks=true&timeoutSeconds=<s>
      a chunked stream of one JSON event per line: ADDED/MODIFIED/DELETED with the object,
      BOOKMARK with only metadata.resourceVersion, and ERROR with a Status of code 410 when <rv> is
      older than the oldest event kept (as after an etcd compaction).

The test drives it: set_slice()/delete_slice() make events, expire() sends 410 on every open
watch and forgets the history, drop() cuts every open watch without ending the chunked body,
and `token` may change at any time (rotation). It is not Kubernetes: one namespace's slices, no
field selectors, no pagination, no other resources.
"""
import json
import ssl
import subprocess
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def make_tls(d):
    """A CA and a server certificate for 127.0.0.1 in directory d; returns (ca, cert, key)."""
    def run(*args):
        subprocess.run(["openssl"] + list(args), cwd=d, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
        "-days", "2", "-subj", "/CN=k8s test CA")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "api.key", "-out", "api.csr",
        "-subj", "/CN=kubernetes")
    with open(d + "/ext.cnf", "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:kubernetes.default.svc\n")
    run("x509", "-req", "-in", "api.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "api.pem", "-days", "2", "-extfile", "ext.cnf")
    return d + "/ca.pem", d + "/api.pem", d + "/api.key"


class K8sAPI:
    def __init__(self, cert, key, token, namespace="default", bookmark_every=0.5):
        self.token = token
        self.namespace = namespace
        self.bookmark_every = bookmark_every
        self.cv = threading.Condition()
        self.rv = 100
        self.slices = {}      # name -> slice object
        self.events = []      # (rv, event dict)
        self.oldest = 100     # a watch from an older resourceVersion gets 410
        self.generation = 0   # bumped by drop()/expire(): open watches act on it
        self.action = None    # "drop" or "expire"
        self.requests = []    # (kind, query dict, status)
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                api._handle(self)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.url = "https://127.0.0.1:%d" % self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        with self.cv:
            self.action = "drop"
            self.generation += 1
            self.cv.notify_all()
        self.httpd.shutdown()
        self.httpd.server_close()

    # ---- what the test does ----

    def _event(self, typ, obj):
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.events.append((self.rv, {"type": typ, "object": obj}))
        self.cv.notify_all()

    def set_slice(self, name, service, port, endpoints):
        """endpoints: [(ip, ready, terminating)]. Makes an ADDED or MODIFIED event."""
        obj = {
            "kind": "EndpointSlice", "apiVersion": "discovery.k8s.io/v1",
            "metadata": {"name": name, "namespace": self.namespace,
                         "labels": {"kubernetes.io/service-name": service}},
            "addressType": "IPv4",
            "ports": [{"name": "grpc", "port": port, "protocol": "TCP"}],
            "endpoints": [{"addresses": [ip],
                           "conditions": {"ready": ready, "serving": ready or term,
                                          "terminating": term}}
                          for ip, ready, term in endpoints],
        }
        with self.cv:
            typ = "MODIFIED" if name in self.slices else "ADDED"
            self.slices[name] = obj
            self._event(typ, json.loads(json.dumps(obj)))

    def delete_slice(self, name):
        with self.cv:
            obj = self.slices.pop(name)
            self._event("DELETED", json.loads(json.dumps(obj)))

    def drop(self):
        """Cut every open watch (no final chunk): the clients must resume."""
        with self.cv:
            self.action = "drop"
            self.generation += 1
            self.cv.notify_all()

    def expire(self):
        """Forget the history (a compaction) and send 410 Gone on every open watch."""
        with self.cv:
            self.oldest = self.rv
            self.events = []
            self.action = "expire"
            self.generation += 1
            self.cv.notify_all()

    def count(self, kind, status=None):
        with self.cv:
            return sum(1 for k, _, s in self.requests if k == kind and (status is None or s == status))

    def watches_from(self):
        with self.cv:
            return [q.get("resourceVersion", [""])[0] for k, q, _ in self.requests if k == "watch"]

    # ---- the protocol ----

    def _reply(self, h, status, body):
        data = json.dumps(body).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    def _status(self, code, reason, msg):
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": msg, "reason": reason, "code": code}

    def _handle(self, h):
        u = urllib.parse.urlsplit(h.path)
        q = urllib.parse.parse_qs(u.query)
        watch = q.get("watch", [""])[0] in ("1", "true")
        kind = "watch" if watch else "list"
        prefix = "/apis/discovery.k8s.io/v1/namespaces/%s/endpointslices" % self.namespace
        auth = h.headers.get("Authorization", "")
        with self.cv:
            ok = auth == "Bearer " + self.token
        if not ok:
            with self.cv:
                self.requests.append((kind, q, 401))
            return self._reply(h, 401, self._status(401, "Unauthorized", "Unauthorized"))
        if u.path != prefix:
            with self.cv:
                self.requests.append((kind, q, 404))
            return self._reply(h, 404, self._status(404, "NotFound", "not served here"))
        sel = q.get("labelSelector", [""])[0]
        service = sel.split("=", 1)[1] if sel.startswith("kubernetes.io/service-name=") else None
        if not watch:
            with self.cv:
                self.requests.append((kind, q, 200))
                items = [s for s in self.slices.values()
                         if s["metadata"]["labels"]["kubernetes.io/service-name"] == service]
                body = {"kind": "EndpointSliceList", "apiVersion": "discovery.k8s.io/v1",
                        "metadata": {"resourceVersion": str(self.rv)},
                        "items": json.loads(json.dumps(items))}
            return self._reply(h, 200, body)
        self._watch(h, q, service)

    def _watch(self, h, q, service):
        try:
            since = int(q.get("resourceVersion", ["0"])[0] or "0")
        except ValueError:
            since = 0
        timeout = float(q.get("timeoutSeconds", ["300"])[0])
        bookmarks = q.get("allowWatchBookmarks", [""])[0] == "true"
        with self.cv:
            self.requests.append(("watch", q, 200))
            gen = self.generation
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()

        def chunk(obj):
            line = (json.dumps(obj) + "\n").encode()
            h.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
            h.wfile.flush()

        end = time.time() + timeout
        next_bookmark = time.time() + self.bookmark_every
        try:
            while True:
                with self.cv:
                    if gen != self.generation:
                        action = self.action
                        break
                    if since < self.oldest:
                        action = "expire"
                        break
                    out = [e for rv, e in self.events if rv > since
                           and e["object"]["metadata"]["labels"]["kubernetes.io/service-name"] == service]
                    if out:
                        since = self.rv
                    elif time.time() >= next_bookmark and bookmarks:
                        out = [{"type": "BOOKMARK", "object": {
                            "kind": "EndpointSlice", "apiVersion": "discovery.k8s.io/v1",
                            "metadata": {"resourceVersion": str(self.rv)}}}]
                        since = self.rv
                        next_bookmark = time.time() + self.bookmark_every
                    elif time.time() >= end:
                        action = "end"
                        break
                    else:
                        self.cv.wait(0.05)
                for e in out:
                    chunk(e)
            if action == "expire":
                chunk({"type": "ERROR", "object": self._status(
                    410, "Expired", "too old resource version: %d (%d)" % (since, self.oldest))})
            if action in ("expire", "end"):
                h.wfile.write(b"0\r\n\r\n")
                h.wfile.flush()
            else:
                # dropped: no last chunk, the connection just goes
                h.close_connection = True
                try:
                    h.connection.shutdown(2)
                except OSError:
                    pass
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
            pass
