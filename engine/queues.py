"""Per-ClusterQueue queues: a heap of pending workloads plus the parked (inadmissible) ones.

Workloads with the same *scheduling shape* (pod sets, requests, placement constraints and
priority) share a bucket. When the head of a bucket cannot be admitted, the whole bucket is
parked at once: its peers would fail the same way, so re-evaluating them one by one would only
make each cycle cost grow with the number of pending workloads (Kueue's SchedulingEquivalence-
Hashing idea). Parked buckets return to the heap when an event in the same root cohort could
make them fit (:meth:`ClusterQueueQueue.wake`).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field
from heapq import heappop, heapreplace
from operator import attrgetter
from typing import Any, NamedTuple


class OrderKey(NamedTuple):
    """(-priority, queue-order timestamp, uid): smaller comes first.

    A named tuple, not a bare one, for the compiled engine: mypyc keeps a bare tuple's fields
    unboxed in the entry and makes a new tuple at each read, so the queues' identity checks never
    held and every comparison allocated; a named tuple is kept as the object it is."""

    negated_priority: int
    timestamp: float
    uid: str


class Queued:
    """What a queue needs from an entry: its order key, shape, and which queue holds it."""

    __slots__ = ("bucket", "lane", "order", "shape", "token")

    def __init__(self, order: OrderKey, shape: Hashable) -> None:
        self.order = order
        self.shape = shape
        self.bucket: _Bucket | None = None
        self.token = 0
        self.lane: Hashable = None
        """Admission Fair Sharing: the LocalQueue whose lane of :class:`LaneQueue` holds it."""


@dataclass(eq=False, slots=True)
class _Bucket:
    shape: Hashable
    items: list[tuple[OrderKey, int, Queued]] = field(default_factory=list)
    parked: bool = False
    registered: OrderKey | None = None
    registration: int = 0
    size: int = 0
    reason: str = ""
    message: str = ""
    memo: Any = None
    """What the engine derives once for this shape in this queue (its flavor assignment), kept
    here so that finding it costs no hashing of the shape."""
    told: tuple[str, str] | None = None
    """The reason and message every workload of the bucket was last told when it parked."""
    untold: list[Queued] = field(default_factory=list)
    """Workloads pushed since: the next park with the same reason tells only these."""


_tokens = itertools.count(1)
_order = attrgetter("order")


class ClusterQueueQueue:
    """The pending workloads of one ClusterQueue, ordered as Kueue's heap orders them."""

    def __init__(self, strict_fifo: bool) -> None:
        self.strict_fifo = strict_fifo
        self._heap: list[tuple[OrderKey, int, _Bucket]] = []
        self._buckets: dict[Hashable, _Bucket] = {}
        self._parked: set[_Bucket] = set()
        self._size = 0
        self.blocked = False
        """StrictFIFO: the head did not fit and nothing changed since."""
        self.sticky: Queued | None = None
        """BestEffortFIFO: a preemptor waiting for its victims comes first."""
        self.version = 0
        """Bumped when a workload joins or leaves: the queue's order is unchanged while it stays."""
        self._ordered: tuple[int, list[Any]] | None = None

    def __len__(self) -> int:
        return self._size

    def push(self, entry: Queued) -> bool:
        """Queue ``entry``; True when it joins a parked bucket (it waits with its peers, for
        their reason: :meth:`parked_reason`)."""
        self.version += 1
        bucket = self._buckets.get(entry.shape)
        if bucket is None:
            bucket = self._buckets[entry.shape] = _Bucket(entry.shape)
        entry.token = next(_tokens)
        entry.bucket = bucket
        heapq.heappush(bucket.items, (entry.order, entry.token, entry))
        bucket.size += 1
        self._size += 1
        untold = bucket.untold
        untold.append(entry)
        if len(untold) > 2 * bucket.size + 16:  # a bucket that never parks: drop who left
            bucket.untold = [e for e in untold if e.bucket is bucket]
        if bucket.parked:
            return True
        if bucket.registered is None or entry.order < bucket.registered:
            self._register(bucket, entry.order)
        return False

    def remove(self, entry: Queued) -> None:
        """Lazy removal: the heap item goes stale and is skipped later."""
        bucket = entry.bucket
        if bucket is None:
            return
        self.version += 1
        entry.bucket = None
        entry.token = 0
        bucket.size -= 1
        self._size -= 1
        if self.sticky is entry:
            self.sticky = None
        if bucket.size == 0:
            del self._buckets[bucket.shape]
            self._parked.discard(bucket)
            bucket.parked = True  # stale items of an empty bucket are dropped in head()

    def _register(self, bucket: _Bucket, order: OrderKey) -> None:
        bucket.registered = order
        bucket.registration = token = next(_tokens)
        heapq.heappush(self._heap, (order, token, bucket))

    @staticmethod
    def _bucket_top(bucket: _Bucket) -> Queued | None:
        items = bucket.items
        while items:
            _, token, entry = items[0]
            if entry.token == token and entry.bucket is bucket:
                return entry
            heapq.heappop(items)
        return None

    def head(self) -> Queued | None:
        """The workload to try next: the sticky preemptor, else the first of the first bucket
        that is not parked. Stale heap items (parked buckets, removed workloads) are dropped
        on the way; this runs once per head of every round, hence the inlined loops."""
        if self.sticky is not None:
            return self.sticky
        heap = self._heap
        while heap:
            order, token, bucket = heap[0]
            if bucket.parked or bucket.registration != token:
                heappop(heap)  # stale: parked, or registered again since
                continue
            items = bucket.items
            while items:
                _, token, top = items[0]
                if top.token == token and top.bucket is bucket:
                    break
                heappop(items)  # removed since it was pushed
            else:
                heappop(heap)
                bucket.registered = None
                bucket.registration = 0
                continue
            if top.order is not order and top.order != order:
                # Its first workload left: the bucket moves down the heap.
                bucket.registered = top.order
                bucket.registration = token = next(_tokens)
                heapreplace(heap, (top.order, token, bucket))
                continue
            return top
        return None

    def park(self, entry: Queued, reason: str, message: str, *, shared: bool = True) -> list[Any]:
        """Park the bucket of ``entry`` (BestEffortFIFO) until :meth:`wake`; the workloads of the
        bucket that have not been told ``reason`` and ``message`` yet (every one when they
        changed, else those pushed since the last park), to be told now. ``shared``: the reason
        holds for the whole shape (not for ``entry`` alone): only then are its peers told."""
        bucket = entry.bucket
        if bucket is None:
            return []
        if self.sticky is entry:
            self.sticky = None
        bucket.parked = True
        bucket.registered = None
        bucket.registration = 0
        bucket.reason = reason
        bucket.message = message
        self._parked.add(bucket)
        if not shared:
            return []
        untold, bucket.untold = bucket.untold, []
        if bucket.told != (reason, message):
            bucket.told = (reason, message)
            return list(self._members(bucket))
        return [e for e in untold if e.bucket is bucket]

    @staticmethod
    def _members(bucket: _Bucket) -> Iterator[Queued]:
        for _, token, entry in bucket.items:
            if entry.token == token and entry.bucket is bucket:
                yield entry

    def wake(self) -> bool:
        """Something changed that could make parked workloads fit; True if any were parked."""
        self.blocked = False
        if not self._parked:
            return False
        for bucket in self._parked:
            bucket.parked = False
            top = self._bucket_top(bucket)
            if top is not None:
                self._register(bucket, top.order)
        self._parked.clear()
        return True

    @staticmethod
    def remember(entry: Queued, value: Any) -> None:
        """Keep ``value`` as the memo of ``entry``'s bucket, for every workload of its shape."""
        bucket = entry.bucket
        if bucket is not None:
            bucket.memo = value

    def shapes(self) -> tuple[int, int]:
        """How many distinct scheduling shapes wait here: (in the heap, parked)."""
        parked = len(self._parked)
        return len(self._buckets) - parked, parked

    def is_parked(self, entry: Queued) -> bool:
        return entry.bucket is not None and entry.bucket.parked

    @staticmethod
    def parked_reason(entry: Queued) -> tuple[str, str] | None:
        bucket = entry.bucket
        if bucket is None or not bucket.parked:
            return None
        return bucket.reason, bucket.message

    def ordered(self) -> list[Any]:
        """Every entry in queue order (the sticky preemptor not moved first), kept until the
        next push or removal: asking again while nothing joined or left costs nothing."""
        if self._ordered is None or self._ordered[0] != self.version:
            entries = list(self.entries())
            entries.sort(key=_order)
            self._ordered = (self.version, entries)
        return self._ordered[1]

    def entries(self) -> Iterator[Any]:
        for bucket in list(self._buckets.values()):
            yield from self._members(bucket)


