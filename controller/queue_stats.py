"""What each ClusterQueue and LocalQueue holds, counted from the Workloads as they are in the API.

The numbers Kueue reports in queue metrics: pending (active / inadmissible), reserving, admitted
and finished counts, and the quota held per flavor and resource by reserving Workloads
(``flavorsReservation``) and by admitted ones (``flavorsUsage``). Reclaimable pods are not
charged, as in Kueue. Each Workload's share is one :class:`Contribution`; :class:`IncrementalStats`
keeps the sum current event by event (what the controller reads), :func:`compute` sums from
scratch (the reference it is tested against).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TypeVar

from kadmit.engine import QuantityError, format_milli, to_milli
from kadmit.engine.concurrent_admission import PARENT_LABEL, read_variant
from kadmit.engine.model import WorkloadKey
from kadmit.kube import Obj
from kadmit.workload import find_condition, is_true

FlavorResource = tuple[str, str]
"""``(flavor, resource)`` as a queue's status lists them: a bare tuple, equal to and hashed as
the engine's :class:`kadmit.engine.model.FlavorResource`."""
K = TypeVar("K")

# QuotaReserved=False reasons of a workload that sits in the queue's heap, not parked.
ACTIVE_PENDING_REASONS = frozenset({"", "PendingEvaluation"})


# What a Workload is to its queues (:class:`Contribution`'s ``state``).
PENDING_ACTIVE = "pending-active"
PENDING_INADMISSIBLE = "pending-inadmissible"
RESERVING = "reserving"
ADMITTED = "admitted"  # reserving, and Admitted
FINISHED = "finished"
CONCURRENT_PARENT = "concurrent-parent"
"""A ConcurrentAdmission parent not Admitted: its variants are the ones queued, so it counts only
as unadmitted (Kueue's queue manager and cache skip it, its unadmitted metrics do not)."""


@dataclass(frozen=True, slots=True)
class Contribution:
    """What one Workload adds to the stats of its ClusterQueue and LocalQueue (either may be absent):
    kept per Workload, so that its next event takes out exactly what this one put in."""

    cluster_queue: str
    local_queue: tuple[str, str] | None
    state: str
    charged: tuple[tuple[FlavorResource, int], ...] = ()
    unadmitted: tuple[str, str] | None = None
    """Not Admitted (nor finished): Kueue's ``unadmitted_workloads`` (reason, underlying_cause)."""
    requests: tuple[tuple[str, int], ...] = ()
    """Pending: what it asks for, per resource (``cluster_queue_resource_pending``)."""


@dataclass
class QueueStats:
    pending_active: int = 0
    pending_inadmissible: int = 0
    reserving: int = 0
    admitted: int = 0
    finished: int = 0
    reservation: dict[FlavorResource, int] = field(default_factory=dict)
    usage: dict[FlavorResource, int] = field(default_factory=dict)
    unadmitted: dict[tuple[str, str, str], int] = field(default_factory=dict)
    """(cluster_queue, reason, underlying_cause) → how many are not Admitted, for that reason."""
    pending_requests: dict[str, int] = field(default_factory=dict)
    """Per resource: what the pending workloads ask for (milli-units)."""

    @property
    def pending(self) -> int:
        return self.pending_active + self.pending_inadmissible

    def add(self, contribution: Contribution, sign: int) -> None:
        """Count ``contribution`` in (``sign`` 1) or out (-1)."""
        state = contribution.state
        if contribution.unadmitted is not None:
            _add(self.unadmitted, [((contribution.cluster_queue, *contribution.unadmitted), 1)], sign)
        _add(self.pending_requests, contribution.requests, sign)
        if state == PENDING_ACTIVE:
            self.pending_active += sign
        elif state == PENDING_INADMISSIBLE:
            self.pending_inadmissible += sign
        elif state == FINISHED:
            self.finished += sign
        elif state == CONCURRENT_PARENT:
            pass
        else:
            self.reserving += sign
            _add(self.reservation, contribution.charged, sign)
            if state == ADMITTED:
                self.admitted += sign
                _add(self.usage, contribution.charged, sign)

    @property
    def empty(self) -> bool:
        return not (
            self.pending_active
            or self.pending_inadmissible
            or self.reserving
            or self.admitted
            or self.finished
            or self.reservation
            or self.usage
            or self.unadmitted
            or self.pending_requests
        )


