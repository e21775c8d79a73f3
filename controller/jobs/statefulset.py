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

Scaling to zero and back (:class:`StatefulSetScaling`, Kueue's statefulset reconciler): at 0
replicas the Workload is kept (the StatefulSet still owns it) but its quota is released and it is
put on hold, ``QuotaReserved: False, OnHold, "StatefulSet scaled to zero; workload on hold"``,
which keeps it out of the queues; scaled up again, the hold is cleared (``QuotaReserved: False,
PendingEvaluation, "Workload no longer on hold; waiting for quota reservation"``), so it is queued
and admitted again, and the new Pods join it.
"""

from __future__ import annotations

from collections.abc import Callable

from kadmit import workload as ws
from kadmit.controller.jobs.construct import workload_name
from kadmit.controller.jobs.parent_pods import ParentKind
from kadmit.kube import ApiError, Client, Obj
from kadmit.kube.informer import Informer
from kadmit.kube.resources import STATEFUL_SETS, WORKLOADS
from kadmit.kube.workers import KeyedReconciler
from kadmit.kube.writes import update_status
from kadmit.webhook import pods
from kadmit.webhook.jobs import PREBUILT_WORKLOAD_KEY, PRIORITY_CLASS_LABEL, QUEUE_LABEL

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
    if labels.get(pods.GROUP_NAME_LABEL) == name:
        if queue and labels.get(QUEUE_LABEL) != queue:
            return {**pod, "metadata": {**meta, "labels": {**labels, QUEUE_LABEL: queue}}}
        return None
    if not queue and not manage_without_queue:
        return None
    labels[pods.MANAGED_LABEL] = pods.MANAGED_VALUE
    if queue:
        labels[QUEUE_LABEL] = queue
    if sts_labels.get(PRIORITY_CLASS_LABEL):
        labels[PRIORITY_CLASS_LABEL] = str(sts_labels[PRIORITY_CLASS_LABEL])
    labels[PREBUILT_WORKLOAD_KEY] = name
    labels[pods.GROUP_NAME_LABEL] = name
    replicas = (sts.get("spec") or {}).get("replicas")
    annotations[pods.GROUP_TOTAL_COUNT_ANNOTATION] = str(1 if replicas is None else replicas)
    annotations[pods.GROUP_FAST_ADMISSION_ANNOTATION] = "true"
    annotations[pods.GROUP_SERVING_ANNOTATION] = "true"
    annotations[POD_INDEX_LABEL_ANNOTATION] = POD_INDEX_LABEL
    annotations[pods.ROLE_HASH_ANNOTATION] = "main"
    return {**pod, "metadata": {**meta, "labels": labels, "annotations": annotations}}


class StatefulSetKind(ParentKind):
    framework = FRAMEWORK
    resource = STATEFUL_SETS
    pod_selector = STATEFULSET_POD_SELECTOR

    def workload_name(self, parent: Obj, pod: Obj) -> str | None:
        return statefulset_workload_name(parent)

    def grouped(self, pod: Obj, parent: Obj, manage_without_queue: bool) -> Obj | None:
        return grouped(pod, parent, manage_without_queue)


SCALED_TO_ZERO = "StatefulSet scaled to zero; workload on hold"
NO_LONGER_ON_HOLD = "Workload no longer on hold; waiting for quota reservation"


def has_active_reservation(workload: Obj) -> bool:
    """Kueue's ``HasActiveQuotaReservation`` (and not finished): quota held for it."""
    return (
        bool((workload.get("status") or {}).get("admission"))
        and ws.is_true(workload, ws.QUOTA_RESERVED)
        and not ws.is_true(workload, ws.FINISHED)
        and (workload.get("spec") or {}).get("active", True) is not False
    )


class StatefulSetScaling(KeyedReconciler):
    """Puts a managed StatefulSet's Workload on hold at 0 replicas and takes it off hold when
    scaled up again (Kueue's ``statefulset`` reconciler, ``reconcileWorkload``)."""

    what = "statefulset"

    def __init__(
        self,
        kube: Client,
        statefulsets: Informer,
        workloads: Informer,
        clock: Callable[[], float],
        *,
        workers: int = 1,
    ) -> None:
        super().__init__(workers)
        self.kube = kube
        self.statefulsets = self.watch(statefulsets, self._on_statefulset)
        self.workloads = self.watch(workloads, self._on_workload)
        self.clock = clock

    def _on_statefulset(self, event: str, sts: Obj, old: Obj | None) -> None:
        if event != "DELETED":
            self.enqueue(event, sts, old)

    def _on_workload(self, event: str, workload: Obj, old: Obj | None) -> None:
        meta = workload.get("metadata") or {}
        for ref in meta.get("ownerReferences") or []:
            if ref.get("kind") == "StatefulSet" and ref.get("apiVersion") == STATEFUL_SETS.api_version:
                self.queue.add((str(meta.get("namespace", "")), str(ref.get("name", ""))))

    def initial_keys(self) -> list[tuple[str, str]]:
        found = self.statefulsets.list()
        return [(str(s["metadata"].get("namespace", "")), str(s["metadata"]["name"])) for s in found]

    async def reconcile(self, namespace: str, name: str) -> None:
        sts = self.statefulsets.get(namespace, name)
        if sts is None:
            return
        workload = self.workloads.get(namespace, statefulset_workload_name(sts))
        if workload is None:
            return
        replicas = (sts.get("spec") or {}).get("replicas")
        replicas = 1 if replicas is None else int(replicas)
        now = self.clock()
        if replicas == 0 and has_active_reservation(workload):
            reason, message = ws.ON_HOLD, SCALED_TO_ZERO
        elif replicas > 0 and ws.is_on_hold(workload):
            reason, message = "PendingEvaluation", NO_LONGER_ON_HOLD
        else:
            return
        try:
            await update_status(
                self.kube, WORKLOADS, workload, lambda s: ws.unset_reservation(s, reason, message, now)
            )
        except ApiError as exc:
            if not exc.not_found:
                raise
