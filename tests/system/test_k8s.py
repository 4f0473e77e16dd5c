# SPDX-License-Identifier: Apache-2.0
"""Kubernetes discovery (--discovery k8s) end to end: three sluiced nodes on 127.0.0.11-13 (one
port, as pods behind a Service) find each other through the EndpointSlices served by k8sapi.py, a
test stand-in for the Kubernetes API server (HTTPS with its own CA made by `openssl` here, a bearer
token, chunked watch streams with bookmarks, 410 Gone, dropped streams).

Checked: every node lists all three; an endpoint marked not ready leaves every node's list on that
one event (nothing else is sent), a terminating one too, and both come back; after 410 Gone every
node lists again (a change made meanwhile is seen) and no member is lost; after a dropped stream
every node resumes its watch from the resourceVersion it had, as after a watch that ends at its
timeoutSeconds; a rotated token is read again from
its file; a wrong token or an unknown CA gets no peers. docs/deploy/k8s.yaml: its Role allows
get/list/watch on endpointslices only, and its Deployment's arguments start nodes that find each
other (with the in-cluster defaults replaced by the stand-in's address, token and CA).
"""
import os
import shutil
import tempfile
import time

import pytest

import test_cluster as tc
from conftest import needs
from k8sapi import K8sAPI, make_tls

pytestmark = needs("openssl")

TOKEN = "test-token-0123456789abcdef"


@pytest.fixture(scope="module")
def tls():
    d = tempfile.mkdtemp(prefix="sluice-k8s-")
    yield d, make_tls(d)
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def api(tls):
    d, (ca, cert, key) = tls
    a = K8sAPI(cert, key, TOKEN).start()
    tok = os.path.join(d, "token")
    with open(tok, "w") as f:
        f.write(TOKEN + "\n")
    a.token_file, a.ca_file, a.dir = tok, ca, d
    yield a
    a.stop()


def k8s_args(api, token_file=None, ca_file=None):
    return ["--discovery", "k8s", "--k8s-api", api.url, "--k8s-namespace", "default",
            "--k8s-service", "sluice", "--k8s-token-file", token_file or api.token_file,
            "--k8s-ca-file", ca_file or api.ca_file]


def peer_count(addr):
    """The node's peer count, or "out" when the node is not on its own list (unhealthy)."""
    try:
        status, h = tc.health(addr)
    except Exception:  # noqa: BLE001
        return None
    if status == 503 and "not found in the peer list" in h.get("message", ""):
        return "out"
    return h.get("peer_count")


def counts(nodes):
    return [peer_count(n.addr) for n in nodes]


def all_have(nodes, n, timeout=5, out=()):
    """Every node lists n peers, except those in `out`, which know they left."""
    want = ["out" if i in out else n for i in range(len(nodes))]
    return tc.wait_for(lambda: counts(nodes) == want, timeout)


def test_k8s_discovery(node_factory, api):
    port = tc.common_port()
    ips = tc.LOOPBACKS[:3]
    state = {ip: (True, False) for ip in ips}

    def publish():
        api.set_slice("sluice-x7k2p", "sluice", port, [(ip,) + state[ip] for ip in ips])

    publish()
    # another Service's slice in the namespace: not ours
    api.set_slice("other-abcde", "other", port, [(tc.LOOPBACKS[3], True, False)])
    nodes = tc.start_nodes(node_factory, ["%s:%d" % (ip, port) for ip in ips],
                           lambda a: k8s_args(api))
    assert all_have(nodes, 3), counts(nodes)
    owners = {tc.owner_of(n.addr, "k8s-key") for n in nodes}
    assert len(owners) == 1

    # not ready: one MODIFIED event takes it off every node's list
    events = len(api.events)
    state[ips[2]] = (False, False)
    publish()
    assert all_have(nodes, 2, out=(2,)), counts(nodes)
    assert len(api.events) == events + 1
    # terminating (a rolling update) leaves as well; then both come back
    state[ips[1]] = (True, True)
    publish()
    assert all_have(nodes, 1, out=(1, 2)), counts(nodes)
    state[ips[1]] = state[ips[2]] = (True, False)
    publish()
    assert all_have(nodes, 3), counts(nodes)

    # 410 Gone: every node lists again; a change made meanwhile is seen, no member is lost
    lists = api.count("list")
    api.expire()
    state[ips[0]] = (False, False)
    publish()
    assert tc.wait_for(lambda: api.count("list") >= lists + 3, 5), api.count("list")
    assert all_have(nodes, 2, out=(0,)), counts(nodes)
    state[ips[0]] = (True, False)
    publish()
    assert all_have(nodes, 3), counts(nodes)
    for _ in range(10):  # and it stays so
        assert counts(nodes) == [3, 3, 3]
        time.sleep(0.05)

    # a dropped stream: each node resumes its watch from where it was (no new list)
    lists = api.count("list")
    watches = api.count("watch")
    rv = str(api.rv)
    api.drop()
    assert tc.wait_for(lambda: api.count("watch") >= watches + 3, 5)
    assert api.watches_from()[-3:] == [rv] * 3, (rv, api.watches_from()[-3:])
    assert api.count("list") == lists
    state[ips[2]] = (False, False)
    publish()
    assert all_have(nodes, 2, out=(2,)), counts(nodes)

    # the token rotates: the file is read again on the next request
    api.token = "rotated-token-fedcba9876543210"
    with open(api.token_file + ".new", "w") as f:
        f.write(api.token + "\n")
    os.replace(api.token_file + ".new", api.token_file)
    api.drop()
    state[ips[2]] = (True, False)
    publish()
    assert all_have(nodes, 3), counts(nodes)
    for n in nodes:
        assert "k8s: bad" not in n.logs()


