# SPDX-License-Identifier: Apache-2.0
"""Envoy's ShouldRateLimit on the Redis store (--store redis): the RLS cases of test_rls.py run
again on a node whose descriptors are decided in a real redis-server (the same test functions,
not copies); then what the store is for: two stateless nodes on one Redis, called alternately,
admit a rule's limit once in all, not once per node; and Redis away: UNAVAILABLE (Envoy's
failure_mode_deny decides, docs/envoy.md), or the node's own engine under --fail-open, and Redis
used again when it is back."""
import time

import grpc
import pytest

import test_rls as rls
import test_rls_limits as limits
from conftest import needs, wait_for
from test_redis import metric, redis_server  # noqa: F401 (fixture)
from test_rls import confdir  # noqa: F401 (fixture)

pytestmark = needs("redis-server")

OK, OVER = rls.OK, rls.OVER


def store_args(r, *more):
    return ["--store", "redis", "--redis-addrs", r.addr] + list(more)


@pytest.fixture
def redis_rls_node(node_factory, redis_server, confdir):  # noqa: F811
    """test_rls.py's rls_node, on the Redis store."""
    rls.write(confdir, "shop.yaml", rls.CONFIG)
    n = node_factory(["--workers", "2", "--rls-config-dir", confdir, "--rls-poll-period", "100ms",
                      "--rls-response-headers"] + store_args(redis_server))
    c = rls.Rls(n.addr)
    yield n, c, confdir
    c.close()


RLS_NODE_CASES = [
    rls.test_key_without_value_counts_each_value_and_value_wins,
    rls.test_nested_descriptors_and_depth,
    rls.test_several_descriptors_all_limited_and_headers,
    rls.test_unlimited_and_shadow_mode,
    rls.test_replaces,
    rls.test_hits_addend_request_and_descriptor,
    rls.test_descriptor_limit_override,
]


@pytest.mark.parametrize("case", RLS_NODE_CASES, ids=lambda c: c.__name__)
def test_rls_cases_on_redis(case, redis_rls_node, redis_server):  # noqa: F811
    case(redis_rls_node)
    # the decisions were Redis's: its keys are there, and the store counted them
    assert int(redis_server.cmd("DBSIZE")) > 0
    assert metric(redis_rls_node[0], "sluice_redis_items_total") > 0


FACTORY_CASES = [
    rls.test_rule_algorithm_extension,
    rls.test_kill_switch_and_switch_shadow_apply_to_a_domain,
    limits.test_rejected_hits_count_as_upstream_counts_them,
    limits.test_unit_multiplier_windows,
    limits.test_several_limits_on_one_descriptor,
    limits.test_call_counted_as_upstream_without_all_or_nothing,
    limits.test_all_or_nothing_call_from_upstreams_variable,
    limits.test_post_json_as_upstream_answers_it,
    limits.test_quota_mode_near_limit_metadata_and_header_names,
    limits.test_kuadrant_check_then_report_tokens,
]


@pytest.mark.parametrize("case", FACTORY_CASES, ids=lambda c: c.__name__)
def test_rls_factory_cases_on_redis(case, node_factory, redis_server, confdir):  # noqa: F811
    nodes = []

    def make(args=(), env=None, start=True, port=None):
        n = node_factory(list(args) + store_args(redis_server), env, start, port)
        nodes.append(n)
        return n
    case(make, confdir)
    assert nodes and all(metric(n, "sluice_redis_items_total") > 0 for n in nodes)


N = 5
PER_MINUTE = """
domain: shop
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: %d}
  - key: ldap
    rate_limit: {unlimited: true}
""" % N


def inside_one_minute():
    """Wait, if need be, for the next minute's fixed window, so that the few calls that follow
    (well under 10 s) all fall into one window."""
    left = 60 - time.time() % 60
    if left < 10:
        time.sleep(left + 0.1)


def two_nodes(node_factory, redis, confdir, *more):
    rls.write(confdir, "shop.yaml", PER_MINUTE)
    return [node_factory(["--workers", "2", "--rls-config-dir", confdir] + store_args(redis, *more))
            for _ in range(2)]