@dataclass
class Stats:
    """Per queue, only the queues something counts in (a missing queue has all zeros)."""

    cluster_queues: dict[str, QueueStats] = field(default_factory=dict)
    local_queues: dict[tuple[str, str], QueueStats] = field(default_factory=dict)

    def cq(self, name: str) -> QueueStats:
        return self.cluster_queues.get(name) or QueueStats()

    def lq(self, namespace: str, name: str) -> QueueStats:
        return self.local_queues.get((namespace, name)) or QueueStats()

    def add(self, contribution: Contribution, sign: int = 1) -> None:
        if contribution.cluster_queue:
            _count(self.cluster_queues, contribution.cluster_queue, contribution, sign)
        if contribution.local_queue is not None:
            _count(self.local_queues, contribution.local_queue, contribution, sign)


def _count(table: dict[K, QueueStats], key: K, contribution: Contribution, sign: int) -> None:
    stats = table.get(key)
    if stats is None:
        stats = table[key] = QueueStats()
    stats.add(contribution, sign)
    if stats.empty:
        del table[key]


def charged(wl: Obj) -> dict[FlavorResource, int]:
    """Quota a reserving Workload holds, per (flavor, resource), in milli-units."""
    status = wl.get("status") or {}
    reclaimable = {p.get("name"): int(p.get("count") or 0) for p in status.get("reclaimablePods") or []}
    result: dict[FlavorResource, int] = {}
    for psa in (status.get("admission") or {}).get("podSetAssignments") or []:
        count = int(psa.get("count") or 0)
        active = max(count - reclaimable.get(psa.get("name"), 0), 0)
        for resource, quantity in (psa.get("resourceUsage") or {}).items():
            flavor = (psa.get("flavors") or {}).get(resource)
            if flavor is None:
                continue
            try:
                total = to_milli(resource, quantity)
            except QuantityError:
                continue
            value = total if count == 0 or active == count else total // count * active
            key = (flavor, resource)
            result[key] = result.get(key, 0) + value
    return result


def local_queue_key(wl: Obj) -> tuple[str, str]:
    """The (namespace, name) of the LocalQueue a Workload names."""
    namespace = (wl.get("metadata") or {}).get("namespace", "")
    return str(namespace), str((wl.get("spec") or {}).get("queueName") or "")


def contribution(wl: Obj, local_queue: Obj | None) -> Contribution | None:
    """What ``wl`` counts as, given its LocalQueue as the cache holds it (None: no such queue).

    Finished: finished, in the ClusterQueue it reserved in (else its queue's). Reserving quota
    and active: reserving (admitted or not) where it reserved. Otherwise, active and with an
    existing LocalQueue: pending, active or inadmissible by its ``QuotaReserved`` reason.
    Anything else counts nowhere (None). ConcurrentAdmission: a variant counts as any workload but
    never as unadmitted nor finished; a parent counts only as unadmitted until it is Admitted.
    """
    meta = wl.get("metadata") or {}
    if read_variant(meta)[0]:
        variant = _contribution(wl, local_queue)  # counted as any workload, but never unadmitted nor
        if variant is None or variant.state == FINISHED:  # finished (Kueue skips variants there)
            return None
        return replace(variant, unadmitted=None)
    if (meta.get("labels") or {}).get(PARENT_LABEL) == "true" and not is_true(wl, "Finished"):
        parent = _contribution(wl, local_queue)
        if parent is None or parent.state == ADMITTED:
            return None  # its admitted variant holds the quota
        return replace(parent, state=CONCURRENT_PARENT, charged=(), requests=())
    return _contribution(wl, local_queue)


