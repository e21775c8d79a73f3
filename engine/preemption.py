"""Classical preemption (Kueue's ``preemption.go`` and ``classical/``): who may be evicted.

Candidates are workloads holding quota on a (flavor, resource) the preemptor needs: in its own
ClusterQueue per ``withinClusterQueue``, in other ClusterQueues of the same cohort tree per
``reclaimWithinCohort`` / ``borrowWithinCohort`` (and only while their queue borrows). They are
removed greedily in Kueue's order in a simulation on the live quota tree, which is restored
exactly afterwards, until the preemptor fits; then unneeded ones are put back.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from operator import attrgetter, itemgetter
from typing import Any, Protocol

from kadmit.engine.model import (
    ANY,
    LOWER_OR_NEWER_EQUAL_PRIORITY,
    LOWER_PRIORITY,
    NEVER,
    ClusterQueue,
    FlavorResource,
    WorkloadKey,
)
from kadmit.engine.quota import (
    Marks,
    QuotaNode,
    add_usage,
    available,
    local_available,
    restore_marks,
    save_marks,
)

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


@dataclass(frozen=True, slots=True, init=False)
class Target:
    workload: Candidate
    reason: str

    def __init__(self, workload: Candidate, reason: str) -> None:
        # Written out, as the decisions' are (see kadmit.engine.decisions): made for each victim.
        object.__setattr__(self, "workload", workload)
        object.__setattr__(self, "reason", reason)


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


WITHIN_CQ = 1
HIERARCHICAL_RECLAIM = 2
RECLAIM_WITHOUT_BORROWING = 3
RECLAIM_WHILE_BORROWING = 4
"""Kueue's ``preemptionVariant`` of a candidate (``classical/hierarchical_preemption.go``)."""

_VARIANT_REASON = {
    WITHIN_CQ: IN_CLUSTER_QUEUE,
    HIERARCHICAL_RECLAIM: IN_COHORT_RECLAMATION,
    RECLAIM_WITHOUT_BORROWING: IN_COHORT_RECLAMATION,
    RECLAIM_WHILE_BORROWING: IN_COHORT_RECLAIM_WHILE_BORROWING,
}


@dataclass(slots=True)
class _Candidate:
    wl: Candidate
    node: QuotaNode
    lca: QuotaNode | None
    """The lowest common ancestor of its queue and the preemptor's (None: the same queue)."""
    variant: int


def _within_nominal(node: QuotaNode, needed: Iterable[FlavorResource]) -> bool:
    """Kueue's ``IsWithinNominalInResources``: the node uses no more than its subtree's quota."""
    usage, subtree = node.usage, node.subtree
    return all(usage.get(fr, 0) <= subtree.get(fr, 0) for fr in needed)


def _fits_in_quota(
    node: QuotaNode, requests: Mapping[FlavorResource, int]
) -> tuple[bool, dict[FlavorResource, int]]:
    """Kueue's ``QuantitiesFitInQuota``: whether ``requests`` fit in the node's subtree quota,
    and what is left once its never-lent quota took its part (asked of its parent next)."""
    fits = True
    remaining: dict[FlavorResource, int] = {}
    for fr, value in requests.items():
        if node.subtree.get(fr, 0) < node.usage.get(fr, 0) + value:
            fits = False
        remaining[fr] = max(0, value - local_available(node, fr))
    return fits, remaining


