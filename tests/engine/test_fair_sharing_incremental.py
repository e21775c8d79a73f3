"""Fair sharing kept incrementally gives what recomputing from scratch gives.

The tournament keeps the winners below each node between picks, and :class:`Shares` keeps each
node's share while its usage is unchanged; on random cohort trees (nested cohorts, lending and
borrowing limits, weights including 0) with usage changing between picks, anywhere in the tree,
each pick and each share equals the one computed afresh.
"""

from __future__ import annotations

import copy
import itertools
import math
import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any
from unittest.mock import patch

import pytest
from hypothesis import given

from kadmit.engine import Engine
from kadmit.engine.fair_sharing import (
    Contender,
    Share,
    Shares,
    Tournament,
    dominant_resource_share,
    exact_rank,
)
from kadmit.engine.model import FlavorResource
from kadmit.engine.preemption import Candidate, Ranked, candidate_order
from kadmit.engine.quota import QuotaNode, add_usage, compute_quotas
from tests.engine.conftest import (
    admitted_status,
    cluster_queue,
    cohort,
    flavor,
    interpreted_only,
    local_queue,
    quotas,
    workload,
)
from tests.engine.test_properties import PROPERTY_SETTINGS, scenarios

RESOURCES: tuple[FlavorResource, ...] = (("f1", "cpu"), ("f2", "cpu"), ("f1", "memory"))


@dataclass(frozen=True)
class Head:
    priority: int
    timestamp: float
    uid: str


def _tree(rng: random.Random) -> tuple[dict[str, QuotaNode], dict[int, Fraction]]:
    """A random forest: roots with sub-cohorts and ClusterQueues; the ClusterQueues by name, and
    each node's weight by id."""
    weights: dict[int, Fraction] = {}
    cluster_queues: dict[str, QuotaNode] = {}

    def grow(node: QuotaNode, depth: int) -> None:
        for _ in range(rng.randint(1, 4)):
            is_cohort = depth < 2 and rng.random() < 0.3
            child = QuotaNode(f"{'co' if is_cohort else 'cq'}-{len(weights)}", is_cohort, parent=node)
            node.children.append(child)
            quota(child)
            if is_cohort:
                grow(child, depth + 1)
            else:
                cluster_queues[child.name] = child

    def quota(node: QuotaNode) -> None:
        weights[id(node)] = rng.choice((Fraction(0), Fraction(1), Fraction(1), Fraction(2), Fraction(1, 2)))
        for fr in RESOURCES:
            if rng.random() < 0.7:
                node.nominal[fr] = rng.choice((0, 0, 2, 4, 8))
                if rng.random() < 0.3:
                    node.borrowing_limit[fr] = rng.randint(0, 6)
                if rng.random() < 0.3:
                    node.lending_limit[fr] = rng.randint(0, 4)

    for index in range(rng.randint(1, 3)):
        root = QuotaNode(f"root-{index}", True)
        quota(root)
        grow(root, 0)
        compute_quotas(root)
    if rng.random() < 0.5:  # a ClusterQueue without a cohort: a tree of its own
        alone = QuotaNode("alone", False)
        quota(alone)
        compute_quotas(alone)
        cluster_queues[alone.name] = alone
    return cluster_queues, weights


def _usage(rng: random.Random) -> dict[FlavorResource, int]:
    return {fr: rng.randint(1, 5) for fr in rng.sample(RESOURCES, rng.randint(1, 2))}


