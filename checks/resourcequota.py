"""The namespace ResourceQuota check (``kadmit.dev/resourcequota``).

A workload passes only if, for every ResourceQuota of its namespace that would charge its pods,
``hard - used - reserved`` covers what all its pods will request, for every key the quota
limits. ``reserved`` is the ledger of workloads this check already passed whose pods the quota
does not count yet: without it, a burst of workloads all see the same free quota and all pass,
and the API server then rejects the pods of the latecomers (the over-admission of a check that
forgets admitted pods which do not exist yet).

The ledger is level-triggered: it is the set of workloads, in the informer's view, that hold a
reservation with one of this controller's checks ``Ready``, plus those this process has just
passed and whose write it has not seen yet ("assumed"). A workload's entry shrinks by every pod
of it that exists and is not terminal (those are in ``used``), so a restart rebuilds it from the
admitted Workloads and the existing Pods. Evaluation reads and updates the ledger without
yielding to the event loop, so two workloads of one namespace are never passed against the same
free quota.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from checks.kinds import ADMISSION_CHECKS, PODS, RESOURCE_QUOTAS, WORKLOADS, Kind
from checks.plugin import AdmissionCheckPlugin, CheckContext, ClusterView
from checks.quota_usage import (
    Usage,
    add,
    counts_toward_quota,
    describe,
    hard_limits,
    missing_declarations,
    pod_usage,
    quota_matches,
    scale,
    used,
)
from checks.state import holds_reservation
from checks.verdict import READY, Ready, Rejected, Retry, Verdict

Obj = dict[str, Any]
CONTROLLER_NAME = "kadmit.dev/resourcequota"
PODSET_LABEL = "kueue.x-k8s.io/podset"


def pod_sets(workload: Obj) -> list[tuple[str, Obj, int]]:
    """``(name, pod spec, admitted count)`` per pod set: the assigned count when partially admitted."""
    assigned = {
        str(a.get("name")): a.get("count")
        for a in ((workload.get("status") or {}).get("admission") or {}).get("podSetAssignments") or []
    }
    out = []
    for pod_set in (workload.get("spec") or {}).get("podSets") or []:
        name = str(pod_set.get("name", "main"))
        count = assigned.get(name)
        if count is None:
            count = pod_set.get("count", 1)
        out.append((name, (pod_set.get("template") or {}).get("spec") or {}, int(count)))
    return out


def owner_uid(workload: Obj) -> str | None:
    """The uid of the object whose pods the workload describes (the Job), if it is owned."""
    for ref in (workload.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("uid"))
    return None


def active_pods_by_pod_set(workload: Obj, pods: list[Obj]) -> dict[str, int]:
    """How many of the workload's pods exist and are charged by the quota, per pod set."""
    uid = owner_uid(workload)
    sets = pod_sets(workload)
    if uid is None or not sets:
        return {}
    default = sets[0][0]
    counts: dict[str, int] = {}
    for pod in pods:
        refs = (pod.get("metadata") or {}).get("ownerReferences") or []
        if not any(r.get("uid") == uid and r.get("controller") for r in refs) or not counts_toward_quota(pod):
            continue
        pod_set = ((pod.get("metadata") or {}).get("labels") or {}).get(PODSET_LABEL, default)
        counts[pod_set] = counts.get(pod_set, 0) + 1
    return counts


def demand(workload: Obj, quota: Obj, keys: list[str], existing: dict[str, int] | None = None) -> Usage:
    """What the workload's pods not charged yet (all, without ``existing``) will cost under ``quota``."""
    total: Usage = {k: Fraction(0) for k in keys}
    for name, spec, count in pod_sets(workload):
        remaining = max(0, count - (existing or {}).get(name, 0))
        if remaining and quota_matches(quota, spec):
            add(total, scale(pod_usage(spec, keys), remaining))
    return total


