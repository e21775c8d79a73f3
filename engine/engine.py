"""The engine: Kueue's objects in, scheduling decisions out. Pure, deterministic, no clock.

State is fed object by object (level-triggered upserts and deletes of API dicts) and every
decision is returned from :meth:`Engine.schedule`. A reservation is *assumed* the moment it is
decided; :meth:`Engine.forget` undoes it if the controller could not write it.
"""

from __future__ import annotations

import gc
import heapq
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from engine import parse
from engine.backoff import check_retry_requeue_at
from engine.decisions import (
    Admitted,
    Deactivation,
    Decisions,
    Eviction,
    Pending,
    Preemption,
    Requeue,
    Reservation,
    ReservationCleared,
    condition,
)
from engine.errors import UnsupportedConfiguration
from engine.fair_sharing import (
    ACCEPTED_STRATEGIES,
    DEFAULT_STRATEGIES,
    dominant_resource_share,
    fair_targets,
    tournament,
    weighted_share,
)
from engine.flavors import (
    FIT,
    NO_CANDIDATES,
    PREEMPT,
    RECLAIM,
    Assignment,
    FlavorAssigner,
    FlavorMemory,
)
from engine.model import (
    BEST_EFFORT_FIFO,
    HOLD_AND_DRAIN,
    LOWER_OR_NEWER_EQUAL_PRIORITY,
    LOWER_PRIORITY,
    NEVER,
    STOP_NONE,
    AdmissionCheck,
    ClusterQueue,
    Cohort,
    FlavorResource,
    LocalQueue,
    ResourceFlavor,
    ResourceGroup,
    Workload,
    WorkloadKey,
)
from engine.preemption import HUMAN_REASON, Preemptor, Target, find_targets
from engine.quantity import MILLI, format_milli
from engine.queues import ClusterQueueQueue, Queued
from engine.quota import QuotaNode, add_usage, available, compute_quotas, find_cycle_members

# Pending reasons that do not come from flavor assignment.
MISCONFIGURED = "Misconfigured"
SUSPENDED = "Suspended"
WAITING_FOR_PREEMPTED = "WaitingForPreemptedWorkloads"
DEACTIVATED = "Deactivated"
PENDING_EVALUATION = "PendingEvaluation"
WAITING_FOR_PODS_READY = "WaitingForPodsReady"


_NONE: frozenset[Any] = frozenset()


@dataclass(slots=True)
class WalkMemory:
    """A pending workload's flavor-walk memory (Kueue's ``AssignmentClusterQueueState``)."""

    cycle: int
    """The cycle of the attempt."""
    cluster_queue: str
    generation: int
    """The ClusterQueue's quota generation at the attempt."""
    start: FlavorMemory | None
    """Where that cycle's walks started."""
    last: FlavorMemory
    """Where they stopped: the next cycle resumes from here."""


class Entry(Queued):
    """One Workload as the engine tracks it between cycles."""

    __slots__ = (
        "admitted",
        "assumed",
        "charged",
        "check_reported",
        "evicted",
        "evicted_at",
        "flavors",
        "key",
        "preempted",
        "queue",
        "reported",
        "reserved_at",
        "reserved_in",
        "targets",
        "view",
        "walk",
        "wl",
    )

    def __init__(self, wl: Workload) -> None:
        super().__init__(_order(wl, wl.created), _shape(wl))
        self.wl = wl
        self.key: WorkloadKey = wl.key
        self.queue: str | None = None  # ClusterQueue whose heap holds it
        self.reserved_in: str | None = None
        self.charged: dict[FlavorResource, int] = {}
        self.flavors: frozenset[str] = _NONE
        self.assumed = False
        self.evicted = False
        self.evicted_at: float | None = None
        self.admitted = False
        self.reserved_at = 0.0
        self.targets: frozenset[WorkloadKey] = _NONE
        """Victims it is waiting for. Shared empty sets: fewer objects for the collector to scan."""
        self.preempted = False  # issued preemptions and has not been admitted since
        self.reported: tuple[str, str] | None = None
        self.check_reported: str = ""
        self.view: Assignment | None = None  # what was assumed, until the status confirms it
        self.walk: WalkMemory | None = None  # where the last flavor walk stopped

    # The Candidate protocol of engine.preemption (``key`` is a plain attribute: it never changes).
    @property
    def priority(self) -> int:
        return self.wl.priority

    @property
    def timestamp(self) -> float:
        return self.order[1]

    @property
    def uid(self) -> str:
        return self.wl.uid


def _order(wl: Workload, timestamp: float) -> tuple[int, float, str]:
    return (-wl.priority, timestamp, wl.uid)


def _queue_timestamp(wl: Workload) -> float:
    """Kueue's queue-order timestamp: the eviction time after a check- or readiness-eviction."""
    evicted = wl.conditions.get("Evicted")
    if (
        evicted is not None
        and evicted.status == "True"
        and evicted.reason in ("PodsReadyTimeout", "AdmissionCheck")
    ):
        return evicted.last_transition
    return wl.created


def _shape(wl: Workload) -> Hashable:
    return (
        wl.priority,
        tuple(
            (
                ps.name,
                ps.count,
                ps.min_count,
                tuple(sorted(ps.requests.items())),
                tuple(sorted(ps.node_selector.items())),
                ps.affinity_terms,
                ps.tolerations,
            )
            for ps in wl.pod_sets
        ),
    )


def _charge(wl: Workload) -> tuple[str, dict[FlavorResource, int], frozenset[str]] | None:
    """Usage a Workload's ``status.admission`` charges, less its reclaimable pods."""
    admission = wl.admission
    if admission is None:
        return None
    usage: dict[FlavorResource, int] = {}
    flavors: set[str] = set()
    for psa in admission.pod_set_assignments:
        count = psa.count
        active = count - wl.reclaimable.get(psa.name, 0)
        for res, total in psa.resource_usage.items():
            flavor = psa.flavors.get(res)
            if flavor is None:
                continue
            flavors.add(flavor)
            value = total if count == 0 or active == count else total // count * max(active, 0)
            if res == "pods":
                value = max(active, 0) * MILLI
            fr = (flavor, res)
            usage[fr] = usage.get(fr, 0) + value
    return admission.cluster_queue, usage, frozenset(flavors)


