"""The Workload vocabulary: what every package of kadmit asks about a Workload, in one place.

As Kueue's ``pkg/workload`` is to its packages: the condition types and the helpers that read and
set conditions (on a Workload or any object with ``status.conditions``), the status transitions
kadmit writes (reserve, evict, release, finish, readiness), the admission-check states, and time.

Time has one convention in kadmit: POSIX seconds (float) inside, RFC 3339 on the wire
(:func:`format_time`, :func:`parse_time`). Every function here is pure: it takes a ``status``
(a copy the caller owns) and the time, changes it in place the way Kueue would (contract §2), and
returns whether anything changed, so callers write only real changes. Conditions keep their
``lastTransitionTime`` unless their status flips.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from kadmit.engine.backoff import pods_ready_requeue_at
from kadmit.engine.model import AdmissionCheckRule
from kadmit.engine.model import Obj as Obj  # re-exported: the vocabulary's users need no engine import
from kadmit.engine.timestamps import format_micro_time as format_micro_time
from kadmit.engine.timestamps import format_time as format_time
from kadmit.engine.timestamps import parse_time as parse_wire_time

QUOTA_RESERVED = "QuotaReserved"
ADMITTED = "Admitted"
EVICTED = "Evicted"
PREEMPTED = "Preempted"
REQUEUED = "Requeued"
PODS_READY = "PodsReady"
FINISHED = "Finished"
DEACTIVATION_TARGET = "DeactivationTarget"
ON_HOLD = "OnHold"  # QuotaReserved=False with this reason: kept, not queued (a StatefulSet at 0 replicas)
ACTIVE = "Active"  # an AdmissionCheck's (and a ClusterQueue's, LocalQueue's) readiness

# Admission-check states (``status.admissionChecks[].state``).
PENDING = "Pending"
READY = "Ready"
RETRY = "Retry"
REJECTED = "Rejected"
MAX_CHECK_MESSAGE = 32768

#: Kueue's name as the manager of what it writes into a job, e.g. a TrainJob's
#: ``spec.runtimePatches[].manager`` (the webhook adds it, admission fills it, MultiKueue drops it).
KUEUE_MANAGER = "kueue.x-k8s.io/manager"
ELASTIC_JOB_ANNOTATION = "kueue.x-k8s.io/elastic-job"
"""Kueue's ``workloadslicing.EnabledAnnotationKey``: on a job, it opted into elastic scaling; on a
Workload, the Workload is one of an elastic job's slices."""


# -- time

def parse_time(value: Any) -> float | None:
    """POSIX seconds of an optional time field: None when it is absent or empty; a malformed one
    raises ``ValueError`` naming it (:func:`kadmit.engine.timestamps.parse_time` is strict)."""
    if value is None or value == "":
        return None
    return parse_wire_time(value)


def queued_since(wl: Obj) -> float | None:
    """When the Workload last started waiting (Kueue's ``QueuedWaitTime``): the last
    ``Requeued=True`` transition, else its creation."""
    requeued = find_condition(wl, REQUEUED)
    if requeued is not None and requeued.get("status") == "True":
        since = parse_time(requeued.get("lastTransitionTime"))
        if since is not None:
            return since
    return parse_time((wl.get("metadata") or {}).get("creationTimestamp"))


# -- conditions, on a Workload or any object with status.conditions

def find_condition(obj: Obj, kind: str) -> Obj | None:
    """The condition of that type in an object, or in its ``status`` dict.

    Safe on any shape (a webhook reads objects nobody has validated yet): a malformed
    ``status`` or ``conditions`` has no conditions.
    """
    holder = obj["status"] if isinstance(obj.get("status"), dict) else obj
    conditions = holder.get("conditions")
    for condition in conditions if isinstance(conditions, list) else ():
        if isinstance(condition, dict) and condition.get("type") == kind:
            return condition
    return None


def is_true(obj: Obj, kind: str) -> bool:
    condition = find_condition(obj, kind)
    return condition is not None and condition.get("status") == "True"


