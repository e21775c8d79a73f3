"""What kadmit injects into a job's pod templates on start, and how it takes it back on stop.

On admission Kueue unsuspends the job itself, writing into each pod set's template what the
admission decided: the node labels of every flavor the pod set was assigned (as
``nodeSelector``), those flavors' tolerations, labels naming the pod set and the queues, an
annotation naming the Workload, and then each admission check's ``podSetUpdates``. Nothing
is ever overwritten: a key already present with another value is a conflict, and a conflict
is permanent (the Workload finishes with ``FailedToStart``). On eviction the templates go back
to the Workload's copy, so nothing injected survives a stop.

All functions here are pure: dicts in, new dicts out, inputs untouched.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kadmit.kube import Obj
from kadmit.webhook.jobs import ELASTIC_JOB_ANNOTATION

PODSET_LABEL = "kueue.x-k8s.io/podset"
LOCAL_QUEUE_LABEL = "kueue.x-k8s.io/local-queue-name"
CLUSTER_QUEUE_LABEL = "kueue.x-k8s.io/cluster-queue-name"
WORKLOAD_ANNOTATION = "kueue.x-k8s.io/workload"
SLICE_NAME_ANNOTATION = "kueue.x-k8s.io/workload-slice-name"
"""Kueue's ``WorkloadSliceNameAnnotation``: an elastic job's first slice name, shared by its
slices and Pods."""
MULTIKUEUE_ORIGIN_LABEL = "kueue.x-k8s.io/multikueue-origin"
MULTIKUEUE_WORKER_POD_LABEL = "kueue.x-k8s.io/multikueue-worker-workload-pod"

# Labels the Job controller sets on the template; they keep their current values on restore.
JOB_CONTROLLER_LABELS = ("job-name", "controller-uid", "batch.kubernetes.io/job-name",
                         "batch.kubernetes.io/controller-uid")


class PodSetMergeError(ValueError):
    """A key injected with a value that differs from the one already there (permanent)."""


class FlavorNotFound(LookupError):
    """An assigned ResourceFlavor does not exist (yet): retry later."""


@dataclass
class PodSetInfo:
    """Everything that is added to one pod set's template on start (Kueue's ``podset.PodSetInfo``)."""

    name: str
    count: int
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: list[Obj] = field(default_factory=list)
    scheduling_gates: list[Obj] = field(default_factory=list)

    def merge(self, other: PodSetInfo | Obj, what: str = "") -> None:
        """Add another info (or a check's PodSetUpdate dict); conflicting keys raise."""
        if isinstance(other, PodSetInfo):
            parts: tuple[tuple[str, Mapping[str, str]], ...] = (
                ("annotations", other.annotations), ("labels", other.labels),
                ("nodeSelector", other.node_selector))
            tolerations: Sequence[Obj] = other.tolerations
            gates: Sequence[Obj] = other.scheduling_gates
        else:
            parts = (("annotations", other.get("annotations") or {}), ("labels", other.get("labels") or {}),
                     ("nodeSelector", other.get("nodeSelector") or {}))
            tolerations = other.get("tolerations") or []
            gates = []
        targets = {"annotations": self.annotations, "labels": self.labels, "nodeSelector": self.node_selector}
        for name, values in parts:
            conflict = _conflict(targets[name], values)
            if conflict:
                raise PodSetMergeError(f"{what}conflict for {name}: {conflict}")
        for name, values in parts:
            for key, value in values.items():
                targets[name].setdefault(key, value)
        _append_missing(self.tolerations, tolerations)
        _append_missing(self.scheduling_gates, gates)


def _conflict(existing: Mapping[str, str], added: Mapping[str, str]) -> str | None:
    for key, value in added.items():
        if key in existing and existing[key] != value:
            return f"conflict for key={key}, value1={existing[key]}, value2={value}"
    return None


def _append_missing(target: list[Obj], added: Iterable[Obj]) -> None:
    for item in added:
        if item not in target:
            target.append(copy.deepcopy(item))


_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")


def valid_label_value(value: str) -> bool:
    return len(value) <= 63 and _LABEL_VALUE.fullmatch(value) is not None


def pod_set_infos(workload: Obj, flavors: Mapping[str, Obj]) -> list[PodSetInfo]:
    """The infos to start a job with, from its admitted Workload and the ResourceFlavors by name.

    Raises :class:`FlavorNotFound` if an assigned flavor is missing and :class:`PodSetMergeError`
    if the flavors or the checks' podSetUpdates contradict each other.
    """
    admission = (workload.get("status") or {}).get("admission") or {}
    cluster_queue = str(admission.get("clusterQueue", ""))
    local_queue = str((workload.get("spec") or {}).get("queueName") or "")
    name = workload["metadata"]["name"]
    annotations = (workload.get("metadata") or {}).get("annotations") or {}
    origin = ((workload.get("metadata") or {}).get("labels") or {}).get(MULTIKUEUE_ORIGIN_LABEL)
    counts = {ps["name"]: int(ps.get("count", 1)) for ps in (workload.get("spec") or {}).get("podSets") or []}
    infos: list[PodSetInfo] = []
    for assignment in admission.get("podSetAssignments") or []:
        ps_name = assignment["name"]
        count = assignment.get("count")
        info = PodSetInfo(name=ps_name, count=int(count) if count is not None else counts.get(ps_name, 1))
        for flavor_name in sorted(set((assignment.get("flavors") or {}).values())):
            flavor = flavors.get(flavor_name)
            if flavor is None:
                raise FlavorNotFound(f"ResourceFlavor {flavor_name} not found")
            spec = flavor.get("spec") or {}
            info.merge(PodSetInfo(name=ps_name, count=0, node_selector=dict(spec.get("nodeLabels") or {}),
                                  tolerations=list(spec.get("tolerations") or [])),
                       what="invalid flavor nodeLabels: ")
        info.labels[PODSET_LABEL] = ps_name
        if local_queue:
            info.labels[LOCAL_QUEUE_LABEL] = local_queue
        if cluster_queue and valid_label_value(cluster_queue):
            info.labels[CLUSTER_QUEUE_LABEL] = cluster_queue
        if origin:
            info.labels[MULTIKUEUE_WORKER_POD_LABEL] = "true"
        info.annotations[WORKLOAD_ANNOTATION] = name
        if annotations.get(ELASTIC_JOB_ANNOTATION) == "true":
            # An elastic job's pods outlive the slice that started them: they carry the chain's name.
            chain = str(annotations.get(SLICE_NAME_ANNOTATION) or name)
            info.annotations[SLICE_NAME_ANNOTATION] = chain
            info.annotations[WORKLOAD_ANNOTATION] = chain
        infos.append(info)
    by_name = {info.name: info for info in infos}
    for check in (workload.get("status") or {}).get("admissionChecks") or []:
        seen: set[str] = set()
        for update in check.get("podSetUpdates") or []:
            target = by_name.get(update.get("name", ""))
            if target is None or target.name in seen:
                continue
            seen.add(target.name)
            target.merge(update, what="invalid admission check PodSetUpdate: ")
    return infos


def merge_into_template(template: Obj, info: PodSetInfo) -> Obj:
    """A copy of ``template`` with ``info`` added (Kueue's ``podset.Merge``)."""
    result = copy.deepcopy(template)
    meta = result.setdefault("metadata", {})
    spec = result.setdefault("spec", {})
    parts = (("annotations", meta, "annotations", info.annotations), ("labels", meta, "labels", info.labels),
             ("nodeSelector", spec, "nodeSelector", info.node_selector))
    for what, holder, key, values in parts:
        conflict = _conflict(holder.get(key) or {}, values)
        if conflict:
            raise PodSetMergeError(f"conflict for {what}: {conflict}")
    for _, holder, key, values in parts:
        if values:
            merged = dict(holder.get(key) or {})
            for k, v in values.items():
                merged.setdefault(k, v)
            holder[key] = merged
    if info.tolerations:
        tolerations = list(spec.get("tolerations") or [])
        _append_missing(tolerations, info.tolerations)
        spec["tolerations"] = tolerations
    if info.scheduling_gates:
        gates = list(spec.get("schedulingGates") or [])
        _append_missing(gates, info.scheduling_gates)
        spec["schedulingGates"] = gates
    return result


def restore_template(current: Obj, original: Obj) -> Obj:
    """A copy of ``current`` whose labels, annotations, nodeSelector, tolerations and schedulingGates
    are the Workload's ``original`` ones again; the Job controller's own labels keep their values."""
    result = copy.deepcopy(current)
    meta = result.setdefault("metadata", {})
    spec = result.setdefault("spec", {})
    original_meta = original.get("metadata") or {}
    original_spec = original.get("spec") or {}
    labels = dict(original_meta.get("labels") or {})
    for key in JOB_CONTROLLER_LABELS:
        if key in (meta.get("labels") or {}):
            labels[key] = meta["labels"][key]
    _set_or_drop(meta, "labels", labels)
    _set_or_drop(meta, "annotations", copy.deepcopy(original_meta.get("annotations") or {}))
    for key in ("nodeSelector", "tolerations", "schedulingGates"):
        _set_or_drop(spec, key, copy.deepcopy(original_spec.get(key)))
    if not meta and "metadata" not in original:
        result.pop("metadata")  # exactly as it was: a template that had no metadata gets none back
    return result


def _set_or_drop(holder: Obj, key: str, value: Any) -> None:
    if value:
        holder[key] = value
    else:
        holder.pop(key, None)