def _contribution(wl: Obj, local_queue: Obj | None) -> Contribution | None:
    spec = wl.get("spec") or {}
    lq = local_queue_key(wl) if local_queue is not None else None
    lq_cq = str(((local_queue or {}).get("spec") or {}).get("clusterQueue") or "")
    admission = (wl.get("status") or {}).get("admission") or {}
    if is_true(wl, "Finished"):
        return Contribution(str(admission.get("clusterQueue") or lq_cq), lq, FINISHED)
    active = spec.get("active", True) is not False
    if active and admission and is_true(wl, "QuotaReserved"):
        admitted = is_true(wl, "Admitted")
        state = ADMITTED if admitted else RESERVING
        held = tuple(sorted((key, value) for key, value in charged(wl).items() if value))
        return Contribution(
            str(admission.get("clusterQueue", "")),
            lq,
            state,
            held,
            None if admitted else unadmitted_reason(wl),
        )
    if not active or local_queue is None:
        return None
    reason = str((find_condition(wl, "QuotaReserved") or {}).get("reason", ""))
    state = PENDING_ACTIVE if reason in ACTIVE_PENDING_REASONS else PENDING_INADMISSIBLE
    asks = tuple(sorted(requests(wl).items()))
    return Contribution(lq_cq, lq, state, unadmitted=unadmitted_reason(wl), requests=asks)


def unadmitted_reason(wl: Obj) -> tuple[str, str]:
    """Kueue's ``getUnadmittedWorkloadStatus``: the ``Admitted`` condition's reason (NoReservation
    when there is none) and, as the underlying cause, the ``QuotaReserved`` reason ("" when it is
    True, PendingEvaluation when there is none)."""
    admitted = find_condition(wl, "Admitted")
    reason = str(admitted.get("reason") or "") if admitted is not None else "NoReservation"
    quota = find_condition(wl, "QuotaReserved")
    if quota is None:
        return reason, "PendingEvaluation"
    return reason, "" if quota.get("status") == "True" else str(quota.get("reason") or "")


def requests(wl: Obj) -> dict[str, int]:
    """What a Workload asks for in all (milli-units per resource): per pod set, ``count`` pods of
    the larger of its containers' sum and any one init container, plus the pod overhead."""
    total: dict[str, int] = {}
    for pod_set in (wl.get("spec") or {}).get("podSets") or []:
        spec = (pod_set.get("template") or {}).get("spec") or {}
        pod: dict[str, int] = {}
        for container in spec.get("containers") or []:
            _add_quantities(pod, ((container.get("resources") or {}).get("requests") or {}).items())
        for container in spec.get("initContainers") or []:
            init: dict[str, int] = {}
            _add_quantities(init, ((container.get("resources") or {}).get("requests") or {}).items())
            for resource, value in init.items():
                pod[resource] = max(pod.get(resource, 0), value)
        _add_quantities(pod, (spec.get("overhead") or {}).items())
        count = int(pod_set.get("count") or 0)
        for resource, value in pod.items():
            if value:
                total[resource] = total.get(resource, 0) + value * count
    return total


def _add_quantities(target: dict[str, int], quantities: Iterable[tuple[str, object]]) -> None:
    for resource, quantity in quantities:
        try:
            target[resource] = target.get(resource, 0) + to_milli(resource, quantity)
        except (QuantityError, TypeError):
            continue


def compute(workloads: Iterable[Obj], local_queues: Mapping[tuple[str, str], Obj]) -> Stats:
    """The stats from scratch, in one pass over every Workload (:class:`IncrementalStats` keeps the
    same up to date event by event; this is its reference)."""
    stats = Stats()
    for wl in workloads:
        found = contribution(wl, local_queues.get(local_queue_key(wl)))
        if found is not None:
            stats.add(found)
    return stats