@pytest.mark.parametrize("seed", range(60))
def test_incremental_tournament_and_shares_match_a_fresh_computation(seed: int) -> None:
    rng = random.Random(seed)
    nodes, weights = _tree(rng)
    names = sorted(nodes)
    running: list[tuple[QuotaNode, dict[FlavorResource, int]]] = []

    def run(node: QuotaNode, usage: dict[FlavorResource, int]) -> None:
        add_usage(node, usage)
        running.append((node, usage))

    for _ in range(rng.randint(0, 3 * len(names))):  # what runs already
        run(nodes[rng.choice(names)], _usage(rng))
    heads: dict[str, Contender] = {}
    for name in names:
        if rng.random() < 0.8:
            head = Head(rng.choice((0, 10, 10, 20)), float(rng.randint(0, 5)), f"uid-{rng.randint(0, 10**6)}")
            heads[name] = (head, _usage(rng))

    def weight_of(node: QuotaNode) -> Fraction:
        return weights[id(node)]

    shares = Shares(weight_of)
    order = Tournament(heads, nodes, shares)
    every = [n for cq in nodes.values() for n in (cq, *cq.chain, *((cq.top,) if cq.top else ()))]
    while order:
        fresh = Tournament(heads, nodes, Shares(weight_of)).pop()
        picked = order.pop()
        assert picked == fresh
        head, usage = heads.pop(picked)
        if rng.random() < 0.7:  # admitted: its usage is taken
            run(nodes[picked], usage)
        for _ in range(rng.randint(0, 2)):  # and elsewhere, workloads start and finish
            if running and rng.random() < 0.4:
                node, gone = running.pop(rng.randrange(len(running)))
                add_usage(node, gone, -1)
            else:
                run(nodes[rng.choice(names)], _usage(rng))
        for node in every:
            assert shares.of(node) == dominant_resource_share(node, weight_of(node))


def test_exact_rank_orders_as_the_shares_do() -> None:
    rng = random.Random(7)
    shares: list[Share] = [Fraction(0), math.inf, Fraction(1, 3), Fraction(1, 3) + Fraction(1, 10**30)]
    shares += [Fraction(rng.randint(0, 10**6), rng.randint(1, 10**6)) for _ in range(300)]
    for a in shares:
        for b in shares[:40]:
            assert (exact_rank(a) < exact_rank(b)) == (a < b)
            assert (exact_rank(a) == exact_rank(b)) == (a == b)


class _ReferenceTournament:
    """The tournament as it was computed before it was kept incrementally: every head's share
    afresh at every pick."""

    def __init__(
        self, heads: Mapping[str, Contender], nodes: Mapping[str, QuotaNode], shares: Shares
    ) -> None:
        self.heads = dict(heads)
        self.nodes = nodes
        self.weight_of = shares.weight_of

    def __bool__(self) -> bool:
        return bool(self.heads)

    def forget(self) -> None:
        pass

    def pop(self) -> str:
        def key(node: QuotaNode, head: Ranked, usage: Mapping[FlavorResource, int]) -> tuple[object, ...]:
            borrows = any(node.usage.get(fr, 0) + v > node.subtree.get(fr, 0) for fr, v in usage.items())
            share = dominant_resource_share(node, self.weight_of(node), usage)
            return (borrows, share, -head.priority, head.timestamp, head.uid)

        def winner(node: QuotaNode) -> tuple[str, Ranked, Mapping[FlavorResource, int]] | None:
            if not node.is_cohort:
                return (node.name, *self.heads[node.name]) if node.name in self.heads else None
            best: tuple[tuple[object, ...], str, Ranked, Mapping[FlavorResource, int]] | None = None
            for child in node.children:
                found = winner(child)
                if found is not None:
                    k = key(child, found[1], found[2])
                    if best is None or k < best[0]:
                        best = (k, *found)
            return None if best is None else best[1:]

        roots = {id(self.nodes[name].root): self.nodes[name].root for name in self.heads}
        ranked = []
        for root in roots.values():
            found = winner(root)
            if found is not None:
                ranked.append(((-found[1].priority, found[1].timestamp, found[1].uid), found[0]))
        name = min(ranked)[1]
        del self.heads[name]
        return name