class ResourceQuotaCheck(AdmissionCheckPlugin[None]):
    """Ready only when every matching ResourceQuota of the namespace has room for all the pods."""

    controller_name = CONTROLLER_NAME
    watches = (RESOURCE_QUOTAS, PODS, WORKLOADS)

    def __init__(self, backoff_base_seconds: float = 1.0, backoff_max_seconds: float = 16.0) -> None:
        self.backoff_base = backoff_base_seconds
        self.backoff_max = backoff_max_seconds
        self._assumed: dict[str, Obj] = {}  # uid → workload passed here, until released

    async def evaluate(self, workload: Obj, context: CheckContext[None]) -> Verdict:
        verdict = self.decide(workload, context.cluster, context.retry_count)
        uid = str(workload["metadata"].get("uid"))
        if isinstance(verdict, Ready):
            self._assumed[uid] = workload
        else:
            self._assumed.pop(uid, None)
        return verdict

    def affected(self, kind: Kind, obj: Obj, cluster: ClusterView) -> list[tuple[str, str]]:
        """Only undecided checks can change: the reserved workloads of the namespace not yet passed here."""
        namespace = obj["metadata"].get("namespace", "")
        return [
            (namespace, wl["metadata"]["name"]) for wl in cluster.list(WORKLOADS, namespace)
            if holds_reservation(wl) and not self._passed_here(wl, cluster)
        ]

    async def release(self, workload: Obj, cluster: ClusterView) -> None:
        self._assumed.pop(str(workload["metadata"].get("uid")), None)

    def _passed_here(self, workload: Obj, cluster: ClusterView) -> bool:
        for entry in (workload.get("status") or {}).get("admissionChecks") or []:
            if entry.get("state") != READY:
                continue
            ac = cluster.get(ADMISSION_CHECKS, None, str(entry.get("name")))
            if ((ac or {}).get("spec") or {}).get("controllerName") == self.controller_name:
                return True
        return False

    def ledger(self, namespace: str, cluster: ClusterView, exclude_uid: str) -> list[Obj]:
        """The workloads of ``namespace`` passed by this check that still hold their reservation."""
        entries: dict[str, Obj] = {}
        for uid, wl in self._assumed.items():
            if wl["metadata"].get("namespace") == namespace:
                current = cluster.get(WORKLOADS, namespace, wl["metadata"]["name"])
                if current is None or current["metadata"].get("uid") != uid:
                    current = wl  # not seen by the watch yet, or gone: stay conservative until released
                if holds_reservation(current) or current is wl:
                    entries[uid] = current
        for wl in cluster.list(WORKLOADS, namespace):
            uid = str(wl["metadata"].get("uid"))
            if uid not in entries and holds_reservation(wl) and self._passed_here(wl, cluster):
                entries[uid] = wl
        entries.pop(exclude_uid, None)
        return list(entries.values())

    def decide(self, workload: Obj, cluster: ClusterView, retry_count: int = 0) -> Verdict:
        namespace = workload["metadata"]["namespace"]
        quotas = sorted(cluster.list(RESOURCE_QUOTAS, namespace), key=lambda q: q["metadata"]["name"])
        relevant = [q for q in quotas if any(quota_matches(q, spec) for _, spec, _ in pod_sets(workload))]
        if not relevant:
            return Ready("no ResourceQuota of the namespace charges its pods")
        for quota in relevant:
            keys = sorted(hard_limits(quota))
            for name, spec, _ in pod_sets(workload):
                missing = missing_declarations(spec, keys) if quota_matches(quota, spec) else []
                if missing:
                    return Rejected(
                        f'ResourceQuota "{quota["metadata"]["name"]}" limits {", ".join(missing)}: every '
                        f"container of pod set {name} must declare it, or the API server rejects its pods")
        pods = cluster.list(PODS, namespace)
        others = self.ledger(namespace, cluster, str(workload["metadata"].get("uid")))
        existing = {str(o["metadata"].get("uid")): active_pods_by_pod_set(o, pods) for o in others}
        shortfalls: list[str] = []
        for quota in relevant:
            hard = hard_limits(quota)
            keys = sorted(hard)
            needed = demand(workload, quota, keys)
            charged: Usage = {k: Fraction(0) for k in keys}
            for pod in pods:
                spec = pod.get("spec") or {}
                if counts_toward_quota(pod) and quota_matches(quota, spec):
                    add(charged, pod_usage(spec, keys))
            reported = used(quota)
            reserved: Usage = {k: Fraction(0) for k in keys}
            for other in others:
                add(reserved, demand(other, quota, keys, existing[str(other["metadata"].get("uid"))]))
            short_keys: list[str] = []
            for key in keys:
                if needed[key] <= 0:
                    continue
                in_use = max(reported.get(key, Fraction(0)), charged[key])
                free = hard[key] - in_use - reserved[key]
                if needed[key] > free:
                    short = needed[key] - max(free, Fraction(0))
                    short_keys.append(
                        f"{key} short by {describe(key, short)} (needs {describe(key, needed[key])}, "
                        f"hard {describe(key, hard[key])}, used {describe(key, in_use)}, "
                        f"reserved {describe(key, reserved[key])})")
            if short_keys:
                shortfalls.append(f'ResourceQuota "{quota["metadata"]["name"]}": ' + ", ".join(short_keys))
        if shortfalls:
            after = min(self.backoff_base * 2 ** retry_count, self.backoff_max)
            return Retry("; ".join(shortfalls), after=after)
        names = ", ".join(q["metadata"]["name"] for q in relevant)
        return Ready(f"fits in ResourceQuota {names}")