def set_condition(status: Obj, kind: str, value: str, reason: str, message: str, now: float,
                  *, observed_generation: int | None = None) -> bool:
    """Set one condition; ``lastTransitionTime`` moves only when the status flips.

    ``observed_generation`` (for objects whose conditions say which spec they judged, such as
    AdmissionChecks) is written too, and a change of it alone counts as a change.
    """
    conditions: list[Obj] = status.setdefault("conditions", [])
    for condition in conditions:
        if condition.get("type") != kind:
            continue
        if (condition.get("status"), condition.get("reason"), condition.get("message")) == (
                value, reason, message) and (
                observed_generation is None or condition.get("observedGeneration") == observed_generation):
            return False
        if condition.get("status") != value:
            condition["lastTransitionTime"] = format_time(now)
        condition.update(status=value, reason=reason, message=message)
        if observed_generation is not None:
            condition["observedGeneration"] = observed_generation
        return True
    fresh: Obj = {"type": kind, "status": value, "reason": reason, "message": message,
                  "lastTransitionTime": format_time(now)}
    if observed_generation is not None:
        fresh["observedGeneration"] = observed_generation
    conditions.append(fresh)
    return True


def remove_condition(status: Obj, kind: str) -> bool:
    conditions = status.get("conditions") or []
    kept = [c for c in conditions if c.get("type") != kind]
    if len(kept) == len(conditions):
        return False
    status["conditions"] = kept
    return True


def apply_conditions(status: Obj, conditions: list[Obj], now: float) -> bool:
    """Write conditions an engine decision carries (each a full condition dict)."""
    changed = False
    for condition in conditions:
        changed |= set_condition(status, condition["type"], condition["status"], condition["reason"],
                                 condition["message"], now)
    return changed


def reserve(status: Obj, admission: Obj, conditions: list[Obj], checks: list[str], now: float) -> bool:
    """Write a quota reservation: ``status.admission``, its conditions, and a Pending entry per check."""
    status["admission"] = admission
    apply_conditions(status, conditions, now)
    existing = {c.get("name"): c for c in status.get("admissionChecks") or []}
    status["admissionChecks"] = [
        existing.get(name) or {"name": name, "state": "Pending", "message": "",
                               "lastTransitionTime": format_time(now)}
        for name in sorted(checks)
    ]
    if not status["admissionChecks"]:
        del status["admissionChecks"]
    status.pop("resourceRequests", None)
    return True


def evict(status: Obj, reason: str, message: str, now: float, underlying_cause: str = "") -> bool:
    """Kueue's ``evict.Evict``: Evicted=True, checks back to Pending, the eviction counted.

    The quota is kept until the job has stopped (see :func:`clear_reservation`).
    """
    if is_true(status, EVICTED):
        return False
    set_condition(status, EVICTED, "True", reason, message, now)
    if is_true(status, BLOCKED_ON_PREEMPTION_GATES):
        set_condition(status, BLOCKED_ON_PREEMPTION_GATES, "False", reason, message, now)
    for gate in status.get("preemptionGates") or []:  # Kueue's closeAllPreemptionGates
        gate["position"] = GATE_CLOSED
        gate["lastTransitionTime"] = format_time(now)
    status.pop("clusterName", None)
    status.pop("nominatedClusterNames", None)
    status.pop("unhealthyNodes", None)
    for check in status.get("admissionChecks") or []:
        state = check.get("state")
        if state == "Pending":
            continue
        if state == "Retry":
            check["retryCount"] = int(check.get("retryCount") or 0) + 1
        check["state"] = "Pending"
        check["message"] = f"Reset to Pending after eviction. Previously: {state}"
        check["lastTransitionTime"] = format_time(now)
        check.pop("podSetUpdates", None)
    stats = status.setdefault("schedulingStats", {})
    evictions: list[Obj] = stats.setdefault("evictions", [])
    for entry in evictions:
        if entry.get("reason") == reason and entry.get("underlyingCause", "") == underlying_cause:
            entry["count"] = int(entry.get("count") or 0) + 1
            break
    else:
        evictions.append({"reason": reason, "underlyingCause": underlying_cause, "count": 1})
    return True