class _ReferenceOrdering:
    """Kueue's TargetClusterQueueOrdering as it was computed before: a scan of every sibling's
    share at every step."""

    def __init__(
        self,
        own: QuotaNode,
        candidates: list[tuple[Candidate, QuotaNode]],
        shares: Shares,
    ) -> None:
        self.own = own
        self.share = shares.of
        self.queue: dict[int, list[Candidate]] = {}
        for wl, node in candidates:
            self.queue.setdefault(id(node), []).append(wl)
        self.ancestors: set[int] = set()
        ancestor = own.parent
        while ancestor is not None:
            self.ancestors.add(id(ancestor))
            ancestor = ancestor.parent
        self.pruned: set[int] = set()

    def has(self, node: QuotaNode) -> bool:
        return bool(self.queue.get(id(node)))

    def pop(self, node: QuotaNode) -> Candidate:
        return self.queue[id(node)].pop(0)

    def drop(self, node: QuotaNode) -> None:
        self.pruned.add(id(node))

    def __iter__(self) -> Iterator[QuotaNode]:
        own = self.own
        if own.parent is None:
            while id(own) not in self.pruned and self.has(own):
                yield own
            return
        root = own.root
        while id(root) not in self.pruned:
            target = self._next(root)
            if target is not None:
                yield target

    def _next(self, cohort: QuotaNode) -> QuotaNode | None:
        best_cq: QuotaNode | None = None
        best_cq_share: Share | None = None
        best_cohort: QuotaNode | None = None
        best_cohort_share: Share | None = None
        for child in cohort.children:
            if id(child) in self.pruned:
                continue
            child_share = self.share(child)
            if child.is_cohort:
                if child_share <= 0 and id(child) not in self.ancestors:
                    self.pruned.add(id(child))
                elif best_cohort_share is None or child_share >= best_cohort_share:
                    best_cohort, best_cohort_share = child, child_share
                continue
            if (child_share <= 0 and child is not self.own) or not self.has(child):
                self.pruned.add(id(child))
            elif best_cq_share is None or child_share > best_cq_share:
                best_cq, best_cq_share = child, child_share
            elif child_share == best_cq_share and best_cq is not None:
                first, current = self.queue[id(child)][0], self.queue[id(best_cq)][0]
                if candidate_order(first, child is self.own) < candidate_order(current, best_cq is self.own):
                    best_cq = child
        if best_cq is None and best_cohort is None:
            self.pruned.add(id(cohort))
            return None
        if (
            best_cohort is not None
            and best_cohort_share is not None
            and (best_cq_share is None or best_cohort_share >= best_cq_share)
        ):
            return self._next(best_cohort)
        return best_cq


