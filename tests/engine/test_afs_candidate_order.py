"""Admission Fair Sharing's candidate order is defined: :func:`afs_order`.

Kueue's ``CandidatesOrdering`` comparator (translated here as :func:`kueue_compare`) puts the
LocalQueue usage between the queue and the priority for two candidates of one ClusterQueue
only, so it is not a strict weak order: sorted with it, some inputs come out in an order that
depends on the order they came in. :func:`afs_order` sorts each ClusterQueue's candidates by a
key and merges the lists by the cross-queue rules. On many random inputs: where the comparator
is a strict weak order, the defined order is the comparator's sorted order; everywhere, it is a
function of the set of candidates (the same whatever the input order), keeps each
ClusterQueue's candidates in the comparator's order, and equals :func:`reference_afs_order`, a
slow greedy merge written from the definition with the comparator itself.
"""

from __future__ import annotations

import functools
import itertools
import random
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kadmit.engine.model import FlavorResource, WorkloadKey
from kadmit.engine.preemption import Candidate, afs_order, candidate_order
from kadmit.engine.quota import QuotaNode

Usage = Callable[[Candidate], "tuple[Hashable, float] | None"]


@dataclass(frozen=True)
class Holder:
    """A workload holding quota, with what the comparator reads."""

    uid: str
    reserved_in: str | None
    local_queue: str
    priority: int
    reserved_at: float
    evicted: bool
    timestamp: float = 0.0
    charged: Mapping[FlavorResource, int] = field(default_factory=dict)

    @property
    def key(self) -> WorkloadKey:
        return ("ns", self.uid)


def kueue_compare(a: Candidate, b: Candidate, own: str, lq_usage: Usage) -> int:
    """Kueue's ``CandidatesOrdering`` (``pkg/scheduler/preemption/common/ordering.go``): evicted
    first; other ClusterQueues' before the preemptor's (``own``); of two candidates of one
    ClusterQueue whose LocalQueues differ and both have a usage, the higher usage first (when
    the usages differ); lower priority; most recently reserved; UID."""
    for left, right in ((not a.evicted, not b.evicted), (a.reserved_in == own, b.reserved_in == own)):
        if left != right:
            return -1 if left < right else 1
    ua, ub = lq_usage(a), lq_usage(b)
    if (
        a.reserved_in == b.reserved_in
        and ua is not None
        and ub is not None
        and ua[0] != ub[0]
        and ua[1] != ub[1]
    ):
        return -1 if ua[1] > ub[1] else 1
    rest_a = (a.priority, -a.reserved_at, a.uid)
    rest_b = (b.priority, -b.reserved_at, b.uid)
    return -1 if rest_a < rest_b else (1 if rest_a > rest_b else 0)


def reference_afs_order(
    items: list[Any],
    own: QuotaNode,
    lq_usage: Usage,
    node_of: Callable[[Any], QuotaNode],
    wl_of: Callable[[Any], Candidate],
    merge: bool = True,
) -> list[Any]:
    """:func:`afs_order` from its definition, slowly: repeatedly, each ClusterQueue's first
    remaining item by the comparator (consistent within one queue), and of those the first by
    :func:`candidate_order`. (``merge`` changes nothing: the merged order is also one in which
    each queue's items are in order.)"""

    def compare(x: Any, y: Any) -> int:
        return kueue_compare(wl_of(x), wl_of(y), own.name, lq_usage)

    by_queue: dict[str | None, list[Any]] = {}
    for item in items:
        by_queue.setdefault(wl_of(item).reserved_in, []).append(item)
    ordered: list[Any] = []
    while any(by_queue.values()):
        firsts = [min(group, key=functools.cmp_to_key(compare)) for group in by_queue.values() if group]
        chosen = min(firsts, key=lambda x: candidate_order(wl_of(x), own_queue=node_of(x) is own))
        by_queue[wl_of(chosen).reserved_in].remove(chosen)
        ordered.append(chosen)
    return ordered


@dataclass
class Case:
    holders: list[Holder]
    own: QuotaNode
    nodes: dict[str, QuotaNode]
    usage: dict[str, float]
    """LocalQueue usage, for the LocalQueues of ClusterQueues that order by it."""

    def lq_usage(self, wl: Candidate) -> tuple[Hashable, float] | None:
        assert isinstance(wl, Holder)
        if wl.local_queue not in self.usage:
            return None
        return wl.local_queue, self.usage[wl.local_queue]

    def order(self, items: list[Holder], merge: bool = True) -> list[Holder]:
        return afs_order(list(items), self.own, self.lq_usage, self.node_of, _identity, merge)

    def node_of(self, wl: Holder) -> QuotaNode:
        return self.nodes[wl.reserved_in or ""]

    def compare(self, a: Holder, b: Holder) -> int:
        return kueue_compare(a, b, self.own.name, self.lq_usage)

    def comparator_sort(self, items: list[Holder]) -> list[Holder]:
        return sorted(items, key=functools.cmp_to_key(self.compare))

    def consistent(self) -> bool:
        """Whether the comparator is a strict weak order on these candidates (it never returns
        0 for two of them, so: transitive)."""
        less = {(a.uid, b.uid) for a in self.holders for b in self.holders if self.compare(a, b) < 0}
        for a, b, c in itertools.permutations(self.holders, 3):
            if (a.uid, b.uid) in less and (b.uid, c.uid) in less and (a.uid, c.uid) not in less:
                return False
        return True


