"""What MultiKueue writes on a worker: the copies of a Workload and of its Job (kueue-contract.md §7).

Pure functions on dicts, so that what a worker receives can be read (and tested) apart from
the I/O that sends it.
"""

from __future__ import annotations

import math

from kadmit.engine.parse import SLICE_REPLACEMENT_FOR
from kadmit.engine.slices import REPLACED_REASON
from kadmit.kube import Obj, copy_object
from kadmit.workload import (
    FINISHED,
    find_condition,
    is_elastic,
    is_true,
    parse_time,
    pod_set_counts,
    scaled_down,
)

CONTROLLER_NAME = "kueue.x-k8s.io/multikueue"
ORIGIN_LABEL = "kueue.x-k8s.io/multikueue-origin"
PREBUILT_WORKLOAD = "kueue.x-k8s.io/prebuilt-workload-name"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
JOB_CONTROLLER_LABELS = (
    "controller-uid",
    "job-name",
    "batch.kubernetes.io/controller-uid",
    "batch.kubernetes.io/job-name",
)
MAX_LABEL_VALUE = 63


def remote_workload(local: Obj, origin: str) -> Obj:
    """The clone a worker's Kueue queues: same name and spec, no status, no owner, our origin label."""
    meta = local["metadata"]
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k != JOB_UID_LABEL}
    labels[ORIGIN_LABEL] = origin
    out_meta: Obj = {"name": meta["name"], "namespace": meta["namespace"], "labels": labels}
    if meta.get("annotations"):
        out_meta["annotations"] = dict(meta["annotations"])
    return {
        "apiVersion": local.get("apiVersion", "kueue.x-k8s.io/v1beta2"),
        "kind": "Workload",
        "metadata": out_meta,
        "spec": copy_object(local.get("spec") or {}),
    }


def set_multikueue_meta(obj: Obj, workload_name: str, origin: str) -> Obj:
    """Kueue's ``SetMultiKueueMeta`` on ``obj`` (in place, returned): our origin label and the
    prebuilt Workload's name."""
    meta = obj.setdefault("metadata", {})
    labels = meta["labels"] = dict(meta.get("labels") or {})
    labels[ORIGIN_LABEL] = origin
    return set_prebuilt_workload(obj, workload_name)


def set_prebuilt_workload(obj: Obj, workload_name: str) -> Obj:
    """The prebuilt Workload's name on ``obj`` (in place, returned), which tells the worker's Kueue
    to use the Workload already there: an annotation, as with WorkloadIdentifierAnnotations on;
    also a label when the name fits one (a longer name drops a label left from an earlier one)."""
    meta = obj.setdefault("metadata", {})
    labels = meta["labels"] = dict(meta.get("labels") or {})
    annotations = meta["annotations"] = dict(meta.get("annotations") or {})
    annotations[PREBUILT_WORKLOAD] = workload_name
    if len(workload_name) <= MAX_LABEL_VALUE:
        labels[PREBUILT_WORKLOAD] = workload_name
    else:
        labels.pop(PREBUILT_WORKLOAD, None)
    return obj


def remote_job(local_job: Obj, workload_name: str, origin: str) -> Obj:
    """The Job a worker runs: managedBy and selector cleared, job-controller labels dropped."""
    meta = local_job["metadata"]
    spec = copy_object(local_job.get("spec") or {})
    spec.pop("selector", None)
    spec.pop("managedBy", None)
    template_meta = (spec.get("template") or {}).get("metadata") or {}
    template_labels = template_meta.get("labels")
    if isinstance(template_labels, dict):
        for key in JOB_CONTROLLER_LABELS:
            template_labels.pop(key, None)
    job: Obj = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": meta["name"], "namespace": meta["namespace"],
                     "labels": dict(meta.get("labels") or {}),
                     "annotations": dict(meta.get("annotations") or {})},
        "spec": spec,
    }
    return set_multikueue_meta(job, workload_name, origin)


def local_workload_of(obj: Obj) -> str | None:
    """The manager Workload a remote object belongs to (its prebuilt-workload-name)."""
    meta = obj.get("metadata") or {}
    name = (meta.get("annotations") or {}).get(PREBUILT_WORKLOAD) or (meta.get("labels") or {}).get(
        PREBUILT_WORKLOAD)
    return str(name) if name else None


def same_spec(local: Obj, remote: Obj) -> bool:
    """Whether the remote copy still describes the local Workload (preemption gates aside)."""
    def comparable(wl: Obj) -> Obj:  # compared, never changed: no copy of the pod templates
        return {key: value for key, value in (wl.get("spec") or {}).items() if key != "preemptionGates"}
    return comparable(local) == comparable(remote)


def admitted_at(wl: Obj) -> float | None:
    """When the Workload became Admitted (POSIX seconds; an undated admission counts as last), or None."""
    cond = find_condition(wl, "Admitted")
    if cond is None or cond.get("status") != "True":
        return None
    when = parse_time(cond.get("lastTransitionTime"))
    return math.inf if when is None else when


def job_finished(job: Obj) -> bool:
    return any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
               for c in (job.get("status") or {}).get("conditions") or [])


def job_suspended(job: Obj) -> bool:
    return bool((job.get("spec") or {}).get("suspend"))


# -- elastic jobs (ElasticJobsViaWorkloadSlices): a slice's copies on the worker that runs the job


def replaced_slice(wl: Obj) -> tuple[str, str] | None:
    """The (namespace, name) of the slice an elastic Workload replaces (a scale-up), or None."""
    value = ((wl.get("metadata") or {}).get("annotations") or {}).get(SLICE_REPLACEMENT_FOR)
    if not value or not is_elastic(wl):
        return None
    namespace, _, name = str(value).partition("/")
    return (namespace, name) if name else None


def leaves_copies_alone(wl: Obj) -> bool:
    """Kueue's first step for an elastic Workload: one finished because a new slice replaced it has
    its copies on the worker left as they are, as the job runs on under the new slice. (Kueue also
    skips a new slice without quota, the scale-up under way: kadmit's runner releases no Workload
    that never held quota, and one that lost it, evicted, stops its job as any other does.)"""
    if not is_elastic(wl) or not is_true(wl, FINISHED):
        return False
    return (find_condition(wl, FINISHED) or {}).get("reason") == REPLACED_REASON


def scaled_down_copy(local: Obj, remote: Obj) -> Obj | None:
    """A merge patch giving the worker's copy the local spec when an elastic Workload was scaled
    down in place (Kueue's step 5: such a copy is updated, any other stale copy is deleted), or
    None. The copy's preemption gates are the worker's own and stay."""
    if not is_elastic(local) or not scaled_down(pod_set_counts(remote), pod_set_counts(local)):
        return None
    spec = copy_object({k: v for k, v in (local.get("spec") or {}).items() if k != "preemptionGates"})
    for key in (remote.get("spec") or {}):
        if key not in spec and key != "preemptionGates":
            spec[key] = None
    return {"spec": spec}
