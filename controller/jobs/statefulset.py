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

import logging

from kadmit.controller.jobs.construct import workload_name
from kadmit.kube import ApiError, Client, Obj
from kadmit.kube.informer import Informer
from kadmit.kube.resources import PODS, WORKLOADS
from kadmit.kube.workers import KeyedReconciler
from kadmit.kube.writes import update
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
    SUSPENDED_BY_PARENT_ANNOTATION,
)

logger = logging.getLogger(__name__)

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


class StatefulSetPodLabeller(KeyedReconciler):
    """Names the pod group of each gated Pod of a managed StatefulSet."""

    what = "statefulset-pod"

    def __init__(
        self,
        kube: Client,
        pods: Informer,
        statefulsets: Informer,
        workloads: Informer,
        manage_without_queue: bool,
        *,
        workers: int = 2,
    ) -> None:
        super().__init__(workers)
        self.kube = kube
        self.pods = pods
        self.statefulsets = statefulsets
        self.workloads = workloads
        self.manage_without_queue = manage_without_queue
        pods.add_handler(self._on_pod)
        statefulsets.add_handler(self._on_statefulset)
        workloads.add_handler(self._on_workload)

    def _on_workload(self, event: str, workload: Obj, old: Obj | None) -> None:
        if event != "ADDED":
            return
        namespace = workload["metadata"].get("namespace", "")
        for pod in self.pods.list(namespace):
            if (pod["metadata"].get("labels") or {}).get(GROUP_NAME_LABEL) == workload["metadata"]["name"]:
                self.queue.add((namespace, pod["metadata"]["name"]))

    def _on_pod(self, event: str, pod: Obj, old: Obj | None) -> None:
        if event != "DELETED" and _by_statefulset(pod):
            self.queue.add((pod["metadata"].get("namespace", ""), pod["metadata"]["name"]))

    def _on_statefulset(self, event: str, sts: Obj, old: Obj | None) -> None:
        namespace = sts["metadata"].get("namespace", "")
        for pod in self.pods.list(namespace):
            if _owner(pod) == sts["metadata"]["name"]:
                self.queue.add((namespace, pod["metadata"]["name"]))

    def initial_keys(self) -> list[tuple[str, str]]:
        return [
            (p["metadata"].get("namespace", ""), p["metadata"]["name"])
            for p in self.pods.list()
            if _by_statefulset(p)
        ]

    async def reconcile(self, namespace: str, name: str) -> None:
        pod = self.pods.get(namespace, name)
        if pod is None or not _by_statefulset(pod) or pod["metadata"].get("deletionTimestamp"):
            return
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return
        owner = _owner(pod)
        sts = self.statefulsets.get(namespace, owner) if owner else None
        if sts is None:
            return

        def label(obj: Obj) -> bool:
            new = grouped(obj, sts, self.manage_without_queue)
            if new is None:
                return False
            obj.clear()
            obj.update(new)
            return True

        try:
            await update(self.kube, PODS, pod, label)
        except ApiError as exc:
            if not exc.not_found:
                raise
        await self._own_workload(sts)

    async def _own_workload(self, sts: Obj) -> None:
        """Kueue's statefulset reconciler: the StatefulSet owns its group's Workload too, so that the
        Workload (its admission, its requeue state) outlives Pods that are deleted and created again."""
        meta = sts["metadata"]
        workload = self.workloads.get(meta.get("namespace", ""), statefulset_workload_name(sts))
        if workload is None or any(
            r.get("uid") == meta.get("uid") for r in workload["metadata"].get("ownerReferences") or []
        ):
            return
        reference = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": meta["name"], "uid": meta["uid"]}

        def own(obj: Obj) -> bool:
            refs = list(obj["metadata"].get("ownerReferences") or [])
            if any(r.get("uid") == reference["uid"] for r in refs):
                return False
            obj["metadata"]["ownerReferences"] = [*refs, reference]
            return True

        try:
            await update(self.kube, WORKLOADS, workload, own)
        except ApiError as exc:
            if not exc.not_found:
                raise


def _by_statefulset(pod: Obj) -> bool:
    return ((pod.get("metadata") or {}).get("annotations") or {}).get(
        SUSPENDED_BY_PARENT_ANNOTATION
    ) == FRAMEWORK


def _owner(pod: Obj) -> str | None:
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == "StatefulSet" and ref.get("apiVersion") == "apps/v1":
            return str(ref.get("name"))
    return None
