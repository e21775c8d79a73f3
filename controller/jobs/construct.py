"""A job's Workload as Kueue builds it (``ConstructWorkload``): name, owner, labels, pod sets, priority.

The name is Kueue's, ``<kind>-<job>-<hash5>``, so a Workload created by Kueue and one created by
kadmit for the same Job are the same object, and a switch between the two keeps admissions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kadmit.controller.jobs.integration import JobIntegration
from kadmit.controller.jobs.podtemplate import valid_label_value
from kadmit.kube import Obj
from kadmit.workload import MAX_NAME_PREFIX, job_workload_name
from kadmit.workload import is_elastic as is_elastic
from kadmit.workload import workload_name as workload_name

KUEUE = "kueue.x-k8s.io"
FINALIZER = "kueue.x-k8s.io/resource-in-use"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
MAX_EXEC_TIME_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"
PROVREQ_PREFIX = "provreq.kueue.x-k8s.io/"
MAX_PREFIX_LENGTH = MAX_NAME_PREFIX


@dataclass(frozen=True)
class Priority:
    """Where a Workload's priority comes from (``spec.priorityClassRef``) and its value."""

    value: int
    group: str | None = None  # kueue.x-k8s.io | scheduling.k8s.io | None
    kind: str | None = None
    name: str | None = None


class PriorityClassNotFound(LookupError):
    """The job names a WorkloadPriorityClass that does not exist: no Workload until it does."""


def resolve_priority(
    job: Obj,
    pod_sets: Sequence[Obj],
    workload_priority_class: Callable[[str], Obj | None],
    priority_class: Callable[[str], Obj | None],
    priority_classes: Callable[[], list[Obj]],
    priority_class_name: str | None = None,
) -> Priority:
    """Kueue's ``ExtractPriority``: the job's WorkloadPriorityClass label, else the job's own
    PriorityClass (``priority_class_name``, for kinds that name it elsewhere, Kueue's
    ``JobWithPriorityClass``; by default the first pod set's), else the global default
    PriorityClass, else 0."""
    labels = job.get("metadata", {}).get("labels") or {}
    wpc_name = labels.get(PRIORITY_CLASS_LABEL)
    if wpc_name:
        wpc = workload_priority_class(wpc_name)
        if wpc is None:
            raise PriorityClassNotFound(f"WorkloadPriorityClass {wpc_name} not found")
        return Priority(int(wpc.get("value", 0)), KUEUE, "WorkloadPriorityClass", wpc_name)
    pc_name = priority_class_name
    if pc_name is None and pod_sets:
        pc_name = ((pod_sets[0].get("template") or {}).get("spec") or {}).get("priorityClassName")
    if pc_name:
        pc = priority_class(pc_name)
        if pc is None:
            raise PriorityClassNotFound(f"PriorityClass {pc_name} not found")
        return Priority(int(pc.get("value", 0)), "scheduling.k8s.io", "PriorityClass", pc_name)
    defaults = [pc for pc in priority_classes() if pc.get("globalDefault")]
    if defaults:
        pc = min(defaults, key=lambda p: int(p.get("value", 0)))
        return Priority(int(pc.get("value", 0)), "scheduling.k8s.io", "PriorityClass", pc["metadata"]["name"])
    return Priority(0)


def construct_workload(
    integration: JobIntegration, job: Obj, priority: Priority, label_keys_to_copy: Sequence[str] = ()
) -> Obj:
    """The Workload for ``job``; ``priority`` comes from :func:`resolve_priority`."""
    meta = job["metadata"]
    uid = str(meta.get("uid", ""))
    workload = construct_workload_for(
        name=job_workload_name(integration.kind, integration.group, job),
        namespace=meta.get("namespace"),
        job=job,
        pod_sets=integration.pod_sets(job),
        queue_name=integration.queue_name(job),
        priority=priority,
        owner_references=[owner_reference(integration, job)],
        label_keys_to_copy=label_keys_to_copy,
    )
    if uid and valid_label_value(uid):
        workload["metadata"]["labels"] = {JOB_UID_LABEL: uid, **workload["metadata"]["labels"]}
    return workload


