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

import json
from collections.abc import Sequence

from kadmit.checks.plugin import AdmissionCheckPlugin, CheckContext, ClusterView
from kadmit.checks.quota_usage import (
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
    with_limit_range_defaults,
)
from kadmit.checks.verdict import Ready, Rejected, Retry, Verdict
from kadmit.kube import Obj, Resource
from kadmit.kube.objects import controller_of
from kadmit.kube.resources import ADMISSION_CHECKS, LIMIT_RANGES, PODS, RESOURCE_QUOTAS, WORKLOADS
from kadmit.workload import READY, holds_reservation

CONTROLLER_NAME = "kadmit.dev/resourcequota"
PODSET_LABEL = "kueue.x-k8s.io/podset"


def pod_sets(workload: Obj, limit_ranges: Sequence[Obj] = ()) -> list[tuple[str, Obj, int]]:
    """``(name, pod spec, admitted count)`` per pod set: the assigned count when partially admitted.

    With the namespace's LimitRanges, the spec is the one the pods will have once admitted.
    """
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
        spec = (pod_set.get("template") or {}).get("spec") or {}
        out.append((name, with_limit_range_defaults(spec, limit_ranges), int(count)))
    return out


def controller_uid(obj: Obj) -> str | None:
    """The uid of the object's controller: a workload's job (whose pods it describes), a pod's job."""
    ref = controller_of(obj)
    return str(ref.get("uid")) if ref is not None else None


def index_active_pods(pods: list[Obj]) -> dict[str, list[Obj]]:
    """The pods the quota charges, by the uid of their controller (the Job)."""
    index: dict[str, list[Obj]] = {}
    for pod in pods:
        owner = controller_uid(pod)
        if owner is not None and counts_toward_quota(pod):
            index.setdefault(owner, []).append(pod)
    return index


def active_pods_by_pod_set(workload: Obj, pods_by_owner: dict[str, list[Obj]]) -> dict[str, int]:
    """How many of the workload's pods exist and are charged by the quota, per pod set."""
    uid = controller_uid(workload)
    pods = pods_by_owner.get(uid, []) if uid is not None else []
    if not pods:
        return {}
    default = str((((workload.get("spec") or {}).get("podSets") or [{}])[0]).get("name", "main"))
    counts: dict[str, int] = {}
    for pod in pods:
        pod_set = ((pod.get("metadata") or {}).get("labels") or {}).get(PODSET_LABEL, default)
        counts[pod_set] = counts.get(pod_set, 0) + 1
    return counts


class Charges:
    """What one pod costs under one quota, remembered per object version and quota shape.

    A decision looks at every pod and every passed workload of the namespace; parsing their
    quantities each time would make a burst quadratic in parsing. The charge depends only on
    the pod spec (its object's uid and resourceVersion) and the quota's keys and scopes, not on
    its ``hard`` values or ``used``, so it survives every status update of the quota.
    """

    def __init__(self, limit: int = 200_000) -> None:
        self._memo: dict[tuple[object, ...], Usage | None] = {}
        self._demands: dict[tuple[object, ...], Usage] = {}
        self._limit = limit

    @staticmethod
    def shape(quota: Obj, keys: list[str]) -> tuple[object, ...]:
        """What a pod's charge under ``quota`` depends on: the quota, its keys and its scopes."""
        spec = quota.get("spec") or {}
        scopes = json.dumps([spec.get("scopes"), spec.get("scopeSelector")], sort_keys=True)
        return (quota.get("metadata") or {}).get("uid"), tuple(keys), scopes

    def per_pod(self, owner: Obj, part: str, spec: Obj, quota: Obj, keys: list[str],
                shape: tuple[object, ...]) -> Usage | None:
        """The charge of one pod with ``spec`` (part ``part`` of ``owner``); None if the quota skips it."""
        meta = owner.get("metadata") or {}
        cacheable = bool(meta.get("uid") and meta.get("resourceVersion"))
        key = (meta.get("uid"), meta.get("resourceVersion"), part, shape)
        if cacheable and key in self._memo:
            return self._memo[key]
        value = pod_usage(spec, keys) if quota_matches(quota, spec) else None
        if cacheable:
            if len(self._memo) >= self._limit:
                self._memo.clear()
            self._memo[key] = value
        return value

    def demand(self, workload: Obj, quota: Obj, keys: list[str], shape: tuple[object, ...],
               existing: dict[str, int] | None = None, limit_ranges: Sequence[Obj] = ()) -> Usage:
        """What the workload's pods not charged yet (all, without ``existing``) will cost under ``quota``."""
        meta = workload.get("metadata") or {}
        cacheable = bool(meta.get("uid") and meta.get("resourceVersion"))
        key = (meta.get("uid"), meta.get("resourceVersion"), shape, tuple(sorted((existing or {}).items())))
        if cacheable and key in self._demands:
            return self._demands[key]
        total: Usage = {k: 0 for k in keys}
        for name, spec, count in pod_sets(workload, limit_ranges):
            remaining = max(0, count - (existing or {}).get(name, 0))
            if remaining:
                usage = self.per_pod(workload, name, spec, quota, keys, shape)
                if usage is not None:
                    add(total, scale(usage, remaining))
        if cacheable:
            if len(self._demands) >= self._limit:
                self._demands.clear()
            self._demands[key] = total
        return total

    def charged(self, pods: list[Obj], quota: Obj, keys: list[str], shape: tuple[object, ...]) -> Usage:
        """What the pods that exist and are not terminal cost under ``quota``."""
        total: Usage = {k: 0 for k in keys}
        for pod in pods:
            if counts_toward_quota(pod):
                usage = self.per_pod(pod, "", pod.get("spec") or {}, quota, keys, shape)
                if usage is not None:
                    add(total, usage)
        return total