def _decide_all(objects: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Twelve cycles with fair sharing on (ClusterQueue weights 1, 2 and 0 in turn), preempted
    workloads gone at once: every decision."""
    engine = Engine(fair_sharing=True)
    weights = itertools.cycle(("1", "2", "0"))
    for obj in objects:
        if obj["kind"] == "ClusterQueue":
            obj = {**obj, "spec": {**obj["spec"], "fairSharing": {"weight": next(weights)}}}
        engine.upsert(obj)
    log: list[tuple[Any, ...]] = []
    for cycle in range(12):
        decisions = engine.schedule(1000.0 + cycle)
        log += [("reserve", r.workload, repr(r.admission)) for r in decisions.reservations]
        log += [("preempt", p.victim, p.preemptor, p.reason) for p in decisions.preemptions]
        log += [("pending", p.workload, p.reason) for p in decisions.pending]
        for preemption in decisions.preemptions:
            engine.release(*preemption.victim)
    return log


def _walk_always(*_: object) -> bool:
    """Never skip a strategy's walk through the queues (``_none_pass``'s shortcut)."""
    return False


@interpreted_only
@PROPERTY_SETTINGS
@given(scenarios())
def test_fair_sharing_decides_as_when_recomputed_at_every_step(objects: list[dict[str, Any]]) -> None:
    kept = _decide_all(copy.deepcopy(objects))
    with (
        patch("kadmit.engine.cycle.Tournament", _ReferenceTournament),
        patch("kadmit.engine.fair_sharing._TargetOrdering", _ReferenceOrdering),
        patch("kadmit.engine.fair_sharing._none_pass", _walk_always),
        patch(
            "kadmit.engine.fair_sharing.Shares.of",
            lambda self, node: dominant_resource_share(node, self.weight_of(node)),
        ),
    ):
        recomputed = _decide_all(copy.deepcopy(objects))
    assert kept == recomputed


def _crowded(seed: int) -> list[dict[str, Any]]:
    """A cohort tree full of borrowing queues alike (so that their shares tie), holding running
    workloads of mixed priorities, with heads that must preempt to fit."""
    rng = random.Random(seed)
    objects: list[dict[str, Any]] = [
        flavor("f"),
        cohort("root", groups=quotas({"f": {"cpu": rng.randint(6, 12)}})),
    ]
    homes = ["root"]
    for index in range(rng.randint(0, 3)):
        parent = rng.choice(homes)
        objects.append(cohort(f"sub{index}", parent=parent, groups=quotas({"f": {"cpu": rng.randint(0, 2)}})))
        homes.append(f"sub{index}")
    running = 0
    for q in range(rng.randint(3, 10)):
        preemption = {
            "withinClusterQueue": "LowerPriority",
            "reclaimWithinCohort": rng.choice(("Any", "Any", "LowerPriority")),
        }
        name = f"cq{q}"
        objects.append(
            cluster_queue(
                name,
                quotas({"f": {"cpu": rng.choice((0, 1, 2))}}),
                cohort=rng.choice(homes),
                preemption=preemption,
            )
        )
        objects.append(local_queue(f"lq{q}", name))
        for _ in range(rng.randint(0, 6)):
            running += 1
            status = admitted_status(name, {"cpu": "f"}, {"cpu": "1"}, at=float(rng.randint(0, 3)))
            objects.append(
                workload(
                    f"run{running}",
                    f"lq{q}",
                    priority=rng.choice((0, 1, 2)),
                    created=rng.randint(0, 3),
                    status=status,
                )
            )
        for p in range(rng.randint(0, 2)):
            objects.append(
                workload(
                    f"new{q}-{p}",
                    f"lq{q}",
                    priority=rng.choice((1, 2, 3)),
                    created=10 + rng.randint(0, 3),
                    cpu=str(rng.randint(1, 3)),
                )
            )
    return objects


@interpreted_only
@pytest.mark.parametrize("seed", range(200))
def test_fair_preemption_in_a_crowded_cohort_decides_as_when_recomputed(seed: int) -> None:
    objects = _crowded(seed)
    kept = _decide_all(copy.deepcopy(objects))
    with (
        patch("kadmit.engine.cycle.Tournament", _ReferenceTournament),
        patch("kadmit.engine.fair_sharing._TargetOrdering", _ReferenceOrdering),
        patch("kadmit.engine.fair_sharing._none_pass", _walk_always),
        patch(
            "kadmit.engine.fair_sharing.Shares.of",
            lambda self, node: dominant_resource_share(node, self.weight_of(node)),
        ),
    ):
        recomputed = _decide_all(copy.deepcopy(objects))
    assert kept == recomputed


def test_a_sibling_below_the_preemptor_is_reclaimed_from_once_its_own_candidates_are_gone() -> None:
    """The preemptor's share falls as its own lower-priority workloads are taken, so a sibling
    whose share is below the preemptor's at the start may still lose one (the search leaves a
    sibling out only below the preemptor's share without its own candidates)."""
    engine = Engine(fair_sharing=True)
    objects: list[dict[str, Any]] = [flavor("f"), cohort("team", groups=quotas({"f": {"cpu": 6}}))]
    preemption = {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}
    for name in ("a", "b"):
        objects.append(cluster_queue(name, quotas({"f": {"cpu": 0}}), cohort="team", preemption=preemption))
        objects.append(local_queue(f"lq-{name}", name))
    for name, count in (("a", 2), ("b", 4)):
        for i in range(count):
            status = admitted_status(name, {"cpu": "f"}, {"cpu": "1"}, at=float(i))
            objects.append(workload(f"{name}-run{i}", f"lq-{name}", priority=0, created=i, status=status))
    objects.append(workload("a-next", "lq-a", priority=5, created=10, cpu="3"))
    for obj in objects:
        engine.upsert(obj)
    decisions = engine.schedule(1000.0)
    taken = sorted((p.victim[1], p.reason) for p in decisions.preemptions)
    assert taken == [
        ("a-run0", "InClusterQueue"),
        ("a-run1", "InClusterQueue"),
        ("b-run3", "InCohortFairSharing"),
    ]
