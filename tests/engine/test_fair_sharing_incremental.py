"""Fair sharing kept incrementally gives what recomputing from scratch gives.

The tournament keeps the winners below each node between picks, and :class:`Shares` keeps each
node's share while its usage is unchanged; on random cohort trees (nested cohorts, lending and
borrowing limits, weights including 0) with usage changing between picks, anywhere in the tree,
each pick and each share equals the one computed afresh.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from fractions import Fraction

import pytest

from kadmit.engine.fair_sharing import Contender, Shares, Tournament, dominant_resource_share
from kadmit.engine.model import FlavorResource
from kadmit.engine.quota import QuotaNode, add_usage, compute_quotas

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
