"""The Workload status transitions kadmit writes, as pure functions on a status dict.

Each function takes a Workload's ``status`` (a copy the caller owns) and the time, changes it in
place the way Kueue would (contract §2), and returns whether anything changed, so the caller
writes only real changes. Conditions keep their ``lastTransitionTime`` unless their status flips.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kadmit.engine.backoff import pods_ready_requeue_at

Obj = dict[str, Any]

QUOTA_RESERVED = "QuotaReserved"
ADMITTED = "Admitted"
EVICTED = "Evicted"
PREEMPTED = "Preempted"
REQUEUED = "Requeued"
PODS_READY = "PodsReady"
FINISHED = "Finished"
DEACTIVATION_TARGET = "DeactivationTarget"


def rfc3339(when: float) -> str:
    return datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: Any) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def find_condition(obj: Obj, kind: str) -> Obj | None:
    """The condition of that type in a Workload, or in its ``status`` dict."""
    holder = obj["status"] if isinstance(obj.get("status"), dict) else obj
    for condition in holder.get("conditions") or []:
        if condition.get("type") == kind:
            return condition  # type: ignore[no-any-return]
    return None


def is_true(obj: Obj, kind: str) -> bool:
    condition = find_condition(obj, kind)
    return condition is not None and condition.get("status") == "True"


def set_condition(status: Obj, kind: str, value: str, reason: str, message: str, now: float) -> bool:
    """Set one condition; ``lastTransitionTime`` moves only when the status flips."""
    conditions: list[Obj] = status.setdefault("conditions", [])
    for condition in conditions:
        if condition.get("type") != kind:
            continue
        if (condition.get("status"), condition.get("reason"), condition.get("message")) == (
                value, reason, message):
            return False
        if condition.get("status") != value:
            condition["lastTransitionTime"] = rfc3339(now)
        condition.update(status=value, reason=reason, message=message)
        return True
    conditions.append({"type": kind, "status": value, "reason": reason, "message": message,
                       "lastTransitionTime": rfc3339(now)})
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
                               "lastTransitionTime": rfc3339(now)}
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
        check["lastTransitionTime"] = rfc3339(now)
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


def clear_reservation(status: Obj, now: float, requeued: bool, reason: str, message: str) -> bool:
    """The evicted job has stopped: give the quota back (QuotaReserved=False, no admission) and say
    whether the workload goes straight back to the queue (``Requeued``)."""
    changed = status.pop("admission", None) is not None
    changed |= set_condition(status, QUOTA_RESERVED, "False", "PendingEvaluation", message, now)
    if is_true(status, ADMITTED):
        admitted = find_condition(status, ADMITTED)
        assert admitted is not None
        since = parse_time(admitted.get("lastTransitionTime"))
        if since is not None:
            past = int(status.get("accumulatedPastExecutionTimeSeconds") or 0)
            status["accumulatedPastExecutionTimeSeconds"] = past + max(int(now - since), 0)
        set_condition(status, ADMITTED, "False", "NoReservation", "The workload has no reservation", now)
        changed = True
    changed |= set_condition(status, REQUEUED, "True" if requeued else "False", reason, message, now)
    return changed


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
    state["requeueAt"] = rfc3339(requeue_at)
    return float(requeue_at)
