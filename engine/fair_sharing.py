"""Fair sharing (kueue-contract §5.5): Dominant Resource Share, the admission tournament and the
preemption strategies, used when the Configuration has a ``fairSharing`` block.

Shares are exact fractions (``borrowed * 1000 / lendable`` per resource, the largest divided by
the node's weight); a node with weight 0 that borrows has an infinite share.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from fractions import Fraction
from operator import itemgetter

from kadmit.engine.model import ClusterQueue, FlavorResource
from kadmit.engine.preemption import (
    IN_CLUSTER_QUEUE,
    IN_COHORT_FAIR_SHARING,
    IN_COHORT_RECLAMATION,
    Candidate,
    Preemptor,
    Ranked,
    Simulation,
    Target,
    afs_order,
    candidate_order,
    collect_candidates,
    own_candidates,
)
from kadmit.engine.quota import (
    Marks,
    QuotaNode,
    add_usage,
    available,
    potential_available,
    restore_marks,
    save_marks,
)

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
    node: QuotaNode,
    weight: Fraction,
    extra: Mapping[FlavorResource, int] | None = None,
    lendable: Callable[[QuotaNode, str], int] | None = None,
) -> Share:
    """DRS of ``node`` (with ``extra`` usage added, e.g. a candidate workload's request).
    ``lendable``: what the parent can lend of a resource, if known (:meth:`Shares.lendable`)."""
    terms = _share_terms(node, weight, extra, lendable)
    return math.inf if terms is None else Fraction(*terms)


Terms = tuple[int, int] | None
"""A share as its numerator and denominator (not reduced), or None for an infinite one."""


def _share_terms(
    node: QuotaNode,
    weight: Fraction,
    extra: Mapping[FlavorResource, int] | None,
    lendable: Callable[[QuotaNode, str], int] | None,
) -> Terms:
    """:func:`dominant_resource_share` in integers: ``borrowed * 1000 / lendable`` of the
    resource where that is largest, divided by the weight."""
    parent = node.parent
    if parent is None:
        return 0, 1
    borrowed: dict[str, int] = {}
    usage, subtree = node.usage, node.subtree
    for fr, used in usage.items():
        over = used + (extra.get(fr, 0) if extra else 0) - subtree.get(fr, 0)
        if over > 0:
            borrowed[fr[1]] = borrowed.get(fr[1], 0) + over
    if extra:
        for fr, value in extra.items():
            if fr not in usage:
                over = value - subtree.get(fr, 0)
                if over > 0:
                    borrowed[fr[1]] = borrowed.get(fr[1], 0) + over
    if not borrowed:
        return 0, 1
    if weight == 0:
        return None
    best_over = best_lent = 0
    for resource in sorted(borrowed):
        lent = lendable(parent, resource) if lendable is not None else _lendable(parent, resource)
        if lent <= 0:
            return None
        over = borrowed[resource] * 1000
        if not best_lent or over * best_lent > best_over * lent:
            best_over, best_lent = over, lent
    return best_over * weight.denominator, best_lent * weight.numerator


def _lendable(parent: QuotaNode, resource: str) -> int:
    """What ``parent`` could lend its children of ``resource``, over all flavors."""
    return sum(potential_available(parent, fr) for fr in parent.root.subtree if fr[1] == resource)


Rank = tuple[float, Fraction | int]
"""A share that compares exactly as the share, yet mostly as floats (:func:`exact_rank`)."""


class Shares:
    """The shares of one cohort tree's nodes, each kept for the usage it was computed at (the
    node's ``version``): a victim search compares every borrowing queue's share at each step, and most of
    them do not change between steps, nor between searches. Valid for one shape of the trees
    and their quotas and weights (the store makes a new one when they change). Shares are
    compared as ranks (:func:`exact_rank`), computed from integers."""

    def __init__(self, weight_of: Callable[[QuotaNode], Fraction]) -> None:
        self.weight_of = weight_of
        self._ranks: dict[int, tuple[QuotaNode, int, Terms, Rank]] = {}
        """Per node: the node (kept alive, so that its id is not reused), its version, its share
        and the share's rank."""
        self._lendable: dict[tuple[int, str], tuple[QuotaNode, int]] = {}

    def of(self, node: QuotaNode) -> Share:
        """The node's share at its current usage."""
        terms = self._kept(node)[2]
        return math.inf if terms is None else Fraction(*terms)

    def rank(self, node: QuotaNode) -> Rank:
        """The rank of the node's share at its current usage."""
        return self._kept(node)[3]

    def _kept(self, node: QuotaNode) -> tuple[QuotaNode, int, Terms, Rank]:
        kept = self._ranks.get(id(node))
        if kept is None or kept[1] != node.version:
            terms = _share_terms(node, self.weight_of(node), None, self.lendable)
            kept = self._ranks[id(node)] = (node, node.version, terms, _rank(terms))
        return kept

    def rank_with_usage(self, node: QuotaNode, extra: Mapping[FlavorResource, int]) -> Rank:
        """The rank of the node's share with ``extra`` usage added (not kept)."""
        return _rank(_share_terms(node, self.weight_of(node), extra, self.lendable))

    def lendable(self, parent: QuotaNode, resource: str) -> int:
        """:func:`_lendable`, which depends on quotas only."""
        kept = self._lendable.get((id(parent), resource))
        if kept is None:
            kept = self._lendable[(id(parent), resource)] = (parent, _lendable(parent, resource))
        return kept[1]


def exact_rank(share: Share) -> Rank:
    """``share`` as a pair that compares exactly as the share does, yet mostly as floats (a
    Fraction's comparisons are slow): its nearest float, then what that float misses by (the
    int 0 when nothing). Rounding to the nearest float never inverts an order, so the floats
    decide unless they are equal, and then the remainders do."""
    if isinstance(share, float):  # infinite
        return _rank(None)
    return _rank((share.numerator, share.denominator))


def _rank(terms: Terms) -> Rank:
    """:func:`exact_rank` of a share given as :data:`Terms`."""
    if terms is None:
        return math.inf, 0
    numerator, denominator = terms
    if not numerator:
        return 0.0, 0
    near = numerator / denominator  # correctly rounded
    above, below = near.as_integer_ratio()
    missed = numerator * below - above * denominator
    return near, (Fraction(missed, denominator * below) if missed else 0)


_ZERO = exact_rank(Fraction(0))


def weighted_share(share: Share) -> int:
    """``status.fairSharing.weightedShare``: ceil(DRS), MaxInt64 for an infinite share."""
    if share == math.inf:
        return MAX_INT64
    return math.ceil(share)


Contender = tuple[Ranked, Mapping[FlavorResource, int]]
"""A ClusterQueue's head in the tournament, and the usage it would add."""
_Found = tuple[str, Ranked, Mapping[FlavorResource, int]]
"""The head that wins below a node: its ClusterQueue, itself and its usage."""
_TreeRank = tuple[int, _Found | None, tuple[tuple[int, float, str], str] | None]
"""A tree's root stamp, its winner then (None: no head left) and that winner's rank."""


class Tournament:
    """Kueue's fair-sharing admission order among one round's ClusterQueue heads: the next head
    is the one that wins, at each cohort from the root down, against its siblings' winners by
    (1) not borrowing on what it asks before borrowing, (2) the lower share after admitting it,
    (3) higher priority, (4) older timestamp; the trees' winners go by priority and age.

    Each decision changes usage in one ClusterQueue's path only, so the winners below each node
    are kept between picks and recomputed only where usage changed (a node's ``stamp``) or a
    head left, never from scratch: a round of N heads costs about N paths' worth of keys and
    heap operations, not N² shares. A cohort's stamp grows with its children's (each change
    below it advances it once and one child's once), so when it grew by exactly what the
    children known to have changed grew, no other child did and none is looked at; otherwise
    all are. :meth:`forget` drops what is kept, for when the heads themselves may have changed
    (their priority is read when their key is computed)."""

    def __init__(
        self, heads: Mapping[str, Contender], nodes: Mapping[str, QuotaNode], shares: Shares
    ) -> None:
        self._heads = dict(heads)
        self._nodes = nodes
        self._shares = shares
        roots: dict[int, QuotaNode] = {}
        for name in heads:
            root = nodes[name].root
            roots.setdefault(id(root), root)
        self._roots = list(roots.values())
        self._seen: dict[int, int] = {}
        """Per node, its stamp when what is kept below it was computed."""
        self._left: set[int] = set()
        """Nodes above a head that left since: what is kept below them is outdated."""
        self._found: dict[int, _Found | None] = {}
        """Per node, the head that wins below it."""
        self._standings: dict[int, _Standing] = {}
        self._index: dict[int, int] = {}
        """Each child's position among its siblings (ties go to the earlier child)."""
        self._root_at = {id(root): index for index, root in enumerate(self._roots)}
        self._ranks: list[_TreeRank | None] = [None] * len(self._roots)
        """Per tree (by its place in ``_roots``): the root's stamp, its winner and that winner's
        rank among the trees' (None: no head left), kept until the stamp moves or a head of the
        tree leaves (only :meth:`pop` asks a root for its winner; a pick scans every tree, so
        this is a list read by position, not a lookup by id)."""
        self._entries = 0

    def __bool__(self) -> bool:
        return bool(self._heads)

    def forget(self) -> None:
        """Recompute everything at the next pick."""
        self._seen.clear()
        self._left.clear()
        self._found.clear()
        self._standings.clear()
        self._ranks = [None] * len(self._roots)

    def pop(self) -> str:
        """The ClusterQueue whose head goes next, taken out of the tournament (usage is read
        now, so the caller's decisions on the previous heads are seen)."""
        best: tuple[tuple[int, float, str], str] | None = None
        ranks = self._ranks
        for index, root in enumerate(self._roots):
            kept = ranks[index]
            if kept is None or kept[0] != root.stamp:
                kept = ranks[index] = self._rank_tree(root, kept)
            ranked = kept[2]
            if ranked is not None and (best is None or ranked < best):
                best = ranked
        if best is None:
            raise LookupError("no heads left in the tournament")
        name = best[1]
        del self._heads[name]
        node: QuotaNode | None = self._nodes[name]
        while node is not None:  # what was found below its path included this head
            self._left.add(id(node))
            parent = node.parent
            if parent is not None:
                standing = self._standings.get(id(parent))
                if standing is not None:
                    standing.changed.append(node)
            else:
                ranks[self._root_at[id(node)]] = None
            node = parent
        return name

    def _rank_tree(self, root: QuotaNode, kept: _TreeRank | None) -> _TreeRank:
        """The tree's winner now, ranked (the rank kept while the same head wins)."""
        found = self._winner(root)
        if found is None:
            return root.stamp, None, None
        if kept is not None and kept[1] is found:
            return root.stamp, found, kept[2]
        name, head, _ = found
        return root.stamp, found, ((-head.priority, head.timestamp, head.uid), name)

    def _winner(self, node: QuotaNode) -> _Found | None:
        key = id(node)
        if key not in self._left and self._seen.get(key) == node.stamp:
            return self._found[key]
        found: _Found | None
        if not node.is_cohort:
            contender = self._heads.get(node.name)
            found = None if contender is None else (node.name, *contender)
        else:
            standing = self._standings.get(key)
            if standing is None:
                standing = self._standings[key] = _Standing()
                for index, child in enumerate(node.children):
                    self._index[id(child)] = index
                everything = True
            else:
                for child in standing.changed:
                    self._check(standing, child)
                everything = node.stamp - standing.seen != standing.offset
            standing.changed.clear()
            if everything:
                for child in node.children:
                    self._check(standing, child)
                standing.offset = node.stamp - standing.seen
            found = standing.best()
        self._seen[key] = node.stamp
        self._left.discard(key)
        self._found[key] = found
        return found

    def _check(self, standing: _Standing, child: QuotaNode) -> None:
        """Rank ``child`` again in its cohort if anything below it changed."""
        key = id(child)
        seen = self._seen.get(key)
        stamp = child.stamp
        if key not in self._left and seen == stamp:
            return
        below: _Found | None
        if child.is_cohort:
            below = self._winner(child)
        else:  # a ClusterQueue: its own head, if it has one left (what _winner finds, inline)
            contender = self._heads.get(child.name)
            below = None if contender is None else (child.name, *contender)
            self._seen[key] = stamp
            self._left.discard(key)
            self._found[key] = below
        standing.seen += stamp - (seen or 0)
        index = self._index[key]
        if below is None:
            standing.entries.pop(index, None)
            return
        self._entries += 1
        standing.put((self._key(child, below), index, self._entries, below))

    def _key(self, node: QuotaNode, found: _Found) -> tuple[object, ...]:
        _, head, usage = found
        used, subtree = node.usage, node.subtree
        borrows = False
        for fr, value in usage.items():
            if used.get(fr, 0) + value > subtree.get(fr, 0):
                borrows = True
                break
        near, missed = self._shares.rank_with_usage(node, usage)
        return (borrows, near, missed, -head.priority, head.timestamp, head.uid)


_Contest = tuple[tuple[object, ...], int, int, _Found]
"""A child's winner in its cohort: its key, the child's position, a sequence number (entries
never compare further) and the head."""


class _Standing:
    """What the tournament keeps of one cohort: its children's winners, in a heap whose
    outdated entries are dropped when they reach the top."""

    __slots__ = ("changed", "entries", "heap", "offset", "seen")

    def __init__(self) -> None:
        self.entries: dict[int, _Contest] = {}
        """The current entry of each child with a head below it, by position."""
        self.heap: list[_Contest] = []
        self.seen = 0
        """The sum of the children's stamps as last checked."""
        self.offset = 0
        """The cohort's stamp less ``seen`` when every child was last checked."""
        self.changed: list[QuotaNode] = []
        """Children that a head left from since."""

    def put(self, entry: _Contest) -> None:
        self.entries[entry[1]] = entry
        heap = self.heap
        if len(heap) > 2 * len(self.entries) + 16:  # mostly outdated: start again
            heap[:] = self.entries.values()
            heapq.heapify(heap)
        else:
            heapq.heappush(heap, entry)

    def best(self) -> _Found | None:
        heap, entries = self.heap, self.entries
        while heap:
            entry = heap[0]
            kept = entries.get(entry[1])
            if kept is not None and kept[2] == entry[2]:  # its sequence number: still current
                return entry[3]
            heapq.heappop(heap)
        return None


def fair_targets(
    preemptor: Preemptor,
    needed: Iterable[FlavorResource],
    holders: Sequence[tuple[QuotaNode, ClusterQueue, Iterable[Candidate]]],
    shares: Shares,
    strategies: Sequence[str] = DEFAULT_STRATEGIES,
    lq_usage: Callable[[Candidate], tuple[Hashable, float] | None] | None = None,
    memo: dict[Hashable, list[Target]] | None = None,
    state: Hashable = None,
) -> list[Target]:
    """Victims under fair sharing, or ``[]`` (Kueue's ``fairPreemptions``).

    Candidates are ordered as classical preemption orders them and grouped by ClusterQueue.
    With the incoming workload's usage added, the queues are visited from the one with the
    highest share down (:class:`_TargetOrdering`): the preemptor's own candidates are taken
    directly; another queue's while the preemptor stays within its nominal quota; otherwise
    the first strategy decides workload by workload, and those it refuses get a second chance
    under ``LessThanInitialShare``, one per queue. ``lq_usage``: Admission Fair Sharing orders
    each queue's candidates by their LocalQueue's usage first (:func:`afs_order`).

    ``memo`` and ``state``: searches of one tree in one state (``state`` names the tree's usage
    and workloads, and what the caller counts as gone) whose preemptor's own queue gives no
    candidate and does not borrow what is needed find the same victims whatever that queue is,
    as long as it has the same parent, usage, quotas, weight and policy and the preemptor the
    same priority and request (:func:`_search_key`): the first one's result is kept in ``memo``
    under that key and given to the others."""
    needed = set(needed)
    own = preemptor.node
    key: Hashable = None
    if memo is not None and len(holders) > 1 and not _borrows_any(own, needed):
        mine = next((h[2] for h in holders if h[1].name == preemptor.cq.name), ())
        if not own_candidates(preemptor, needed, mine):
            key = _search_key(preemptor, needed, shares, state)
            kept = memo.get(key)
            if kept is not None:
                return list(kept)
    nodes, same, others = collect_candidates(preemptor, needed, holders, include_others=True)
    candidates: list[tuple[Candidate, QuotaNode]] = [(wl, own) for wl in same]
    for name, group in others.items():
        candidates += [(wl, nodes[name]) for wl in group]
    if not candidates:
        return []
    # The search puts every usage back as it was: so are the marks of the nodes it may change,
    # and what was derived from their usage (the tournament's winners, shares) stays valid.
    marks: Marks = {}
    save_marks(own, marks)
    for name in others:
        save_marks(nodes[name], marks)
    try:
        found = _fair_targets(
            preemptor, needed, nodes, same, others, candidates, shares, strategies, lq_usage
        )
    finally:
        restore_marks(marks)
    if key is not None:
        assert memo is not None
        memo[key] = list(found)
    return found


def _borrows_any(node: QuotaNode, needed: Iterable[FlavorResource]) -> bool:
    """Whether ``node`` uses more than its quota of something ``needed`` (then it is another
    preemptor's target, so two such queues see different candidates)."""
    usage, subtree = node.usage, node.subtree
    return any(usage.get(fr, 0) > subtree.get(fr, 0) for fr in needed)


def _search_key(
    preemptor: Preemptor, needed: set[FlavorResource], shares: Shares, state: Hashable
) -> Hashable:
    """What a search reads of its preemptor when the preemptor's own queue gives no candidate
    and borrows nothing needed: the others' candidates are then the same for every such queue
    of the tree (none of them is a target), and the walk reads the own queue only through its
    share, its ``available`` and its place (its parent): its usage, quotas, weight, policy."""
    own = preemptor.node
    return (
        state,
        id(own.parent),
        tuple(sorted(needed)),
        tuple(sorted(preemptor.usage.items())),
        preemptor.priority,
        preemptor.cq.preemption,
        shares.weight_of(own),
        tuple(sorted(own.usage.items())),
        tuple(sorted(own.nominal.items())),
        tuple(sorted(own.subtree.items())),
        tuple(sorted(own.local.items())),
        tuple(sorted(own.borrowing_limit.items())),
        tuple(sorted(own.lending_limit.items())),
    )


def _fair_targets(
    preemptor: Preemptor,
    needed: set[FlavorResource],
    nodes: Mapping[str, QuotaNode],
    same: list[Candidate],
    others: Mapping[str, list[Candidate]],
    candidates: list[tuple[Candidate, QuotaNode]],
    shares: Shares,
    strategies: Sequence[str],
    lq_usage: Callable[[Candidate], tuple[Hashable, float] | None] | None,
) -> list[Target]:
    own = preemptor.node
    usage = preemptor.usage
    refused = _refused_queues(own, usage, same, [nodes[name] for name in others], shares)
    if len(refused) == len(others) and not same:
        return []
    if refused:
        candidates = [c for c in candidates if id(c[1]) not in refused]
    if _cannot_fit(preemptor, same, others, nodes, refused, shares, strategies):
        return []
    # The search reads each ClusterQueue's candidates in order, never one queue's against
    # another's (as Kueue's TargetClusterQueueOrdering, which splits them by queue).
    if lq_usage is None:
        candidates.sort(key=lambda c: candidate_order(c[0], own_queue=c[1] is own))
    else:
        candidates = afs_order(candidates, own, lq_usage, itemgetter(1), itemgetter(0), merge=False)

    def fits() -> bool:  # Kueue's workloadFitsForFairSharing: without the incoming's own usage
        add_usage(own, usage, -1)
        try:
            return all(v <= available(own, fr) for fr, v in usage.items())
        finally:
            add_usage(own, usage)

    with Simulation(nodes) as simulation:
        targets: list[Target] = []

        def take(wl: Candidate, reason: str) -> None:
            simulation.remove(wl)
            targets.append(Target(wl, reason))

        add_usage(own, usage)  # shares are computed with the incoming workload admitted
        try:
            found, retry = _first_strategy(preemptor, candidates, strategies[0], shares, take, fits)
            if not found and len(strategies) > 1:
                found = _second_strategy(preemptor, retry, shares, take, fits)
        finally:
            add_usage(own, usage, -1)
        if not found:
            return []
        by_key = {t.workload.key: t for t in targets}
        kept = simulation.minimal(lambda: all(v <= available(own, fr) for fr, v in usage.items()))
        return [by_key[wl.key] for wl in kept]


def _cannot_fit(
    preemptor: Preemptor,
    same: Sequence[Candidate],
    others: Mapping[str, Sequence[Candidate]],
    nodes: Mapping[str, QuotaNode],
    refused: set[int],
    shares: Shares,
    strategies: Sequence[str],
) -> bool:
    """Whether the strategies cannot make the preemptor fit, however they walk: an upper bound
    on what they can free of each (flavor, resource) it asks for falls short. Then the search
    finds nothing (its ``fits`` never holds) and is skipped.

    The bound: all of the preemptor's own candidates, and per other queue ``T``
    (:func:`_most_freed`). Taking usage away raises what the preemptor's queue has
    ``available`` by at most that usage (each node passes up at most what it lost), so the
    preemptor cannot fit when ``available`` now plus everything that can be freed is short, or
    when its own queue's borrowing limit caps it below the request even with all its own
    candidates gone."""
    own = preemptor.node
    usage = preemptor.usage
    floor: Terms | None = None
    bounded = False
    parent = own.parent
    if parent is not None and others:
        extra = dict(usage)
        for wl in same:
            for fr, value in wl.charged.items():
                extra[fr] = extra.get(fr, 0) - value
        if not all(own.usage.get(fr, 0) + extra.get(fr, 0) <= own.nominal.get(fr, 0) for fr in usage):
            # above nominal once admitted, whatever own workloads go: the strategies decide
            floor = _share_terms(own, shares.weight_of(own), extra, shares.lendable)
            bounded = floor is not None and floor[0] > 0
    # LessThanInitialShare takes a workload while the target's share before it is above the
    # preemptor's: one workload beyond the bound of the shares; the second strategy, one more.
    extra_workloads = (strategies[0] == LESS_THAN_INITIAL_SHARE) + (len(strategies) > 1)
    for fr, value in usage.items():
        own_freed = 0
        for wl in same:
            own_freed += wl.charged.get(fr, 0)
        freed = own_freed
        for name, group in others.items():
            target = nodes[name]
            if id(target) in refused:
                continue
            total = largest = 0
            for wl in group:
                amount = wl.charged.get(fr, 0)
                total += amount
                if amount > largest:
                    largest = amount
            if bounded and target.parent is parent:
                assert floor is not None
                most = _most_freed(target, fr, floor, shares)
                if most is not None:
                    total = min(total, most + extra_workloads * largest)
            freed += total
        now = available(own, fr)
        if now + freed < value:
            return True
        limit = own.borrowing_limit.get(fr)
        if limit is not None and own.top is not None:
            local = own.local.get(fr, 0)
            least = own.usage.get(fr, 0) - own_freed
            cap = own.subtree.get(fr, 0) - local + limit - max(0, least - local) + max(0, local - least)
            if cap < value:
                return True
    return False


def _most_freed(target: QuotaNode, fr: FlavorResource, floor: tuple[int, int], shares: Shares) -> int | None:
    """What the first strategy can take of ``fr`` from ``target``, a sibling of the preemptor's
    queue, or None when unbounded here. ``LessThanOrEqualToFinalShare`` takes a workload only
    while the target's share once it is gone stays at least the preemptor's, which never falls
    below ``floor`` (its share with the incoming workload and without all its own candidates):
    so the target keeps a share of at least ``floor``. When that share can come only from
    ``fr``'s resource (every other resource's term is below ``floor`` already), the target keeps
    borrowing at least ``needed`` of it: all it can lose is what it borrows beyond that."""
    weight = shares.weight_of(target)
    if weight == 0:
        return None
    floor_numerator, floor_denominator = floor
    resource = fr[1]
    borrowed: dict[str, int] = {}
    other_flavors = 0
    subtree = target.subtree
    for key, used in target.usage.items():
        over = used - subtree.get(key, 0)
        if over > 0:
            borrowed[key[1]] = borrowed.get(key[1], 0) + over
            if key[1] == resource and key != fr:
                other_flavors += over
    parent = target.parent
    assert parent is not None
    for name, amount in borrowed.items():
        lent = shares.lendable(parent, name)
        if lent <= 0:
            return None
        term = amount * 1000 * weight.denominator * floor_denominator  # against floor's
        if name != resource and term >= floor_numerator * lent * weight.numerator:
            return None  # another resource keeps the target's share at floor or above
    lent = shares.lendable(parent, resource)
    if lent <= 0:
        return None
    # the least borrowed of the resource with a share of at least floor
    top = floor_numerator * lent * weight.numerator
    bottom = 1000 * weight.denominator * floor_denominator
    needed = -(-top // bottom)
    if needed <= other_flavors:
        return None
    return max(0, borrowed.get(resource, 0) - needed)


def _within_nominal(node: QuotaNode, usage: Iterable[FlavorResource]) -> bool:
    """Whether ``node`` uses no more than its nominal quota of the resources of ``usage``."""
    return all(node.usage.get(fr, 0) <= node.nominal.get(fr, 0) for fr in usage)


def _refused_queues(
    own: QuotaNode,
    usage: Mapping[FlavorResource, int],
    same: Sequence[Candidate],
    targets: Iterable[QuotaNode],
    shares: Shares,
) -> set[int]:
    """The queues among ``targets`` (by id) whose every candidate both strategies refuse, which
    the search may leave out. Above its nominal quota once admitted, the preemptor takes another
    queue's workload only while the share of that queue's side (below their common ancestor) is
    at least its own side's. When its own side is its own queue (a sibling's subtree), that
    share never falls below what it is with all its own candidates (``same``) gone, and the
    other side's only falls as workloads are taken, so a side already below that floor at the
    start never passes (and visiting its queues changes nothing: they are tried, refused and
    dropped). A cohort on the preemptor's side may lose usage to the search, so the queues
    compared with one are kept."""
    add_usage(own, usage)  # as the strategies see it: with the incoming workload admitted
    try:
        if _within_nominal(own, usage):
            return set()
        if same:
            freed: dict[FlavorResource, int] = {}
            for wl in same:
                for fr, value in wl.charged.items():
                    freed[fr] = freed.get(fr, 0) - value
            floor = shares.rank_with_usage(own, freed)
        else:
            floor = shares.rank(own)
        refused = set()
        for target in targets:
            mine, theirs = _below_common_ancestor(own, target)
            if mine is own and shares.rank(theirs) < floor:
                refused.add(id(target))
        return refused
    finally:
        add_usage(own, usage, -1)


def _first_strategy(
    preemptor: Preemptor,
    candidates: list[tuple[Candidate, QuotaNode]],
    strategy: str,
    shares: Shares,
    take: Callable[[Candidate, str], None],
    fits: Callable[[], bool],
) -> tuple[bool, list[tuple[Candidate, QuotaNode]]]:
    """Kueue's ``runFirstFsStrategy``: whether the preemptor fits, and the candidates the
    strategy refused (for the second one)."""
    own = preemptor.node
    within_nominal = _within_nominal(own, preemptor.usage)
    if not within_nominal and _none_pass(own, candidates, strategy, shares):
        return False, candidates
    ordering = _TargetOrdering(own, candidates, shares)
    retry: list[tuple[Candidate, QuotaNode]] = []
    for target in ordering:
        if target is own:
            take(ordering.pop(target), IN_CLUSTER_QUEUE)
            if fits():
                return True, []
            continue
        if within_nominal:
            take(ordering.pop(target), IN_COHORT_RECLAMATION)
            if fits():
                return True, []
            continue
        mine, theirs = _below_common_ancestor(own, target)
        new_share, old_share = shares.rank(mine), shares.rank(theirs)
        if not _may_pass(new_share, old_share, strategy):  # no candidate here can pass
            while ordering.has(target):
                retry.append((ordering.pop(target), target))
            continue
        verdicts: dict[int, bool] = {}
        """Per usage (by identity: workloads of one shape share theirs), whether a workload
        that frees it passes; the shares stay as they are until one is taken."""
        while ordering.has(target):
            wl = ordering.pop(target)
            if strategy == LESS_THAN_INITIAL_SHARE:
                passed = new_share < old_share
            else:
                charged = wl.charged
                verdict = verdicts.get(id(charged))
                if verdict is None:
                    if theirs is target:  # a ClusterQueue: its usage falls by exactly ``charged``
                        after = shares.rank_with_usage(target, {fr: -value for fr, value in charged.items()})
                    else:
                        add_usage(target, charged, -1)
                        after = shares.rank(theirs)
                        add_usage(target, charged)
                    verdict = verdicts[id(charged)] = new_share <= after
                passed = verdict
            if passed:
                take(wl, IN_COHORT_FAIR_SHARING)
                if fits():
                    return True, []
                break  # the shares changed: pick the queue again
            retry.append((wl, target))
    return False, retry


def _second_strategy(
    preemptor: Preemptor,
    retry: list[tuple[Candidate, QuotaNode]],
    shares: Shares,
    take: Callable[[Candidate, str], None],
    fits: Callable[[], bool],
) -> bool:
    """Kueue's ``runSecondFsStrategy`` (rule S2-b): ``LessThanInitialShare``, at most one
    workload per queue."""
    own = preemptor.node
    if _none_pass(own, retry, LESS_THAN_INITIAL_SHARE, shares):
        return False
    ordering = _TargetOrdering(own, retry, shares)
    for target in ordering:
        mine, theirs = _below_common_ancestor(own, target)
        passed = shares.rank(mine) < shares.rank(theirs)
        wl = ordering.pop(target)
        if passed:
            take(wl, IN_COHORT_FAIR_SHARING)
            if fits():
                return True
        ordering.drop(target)
    return False


def _may_pass(new_share: Rank, old_share: Rank, strategy: str) -> bool:
    """Whether any candidate of a queue may pass ``strategy`` while the shares are these: the
    preemptor's side's share with it admitted (``new_share``) against the target side's now
    (``old_share``). ``LessThanInitialShare`` compares just these; a workload passes
    ``LessThanOrEqualToFinalShare`` when ``new_share`` is at most the target side's share once
    it is gone, which is at most ``old_share`` (taking usage away never raises a share)."""
    if strategy == LESS_THAN_INITIAL_SHARE:
        return new_share < old_share
    return new_share <= old_share


def _none_pass(
    own: QuotaNode,
    candidates: Sequence[tuple[Candidate, QuotaNode]],
    strategy: str,
    shares: Shares,
) -> bool:
    """Whether no candidate passes ``strategy`` at the shares of now, none of them the
    preemptor's own (which are taken without a strategy). Then a strategy's walk through the
    queues (:class:`_TargetOrdering`) takes nothing: the shares stay as they are, so it refuses
    every candidate of every queue it visits, in whatever order; the walk is skipped (the
    queues it would not visit, which do not borrow, it would not visit in the next walk either,
    so giving all of the candidates to the next strategy is the same). ``LessThanOrEqualTo
    FinalShare`` is asked for each workload shape of a queue that :func:`_may_pass`."""
    refused: set[int] = set()
    """Queues none of whose candidates can pass."""
    sides: dict[int, tuple[Rank, QuotaNode]] = {}
    """Per queue that may pass: the preemptor's side's share and the target's side."""
    shapes: set[tuple[int, int]] = set()
    """Per queue, the usages (by identity: workloads of one shape share theirs) refused."""
    for wl, target in candidates:
        if target is own:
            return False
        key = id(target)
        if key in refused:
            continue
        side = sides.get(key)
        if side is None:
            mine, theirs = _below_common_ancestor(own, target)
            new_share, old_share = shares.rank(mine), shares.rank(theirs)
            if not _may_pass(new_share, old_share, strategy):
                refused.add(key)
                continue
            if strategy == LESS_THAN_INITIAL_SHARE:
                return False
            side = sides[key] = (new_share, theirs)
        new_share, theirs = side
        shape = (key, id(wl.charged))
        if shape in shapes:
            continue
        shapes.add(shape)
        if theirs is target:
            after = shares.rank_with_usage(target, {fr: -value for fr, value in wl.charged.items()})
        else:
            add_usage(target, wl.charged, -1)
            after = shares.rank(theirs)
            add_usage(target, wl.charged)
        if new_share <= after:
            return False
    return True


class _TargetOrdering:
    """Kueue's ``TargetClusterQueueOrdering``: the queue to take a candidate from next, found
    from the root down by the highest share (live, so it follows the simulated removals);
    queues and cohorts that do not borrow (other than the preemptor's own path) are pruned.

    Each cohort keeps its children in two heaps (ClusterQueues, cohorts), ranked as Kueue's scan
    picks them: the highest share, then (queues) the first candidate's order and the earlier
    child, (cohorts) the later child. While the ordering runs, shares only fall (victims are
    taken off) and a queue's first candidate changes only when one is taken from it, so an
    entry is checked when it reaches the top (re-ranked if its node's usage or first candidate
    changed since, pruned if it no longer borrows or has no candidates) and the queue a
    candidate was taken from is ranked afresh: a step costs a few heap operations, not a scan
    of every sibling's share."""

    def __init__(
        self,
        own: QuotaNode,
        candidates: list[tuple[Candidate, QuotaNode]],
        shares: Shares,
    ) -> None:
        self.own = own
        self.rank = shares.rank
        self.queue: dict[int, deque[Candidate]] = {}
        for wl, node in candidates:
            queue = self.queue.get(id(node))
            if queue is None:
                queue = self.queue[id(node)] = deque()
            queue.append(wl)
        self.ancestors: set[int] = set()
        ancestor = own.parent
        while ancestor is not None:
            self.ancestors.add(id(ancestor))
            ancestor = ancestor.parent
        self.pruned: set[int] = set()
        self._heaps: dict[int, tuple[list[_Ranked], list[_Ranked]]] = {}
        """Per cohort visited, its ClusterQueue and cohort children's entries."""
        self._index: dict[int, int] = {}
        """Each child's position among its siblings."""
        self._pushed = 0
        self._last: QuotaNode | None = None
        """The queue returned last: candidates may have been taken from it since."""

    def has(self, node: QuotaNode) -> bool:
        return bool(self.queue.get(id(node)))

    def pop(self, node: QuotaNode) -> Candidate:
        return self.queue[id(node)].popleft()

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
            last = self._last
            if last is not None:  # its first candidate, and the shares on its path, changed
                self._last = None
                node: QuotaNode = last
                while node.parent is not None:
                    heaps = self._heaps.get(id(node.parent))
                    if heaps is not None and self._eligible(node):
                        self._push(heaps, node)
                    node = node.parent
            target = self._next(root)
            if target is not None:
                self._last = target
                yield target

    def _push(self, heaps: tuple[list[_Ranked], list[_Ranked]], child: QuotaNode) -> None:
        near, missed = self.rank(child)
        rank = -near, -missed
        self._pushed += 1
        if child.is_cohort:
            order: tuple[object, ...] = (-self._index[id(child)],)
            heapq.heappush(heaps[1], (rank, order, self._pushed, child.stamp, None, child))
        else:
            first = self.queue[id(child)][0]
            order = (candidate_order(first, child is self.own), self._index[id(child)])
            heapq.heappush(heaps[0], (rank, order, self._pushed, child.stamp, first, child))

    def _eligible(self, child: QuotaNode) -> bool:
        """Whether ``child`` may still give candidates (Kueue's pruning); pruned if not."""
        if id(child) in self.pruned:
            return False
        if child.is_cohort:
            eligible = self.rank(child) > _ZERO or id(child) in self.ancestors
        else:
            eligible = self.has(child) and (child is self.own or self.rank(child) > _ZERO)
        if not eligible:
            self.pruned.add(id(child))
        return eligible

    def _top(self, heap: list[_Ranked]) -> _Ranked | None:
        """The best entry of ``heap`` that is still true."""
        while heap:
            entry = heap[0]
            child = entry[5]
            if not self._eligible(child):
                heapq.heappop(heap)
                continue
            if entry[3] != child.stamp or (not child.is_cohort and entry[4] is not self.queue[id(child)][0]):
                heapq.heappop(heap)
                self._push(self._heaps[id(child.parent)], child)
                continue
            return entry
        return None

    def _next(self, cohort: QuotaNode) -> QuotaNode | None:
        heaps = self._heaps.get(id(cohort))
        if heaps is None:
            heaps = self._heaps[id(cohort)] = ([], [])
            for index, child in enumerate(cohort.children):
                self._index[id(child)] = index
                if self._eligible(child):
                    self._push(heaps, child)
        best_cq = self._top(heaps[0])
        best_cohort = self._top(heaps[1])
        if best_cq is None and best_cohort is None:
            self.pruned.add(id(cohort))
            return None
        if best_cohort is not None and (best_cq is None or best_cohort[0] <= best_cq[0]):
            return self._next(best_cohort[5])
        assert best_cq is not None
        return best_cq[5]


_Ranked = tuple[tuple[float, Fraction | int], tuple[object, ...], int, int, "Candidate | None", QuotaNode]
"""A child in its cohort's heap: its rank by share (highest first, exactly), the tie-breaks,
a sequence number (entries never compare further), its node's stamp and first candidate when
ranked, and the node."""


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