def test_k8s_watch_timeout_resumes(node_factory, api):
    """A watch that ends at its timeoutSeconds resumes from its resourceVersion, with no list."""
    port = tc.common_port()
    a = "%s:%d" % (tc.LOOPBACKS[0], port)
    api.set_slice("sluice-solo", "sluice", port, [(tc.LOOPBACKS[0], True, False)])
    (n,) = tc.start_nodes(node_factory, [a], lambda _: k8s_args(api) + ["--k8s-watch-timeout", "1s"])
    assert all_have([n], 1)
    assert tc.wait_for(lambda: api.count("watch") >= 3, 5), api.count("watch")
    assert api.count("list") == 1
    assert api.watches_from()[-1] == str(api.rv)
    assert "watch failed" not in n.logs() and "broke" not in n.logs()
    assert peer_count(a) == 1


def test_k8s_refuses_wrong_token_and_ca(node_factory, api, tls):
    d, _ = tls
    port = tc.common_port()
    api.set_slice("sluice-one", "sluice", port, [(tc.LOOPBACKS[0], True, False),
                                                 (tc.LOOPBACKS[1], True, False)])
    bad = os.path.join(d, "bad-token")
    with open(bad, "w") as f:
        f.write("not-the-token\n")
    # a CA of its own: the server's certificate is not signed by it
    other = tempfile.mkdtemp(prefix="sluice-k8s-ca-", dir=d)
    other_ca, _, _ = make_tls(other)
    a = "%s:%d" % (tc.LOOPBACKS[0], port)
    b = "%s:%d" % (tc.LOOPBACKS[1], port)
    n1, n2 = tc.start_nodes(node_factory, [a, b],
                            lambda addr: k8s_args(api, token_file=bad) if addr == a
                            else k8s_args(api, ca_file=other_ca))
    time.sleep(1.0)
    assert api.count("list", 401) >= 1
    assert api.count("list", 200) == 0  # the one with the wrong CA never got through TLS
    assert "HTTP 401" in n1.logs()
    assert "list failed" in n2.logs() and "HTTP 0" in n2.logs()
    assert peer_count(a) == 1 and peer_count(b) == 1  # no list yet: alone


# ---- docs/deploy/k8s.yaml ---------------------------------------------------------------------

MANIFEST = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "deploy", "k8s.yaml")


def manifest_docs():
    """The manifest's documents as lists of lines (no YAML library: the file is plain)."""
    with open(MANIFEST) as f:
        text = f.read()
    return [d.splitlines() for d in text.split("\n---\n")]


def block_list(lines, key):
    """The items of the YAML block list under `key:` (one scalar per line)."""
    for i, line in enumerate(lines):
        if line.strip() == key + ":":
            ind = len(line) - len(line.lstrip())
            out = []
            for item in lines[i + 1:]:
                s = item.strip()
                if not s.startswith("- ") or len(item) - len(item.lstrip()) < ind:
                    break
                out.append(s[2:].strip())
            return out
    return None


def test_k8s_deploy_manifest(node_factory, api, tmp_path):
    docs = manifest_docs()
    kinds = [next(l.split(":", 1)[1].strip() for l in d if l.startswith("kind:")) for d in docs]
    assert sorted(kinds) == ["Deployment", "Role", "RoleBinding", "Service", "ServiceAccount"]
    # the Role: get/list/watch on endpointslices, nothing else
    role = "\n".join(docs[kinds.index("Role")])
    assert role.count("- apiGroups:") == 1
    assert 'resources: ["endpointslices"]' in role and 'verbs: ["get", "list", "watch"]' in role
    assert 'apiGroups: ["discovery.k8s.io"]' in role
    # the Deployment's arguments start a node that finds its peers through the Service's slices
    args = block_list(docs[kinds.index("Deployment")], "args")
    assert "--discovery" in args and args[args.index("--discovery") + 1] == "k8s"
    service = args[args.index("--k8s-service") + 1]
    port = tc.common_port()
    ips = tc.LOOPBACKS[:2]
    api.set_slice(service + "-abcde", service, port, [(ip, True, False) for ip in ips])
    sub = {"0.0.0.0:1051": None, "$(POD_IP):1051": None}
    secret = str(tmp_path / "peer-secret")  # the manifest's Secret, mounted
    with open(secret, "w") as f:
        f.write("deploy-example-secret-0123456789\n")
    os.chmod(secret, 0o600)

    def node_args(addr):
        run = [addr if a in sub else secret if a == "/etc/sluice-peer/secret" else a
               for a in args]
        # in a pod these come from the service account and KUBERNETES_SERVICE_*
        return run + ["--k8s-api", api.url, "--k8s-namespace", "default",
                      "--k8s-token-file", api.token_file, "--k8s-ca-file", api.ca_file]

    nodes = []
    for ip in ips:
        a = "%s:%d" % (ip, port)
        n = node_factory(["--workers", "1"] + node_args(a), port=port, start=False)
        n.args = n.args[2:]  # the manifest's --listen-addr, not the factory's
        n.addr = a
        nodes.append(n)
    for n in nodes:
        n.start()
    assert all_have(nodes, 2), counts(nodes)
