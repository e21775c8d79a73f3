"""Pure rules: which checks a workload has, whether they are to be evaluated, and the new state entry.

No I/O and no clock (time is an argument), so every rule of Kueue's external admission-check
contract (kueue-contract.md §3) is unit-tested here on plain dicts.
"""

from __future__ import annotations

import copy
import math
from datetime import UTC, datetime
from typing import Any

from kadmit.checks.verdict import PENDING, READY, REJECTED, RETRY, Pending, Ready, Retry, Verdict
from kadmit.engine.model import AdmissionCheckRule

Obj = dict[str, Any]

MAX_MESSAGE = 32768
ACTIVE = "Active"


def condition(obj: Obj, kind: str) -> Obj | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return dict(cond)
    return None


def condition_true(obj: Obj, kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or [])


def holds_reservation(workload: Obj) -> bool:
    """Quota reserved, not finished, active and not being evicted: its checks are to be evaluated."""
    return (
        bool((workload.get("status") or {}).get("admission"))
        and condition_true(workload, "QuotaReserved")
        and not condition_true(workload, "Finished")
        and not condition_true(workload, "Evicted")
        and (workload.get("spec") or {}).get("active", True) is not False
        and not (workload.get("metadata") or {}).get("deletionTimestamp")
    )


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


def check_states(workload: Obj) -> list[Obj]:
    return list((workload.get("status") or {}).get("admissionChecks") or [])


def find_state(workload: Obj, name: str) -> Obj | None:
    for entry in check_states(workload):
        if entry.get("name") == name:
            return dict(entry)
    return None


def should_evaluate(current: Obj | None, reevaluate_ready: bool) -> bool:
    """Rejected is final (Kueue deactivates); Ready is final unless the plugin watches it after admission."""
    state = (current or {}).get("state") or PENDING
    if state == REJECTED:
        return False
    return not (state == READY and not reevaluate_ready)


def new_state(name: str, current: Obj | None, verdict: Verdict, now: datetime) -> Obj:
    """The ``AdmissionCheckState`` entry after ``verdict``, keeping what Kueue owns (retryCount).

    ``lastTransitionTime`` moves only when the state changes; ``requeueAfterSeconds`` is set by
    a Retry (whole seconds, rounded up; absent means at once) and otherwise kept, as Kueue
    keeps it through eviction.
    """
    entry: Obj = {"name": name}
    previous = current or {}
    entry["state"] = verdict.state
    if previous.get("state") == verdict.state and previous.get("lastTransitionTime"):
        entry["lastTransitionTime"] = previous["lastTransitionTime"]
    else:
        entry["lastTransitionTime"] = to_rfc3339(now)
    entry["message"] = verdict.message[:MAX_MESSAGE]
    if previous.get("retryCount") is not None:
        entry["retryCount"] = previous["retryCount"]
    if isinstance(verdict, Retry):
        if verdict.after is not None:
            entry["requeueAfterSeconds"] = math.ceil(verdict.after)
    elif previous.get("requeueAfterSeconds") is not None:
        entry["requeueAfterSeconds"] = previous["requeueAfterSeconds"]
    if isinstance(verdict, (Ready, Pending)) and verdict.pod_set_updates:
        entry["podSetUpdates"] = [update.to_api() for update in verdict.pod_set_updates]
    elif previous.get("state") == READY and verdict.state == READY and previous.get("podSetUpdates"):
        # The webhook makes a Ready check's podSetUpdates immutable: keep what was written.
        entry["podSetUpdates"] = copy.deepcopy(previous["podSetUpdates"])
    return entry


def same_entry(a: Obj | None, b: Obj | None) -> bool:
    return (a or None) == (b or None)


def merge_states(workload: Obj, entries: list[Obj]) -> list[Obj]:
    """``status.admissionChecks`` with ``entries`` merged by name; other checks untouched; sorted by name."""
    by_name = {str(e.get("name")): copy.deepcopy(e) for e in check_states(workload)}
    for entry in entries:
        by_name[str(entry["name"])] = copy.deepcopy(entry)
    return [by_name[name] for name in sorted(by_name)]


def set_condition(obj: Obj, cond: Obj, now: datetime) -> bool:
    """Set ``cond`` in ``obj.status.conditions`` (moving lastTransitionTime on a status change).

    Returns False when nothing changed.
    """
    status = obj.setdefault("status", {})
    conditions: list[Obj] = status.setdefault("conditions", [])
    generation = (obj.get("metadata") or {}).get("generation")
    for i, existing in enumerate(conditions):
        if existing.get("type") != cond["type"]:
            continue
        if (
            existing.get("status") == cond["status"]
            and existing.get("reason") == cond["reason"]
            and existing.get("message") == cond["message"]
            and (generation is None or existing.get("observedGeneration") == generation)
        ):
            return False
        updated = dict(existing, **cond)
        if existing.get("status") != cond["status"]:
            updated["lastTransitionTime"] = to_rfc3339(now)
        if generation is not None:
            updated["observedGeneration"] = generation
        conditions[i] = updated
        return True
    fresh = dict(cond, lastTransitionTime=to_rfc3339(now))
    if generation is not None:
        fresh["observedGeneration"] = generation
    conditions.append(fresh)
    return True


def to_rfc3339(moment: datetime) -> str:
    """Kubernetes' ``metav1.Time``: UTC to the second, ``Z`` suffix (naive datetimes are taken as UTC)."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


__all__ = [
    "ACTIVE",
    "PENDING",
    "READY",
    "REJECTED",
    "RETRY",
    "applicable_checks",
    "holds_reservation",
    "merge_states",
    "new_state",
    "set_condition",
    "should_evaluate",
]
