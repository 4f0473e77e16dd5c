# SPDX-License-Identifier: Apache-2.0
"""Issue 25's admin-plane attacks against a real sluiced (docs/operations.md "Admin plane"), each
as the attacker would run it on the same machine:

- a web page the operator opens sends a browser-style "simple" POST (Content-Type text/plain,
  Origin http://evil.example, no token) to /v1/admin/killswitch, on every TCP port the node
  listens on and on the old default admin port (the client port + 1): refused, and a key over its
  limit stays over it. On a TCP admin listener (--admin-addr with its token) the same POST, and
  one carrying the token, are refused too;
- DNS rebinding: GET /v1/admin/status with Host: evil.example:<port> (a name the attacker points
  at 127.0.0.1) is refused, on reads too;
- a squatted admin port: the default configuration opens no TCP admin port at all (so nothing
  can move to a random one), an explicit --admin-addr that is taken makes sluiced exit 2 naming
  it, and no process of the same user can join the admin port with SO_REUSEPORT;
- the admin socket is the owner's alone (mode 0600) in the runtime directory;
- a world-readable admin token file is refused at start, with the fix in the message.

The nodes get their default admin socket through $RUNTIME_DIRECTORY (a temporary directory), as
systemd's RuntimeDirectory= gives it, so the tests run the configuration an operator gets."""
import contextlib
import json
import os
import socket
import stat
import subprocess
import tempfile

import chaoslib as cl

ITEM = {"name": "lim", "unique_key": "k", "hits": 1, "limit": 1, "duration": 60000}
TOKEN = "admin-trust-token-0123456789abcdef"
EVIL = {"Content-Type": "text/plain", "Origin": "http://evil.example"}
SWITCH_ALL = json.dumps({"name": "*", "on": True})


def runtime_env():
    return {"RUNTIME_DIRECTORY": tempfile.mkdtemp(prefix="sluice-run-")}


def token_file(mode=0o600):
    d = tempfile.mkdtemp(prefix="sluice-tok-")
    path = os.path.join(d, "admin.token")
    with open(path, "w") as f:
        f.write(TOKEN + "\n")
    os.chmod(path, mode)
    return path


def statuses(node, n=1):
    status, _, body = cl.http("POST", "http://%s/v1/GetRateLimits" % node.addr,
                              json.dumps({"requests": [ITEM] * n}))
    assert status == 200, body
    return [r["status"] for r in json.loads(body)["responses"]]


def listening_ports(pid):
    """The TCP ports the process listens on (from /proc: its socket inodes in LISTEN state)."""
    inodes = set()
    fd_dir = "/proc/%d/fd" % pid
    for fd in os.listdir(fd_dir):
        try:
            link = os.readlink(os.path.join(fd_dir, fd))
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if cols[3] == "0A" and cols[9] in inodes:
                ports.add(int(cols[1].rsplit(":", 1)[1], 16))
    return ports


