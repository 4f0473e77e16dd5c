# SPDX-License-Identifier: Apache-2.0
"""The one table of overshoot bounds the soak checker applies (docs/cluster.md "The soak" shows
the same table, and tests/soak/test_soak.py checks that the two agree).

A bound is the number of extra admissions one key may see in one window, in units of the key's
limit L, for a fault that is in force during that window (from the fault's start until GRACE_S
after its end: the failure detector's TTL plus the hand-off walk). Overlapping faults add up.
The reasons, from docs/cluster.md:

- a node's keys are lost (SIGKILL, a pause or a partition past the lease TTL): the next owner
  starts them afresh, +1 L ("A node killed with kill -9 does none of this: its keys are lost");
  when the node comes back its keys change owner again, a hand-off:
  min(L, r x W_new) + min(L, r x W_old) <= 2 L ("Hand-off and graceful leave", The bound);
- a graceful leave and its restart are two hand-offs: 4 L;
- an etcd outage or dropped packets can make leases lapse and come back: one hand-off, 2 L;
- a 2|3 split with etcd reachable changes no owner: calls across it fail (availability), 0;
- a SIGHUP reload changes nothing about owners or limits: 0;
- a node's clock off by s (1-3 s): it stamps the requests it forwards (created_at), so the owner
  can end a window up to s early, +1 L; the jump itself refills a leaky bucket or a GCRA by at
  most rate x s, below one burst at the soak's rates, +1 L.

GLOBAL keys add, in every window, the GLOBAL accuracy bound (docs/cluster.md "GLOBAL"):
sum over non-owners i of min(L, r_i x T), T = --global-sync-wait + a round trip + processing.
"""

# kind: (extra admissions in units of L, what it stands for)
BOUNDS = {
    "none":        (0, "no fault: the limit holds exactly"),
    "kill":        (3, "SIGKILL then restart without --state-dir: keys lost (1) + hand-off on rejoin (2)"),
    "kill_state":  (3, "SIGKILL then restart with --state-dir: keys lost (1) + hand-off on rejoin (2)"),
    "pause":       (3, "SIGSTOP past the lease TTL then SIGCONT: owner lost (1) + hand-off on return (2)"),
    "isolate":     (3, "one node cut from peers and etcd: owner lost (1) + hand-off on heal (2)"),
    "split":       (0, "2|3 split between nodes, etcd reachable: no owner changes, calls across fail"),
    "drop":        (2, "a share of packets dropped on one node: a lease may lapse, one hand-off (2)"),
    "etcd_stop":   (2, "etcd stopped then started: leases may lapse, one hand-off (2)"),
    "sighup":      (0, "SIGHUP reload: nothing about owners or limits changes"),
    "leave":       (4, "SIGTERM graceful leave then restart: two hand-offs (2 + 2)"),
    "skew":        (2, "one node's clock 1-3 s off (libfaketime): the requests it stamps end a "
                       "window early (1) and the jump itself refills a leaky bucket or GCRA (1)"),
}

# after a fault ends, its bound still applies this long (s): lease TTL, list propagation, the
# hand-off walk and its retries (docs/cluster.md: retried a second later, up to 5 times)
GRACE_S = 8.0

# GLOBAL: T in the accuracy bound = --global-sync-wait + a round trip + processing, in seconds,
# taken generously (a loaded 2-core machine); the soak runs --global-sync-wait 100ms
GLOBAL_T_S = 0.35


def fault_bound(kind):
    return BOUNDS[kind][0]


def global_bound(limit, hits_in_t):
    """sum over non-owners i of min(L, r_i T). Hits are whole: r_i T is read as the most hits
    node i received within any T of the window (hits_in_t[i]; a single hit in a staleness period
    can be over-admitted, where a mean rate times T would say a fraction of one). The checker does
    not know the owner, so the node with the fewest is taken as the owner (the largest value the
    formula can take)."""
    terms = sorted(min(limit, c) for c in hits_in_t)
    return sum(terms[1:])
