"""The ``statefulset`` integration (Kueue's ``pkg/controller/jobs/statefulset``): a managed
StatefulSet's Pods are one pod group, admitted by the pod integration.

The StatefulSet webhook marks its pod template (``kueue.x-k8s.io/pod-suspending-parent:
statefulset``), so every Pod the StatefulSet controller creates is gated. This labeller then
names the group each Pod belongs to, as Kueue's statefulset Pod reconciler does: the Workload
``statefulset-<name>-<hash>`` (Kueue's name for the StatefulSet), ``pod-group-total-count`` the
StatefulSet's replicas, fast admission (the group is admitted with the first Pod, since an
``OrderedReady`` StatefulSet creates the next Pod only once the one before runs), serving (never
finished by its Pods' phases) and one role, ``main``. From then on the Pods are the pod
integration's.
"""

from __future__ import annotations

from kadmit.controller.jobs.construct import workload_name
from kadmit.controller.jobs.parent_pods import ParentKind
from kadmit.kube import Obj
from kadmit.kube.resources import STATEFUL_SETS
from kadmit.webhook.jobs import PRIORITY_CLASS_LABEL, QUEUE_LABEL
from kadmit.webhook.pods import (
    GROUP_FAST_ADMISSION_ANNOTATION,
    GROUP_NAME_LABEL,
    GROUP_SERVING_ANNOTATION,
    GROUP_TOTAL_COUNT_ANNOTATION,
    MANAGED_LABEL,
    MANAGED_VALUE,
    PREBUILT_WORKLOAD_KEY,
    ROLE_HASH_ANNOTATION,
)

FRAMEWORK = "statefulset"
STATEFULSET_POD_SELECTOR = "statefulset.kubernetes.io/pod-name"  # every StatefulSet Pod has it
POD_INDEX_LABEL_ANNOTATION = "kueue.x-k8s.io/pod-group-pod-index-label"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"


def statefulset_workload_name(sts: Obj) -> str:
    """Kueue's ``GetWorkloadName``: ``statefulset-<name>-<hash5>``."""
    meta = sts["metadata"]
    return workload_name("StatefulSet", "apps", str(meta["name"]), str(meta.get("uid", "")))


def grouped(pod: Obj, sts: Obj, manage_without_queue: bool) -> Obj | None:
    """The Pod labelled as a member of the StatefulSet's group, or None when nothing changes."""
    meta = pod.get("metadata") or {}
    labels = dict(meta.get("labels") or {})
    annotations = dict(meta.get("annotations") or {})
    sts_labels = (sts.get("metadata") or {}).get("labels") or {}
    queue = str(sts_labels.get(QUEUE_LABEL) or "")
    name = statefulset_workload_name(sts)
    if labels.get(GROUP_NAME_LABEL) == name:
        if queue and labels.get(QUEUE_LABEL) != queue:
            return {**pod, "metadata": {**meta, "labels": {**labels, QUEUE_LABEL: queue}}}
        return None
    if not queue and not manage_without_queue:
        return None
    labels[MANAGED_LABEL] = MANAGED_VALUE
    if queue:
        labels[QUEUE_LABEL] = queue
    if sts_labels.get(PRIORITY_CLASS_LABEL):
        labels[PRIORITY_CLASS_LABEL] = str(sts_labels[PRIORITY_CLASS_LABEL])
    labels[PREBUILT_WORKLOAD_KEY] = name
    labels[GROUP_NAME_LABEL] = name
    replicas = (sts.get("spec") or {}).get("replicas")
    annotations[GROUP_TOTAL_COUNT_ANNOTATION] = str(1 if replicas is None else replicas)
    annotations[GROUP_FAST_ADMISSION_ANNOTATION] = "true"
    annotations[GROUP_SERVING_ANNOTATION] = "true"
    annotations[POD_INDEX_LABEL_ANNOTATION] = POD_INDEX_LABEL
    annotations[ROLE_HASH_ANNOTATION] = "main"
    return {**pod, "metadata": {**meta, "labels": labels, "annotations": annotations}}


class StatefulSetKind(ParentKind):
    framework = FRAMEWORK
    resource = STATEFUL_SETS
    pod_selector = STATEFULSET_POD_SELECTOR

    def workload_name(self, parent: Obj, pod: Obj) -> str | None:
        return statefulset_workload_name(parent)

    def grouped(self, pod: Obj, parent: Obj, manage_without_queue: bool) -> Obj | None:
        return grouped(pod, parent, manage_without_queue)