class ResourceQuotaCheck(AdmissionCheckPlugin[None]):
    """Ready only when every matching ResourceQuota of the namespace has room for all the pods."""

    controller_name = CONTROLLER_NAME
    watches = (RESOURCE_QUOTAS, LIMIT_RANGES, PODS, WORKLOADS)

    def __init__(self, backoff_base_seconds: float = 1.0, backoff_max_seconds: float = 16.0) -> None:
        self.backoff_base = backoff_base_seconds
        self.backoff_max = backoff_max_seconds
        self._assumed: dict[str, Obj] = {}  # uid → workload passed here, until released
        self.charges = Charges()
        self._ledger_uids: dict[str, set[str]] = {}  # namespace → uids in the ledger at the last decision
        self._quotas_seen: dict[tuple[str, str], tuple[str, Usage]] = {}  # spec and used last seen

    async def evaluate(self, workload: Obj, context: CheckContext[None]) -> Verdict:
        verdict = self.decide(workload, context.cluster, context.retry_count)
        uid = str(workload["metadata"].get("uid"))
        if isinstance(verdict, Ready):
            self._assumed[uid] = workload
        else:
            self._assumed.pop(uid, None)
        return verdict

    def affected(self, kind: Resource, obj: Obj, cluster: ClusterView) -> list[tuple[str, str]]:
        """The undecided workloads of the namespace, but only after a change that can free quota.

        A check can only turn from not-yet to yes when room appears: a workload leaves the
        ledger, a pod ends or goes, a quota grows or its ``used`` shrinks. Workloads being
        passed and pods starting only take room, so they re-evaluate nobody; without this, a
        burst of n workloads would cost n evaluations per status write.
        """
        namespace = obj["metadata"].get("namespace", "")
        if not self._may_free_quota(kind, obj, cluster):
            return []
        ours = self._our_checks(cluster)
        return [
            (namespace, wl["metadata"]["name"]) for wl in cluster.list(WORKLOADS, namespace)
            if holds_reservation(wl) and not self._passed_here(wl, cluster, ours)
        ]

    def _may_free_quota(self, kind: Resource, obj: Obj, cluster: ClusterView) -> bool:
        meta = obj["metadata"]
        namespace, name, uid = meta.get("namespace", ""), meta["name"], str(meta.get("uid"))
        current = cluster.get(kind, namespace, name)  # None: the object was deleted
        if kind == PODS:
            return current is None or not counts_toward_quota(current) or bool(
                (current.get("metadata") or {}).get("deletionTimestamp"))
        if kind == WORKLOADS:
            was_in_ledger = uid in self._ledger_uids.get(namespace, set())
            still = current is not None and holds_reservation(current) and (
                uid in self._assumed or self._passed_here(current, cluster))
            if was_in_ledger and not still:
                self._ledger_uids[namespace].discard(uid)
                return True
            return False
        if kind == RESOURCE_QUOTAS:
            key = (namespace, name)
            before = self._quotas_seen.get(key)
            if current is None:
                self._quotas_seen.pop(key, None)
                return True
            now = (json.dumps(current.get("spec"), sort_keys=True), used(current))
            self._quotas_seen[key] = now
            return before is None or before[0] != now[0] or any(
                amount < before[1].get(resource, 0) for resource, amount in now[1].items())
        return True

    async def release(self, workload: Obj, cluster: ClusterView) -> None:
        self._assumed.pop(str(workload["metadata"].get("uid")), None)

    def _our_checks(self, cluster: ClusterView) -> set[str]:
        return {ac["metadata"]["name"] for ac in cluster.list(ADMISSION_CHECKS)
                if (ac.get("spec") or {}).get("controllerName") == self.controller_name}

    def _passed_here(self, workload: Obj, cluster: ClusterView, ours: set[str] | None = None) -> bool:
        ours = self._our_checks(cluster) if ours is None else ours
        return any(entry.get("state") == READY and entry.get("name") in ours
                   for entry in (workload.get("status") or {}).get("admissionChecks") or [])

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
        ours = self._our_checks(cluster)
        for wl in cluster.list(WORKLOADS, namespace):
            uid = str(wl["metadata"].get("uid"))
            if uid not in entries and self._passed_here(wl, cluster, ours) and holds_reservation(wl):
                entries[uid] = wl
        self._ledger_uids[namespace] = set(entries)
        entries.pop(exclude_uid, None)
        return list(entries.values())

    def decide(self, workload: Obj, cluster: ClusterView, retry_count: int = 0) -> Verdict:
        namespace = workload["metadata"]["namespace"]
        quotas = sorted(cluster.list(RESOURCE_QUOTAS, namespace), key=lambda q: q["metadata"]["name"])
        limit_ranges = cluster.list(LIMIT_RANGES, namespace)
        own_pod_sets = pod_sets(workload, limit_ranges)
        relevant = [q for q in quotas if any(quota_matches(q, spec) for _, spec, _ in own_pod_sets)]
        if not relevant:
            return Ready("no ResourceQuota of the namespace charges its pods")
        # Workloads' pods are charged as LimitRanger will default them; existing pods already are.
        defaults_version = tuple(sorted(
            (str(lr["metadata"].get("uid")), str(lr["metadata"].get("resourceVersion")))
            for lr in limit_ranges))
        for quota in relevant:
            keys = sorted(hard_limits(quota))
            for name, spec, _ in own_pod_sets:
                missing = missing_declarations(spec, keys) if quota_matches(quota, spec) else []
                if missing:
                    return Rejected(
                        f'ResourceQuota "{quota["metadata"]["name"]}" limits {", ".join(missing)}: every '
                        f"container of pod set {name} must declare it, or the API server rejects its pods")
        pods = cluster.list(PODS, namespace)
        pods_by_owner = index_active_pods(pods)
        others = self.ledger(namespace, cluster, str(workload["metadata"].get("uid")))
        existing = {str(o["metadata"].get("uid")): active_pods_by_pod_set(o, pods_by_owner) for o in others}
        shortfalls: list[str] = []
        for quota in relevant:
            hard = hard_limits(quota)
            keys = sorted(hard)
            shape = self.charges.shape(quota, keys)
            defaulted = (*shape, defaults_version)
            needed = self.charges.demand(workload, quota, keys, defaulted, limit_ranges=limit_ranges)
            charged = self.charges.charged(pods, quota, keys, shape)
            reported = used(quota)
            reserved: Usage = {k: 0 for k in keys}
            for other in others:
                not_yet_charged = existing[str(other["metadata"].get("uid"))]
                add(reserved,
                    self.charges.demand(other, quota, keys, defaulted, not_yet_charged, limit_ranges))
            short_keys: list[str] = []
            for key in keys:
                if needed[key] <= 0:
                    continue
                in_use = max(reported.get(key, 0), charged[key])
                free = hard[key] - in_use - reserved[key]
                if needed[key] > free:
                    short = needed[key] - max(free, 0)
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

