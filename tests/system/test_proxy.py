# SPDX-License-Identifier: Apache-2.0
"""Levee's client-proxy (sluiced --role proxy) in front of real limiters (sluiced processes) with
quotas and group sizes in a real etcd: the Levee document's three example configuration files
start a working cluster (the observer's addresses registered in etcd, Levee's way), each resource's requests land on its DF group only
and round robin inside it, the group admits at most the quota (plus burst) under Poisson arrivals
over many windows (Levee's sieving claim), a limiter killed with -9 costs no request and its share
moves to the next by HRW, and it takes its share back once it answers again; HTTP/1.1 and h2c
clients get the limiter's status, headers and body relayed."""
import math
import random
import signal
import threading
import time

from conftest import free_port
# etcd (one real etcd per module) and prefix (an etcd root per test) are test_levee's fixtures
from test_levee import H1, attempt_h2, etcd, metrics, prefix, put_quotas, wait_for  # noqa: F401


def limiter(node_factory, etcd, prefix, name, port=None):
    return node_factory(["--instance-id", name, "--standalone", "--workers", "1",
                         "--storage-addrs", etcd.url, "--storage-prefix", prefix,
                         "--admin-api=false"], port=port)


def cluster(node_factory, etcd, prefix, n=3, extra=()):
    lims = [limiter(node_factory, etcd, prefix, "l%d" % i) for i in range(1, n + 1)]
    spec = ",".join("l%d=%s" % (i + 1, lim.addr) for i, lim in enumerate(lims))
    proxy = node_factory(["--role", "proxy", "--workers", "2", "--storage-addrs", etcd.url,
                          "--storage-prefix", prefix, "--proxy-limiters", spec,
                          "--proxy-probe-interval", "100ms", "--proxy-timeout", "1s",
                          "--admin-api=false"] + list(extra))
    return proxy, lims


def attempts(node):
    """Attempts a limiter decided (every outcome)."""
    m = metrics(node)
    return sum(v for k, v in m.items() if k.startswith("sluice_levee_attempts_total"))


def counts(lims):
    return [attempts(x) for x in lims]


def delta(before, after):
    return [a - b for a, b in zip(after, before)]


def wait_quotas(c, resource, want=200):
    wait_for(lambda: c.attempt(resource)[0] == want, timeout=10, what="quotas from etcd")


# ------------------------------------------------------------------------- Levee's config files

LIMITER_YAML = """instance-id: limiter1
storage-prefix: {prefix}
storage-addrs:
  - "{etcd}"
listen-addr: "127.0.0.1:{port}"
gossip-addr: "127.0.0.1:{gossip}"
graphite-addr: "127.0.0.1:{graphite}/udp"
gc-max-keys: 10000
gc-period: 1h
gc-collect: 15s
standalone: false
verbose: false
"""

OBSERVER_YAML = """instance-id: observer1
observer-name: obs-1
storage-prefix: {prefix}
storage-addrs:
  - "{etcd}"
  - "{etcd}"
  - "{etcd}"
graphite-addr: "127.0.0.1:{graphite}/tcp"
verbose: true
"""

PROXY_YAML = """instance-id: client1
storage-prefix: {prefix}
storage-addrs:
  - "{etcd}"
listen-addr: "127.0.0.1:{port}"
graphite-addr: "127.0.0.1:{graphite}"
gc-max-keys: 500
gc-period: 30m
verbose: false
"""


def test_levee_example_config_files(node_factory, etcd, prefix, tmp_path):
    """The document's three files with only the addresses (and the etcd root) changed. As the
    document says to add an observer, its name's addresses are put in etcd first; the limiter
    joins the overlay through it, and the proxy finds it there and follows its topology."""
    put_quotas(etcd, prefix, {"limit/key_default": {"rate": 100, "burst": 10}})
    lport, pport, oport = free_port(), free_port(), free_port()
    ogossip = "127.0.0.1:%d" % free_port()
    etcd.put(prefix + "/observer/obs-1", {"gossip": ogossip, "service": "127.0.0.1:%d" % oport})
    obs_cfg = tmp_path / "observer.yaml"
    obs_cfg.write_text(OBSERVER_YAML.format(prefix=prefix, etcd=etcd.url, graphite=free_port()))
    obs = node_factory(["--config", str(obs_cfg), "--role", "observer"], port=oport)
    assert "on %s" % ogossip in obs.logs()  # its gossip address came from etcd
    lim_cfg = tmp_path / "limiter.yaml"
    gport = free_port()
    lim_cfg.write_text(LIMITER_YAML.format(prefix=prefix, etcd=etcd.url, port=lport,
                                           gossip=gport, graphite=free_port()))
    lim = node_factory(["--config", str(lim_cfg)], port=lport)
    assert "on 127.0.0.1:%d" % gport in lim.logs()  # joined the gossip overlay
    assert "1 observers from etcd as seeds" in lim.logs()
    px_cfg = tmp_path / "client-proxy.yaml"
    px_cfg.write_text(PROXY_YAML.format(prefix=prefix, etcd=etcd.url, port=pport,
                                        graphite=free_port()))
    proxy = node_factory(["--config", str(px_cfg), "--role", "proxy"], port=pport)
    c = H1(proxy)
    wait_quotas(c, "cfg")
    assert attempts(lim) >= 1
    assert metrics(proxy)["sluice_proxy_observer_connected"] == 1
    c.close()


