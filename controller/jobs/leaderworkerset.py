"""The ``leaderworkerset.x-k8s.io/leaderworkerset`` integration (Kueue's
``pkg/controller/jobs/leaderworkerset``): each group of a LeaderWorkerSet (its leader and
workers) is one pod group, one Workload, admitted as a gang.

The LeaderWorkerSet webhook marks both pod templates (``pod-suspending-parent:
leaderworkerset``, ``pod-group-serving``, the queue name), so every Pod is gated. The labeller
names each Pod's group as Kueue's LeaderWorkerSet reconciler does: the Workload
``leaderworkerset-<name>-<group index>-<hash>``, ``pod-group-total-count`` the group size, and the
role ``leader`` or ``worker`` (``main`` without a leader template). The group's Workload is made
once all its Pods exist: pod sets ``leader`` (1) and ``worker`` (size - 1).
"""

from __future__ import annotations

from kadmit.controller.jobs.construct import workload_name
from kadmit.controller.jobs.parent_pods import ParentKind
from kadmit.kube import Obj
from kadmit.kube.resources import LEADER_WORKER_SETS
from kadmit.webhook.jobs import PREBUILT_WORKLOAD_KEY, PRIORITY_CLASS_LABEL, QUEUE_LABEL
from kadmit.webhook.pods import (
    GROUP_NAME_LABEL,
    GROUP_TOTAL_COUNT_ANNOTATION,
    MANAGED_LABEL,
    MANAGED_VALUE,
    ROLE_HASH_ANNOTATION,
    SCHEDULING_GATE,
)

FRAMEWORK = "leaderworkerset.x-k8s.io/leaderworkerset"
PARENT = "leaderworkerset"  # the value of kueue.x-k8s.io/pod-suspending-parent
SET_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
LEADER_NAME_ANNOTATION = "leaderworkerset.sigs.k8s.io/leader-name"


def lws_workload_name(lws: Obj, group_index: str) -> str:
    """Kueue's ``GetWorkloadName``: the Workload of group ``group_index``."""
    meta = lws["metadata"]
    return workload_name(
        "LeaderWorkerSet",
        "leaderworkerset.x-k8s.io",
        f"{meta['name']}-{group_index}",
        str(meta.get("uid", "")),
    )


def _template(lws: Obj) -> Obj:
    return (lws.get("spec") or {}).get("leaderWorkerTemplate") or {}


class LeaderWorkerSetKind(ParentKind):
    framework = PARENT
    resource = LEADER_WORKER_SETS
    pod_selector = SET_NAME_LABEL

    def workload_name(self, parent: Obj, pod: Obj) -> str | None:
        index = ((pod.get("metadata") or {}).get("labels") or {}).get(GROUP_INDEX_LABEL)
        return lws_workload_name(parent, str(index)) if index is not None else None

    def grouped(self, pod: Obj, parent: Obj, manage_without_queue: bool) -> Obj | None:
        meta = pod.get("metadata") or {}
        labels = dict(meta.get("labels") or {})
        annotations = dict(meta.get("annotations") or {})
        queue = str(((parent.get("metadata") or {}).get("labels") or {}).get(QUEUE_LABEL) or "")
        gated = any(
            g.get("name") == SCHEDULING_GATE for g in (pod.get("spec") or {}).get("schedulingGates") or []
        )
        if MANAGED_LABEL in labels:
            if queue and gated and labels.get(QUEUE_LABEL) != queue:
                return {**pod, "metadata": {**meta, "labels": {**labels, QUEUE_LABEL: queue}}}
            return None
        name = self.workload_name(parent, pod)
        if name is None or (not queue and not manage_without_queue):
            return None  # no group index yet, or not managed
        labels[MANAGED_LABEL] = MANAGED_VALUE
        if queue and gated:
            labels[QUEUE_LABEL] = queue
        priority = ((parent.get("metadata") or {}).get("labels") or {}).get(PRIORITY_CLASS_LABEL)
        if priority:
            labels[PRIORITY_CLASS_LABEL] = str(priority)
        labels[GROUP_NAME_LABEL] = name
        labels[PREBUILT_WORKLOAD_KEY] = name
        size = _template(parent).get("size")
        annotations[GROUP_TOTAL_COUNT_ANNOTATION] = str(1 if size is None else size)
        role = "main"
        if _template(parent).get("leaderTemplate"):
            role = "worker" if LEADER_NAME_ANNOTATION in annotations else "leader"
        annotations[ROLE_HASH_ANNOTATION] = role
        return {**pod, "metadata": {**meta, "labels": labels, "annotations": annotations}}