class LaneQueue(ClusterQueueQueue):
    """The pending workloads of a ClusterQueue under Admission Fair Sharing: one lane (a
    :class:`ClusterQueueQueue`) per LocalQueue, and the head is the first of the lane whose
    LocalQueue has the least usage (Kueue's ``queueOrderingFunc``: usage, then the sticky
    preemptor, priority, time, uid). Usage changes with every reservation and sample, so it is
    read when the head is chosen rather than kept in the heap; a ClusterQueue has few lanes."""

    def __init__(
        self, strict_fifo: bool, lane_of: Callable[[Queued], Hashable], usage: Callable[[Hashable], float]
    ) -> None:
        super().__init__(strict_fifo)
        self._lanes: dict[Hashable, ClusterQueueQueue] = {}
        self._lane_of = lane_of
        self.usage = usage
        """The usage of a lane's LocalQueue (smaller goes first)."""

    def __len__(self) -> int:
        return sum(len(lane) for lane in self._lanes.values())

    def push(self, entry: Queued) -> bool:
        self.version += 1
        entry.lane = self._lane_of(entry)
        lane = self._lanes.get(entry.lane)
        if lane is None:
            lane = self._lanes[entry.lane] = ClusterQueueQueue(self.strict_fifo)
        return lane.push(entry)

    def remove(self, entry: Queued) -> None:
        if entry.bucket is None:
            return
        self.version += 1
        if self.sticky is entry:
            self.sticky = None
        lane = self._lanes.get(entry.lane)
        if lane is not None:
            lane.remove(entry)

    def head(self) -> Queued | None:
        # Asked for every head of every round: the key (usage, not sticky, order) is compared
        # field by field, without building it for lanes that cannot win.
        sticky = self.sticky
        lanes = self._lanes
        if sticky is None and len(lanes) == 1:
            for lane in lanes.values():
                return lane.head()
        # A lane with nothing to try (empty, or every shape parked: most lanes late in a cycle)
        # is passed over without a call; usages are read only when two heads compete.
        usage = self.usage
        best: Queued | None = sticky
        best_usage: float | None = None
        for name, lane in lanes.items():
            if lane.sticky is None and not lane._heap:
                continue
            top = lane.head()
            if top is None or top is sticky:
                continue
            if best is None:
                best = top
                continue
            if best_usage is None:
                best_usage = usage(best.lane)
            used = usage(name)
            if used < best_usage or (used == best_usage and best is not sticky and top.order < best.order):
                best, best_usage = top, used
        return best

    def park(self, entry: Queued, reason: str, message: str, *, shared: bool = True) -> list[Any]:
        if self.sticky is entry:
            self.sticky = None
        lane = self._lanes.get(entry.lane)
        return lane.park(entry, reason, message, shared=shared) if lane is not None else []

    def wake(self) -> bool:
        self.blocked = False
        woke = False
        for lane in self._lanes.values():
            woke = lane.wake() or woke
        return woke

    def shapes(self) -> tuple[int, int]:
        active = parked = 0
        for lane in self._lanes.values():
            a, p = lane.shapes()
            active += a
            parked += p
        return active, parked

    def ordered(self) -> list[Any]:
        """Every entry in queue order: by its LocalQueue's usage now, then its own order."""
        usage = {name: self.usage(name) for name in self._lanes}
        return sorted(self.entries(), key=lambda e: (usage[e.lane], e.order))

    def entries(self) -> Iterator[Any]:
        for lane in list(self._lanes.values()):
            yield from lane.entries()
