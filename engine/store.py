"""The object store: Kueue objects in, the quota tree and queues kept in step with them."""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import replace
from fractions import Fraction
from typing import Any, TypeVar, cast

from kadmit.engine import parse
from kadmit.engine.adjustments import ResourceAdjustments
from kadmit.engine.admission_fair_sharing import (
    AdmissionFairSharing,
    UsageLedger,
    from_milli,
    scaled,
    weighted_usage,
)
from kadmit.engine.entry import (
    EMPTY,
    EVICTION,
    REQUEUING_TIMESTAMPS,
    Entry,
    charge_of,
    queue_order,
    queue_timestamp,
    scheduling_shape,
)
from kadmit.engine.errors import UnsupportedConfiguration
from kadmit.engine.fair_sharing import (
    ACCEPTED_STRATEGIES,
    DEFAULT_STRATEGIES,
    Shares,
)
from kadmit.engine.flavors import (
    Assignment,
    FlavorAssigner,
)
from kadmit.engine.limit_ranges import LimitRangeItem, LimitSummary, summarize
from kadmit.engine.model import (
    BEST_EFFORT_FIFO,
    LOWER_OR_NEWER_EQUAL_PRIORITY,
    STOP_NONE,
    AdmissionCheck,
    ClusterQueue,
    Cohort,
    FlavorResource,
    LocalQueue,
    ResourceFlavor,
    Workload,
    WorkloadKey,
)
from kadmit.engine.queues import ClusterQueueQueue, LaneQueue, Queued
from kadmit.engine.quota import QuotaNode, add_usage, compute_quotas, find_cycle_members
from kadmit.engine.reasons import (
    DEACTIVATED,
    MISCONFIGURED,
    PENDING_EVALUATION,
    SUSPENDED,
)
from kadmit.engine.transformations import ResourceTransformations

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
Spec = TypeVar("Spec", ResourceFlavor, ClusterQueue, Cohort, AdmissionCheck)

HEADS_PER_CALL = 200
"""The default bound on the heads one :meth:`schedule` call evaluates: a few milliseconds (about
4 ms at p99 in bench/engine.py at 50,000 workloads), so that a webhook request sharing the event
loop with the scheduler waits well under its 15 ms budget behind a cycle."""


def _quota_signature(cq: ClusterQueue, node: QuotaNode) -> Hashable:
    """What a ClusterQueue can allocate: its flavors and the quotas of its path in the tree."""
    path = (*node.chain, node.top) if node.top is not None else (node,)
    return (
        cq.resource_groups,
        tuple(
            (
                n.name,
                tuple(sorted(n.subtree.items())),
                tuple(sorted(n.local.items())),
                tuple(sorted(n.borrowing_limit.items())),
            )
            for n in path
        ),
    )


def quota_reserved_false(wl: Workload) -> tuple[str, str] | None:
    """The workload's ``QuotaReserved=False`` reason and message as its object says (a restart
    of kadmit forgets what it reported, the object does not)."""
    found = wl.conditions.get("QuotaReserved")
    return (found.reason, found.message) if found is not None and found.status == "False" else None


def queue_blocker_told(told: tuple[str, str] | None) -> bool:
    """Whether ``(reason, message)`` is one of Kueue's ``getQueueBlocker`` answers: a queue
    stopped or inactive (Suspended), or missing (Misconfigured "... doesn't exist")."""
    if told is None:
        return False
    reason, message = told
    return reason == SUSPENDED or (reason == MISCONFIGURED and message.endswith("doesn't exist"))


def _move(index: dict[K, dict[WorkloadKey, Entry]], entry: Entry, old: K | None, new: K | None) -> None:
    """Move ``entry`` from the bucket ``old`` of ``index`` to the bucket ``new`` (None: no bucket);
    an emptied bucket is dropped, so the index never grows with keys nothing is in."""
    if old is not None:
        bucket = index.get(old)
        if bucket is not None:
            bucket.pop(entry.key, None)
            if not bucket:
                del index[old]
    if new is not None:
        index.setdefault(new, {})[entry.key] = entry


def _local_queue_of(entry: Queued) -> Hashable:
    """The lane of a pending workload under Admission Fair Sharing: its LocalQueue."""
    wl = cast(Entry, entry).wl
    return (wl.namespace, wl.queue_name)


def _workload_key(obj: Mapping[str, Any]) -> WorkloadKey:
    """Where a Workload object would be kept, before it is read (for its previous reading)."""
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        return WorkloadKey("", "")
    return WorkloadKey(str(meta.get("namespace") or "default"), str(meta.get("name") or ""))


