"""What each ClusterQueue and LocalQueue holds, counted from the Workloads as they are in the API.

One pure pass over the Workloads gives the numbers Kueue reports in queue status and metrics:
pending (active / inadmissible), reserving and admitted counts, and the quota held per flavor and
resource by reserving Workloads (``flavorsReservation``) and by admitted ones (``flavorsUsage``).
Reclaimable pods are not charged, as in Kueue.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kadmit.engine import QuantityError, format_milli, to_milli
from kadmit.kube import Obj
from kadmit.workload import find_condition, is_true

FlavorResource = tuple[str, str]

# QuotaReserved=False reasons of a workload that sits in the queue's heap, not parked.
ACTIVE_PENDING_REASONS = frozenset({"", "PendingEvaluation"})


@dataclass
class QueueStats:
    pending_active: int = 0
    pending_inadmissible: int = 0
    reserving: int = 0
    admitted: int = 0
    finished: int = 0
    reservation: dict[FlavorResource, int] = field(default_factory=dict)
    usage: dict[FlavorResource, int] = field(default_factory=dict)

    @property
    def pending(self) -> int:
        return self.pending_active + self.pending_inadmissible


@dataclass
class Stats:
    cluster_queues: dict[str, QueueStats] = field(default_factory=dict)
    local_queues: dict[tuple[str, str], QueueStats] = field(default_factory=dict)

    def cq(self, name: str) -> QueueStats:
        return self.cluster_queues.setdefault(name, QueueStats())

    def lq(self, namespace: str, name: str) -> QueueStats:
        return self.local_queues.setdefault((namespace, name), QueueStats())


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


def compute(workloads: Iterable[Obj], local_queues: Mapping[tuple[str, str], Obj]) -> Stats:
    stats = Stats()
    for wl in workloads:
        meta = wl.get("metadata") or {}
        namespace = str(meta.get("namespace", ""))
        spec = wl.get("spec") or {}
        lq_name = str(spec.get("queueName") or "")
        lq_obj = local_queues.get((namespace, lq_name))
        lq = stats.lq(namespace, lq_name) if lq_obj is not None else None
        admission = (wl.get("status") or {}).get("admission") or {}
        reserved = is_true(wl, "QuotaReserved") and bool(admission)
        if is_true(wl, "Finished"):
            lq_cq = ((lq_obj or {}).get("spec") or {}).get("clusterQueue", "")
            cq_name = str(admission.get("clusterQueue") or lq_cq)
            for s in (stats.cq(cq_name) if cq_name else None, lq):
                if s is not None:
                    s.finished += 1
            continue
        if reserved and spec.get("active", True) is not False:
            cq = stats.cq(str(admission.get("clusterQueue", "")))
            holding = charged(wl)
            admitted = is_true(wl, "Admitted")
            for s in (cq, lq):
                if s is None:
                    continue
                s.reserving += 1
                _add(s.reservation, holding)
                if admitted:
                    s.admitted += 1
                    _add(s.usage, holding)
            continue
        if spec.get("active", True) is False or lq_obj is None:
            continue
        cq_name = str((lq_obj.get("spec") or {}).get("clusterQueue", ""))
        reason = str((find_condition(wl, "QuotaReserved") or {}).get("reason", ""))
        active = reason in ACTIVE_PENDING_REASONS
        for s in (stats.cq(cq_name) if cq_name else None, lq):
            if s is None:
                continue
            if active:
                s.pending_active += 1
            else:
                s.pending_inadmissible += 1
    return stats


def _add(target: dict[FlavorResource, int], values: Mapping[FlavorResource, int]) -> None:
    for key, value in values.items():
        target[key] = target.get(key, 0) + value


def nominal_quotas(cq: Obj) -> dict[FlavorResource, int]:
    result: dict[FlavorResource, int] = {}
    for group in (cq.get("spec") or {}).get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for resource in flavor.get("resources") or []:
                try:
                    result[(flavor["name"], resource["name"])] = to_milli(resource["name"],
                                                                          resource.get("nominalQuota", 0))
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