def find_targets(
    preemptor: Preemptor,
    needed: Iterable[FlavorResource],
    holders: Callable[[bool], Iterable[tuple[QuotaNode, ClusterQueue, Iterable[Candidate]]]],
    lq_usage: Callable[[Candidate], tuple[Hashable, float] | None] | None = None,
) -> list[Target]:
    """Kueue's classical minimal victim set for ``preemptor``, or ``[]`` if preemption cannot
    make it fit (``classicalPreemptions`` and its candidate iterator).

    ``holders(others)`` lists the preemptor's ClusterQueue (and, when ``others``, every other
    ClusterQueue of its cohort tree that may lose workloads) with its quota node, spec and the
    workloads that hold quota there. Candidates of other queues are of two kinds: those over
    which the preemptor has a *hierarchical advantage* (they use quota of a subtree that would
    hold the preemptor's request, and the preemptor is closer to it: taken whatever their
    priority, as far as ``reclaimWithinCohort`` allows, even while the preemptor borrows), and
    the others, for which ``borrowWithinCohort`` decides whether the preemptor may borrow.

    ``lq_usage`` (Admission Fair Sharing on): a candidate's LocalQueue and its usage, when its
    ClusterQueue orders by it (else None); of two candidates of one ClusterQueue from different
    LocalQueues, the one whose LocalQueue used more goes first (Kueue's ``CandidatesOrdering``).
    """
    needed = set(needed)
    if not needed:
        return []
    policy = preemptor.cq.preemption
    node = preemptor.node
    borrow_forbidden = policy.borrow_within_cohort == NEVER
    under_nominal = all(node.usage.get(fr, 0) < node.nominal.get(fr, 0) for fr in needed)
    parent = node.parent
    # In a flat cohort only a request that fits the queue's own quota has an advantage, which it
    # cannot have at or above nominal; then, with borrowWithinCohort Never, only the
    # [allowBorrowing] attempt runs and it skips every other-queue candidate: collect none.
    include_others = (
        parent is not None
        and policy.reclaim_within_cohort != NEVER
        and not (borrow_forbidden and not under_nominal and parent.parent is None)
    )
    nodes: dict[str, QuotaNode] = {}
    by_node: dict[int, Iterable[Candidate]] = {}
    for holder_node, cq, workloads in holders(include_others):
        nodes[cq.name] = holder_node
        by_node[id(holder_node)] = workloads
    same: list[_Candidate] = []
    if policy.within_cluster_queue != NEVER:
        for wl in by_node.get(id(node), ()):
            if not needed.isdisjoint(wl.charged) and within_cluster_queue_allows(
                policy.within_cluster_queue, preemptor, wl
            ):
                same.append(_Candidate(wl, node, None, WITHIN_CQ))
    hierarchy: list[_Candidate] = []
    by_priority: list[_Candidate] = []
    if include_others and parent is not None:
        threshold = policy.max_priority_threshold

        def variant_of(wl: Candidate, advantage: bool) -> int:
            if advantage:
                return HIERARCHICAL_RECLAIM
            if borrow_forbidden or wl.priority >= preemptor.priority:
                return RECLAIM_WITHOUT_BORROWING
            if threshold is not None and wl.priority > threshold:
                return RECLAIM_WITHOUT_BORROWING
            return RECLAIM_WHILE_BORROWING

        advantage, remaining = _fits_in_quota(node, preemptor.usage)
        previous: QuotaNode | None = None
        current: QuotaNode | None = parent
        while current is not None:
            _collect_reclaimable(current, current, previous, node, needed, by_node, preemptor,
                                 variant_of, advantage, hierarchy if advantage else by_priority)
            fits, remaining = _fits_in_quota(current, remaining)
            advantage = advantage or fits
            previous = current
            current = current.parent
    if not same and not hierarchy and not by_priority:
        return []

    def order(c: _Candidate) -> tuple[bool, bool, int, float, str]:
        return candidate_order(c.wl, own_queue=c.node is node)

    for group in (hierarchy, by_priority, same):
        if lq_usage is None:
            group.sort(key=order)
        else:
            group[:] = afs_order(group, node, lq_usage, attrgetter("node"), attrgetter("wl"))
    ordered: list[_Candidate] = []
    for evicted in (True, False):
        for group in (hierarchy, by_priority, same):
            ordered.extend(c for c in group if c.wl.evicted is evicted)
    if (not hierarchy and not by_priority) or (borrow_forbidden and not under_nominal):
        attempts = [True]
    elif borrow_forbidden and not hierarchy:
        attempts = [False, True]
    else:
        attempts = [True, False]
    for allow_borrowing in attempts:
        allowed = [c for c in ordered if not (allow_borrowing and c.variant == RECLAIM_WITHOUT_BORROWING)]
        if not _could_fit(preemptor, [c.wl for c in allowed]):
            continue
        chosen = _attempt(preemptor, allowed, nodes, allow_borrowing, needed)
        if chosen:
            return chosen
    return []


def _collect_reclaimable(
    current: QuotaNode,
    lca: QuotaNode,
    skip: QuotaNode | None,
    own: QuotaNode,
    needed: set[FlavorResource],
    by_node: dict[int, Iterable[Candidate]],
    preemptor: Preemptor,
    variant: Callable[[Candidate, bool], int],
    advantage: bool,
    out: list[_Candidate],
) -> None:
    """Append to ``out`` the candidates under ``current`` (but not under ``skip`` or ``own``) that
    ``reclaimWithinCohort`` lets the preemptor take, from the queues that use more than their
    subtree's quota of what is needed, depth first.

    A module function, not a closure in :func:`find_targets`: a closure that calls itself holds
    its own cell, and that cycle kept every search's candidates alive until the next garbage
    collection found it (most of the cyclic garbage kadmit made in Kueue's scalability test)."""
    policy = preemptor.cq.preemption.reclaim_within_cohort
    for child in current.children:
        if child is skip or child is own or _within_nominal(child, needed):
            continue
        if child.is_cohort:
            _collect_reclaimable(child, lca, skip, own, needed, by_node, preemptor, variant, advantage, out)
            continue
        for wl in by_node.get(id(child), ()):
            if needed.isdisjoint(wl.charged):
                continue
            if reclaim_allows(policy, preemptor, wl):
                out.append(_Candidate(wl, child, lca, variant(wl, advantage)))