BLOCKED_ON_PREEMPTION_GATES = "BlockedOnPreemptionGates"
GATE_OPEN = "Open"
GATE_CLOSED = "Closed"


def sync_preemption_gate_states(spec: Obj, status: Obj, now: float) -> bool:
    """Kueue's ``syncPreemptionGateStates``: ``status.preemptionGates`` holds a state for each
    gate of ``spec.preemptionGates`` (a new one Closed) and no other."""
    names = [str(g.get("name")) for g in spec.get("preemptionGates") or []]
    states = [s for s in status.get("preemptionGates") or [] if s.get("name") in names]
    changed = len(states) != len(status.get("preemptionGates") or [])
    have = {s.get("name") for s in states}
    for name in names:
        if name not in have:
            states.append({"name": name, "position": GATE_CLOSED, "lastTransitionTime": format_time(now)})
            changed = True
    if changed:
        if states:
            status["preemptionGates"] = states
        else:
            status.pop("preemptionGates", None)
    return changed


def gate_state(workload: Obj, name: str) -> Obj | None:
    for state in (workload.get("status") or {}).get("preemptionGates") or []:
        if state.get("name") == name:
            return state  # type: ignore[no-any-return]
    return None


def open_preemption_gate(spec: Obj, status: Obj, name: str, now: float) -> bool:
    """Kueue's ``OpenPreemptionGate`` (a gate of the spec only)."""
    if not any(g.get("name") == name for g in spec.get("preemptionGates") or []):
        return False
    for state in status.setdefault("preemptionGates", []):
        if state.get("name") == name:
            if state.get("position") == GATE_OPEN:
                return False
            state["position"] = GATE_OPEN
            state["lastTransitionTime"] = format_time(now)
            return True
    status["preemptionGates"].append(
        {"name": name, "position": GATE_OPEN, "lastTransitionTime": format_time(now)}
    )
    return True


def clear_reservation(status: Obj, now: float, requeued: bool, reason: str, message: str) -> bool:
    """The evicted job has stopped: give the quota back (QuotaReserved=False, no admission) and say
    whether the workload goes straight back to the queue (``Requeued``)."""
    changed = unset_reservation(status, "PendingEvaluation", message, now)
    changed |= set_condition(status, REQUEUED, "True" if requeued else "False", reason, message, now)
    return changed


def unset_reservation(status: Obj, reason: str, message: str, now: float) -> bool:
    """Kueue's ``UnsetQuotaReservationWithCondition``: QuotaReserved=False with ``reason``, no
    admission, and Admitted=False (its running time added to the accumulated execution time)."""
    changed = status.pop("admission", None) is not None
    changed |= set_condition(status, QUOTA_RESERVED, "False", reason, message, now)
    if is_true(status, ADMITTED):
        admitted = find_condition(status, ADMITTED)
        assert admitted is not None
        since = parse_time(admitted.get("lastTransitionTime"))
        if since is not None:
            past = int(status.get("accumulatedPastExecutionTimeSeconds") or 0)
            status["accumulatedPastExecutionTimeSeconds"] = past + max(int(now - since), 0)
        set_condition(status, ADMITTED, "False", "NoReservation", "The workload has no reservation", now)
        changed = True
    return changed


def is_on_hold(workload: Obj) -> bool:
    """Kueue's ``IsOnHold``: QuotaReserved=False with reason OnHold (kept, never queued)."""
    condition = find_condition(workload, QUOTA_RESERVED)
    return condition is not None and condition.get("status") == "False" and condition.get("reason") == ON_HOLD


def finish(status: Obj, reason: str, message: str, now: float) -> bool:
    return set_condition(status, FINISHED, "True", reason, message, now)