def raw_http(port, request, timeout=3):
    """One request as raw bytes (so Host is exactly what an attacker's browser sends): the
    status code, or None when nothing listens there."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(request)
            data = b""
            while b"\r\n" not in data:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
    except OSError:
        return None
    parts = data.split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None


def simple_post(port, host=None):
    body = SWITCH_ALL.encode()
    return raw_http(port, b"POST /v1/admin/killswitch HTTP/1.1\r\nHost: %s\r\n"
                    b"Origin: http://evil.example\r\nContent-Type: text/plain\r\n"
                    b"Content-Length: %d\r\n\r\n%s"
                    % ((host or "127.0.0.1:%d" % port).encode(), len(body), body))


def rebinding_read(port):
    return raw_http(port, b"GET /v1/admin/status HTTP/1.1\r\nHost: evil.example:%d\r\n\r\n"
                    % port)


def test_browser_simple_post_cannot_switch_limits_off(node_factory):
    node = node_factory(["--workers", "1"], env=runtime_env())
    assert statuses(node, 2) == ["UNDER_LIMIT", "OVER_LIMIT"]
    # every TCP port the node listens on, and the old default admin port (client port + 1)
    ports = listening_ports(node.proc.pid) | {node.port + 1}
    assert node.port in ports
    for p in sorted(ports):
        st = simple_post(p)
        assert st in (None, 403, 404), "port %d admitted the page's POST: %s" % (p, st)
    assert statuses(node) == ["OVER_LIMIT"]  # the limit still holds
    # the operator's own call on the socket works
    assert node.admin("POST", "/v1/admin/killswitch", SWITCH_ALL)[0] == 200
    assert statuses(node) == ["UNDER_LIMIT"]


def test_browser_post_refused_on_a_tcp_admin_listener(node_factory):
    port = cl.free_port()
    node = node_factory(["--workers", "1", "--admin-addr", "127.0.0.1:%d" % port,
                         "--admin-token-file", token_file()], env=runtime_env())
    url = "http://127.0.0.1:%d/v1/admin/killswitch" % port
    good = {"Authorization": "Bearer " + TOKEN}
    assert statuses(node, 2) == ["UNDER_LIMIT", "OVER_LIMIT"]
    assert simple_post(port) in (401, 403)
    # even with the token (a page cannot attach it without a preflight, but a proxy could), the
    # foreign Origin and the text/plain body are each refused
    assert cl.http("POST", url, SWITCH_ALL, dict(EVIL, **good))[0] == 403
    assert cl.http("POST", url, SWITCH_ALL, dict(good, **{"Content-Type": "text/plain"}))[0] \
        == 403
    assert cl.http("POST", url, SWITCH_ALL, dict(good, **{
        "Content-Type": "application/json", "Origin": "http://evil.example"}))[0] == 403
    assert statuses(node) == ["OVER_LIMIT"]
    # counted (the client port's /metrics shows the node's registry)
    assert cl.metric(node.addr, "sluice_admin_requests_total", {"outcome": "forbidden"}) >= 3
    # the operator: JSON, its own origin or none, the token
    assert cl.http("POST", url, SWITCH_ALL, dict(good, **{
        "Content-Type": "application/json", "Origin": "http://127.0.0.1:%d" % port}))[0] == 200
    assert statuses(node) == ["UNDER_LIMIT"]
    assert "forbidden" not in node.logs()  # counted, never logged one by one


def test_dns_rebinding_host_refused(node_factory):
    port = cl.free_port()
    node = node_factory(["--workers", "1", "--admin-addr", "127.0.0.1:%d" % port,
                         "--admin-token-file", token_file()], env=runtime_env())
    # the default configuration: no TCP port serves the admin status to a rebound name
    for p in sorted(listening_ports(node.proc.pid) | {node.port + 1}):
        if p != port:
            assert rebinding_read(p) in (None, 404), p
    # the TCP admin listener: a rebound Host is refused before the token is even looked at
    assert rebinding_read(port) == 403
    st = raw_http(port, b"GET /v1/admin/status HTTP/1.1\r\nHost: evil.example:%d\r\n"
                  b"Authorization: Bearer %s\r\n\r\n" % (port, TOKEN.encode()))
    assert st == 403
    st = raw_http(port, b"GET /v1/admin/status HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
                  b"Authorization: Bearer %s\r\n\r\n" % (port, TOKEN.encode()))
    assert st == 200


@contextlib.contextmanager
def squatted_pair():
    """A listening socket on some port p + 1 whose p is free (for the node): (socket, p)."""
    for _ in range(100):
        squat = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        squat.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squat.bind(("127.0.0.1", 0))
        port = squat.getsockname()[1] - 1
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                squat.close()
                continue
        squat.listen(8)
        try:
            yield squat, port
        finally:
            squat.close()
        return
    raise RuntimeError("no free port below a free port")


def test_squatted_admin_port(node_factory):
    # the default: no TCP admin port, so a squatter at the client port + 1 gets nothing, and
    # the node listens on its client port only
    with squatted_pair() as (squat, port):
        node = node_factory(["--workers", "1"], port=port, env=runtime_env())
        assert listening_ports(node.proc.pid) == {port}
        assert "is taken" not in node.logs()
    # an explicit admin address that is taken: exit 2, naming it
    tok = token_file()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squat:
        squat.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        squat.bind(("127.0.0.1", 0))
        squat.listen(8)
        taken = "127.0.0.1:%d" % squat.getsockname()[1]
        n = node_factory(["--workers", "1", "--admin-addr", taken, "--admin-token-file", tok],
                         env=runtime_env(), start=False)
        n.start(wait=False)
        assert n.proc.wait(10) == 2
        assert taken in n.logs(), n.logs()
    # and a running admin listener cannot be joined by a same-user process (no SO_REUSEPORT)
    aport = cl.free_port()
    node = node_factory(["--workers", "1", "--admin-addr", "127.0.0.1:%d" % aport,
                         "--admin-token-file", tok], env=runtime_env())
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as thief:
        thief.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        thief.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        try:
            thief.bind(("127.0.0.1", aport))
            joined = True
        except OSError:
            joined = False
        assert not joined, "a same-user socket joined the admin port"
    assert statuses(node) == ["UNDER_LIMIT"]


def test_admin_socket_is_the_owners_alone(node_factory):
    env = runtime_env()
    node = node_factory(["--workers", "1"], env=env)
    path = os.path.join(env["RUNTIME_DIRECTORY"], "admin.sock")
    st = os.lstat(path)
    assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
    assert st.st_uid == os.getuid()
    # the CLI finds it where sluiced put it, with no option
    out = subprocess.run([cl.sysconf.SLUICE, "top", "--json"], capture_output=True, text=True,
                         timeout=10, env=dict(os.environ, **env))
    assert out.returncode == 0 and '"limits"' in out.stdout, out.stderr
    node.stop()
    assert not os.path.exists(path)


def test_world_readable_token_file_refused(node_factory):
    tok = token_file(0o644)
    n = node_factory(["--workers", "1", "--admin-addr", "127.0.0.1:%d" % cl.free_port(),
                      "--admin-token-file", tok], env=runtime_env(), start=False)
    n.start(wait=False)
    assert n.proc.wait(10) == 2
    assert "chmod 600 %s" % tok in n.logs(), n.logs()
    assert TOKEN not in n.logs()
    os.chmod(tok, 0o640)  # group-readable: refused too
    n = node_factory(["--workers", "1", "--admin-addr", "127.0.0.1:%d" % cl.free_port(),
                      "--admin-token-file", tok], env=runtime_env(), start=False)
    n.start(wait=False)
    assert n.proc.wait(10) == 2
    assert "chmod 600 %s" % tok in n.logs(), n.logs()
