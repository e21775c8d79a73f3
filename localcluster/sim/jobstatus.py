"""What the Job controller should do for one Job, given the Pods it owns: a pure function.

It mirrors the decisions of Kubernetes' Job controller (``pkg/controller/job``): how many
Pods to start, which to delete, and the status and conditions it writes. Keeping it free of
I/O lets the rules be tested one by one; the controller only carries the plan out.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import datetime

from ..conditions import is_true, set_condition
from ..objects import Obj
from ..timestamps import format_time, parse_time

COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
JOB_CONTROLLER = "kubernetes.io/job-controller"
DEFAULT_BACKOFF_LIMIT = 6
TERMINAL_PHASES = ("Succeeded", "Failed")


@dataclass
class JobPlan:
    """The status to write, the Pods to create (by completion index, None when not Indexed) and delete."""

    status: Obj
    create: list[int | None] = field(default_factory=list)
    delete: list[Obj] = field(default_factory=list)
    recheck_after: float | None = None  # seconds until a deadline needs another look


def is_managed_by_job_controller(job: Obj) -> bool:
    """The real controller skips Jobs whose ``spec.managedBy`` names another controller."""
    managed_by = (job.get("spec") or {}).get("managedBy")
    return managed_by in (None, "", JOB_CONTROLLER)


def is_finished(job: Obj) -> bool:
    status = job.get("status") or {}
    return is_true(status, "Complete") or is_true(status, "Failed")


def pod_index(pod: Obj) -> int | None:
    raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(COMPLETION_INDEX)
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def is_ready(pod: Obj) -> bool:
    return is_true(pod.get("status") or {}, "Ready")


def is_active(pod: Obj) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return phase not in TERMINAL_PHASES and not (pod.get("metadata") or {}).get("deletionTimestamp")


def compress_indexes(indexes: set[int]) -> str:
    """``{0,1,2,4}`` → ``"0-2,4"``, the format of ``status.completedIndexes``."""
    parts: list[str] = []
    ordered = sorted(indexes)
    start = previous = None
    for index in [*ordered, None]:
        if index is not None and previous is not None and index == previous + 1:
            previous = index
            continue
        if start is not None and previous is not None:
            parts.append(str(start) if start == previous else f"{start}-{previous}")
        start = previous = index
    return ",".join(parts)


def _creation_order(pod: Obj) -> tuple[str, str]:
    metadata = pod.get("metadata") or {}
    return str(metadata.get("creationTimestamp") or ""), str(metadata.get("name") or "")


def plan(job: Obj, pods: list[Obj], now: datetime) -> JobPlan:
    """Decide one reconcile of ``job`` whose (non-deleted) owned Pods are ``pods``."""
    spec = job.get("spec") or {}
    status = copy.deepcopy(job.get("status") or {})
    stamp = format_time(now)
    indexed = spec.get("completionMode") == "Indexed"
    parallelism = int(spec.get("parallelism", 1))
    completions = spec.get("completions")
    backoff_limit = int(spec.get("backoffLimit", DEFAULT_BACKOFF_LIMIT))

    active = sorted((p for p in pods if is_active(p)), key=_creation_order)
    succeeded_pods = [p for p in pods if (p.get("status") or {}).get("phase") == "Succeeded"]
    failed = sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Failed")
    succeeded_indexes: set[int] = set()
    if indexed:
        limit = int(completions or 0)
        succeeded_indexes = {i for p in succeeded_pods if (i := pod_index(p)) is not None and 0 <= i < limit}
        succeeded = len(succeeded_indexes)
    else:
        succeeded = len(succeeded_pods)

    result = JobPlan(status=status)
    status["succeeded"] = succeeded
    status["failed"] = failed
    if indexed:
        status["completedIndexes"] = compress_indexes(succeeded_indexes)

    def finish_with(active_pods: list[Obj]) -> JobPlan:
        result.delete = active_pods
        status["active"] = 0
        status["ready"] = 0
        status["terminating"] = 0
        _drop_zero_counts(status)
        return result

    def note(kind: str, value: str, reason: str, message: str) -> None:
        set_condition(status, kind, value, reason, message, stamp, probed=True)

    if is_finished(job):
        return finish_with(active)

    if spec.get("suspend"):
        status.pop("startTime", None)
        if not is_true(status, "Suspended"):
            note("Suspended", "True", "JobSuspended", "Job suspended")
        return finish_with(active)

    if is_true(status, "Suspended"):
        note("Suspended", "False", "JobResumed", "Job resumed")
    status.setdefault("startTime", stamp)

    if failed > backoff_limit:
        message = "Job has reached the specified backoff limit"
        note("FailureTarget", "True", "BackoffLimitExceeded", message)
        note("Failed", "True", "BackoffLimitExceeded", message)
        return finish_with(active)

    deadline = spec.get("activeDeadlineSeconds")
    if deadline is not None:
        remaining = float(deadline) - (now - parse_time(status["startTime"])).total_seconds()
        if remaining <= 0:
            message = "Job was active longer than specified deadline"
            note("FailureTarget", "True", "DeadlineExceeded", message)
            note("Failed", "True", "DeadlineExceeded", message)
            return finish_with(active)
        result.recheck_after = remaining

    if indexed:
        complete = succeeded >= int(completions or 0)
    elif completions is not None:
        complete = succeeded >= int(completions)
    else:
        complete = succeeded > 0 and not active

    if complete:
        message = "Reached expected number of succeeded pods"
        note("SuccessCriteriaMet", "True", "CompletionsReached", message)
        note("Complete", "True", "CompletionsReached", message)
        status["completionTime"] = stamp
        result.recheck_after = None
        return finish_with(active)

    if indexed:
        active_indexes: set[int] = set()
        keep: list[Obj] = []
        for pod in active:
            index = pod_index(pod)
            if index is None or index in active_indexes or index in succeeded_indexes:
                result.delete.append(pod)  # a duplicate, or an index that is already done
            else:
                active_indexes.add(index)
                keep.append(pod)
        active = keep
        if len(active) > parallelism:
            result.delete.extend(active[parallelism:])
            active = active[:parallelism]
        done_or_running = succeeded_indexes | active_indexes
        missing = [i for i in range(int(completions or 0)) if i not in done_or_running]
        result.create = list(missing[: max(0, parallelism - len(active))])
    else:
        if completions is not None:
            wanted = min(parallelism, int(completions) - succeeded)
        else:
            wanted = parallelism if succeeded == 0 else len(active)
        if len(active) > wanted:
            result.delete.extend(active[wanted:])
            active = active[:wanted]
        result.create = [None] * max(0, wanted - len(active))

    status["active"] = len(active)
    status["ready"] = sum(1 for p in active if is_ready(p))
    status["terminating"] = 0
    _drop_zero_counts(status)
    return result


def _drop_zero_counts(status: Obj) -> None:
    """The API omits zero counters (``omitempty``) except ``ready`` and ``terminating``."""
    for name in ("active", "succeeded", "failed"):
        if not status.get(name):
            status.pop(name, None)
    if status.get("completedIndexes") == "":
        status.pop("completedIndexes")