def test_two_nodes_on_one_redis_admit_the_limit_once(node_factory, redis_server, confdir):  # noqa: F811
    """Two stateless sluiced behind a round-robin balancer: ShouldRateLimit alternating between
    them admits N a minute in all, not 2N, and each answer counts the other node's hits."""
    nodes = two_nodes(node_factory, redis_server, confdir)
    cs = [rls.Rls(n.addr) for n in nodes]
    inside_one_minute()
    rs = [cs[i % 2].ask("shop", [("user", "alice")]) for i in range(2 * N)]
    assert [r.overall_code for r in rs] == [OK] * N + [OVER] * N
    assert [r.statuses[0].limit_remaining for r in rs] == list(range(N - 1, -1, -1)) + [0] * N
    # one key in Redis holds the count (docs/store.md: sl:{<name length>:<name>:<key>})
    assert redis_server.cmd("EXISTS", "sl:{8:rls:shop:user=alice}") == "1"
    # another value has its own N, again shared by the nodes
    assert [cs[i % 2].ask("shop", [("user", "bob")]).overall_code
            for i in range(N + 1)] == [OK] * N + [OVER]
    # each node counted its own descriptors' outcomes: 2N admitted and N + 1 rejected in all
    def total(outcome):
        return sum(metric(n, 'sluice_rls_descriptors_total{domain="shop",rule="user",'
                             'outcome="%s"}' % outcome) or 0 for n in nodes)
    assert (total("ok"), total("over_limit")) == (2 * N, N + 1)
    for n in nodes:
        assert metric(n, "sluice_redis_items_total") >= N
    for c in cs:
        c.close()


def test_redis_away_unavailable_then_used_again(node_factory, redis_server, confdir):  # noqa: F811
    """Redis unreachable: a call with a limited descriptor is UNAVAILABLE, as when a cluster's
    owner is unreachable (Envoy's failure_mode_deny decides); a call with none is answered.
    Redis back: used again without a restart."""
    n, = two_nodes(node_factory, redis_server, confdir, "--redis-timeout", "200ms")[:1]
    c = rls.Rls(n.addr)
    assert c.ask("shop", [("user", "carol")]).statuses[0].limit_remaining == N - 1
    redis_server.stop()
    with pytest.raises(grpc.RpcError) as e:
        c.ask("shop", [("ldap", "x")], [("user", "carol")])
    assert e.value.code() == grpc.StatusCode.UNAVAILABLE
    assert e.value.details() == "descriptor 1: redis store unavailable"
    # nothing to decide in Redis: answered
    r = c.ask("shop", [("ldap", "x")], [("nothing", "here")])
    assert r.overall_code == OK and r.statuses[0].limit_remaining == 2**32 - 1
    assert metric(n, "sluice_redis_errors_total") >= 1
    assert metric(n, 'sluice_calls_total{method="ShouldRateLimit",transport="grpc",'
                     'code="UNAVAILABLE"}') == 1
    # back (empty: no persistence) on the same port
    redis_server.start()

    def answered():
        try:
            return c.ask("shop", [("user", "dave")]).overall_code == OK
        except grpc.RpcError:
            return False
    assert wait_for(answered, 10)
    assert redis_server.cmd("EXISTS", "sl:{8:rls:shop:user=dave}") == "1"
    c.close()


def test_redis_away_fails_open(node_factory, redis_server, confdir):  # noqa: F811
    """--fail-open: while Redis is away the node's own engine decides (its own N), counted."""
    n, = two_nodes(node_factory, redis_server, confdir, "--fail-open",
                   "--redis-timeout", "200ms")[:1]
    c = rls.Rls(n.addr)
    assert c.ask("shop", [("user", "erin")]).overall_code == OK
    redis_server.stop()
    inside_one_minute()
    rs = [c.ask("shop", [("user", "erin")]) for _ in range(N + 1)]
    assert [r.overall_code for r in rs] == [OK] * N + [OVER]
    assert [r.statuses[0].limit_remaining for r in rs] == list(range(N - 1, -1, -1)) + [0]
    assert metric(n, "sluice_redis_fail_open_total") == N + 1
    redis_server.start()
    assert wait_for(lambda: c.ask("shop", [("user", "frank")]).overall_code == OK and
                    redis_server.cmd("EXISTS", "sl:{8:rls:shop:user=frank}") == "1", 10)
    c.close()
