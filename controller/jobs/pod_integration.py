"""Plain Pods and pod groups (Kueue's ``pod`` framework, ``pkg/controller/jobs/pod``).

A Pod is "suspended" while it carries the ``kueue.x-k8s.io/admission`` scheduling gate the
webhook put on it; it starts when kadmit injects its pod set's flavor (node selector,
tolerations, labels, annotations) and removes the gate, and it stops by being deleted (a Pod's
spec cannot be changed back). A Pod alone is a Workload of one pod set ``main`` named
``pod-<name>-<hash>``; Pods sharing ``kueue.x-k8s.io/pod-group-name`` are one Workload named
after the group, with one pod set per role (the ``kueue.x-k8s.io/role-hash`` of the Pods'
scheduling-relevant spec), admitted only once ``pod-group-total-count`` runnable Pods exist
(or, with ``pod-group-fast-admission``, once one does).

Everything here is pure: Pods in, values or new Pod dicts out. The group reconciler
(:mod:`kadmit.controller.group_reconciler`) does the reading and writing.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from kadmit.controller.jobs.construct import workload_name as owner_workload_name
from kadmit.controller.jobs.integration import ComposableIntegration, Finished
from kadmit.controller.jobs.podtemplate import PodSetInfo, merge_into_template
from kadmit.kube import Obj
from kadmit.kube.resources import PODS
from kadmit.webhook.objects import metadata_of as _meta
from kadmit.webhook.pods import (
    GROUP_FAST_ADMISSION_ANNOTATION,
    GROUP_NAME_LABEL,
    GROUP_SERVING_ANNOTATION,
    GROUP_TOTAL_COUNT_ANNOTATION,
    MANAGED_LABEL,
    MANAGED_VALUE,
    POD_FINALIZER,
    RETRIABLE_IN_GROUP_ANNOTATION,
    SCHEDULING_GATE,
    SUSPENDED_BY_PARENT_ANNOTATION,
    is_gated,
    role_hash,
    total_count_error,
)

FRAMEWORK = "pod"
TOPOLOGY_GATE = "kueue.x-k8s.io/topology"
DEFAULT_POD_SET = "main"
MAX_POD_SETS = 8  # Kueue's jobframework.MaxPodSets


class GroupError(ValueError):
    """A pod group Kueue would not turn into a Workload (the message is Kueue's)."""


def labels_of(pod: Obj) -> dict[str, str]:
    return dict(_meta(pod).get("labels") or {})


def annotations_of(pod: Obj) -> dict[str, str]:
    return dict(_meta(pod).get("annotations") or {})


def group_name(pod: Obj) -> str:
    return str(labels_of(pod).get(GROUP_NAME_LABEL) or "")


def phase(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def is_terminated(pod: Obj) -> bool:
    return phase(pod) in ("Succeeded", "Failed")


def is_runnable_or_succeeded(pod: Obj) -> bool:
    """Kueue's ``isPodRunnableOrSucceeded``: not Failed, and not deleted before it was placed."""
    if _meta(pod).get("deletionTimestamp") and not (pod.get("spec") or {}).get("nodeName"):
        return False
    return phase(pod) != "Failed"


def is_unretriable(pod: Obj) -> bool:
    return annotations_of(pod).get(RETRIABLE_IN_GROUP_ANNOTATION) == "false"


def total_count(pod: Obj) -> int:
    """``pod-group-total-count`` of ``pod``; GroupError with Kueue's message when it is unusable."""
    if not group_name(pod):
        raise GroupError(f"pod doesn't have a '{GROUP_NAME_LABEL}' label")
    text = annotations_of(pod).get(GROUP_TOTAL_COUNT_ANNOTATION)
    if text is None:
        raise GroupError(f"failed to extract '{GROUP_TOTAL_COUNT_ANNOTATION}' annotation")
    problem = total_count_error(text)
    if problem:
        raise GroupError(problem)
    return int(text)


def workload_name_for_pod(pod: Obj) -> str:
    """Kueue's ``GetWorkloadNameForPod``: ``pod-<name>-<hash5>``."""
    meta = _meta(pod)
    return owner_workload_name("Pod", "", str(meta.get("name", "")), str(meta.get("uid", "")))


def _pod_set(pod: Obj, name: str, count: int) -> Obj:
    spec = copy.deepcopy(pod.get("spec") or {})  # as Kueue keeps it, gates included
    return {"name": name, "count": count, "template": {"metadata": {}, "spec": spec}}


def group_pod_sets(pods: Sequence[Obj], fast_admission: bool, total: int) -> list[Obj]:
    """Kueue's ``constructGroupPodSets`` (one pod set per role, sorted by name, counting the
    runnable Pods) or ``constructGroupPodSetsFast`` (the first runnable Pod's role, the whole count)."""
    result: dict[str, Obj] = {}
    for pod in pods:
        if not is_runnable_or_succeeded(pod):
            continue
        role = role_hash(pod)
        if fast_admission:
            return [_pod_set(pod, role, total)]
        if role in result:
            result[role]["count"] += 1
        else:
            result[role] = _pod_set(pod, role, 1)
    if fast_admission:
        raise GroupError("failed to find a runnable pod in the group")
    return [result[name] for name in sorted(result)]


def prepared(pod: Obj, info: PodSetInfo) -> Obj:
    """The Pod with its pod set's admitted info merged in and Kueue's gate removed (Kueue's ``prepare``)."""
    result = copy.deepcopy(pod)
    merged = merge_into_template(
        {"metadata": result.get("metadata") or {}, "spec": result.get("spec") or {}}, info
    )
    result["metadata"], result["spec"] = merged["metadata"], merged["spec"]
    keep_topology = any(g.get("name") == TOPOLOGY_GATE for g in info.scheduling_gates)
    gates = [
        g
        for g in result["spec"].get("schedulingGates") or []
        if g.get("name") != SCHEDULING_GATE and (keep_topology or g.get("name") != TOPOLOGY_GATE)
    ]
    if gates:
        result["spec"]["schedulingGates"] = gates
    else:
        result["spec"].pop("schedulingGates", None)
    return result


def _ready(pod: Obj) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


class PodIntegration(ComposableIntegration):
    """Kueue's ``Pod`` as a composable job: one Pod, or every Pod of a group."""

    framework = FRAMEWORK
    resource = PODS
    group = ""
    kind = "Pod"
    finalizer = POD_FINALIZER
    member_label_selector = f"{MANAGED_LABEL}={MANAGED_VALUE}"

    def __init__(self, *, implicit: bool = False) -> None:
        # Implicitly enabled (Kueue): only for a kind that rides on Pods (``deployment``,
        # ``statefulset``), so only the Pods such a parent suspends are managed.
        self.implicit = implicit

    def group_of(self, member: Obj) -> str | None:
        return group_name(member) or None

    def is_managed(self, member: Obj) -> bool:
        # Kueue's Skip: a Pod without the managed label is not Kueue's, whatever its queue.
        if self.implicit and SUSPENDED_BY_PARENT_ANNOTATION not in annotations_of(member):
            return False
        return labels_of(member).get(MANAGED_LABEL) == MANAGED_VALUE

    def queue_name_of(self, members: Sequence[Obj]) -> str:
        return str(labels_of(members[0]).get("kueue.x-k8s.io/queue-name", "")) if members else ""

    def workload_name(self, members: Sequence[Obj], group: str | None) -> str:
        prebuilt = annotations_of(members[0]).get("kueue.x-k8s.io/prebuilt-workload-name") or labels_of(
            members[0]
        ).get("kueue.x-k8s.io/prebuilt-workload-name")
        if prebuilt:
            return str(prebuilt)
        return group if group else workload_name_for_pod(members[0])

    def is_serving(self, members: Sequence[Obj], group: str | None) -> bool:
        return bool(group) and annotations_of(members[0]).get(GROUP_SERVING_ANNOTATION) == "true"

    def fast_admission(self, members: Sequence[Obj]) -> bool:
        return annotations_of(members[0]).get(GROUP_FAST_ADMISSION_ANNOTATION) == "true"

    def check_group(self, members: Sequence[Obj]) -> None:
        """Kueue's ``validatePodGroupMetadata``: a complete group, one queue, one total count."""
        first = members[0]
        total = total_count(first)
        active = [p for p in members if is_runnable_or_succeeded(p)]
        if not self.fast_admission(members) and len(active) < total:
            raise GroupError(f"'{group_name(first)}' group has fewer runnable pods than expected")
        queue = self.queue_name_of(members)
        for pod in members:
            if phase(pod) == "Failed":
                continue
            other = str(labels_of(pod).get("kueue.x-k8s.io/queue-name", ""))
            first_name, name = _meta(first).get("name"), _meta(pod).get("name")
            if other != queue:
                raise GroupError(
                    f"pods '{first_name}' and '{name}' has different queue names: {queue}!={other}"
                )
            count = annotations_of(pod).get(GROUP_TOTAL_COUNT_ANNOTATION, "")
            if count != str(total):
                raise GroupError(
                    f"pods '{first_name}' and '{name}' has different "
                    f"'{GROUP_TOTAL_COUNT_ANNOTATION}' values: {total}!={count}"
                )

    def pod_sets(self, members: Sequence[Obj], group: str | None) -> list[Obj]:
        if not group:
            return [_pod_set(members[0], DEFAULT_POD_SET, 1)]
        sets = group_pod_sets(members, self.fast_admission(members), total_count(members[0]))
        if len(sets) > MAX_POD_SETS:
            raise GroupError(f"pod group can't include more than {MAX_POD_SETS} roles")
        return sets

    def group_size(self, members: Sequence[Obj]) -> int:
        return total_count(members[0])

    def is_suspended(self, members: Sequence[Obj]) -> bool:
        return any(is_terminated(p) or is_gated(p) for p in members)

    def is_active(self, members: Sequence[Obj]) -> bool:
        return any(phase(p) == "Running" and not _meta(p).get("deletionTimestamp") for p in members)

    def finished(self, members: Sequence[Obj], group: str | None) -> Finished | None:
        if self.is_serving(members, group):
            return None
        if not group:
            pod = members[0]
            if not is_terminated(pod):
                return None
            message = str((pod.get("status") or {}).get("message") or "")
            return Finished("Succeeded" if phase(pod) == "Succeeded" else "Failed", message)
        try:
            total = total_count(members[0])
        except GroupError:
            return None
        succeeded = sum(1 for p in members if phase(p) == "Succeeded")
        active = any(not is_terminated(p) for p in members)
        if succeeded == total or (not active and any(is_unretriable(p) for p in members)):
            return Finished("Succeeded", f"Pods succeeded: {succeeded}/{total}.")
        return None

    def pods_ready(self, members: Sequence[Obj], group: str | None) -> bool:
        if not group:
            return _ready(members[0])
        try:
            if len(members) < total_count(members[0]):
                return False
        except GroupError:
            return False
        return all(_ready(p) for p in members)

    def reclaimable_pods(self, members: Sequence[Obj], group: str | None) -> list[Obj]:
        if not group or self.is_serving(members, group):
            return []
        counts: dict[str, int] = {}
        for pod in members:
            if phase(pod) == "Succeeded":
                role = role_hash(pod)
                counts[role] = counts.get(role, 0) + 1
        return [{"name": name, "count": count} for name, count in counts.items()]

    def pod_set_of(self, member: Obj, group: str | None) -> str:
        return role_hash(member) if group else DEFAULT_POD_SET

    def started(self, member: Obj, info: PodSetInfo) -> Obj | None:
        return prepared(member, info) if is_gated(member) else None

    def to_stop(self, members: Sequence[Obj], workload_deleted: bool) -> list[Obj]:
        """Kueue's ``Stop``: every Pod not yet deleted and (unless the Workload is gone) still running."""
        return [
            p
            for p in members
            if not _meta(p).get("deletionTimestamp")
            and (workload_deleted or not (is_terminated(p) or is_gated(p)))
        ]

    def partition(self, members: Sequence[Obj]) -> tuple[list[Obj], list[Obj]]:
        active = [p for p in members if is_runnable_or_succeeded(p)]
        inactive = [p for p in members if not is_runnable_or_succeeded(p)]
        return active, inactive

    def absent(self, members: Sequence[Obj], count: int, active: int) -> int:
        # Kueue's countAbsentPods: a fast-admission role only waits for its first member.
        if self.fast_admission(members):
            return 1 if count > 0 and active == 0 else 0
        return max(0, count - active)

    def keep_order(self, member: Obj) -> tuple[Any, ...]:
        """Kueue's ``sortActivePods``: finalized Pods, ungated ones, then older ones are kept first."""
        return (
            self.finalizer not in (_meta(member).get("finalizers") or []),
            is_gated(member),
            str(_meta(member).get("creationTimestamp") or ""),
        )