def _identity(item: Any) -> Any:
    return item


def _case(rng: random.Random) -> Case:
    queues = [f"cq-{i}" for i in range(rng.randint(1, 4))]
    nodes = {name: QuotaNode(name, False) for name in queues}
    usage: dict[str, float] = {}
    local_queues: dict[str, list[str]] = {}
    for name in queues:
        local_queues[name] = [f"{name}-lq-{j}" for j in range(rng.randint(1, 3))]
        if rng.random() < 0.8:  # this ClusterQueue orders by LocalQueue usage
            for lq in local_queues[name]:
                usage[lq] = float(rng.choice((0, 1, 2, 3)))
    holders = []
    for index in range(rng.randint(1, 10)):
        cq = rng.choice(queues)
        holders.append(
            Holder(
                uid=f"uid-{index:02}",
                reserved_in=cq,
                local_queue=rng.choice(local_queues[cq]),
                priority=rng.choice((0, 50, 100, 150)),
                reserved_at=float(rng.choice((0, 1, 2))),
                evicted=rng.random() < 0.15,
            )
        )
    return Case(holders, nodes[rng.choice(queues)], nodes, usage)


def test_the_documented_cycle_gets_one_order_whatever_the_input_order() -> None:
    """a and b of ClusterQueue x, ordered by usage against their priority; c of y between them
    by priority: a < b, b < c, c < a. Sorted with the comparator, the order depends on the input
    order; the defined order does not: each queue's first by priority, then the rest."""
    x, y, own = QuotaNode("x", False), QuotaNode("y", False), QuotaNode("own", False)
    a = Holder("a", "x", "x-busy", priority=100, reserved_at=0.0, evicted=False)
    b = Holder("b", "x", "x-idle", priority=50, reserved_at=0.0, evicted=False)
    c = Holder("c", "y", "y-lq", priority=75, reserved_at=0.0, evicted=False)
    case = Case([a, b, c], own, {"x": x, "y": y, "own": own}, {"x-busy": 5.0, "x-idle": 1.0})
    assert case.compare(a, b) < 0 and case.compare(b, c) < 0 and case.compare(c, a) < 0
    assert not case.consistent()
    sorts = {tuple(h.uid for h in case.comparator_sort(list(p))) for p in itertools.permutations([a, b, c])}
    assert len(sorts) > 1  # the comparator's order is an accident of the input order
    for permutation in itertools.permutations([a, b, c]):
        assert [h.uid for h in case.order(list(permutation))] == ["c", "a", "b"]


def test_afs_order_equals_the_comparator_where_it_is_consistent_and_is_defined_everywhere() -> None:
    rng = random.Random(20261126)
    consistent = inconsistent = order_dependent = 0
    for _ in range(4000):
        case = _case(rng)
        holders = case.holders
        ordered = case.order(holders)
        uids = [h.uid for h in ordered]
        assert sorted(uids) == sorted(h.uid for h in holders)  # a permutation
        assert ordered == reference_afs_order(holders, case.own, case.lq_usage, case.node_of, _identity)
        for name in case.nodes:  # each ClusterQueue's candidates in the comparator's order
            mine = [h for h in ordered if h.reserved_in == name]
            assert mine == case.comparator_sort(mine)
        unmerged = case.order(holders, merge=False)  # fair sharing's: each queue's the same
        for name in case.nodes:
            assert [h for h in unmerged if h.reserved_in == name] == [
                h for h in ordered if h.reserved_in == name
            ]
        comparator_orders = set()
        for _ in range(6):
            shuffled = holders[:]
            rng.shuffle(shuffled)
            assert case.order(shuffled) == ordered  # a function of the set, not of the input order
            comparator_orders.add(tuple(h.uid for h in case.comparator_sort(shuffled)))
        if case.consistent():
            consistent += 1
            assert comparator_orders == {tuple(uids)}
        else:
            inconsistent += 1
            order_dependent += len(comparator_orders) > 1
    # the generator reaches both kinds of input, and inputs where the old sort's result
    # depended on the input order
    assert consistent > 1000 and inconsistent > 100 and order_dependent > 50, (
        consistent,
        inconsistent,
        order_dependent,
    )
