"""Classical preemption (Kueue's ``preemption.go`` and ``classical/``): who may be evicted.

Candidates are workloads holding quota on a (flavor, resource) the preemptor needs: in its own
ClusterQueue per ``withinClusterQueue``, in other ClusterQueues of the same cohort tree per
``reclaimWithinCohort`` / ``borrowWithinCohort`` (and only while their queue borrows). They are
removed greedily in Kueue's order in a simulation on the live quota tree, which is restored
exactly afterwards, until the preemptor fits; then unneeded ones are put back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from kadmit.engine.model import (
    ANY,
    LOWER_OR_NEWER_EQUAL_PRIORITY,
    LOWER_PRIORITY,
    NEVER,
    ClusterQueue,
    FlavorResource,
    WorkloadKey,
)
from kadmit.engine.quota import QuotaNode, add_usage, available

IN_CLUSTER_QUEUE = "InClusterQueue"
IN_COHORT_RECLAMATION = "InCohortReclamation"
IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"
IN_COHORT_FAIR_SHARING = "InCohortFairSharing"

HUMAN_REASON = {
    IN_CLUSTER_QUEUE: "prioritization in the ClusterQueue",
    IN_COHORT_RECLAMATION: "reclamation within the cohort",
    IN_COHORT_RECLAIM_WHILE_BORROWING: "reclamation within the cohort while borrowing",
    IN_COHORT_FAIR_SHARING: "Fair Sharing within the cohort",
}


class Ranked(Protocol):
    """A workload as Kueue ranks it: priority, then creation time, then UID (a fair-sharing
    tournament's heads, preemption's candidates)."""

    @property
    def priority(self) -> int: ...
    @property
    def timestamp(self) -> float: ...
    @property
    def uid(self) -> str: ...


class Candidate(Ranked, Protocol):
    """What preemption needs to know about a workload that holds quota."""

    @property
    def key(self) -> WorkloadKey: ...
    @property
    def reserved_in(self) -> str | None: ...
    @property
    def charged(self) -> Mapping[FlavorResource, int]: ...
    @property
    def reserved_at(self) -> float: ...
    @property
    def evicted(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class Target:
    workload: Candidate
    reason: str


@dataclass(frozen=True, slots=True)
class Preemptor:
    cq: ClusterQueue
    node: QuotaNode
    priority: int
    timestamp: float
    usage: Mapping[FlavorResource, int]


def _fits(preemptor: Preemptor, allow_borrowing: bool) -> bool:
    node = preemptor.node
    for fr, value in preemptor.usage.items():
        if value > available(node, fr):
            return False
        if not allow_borrowing and node.usage.get(fr, 0) + value > node.subtree.get(fr, 0):
            return False
    return True


def _borrows_after(preemptor: Preemptor) -> bool:
    node = preemptor.node
    return any(node.usage.get(fr, 0) + v > node.subtree.get(fr, 0) for fr, v in preemptor.usage.items())


def find_targets(
    preemptor: Preemptor,
    needed: Iterable[FlavorResource],
    holders: Callable[[bool], Iterable[tuple[QuotaNode, ClusterQueue, Iterable[Candidate]]]],
) -> list[Target]:
    """Kueue's minimal victim set for ``preemptor``, or ``[]`` if preemption cannot make it fit.

    ``holders(others)`` lists the preemptor's ClusterQueue (and, when ``others``, every other
    ClusterQueue of its cohort tree that may lose workloads) with its quota node, spec and the
    workloads that hold quota there.
    """
    needed = set(needed)
    if not needed:
        return []
    policy = preemptor.cq.preemption
    node = preemptor.node
    below_nominal = all(node.usage.get(fr, 0) < node.nominal.get(fr, 0) for fr in needed)
    # With borrowWithinCohort Never and the queue at or above nominal, only the [allowBorrowing]
    # attempt runs, and it skips every other-queue candidate: do not even collect them.
    others_useless = policy.borrow_within_cohort == NEVER and not below_nominal
    same_cq: list[Candidate] = []
    other_cq: list[tuple[Candidate, bool]] = []  # (candidate, reclaim-without-borrowing only)
    nodes: dict[str, QuotaNode] = {}
    include_others = policy.reclaim_within_cohort != NEVER and not others_useless
    for node, cq, workloads in holders(include_others):
        nodes[cq.name] = node
        own = cq.name == preemptor.cq.name
        if not own:
            if policy.reclaim_within_cohort == NEVER or others_useless:
                continue
            if not any(node.usage.get(fr, 0) > node.subtree.get(fr, 0) for fr in needed):
                continue
        for wl in workloads:
            if needed.isdisjoint(wl.charged):
                continue
            if own:
                if within_cluster_queue_allows(policy.within_cluster_queue, preemptor, wl):
                    same_cq.append(wl)
                continue
            if policy.reclaim_within_cohort == LOWER_PRIORITY and wl.priority >= preemptor.priority:
                continue
            without_borrowing = (
                policy.borrow_within_cohort == NEVER
                or wl.priority >= preemptor.priority
                or (policy.max_priority_threshold is not None and wl.priority > policy.max_priority_threshold)
            )
            other_cq.append((wl, without_borrowing))
    if not same_cq and not other_cq:
        return []
    ordered: list[tuple[Candidate, bool, bool]] = [(wl, True, wob) for wl, wob in other_cq]
    ordered += [(wl, False, False) for wl in same_cq]
    ordered.sort(key=lambda c: (not c[0].evicted, not c[1], c[0].priority, -c[0].reserved_at, c[0].uid))
    if not other_cq or (policy.borrow_within_cohort == NEVER and not below_nominal):
        attempts = [True]
    elif policy.borrow_within_cohort == NEVER:
        attempts = [False, True]
    else:
        attempts = [True, False]
    for allow_borrowing in attempts:
        if not _could_fit(preemptor, ordered, allow_borrowing):
            continue
        chosen = _attempt(preemptor, ordered, nodes, allow_borrowing)
        if chosen:
            return chosen
    return []


def _could_fit(
    preemptor: Preemptor, ordered: list[tuple[Candidate, bool, bool]], allow_borrowing: bool
) -> bool:
    """Cheap upper bound: even removing every allowed candidate cannot free enough."""
    node = preemptor.node
    for fr, value in preemptor.usage.items():
        freeable = sum(
            wl.charged.get(fr, 0) for wl, other, wob in ordered if not (allow_borrowing and other and wob)
        )
        if value > available(node, fr) + freeable:
            return False
    return True


def within_cluster_queue_allows(policy: str, preemptor: Preemptor, wl: Candidate) -> bool:
    """withinClusterQueue eligibility of a same-queue candidate (classical and fair sharing alike)."""
    if policy == LOWER_PRIORITY:
        return wl.priority < preemptor.priority
    if policy == LOWER_OR_NEWER_EQUAL_PRIORITY:
        return wl.priority < preemptor.priority or (
            wl.priority == preemptor.priority and wl.timestamp > preemptor.timestamp
        )
    return False


def _attempt(
    preemptor: Preemptor,
    ordered: list[tuple[Candidate, bool, bool]],
    nodes: Mapping[str, QuotaNode],
    allow_borrowing: bool,
) -> list[Target]:
    removed: list[tuple[Candidate, bool]] = []
    fits = False
    try:
        for wl, other, without_borrowing in ordered:
            if allow_borrowing and other and without_borrowing:
                continue
            add_usage(nodes[wl.reserved_in or ""], wl.charged, -1)
            removed.append((wl, other))
            if _fits(preemptor, allow_borrowing):
                fits = True
                break
        if not fits:
            return []
        # Put back, newest choice excluded, every victim the preemptor can do without.
        kept = [removed[-1]]
        for wl, other in reversed(removed[:-1]):
            add_usage(nodes[wl.reserved_in or ""], wl.charged, 1)
            if _fits(preemptor, allow_borrowing):
                continue
            add_usage(nodes[wl.reserved_in or ""], wl.charged, -1)
            kept.append((wl, other))
        removed = kept
        borrowing = _borrows_after(preemptor)
        targets = []
        for wl, other in kept:
            if not other:
                reason = IN_CLUSTER_QUEUE
            elif borrowing:
                reason = IN_COHORT_RECLAIM_WHILE_BORROWING
            else:
                reason = IN_COHORT_RECLAMATION
            targets.append(Target(wl, reason))
        return targets
    finally:
        for wl, _ in removed:
            add_usage(nodes[wl.reserved_in or ""], wl.charged, 1)


__all__ = ["ANY", "HUMAN_REASON", "Preemptor", "Target", "find_targets"]