def set_pods_ready(status: Obj, ready: bool, now: float) -> bool:
    """Kueue's PodsReady: Started / WaitForStart before the first readiness, then Recovered /
    WaitForRecovery."""
    previous = find_condition(status, PODS_READY)
    was_ready_once = previous is not None and previous.get("reason") in ("Started", "Recovered",
                                                                          "WaitForRecovery")
    if ready:
        reason, message = (("Recovered", "All pods reached readiness and the workload is running")
                           if previous is not None and previous.get("reason") == "WaitForRecovery"
                           else ("Started", "All pods reached readiness and the workload is running"))
        if previous is not None and previous.get("status") == "True":
            return False
        return set_condition(status, PODS_READY, "True", reason, message, now)
    if was_ready_once:
        return set_condition(status, PODS_READY, "False", "WaitForRecovery",
                             "At least one pod has failed, waiting for recovery", now)
    return set_condition(status, PODS_READY, "False", "WaitForStart",
                         "Not all pods are ready or succeeded", now)


def requeue_after_pods_ready_timeout(status: Obj, now: float, base: int, maximum: int) -> float:
    """``requeueState.count += 1`` and ``requeueAt = now + min(base * 2^(count-1), max)``; returns it."""
    state = status.setdefault("requeueState", {}) or {}
    status["requeueState"] = state
    count = int(state.get("count") or 0) + 1
    state["count"] = count
    requeue_at = pods_ready_requeue_at(now, count, base, maximum)
    previous = parse_time(state.get("requeueAt"))
    if previous is not None and previous > requeue_at:
        requeue_at = previous  # never moved earlier
    state["requeueAt"] = format_time(requeue_at)
    return float(requeue_at)


# -- admission-check states and reservations

def check_states(workload: Obj) -> list[Obj]:
    """``status.admissionChecks`` (the list itself; copy before changing it)."""
    return list((workload.get("status") or {}).get("admissionChecks") or [])


def find_state(workload: Obj, name: str) -> Obj | None:
    """A copy of the workload's entry for the admission check ``name``, if it has one."""
    for entry in check_states(workload):
        if entry.get("name") == name:
            return dict(entry)
    return None


def merge_states(workload: Obj, entries: list[Obj]) -> list[Obj]:
    """``status.admissionChecks`` with ``entries`` merged by name; other checks untouched; sorted by name."""
    by_name = {str(e.get("name")): dict(e) for e in check_states(workload)}
    for entry in entries:
        by_name[str(entry["name"])] = dict(entry)
    return [by_name[name] for name in sorted(by_name)]


def set_queue_name(workload: Obj, queue_name: str) -> bool:
    """Point the Workload at the LocalQueue its job names now (none: the field goes); in place,
    for :func:`kadmit.kube.update`. Whether it changed."""
    spec = workload.setdefault("spec", {})
    if spec.get("queueName", "") == queue_name:
        return False
    if queue_name:
        spec["queueName"] = queue_name
    else:
        spec.pop("queueName", None)
    return True


def is_admitted(workload: Obj) -> bool:
    """Admitted and not being evicted: the only state in which its job may run."""
    return is_true(workload, ADMITTED) and not is_true(workload, EVICTED) and \
        bool((workload.get("status") or {}).get("admission"))


def holds_reservation(workload: Obj) -> bool:
    """Quota reserved, not finished, active and not being evicted: its checks are to be evaluated."""
    return (
        bool((workload.get("status") or {}).get("admission"))
        and is_true(workload, QUOTA_RESERVED)
        and not is_true(workload, FINISHED)
        and not is_true(workload, EVICTED)
        and (workload.get("spec") or {}).get("active", True) is not False
        and not (workload.get("metadata") or {}).get("deletionTimestamp")
    )


def runtime_class_names(workload: Obj) -> set[str]:
    """The RuntimeClasses its pod sets' templates name."""
    names = set()
    for pod_set in (workload.get("spec") or {}).get("podSets") or []:
        name = (((pod_set or {}).get("template") or {}).get("spec") or {}).get("runtimeClassName")
        if name:
            names.add(str(name))
    return names


def is_elastic(obj: Obj) -> bool:
    """The job opted into elastic scaling, or the Workload is an elastic job's slice (Kueue's
    ``workloadslicing.Enabled`` and ``IsElasticWorkload``)."""
    meta = obj.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    return isinstance(annotations, dict) and annotations.get(ELASTIC_JOB_ANNOTATION) == "true"


