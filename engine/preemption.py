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
    PreemptionPolicy,
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
    include_others = policy.reclaim_within_cohort != NEVER and not (
        policy.borrow_within_cohort == NEVER and not below_nominal
    )
    nodes, same_cq, by_queue = collect_candidates(preemptor, needed, holders(include_others), include_others)
    # (candidate, from another queue, may be taken only without borrowing)
    ordered: list[tuple[Candidate, bool, bool]] = [
        (wl, True, _only_without_borrowing(policy, preemptor, wl))
        for group in by_queue.values()
        for wl in group
    ]
    if not ordered and not same_cq:
        return []
    has_others = bool(ordered)
    ordered += [(wl, False, False) for wl in same_cq]
    ordered.sort(key=lambda c: candidate_order(c[0], own_queue=not c[1]))
    if not has_others or (policy.borrow_within_cohort == NEVER and not below_nominal):
        attempts = [True]
    elif policy.borrow_within_cohort == NEVER:
        attempts = [False, True]
    else:
        attempts = [True, False]
    for allow_borrowing in attempts:
        allowed = [wl for wl, other, wob in ordered if not (allow_borrowing and other and wob)]
        if not _could_fit(preemptor, allowed):
            continue
        chosen = _attempt(preemptor, allowed, nodes, allow_borrowing)
        if chosen:
            return chosen
    return []


def _only_without_borrowing(policy: PreemptionPolicy, preemptor: Preemptor, wl: Candidate) -> bool:
    """borrowWithinCohort: another queue's candidate the preemptor may not take while borrowing."""
    return (
        policy.borrow_within_cohort == NEVER
        or wl.priority >= preemptor.priority
        or (policy.max_priority_threshold is not None and wl.priority > policy.max_priority_threshold)
    )


def collect_candidates(
    preemptor: Preemptor,
    needed: set[FlavorResource],
    holders: Iterable[tuple[QuotaNode, ClusterQueue, Iterable[Candidate]]],
    include_others: bool,
) -> tuple[dict[str, QuotaNode], list[Candidate], dict[str, list[Candidate]]]:
    """The quota nodes by ClusterQueue, and the workloads holding something ``needed`` that the
    preemptor's policy lets it take: in its own queue per ``withinClusterQueue``; in other queues
    of the cohort (by queue, when ``include_others``) per ``reclaimWithinCohort``, and only while
    that queue borrows on what is needed. Classical preemption and fair sharing alike."""
    policy = preemptor.cq.preemption
    nodes: dict[str, QuotaNode] = {}
    same_queue: list[Candidate] = []
    other_queues: dict[str, list[Candidate]] = {}
    reclaim = include_others and policy.reclaim_within_cohort != NEVER
    for node, cq, workloads in holders:
        nodes[cq.name] = node
        own = cq.name == preemptor.cq.name
        if not own and not (reclaim and _borrows(node, needed)):
            continue
        for wl in workloads:
            if needed.isdisjoint(wl.charged):
                continue
            if own:
                if within_cluster_queue_allows(policy.within_cluster_queue, preemptor, wl):
                    same_queue.append(wl)
            elif policy.reclaim_within_cohort != LOWER_PRIORITY or wl.priority < preemptor.priority:
                other_queues.setdefault(cq.name, []).append(wl)
    return nodes, same_queue, other_queues


def _borrows(node: QuotaNode, needed: set[FlavorResource]) -> bool:
    return any(node.usage.get(fr, 0) > node.subtree.get(fr, 0) for fr in needed)


def candidate_order(wl: Candidate, own_queue: bool = False) -> tuple[bool, bool, int, float, str]:
    """Kueue's ``CandidatesOrdering``: evicted first, other queues' before the preemptor's own,
    lower priority first, most recently reserved first, then UID."""
    return (not wl.evicted, own_queue, wl.priority, -wl.reserved_at, wl.uid)


def _could_fit(preemptor: Preemptor, allowed: list[Candidate]) -> bool:
    """Cheap upper bound: even removing every allowed candidate cannot free enough."""
    node = preemptor.node
    for fr, value in preemptor.usage.items():
        if value > available(node, fr) + sum(wl.charged.get(fr, 0) for wl in allowed):
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


class Simulation:
    """Victims taken off the live quota tree one at a time; on leaving the ``with`` block every
    one still taken is put back, so the tree is exactly as it was."""

    def __init__(self, nodes: Mapping[str, QuotaNode]) -> None:
        self.nodes = nodes
        self.removed: list[Candidate] = []

    def __enter__(self) -> Simulation:
        return self

    def __exit__(self, *_: object) -> None:
        for wl in self.removed:
            self._charge(wl, 1)
        self.removed = []

    def _charge(self, wl: Candidate, sign: int) -> None:
        add_usage(self.nodes[wl.reserved_in or ""], wl.charged, sign)

    def remove(self, wl: Candidate) -> None:
        self._charge(wl, -1)
        self.removed.append(wl)

    def minimal(self, fits: Callable[[], bool]) -> list[Candidate]:
        """Kueue's fill-back: put back, newest choice excluded, every victim the preemptor can
        do without (the rest stay removed until the block ends)."""
        if not self.removed:
            return []
        kept = [self.removed[-1]]
        for wl in reversed(self.removed[:-1]):
            self._charge(wl, 1)
            if fits():
                continue
            self._charge(wl, -1)
            kept.append(wl)
        self.removed = kept
        return list(kept)


def _attempt(
    preemptor: Preemptor,
    allowed: list[Candidate],
    nodes: Mapping[str, QuotaNode],
    allow_borrowing: bool,
) -> list[Target]:
    with Simulation(nodes) as simulation:
        for wl in allowed:
            simulation.remove(wl)
            if _fits(preemptor, allow_borrowing):
                break
        else:
            return []
        kept = simulation.minimal(lambda: _fits(preemptor, allow_borrowing))
        borrowing = _borrows_after(preemptor)
        own_queue = preemptor.cq.name
        targets = []
        for wl in kept:
            if wl.reserved_in == own_queue:
                reason = IN_CLUSTER_QUEUE
            elif borrowing:
                reason = IN_COHORT_RECLAIM_WHILE_BORROWING
            else:
                reason = IN_COHORT_RECLAMATION
            targets.append(Target(wl, reason))
        return targets


__all__ = ["ANY", "HUMAN_REASON", "Preemptor", "Target", "find_targets"]