class IncrementalStats:
    """:func:`compute`'s result, kept current from Workload and LocalQueue events.

    Each Workload event takes the Workload's previous contribution out and puts its new one in;
    a LocalQueue that appears or goes re-counts only the Workloads that name it. So neither a
    metrics scrape nor a status write ever walks all the Workloads. ``local_queue`` and
    ``workload`` read the caches (as they are after the event being handled).
    """

    def __init__(
        self, local_queue: Callable[[str, str], Obj | None], workload: Callable[[str, str], Obj | None]
    ) -> None:
        self.stats = Stats()
        self._local_queue = local_queue
        self._workload = workload
        self._contributions: dict[WorkloadKey, Contribution] = {}
        self._queue_named: dict[WorkloadKey, str] = {}
        self._naming: dict[tuple[str, str], set[str]] = {}
        """Per LocalQueue (namespace, name), whether it exists or not: the Workloads naming it."""

    def workload_changed(self, wl: Obj) -> None:
        """A Workload was added or changed (``wl`` is its new state)."""
        namespace, queue = local_queue_key(wl)
        key = WorkloadKey(namespace, str(wl["metadata"]["name"]))
        found = contribution(wl, self._local_queue(namespace, queue))
        previous = self._contributions.get(key)
        if found != previous:  # most events change a condition that counts nowhere
            if previous is not None:
                self.stats.add(previous, -1)
            if found is None:
                del self._contributions[key]
            else:
                self._contributions[key] = found
                self.stats.add(found)
        named = self._queue_named.get(key)
        if named != queue:
            if named is not None:
                self._unname(namespace, key[1], named)
            self._queue_named[key] = queue
            self._naming.setdefault((namespace, queue), set()).add(key[1])

    def workload_deleted(self, namespace: str, name: str) -> None:
        key = WorkloadKey(namespace, name)
        previous = self._contributions.pop(key, None)
        if previous is not None:
            self.stats.add(previous, -1)
        queue = self._queue_named.pop(key, None)
        if queue is not None:
            self._unname(namespace, name, queue)

    def _unname(self, namespace: str, name: str, queue: str) -> None:
        naming = self._naming[(namespace, queue)]
        naming.discard(name)
        if not naming:
            del self._naming[(namespace, queue)]

    def local_queue_changed(self, namespace: str, name: str) -> None:
        """A LocalQueue was added, changed or deleted: re-count the Workloads that name it."""
        for wl_name in sorted(self._naming.get((namespace, name), ())):
            wl = self._workload(namespace, wl_name)
            if wl is None:
                self.workload_deleted(namespace, wl_name)
            else:
                self.workload_changed(wl)


def _add(target: dict[K, int], values: Iterable[tuple[K, int]], sign: int) -> None:
    """Add (or take out) amounts, keeping no zeros: equal stats compare equal however they came."""
    for key, value in values:
        total = target.get(key, 0) + sign * value
        if total:
            target[key] = total
        else:
            target.pop(key, None)


def nominal_quotas(cq: Obj) -> dict[FlavorResource, int]:
    """``spec.resourceGroups[].flavors[].resources[].nominalQuota``, per flavor and resource."""
    groups = (cq.get("spec") or {}).get("resourceGroups") or []
    return flavor_amounts([f for group in groups for f in group.get("flavors") or []], "nominalQuota")


def flavor_amounts(flavors: Iterable[Obj], field: str) -> dict[FlavorResource, int]:
    """``field`` of every ``resources[]`` entry of ``flavors`` (each ``{name, resources}``), in
    milli-units per flavor and resource; an entry that cannot be read is left out."""
    result: dict[FlavorResource, int] = {}
    for flavor in flavors:
        for resource in flavor.get("resources") or []:
            try:
                amount = to_milli(resource["name"], resource.get(field, 0))
                result[(flavor["name"], resource["name"])] = amount
            except (QuantityError, KeyError):
                continue
    return result


def flavor_usage(cq: Obj | None, amounts: Mapping[FlavorResource, int], *, borrowed: bool) -> list[Obj]:
    """``status.flavorsReservation`` / ``flavorsUsage``: every flavor and resource of the queue, in
    its spec's order, with ``total`` (and, for a ClusterQueue, ``borrowed`` above nominal)."""
    order: list[FlavorResource] = []
    nominal: dict[FlavorResource, int] = {}
    if cq is not None:
        nominal = nominal_quotas(cq)
        order = list(nominal)
    for key in sorted(amounts):
        if key not in order:
            order.append(key)
    flavors: dict[str, list[Obj]] = {}
    for flavor, resource in order:
        total = amounts.get((flavor, resource), 0)
        entry: Obj = {"name": resource, "total": format_milli(resource, total)}
        if borrowed:
            entry["borrowed"] = format_milli(resource, max(total - nominal.get((flavor, resource), 0), 0))
        flavors.setdefault(flavor, []).append(entry)
    return [{"name": name, "resources": resources} for name, resources in flavors.items()]