def construct_workload_for(
    *,
    name: str,
    namespace: str | None,
    job: Obj,
    pod_sets: list[Obj],
    queue_name: str,
    priority: Priority,
    owner_references: list[Obj],
    label_keys_to_copy: Sequence[str] = (),
) -> Obj:
    """A Workload named ``name`` for the object ``job`` whose labels and annotations it reads (the
    copied labels, the provisioning annotations, the maximum execution time), with these pod sets
    and owners (Kueue's ``NewWorkload``)."""
    meta = job["metadata"]
    job_labels = meta.get("labels") or {}
    labels = {key: job_labels[key] for key in label_keys_to_copy if key in job_labels}
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k.startswith(PROVREQ_PREFIX)}
    spec: Obj = {"podSets": pod_sets}
    if queue_name:  # omitted, not "", when the job names no queue (the CRD rejects "")
        spec["queueName"] = queue_name
    max_exec = job_labels.get(MAX_EXEC_TIME_LABEL)
    if max_exec and max_exec.isdigit() and int(max_exec) > 0:
        spec["maximumExecutionTimeSeconds"] = int(max_exec)
    if priority.name:
        spec["priorityClassRef"] = {"group": priority.group, "kind": priority.kind, "name": priority.name}
        spec["priority"] = priority.value
    workload_meta: Obj = {
        "name": name,
        "namespace": namespace,
        "labels": labels,
        "finalizers": [FINALIZER],
        "ownerReferences": owner_references,
    }
    if annotations:
        workload_meta["annotations"] = annotations
    return {"apiVersion": f"{KUEUE}/v1beta2", "kind": "Workload", "metadata": workload_meta, "spec": spec}


def owner_reference(integration: JobIntegration, job: Obj) -> Obj:
    return {"apiVersion": integration.api_version, "kind": integration.kind, "name": job["metadata"]["name"],
            "uid": job["metadata"].get("uid", ""), "controller": True, "blockOwnerDeletion": True}


def equivalent(workload: Obj, expected: Obj) -> bool:
    """Whether an existing Workload still matches the job (Kueue's ``EquivalentToWorkload``): the same
    pod sets (names, counts or the admitted counts, minCount, template) and maximum execution time."""
    spec = workload.get("spec") or {}
    want = expected.get("spec") or {}
    if spec.get("maximumExecutionTimeSeconds") != want.get("maximumExecutionTimeSeconds"):
        return False
    have_sets = spec.get("podSets") or []
    want_sets = want.get("podSets") or []
    if len(have_sets) != len(want_sets):
        return False
    # A partially admitted job runs with its admitted count, not its original one.
    assignments = ((workload.get("status") or {}).get("admission") or {}).get("podSetAssignments") or []
    admitted = {a.get("name"): a.get("count") for a in assignments}
    for have, wanted in zip(have_sets, want_sets, strict=True):
        count = int(wanted.get("count", 1))
        if have.get("name") != wanted.get("name"):
            return False
        if count != int(have.get("count", 1)) and count != admitted.get(have.get("name")):
            return False
        if have.get("minCount") != wanted.get("minCount"):
            return False
        if not _same_template(have.get("template") or {}, wanted.get("template") or {}):
            return False
    return True


def _same_template(have: Obj, want: Obj) -> bool:
    # The API server defaults fields of the stored copy (imagePullPolicy, terminationMessagePath...),
    # so compare what the job actually asks for: the containers' names, images and requests.
    def shape(template: Obj) -> list[tuple[str, str, Any]]:
        spec = template.get("spec") or {}
        return [(c.get("name", ""), c.get("image", ""), (c.get("resources") or {}).get("requests"))
                for c in (spec.get("initContainers") or []) + (spec.get("containers") or [])]

    return shape(have) == shape(want)