def reclaim_allows(policy: str, preemptor: Preemptor, wl: Candidate) -> bool:
    """reclaimWithinCohort eligibility of another queue's candidate (Kueue's
    ``SatisfiesPreemptionPolicy``)."""
    if policy == ANY:
        return True
    return within_cluster_queue_allows(policy, preemptor, wl)


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
    lower_only = policy.reclaim_within_cohort == LOWER_PRIORITY
    priority = preemptor.priority
    disjoint = needed.isdisjoint
    for node, cq, workloads in holders:
        nodes[cq.name] = node
        if cq.name == preemptor.cq.name:
            same_queue += own_candidates(preemptor, needed, workloads)
            continue
        if not (reclaim and _borrows(node, needed)):
            continue
        # a search looks at every workload of the borrowing queues: one pass, no call per workload
        if lower_only:
            taken = [wl for wl in workloads if not disjoint(wl.charged) and wl.priority < priority]
        else:
            taken = [wl for wl in workloads if not disjoint(wl.charged)]
        if taken:
            other_queues[cq.name] = taken
    return nodes, same_queue, other_queues


def own_candidates(
    preemptor: Preemptor, needed: set[FlavorResource], workloads: Iterable[Candidate]
) -> list[Candidate]:
    """The workloads of the preemptor's own queue that its ``withinClusterQueue`` lets it take
    and that hold something ``needed``."""
    within = preemptor.cq.preemption.within_cluster_queue
    disjoint = needed.isdisjoint
    allows = within_cluster_queue_allows
    return [wl for wl in workloads if not disjoint(wl.charged) and allows(within, preemptor, wl)]


def _borrows(node: QuotaNode, needed: set[FlavorResource]) -> bool:
    return any(node.usage.get(fr, 0) > node.subtree.get(fr, 0) for fr in needed)


def candidate_order(wl: Candidate, own_queue: bool = False) -> tuple[bool, bool, int, float, str]:
    """Kueue's ``CandidatesOrdering``: evicted first, other queues' before the preemptor's own,
    lower priority first, most recently reserved first, then UID."""
    return (not wl.evicted, own_queue, wl.priority, -wl.reserved_at, wl.uid)


AfsKey = tuple[bool, bool, float, int, float, str]
"""A candidate's place among its ClusterQueue's under Admission Fair Sharing (:func:`afs_key`)."""


def afs_key(wl: Candidate, own_queue: bool, usage: tuple[Hashable, float] | None) -> AfsKey:
    """A candidate's place among its own ClusterQueue's candidates under Admission Fair Sharing:
    :func:`candidate_order` with its LocalQueue's usage (``usage``, None when its queue does not
    order by it) between the queue and the priority, the higher usage first. Kueue's comparator
    compares two candidates of one ClusterQueue by usage only when their LocalQueues differ and
    so do the usages; the LocalQueues of one ClusterQueue either all have a usage or none does,
    and one LocalQueue has one usage, so within one ClusterQueue that comparator is this key."""
    used = -usage[1] if usage is not None else 0.0
    return (not wl.evicted, own_queue, used, wl.priority, -wl.reserved_at, wl.uid)


