"""The cohort tree and its usage, kept incrementally (Kueue's ``resource_node.go``).

Every ClusterQueue and Cohort is a :class:`QuotaNode`. For each ``(flavor, resource)`` pair a
node knows its nominal quota, its limits, the quota of its subtree, the part it never lends
(``local``) and its usage. Adding usage to a ClusterQueue walks up only while some of it
exceeds the node's local quota, so a reservation costs O(depth), not O(workloads).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kadmit.engine.model import FlavorResource, ResourceGroup


@dataclass(eq=False, slots=True)
class QuotaNode:
    name: str
    is_cohort: bool
    parent: QuotaNode | None = None
    children: list[QuotaNode] = field(default_factory=list)
    nominal: dict[FlavorResource, int] = field(default_factory=dict)
    borrowing_limit: dict[FlavorResource, int] = field(default_factory=dict)
    lending_limit: dict[FlavorResource, int] = field(default_factory=dict)
    subtree: dict[FlavorResource, int] = field(default_factory=dict)
    local: dict[FlavorResource, int] = field(default_factory=dict)
    usage: dict[FlavorResource, int] = field(default_factory=dict)
    chain: tuple[QuotaNode, ...] = ()
    """The path below the root down to this node (empty for a root), set by :func:`compute_quotas`."""
    top: QuotaNode | None = None
    """The root of this node's tree (None: the node is its own root), set by :func:`compute_quotas`."""
    height: int = 0
    """Kueue's ``getNodeHeight``: 0 for a ClusterQueue, else one more than the highest child
    cohort (at least 1 with any child), set by :func:`compute_quotas`."""
    stamp: int = 0
    """Advances by one at every call of :func:`add_usage` at this node or below it (whether or
    not the usage ends where it was), so that what is derived from a subtree's usage (fair
    sharing's shares and winners) is recomputed only where it may have changed; set back by
    :func:`restore_marks` once a simulation put the usage back as it was."""
    version: int = 0
    """Names the node's usage: a number :func:`add_usage` draws from its root's ``clock`` (never
    the same twice in a tree), so one version is always one usage, even across simulations
    whose marks are set back. What is kept by version (a share) stays valid when it comes back."""
    clock: int = 0
    """A root's: the last version drawn in its tree."""

    def set_groups(self, groups: Iterable[ResourceGroup]) -> None:
        for group in groups:
            for flavor in group.flavors:
                for quota in flavor.resources:
                    fr = FlavorResource(flavor.name, quota.name)
                    self.nominal[fr] = quota.nominal
                    if quota.borrowing_limit is not None:
                        self.borrowing_limit[fr] = quota.borrowing_limit
                    if quota.lending_limit is not None:
                        self.lending_limit[fr] = quota.lending_limit

    @property
    def root(self) -> QuotaNode:
        node = self
        while node.parent is not None:
            node = node.parent
        return node

    def path(self) -> str:
        """``/root/…/name``, as Kueue prints preemptor and preemptee paths."""
        names = []
        node: QuotaNode | None = self
        while node is not None:
            names.append(node.name)
            node = node.parent
        return "/" + "/".join(reversed(names))


def compute_quotas(node: QuotaNode) -> None:
    """Fill ``subtree`` and ``local`` bottom-up (after the tree's shape or quotas changed), and
    each node's path from the root (so :func:`available` walks a tuple, not parent links)."""
    parent = node.parent
    node.chain = (*parent.chain, node) if parent is not None else ()
    node.top = (parent.top or parent) if parent is not None else None
    height = 1 if node.is_cohort and node.children else 0
    for child in node.children:
        compute_quotas(child)
        if child.is_cohort:
            height = max(height, child.height + 1)
    node.height = height
    subtree = dict(node.nominal)
    for child in node.children:
        for fr, value in child.subtree.items():
            lent = value - child.local.get(fr, 0)
            subtree[fr] = subtree.get(fr, 0) + lent
    node.subtree = subtree
    node.local = {}
    if node.parent is not None:
        for fr, limit in node.lending_limit.items():
            node.local[fr] = max(0, subtree.get(fr, 0) - limit)


def add_usage(node: QuotaNode, usage: Mapping[FlavorResource, int], sign: int = 1) -> None:
    """Add (``sign=1``) or remove (``sign=-1``) usage at a ClusterQueue, bubbling what overflows."""
    root = node.top or node
    version = root.clock = root.clock + 1
    current: QuotaNode | None = node
    while current is not None:
        current.stamp += 1
        current.version = version
        current = current.parent
    for fr, amount in usage.items():
        delta = amount * sign
        current = node
        while current is not None and delta:
            used = current.usage
            old = used.get(fr, 0)
            new = old + delta
            if new:
                used[fr] = new
            else:
                used.pop(fr, None)
            local = current.local.get(fr, 0)
            if old < local or new < local:  # only what exceeds the part never lent goes up
                delta = (new - local if new > local else 0) - (old - local if old > local else 0)
            current = current.parent