def _flavor_usage(
    groups: Iterable[ResourceGroup],
    usage: Mapping[FlavorResource, int],
    nominal: Mapping[FlavorResource, int] | None,
) -> list[dict[str, Any]]:
    """``[{name, resources: [{name, total[, borrowed]}]}]`` in the queue's flavor order."""
    out = []
    for group in groups:
        for flavor in group.flavors:
            resources = []
            for quota in flavor.resources:
                fr = (flavor.name, quota.name)
                total = usage.get(fr, 0)
                item = {"name": quota.name, "total": format_milli(quota.name, total)}
                if nominal is not None:
                    item["borrowed"] = format_milli(quota.name, max(0, total - nominal.get(fr, 0)))
                resources.append(item)
            out.append({"name": flavor.name, "resources": resources})
    return out


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


@dataclass(slots=True)
class _Status:
    """How :meth:`Engine.status` describes a workload (used by ``kadmit simulate``)."""

    state: str
    cluster_queue: str | None
    reason: str
    message: str
    flavors: dict[str, dict[str, str]]
    counts: dict[str, int]
    borrowing: bool = False
    """Admitted by borrowing from the cohort (known for reservations this engine made)."""


class Engine:
    """Kueue's admission semantics over an in-memory model of the cluster.

    ``fair_sharing`` stands for the Configuration's ``fairSharing`` block (with its
    ``preemptionStrategies``): admission order by the fair-sharing tournament and preemption by
    Dominant Resource Share. ``block_admission`` is ``waitForPodsReady.blockAdmission``.
    """

    def __init__(
        self,
        *,
        fair_sharing: bool = False,
        preemption_strategies: Sequence[str] = DEFAULT_STRATEGIES,
        block_admission: bool = False,
    ) -> None:
        if tuple(preemption_strategies) not in ACCEPTED_STRATEGIES:
            raise UnsupportedConfiguration(
                "fairSharing.preemptionStrategies must be [LessThanOrEqualToFinalShare], "
                "[LessThanInitialShare] or [LessThanOrEqualToFinalShare, LessThanInitialShare]"
            )
        self.fair_sharing = fair_sharing
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
        self._entries: dict[WorkloadKey, Entry] = {}
        self._queues: dict[str, ClusterQueueQueue] = {}
        self._nodes: dict[str, QuotaNode] = {}
        self._cohort_nodes: dict[str, QuotaNode] = {}
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
        self._check_dirty: set[WorkloadKey] = set()
        self._unrouted_changed: set[WorkloadKey] = set()
        self._restarted: dict[WorkloadKey, str] = {}
        self._inactive_arrivals: set[WorkloadKey] = set()
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

    # ------------------------------------------------------------------ objects in
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
            "Workload": self.upsert_workload,
        }.get(str(kind))
        if handler is None:
            raise ValueError(f"kind {kind!r} is not scheduled by the engine")
        handler(obj)

    def upsert_resource_flavor(self, obj: Mapping[str, Any]) -> None:
        flavor = parse.resource_flavor(obj)
        if self.flavors.get(flavor.name) != flavor:
            self.flavors[flavor.name] = flavor
            self._dirty = True

    def delete_resource_flavor(self, name: str) -> None:
        if self.flavors.pop(name, None) is not None:
            self._dirty = True

    def upsert_cluster_queue(self, obj: Mapping[str, Any]) -> None:
        cq = parse.cluster_queue(obj)
        if self.cluster_queues.get(cq.name) != cq:
            self.cluster_queues[cq.name] = cq
            self._dirty = True

    def delete_cluster_queue(self, name: str) -> None:
        if self.cluster_queues.pop(name, None) is not None:
            self._dirty = True

    def upsert_cohort(self, obj: Mapping[str, Any]) -> None:
        cohort = parse.cohort(obj)
        if self.cohorts.get(cohort.name) != cohort:
            self.cohorts[cohort.name] = cohort
            self._dirty = True

    def delete_cohort(self, name: str) -> None:
        if self.cohorts.pop(name, None) is not None:
            self._dirty = True

    def upsert_local_queue(self, obj: Mapping[str, Any]) -> None:
        lq = parse.local_queue(obj)
        if self.local_queues.get((lq.namespace, lq.name)) != lq:
            self.local_queues[(lq.namespace, lq.name)] = lq
            self._dirty = True

    def delete_local_queue(self, namespace: str, name: str) -> None:
        if self.local_queues.pop((namespace, name), None) is not None:
            self._dirty = True

    def upsert_priority_class(self, obj: Mapping[str, Any]) -> None:
        wpc = parse.workload_priority_class(obj)
        self.priority_classes[wpc.name] = wpc.value  # existing workloads keep their priority

    def delete_priority_class(self, name: str) -> None:
        self.priority_classes.pop(name, None)

    def upsert_admission_check(self, obj: Mapping[str, Any]) -> None:
        check = parse.admission_check(obj)
        if self.admission_checks.get(check.name) != check:
            self.admission_checks[check.name] = check
            self._dirty = True

    def delete_admission_check(self, name: str) -> None:
        if self.admission_checks.pop(name, None) is not None:
            self._dirty = True

    def upsert_namespace(self, obj: Mapping[str, Any]) -> None:
        name, labels = parse.namespace_labels(obj)
        if self.namespaces.get(name) != labels:
            self.namespaces[name] = labels
            self._dirty = True

    def delete_namespace(self, name: str) -> None:
        if self.namespaces.pop(name, None) is not None:
            self._dirty = True

    def upsert_workload(self, obj: Mapping[str, Any]) -> None:
        """A Workload with its status; one holding quota in its status is charged for it."""
        wl = parse.workload(obj, self.priority_classes)
        entry = self._entries.get(wl.key)
        if entry is None:
            entry = Entry(wl)
            self._entries[wl.key] = entry
        else:
            new_shape = _shape(wl)
            if entry.walk is not None and _shape(entry.wl) != new_shape:
                entry.walk = None  # another scheduling shape: its walks start from the first flavor
            entry.wl = wl
            if new_shape != entry.shape or entry.order[0] != -wl.priority:
                self._dequeue(entry)
                entry.shape = new_shape
        if wl.finished or not wl.active:
            self._release(entry)
            self._dequeue(entry)
            entry.reported = None
            if not wl.active and not wl.finished:
                self._set_unrouted(wl.key, DEACTIVATED, "The workload is deactivated")
            else:
                self._unrouted.pop(wl.key, None)
            return
        if wl.holds_quota:
            charge = _charge(wl)
            assert charge is not None
            cq, usage, flavors = charge
            if entry.reserved_in != cq or entry.charged != usage:
                previous = entry.reserved_in
                self._release(entry, wake=False)
                self._reserve(entry, cq, usage, flavors, wl.conditions["QuotaReserved"].last_transition)
                if previous is not None:
                    self._wake(previous)  # e.g. reclaimable pods gave some quota back
            entry.assumed = False
            entry.evicted = wl.condition_true("Evicted")
            entry.admitted = wl.condition_true("Admitted")
            self._track_readiness(entry)
            self._dequeue(entry)
            self._unrouted.pop(wl.key, None)
            self._check_dirty.add(wl.key)
            return
        if entry.reserved_in is not None and entry.assumed:
            return  # our reservation is not written yet: keep it (never double-book)
        if entry.reserved_in is not None:
            self._release(entry)  # QuotaReserved went False: the job stopped
        entry.admitted = False
        entry.evicted = False
        self._route(entry, now=None)

    def delete_workload(self, namespace: str, name: str) -> None:
        entry = self._entries.pop((namespace, name), None)
        if entry is None:
            return
        self._release(entry)
        self._dequeue(entry)
        self._unrouted.pop(entry.key, None)
        self._check_dirty.discard(entry.key)

    # ------------------------------------------------------------------ lifecycle calls
    def forget(self, namespace: str, name: str) -> None:
        """The controller failed to write a reservation: undo the assumption, queue again."""
        entry = self._entries.get((namespace, name))
        if entry is None or not entry.assumed:
            return
        self._release(entry)
        entry.assumed = False
        entry.admitted = False
        self._route(entry, now=None)

    def finish(self, namespace: str, name: str) -> None:
        """The workload finished: its quota is released and it leaves the queues."""
        entry = self._entries.get((namespace, name))
        if entry is None:
            return
        self._release(entry)
        self._dequeue(entry)
        del self._entries[entry.key]
        self._unrouted.pop(entry.key, None)

    def release(
        self, namespace: str, name: str, now: float | None = None, requeue_at: float | None = None
    ) -> None:
        """An evicted workload's job has stopped: free its quota and queue it again
        (not before ``requeue_at``)."""
        entry = self._entries.get((namespace, name))
        if entry is None:
            return
        self._release(entry)
        entry.assumed = False
        entry.evicted = False
        entry.admitted = False
        entry.check_reported = ""
        entry.walk = None
        wl = entry.wl
        if wl.check_states:  # eviction resets every check to Pending (Kueue's evict.Evict)
            reset = tuple(replace(c, state="Pending") for c in wl.check_states)
            entry.wl = replace(wl, check_states=reset)
        if now is not None and requeue_at is not None:
            entry.evicted_at = now  # evicted by a check: queued by its eviction time (Kueue)
        self._route(entry, now=now, requeue_at=requeue_at)

    def set_check_states(self, namespace: str, name: str, states: Iterable[Mapping[str, Any]]) -> None:
        """``status.admissionChecks`` of a reserving workload changed."""
        entry = self._entries.get((namespace, name))
        if entry is None:
            return
        entry.wl = replace(entry.wl, check_states=parse.admission_check_states(name, list(states)))
        self._check_dirty.add(entry.key)

    # ------------------------------------------------------------------ structure
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
            name: FlavorAssigner(
                cq, nodes[name], self.flavors, None, self._hierarchical_advantage(nodes[name])
            )
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
        self._queues = {
            name: ClusterQueueQueue(cq.queueing_strategy != BEST_EFFORT_FIFO)
            for name, cq in self.cluster_queues.items()
        }
        pending = [e for q in old_queues.values() for e in q.entries()]
        pending += [self._entries[k] for k in list(self._unrouted) if k in self._entries]
        for entry in pending:
            entry.bucket = None
            entry.queue = None
        for entry in sorted(pending, key=lambda e: e.order):
            if entry.wl.active and not entry.wl.finished:
                self._route(entry, now=None)

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

    def cluster_queue_active(self, name: str) -> tuple[bool, str, str]:
        """The ClusterQueue's ``Active`` condition: (status, reason, message)."""
        if self._dirty:
            self._rebuild()
        if name not in self.cluster_queues:
            return False, "NotFound", f"ClusterQueue {name} doesn't exist"
        if name in self._inactive:
            reason, message = self._inactive[name]
            return False, reason, message
        return True, "Ready", "Can admit new workloads"

    # ------------------------------------------------------------------ queueing
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
            self._set_unrouted(wl.key, SUSPENDED, f"LocalQueue {lq.name} is stopped")
            return
        queue = self._queues.get(lq.cluster_queue)
        if queue is None:
            self._set_unrouted(wl.key, MISCONFIGURED, f"ClusterQueue {lq.cluster_queue} doesn't exist")
            return
        self._unrouted.pop(wl.key, None)
        timestamp = entry.evicted_at if entry.evicted_at is not None else _queue_timestamp(wl)
        entry.order = _order(wl, timestamp)
        cq = self.cluster_queues[lq.cluster_queue]
        shape = _shape(wl)
        if cq.preemption.within_cluster_queue == LOWER_OR_NEWER_EQUAL_PRIORITY:
            shape = (shape, entry.order)
        entry.shape = shape
        entry.queue = lq.cluster_queue
        queue.push(entry)
        if queue.strict_fifo:
            queue.blocked = False
        if lq.cluster_queue in self._inactive:
            self._inactive_arrivals.add(entry.key)

    def _still_stopped(self, wl: Workload, reason: str) -> bool:
        lq = self.local_queues.get((wl.namespace, wl.queue_name))
        if reason == "LocalQueueStopped":
            return lq is None or lq.stop_policy != STOP_NONE
        cq = self.cluster_queues.get(lq.cluster_queue) if lq is not None else None
        return cq is None or cq.stop_policy != STOP_NONE

    def _set_unrouted(self, key: WorkloadKey, reason: str, message: str) -> None:
        self._unrouted[key] = (reason, message)
        self._unrouted_changed.add(key)

    def _dequeue(self, entry: Entry) -> None:
        if entry.queue is not None:
            queue = self._queues.get(entry.queue)
            if queue is not None:
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

    # ------------------------------------------------------------------ quota
    def _reserve(
        self, entry: Entry, cq: str, usage: dict[FlavorResource, int], flavors: frozenset[str], when: float
    ) -> None:
        entry.reserved_in = cq
        entry.charged = usage
        entry.flavors = flavors
        entry.reserved_at = when
        self._holders.setdefault(cq, {})[entry.key] = entry
        by_priority = self._priority_usage.setdefault(cq, {}).setdefault(entry.wl.priority, {})
        for fr, value in usage.items():
            by_priority[fr] = by_priority.get(fr, 0) + value
        node = self._nodes.get(cq)
        if node is not None and not self._dirty:
            add_usage(node, usage)
            self._touch(cq, usage)

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
        by_priority = self._priority_usage.get(cq, {}).get(entry.wl.priority)
        if by_priority is not None:
            for fr, value in entry.charged.items():
                by_priority[fr] -= value
        node = self._nodes.get(cq)
        if node is not None and not self._dirty:
            add_usage(node, entry.charged, -1)
            self._touch(cq)
            root = self._root_of.get(cq)
            if root is not None:
                self._freed[root] = self._freed.get(root, 0) + 1
        entry.reserved_in = None
        entry.charged = {}
        entry.flavors = _NONE
        entry.targets = _NONE
        if wake:
            self._wake(cq)

    def usage(self, name: str) -> dict[FlavorResource, int]:
        """Usage (milli-units) at a ClusterQueue or Cohort node of the tree."""
        if self._dirty:
            self._rebuild()
        found = self._nodes.get(name) or self._cohort_nodes.get(name)
        return dict(found.usage) if found is not None else {}

    def nodes(self) -> Iterator[QuotaNode]:
        if self._dirty:
            self._rebuild()
        yield from self._nodes.values()
        yield from self._cohort_nodes.values()

    # ------------------------------------------------------------------ the cycle
    def schedule(self, now: float) -> Decisions:
        """One scheduling cycle at time ``now`` (POSIX seconds): admit as many as fit.

        The cyclic garbage collector is paused for the cycle. A cycle allocates its decisions,
        which must survive until the caller has written them; a collection in the middle of it
        promotes them and, once enough pile up, runs full collections over the whole model — a
        third of a cycle's time at 50,000 workloads. After the cycle the collector handles them
        in one young-generation pass; what the cycle discards is freed by reference counting
        as usual, so only cyclic garbage waits, and not past the cycle."""
        collecting = gc.isenabled()
        if collecting:
            gc.disable()
        try:
            return self._schedule(now)
        finally:
            if collecting:
                gc.enable()

    def _schedule(self, now: float) -> Decisions:
        if self._dirty:
            self._rebuild()
        self._cycle += 1
        decisions = Decisions()
        self._release_backoff(now, decisions)
        self._evaluate_checks(now, decisions)
        self._report_unrouted(now, decisions)
        live = [name for name, q in self._queues.items() if name not in self._inactive and not q.blocked]
        live.sort()
        phantom: list[tuple[QuotaNode, dict[FlavorResource, int]]] = []
        try:
            while live:
                heads: list[tuple[int, int, int, float, str, Entry, Assignment, int]] = []
                still: list[str] = []
                for name in live:
                    queue = self._queues[name]
                    entry = queue.head()
                    if entry is None:
                        continue
                    assert isinstance(entry, Entry)
                    if not self._nominate_ok(entry, name, queue, now, decisions):
                        if queue.head() is not None and not queue.blocked and queue.sticky is None:
                            still.append(name)
                        continue
                    assignment = self._assign(entry, name)
                    version = self._consumed.get(self._root_of[name], 0)
                    # A preemptor whose victims have just left goes first, so that the quota it freed
                    # is not taken by the victims requeued beside it (no preemption ping-pong).
                    rank = 0 if entry.preempted else 1
                    heads.append((rank, assignment.borrowing, *entry.order, entry, assignment, version))
                heads.sort(key=lambda h: h[:5])
                for _, _, _, _, _, entry, assignment, version in self._in_turn(heads):
                    name = entry.queue or ""
                    queue = self._queues[name]
                    if (
                        assignment.mode == FIT
                        and self._consumed.get(self._root_of[name], 0) - version > assignment.slack
                        and not self._still_fits(name, assignment)
                    ):
                        # Earlier admissions of this round took the room: assign again.
                        assignment = self._assign(entry, name)
                    if assignment.mode == FIT and self.block_admission and self._not_ready:
                        self._pending(
                            entry,
                            name,
                            WAITING_FOR_PODS_READY,
                            "waiting for all admitted workloads to be in PodsReady condition",
                            now,
                            decisions,
                        )
                        queue.blocked = True  # until the admitted workloads' pods are ready
                        self._awake.discard(self._root_of[name])
                    elif assignment.mode == FIT:
                        self._admit(entry, name, assignment, now, decisions)
                        decisions.attempts_success += 1
                        still.append(name)
                    elif assignment.mode in (PREEMPT, RECLAIM):
                        targets = self._targets(entry, name, assignment)
                        node = self._nodes[name]
                        if targets:
                            decisions.attempts_inadmissible += 1
                            self._preempt(entry, name, targets, now, decisions)
                            queue.sticky = entry if not queue.strict_fifo else None
                            add_usage(node, assignment.usage)
                            self._touch(name, assignment.usage)
                            phantom.append((node, assignment.usage))
                            self._pending(
                                entry,
                                name,
                                WAITING_FOR_PREEMPTED,
                                "Waiting for the preempted workloads to release their quota",
                                now,
                                decisions,
                            )
                            queue.blocked = queue.strict_fifo
                        else:
                            self._not_fit(entry, name, queue, assignment, now, decisions, still)
                    else:
                        self._not_fit(entry, name, queue, assignment, now, decisions, still)
                live = sorted(set(still))
        finally:
            for node, usage in phantom:
                add_usage(node, usage, -1)
                self._touch(node.name)
        return decisions

    def _in_turn(
        self, heads: list[tuple[int, int, int, float, str, Entry, Assignment, int]]
    ) -> Iterator[tuple[int, int, int, float, str, Entry, Assignment, int]]:
        """Heads in the order they are processed: sorted (classical), or one fair-sharing
        tournament at a time, each seeing the usage the previous admissions left."""
        if not self.fair_sharing:
            yield from heads
            return
        yield from (h for h in heads if h[0] == 0)
        remaining = {h[5].queue or "": h for h in heads if h[0] != 0}
        while remaining:
            contenders = {name: (h[5], h[6].usage) for name, h in remaining.items()}
            yield remaining.pop(tournament(contenders, self._nodes, self._weight_of))

    def _weight_of(self, node: QuotaNode) -> Fraction:
        if node.is_cohort:
            cohort = self.cohorts.get(node.name)
            return cohort.fair_sharing_weight if cohort is not None else Fraction(1)
        return self.cluster_queues[node.name].fair_sharing_weight

    def weighted_share(self, name: str) -> int:
        """``status.fairSharing.weightedShare`` of a ClusterQueue or Cohort (fair sharing on)."""
        self.sync()
        node = self._nodes.get(name) or self._cohort_nodes.get(name)
        if node is None:
            return 0
        return weighted_share(dominant_resource_share(node, self._weight_of(node)))

    def _still_fits(self, name: str, assignment: Assignment) -> bool:
        node = self._nodes[name]
        return all(value <= available(node, fr) for fr, value in assignment.usage.items())

    def _not_fit(
        self,
        entry: Entry,
        name: str,
        queue: ClusterQueueQueue,
        assignment: Assignment,
        now: float,
        decisions: Decisions,
        still: list[str],
    ) -> None:
        reason = assignment.reason or "WaitingForQuota"
        message = assignment.message
        decisions.attempts_inadmissible += 1
        self._pending(entry, name, reason, message, now, decisions)
        self._awake.discard(self._root_of[name])
        if queue.strict_fifo:
            queue.blocked = True
        else:
            queue.park(entry, reason, message)
            still.append(name)

    def _nominate_ok(
        self, entry: Entry, name: str, queue: ClusterQueueQueue, now: float, decisions: Decisions
    ) -> bool:
        self._awake.discard(self._root_of[name])  # whatever happens next, this tree may wait on an event
        namespace = entry.wl.namespace
        selected = self._selects.get((name, namespace))
        if selected is None:
            cq = self.cluster_queues[name]
            labels = self.namespaces.get(namespace, {"kubernetes.io/metadata.name": namespace})
            selected = cq.namespace_selector is not None and cq.namespace_selector.matches(labels)
            self._selects[(name, namespace)] = selected
        if not selected:
            message = "workload namespace doesn't match ClusterQueue selector"
            self._pending(entry, name, MISCONFIGURED, message, now, decisions)
            queue.park(entry, MISCONFIGURED, message)
            return False
        if any(c.state in ("Retry", "Rejected") for c in entry.wl.check_states):
            message = "The workload has failed admission checks"
            self._pending(entry, name, PENDING_EVALUATION, message, now, decisions)
            queue.park(entry, PENDING_EVALUATION, message)
            return False
        if entry.targets:
            alive = frozenset(
                k for k in entry.targets if (e := self._entries.get(k)) is not None and e.reserved_in
            )
            entry.targets = alive
            if alive:
                self._pending(
                    entry,
                    name,
                    WAITING_FOR_PREEMPTED,
                    "Waiting for the preempted workloads to release their quota",
                    now,
                    decisions,
                )
                queue.sticky = None if queue.strict_fifo else entry
                queue.blocked = True
                return False
        return True

    def _assign(self, entry: Entry, name: str, counts: list[int] | None = None) -> Assignment:
        if counts is None and name in self._fixed_flavor_cqs:
            fast = self._assign_fixed(entry, name)
            if fast is not None:
                return fast
        cq = self.cluster_queues[name]
        node = self._nodes[name]

        def oracle(fr: FlavorResource, value: int) -> int:
            pre = Preemptor(cq, node, entry.wl.priority, entry.timestamp, {fr: value})
            if self.fair_sharing:
                holders = self._holders_in_tree(name, True)
                targets = fair_targets(pre, [fr], holders, self._weight_of, self.preemption_strategies)
            else:
                targets = find_targets(pre, [fr], lambda others: self._holders_in_tree(name, others))
            if not targets:
                return NO_CANDIDATES
            return PREEMPT if any(t.workload.reserved_in == name for t in targets) else RECLAIM

        assigner = self._assigners[name]
        assigner.oracle = oracle
        partial_allowed = any(ps.min_count for ps in entry.wl.pod_sets)
        assigner.always_simulate = partial_allowed
        full = [ps.count for ps in entry.wl.pod_sets] if counts is None else counts
        walking = name not in self._fixed_flavor_cqs  # one flavor per group: nothing to remember
        memory = self._walk_start(entry, name) if walking else None
        assignment = assigner.assign(entry.wl.pod_sets, full, memory)
        if counts is None and assignment.mode < PREEMPT and partial_allowed:
            partial = self._partial(entry, assigner, memory)
            if partial is not None:
                assignment = partial
        if walking:
            generation = self._generation(name)
            entry.walk = WalkMemory(self._cycle, name, generation, memory, assignment.last_tried)
        if (
            assignment.mode >= PREEMPT  # complete: every pod set has its (only possible) flavors
            and counts is None
            and name in self._fixed_flavor_cqs
            and not partial_allowed
        ):
            self._templates[(name, entry.shape)] = assignment
        return assignment

    def _generation(self, name: str) -> int:
        """Kueue's ``AllocatableResourceGeneration``: advances when the queue's quotas change or
        quota is given back anywhere in its tree."""
        return self._generations.get(name, 0) + self._freed.get(self._root_of.get(name, ""), 0)

    def _walk_start(self, entry: Entry, name: str) -> FlavorMemory | None:
        """Where this attempt's flavor walks start (contract §5.3 step 3, ``LastTriedFlavorIdx``).

        The memory of the previous attempt is dropped when it was made on another ClusterQueue,
        or is older than the preceding cycle while the queue's quotas changed since (Kueue's
        ``lastAssignmentOutdated``). A second assignment within one cycle (earlier admissions
        took the room) starts where the cycle's first one did."""
        walk = entry.walk
        if walk is None:
            return None
        if walk.cluster_queue != name or (
            walk.cycle < self._cycle - 1 and self._generation(name) > walk.generation
        ):
            entry.walk = None
            return None
        return walk.start if walk.cycle == self._cycle else walk.last

    def _assign_fixed(self, entry: Entry, name: str) -> Assignment | None:
        """Fast path where flavor choice is fixed (one flavor per resource group): a workload of
        a shape that fit before gets the same flavors, so only the quota is checked again."""
        template = self._templates.get((name, entry.shape))
        if template is None:
            return None
        return self._assigners[name].reassess(template)

    def _partial(
        self, entry: Entry, assigner: FlavorAssigner, memory: FlavorMemory | None
    ) -> Assignment | None:
        """Partial admission: the largest counts ≥ minCount that fit (Kueue's binary search)."""
        sets = entry.wl.pod_sets
        total = sum(ps.count - (ps.min_count or ps.count) for ps in sets)
        if total <= 0:
            return None

        def counts_for(k: int) -> list[int]:
            return [ps.count - ((ps.count - ps.min_count) * k // total if ps.min_count else 0) for ps in sets]

        best: Assignment | None = None
        low, high = 1, total
        while low <= high:
            mid = (low + high) // 2
            attempt = assigner.assign(sets, counts_for(mid), memory)
            if attempt.mode >= PREEMPT:
                best = attempt
                high = mid - 1
            else:
                low = mid + 1
        return best

    def _hierarchical_advantage(self, node: QuotaNode) -> Callable[[FlavorResource], bool]:
        """Whether an ancestor cohort has quota of its own on a flavor/resource, which lets the
        queue reclaim there even beyond its nominal quota."""

        def advantage(fr: FlavorResource) -> bool:
            parent = node.parent
            while parent is not None:
                if parent.nominal.get(fr, 0) > 0:
                    return True
                parent = parent.parent
            return False

        return advantage

    def _holders_in_tree(
        self, name: str, others: bool = True
    ) -> list[tuple[QuotaNode, ClusterQueue, Iterable[Entry]]]:
        """The preemptor's own queue plus every borrowing queue of its tree, with their holders.

        Only a borrowing queue can lose workloads to another queue, so the rest is skipped; the
        list is cached per root until usage in that tree changes."""
        if not others:
            own = self._holders.get(name)
            return [(self._nodes[name], self.cluster_queues[name], own.values())] if own else []
        root = self._root_of[name]
        version = self._versions.get(root, 0)
        cached = self._borrowing_cache.get(root)
        if cached is None or cached[0] != version:
            borrowing = []
            for cq_name in self._roots.get(root, ()):
                node = self._nodes[cq_name]
                subtree = node.subtree
                if any(v > subtree.get(fr, 0) for fr, v in node.usage.items()):
                    borrowing.append(cq_name)
            cached = (version, borrowing)
            self._borrowing_cache[root] = cached
        names = cached[1] if name in cached[1] else [name, *cached[1]]
        out: list[tuple[QuotaNode, ClusterQueue, Iterable[Entry]]] = []
        for cq_name in names:
            holders = self._holders.get(cq_name)
            if holders:
                out.append((self._nodes[cq_name], self.cluster_queues[cq_name], holders.values()))
        return out

    def _touch(self, cq_name: str, consumed: Mapping[FlavorResource, int] | None = None) -> None:
        """Usage changed in ``cq_name``'s tree; ``consumed`` is what was taken, if any."""
        root = self._root_of.get(cq_name)
        if root is not None:
            self._versions[root] = self._versions.get(root, 0) + 1
            if consumed:
                self._consumed[root] = self._consumed.get(root, 0) + sum(consumed.values())

    def _own_queue_cannot_free_enough(self, entry: Entry, name: str, assignment: Assignment) -> bool:
        """Classical preemption only within the queue (borrowWithinCohort Never and the queue at
        or above nominal): even evicting every eligible workload of the queue would not do."""
        cq = self.cluster_queues[name]
        policy = cq.preemption
        node = self._nodes[name]
        needed = assignment.needs_preemption or assignment.usage
        if policy.borrow_within_cohort != NEVER or all(
            node.usage.get(fr, 0) < node.nominal.get(fr, 0) for fr in needed
        ):
            return False
        if policy.within_cluster_queue == NEVER:
            return True
        ceiling = self._victim_ceiling(entry, cq)
        by_priority = self._priority_usage.get(name, {})
        for fr, value in assignment.usage.items():
            freeable = 0
            for priority, usage in by_priority.items():
                if priority < ceiling:
                    freeable += usage.get(fr, 0)
            if value > available(node, fr) + freeable:
                return True
        return False

    @staticmethod
    def _victim_ceiling(entry: Entry, cq: ClusterQueue) -> int:
        """Workloads of the queue with a priority below this may be preempted by ``entry``."""
        if cq.preemption.within_cluster_queue == LOWER_PRIORITY:
            return entry.wl.priority
        return entry.wl.priority + 1

    def _targets(self, entry: Entry, name: str, assignment: Assignment) -> list[Target]:
        if not self.fair_sharing and self._own_queue_cannot_free_enough(entry, name, assignment):
            return []
        cq = self.cluster_queues[name]
        pre = Preemptor(cq, self._nodes[name], entry.wl.priority, entry.timestamp, assignment.usage)
        needed = assignment.needs_preemption or assignment.usage
        if self.fair_sharing:
            holders = self._holders_in_tree(name, True)
            return fair_targets(pre, needed, holders, self._weight_of, self.preemption_strategies)
        return find_targets(pre, needed, lambda others: self._holders_in_tree(name, others))

    def _admit(
        self, entry: Entry, name: str, assignment: Assignment, now: float, decisions: Decisions
    ) -> None:
        cq = self.cluster_queues[name]
        self._dequeue(entry)
        flavors = assignment.flavor_names()
        self._reserve(entry, name, dict(assignment.usage), flavors, now)
        entry.assumed = True
        entry.evicted_at = None
        entry.preempted = False
        entry.reported = None
        entry.view = assignment
        entry.walk = None
        checks = (
            sorted(rule.name for rule in cq.admission_checks if rule.applies_to(flavors))
            if name in self._checked_cqs
            else []
        )
        entry.admitted = not checks
        entry.evicted = False
        if entry.admitted:
            self._not_ready.add(entry.key)  # just admitted: its pods are not ready yet
        admission = {
            "clusterQueue": name,
            "podSetAssignments": [  # copies: the formatted template is shared by a shape
                {
                    "name": psa["name"],
                    "flavors": psa["flavors"].copy(),
                    "resourceUsage": psa["resourceUsage"].copy(),
                    "count": psa["count"],
                }
                for psa in assignment.status_pod_sets()
            ],
        }
        conditions = [
            condition("QuotaReserved", "True", "QuotaReserved", f"Quota reserved in ClusterQueue {name}", now)
        ]
        if not checks:
            conditions.append(condition("Admitted", "True", "Admitted", "The workload is admitted", now))
        previous_conditions = entry.wl.conditions
        if previous_conditions:
            for kind in ("Evicted", "Preempted"):
                previous = previous_conditions.get(kind)
                if previous is not None and previous.status == "True":
                    conditions.append(
                        condition(kind, "False", "QuotaReserved", f"Previously: {previous.message}", now)
                    )
        borrowing = assignment.borrowing > 0
        decisions.reservations.append(
            Reservation(entry.key, name, admission, conditions, checks, entry.admitted, borrowing)
        )

    def _preempt(
        self, entry: Entry, name: str, targets: list[Target], now: float, decisions: Decisions
    ) -> None:
        preemptor_path = self._nodes[name].path()
        entry.targets = frozenset(t.workload.key for t in targets)
        entry.preempted = True
        for target in targets:
            victim = target.workload
            assert isinstance(victim, Entry)
            if victim.evicted:
                continue
            victim.evicted = True
            victim_path = self._nodes[victim.reserved_in or name].path()
            job_uid = entry.wl.job_uid or "UNKNOWN"
            message = (
                f"Preempted to accommodate a workload (UID: {entry.wl.uid}, JobUID: {job_uid}) due to "
                f"{HUMAN_REASON[target.reason]}; preemptor path: {preemptor_path}; "
                f"preemptee path: {victim_path}"
            )
            conditions = [
                condition("Evicted", "True", "Preempted", message, now),
                condition("Preempted", "True", target.reason, message, now),
            ]
            decisions.preemptions.append(
                Preemption(victim.key, entry.key, target.reason, message, conditions)
            )

    def _pending(
        self, entry: Entry, name: str | None, reason: str, message: str, now: float, decisions: Decisions
    ) -> None:
        if entry.reported == (reason, message):
            return
        entry.reported = (reason, message)
        conditions = [condition("QuotaReserved", "False", reason, message, now)]
        decisions.pending.append(Pending(entry.key, name, reason, message, conditions))

    def _report_unrouted(self, now: float, decisions: Decisions) -> None:
        changed, self._unrouted_changed = self._unrouted_changed, set()
        for key in sorted(changed):
            entry = self._entries.get(key)
            reason, message = self._unrouted.get(key, ("", ""))
            if entry is not None and message:
                self._pending(entry, None, reason, message, now, decisions)
        for key, reason in sorted(self._restarted.items()):
            message = (
                "The ClusterQueue was restarted"
                if reason.startswith("Cluster")
                else "The LocalQueue was restarted"
            )
            conditions = [condition("Requeued", "True", reason, message, now)]
            decisions.requeues.append(Requeue(key, reason, conditions))
        self._restarted.clear()
        arrivals, self._inactive_arrivals = self._inactive_arrivals, set()
        if not self._report_inactive:
            for key in sorted(arrivals):
                entry = self._entries.get(key)
                if entry is not None and entry.queue in self._inactive:
                    self._pending(
                        entry, entry.queue, SUSPENDED, self._suspended_message(entry.queue), now, decisions
                    )
            return
        self._report_inactive = False
        self._apply_stop_policies(now, decisions)
        for name in sorted(self._inactive):
            queue = self._queues.get(name)
            if queue is None:
                continue
            message = self._suspended_message(name)
            for entry in queue.entries():
                self._pending(entry, name, SUSPENDED, message, now, decisions)

    def _suspended_message(self, name: str) -> str:
        stopped = self.cluster_queues[name].stop_policy != STOP_NONE
        return f"ClusterQueue {name} is {'stopped' if stopped else 'inactive'}"

    def _apply_stop_policies(self, now: float, decisions: Decisions) -> None:
        """Hold: reservations not yet Admitted are given back. HoldAndDrain: Admitted workloads
        are evicted too (``ClusterQueueStopped`` / ``LocalQueueStopped``)."""
        for cq_name in sorted(self._holders):
            cq = self.cluster_queues.get(cq_name)
            for entry in sorted(self._holders[cq_name].values(), key=lambda e: e.key):
                if entry.evicted:
                    continue
                wl = entry.wl
                lq = self.local_queues.get((wl.namespace, wl.queue_name))
                if cq is not None and cq.stop_policy != STOP_NONE:
                    policy, kind, reason = cq.stop_policy, "ClusterQueue", "ClusterQueueStopped"
                    who = f"ClusterQueue {cq_name}"
                elif lq is not None and lq.stop_policy != STOP_NONE:
                    policy, kind, reason = lq.stop_policy, "LocalQueue", "LocalQueueStopped"
                    who = f"LocalQueue {lq.name}"
                else:
                    continue
                if not entry.admitted:
                    message = f"{who} is stopped"
                    self._release(entry)
                    entry.assumed = False
                    conditions = [condition("QuotaReserved", "False", SUSPENDED, message, now)]
                    decisions.cleared.append(ReservationCleared(entry.key, SUSPENDED, message, conditions))
                    self._route(entry, now=None)
                elif policy == HOLD_AND_DRAIN:
                    entry.evicted = True
                    message = f"The {kind} is stopped"
                    conditions = [condition("Evicted", "True", reason, message, now)]
                    decisions.evictions.append(Eviction(entry.key, reason, message, None, conditions))

    def _release_backoff(self, now: float, decisions: Decisions) -> None:
        while self._backoff and self._backoff[0][0] <= now:
            due, _, key = heapq.heappop(self._backoff)
            entry = self._entries.get(key)
            if entry is None or entry.reserved_in is not None or entry.queue is not None:
                continue
            if self._unrouted.get(key, ("", ""))[1] != "waiting for the requeue backoff to finish":
                continue
            self._unrouted.pop(key, None)
            conditions = [
                condition("Requeued", "True", "BackoffFinished", "The workload backoff was finished", now)
            ]
            decisions.requeues.append(Requeue(key, "BackoffFinished", conditions))
            self._route(entry, now=now, requeue_at=due)

    def _evaluate_checks(self, now: float, decisions: Decisions) -> None:
        dirty, self._check_dirty = self._check_dirty, set()
        for key in sorted(dirty):
            entry = self._entries.get(key)
            if entry is None or entry.reserved_in is None or entry.evicted:
                continue
            cq = self.cluster_queues.get(entry.reserved_in)
            if cq is None:
                continue
            applicable = {rule.name for rule in cq.admission_checks if rule.applies_to(entry.flavors)}
            states = {c.name: c for c in entry.wl.check_states if c.name in applicable}
            rejected = sorted(n for n, c in states.items() if c.state == "Rejected")
            retry = sorted(n for n, c in states.items() if c.state == "Retry")
            if rejected:
                if entry.check_reported == "Rejected":
                    continue
                entry.check_reported = "Rejected"
                plural = "AdmissionChecks" if len(rejected) > 1 else "AdmissionCheck"
                detail = "; ".join(f'"{n}" ({states[n].message})' for n in rejected)
                message = f"{plural} in Rejected state: {detail}"
                conditions = [condition("DeactivationTarget", "True", "AdmissionCheck", message, now)]
                decisions.deactivations.append(Deactivation(key, message, conditions))
            elif retry:
                if entry.check_reported == "Retry":
                    continue
                entry.check_reported = "Retry"
                entry.evicted = True
                plural = "AdmissionChecks" if len(retry) > 1 else "AdmissionCheck"
                detail = "; ".join(f'"{n}" ({states[n].message})' for n in retry)
                message = f"Evicted due to {plural} in Retry state: {detail}"
                requeue_at = check_retry_requeue_at(
                    entry.wl.requeue_at,
                    [(states[n].last_transition, states[n].requeue_after_seconds) for n in retry],
                )
                conditions = [condition("Evicted", "True", "AdmissionCheck", message, now)]
                decisions.evictions.append(Eviction(key, "AdmissionCheck", message, requeue_at, conditions))
            elif not entry.admitted and all(
                states.get(n) is not None and states[n].state == "Ready" for n in applicable
            ):
                entry.admitted = True
                entry.check_reported = ""
                self._track_readiness(entry)
                conditions = [condition("Admitted", "True", "Admitted", "The workload is admitted", now)]
                decisions.admitted.append(Admitted(key, conditions))

    # ------------------------------------------------------------------ queries
    def status(self, namespace: str, name: str) -> _Status:
        """Where a workload stands: admitted, reserved (waiting for checks), or why it waits."""
        entry = self._entries.get((namespace, name))
        if entry is None:
            return _Status("Unknown", None, "", "not known to the engine", {}, {})
        if entry.reserved_in is not None:
            state = "Evicted" if entry.evicted else "Admitted" if entry.admitted else "QuotaReserved"
            flavors, counts = self._assignment_view(entry)
            borrowing = entry.view is not None and entry.view.borrowing > 0
            return _Status(state, entry.reserved_in, "", "", flavors, counts, borrowing)
        if entry.key in self._unrouted:
            reason, message = self._unrouted[entry.key]
            return _Status("Pending", None, reason, message, {}, {})
        parked = ClusterQueueQueue.parked_reason(entry)
        if parked is not None:
            return _Status("Pending", entry.queue, parked[0], parked[1], {}, {})
        if entry.reported is not None:
            return _Status("Pending", entry.queue, entry.reported[0], entry.reported[1], {}, {})
        if entry.queue is not None and entry.queue in self._inactive:
            return _Status(
                "Pending", entry.queue, SUSPENDED, f"ClusterQueue {entry.queue} is inactive", {}, {}
            )
        return _Status("Pending", entry.queue, PENDING_EVALUATION, "waiting in the queue", {}, {})

    def _assignment_view(self, entry: Entry) -> tuple[dict[str, dict[str, str]], dict[str, int]]:
        if entry.assumed and entry.view is not None:
            return (
                {ps.name: dict(ps.flavors) for ps in entry.view.pod_sets},
                {ps.name: ps.count for ps in entry.view.pod_sets},
            )
        wl = entry.wl
        if wl.admission is not None:
            return (
                {p.name: dict(p.flavors) for p in wl.admission.pod_set_assignments},
                {p.name: p.count for p in wl.admission.pod_set_assignments},
            )
        return {}, {}

    def cluster_queue_status(self, name: str) -> dict[str, Any]:
        """The counters and usage of ``ClusterQueue.status`` (conditions: :meth:`cluster_queue_active`).

        ``flavorsReservation`` counts every workload holding quota, ``flavorsUsage`` only the
        Admitted ones; ``borrowed`` is what exceeds the nominal quota.
        """
        self.sync()
        cq = self.cluster_queues.get(name)
        holders = list(self._holders.get(name, {}).values())
        queue = self._queues.get(name)
        pending = len(queue) if queue is not None else 0
        reserved: dict[FlavorResource, int] = {}
        admitted: dict[FlavorResource, int] = {}
        for entry in holders:
            for fr, value in entry.charged.items():
                reserved[fr] = reserved.get(fr, 0) + value
                if entry.admitted:
                    admitted[fr] = admitted.get(fr, 0) + value
        nominal = self._nodes[name].nominal if name in self._nodes else {}
        groups = cq.resource_groups if cq is not None else ()
        return {
            "pendingWorkloads": pending,
            "reservingWorkloads": len(holders),
            "admittedWorkloads": sum(1 for entry in holders if entry.admitted),
            "flavorsReservation": _flavor_usage(groups, reserved, nominal),
            "flavorsUsage": _flavor_usage(groups, admitted, nominal),
        }

    def local_queue_status(self, namespace: str, name: str) -> dict[str, Any]:
        """The counters and usage of ``LocalQueue.status`` (conditions: :meth:`local_queue_active`)."""
        self.sync()
        lq = self.local_queues.get((namespace, name))
        cq = self.cluster_queues.get(lq.cluster_queue) if lq is not None else None
        mine = [e for e in self._entries.values() if e.wl.namespace == namespace and e.wl.queue_name == name]
        holders = [e for e in mine if e.reserved_in is not None]
        reserved: dict[FlavorResource, int] = {}
        admitted: dict[FlavorResource, int] = {}
        for entry in holders:
            for fr, value in entry.charged.items():
                reserved[fr] = reserved.get(fr, 0) + value
                if entry.admitted:
                    admitted[fr] = admitted.get(fr, 0) + value
        groups = cq.resource_groups if cq is not None else ()
        return {
            "pendingWorkloads": sum(1 for e in mine if e.reserved_in is None),
            "reservingWorkloads": len(holders),
            "admittedWorkloads": sum(1 for e in holders if e.admitted),
            "flavorsReservation": _flavor_usage(groups, reserved, None),
            "flavorsUsage": _flavor_usage(groups, admitted, None),
        }

    def local_queue_active(self, namespace: str, name: str) -> tuple[bool, str, str]:
        """The LocalQueue's ``Active`` condition: (status, reason, message)."""
        self.sync()
        lq = self.local_queues.get((namespace, name))
        if lq is None:
            return False, "NotFound", f"LocalQueue {name} doesn't exist"
        if lq.stop_policy != STOP_NONE:
            return False, "Stopped", "LocalQueue is stopped"
        if lq.cluster_queue not in self.cluster_queues:
            return False, "ClusterQueueDoesNotExist", "Can't submit new workloads to clusterQueue"
        if lq.cluster_queue in self._inactive:
            return False, "ClusterQueueIsInactive", "Can't submit new workloads to clusterQueue"
        return True, "Ready", "Can submit new workloads to localQueue"

    def requested_counts(self, namespace: str, name: str) -> dict[str, int]:
        """The pod counts the workload asks for (to tell partial admission apart)."""
        entry = self._entries.get((namespace, name))
        return {ps.name: ps.count for ps in entry.wl.pod_sets} if entry is not None else {}

    def workload_keys(self) -> list[WorkloadKey]:
        return sorted(self._entries)

    def reservation_count(self) -> int:
        return sum(len(h) for h in self._holders.values())