def afs_order(
    items: list[Any],
    own: QuotaNode,
    lq_usage: Callable[[Candidate], tuple[Hashable, float] | None],
    node_of: Callable[[Any], QuotaNode],
    wl_of: Callable[[Any], Candidate],
    merge: bool = True,
) -> list[Any]:
    """``items`` (whose candidate and quota node ``wl_of`` and ``node_of`` give) in Admission
    Fair Sharing's candidate order, a defined one: each ClusterQueue's candidates sorted by
    :func:`afs_key`, then the ClusterQueues' lists merged, the next item always the first by
    :func:`candidate_order` among the lists' first items.

    Kueue sorts the candidates with its ``CandidatesOrdering`` comparator, which puts the
    LocalQueue usage between the queue and the priority for two candidates of one ClusterQueue
    only. That comparator is not a strict weak order: two candidates of one ClusterQueue ordered
    by usage against their priority, and one of another ClusterQueue whose priority lies between
    theirs, form a cycle (a < b by usage, b < c and c < a by priority). A sort with it gives an
    order that depends on the input's order and the sort algorithm (Go's ``slices.SortFunc`` and
    Python's sort already differ). This order is a function of the set of candidates, keeps
    each ClusterQueue's candidates in the comparator's order (where it is consistent), and on
    every input on which the comparator is a strict weak order it is the comparator's sorted
    order (uids make it total): were y placed after x with y before x by the comparator, x was
    chosen while y's queue offered y' (y' = y or before y in its queue); x before y' and y' not
    after y give x before y in a strict weak order, a contradiction.

    Cheaper than sorting with the comparator too: each queue is sorted by a key, and the merge is
    one more sort by a key (below). ``merge=False``, for a caller that reads each ClusterQueue's
    candidates in order and never one queue's against another's (fair sharing's victim search):
    the queues' lists are not merged, only each ClusterQueue's order is defined (one sort by
    :func:`afs_key`)."""
    if not merge:
        keyed = [
            (afs_key(wl, node_of(item) is own, lq_usage(wl)), item) for item in items for wl in (wl_of(item),)
        ]
        keyed.sort(key=itemgetter(0))
        return [record[1] for record in keyed]
    groups: dict[str | None, list[tuple[AfsKey, tuple[bool, bool, int, float, str], Any]]] = {}
    for item in items:
        wl = wl_of(item)
        own_queue = node_of(item) is own
        order = candidate_order(wl, own_queue)
        group = groups.get(wl.reserved_in)
        if group is None:
            group = groups[wl.reserved_in] = []
        group.append((afs_key(wl, own_queue, lq_usage(wl)), order, item))
    if len(groups) == 1:
        (only,) = groups.values()
        only.sort(key=itemgetter(0))
        return [record[2] for record in only]
    # The merge as one sort: an item comes out right after the item before it in its queue, or,
    # when it orders after all of those (by candidate_order), when it is the first of every
    # queue's first items; so the merge is the sort by the highest candidate_order up to the
    # item in its queue, then by its place in the queue (no two queues share a highest).
    merged: list[tuple[tuple[bool, bool, int, float, str], int, Any]] = []
    for group in groups.values():
        group.sort(key=itemgetter(0))
        high = group[0][1]
        for index, (_, order, item) in enumerate(group):
            if order > high:
                high = order
            merged.append((high, index, item))
    merged.sort(key=itemgetter(0, 1))
    return [record[2] for record in merged]


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
    one still taken is put back, so the tree is exactly as it was, its nodes' marks included
    (what was derived from the usage before stays valid)."""

    def __init__(self, nodes: Mapping[str, QuotaNode]) -> None:
        self.nodes = nodes
        self.removed: list[Candidate] = []
        self.marks: Marks = {}

    def __enter__(self) -> Simulation:
        return self

    def __exit__(self, *_: object) -> None:
        for wl in self.removed:
            self._charge(wl, 1)
        self.removed = []
        restore_marks(self.marks)
        self.marks = {}

    def _charge(self, wl: Candidate, sign: int) -> None:
        add_usage(self.nodes[wl.reserved_in or ""], wl.charged, sign)

    def remove(self, wl: Candidate) -> None:
        save_marks(self.nodes[wl.reserved_in or ""], self.marks)
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


def _valid(candidate: _Candidate, allow_borrowing: bool, needed: set[FlavorResource], own: QuotaNode) -> bool:
    """Kueue's ``candidateIsValid``, on the live (simulated) usage: another queue's candidate
    only while its queue, and every cohort between it and the common ancestor, still exceeds
    its quota on what is needed."""
    if candidate.node is own:
        return True
    if allow_borrowing and candidate.variant == RECLAIM_WITHOUT_BORROWING:
        return False
    current: QuotaNode | None = candidate.node
    while current is not None and current is not candidate.lca:
        if _within_nominal(current, needed):
            return False
        current = current.parent
    return True


def _attempt(
    preemptor: Preemptor,
    allowed: list[_Candidate],
    nodes: Mapping[str, QuotaNode],
    allow_borrowing: bool,
    needed: set[FlavorResource],
) -> list[Target]:
    reasons: dict[WorkloadKey, str] = {}
    with Simulation(nodes) as simulation:
        for candidate in allowed:
            if not _valid(candidate, allow_borrowing, needed, preemptor.node):
                continue
            simulation.remove(candidate.wl)
            reasons[candidate.wl.key] = _VARIANT_REASON[candidate.variant]
            if _fits(preemptor, allow_borrowing):
                break
        else:
            return []
        kept = simulation.minimal(lambda: _fits(preemptor, allow_borrowing))
        return [Target(wl, reasons[wl.key]) for wl in kept]


__all__ = ["ANY", "HUMAN_REASON", "Preemptor", "Target", "find_targets"]