# ---------------------------------------------------------------------- groups and round robin

def test_each_resource_lands_on_its_df_group_round_robin(node_factory, etcd, prefix):
    put_quotas(etcd, prefix, {"limit/key_default": {"rate": 100000, "burst": 1000},
                              "factor/default": "2", "factor/key/solo": "1",
                              "factor/key/wide": "3"})
    proxy, lims = cluster(node_factory, etcd, prefix)
    c = H1(proxy)
    wait_quotas(c, "warm")
    for resource, df in (("solo", 1), ("alpha", 2), ("beta", 2), ("gamma", 2), ("wide", 3)):
        # the factor tree is read live: wait until the proxy spreads over df limiters
        before = counts(lims)
        for _ in range(60):
            st, _, body = c.attempt(resource)
            assert st == 200, body
        d = delta(before, counts(lims))
        used = [x for x in d if x > 0]
        assert len(used) == df, (resource, d)
        # one connection stays on one worker: strict round robin, 60/df each
        assert all(x == 60 // df for x in used), (resource, d)
    m = metrics(proxy)
    assert sum(v for k, v in m.items()
               if k.startswith("sluice_proxy_requests_total") and 'outcome="accepted"' in k) >= 300
    c.close()


def test_status_headers_and_body_relayed_h1_and_h2c(node_factory, etcd, prefix):
    put_quotas(etcd, prefix, {"limit/key/closed/quota": {"rate": 0},
                              "limit/key/open/quota": {"rate": 1000, "burst": 100}})
    proxy, lims = cluster(node_factory, etcd, prefix, n=2)
    c = H1(proxy)
    wait_quotas(c, "open")
    st, h, _ = c.attempt("closed", req_id="r-17")
    assert st == 429
    assert "ratelimit-policy" in h and h.get("x-req-id") == "r-17", h
    st, h, body = c.attempt("nothing-configured")
    assert st == 500 and body, (st, body)  # no quota, no key_default: the limiter's 500, relayed
    st2, h2, _ = attempt_h2(proxy, "closed", req_id="r-18")
    assert st2 == 429 and h2.get("x-req-id") == "r-18", h2
    assert attempt_h2(proxy, "open")[0] == 200
    st, _, _ = c.attempt("open", verb="GET")
    assert st == 405  # not POST /attempt: the proxy's own service answers
    c.close()


# --------------------------------------------------------------------------------- sieving

def test_sieving_poisson_group_admits_at_most_the_quota(node_factory, etcd, prefix):
    """Poisson arrivals at three times the quota over a DF-3 group, 1 s windows: every window,
    and the whole run, admits at most quota + DF x (burst + 1) (each limiter has rate/DF and the
    burst), and the group does admit about the quota (the split costs little)."""
    rate, burst, df, windows = 40, 4, 3, 8
    put_quotas(etcd, prefix, {"limit/key/sieve/quota": {"rate": rate, "burst": burst},
                              "limit/key/warm/quota": {"rate": 1000, "burst": 10},
                              "factor/key/sieve": str(df)})
    proxy, lims = cluster(node_factory, etcd, prefix)
    c = H1(proxy)
    wait_quotas(c, "warm")
    rnd = random.Random(1234)
    admitted = [0] * windows
    t0 = time.monotonic()
    nxt = t0
    while True:
        nxt += rnd.expovariate(3.0 * rate)
        now = time.monotonic()
        if nxt > now:
            time.sleep(nxt - now)
        t = time.monotonic() - t0
        if t >= windows:
            break
        st, _, body = c.attempt("sieve")
        assert st in (200, 429), body
        if st == 200:
            admitted[int(t)] += 1
    bound = rate + df * (burst + 1)
    print("sieving: admitted per 1 s window %s, quota %d, bound %d" % (admitted, rate, bound))
    assert max(admitted) <= bound, admitted
    assert sum(admitted) <= rate * windows + df * (burst + 1), admitted
    assert sum(admitted) >= 0.7 * rate * windows, admitted
    c.close()


# ---------------------------------------------------------------------------------- failover

def test_kill_9_limiter_share_moves_then_comes_back(node_factory, etcd, prefix):
    put_quotas(etcd, prefix, {"limit/key_default": {"rate": 100000, "burst": 1000},
                              "factor/default": "2"})
    proxy, lims = cluster(node_factory, etcd, prefix)
    c = H1(proxy)
    wait_quotas(c, "warm")
    before = counts(lims)
    for _ in range(40):
        assert c.attempt("moving")[0] == 200
    d = delta(before, counts(lims))
    group = [i for i, x in enumerate(d) if x > 0]
    outside = [i for i, x in enumerate(d) if x == 0]
    assert len(group) == 2 and len(outside) == 1, d
    victim = lims[group[0]]
    port = victim.port
    victim.kill()
    t_kill = time.monotonic()
    others = [lims[group[1]], lims[outside[0]]]
    before = [attempts(x) for x in others]
    statuses = []
    for _ in range(40):
        t = time.monotonic()
        statuses.append(c.attempt("moving")[0])
        if len(statuses) == 1:
            first_ms = (time.monotonic() - t) * 1000
    assert statuses == [200] * 40, statuses  # nothing lost: the failed call went to the next
    d = delta(before, [attempts(x) for x in others])
    assert d[1] > 0 and d[0] > 0 and sum(d) == 40, d  # the next by HRW took the share
    assert d[0] == 20 and d[1] == 20, d
    m = metrics(proxy)
    name = "l%d" % (group[0] + 1)
    assert m['sluice_proxy_limiter_up{limiter="%s"}' % name] == 0
    assert m['sluice_proxy_failovers_total{limiter="%s"}' % name] >= 1
    # the limiter comes back on its address: probed, up again, its share back
    back = limiter(node_factory, etcd, prefix, name, port=port)
    wait_for(lambda: metrics(proxy)['sluice_proxy_limiter_up{limiter="%s"}' % name] == 1,
             timeout=10, what="the probe to mark it up")
    t_back = time.monotonic() - t_kill
    wait_quotas(H1(back), "warm")
    b0 = attempts(back)
    for _ in range(40):
        assert c.attempt("moving")[0] == 200
    assert attempts(back) - b0 == 20
    print("first call after kill -9: %.1f ms; limiter back in %.2f s after the kill (restart "
          "included)" % (first_ms, t_back))
    c.close()


def test_excess_during_failover_within_one_members_burst(node_factory, etcd, prefix):
    """Traffic above the quota on a DF-2 group; one member killed with -9 half-way. Its place is
    taken by a limiter with a full bucket: over the run the group admits at most the quota plus
    every member's burst, plus one member's burst for the newcomer (Levee's burst/DF, with the
    burst sized per member)."""
    rate, burst, df, seconds = 20, 4, 2, 3.0
    put_quotas(etcd, prefix, {"limit/key/ex/quota": {"rate": rate, "burst": burst},
                              "limit/key/warm/quota": {"rate": 1000, "burst": 10},
                              "factor/key/ex": str(df)})
    proxy, lims = cluster(node_factory, etcd, prefix)
    c = H1(proxy)
    wait_quotas(c, "warm")
    # the victim: a member of the group of "ex", read from the limiters' counters at the kill
    before = counts(lims)
    admitted, killed, t0 = 0, False, time.monotonic()
    while time.monotonic() - t0 < seconds:
        if not killed and time.monotonic() - t0 >= seconds / 2:
            d = delta(before, counts(lims))
            lims[[i for i, x in enumerate(d) if x > 0][0]].kill()
            killed = True
        st, _, body = c.attempt("ex")
        assert st in (200, 429), body
        admitted += st == 200
        time.sleep(0.005)
    took = time.monotonic() - t0
    steady = rate * took + df * (burst + 1)
    print("failover excess: admitted %d in %.2f s, quota + group bursts %.1f, excess %.1f "
          "(bound: one member's burst + 1 = %d)" % (admitted, took, steady, admitted - steady,
                                                      burst + 1))
    assert killed
    assert admitted <= steady + burst + 1, (admitted, steady)
    c.close()


def test_limiter_sigterm_under_load_loses_no_request(node_factory, etcd, prefix):
    """A limiter stopped gracefully (SIGTERM: GOAWAY, then its port closes) while requests flow:
    every request is still answered 200, the rest of its share goes to the next by HRW."""
    put_quotas(etcd, prefix, {"limit/key_default": {"rate": 100000, "burst": 1000},
                              "factor/default": "2"})
    proxy, lims = cluster(node_factory, etcd, prefix)
    c = H1(proxy)
    wait_quotas(c, "warm")
    before = counts(lims)
    for _ in range(10):
        assert c.attempt("leaving")[0] == 200
    group = [i for i, x in enumerate(delta(before, counts(lims))) if x > 0]
    statuses = []
    for i in range(200):
        if i == 50:
            lims[group[0]].signal(signal.SIGTERM)
        statuses.append(c.attempt("leaving")[0])
    assert lims[group[0]].proc.wait(10) == 0
    assert statuses == [200] * 200, [s for s in statuses if s != 200]
    c.close()


def test_sighup_reads_the_limiter_list_again(node_factory, etcd, prefix, tmp_path):
    """--proxy-limiters from the config file, read again on SIGHUP: a limiter added takes its share
    without a restart, one removed gets nothing more."""
    put_quotas(etcd, prefix, {"limit/key_default": {"rate": 100000, "burst": 1000}})
    lims = [limiter(node_factory, etcd, prefix, "l%d" % i) for i in (1, 2, 3)]
    cfg = tmp_path / "proxy.yaml"

    def write(idx):
        cfg.write_text("proxy-limiters:\n" +
                       "".join('  - "l%d=%s"\n' % (i + 1, lims[i].addr) for i in idx))

    write([0, 1])
    proxy = node_factory(["--role", "proxy", "--workers", "1", "--config", str(cfg),
                          "--storage-addrs", etcd.url, "--storage-prefix", prefix,
                          "--admin-api=false"])
    c = H1(proxy)
    wait_quotas(c, "warm")

    def spread():
        before = counts(lims)
        for i in range(60):
            assert c.attempt("res-%d" % i)[0] == 200
        return delta(before, counts(lims))

    d = spread()
    assert d[2] == 0 and d[0] > 0 and d[1] > 0, d
    write([0, 1, 2])
    proxy.signal(signal.SIGHUP)
    wait_for(lambda: "limiter list read again" in proxy.logs(), timeout=5, what="the reload")
    d = spread()
    assert d[2] > 0 and sum(d) == 60, d
    write([1, 2])
    proxy.signal(signal.SIGHUP)
    wait_for(lambda: proxy.logs().count("limiter list read again") == 2, timeout=5,
             what="the second reload")
    d = spread()
    assert d[0] == 0 and sum(d) == 60, d
    c.close()


def test_sigterm_drains_in_flight(node_factory, etcd, prefix):
    """SIGTERM on the proxy while a call is in flight (the limiter holds its answer for about 1 s,
    X-Delay-Mode: hold): that call is answered, then the proxy exits 0."""
    put_quotas(etcd, prefix, {"limit/key/slow/quota": {"rate": 1},
                              "limit/key/warm/quota": {"rate": 1000, "burst": 10}})
    proxy, lims = cluster(node_factory, etcd, prefix, n=2, extra=["--proxy-timeout", "5s"])
    c = H1(proxy)
    wait_quotas(c, "warm")
    hold = {"X-Max-Delay": "3s", "X-Delay-Mode": "hold"}
    assert c.attempt("slow", extra=hold)[0] == 200  # the one cell; the next waits ~1 s
    got = {}

    def held():
        t = time.monotonic()
        got["answer"] = c.attempt("slow", extra=hold)
        got["took"] = time.monotonic() - t

    th = threading.Thread(target=held)
    th.start()
    time.sleep(0.3)
    proxy.signal(signal.SIGTERM)
    th.join(10)
    st, h, _ = got["answer"]
    assert st == 200 and int(h["x-delay-ms"]) > 0, h
    assert got["took"] >= 0.5, got
    assert proxy.proc.wait(10) == 0
    assert "shutting down" in proxy.logs()
    c.close()


def test_no_limiter_answers_500(node_factory, etcd, prefix):
    """Every limiter gone: a 500 at once (after one failover), counted; the proxy lives on."""
    dead = "l1=127.0.0.1:%d,l2=127.0.0.1:%d" % (free_port(), free_port())
    proxy = node_factory(["--role", "proxy", "--workers", "1", "--proxy-limiters", dead,
                          "--proxy-timeout", "300ms", "--admin-api=false"])
    c = H1(proxy)
    t = time.monotonic()
    st, _, body = c.attempt("any")
    assert st == 500 and b"no limiter answered" in body
    assert time.monotonic() - t < 5
    m = metrics(proxy)
    assert m['sluice_proxy_rejected_total{reason="no_limiter"}'] == 1
    assert math.isclose(sum(v for k, v in m.items() if k.startswith("sluice_proxy_failovers")), 1)
    c.close()