Marks = dict[int, tuple["QuotaNode", int, int]]
"""The ``stamp`` and ``version`` of nodes, by id, before a simulation (:func:`save_marks`)."""


def save_marks(node: QuotaNode, marks: Marks) -> None:
    """Remember the marks of ``node`` and its ancestors, unless already remembered (a node's
    ancestors are remembered with it)."""
    current: QuotaNode | None = node
    while current is not None and id(current) not in marks:
        marks[id(current)] = (current, current.stamp, current.version)
        current = current.parent


def restore_marks(marks: Marks) -> None:
    """Set the remembered marks back, once the usage of every node remembered is exactly what it
    was when they were saved: nothing changed for what was derived from it then (a simulation
    that put everything back is no change). Derived values kept during the simulation were kept
    by version, which is never drawn again, so none of them is taken for the restored usage."""
    for node, stamp, version in marks.values():
        node.stamp = stamp
        node.version = version


def available(node: QuotaNode, fr: FlavorResource) -> int:
    """What ``node`` can still take on ``fr``, counting what it may borrow (may be negative)."""
    # Kueue's recursive definition folded top-down along the precomputed path from the root;
    # this is the hottest function of a cycle, hence the plain locals.
    top = node.top
    if top is None:
        return node.subtree.get(fr, 0) - node.usage.get(fr, 0)
    value = top.subtree.get(fr, 0) - top.usage.get(fr, 0)
    for child in node.chain:
        usage = child.usage.get(fr, 0)
        local = child.local.get(fr, 0)
        limit = child.borrowing_limit.get(fr)
        if limit is not None:
            cap = child.subtree.get(fr, 0) - local + limit
            if usage > local:
                cap -= usage - local
            if cap < value:
                value = cap
        if local > usage:
            value += local - usage
    return value


def potential_available(node: QuotaNode, fr: FlavorResource) -> int:
    """The most ``node`` could ever hold on ``fr`` if nobody else used anything."""
    if node.parent is None:
        return node.subtree.get(fr, 0)
    value = node.local.get(fr, 0) + potential_available(node.parent, fr)
    limit = node.borrowing_limit.get(fr)
    if limit is not None:
        value = min(value, node.subtree.get(fr, 0) + limit)
    return value


def local_available(node: QuotaNode, fr: FlavorResource) -> int:
    """Kueue's ``LocalAvailable``: the part of the node's never-lent quota not used yet."""
    return max(0, node.local.get(fr, 0) - node.usage.get(fr, 0))


def lowest_fitting_subtree(node: QuotaNode, fr: FlavorResource, request: int) -> tuple[int, bool]:
    """Kueue's ``FindHeightOfLowestSubtreeThatFits``: the height of the lowest subtree around
    ``node`` that holds ``request`` more without borrowing (0: the queue's own quota; the whole
    tree's height if none does), and whether that subtree is smaller than the whole tree (the
    queue may then reclaim there whatever its priority: it is closer to that quota)."""
    found = _lowest_fitting(node, fr, request)
    return found >> 1, bool(found & 1)


def borrowing_level(node: QuotaNode, fr: FlavorResource, request: int) -> int:
    """The borrowing level heads are ordered by: the height of :func:`lowest_fitting_subtree`."""
    return _lowest_fitting(node, fr, request) >> 1


def _lowest_fitting(node: QuotaNode, fr: FlavorResource, request: int) -> int:
    """:func:`lowest_fitting_subtree` as one small int, ``height * 2 + smaller_than_the_tree``
    (no tuple: heads compute it by the ten thousand)."""
    parent = node.parent
    if parent is None:
        return 0
    if node.usage.get(fr, 0) + request <= node.nominal.get(fr, 0):
        return 1
    if parent.parent is None:  # directly under the root: the whole tree, fitting or not
        return parent.height << 1
    remaining = request - local_available(node, fr)
    current: QuotaNode | None = parent
    while current is not None:
        if current.usage.get(fr, 0) + remaining <= current.subtree.get(fr, 0):
            return (current.height << 1) | (current.parent is not None)
        remaining -= local_available(current, fr)
        current = current.parent
    return node.root.height << 1


def is_borrowing(node: QuotaNode, fr: FlavorResource) -> bool:
    return node.usage.get(fr, 0) > node.subtree.get(fr, 0)


def find_cycle_members(parents: Mapping[str, str | None]) -> set[str]:
    """Cohorts that lie on, or hang below, a cycle of ``parentName`` references."""
    bad: set[str] = set()
    good: set[str] = set()
    for start in parents:
        trail: list[str] = []
        seen: set[str] = set()
        node: str | None = start
        while node is not None and node not in good and node not in bad:
            if node in seen:
                bad.update(trail)
                break
            seen.add(node)
            trail.append(node)
            node = parents.get(node)
        else:
            if node is not None and node in bad:
                bad.update(trail)
            else:
                good.update(trail)
        if node is not None and node in seen:
            continue
    return bad
