# SPDX-License-Identifier: Apache-2.0
"""The over-limit cache in front of Redis (--redis-over-limit-cache, redis/overcache.h): a key
Redis rejected with nothing left is answered OVER_LIMIT by the node until it could pass again,
without a round trip; the answers are Redis's own (status, remaining, reset_time), a give-back
or an admission clears it, and Redis commands per decision on over-limit keys fall from about 1
to about 0. Measured against the same node with the cache off, in one run."""
from conftest import needs
from test_redis import decide, metric, redis_args, redis_server  # noqa: F401 (fixture)

pytestmark = needs("redis-server")


def evalsha_calls(r):
    """EVALSHA and EVAL calls Redis has run (INFO commandstats)."""
    n = 0
    for line in r.cmd("INFO", "commandstats").splitlines():
        if line.startswith(("cmdstat_evalsha:", "cmdstat_eval:")):
            n += int(line.split("calls=")[1].split(",")[0])
    return n


def over_limit_run(node, r, key, calls):
    """calls decisions on a key already over its limit: (Redis script runs, answers, the
    first rejection)."""
    assert decide(node, key, hits=3, limit=3)["status"] == "UNDER_LIMIT"
    first = decide(node, key, limit=3)
    assert first["status"] == "OVER_LIMIT"
    before = evalsha_calls(r)
    answers = [decide(node, key, limit=3) for _ in range(calls)]
    return evalsha_calls(r) - before, answers, first


def test_over_limit_keys_answered_without_redis(node_factory, redis_server):  # noqa: F811
    r = redis_server
    on = node_factory(redis_args(r))
    off = node_factory(redis_args(r, "--redis-over-limit-cache", "0"))
    n = 200
    # each worker learns on its own: the cache answers from the second call on each worker
    cached, answers, first = over_limit_run(on, r, "hot-on", n)
    sent, _, _ = over_limit_run(off, r, "hot-off", n)
    assert sent >= n  # without the cache every decision is a script run
    assert cached <= 2, cached  # at most one per worker before it learnt
    assert all(a["status"] == "OVER_LIMIT" and int(a.get("remaining", 0)) == 0 for a in answers)
    assert {a["reset_time"] for a in answers} == {first["reset_time"]}
    assert metric(on, "sluice_redis_over_limit_cached_total") >= n - 2
    print("# %d decisions on an over-limit key: %d Redis script runs with the cache, %d without"
          % (n, cached, sent))
    # a give-back through this node goes to Redis and clears the key on every worker: the hit it
    # gave back is admitted again, by Redis (a fixed window: Gubernator's token bucket keeps
    # answering OVER_LIMIT at remaining 0 whatever the cache does)
    fw = dict(limit=3, algorithm=3)
    assert decide(on, "fw", hits=3, **fw)["status"] == "UNDER_LIMIT"
    assert [decide(on, "fw", **fw)["status"] for _ in range(6)] == ["OVER_LIMIT"] * 6
    before = evalsha_calls(r)
    decide(on, "fw", hits=-1, **fw)
    assert [decide(on, "fw", **fw)["status"] for _ in range(2)] == ["UNDER_LIMIT", "OVER_LIMIT"]
    assert evalsha_calls(r) >= before + 2


def test_cache_answers_what_redis_answers(node_factory, redis_server):  # noqa: F811
    """Token bucket, leaky bucket and GCRA keys driven over their limit through a cached node and
    an uncached one on one Redis (different keys, the same sequence): the same statuses."""
    r = redis_server
    on = node_factory(redis_args(r))
    off = node_factory(redis_args(r, "--redis-over-limit-cache", "0"))
    for alg in (0, 1, 2):  # TOKEN_BUCKET, LEAKY_BUCKET, GCRA
        seq_on = [decide(on, "a%d-on" % alg, hits=h, limit=4, duration=60000,
                         algorithm=alg)["status"] for h in (2, 2, 1, 1, 3, 1)]
        seq_off = [decide(off, "a%d-off" % alg, hits=h, limit=4, duration=60000,
                          algorithm=alg)["status"] for h in (2, 2, 1, 1, 3, 1)]
        assert seq_on == seq_off, (alg, seq_on, seq_off)