class Store:
    """The engine's model of the cluster, kept in step with the objects fed in: the cohort
    tree and its usage, the queues, and who holds quota. No decisions are taken here."""

    def __init__(
        self,
        *,
        fair_sharing: bool = False,
        preemption_strategies: Sequence[str] = DEFAULT_STRATEGIES,
        block_admission: bool = False,
        heads_per_call: int | None = HEADS_PER_CALL,
        requeuing_timestamp: str = EVICTION,
        max_rounds: int | None = None,
        admission_fair_sharing: AdmissionFairSharing | None = None,
        concurrent_admission: bool = False,
        resource_transformations: ResourceTransformations | None = None,
    ) -> None:
        self.resource_transformations = resource_transformations
        """The Configuration's ``resources`` block (excluded prefixes, transformations): what a
        Workload's pods are charged, as each Workload is read."""
        self.concurrent_admission = concurrent_admission
        """The ConcurrentAdmission feature gate: ClusterQueues' ``concurrentAdmissionPolicy``
        is honoured (parents are not scheduled, variants are; see
        :mod:`kadmit.engine.concurrent_admission`)."""
        if tuple(preemption_strategies) not in ACCEPTED_STRATEGIES:
            raise UnsupportedConfiguration(
                "fairSharing.preemptionStrategies must be [LessThanOrEqualToFinalShare], "
                "[LessThanInitialShare] or [LessThanOrEqualToFinalShare, LessThanInitialShare]"
            )
        if requeuing_timestamp not in REQUEUING_TIMESTAMPS:
            raise UnsupportedConfiguration(
                f"waitForPodsReady.requeuingStrategy.timestamp must be Eviction or Creation, "
                f"not {requeuing_timestamp!r}"
            )
        self.requeuing_timestamp = requeuing_timestamp
        """``waitForPodsReady.requeuingStrategy.timestamp``: whether a workload evicted for
        not getting its pods ready in time is queued by its eviction or its creation time."""
        if heads_per_call is not None and heads_per_call < 1:
            raise ValueError(f"heads_per_call must be at least 1 (or None), not {heads_per_call}")
        self.heads_per_call = heads_per_call
        self.max_rounds = max_rounds
        """At most this many rounds per cycle (None: until no queue has anything left to try).
        A round gives each ClusterQueue's head one attempt, as one Kueue scheduling cycle does:
        ``max_rounds=1`` makes a cycle exactly one of Kueue's (its scheduler tests do that)."""
        """At most this many heads are evaluated per :meth:`schedule` call (None: no bound)."""
        self._calls = 0
        """Calls of :meth:`schedule` so far."""
        self._input_at = -1
        """The number of calls made when workloads last changed from outside."""
        self._input_at_root: dict[str, int] = {}
        """The same, per cohort tree (by its root's name): the heads of a tree nominated in that
        call or before are nominated again before they are decided. A change in another tree
        leaves them as they were: a nomination reads only its own tree's quota and workloads."""
        self._input_anywhere = -1
        """The same, for a change in no known tree: every head is nominated again."""
        self.fair_sharing = fair_sharing
        self.admission_fair_sharing = admission_fair_sharing
        """The Configuration's ``admissionFairSharing`` (None: off): ClusterQueues whose
        ``admissionScope`` asks for it order their LocalQueues by recent usage."""
        self._ledgers: dict[tuple[str, str], UsageLedger] = {}
        """Admission Fair Sharing: per LocalQueue, its consumed resources and entry penalties."""
        self._usages: dict[Hashable, float] = {}
        """Each LocalQueue's usage as last computed, until its ledger or its weight changes."""
        self.block_admission = block_admission
        """WaitForPodsReady's ``blockAdmission``: admit nothing while an Admitted workload's pods
        are not all ready (so, one admission at a time)."""
        self._not_ready: set[WorkloadKey] = set()
        self.preemption_strategies = tuple(preemption_strategies)
        self.flavors: dict[str, ResourceFlavor] = {}
        self.cluster_queues: dict[str, ClusterQueue] = {}
        self.cohorts: dict[str, Cohort] = {}
        self.local_queues: dict[tuple[str, str], LocalQueue] = {}
        self.priority_classes: dict[str, int] = {}
        self.admission_checks: dict[str, AdmissionCheck] = {}
        self.namespaces: dict[str, dict[str, str]] = {}
        self.limit_ranges: dict[str, dict[str, tuple[LimitRangeItem, ...]]] = {}
        """Per namespace, its LimitRanges' items by name."""
        self.limit_summaries: dict[str, LimitSummary] = {}
        """Per namespace with LimitRanges bearing on pods, their summary."""
        self.runtime_overheads: dict[str, dict[str, int]] = {}
        """Per RuntimeClass with an ``overhead.podFixed``, that overhead (replaced, not changed
        in place, so a Workload read under the old one is read again)."""
        self._adjustments: dict[str, ResourceAdjustments] = {}
        """Per namespace, what its Workloads are read under (made when first needed)."""
        self._entries: dict[WorkloadKey, Entry] = {}
        # A LocalQueue's pending workloads and those holding quota, kept as they change so that
        # its status never scans the workloads it has seen finish.
        self._lq_pending: dict[tuple[str, str], dict[WorkloadKey, Entry]] = {}
        self._lq_holders: dict[tuple[str, str], dict[WorkloadKey, Entry]] = {}
        """Per LocalQueue (namespace, name): the workloads that name it (its status reads them)."""
        self._unadmitted: dict[str, dict[WorkloadKey, Entry]] = {}
        """Per ClusterQueue: the workloads reserving there that are not Admitted yet (waiting for
        their checks), so that its status is its usage less theirs, without a scan."""
        self._queues: dict[str, ClusterQueueQueue] = {}
        self._nodes: dict[str, QuotaNode] = {}
        self._cohort_nodes: dict[str, QuotaNode] = {}
        self._shares = Shares(self._weight_of)
        """Fair sharing's shares of the nodes, kept while their usage is unchanged (new with the tree)."""
        self._inactive: dict[str, tuple[str, str]] = {}
        self._holders: dict[str, dict[WorkloadKey, Entry]] = {}
        self._roots: dict[str, list[str]] = {}
        self._root_of: dict[str, str] = {}
        self._versions: dict[str, int] = {}
        self._consumed: dict[str, int] = {}
        self._priority_usage: dict[str, dict[int, dict[FlavorResource, int]]] = {}
        """Per ClusterQueue, usage by workload priority (bounds what preemption could free)."""
        """Per root: total quota taken so far (a head nominated with enough slack still fits)."""
        self._borrowing_cache: dict[str, tuple[int, list[str]]] = {}
        self._awake: set[str] = set()

        """Roots with nothing parked or blocked since their last wake (a wake there is a no-op)."""
        self._assigners: dict[str, FlavorAssigner] = {}
        self._templates: dict[tuple[str, Hashable], Assignment] = {}
        self._fixed_flavor_cqs: set[str] = set()
        self._checked_cqs: set[str] = set()
        self._selects: dict[tuple[str, str], bool] = {}
        self._backoff: list[tuple[float, int, WorkloadKey]] = []
        self._unrouted: dict[WorkloadKey, tuple[str, str]] = {}
        self._held: dict[str, set[WorkloadKey]] = {}
        """Per ClusterQueue: unrouted workloads that still wait in it (in a held LocalQueue, or in
        their requeue backoff): Kueue's queues count them as pending there."""
        self._held_in: dict[WorkloadKey, str] = {}
        self._check_dirty: set[WorkloadKey] = set()
        self._unrouted_changed: set[WorkloadKey] = set()
        self._unblocked: set[WorkloadKey] = set()
        """Workloads queued again while their last word was a queue blocker ("LocalQueue X is
        inactive", "... doesn't exist"): unless the cycle tells them more, they are told they
        are pending evaluation (Kueue's workload controller does so once nothing blocks them)."""
        self._restarted: dict[WorkloadKey, str] = {}
        self._inactive_arrivals: set[WorkloadKey] = set()
        self._parked_arrivals: set[WorkloadKey] = set()
        """Workloads queued into a parked bucket: they are told its reason by the next cycle."""
        self._dirty = True
        self._report_inactive = True
        self._seq = 0
        self._cycle = 0
        self._generations: dict[str, int] = {}
        """Per ClusterQueue: bumped when its quotas, limits or flavors change (Kueue's
        ``AllocatableResourceGeneration``), which may outdate a workload's flavor-walk memory."""
        self._quota_signatures: dict[str, Hashable] = {}
        self._freed: dict[str, int] = {}
        """Per root: how many times quota was given back there (part of the generation)."""
        self._standing: dict[str, tuple[Entry, dict[FlavorResource, int]]] = {}
        self._replacing: dict[WorkloadKey, Entry] = {}
        """New Workload slices whose reservation is assumed, and the old slice each released."""
        """Per blocked StrictFIFO ClusterQueue: its head and the quota it holds back in every
        cycle while it stays blocked (Kueue's ``reserveCapacityForUnreclaimablePreempt``, which a
        StrictFIFO head repeats each cycle it is tried)."""

    def upsert(self, obj: Mapping[str, Any]) -> None:
        """Any supported object, dispatched on ``kind``."""
        kind = obj.get("kind")
        handler = {
            "ResourceFlavor": self.upsert_resource_flavor,
            "ClusterQueue": self.upsert_cluster_queue,
            "Cohort": self.upsert_cohort,
            "LocalQueue": self.upsert_local_queue,
            "WorkloadPriorityClass": self.upsert_priority_class,
            "AdmissionCheck": self.upsert_admission_check,
            "Namespace": self.upsert_namespace,
            "LimitRange": self.upsert_limit_range,
            "RuntimeClass": self.upsert_runtime_class,
            "Workload": self.upsert_workload,
        }.get(str(kind))
        if handler is None:
            raise ValueError(f"kind {kind!r} is not scheduled by the engine")
        handler(obj)

    def _put(self, table: dict[K, V], key: K, value: V) -> None:
        """Keep one spec; the setup is rebuilt (``_dirty``) only when it really changed."""
        if table.get(key) != value:
            table[key] = value
            self._dirty = True

    def _keep(self, table: dict[str, Spec], spec: Spec) -> None:
        self._put(table, spec.name, spec)

    def _drop(self, table: dict[K, V], key: K) -> None:
        if table.pop(key, None) is not None:
            self._dirty = True

    # One method per kind, written out: compiled (mypyc), a class keeps only methods it defines.
    def upsert_resource_flavor(self, obj: Mapping[str, Any]) -> None:
        self._keep(self.flavors, parse.resource_flavor(obj))

    def upsert_cluster_queue(self, obj: Mapping[str, Any]) -> None:
        self._keep(self.cluster_queues, parse.cluster_queue(obj))

    def upsert_cohort(self, obj: Mapping[str, Any]) -> None:
        self._keep(self.cohorts, parse.cohort(obj))

    def upsert_admission_check(self, obj: Mapping[str, Any]) -> None:
        self._keep(self.admission_checks, parse.admission_check(obj))

    def delete_resource_flavor(self, name: str) -> None:
        self._drop(self.flavors, name)

    def delete_cluster_queue(self, name: str) -> None:
        self._drop(self.cluster_queues, name)

    def delete_cohort(self, name: str) -> None:
        self._drop(self.cohorts, name)

    def delete_admission_check(self, name: str) -> None:
        self._drop(self.admission_checks, name)

    def upsert_local_queue(self, obj: Mapping[str, Any]) -> None:
        lq = parse.local_queue(obj)
        key = (lq.namespace, lq.name)
        self._put(self.local_queues, key, lq)
        self._usages.pop(key, None)  # its weight may have changed
        if self.admission_fair_sharing is not None and key not in self._ledgers:
            seed = parse.local_queue_consumed(obj)  # what a previous run sampled
            if seed is not None:
                self._ledgers[key] = UsageLedger(*seed)

    def delete_local_queue(self, namespace: str, name: str) -> None:
        self._drop(self.local_queues, (namespace, name))
        self._ledgers.pop((namespace, name), None)
        self._usages.pop((namespace, name), None)

    # Admission Fair Sharing

    def uses_admission_fair_sharing(self, cq_name: str) -> bool:
        cq = self.cluster_queues.get(cq_name)
        return self.admission_fair_sharing is not None and cq is not None and cq.admission_fair_sharing

    def _lq_usage(self, key: Hashable) -> float:
        """The Admission Fair Sharing usage of LocalQueue ``key``: its lane's place in the queue."""
        usage = self._usages.get(key)
        if usage is not None:
            return usage
        afs = self.admission_fair_sharing
        assert afs is not None
        lq = self.local_queues.get(cast(tuple[str, str], key))
        weight = float(lq.fair_sharing_weight) if lq is not None else 1.0
        ledger = self._ledgers.get(cast(tuple[str, str], key))
        if ledger is None:
            usage = weighted_usage({}, {}, weight, afs.resource_weights)
        else:
            usage = ledger.usage(weight, afs.resource_weights)
        self._usages[key] = usage
        return usage

    def _candidate_usage(self, candidate: Any) -> tuple[Hashable, float] | None:
        """A preemption candidate's LocalQueue and its usage, when its ClusterQueue uses Admission
        Fair Sharing."""
        entry = cast(Entry, candidate)
        reserved_in = entry.reserved_in
        cq = self.cluster_queues.get(reserved_in) if reserved_in is not None else None
        if cq is None or not cq.admission_fair_sharing or self.admission_fair_sharing is None:
            return None  # as uses_admission_fair_sharing says, inline: a search asks for hundreds
        wl = entry.wl
        key = (wl.namespace, wl.queue_name)
        usage = self._usages.get(key)
        return key, (self._lq_usage(key) if usage is None else usage)

    def _ledger(self, key: tuple[str, str]) -> UsageLedger:
        """The LocalQueue's ledger, to be changed: its usage is computed again when next asked."""
        self._usages.pop(key, None)
        ledger = self._ledgers.get(key)
        if ledger is None:
            ledger = self._ledgers[key] = UsageLedger()
        return ledger

    def _lq_admitted_usage(self, key: tuple[str, str]) -> dict[str, int]:
        """What the LocalQueue's Admitted workloads use now (nano-units per resource)."""
        usage: dict[FlavorResource, int] = {}
        for entry in self._lq_holders.get(key, {}).values():
            if entry.admitted:
                for fr, value in entry.charged.items():
                    usage[fr] = usage.get(fr, 0) + value
        return from_milli(usage)

    def _push_penalty(self, entry: Entry, cq_name: str, usage: Mapping[FlavorResource, int]) -> None:
        """``entry`` reserves quota in ``cq_name``: its LocalQueue's usage grows by the entry
        penalty at once (Kueue's scheduler, at assume time)."""
        afs = self.admission_fair_sharing
        if afs is None or not self.uses_admission_fair_sharing(cq_name):
            return
        wl = entry.wl
        penalty = scaled(from_milli(usage), afs.entry_alpha)
        self._ledger((wl.namespace, wl.queue_name)).push(entry.key, penalty)

    def _drop_penalty(self, entry: Entry) -> None:
        """``entry``'s penalty will never settle (rolled back, finished, deactivated, gone)."""
        if self.admission_fair_sharing is None:
            return
        key = (entry.wl.namespace, entry.wl.queue_name)
        ledger = self._ledgers.get(key)
        if ledger is not None and entry.key in ledger.penalties:
            self._usages.pop(key, None)
            ledger.drop(entry.key)

    def _settle(self, entry: Entry, when: float) -> None:
        """``entry`` became Admitted at ``when``: its LocalQueue's consumed resources are sampled
        and its penalty folded in (Kueue's workload reconciler)."""
        afs = self.admission_fair_sharing
        cq = entry.reserved_in
        if afs is None or cq is None or not self.uses_admission_fair_sharing(cq):
            return
        key = (entry.wl.namespace, entry.wl.queue_name)
        self._ledger(key).settle(entry.key, self._lq_admitted_usage(key), when, afs.usage_half_life)

    def sample_admission_fair_sharing(self, now: float, force: bool = False) -> list[tuple[str, str]]:
        """Sample the consumed resources of every LocalQueue under Admission Fair Sharing whose
        last sample is ``usageSamplingInterval`` old (all of them with ``force``): the LocalQueues
        sampled, whose status changed. The controller calls it on its clock."""
        afs = self.admission_fair_sharing
        if afs is None:
            return []
        self.sync()
        sampled = []
        for key, lq in self.local_queues.items():
            if not self.uses_admission_fair_sharing(lq.cluster_queue):
                continue
            ledger = self._ledger(key)
            due = ledger.last_update is None or now - ledger.last_update >= afs.sampling_interval
            if force or due:
                ledger.sample(self._lq_admitted_usage(key), now, afs.usage_half_life)
                sampled.append(key)
        return sampled

    def local_queue_usage(self, namespace: str, name: str) -> float:
        """The Admission Fair Sharing usage that orders this LocalQueue's workloads (0 when off)."""
        if self.admission_fair_sharing is None:
            return 0.0
        return self._lq_usage((namespace, name))

    def upsert_priority_class(self, obj: Mapping[str, Any]) -> None:
        wpc = parse.workload_priority_class(obj)
        self.priority_classes[wpc.name] = wpc.value  # existing workloads keep their priority

    def delete_priority_class(self, name: str) -> None:
        self.priority_classes.pop(name, None)

    def upsert_namespace(self, obj: Mapping[str, Any]) -> None:
        name, labels = parse.namespace_labels(obj)
        self._put(self.namespaces, name, labels)

    def delete_namespace(self, name: str) -> None:
        self._drop(self.namespaces, name)

    def upsert_limit_range(self, obj: Mapping[str, Any]) -> None:
        """A LimitRange: its namespace's Workloads are read under its defaults and limits from
        now on. Feed the namespace's pending Workloads again after a change (Kueue's Workload
        controller does the same): the engine keeps what it read of them, not their specs."""
        namespace, name, items = parse.limit_range(obj)
        ranges = self.limit_ranges.setdefault(namespace, {})
        if ranges.get(name) != items:
            ranges[name] = items
            self._summarize(namespace)

    def delete_limit_range(self, namespace: str, name: str) -> None:
        ranges = self.limit_ranges.get(namespace)
        if ranges is not None and ranges.pop(name, None) is not None:
            self._summarize(namespace)

    def upsert_runtime_class(self, obj: Mapping[str, Any]) -> None:
        """A RuntimeClass: a pod naming it and declaring no overhead has its ``overhead.podFixed``
        (Kueue's ``handlePodOverhead``). As for a LimitRange, feed the pending Workloads naming it
        again after a change."""
        name, overhead = parse.runtime_class(obj)
        if self.runtime_overheads.get(name, {}) != overhead:
            overheads = {k: v for k, v in self.runtime_overheads.items() if k != name}
            if overhead:
                overheads[name] = overhead
            self.runtime_overheads = overheads
            self._adjustments.clear()

    def delete_runtime_class(self, name: str) -> None:
        if name in self.runtime_overheads:
            self.runtime_overheads = {k: v for k, v in self.runtime_overheads.items() if k != name}
            self._adjustments.clear()

    def adjustments(self, namespace: str) -> ResourceAdjustments | None:
        """What a Workload of ``namespace`` is read under, or None when nothing adjusts requests."""
        found = self._adjustments.get(namespace)
        if found is None:
            limits = self.limit_summaries.get(namespace)
            if limits is None and not self.runtime_overheads and not self.resource_transformations:
                return None
            found = ResourceAdjustments(limits, self.runtime_overheads, self.resource_transformations)
            self._adjustments[namespace] = found
        return found

    def _summarize(self, namespace: str) -> None:
        self._adjustments.pop(namespace, None)
        ranges = self.limit_ranges.get(namespace)
        if not ranges:
            self.limit_ranges.pop(namespace, None)
        summary = summarize(ranges) if ranges else None
        if summary is None:
            self.limit_summaries.pop(namespace, None)
        else:
            self.limit_summaries[namespace] = summary

    def upsert_workload(self, obj: Mapping[str, Any]) -> None:
        """A Workload with its status; one holding quota in its status is charged for it."""
        key = _workload_key(obj)
        known = self._entries.get(key)
        previous = known.wl if known is not None else None
        wl = parse.workload(obj, self.priority_classes, previous, self.adjustments(key.namespace))
        entry = self._entries.get(wl.key)
        if entry is None:
            entry = Entry(wl)
            self._entries[wl.key] = entry
        self._input(entry)
        try:
            self._take_workload(entry, wl)
        finally:
            self._index(entry)
            self._input(entry)

    def _input(self, entry: Entry) -> None:
        """``entry`` changed from outside: the trees it is queued or reserved in saw an input.
        Called before and after the change, so both the trees it left and those it joined do."""
        calls = self._calls
        self._input_at = calls
        for cq in (entry.queue, entry.reserved_in):
            if cq is not None:
                root = self._root_of.get(cq)
                if root is None:
                    self._input_anywhere = calls
                else:
                    self._input_at_root[root] = calls

    def _input_in(self, cq: str) -> int:
        """The last call before which ``cq``'s tree saw an input (see :meth:`_input`)."""
        root = self._root_of.get(cq)
        if root is None:
            return self._calls
        return max(self._input_anywhere, self._input_at_root.get(root, -1))

    def _take_workload(self, entry: Entry, wl: Workload) -> None:
        """:meth:`upsert_workload` once ``wl`` is parsed and its entry found or made."""
        was_admitted = entry.wl is wl or entry.wl.condition_true("Admitted")
        if entry.wl is not wl:
            if entry.wl.queue_name != wl.queue_name:
                self._drop_penalty(entry)  # it cannot settle in the LocalQueue it left
            new_shape = scheduling_shape(wl)
            if entry.walk is not None and scheduling_shape(entry.wl) != new_shape:
                entry.walk = None  # another scheduling shape: its walks start from the first flavor
            ungated = entry.wl.preemption_gated and not wl.preemption_gated
            if entry.reserved_in is not None and entry.wl.priority != wl.priority:
                self._move_priority_usage(entry, wl.priority)
            entry.rebind(wl)
            if ungated and entry.queue is not None:
                self._wake(entry.queue)  # its preemption gate opened: it may preempt now
            if new_shape != entry.shape or entry.order[0] != -wl.priority:
                self._dequeue(entry)
                entry.shape = new_shape
        if wl.finished or not wl.active:
            if wl.finished or not wl.holds_quota:
                self._drop_penalty(entry)
            self._release(entry)
            self._dequeue(entry)
            entry.reported = None
            if not wl.active and not wl.finished:
                self._set_unrouted(wl.key, DEACTIVATED, "The workload is deactivated")
            else:
                self._clear_unrouted(wl.key)
            return
        if self.concurrent_admission and self._concurrent_parent(wl):
            # Its variants are scheduled and hold the quota; the parent is neither (Kueue's
            # queue manager and cache skip it).
            self._release(entry)
            self._dequeue(entry)
            self._clear_unrouted(wl.key)
            return
        if wl.holds_quota:
            charge = charge_of(wl)
            assert charge is not None
            cq, usage, flavors = charge
            if entry.reserved_in != cq or entry.charged != usage:
                previous = entry.reserved_in
                self._release(entry, wake=False)
                self._reserve(entry, cq, usage, flavors, wl.conditions["QuotaReserved"].last_transition)
                if previous is not None:
                    self._wake(previous)  # e.g. reclaimable pods gave some quota back
            entry.assumed = False
            self._replacing.pop(wl.key, None)  # its admission is written: the old slice stays released
            entry.evicted = wl.condition_true("Evicted")
            entry.admitted = wl.condition_true("Admitted")
            if entry.admitted and not was_admitted:
                self._index(entry)  # its LocalQueue's admitted usage, which the sample reads, has it
                self._settle(entry, wl.conditions["Admitted"].last_transition)
            self._track_readiness(entry)
            self._dequeue(entry)
            self._clear_unrouted(wl.key)
            self._check_dirty.add(wl.key)
            return
        if entry.reserved_in is not None and entry.assumed:
            return  # our reservation is not written yet: keep it (never double-book)
        if entry.reserved_in is not None:
            self._release(entry)  # QuotaReserved went False: the job stopped
        entry.admitted = False
        entry.evicted = False
        self._route(entry, now=None)

    def workload(self, namespace: str, name: str) -> Workload | None:
        """The Workload as last read, or None. Read only: a webhook reviewing a status change of it
        takes the pod sets from here rather than reading every container's quantities again."""
        entry = self._entries.get(WorkloadKey(namespace, name))
        return entry.wl if entry is not None else None

    def delete_workload(self, namespace: str, name: str) -> None:
        entry = self._entries.get(WorkloadKey(namespace, name))
        if entry is not None:
            self._remove(entry)
            self._check_dirty.discard(entry.key)

    def forget(self, namespace: str, name: str) -> None:
        """The controller failed to write a reservation: undo the assumption, queue again."""
        entry = self._entries.get(WorkloadKey(namespace, name))
        if entry is None or not entry.assumed:
            return
        self._input(entry)
        self._drop_penalty(entry)
        self._release(entry)
        self._restore_replaced(entry.key)
        entry.assumed = False
        entry.admitted = False
        self._index(entry)
        self._route(entry, now=None)
        self._input(entry)

    def _replace_slice(self, entry: Entry, old_key: WorkloadKey) -> WorkloadKey | None:
        """``entry``, a new Workload slice, is admitted: the slice it replaces gives its quota
        back at once (until ``forget`` undoes the admission); its key, for the controller to
        finish it, or None if it holds no quota any more."""
        old = self._entries.get(old_key)
        if old is None or old.reserved_in is None:
            return None
        self._release(old, wake=False)
        self._dequeue(old)
        self._index(old)
        self._replacing[entry.key] = old
        return old_key

    def _restore_replaced(self, key: WorkloadKey) -> None:
        """The admission of slice ``key`` was not written: the slice it replaced holds its quota again."""
        old = self._replacing.pop(key, None)
        if old is not None and self._entries.get(old.key) is old and old.reserved_in is None:
            wl = old.wl
            if wl.holds_quota:
                self._take_workload(old, wl)
                self._index(old)
                self._input(old)

    def finish(self, namespace: str, name: str) -> None:
        """The workload finished: its quota is released and it leaves the queues."""
        entry = self._entries.get(WorkloadKey(namespace, name))
        if entry is not None:
            self._remove(entry)

    def _remove(self, entry: Entry) -> None:
        """``entry`` is gone: its quota is released and it leaves the queues and the indexes."""
        self._input(entry)
        self._drop_penalty(entry)
        self._release(entry)
        self._dequeue(entry)
        del self._entries[entry.key]
        self._index(entry)
        self._clear_unrouted(entry.key)

    def release(
        self, namespace: str, name: str, now: float | None = None, requeue_at: float | None = None
    ) -> None:
        """An evicted workload's job has stopped: free its quota and queue it again
        (not before ``requeue_at``)."""
        entry = self._entries.get(WorkloadKey(namespace, name))
        if entry is None:
            return
        self._input(entry)
        self._release(entry)
        entry.assumed = False
        entry.evicted = False
        entry.admitted = False
        self._index(entry)
        entry.check_reported = ""
        entry.walk = None
        wl = entry.wl
        if wl.check_states:  # eviction resets every check to Pending (Kueue's evict.Evict)
            reset = tuple(replace(c, state="Pending") for c in wl.check_states)
            entry.rebind(replace(wl, check_states=reset))
        if now is not None and requeue_at is not None:
            entry.evicted_at = now  # evicted by a check: queued by its eviction time (Kueue)
        self._route(entry, now=now, requeue_at=requeue_at)
        self._input(entry)

    def set_check_states(self, namespace: str, name: str, states: Iterable[Mapping[str, Any]]) -> None:
        """``status.admissionChecks`` of a reserving workload changed."""
        entry = self._entries.get(WorkloadKey(namespace, name))
        if entry is None:
            return
        self._input(entry)
        entry.rebind(replace(entry.wl, check_states=parse.admission_check_states(name, list(states))))
        self._check_dirty.add(entry.key)

    def _rebuild(self) -> None:
        """Recompute the cohort tree, quotas and activeness after an object changed."""
        self._dirty = False
        parents: dict[str, str | None] = {name: c.parent for name, c in self.cohorts.items()}
        for cq in self.cluster_queues.values():
            if cq.cohort and cq.cohort not in parents:
                parents[cq.cohort] = None
        for cohort in list(parents.values()):
            if cohort and cohort not in parents:
                parents[cohort] = None
        cyclic = find_cycle_members(parents)
        cohort_nodes = {name: QuotaNode(name, True) for name in parents}
        for name, node in cohort_nodes.items():
            if name in self.cohorts:
                node.set_groups(self.cohorts[name].resource_groups)
            parent = parents[name]
            if parent is not None and name not in cyclic:
                node.parent = cohort_nodes[parent]
                cohort_nodes[parent].children.append(node)
        nodes: dict[str, QuotaNode] = {}
        for name, cq in self.cluster_queues.items():
            node = QuotaNode(name, False)
            node.set_groups(cq.resource_groups)
            if cq.cohort and cq.cohort not in cyclic:
                node.parent = cohort_nodes[cq.cohort]
                node.parent.children.append(node)
            nodes[name] = node
        roots = [n for n in list(cohort_nodes.values()) + list(nodes.values()) if n.parent is None]
        for root in roots:
            compute_quotas(root)
        self._nodes, self._cohort_nodes = nodes, cohort_nodes
        self._shares = Shares(self._weight_of)
        for cq_name, holders in self._holders.items():
            holder_node = nodes.get(cq_name)
            if holder_node is not None:
                for entry in holders.values():
                    add_usage(holder_node, entry.charged)
        self._roots = {}
        self._root_of = {}
        self._borrowing_cache = {}
        self._awake = set()
        self._templates = {}
        self._selects = {}
        for name, cq in self.cluster_queues.items():
            signature = _quota_signature(cq, nodes[name])
            if self._quota_signatures.get(name) != signature:
                self._quota_signatures[name] = signature
                self._generations[name] = self._generations.get(name, 0) + 1
        self._fixed_flavor_cqs = {
            name
            for name, cq in self.cluster_queues.items()
            if all(len(group.flavors) == 1 for group in cq.resource_groups)
        }
        self._checked_cqs = {name for name, cq in self.cluster_queues.items() if cq.admission_checks}
        self._assigners = {
            name: FlavorAssigner(cq, nodes[name], self.flavors, None, fair_sharing=self.fair_sharing)
            for name, cq in self.cluster_queues.items()
        }
        for name, node in nodes.items():
            self._roots.setdefault(node.root.name, []).append(name)
            self._root_of[name] = node.root.name
        self._inactive = {}
        self._report_inactive = True
        for name, cq in self.cluster_queues.items():
            reason = self._inactive_reason(cq, cyclic)
            if reason is not None:
                self._inactive[name] = reason
        old_queues = self._queues
        self._queues = {name: self._new_queue(cq) for name, cq in self.cluster_queues.items()}
        pending = [e for q in old_queues.values() for e in q.entries()]
        pending += [self._entries[k] for k in list(self._unrouted) if k in self._entries]
        for entry in pending:
            entry.bucket = None
            entry.queue = None
        for entry in sorted(pending, key=lambda e: e.order):
            if entry.wl.active and not entry.wl.finished:
                self._route(entry, now=None)

    def _new_queue(self, cq: ClusterQueue) -> ClusterQueueQueue:
        strict = cq.queueing_strategy != BEST_EFFORT_FIFO
        if self.admission_fair_sharing is not None and cq.admission_fair_sharing:
            return LaneQueue(strict, _local_queue_of, self._lq_usage)
        return ClusterQueueQueue(strict)

    def _inactive_reason(self, cq: ClusterQueue, cyclic: set[str]) -> tuple[str, str] | None:
        problems: list[tuple[str, str]] = []
        if cq.terminating:
            problems.append(("Terminating", "the ClusterQueue is terminating"))
        if cq.stop_policy != STOP_NONE:
            problems.append(("Stopped", "the ClusterQueue is stopped"))
        missing = [f.name for g in cq.resource_groups for f in g.flavors if f.name not in self.flavors]
        if missing:
            problems.append(("FlavorNotFound", f"references missing ResourceFlavor(s): {', '.join(missing)}"))
        checks = [rule.name for rule in cq.admission_checks]
        absent = [c for c in checks if c not in self.admission_checks]
        if absent:
            problems.append(
                ("AdmissionCheckNotFound", f"references missing AdmissionCheck(s): {', '.join(absent)}")
            )
        inactive = [c for c in checks if c in self.admission_checks and not self.admission_checks[c].active]
        if inactive:
            problems.append(
                ("AdmissionCheckInactive", f"references inactive AdmissionCheck(s): {', '.join(inactive)}")
            )
        multikueue = [
            c
            for c in checks
            if c in self.admission_checks
            and self.admission_checks[c].controller_name == "kueue.x-k8s.io/multikueue"
        ]
        if len(multikueue) > 1:
            problems.append(
                ("MultipleMultiKueueAdmissionChecks", "Cannot use multiple MultiKueue AdmissionChecks")
            )
        if any(rule.on_flavors for rule in cq.admission_checks if rule.name in multikueue):
            problems.append(
                (
                    "MultiKueueAdmissionCheckAppliedPerFlavor",
                    "Cannot specify MultiKueue AdmissionCheck per flavor",
                )
            )
        if multikueue and any(
            c in self.admission_checks
            and self.admission_checks[c].controller_name == "kueue.x-k8s.io/provisioning-request"
            for c in checks
        ):
            problems.append(
                (
                    "MultiKueueWithProvisioningRequest",
                    "Cannot use a MultiKueue AdmissionCheck with a ProvisioningRequest AdmissionCheck",
                )
            )
        if cq.cohort and cq.cohort in cyclic:
            problems.append(("HasCycle", "the cohort tree has a cycle"))
        if not problems:
            return None
        return problems[0][0], f"Can't admit new workloads: {', '.join(p[1] for p in problems)}."

    def sync(self) -> None:
        """Apply queued changes of ClusterQueues, Cohorts, flavors, checks or namespaces now
        (the next :meth:`schedule` does it otherwise): rebuilds the tree and re-routes pending
        workloads, a cost that belongs to the configuration change, not to a cycle."""
        if self._dirty:
            self._rebuild()

    def _route(self, entry: Entry, now: float | None, requeue_at: float | None = None) -> None:
        """Put a pending workload into its ClusterQueue's heap, or record why it cannot be."""
        self._dequeue(entry)
        if self._dirty:
            self._set_unrouted(entry.key, PENDING_EVALUATION, "")
            return
        wl = entry.wl
        if not wl.active:
            self._set_unrouted(wl.key, DEACTIVATED, "The workload is deactivated")
            return
        if wl.on_hold:  # Kueue's getQueueBlocker: its own reason and message stand
            held = wl.conditions["QuotaReserved"]
            self._set_unrouted(wl.key, held.reason, held.message)
            return
        requeued = wl.conditions.get("Requeued")
        wait_until = requeue_at if requeue_at is not None else wl.requeue_at
        if requeued is not None and requeued.status == "False" and wait_until is None:
            if requeued.reason.startswith("Deactivated") or (
                requeued.reason.endswith("Stopped") and self._still_stopped(wl, requeued.reason)
            ):
                self._set_unrouted(wl.key, SUSPENDED, requeued.message)
                return
            if requeued.reason.endswith("Stopped"):  # the queue runs again: Kueue's *Restarted
                self._restarted[wl.key] = requeued.reason.replace("Stopped", "Restarted")
        if wait_until is not None and (now is None or now < wait_until):
            self._seq += 1
            heapq.heappush(self._backoff, (wait_until, self._seq, wl.key))
            self._set_unrouted(wl.key, PENDING_EVALUATION, "waiting for the requeue backoff to finish")
            return
        lq = self.local_queues.get((wl.namespace, wl.queue_name))
        if lq is None:
            self._set_unrouted(wl.key, MISCONFIGURED, f"LocalQueue {wl.queue_name} doesn't exist")
            return
        if lq.stop_policy != STOP_NONE:
            # Kueue's getQueueBlocker: "is stopped" is what an evicted reservation is told
            self._set_unrouted(wl.key, SUSPENDED, f"LocalQueue {lq.name} is inactive")
            return
        queue = self._queues.get(lq.cluster_queue)
        if queue is None:
            self._set_unrouted(wl.key, MISCONFIGURED, f"ClusterQueue {lq.cluster_queue} doesn't exist")
            return
        if self.concurrent_admission and self._concurrent_parent(wl):
            self._clear_unrouted(wl.key)  # its variants are queued, not the parent
            return
        if self._clear_unrouted(wl.key) is not None:
            self._unrouted_changed.discard(wl.key)  # nothing to report: it is queued
        if queue_blocker_told(entry.reported or quota_reserved_false(wl)):
            self._unblocked.add(wl.key)
        timestamp = (
            entry.evicted_at
            if entry.evicted_at is not None
            else queue_timestamp(wl, self.requeuing_timestamp)
        )
        entry.order = queue_order(wl, timestamp)
        cq = self.cluster_queues[lq.cluster_queue]
        shape = scheduling_shape(wl)
        if wl.parent_uid or wl.allowed_flavors is not None:
            # A ConcurrentAdmission variant: its flavors are its own (Kueue hashes them in), and
            # whether it may go depends on its siblings, so it never shares a parked bucket.
            shape = (shape, wl.allowed_flavors, wl.parent_uid, wl.uid)
        if cq.preemption.within_cluster_queue == LOWER_OR_NEWER_EQUAL_PRIORITY:
            shape = (shape, entry.order)
        if not self._selected(lq.cluster_queue, wl.namespace):
            # Misconfigured, whatever its shape: it must not park its peers of other namespaces
            shape = (shape, wl.namespace)
        entry.shape = shape
        entry.queue = lq.cluster_queue
        if queue.push(entry):
            self._parked_arrivals.add(entry.key)
        if queue.strict_fifo:
            queue.blocked = False
        if lq.cluster_queue in self._inactive:
            self._inactive_arrivals.add(entry.key)

    def _concurrent_parent(self, wl: Workload) -> bool:
        """A Workload whose variants are scheduled instead of it (ConcurrentAdmission): labelled
        a parent, or sent to (or admitted in) a ClusterQueue with a ``concurrentAdmissionPolicy``,
        and not a variant itself."""
        if wl.parent_uid:
            return False
        if wl.parent_label:
            return True
        lq = self.local_queues.get((wl.namespace, wl.queue_name))
        names = [lq.cluster_queue] if lq is not None else []
        if wl.admission is not None:
            names.append(wl.admission.cluster_queue)
        for name in names:
            cq = self.cluster_queues.get(name)
            if cq is not None and cq.concurrent_admission is not None:
                return True
        return False

    def _selected(self, cq_name: str, namespace: str) -> bool:
        """Whether the ClusterQueue's ``namespaceSelector`` selects ``namespace`` (kept until the
        next rebuild: a namespace's labels or a selector changing rebuilds)."""
        selected = self._selects.get((cq_name, namespace))
        if selected is None:
            cq = self.cluster_queues[cq_name]
            labels = self.namespaces.get(namespace, {"kubernetes.io/metadata.name": namespace})
            selected = cq.namespace_selector is not None and cq.namespace_selector.matches(labels)
            self._selects[(cq_name, namespace)] = selected
        return selected

    def _still_stopped(self, wl: Workload, reason: str) -> bool:
        lq = self.local_queues.get((wl.namespace, wl.queue_name))
        if reason == "LocalQueueStopped":
            return lq is None or lq.stop_policy != STOP_NONE
        cq = self.cluster_queues.get(lq.cluster_queue) if lq is not None else None
        return cq is None or cq.stop_policy != STOP_NONE

    def _set_unrouted(self, key: WorkloadKey, reason: str, message: str) -> None:
        self._unrouted[key] = (reason, message)
        self._unrouted_changed.add(key)
        self._unhold(key)
        entry = self._entries.get(key)
        if entry is None or reason not in (SUSPENDED, PENDING_EVALUATION) or not message:
            return  # deactivated, misconfigured, or waiting for a rebuild: in no queue
        wl = entry.wl
        lq = self.local_queues.get((wl.namespace, wl.queue_name))
        if lq is not None and lq.cluster_queue in self.cluster_queues:
            self._held.setdefault(lq.cluster_queue, set()).add(key)
            self._held_in[key] = lq.cluster_queue

    def _clear_unrouted(self, key: WorkloadKey) -> tuple[str, str] | None:
        self._unhold(key)
        return self._unrouted.pop(key, None)

    def _unhold(self, key: WorkloadKey) -> None:
        cq = self._held_in.pop(key, None)
        if cq is not None:
            held = self._held[cq]
            held.discard(key)
            if not held:
                del self._held[cq]

    def _dequeue(self, entry: Entry) -> None:
        name = entry.queue
        if name is not None:
            queue = self._queues.get(name)
            if queue is not None:
                if queue.blocked and queue.strict_fifo and queue.head() is entry:
                    queue.blocked = False  # the head that blocked it left: try the next one
                    standing = self._standing.pop(name, None)
                    if standing is not None and standing[0] is entry:
                        self._wake(name)  # what it held back is free again
                queue.remove(entry)
            entry.queue = None
        entry.bucket = None

    def _wake(self, cq_name: str) -> None:
        """An event that may let parked workloads fit happened in ``cq_name``'s cohort tree."""
        root = self._root_of.get(cq_name)
        if root is None or root in self._awake:
            return  # nothing parked or blocked in this tree since the last wake
        self._awake.add(root)
        for name in self._roots.get(root, ()):
            queue = self._queues.get(name)
            if queue is not None:
                queue.wake()

    def _reserve(
        self, entry: Entry, cq: str, usage: dict[FlavorResource, int], flavors: frozenset[str], when: float
    ) -> None:
        """Charge ``usage`` to ``cq`` for ``entry`` (kept as its ``charged``: never changed in place)."""
        entry.reserved_in = cq
        entry.charged = usage
        entry.flavors = flavors
        entry.reserved_at = when
        holders = self._holders.get(cq)
        if holders is None:
            holders = self._holders[cq] = {}
        holders[entry.key] = entry
        self._count_by_priority(cq, entry.wl.priority, usage, 1)
        node = self._nodes.get(cq)
        if node is not None and not self._dirty:
            add_usage(node, usage)
            self._touch(cq, usage)

    def _move_priority_usage(self, entry: Entry, priority: int) -> None:
        """A holder's priority changed (its Workload was updated, its admission kept): its usage
        is counted under the new priority, which the preemption shortcuts read, and the queue's
        parked heads are tried again, as they may now preempt it."""
        cq = entry.reserved_in
        assert cq is not None
        self._count_by_priority(cq, entry.wl.priority, entry.charged, -1)
        self._count_by_priority(cq, priority, entry.charged, 1)
        self._wake(cq)

    def _count_by_priority(
        self, cq: str, priority: int, usage: Mapping[FlavorResource, int], sign: int
    ) -> None:
        """Add (``sign`` 1) or take back (-1) a holder's ``usage`` in ``cq``'s usage by priority."""
        priorities = self._priority_usage.get(cq)
        if priorities is None:
            priorities = self._priority_usage[cq] = {}
        by_priority = priorities.get(priority)
        if by_priority is None:
            by_priority = priorities[priority] = {}
        for fr, value in usage.items():
            by_priority[fr] = by_priority.get(fr, 0) + (value if sign > 0 else -value)

    def _track_readiness(self, entry: Entry) -> None:
        ready = entry.wl.condition_true("PodsReady")
        if entry.reserved_in is not None and entry.admitted and not ready:
            self._not_ready.add(entry.key)
        elif entry.key in self._not_ready:
            self._not_ready.discard(entry.key)
            if self.block_admission and not self._not_ready:
                for queue in self._queues.values():  # the block is lifted everywhere
                    queue.wake()
                self._awake.clear()

    def _release(self, entry: Entry, wake: bool = True) -> None:
        cq = entry.reserved_in
        if cq is None:
            return
        if entry.key in self._not_ready:
            self._not_ready.discard(entry.key)
            if self.block_admission and not self._not_ready:
                for queue in self._queues.values():
                    queue.wake()
                self._awake.clear()
        holders = self._holders.get(cq)
        if holders is not None:
            holders.pop(entry.key, None)
        self._count_by_priority(cq, entry.wl.priority, entry.charged, -1)
        node = self._nodes.get(cq)
        if node is not None and not self._dirty:
            add_usage(node, entry.charged, -1)
            self._touch(cq)
            root = self._root_of.get(cq)
            if root is not None:
                self._freed[root] = self._freed.get(root, 0) + 1
        entry.reserved_in = None
        entry.charged = {}
        entry.flavors = EMPTY
        entry.targets = EMPTY
        if wake:
            self._wake(cq)

    def _index(self, entry: Entry) -> None:
        """Put ``entry`` where it belongs in the indexes its queues' status reads: the pending
        workloads and the quota holders of the LocalQueue it names (while the engine knows it),
        and the holders of a ClusterQueue that are not Admitted yet. Called after each change of a
        workload's LocalQueue, reservation, admission or activeness; when nothing moved it changes
        nothing."""
        wl = entry.wl
        member_of = (wl.namespace, wl.queue_name) if self._entries.get(entry.key) is entry else None
        holds_in = member_of if entry.reserved_in is not None else None
        if entry.holds_in != holds_in:
            _move(self._lq_holders, entry, entry.holds_in, holds_in)
            entry.holds_in = holds_in
        pending_in = member_of if holds_in is None and wl.active and not wl.finished else None
        if pending_in is not None and self.concurrent_admission and self._concurrent_parent(wl):
            pending_in = None  # its variants wait in its place
        if entry.pending_in != pending_in:
            _move(self._lq_pending, entry, entry.pending_in, pending_in)
            entry.pending_in = pending_in
        waits_in = entry.reserved_in if member_of is not None and not entry.admitted else None
        if entry.waits_in != waits_in:
            _move(self._unadmitted, entry, entry.waits_in, waits_in)
            entry.waits_in = waits_in

    def _touch(self, cq_name: str, consumed: Mapping[FlavorResource, int] | None = None) -> None:
        """Usage changed in ``cq_name``'s tree; ``consumed`` is what was taken, if any."""
        root = self._root_of.get(cq_name)
        if root is not None:
            self._versions[root] = self._versions.get(root, 0) + 1
            if consumed:
                self._consumed[root] = self._consumed.get(root, 0) + sum(consumed.values())

    def _weight_of(self, node: QuotaNode) -> Fraction:
        if node.is_cohort:
            cohort = self.cohorts.get(node.name)
            return cohort.fair_sharing_weight if cohort is not None else Fraction(1)
        return self.cluster_queues[node.name].fair_sharing_weight
