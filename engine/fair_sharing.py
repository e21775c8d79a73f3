"""Fair sharing (kueue-contract §5.5): Dominant Resource Share, the admission tournament and the
preemption strategies, used when the Configuration has a ``fairSharing`` block.

Shares are exact fractions (``borrowed * 1000 / lendable`` per resource, the largest divided by
the node's weight); a node with weight 0 that borrows has an infinite share.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from fractions import Fraction

from kadmit.engine.model import ClusterQueue, FlavorResource, WorkloadKey
from kadmit.engine.preemption import (
    IN_CLUSTER_QUEUE,
    IN_COHORT_FAIR_SHARING,
    IN_COHORT_RECLAMATION,
    Candidate,
    Preemptor,
    Ranked,
    Simulation,
    Target,
    candidate_order,
    collect_candidates,
)
from kadmit.engine.quota import QuotaNode, available, potential_available

LESS_THAN_OR_EQUAL_TO_FINAL_SHARE = "LessThanOrEqualToFinalShare"
LESS_THAN_INITIAL_SHARE = "LessThanInitialShare"
DEFAULT_STRATEGIES = (LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, LESS_THAN_INITIAL_SHARE)
ACCEPTED_STRATEGIES = (
    (LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,),
    (LESS_THAN_INITIAL_SHARE,),
    DEFAULT_STRATEGIES,
)
MAX_INT64 = 2**63 - 1

Share = Fraction | float
"""An exact share, or ``math.inf`` for a weight-0 node that borrows."""


def dominant_resource_share(
    node: QuotaNode, weight: Fraction, extra: Mapping[FlavorResource, int] | None = None
) -> Share:
    """DRS of ``node`` (with ``extra`` usage added, e.g. a candidate workload's request)."""
    parent = node.parent
    if parent is None:
        return Fraction(0)
    borrowed: dict[str, int] = {}
    keys = set(node.usage) | set(extra or ())
    for fr in keys:
        over = node.usage.get(fr, 0) + (extra or {}).get(fr, 0) - node.subtree.get(fr, 0)
        if over > 0:
            borrowed[fr[1]] = borrowed.get(fr[1], 0) + over
    if not borrowed:
        return Fraction(0)
    if weight == 0:
        return math.inf
    root = parent.root
    best: Fraction | None = None
    for resource in sorted(borrowed):
        lendable = sum(potential_available(parent, fr) for fr in root.subtree if fr[1] == resource)
        if lendable <= 0:
            return math.inf
        ratio = Fraction(borrowed[resource] * 1000, lendable)
        if best is None or ratio > best:
            best = ratio
    assert best is not None
    return best / weight


def weighted_share(share: Share) -> int:
    """``status.fairSharing.weightedShare``: ceil(DRS), MaxInt64 for an infinite share."""
    if share == math.inf:
        return MAX_INT64
    return math.ceil(share)


def tournament(
    heads: Mapping[str, tuple[Ranked, Mapping[FlavorResource, int]]],
    nodes: Mapping[str, QuotaNode],
    weight_of: Callable[[QuotaNode], Fraction],
) -> str:
    """The ClusterQueue whose head goes next: at each cohort, from the root down, the child that
    (1) does not borrow on what it asks before one that does, (2) has the lower share after
    admitting its candidate, (3) higher priority, (4) older timestamp."""

    def key(node: QuotaNode, head: Ranked, usage: Mapping[FlavorResource, int]) -> tuple[object, ...]:
        borrows = any(node.usage.get(fr, 0) + v > node.subtree.get(fr, 0) for fr, v in usage.items())
        share = dominant_resource_share(node, weight_of(node), usage)
        return (borrows, share, -head.priority, head.timestamp, head.uid)

    def winner(node: QuotaNode) -> tuple[str, Ranked, Mapping[FlavorResource, int]] | None:
        if not node.is_cohort:
            if node.name in heads:
                head, usage = heads[node.name]
                return node.name, head, usage
            return None
        best: tuple[tuple[object, ...], str, Ranked, Mapping[FlavorResource, int]] | None = None
        for child in node.children:
            found = winner(child)
            if found is None:
                continue
            name, head, usage = found
            k = key(child, head, usage)
            if best is None or k < best[0]:
                best = (k, name, head, usage)
        return None if best is None else (best[1], best[2], best[3])

    roots: dict[str, QuotaNode] = {}
    for name in heads:
        root = nodes[name].root
        roots[root.name] = root
    ranked: list[tuple[tuple[object, ...], str]] = []
    for root in roots.values():
        found = winner(root)
        if found is not None:
            name, head, _ = found
            ranked.append(((-head.priority, head.timestamp, head.uid), name))
    ranked.sort()
    return ranked[0][1]


def fair_targets(
    preemptor: Preemptor,
    needed: Iterable[FlavorResource],
    holders: Sequence[tuple[QuotaNode, ClusterQueue, Iterable[Candidate]]],
    weight_of: Callable[[QuotaNode], Fraction],
    strategies: Sequence[str] = DEFAULT_STRATEGIES,
) -> list[Target]:
    """Victims under fair sharing, or ``[]``: same-queue candidates directly, other queues'
    candidates while the preemptor is within nominal, else by the share strategies."""
    needed = set(needed)
    own_node = preemptor.node
    nodes, same, others = collect_candidates(preemptor, needed, holders, include_others=True)
    same.sort(key=candidate_order)
    for group in others.values():
        group.sort(key=candidate_order)
    reasons: dict[WorkloadKey, str] = {}

    def fits() -> bool:
        return all(v <= available(own_node, fr) for fr, v in preemptor.usage.items())

    with Simulation(nodes) as simulation:

        def take(wl: Candidate, reason: str) -> None:
            simulation.remove(wl)
            reasons[wl.key] = reason

        for wl in same:
            if fits():
                break
            take(wl, IN_CLUSTER_QUEUE)
        within_nominal = all(
            own_node.usage.get(fr, 0) + preemptor.usage.get(fr, 0) <= own_node.nominal.get(fr, 0)
            for fr in needed
        )
        for strategy in strategies:
            progress = True
            while progress and not fits():
                progress = False
                ranked = sorted(
                    others, key=lambda n: (_neg(_share(nodes[n], weight_of)), n)
                )  # descending share
                for name in ranked:
                    if not others[name]:
                        continue
                    wl = others[name][0]
                    if within_nominal:
                        reason = IN_COHORT_RECLAMATION
                    elif _strategy_allows(strategy, preemptor, own_node, nodes[name], wl, weight_of):
                        reason = IN_COHORT_FAIR_SHARING
                    else:
                        continue
                    others[name].pop(0)
                    take(wl, reason)
                    progress = True
                    break
        if not fits():
            return []
        return [Target(wl, reasons[wl.key]) for wl in simulation.minimal(fits)]


def _neg(share: Share) -> Share:
    return -share


def _share(node: QuotaNode, weight_of: Callable[[QuotaNode], Fraction]) -> Share:
    return dominant_resource_share(node, weight_of(node))


def _strategy_allows(
    strategy: str,
    preemptor: Preemptor,
    own: QuotaNode,
    target: QuotaNode,
    wl: Candidate,
    weight_of: Callable[[QuotaNode], Fraction],
) -> bool:
    """Compare shares at the children of the two queues' lowest common ancestor."""
    mine, theirs = _below_common_ancestor(own, target)
    new_share = dominant_resource_share(mine, weight_of(mine), preemptor.usage)
    before = dominant_resource_share(theirs, weight_of(theirs))
    if strategy == LESS_THAN_INITIAL_SHARE:
        return new_share < before
    removal = {fr: -v for fr, v in wl.charged.items()}
    after = dominant_resource_share(theirs, weight_of(theirs), removal)
    return new_share <= after


def _below_common_ancestor(a: QuotaNode, b: QuotaNode) -> tuple[QuotaNode, QuotaNode]:
    ancestors_a = []
    node: QuotaNode | None = a
    while node is not None:
        ancestors_a.append(node)
        node = node.parent
    ancestors_b = []
    node = b
    while node is not None:
        ancestors_b.append(node)
        node = node.parent
    while len(ancestors_a) > 1 and len(ancestors_b) > 1 and ancestors_a[-2] is ancestors_b[-2]:
        ancestors_a.pop()
        ancestors_b.pop()
    return ancestors_a[-2] if len(ancestors_a) > 1 else a, ancestors_b[-2] if len(ancestors_b) > 1 else b
