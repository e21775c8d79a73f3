"""Pure rules of a check's verdict: whether a check is to be evaluated, and its new state entry.

No I/O and no clock (time is an argument, POSIX seconds), so every rule of Kueue's external
admission-check contract (kueue-contract.md §3) is unit-tested here on plain dicts. What a
Workload's checks are and which apply is the Workload vocabulary's (:mod:`kadmit.workload`).
"""

from __future__ import annotations

import copy
import math

from kadmit.checks.verdict import Pending, Ready, Retry, Verdict
from kadmit.kube import Obj
from kadmit.workload import MAX_CHECK_MESSAGE, PENDING, READY, REJECTED, format_time


def should_evaluate(current: Obj | None, reevaluate_ready: bool) -> bool:
    """Rejected is final (Kueue deactivates); Ready is final unless the plugin watches it after admission."""
    state = (current or {}).get("state") or PENDING
    if state == REJECTED:
        return False
    return not (state == READY and not reevaluate_ready)


def new_state(name: str, current: Obj | None, verdict: Verdict, now: float) -> Obj:
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
        entry["lastTransitionTime"] = format_time(now)
    entry["message"] = verdict.message[:MAX_CHECK_MESSAGE]
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


__all__ = ["new_state", "same_entry", "should_evaluate"]
