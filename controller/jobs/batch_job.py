"""A batch/v1 Job's Workload, as Kueue's ``ConstructWorkload`` builds it — pure, no API calls.

``kadmit simulate`` uses it to turn Kueue's sample Jobs into the Workloads the engine
schedules; it follows kueue-contract §4.4: name ``job-<name>-<hash5>``, one pod set ``main``
with ``count = min(parallelism, completions)``, ``minCount`` from
``kueue.x-k8s.io/job-min-parallelism``, the template without the legacy job-controller labels,
``queueName`` from ``kueue.x-k8s.io/queue-name`` and the priority of the
``kueue.x-k8s.io/priority-class`` WorkloadPriorityClass.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping
from typing import Any

QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
MIN_PARALLELISM_ANNOTATION = "kueue.x-k8s.io/job-min-parallelism"
MAX_EXEC_TIME_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
FINALIZER = "kueue.x-k8s.io/resource-in-use"
LEGACY_LABELS = ("controller-uid", "job-name", "batch.kubernetes.io/controller-uid")
_MAX_PREFIX = 253 - 1 - 5


class JobConversionError(ValueError):
    """A Job that Kueue would not turn into a Workload (the message says why)."""


def workload_name(job_name: str, job_uid: str) -> str:
    """Kueue's name for a Job's Workload: ``job-name-ef3a1`` for Job ``name`` with UID ``uid``."""
    digest = hashlib.sha1(f"Job\nbatch\n{job_name}\n{job_uid}".encode(), usedforsecurity=False).hexdigest()
    return f"{f'job-{job_name}'[:_MAX_PREFIX]}-{digest[:5]}"


def pods_count(spec: Mapping[str, Any]) -> int:
    parallelism = spec.get("parallelism")
    parallelism = 1 if parallelism is None else parallelism
    completions = spec.get("completions")
    if not isinstance(parallelism, int) or isinstance(parallelism, bool) or parallelism < 0:
        raise JobConversionError(f"spec.parallelism: must be a non-negative integer, not {parallelism!r}")
    if completions is None:
        return parallelism
    if not isinstance(completions, int) or isinstance(completions, bool) or completions < 0:
        raise JobConversionError(f"spec.completions: must be a non-negative integer, not {completions!r}")
    return min(parallelism, completions)


def workload_for_job(
    job: Mapping[str, Any], priority_classes: Mapping[str, int] | None = None
) -> dict[str, Any]:
    """The ``kueue.x-k8s.io/v1beta2`` Workload Kueue creates for ``job`` (which must have a name).

    ``priority_classes`` maps WorkloadPriorityClass names to values; a Job naming a class that
    is missing is an error, as in Kueue (no fallback, no Workload).
    """
    meta = job.get("metadata") or {}
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise JobConversionError("metadata.name: Required value")
    namespace = str(meta.get("namespace") or "default")
    uid = str(meta.get("uid") or "")
    labels: Mapping[str, str] = meta.get("labels") or {}
    annotations: Mapping[str, str] = meta.get("annotations") or {}
    spec = job.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise JobConversionError("spec: must be an object")
    count = pods_count(spec)
    template = copy.deepcopy(spec.get("template") or {})
    if not isinstance(template, dict):
        raise JobConversionError("spec.template: must be an object")
    template_labels = (template.get("metadata") or {}).get("labels")
    if isinstance(template_labels, dict):
        for key in LEGACY_LABELS:
            template_labels.pop(key, None)
    pod_set: dict[str, Any] = {"name": "main", "count": count, "template": template}
    if MIN_PARALLELISM_ANNOTATION in annotations:
        text = annotations[MIN_PARALLELISM_ANNOTATION]
        try:
            min_count = int(text)
        except ValueError:
            raise JobConversionError(
                f"metadata.annotations[{MIN_PARALLELISM_ANNOTATION}]: {text!r} is not an integer"
            ) from None
        if not 0 < min_count < count:
            raise JobConversionError(
                f"metadata.annotations[{MIN_PARALLELISM_ANNOTATION}]: should be between 0 and {count - 1}"
            )
        pod_set["minCount"] = min_count
    workload_spec: dict[str, Any] = {"podSets": [pod_set], "queueName": str(labels.get(QUEUE_NAME_LABEL, ""))}
    class_name = labels.get(PRIORITY_CLASS_LABEL)
    if class_name:
        classes = priority_classes or {}
        if class_name not in classes:
            raise JobConversionError(f"WorkloadPriorityClass {class_name!r} not found")
        workload_spec["priorityClassRef"] = {
            "group": "kueue.x-k8s.io",
            "kind": "WorkloadPriorityClass",
            "name": class_name,
        }
        workload_spec["priority"] = classes[class_name]
    if MAX_EXEC_TIME_LABEL in labels:
        text = labels[MAX_EXEC_TIME_LABEL]
        if not text.isdigit() or int(text) <= 0:
            raise JobConversionError(f"metadata.labels[{MAX_EXEC_TIME_LABEL}]: should be greater than 0")
        workload_spec["maximumExecutionTimeSeconds"] = int(text)
    workload_meta: dict[str, Any] = {
        "name": workload_name(name, uid),
        "namespace": namespace,
        "finalizers": [FINALIZER],
        "labels": {JOB_UID_LABEL: uid} if uid else {},
        "annotations": {k: v for k, v in annotations.items() if k.startswith("provreq.kueue.x-k8s.io/")},
        "ownerReferences": [
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": name,
                "uid": uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    if meta.get("creationTimestamp") is not None:
        workload_meta["creationTimestamp"] = meta["creationTimestamp"]
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": workload_meta,
        "spec": workload_spec,
    }
