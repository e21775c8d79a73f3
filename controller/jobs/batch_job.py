"""A batch/v1 Job's Workload without a cluster, for ``kadmit simulate``.

It builds nothing itself: the Workload comes from :func:`construct_workload` and the priority
from :func:`resolve_priority`, the very code the job reconciler runs, so a simulated Workload is
the one kadmit would write for the same Job. What is added here is only what the cluster would
have done first: the API server's defaults, Kueue's Job webhook checks, and priority classes
looked up in maps instead of informers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kadmit.controller.jobs.construct import PriorityClassNotFound, construct_workload, resolve_priority
from kadmit.controller.jobs.job_defaults import default_job
from kadmit.controller.jobs.job_integration import BatchJobIntegration
from kadmit.kube import Obj, copy_object
from kadmit.webhook.fielderrors import aggregate
from kadmit.webhook.jobs import validate_job_create

INTEGRATION = BatchJobIntegration()


class JobConversionError(ValueError):
    """A Job that Kueue would not turn into a Workload (the message says why)."""


def stored_job(job: Mapping[str, Any]) -> Obj:
    """A copy of ``job`` as the API server keeps it (defaults filled), which is what the reconciler reads."""
    meta = job.get("metadata")
    if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str) or not meta["name"]:
        raise JobConversionError("metadata.name: Required value")
    spec = job.get("spec")
    if not isinstance(spec, Mapping):
        raise JobConversionError("spec: must be an object")
    if not isinstance(spec.get("template") or {}, Mapping):
        raise JobConversionError("spec.template: must be an object")
    for field in ("parallelism", "completions"):
        value = spec.get(field)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            raise JobConversionError(f"spec.{field}: must be a non-negative integer, not {value!r}")
    result = copy_object(dict(job))
    result["metadata"].setdefault("namespace", "default")
    result["spec"].setdefault("template", {})
    default_job(result)
    return result


def workload_for_job(
    job: Mapping[str, Any],
    workload_priority_classes: Mapping[str, int] | None = None,
    priority_classes: Sequence[Mapping[str, Any]] = (),
) -> Obj:
    """The ``kueue.x-k8s.io/v1beta2`` Workload kadmit creates for ``job`` (which must have a name).

    ``workload_priority_classes`` maps WorkloadPriorityClass names to values and
    ``priority_classes`` holds scheduling.k8s.io PriorityClass objects; a Job naming a class that
    is missing is an error, as in Kueue (no Workload until it exists).
    """
    stored = stored_job(job)
    errors = validate_job_create(stored)
    if errors:
        raise JobConversionError(aggregate(errors))
    wpcs = workload_priority_classes or {}
    pcs = {str((pc.get("metadata") or {}).get("name")): dict(pc) for pc in priority_classes}
    try:
        priority = resolve_priority(
            stored,
            INTEGRATION.pod_sets(stored),
            lambda name: {"value": wpcs[name]} if name in wpcs else None,
            pcs.get,
            lambda: list(pcs.values()),
        )
    except PriorityClassNotFound as exc:
        raise JobConversionError(str(exc)) from None
    return construct_workload(INTEGRATION, stored, priority)