def pod_set_counts(workload: Obj) -> dict[str, int]:
    """Pod set name → count (Kueue's ``ExtractPodSetCountsFromWorkload``)."""
    return {
        str(p.get("name")): int(p.get("count", 1)) for p in (workload.get("spec") or {}).get("podSets") or []
    }


def scaled_down(have: Mapping[str, int], want: Mapping[str, int]) -> bool:
    """Kueue's ``workloadslicing.ScaledDown``: fewer pods in some pod set and more in none."""
    return any(want.get(n, c) < c for n, c in have.items()) and not any(
        want.get(n, c) > c for n, c in have.items())


MAX_NAME_PREFIX = 253 - 1 - 5


def workload_name(kind: str, group: str, job_name: str, job_uid: str, extra: str = "") -> str:
    """Kueue's ``GetWorkloadNameForOwnerWithGVK``: ``job-name-ef3a1`` for Job ``name`` with UID ``uid``;
    with ``extra`` (an elastic job's generation), ``GenerateWorkloadNameWithExtra``."""
    prefix = f"{kind.lower()}-{job_name}"[:MAX_NAME_PREFIX]
    hashed = f"{kind}\n{group}\n{job_name}\n{job_uid}".encode()
    if extra:
        hashed += f"\n{extra}".encode()
    digest = hashlib.sha1(hashed, usedforsecurity=False).hexdigest()
    return f"{prefix}-{digest[:5]}"


def job_workload_name(kind: str, group: str, job: Obj) -> str:
    """The name of the Workload ``job`` (of ``kind`` in API ``group``) has now: an elastic job's
    slices are named after its generation (Kueue's ``newWorkloadName``), so each size has its own."""
    meta = job["metadata"]
    extra = str(meta.get("generation") or "") if is_elastic(job) else ""
    return workload_name(kind, group, str(meta["name"]), str(meta.get("uid", "")), extra)


def ray_worker_count(group: Obj) -> int:
    """Kueue's ``effectiveWorkerCount``: a Ray worker group's pods, ``replicas`` (default 1) times
    ``numOfHosts`` above 1 (anything but an integer counts as unset)."""

    def number(value: Any) -> int:
        return value if isinstance(value, int) and not isinstance(value, bool) else 1

    count, hosts = number(group.get("replicas")), number(group.get("numOfHosts"))
    return count * hosts if hosts > 1 else count


def cluster_queue_of(workload: Obj) -> str | None:
    """The ClusterQueue the workload's admission (its quota reservation) is in, if it has one."""
    value = ((workload.get("status") or {}).get("admission") or {}).get("clusterQueue")
    return str(value) if value else None


def assigned_flavors(workload: Obj) -> set[str]:
    admission = (workload.get("status") or {}).get("admission") or {}
    flavors: set[str] = set()
    for assignment in admission.get("podSetAssignments") or []:
        flavors.update(str(f) for f in (assignment.get("flavors") or {}).values())
    return flavors


def check_rules(cluster_queue: Obj) -> list[AdmissionCheckRule]:
    """The ClusterQueue's ``admissionChecksStrategy.admissionChecks`` as rules."""
    strategy = (cluster_queue.get("spec") or {}).get("admissionChecksStrategy") or {}
    return [
        AdmissionCheckRule(name=str(entry["name"]), on_flavors=frozenset(entry.get("onFlavors") or ()))
        for entry in strategy.get("admissionChecks") or []
        if entry.get("name")
    ]


def applicable_checks(workload: Obj, cluster_queue: Obj) -> list[str]:
    """Kueue's ``AdmissionChecksForWorkload`` for a workload with an admission: sorted names.

    A check without ``onFlavors`` applies to every workload of the ClusterQueue; one with
    ``onFlavors`` to those assigned at least one of the listed flavors.
    """
    flavors = assigned_flavors(workload)
    return sorted({rule.name for rule in check_rules(cluster_queue) if rule.applies_to(flavors)})
