"""Kinds that ride on pod groups (Kueue's ``statefulset`` and ``leaderworkerset``): a labeller
that makes each gated Pod of a managed parent a member of the parent's pod group.

The parent's webhook marks its pod templates (``kueue.x-k8s.io/pod-suspending-parent:
<framework>``), so the Pod webhook gates every Pod the parent's controller creates. The labeller
then names the group each Pod belongs to, as Kueue's per-kind Pod reconcilers do, and makes the
parent an owner of the group's Workload, so that the Workload (its admission, its requeue state)
outlives Pods deleted on preemption and created again by the parent. What differs per kind is a
:class:`ParentKind`: which Pods are its, the group's Workload name and the labels it adds. From
then on the Pods are the pod integration's.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod

from kadmit.kube import Client, Obj, Resource
from kadmit.kube.informer import Informer
from kadmit.kube.objects import controller_of
from kadmit.kube.resources import PODS, WORKLOADS
from kadmit.kube.workers import KeyedReconciler
from kadmit.kube.writes import replaced_by, update_unless_gone
from kadmit.webhook.objects import metadata_of as _meta
from kadmit.webhook.pods import GROUP_NAME_LABEL, SUSPENDED_BY_PARENT_ANNOTATION

logger = logging.getLogger(__name__)


class ParentKind(ABC):
    """One kind of parent whose Pods form pod groups."""

    framework: str  # the value of kueue.x-k8s.io/pod-suspending-parent, the integrations.frameworks name
    resource: Resource
    pod_selector: str  # a label every Pod of this kind carries (what the Pod informer watches)

    @abstractmethod
    def workload_name(self, parent: Obj, pod: Obj) -> str | None:
        """The Workload (and group) ``pod`` belongs to, or None while the Pod cannot say yet."""

    @abstractmethod
    def grouped(self, pod: Obj, parent: Obj, manage_without_queue: bool) -> Obj | None:
        """``pod`` labelled as a member of its group, or None when nothing changes."""


class ParentPodLabeller(KeyedReconciler):
    """Names the pod group of each gated Pod of a managed parent of one :class:`ParentKind`."""

    def __init__(
        self,
        kind: ParentKind,
        kube: Client,
        pods: Informer,
        parents: Informer,
        workloads: Informer,
        manage_without_queue: bool,
        *,
        workers: int = 2,
    ) -> None:
        self.what = f"{kind.framework}-pod"
        super().__init__(workers)
        self.kind = kind
        self.kube = kube
        self.pods = self.watch(pods, self._on_pod)
        self.parents = self.watch(parents, self._on_parent)
        self.workloads = self.watch(workloads, self._on_workload)
        self.manage_without_queue = manage_without_queue

    def _mine(self, pod: Obj) -> bool:
        return (_meta(pod).get("annotations") or {}).get(
            SUSPENDED_BY_PARENT_ANNOTATION
        ) == self.kind.framework

    def _owner(self, pod: Obj) -> str | None:
        ref = controller_of(pod)
        if (
            ref is not None
            and ref.get("kind") == self.kind.resource.kind
            and ref.get("apiVersion") == self.kind.resource.api_version
        ):
            return str(ref.get("name"))
        return None

    def _on_pod(self, event: str, pod: Obj, old: Obj | None) -> None:
        if event != "DELETED" and self._mine(pod):
            self.queue.add((_meta(pod).get("namespace", ""), _meta(pod)["name"]))

    def _on_parent(self, event: str, parent: Obj, old: Obj | None) -> None:
        namespace = _meta(parent).get("namespace", "")
        for pod in self.pods.list(namespace):
            if self._owner(pod) == _meta(parent)["name"]:
                self.queue.add((namespace, _meta(pod)["name"]))

    def _on_workload(self, event: str, workload: Obj, old: Obj | None) -> None:
        if event != "ADDED":
            return
        namespace = _meta(workload).get("namespace", "")
        for pod in self.pods.list(namespace):
            if (_meta(pod).get("labels") or {}).get(GROUP_NAME_LABEL) == _meta(workload)["name"]:
                self.queue.add((namespace, _meta(pod)["name"]))

    def initial_keys(self) -> list[tuple[str, str]]:
        return [(_meta(p).get("namespace", ""), _meta(p)["name"]) for p in self.pods.list() if self._mine(p)]

    async def reconcile(self, namespace: str, name: str) -> None:
        pod = self.pods.get(namespace, name)
        if pod is None or not self._mine(pod) or _meta(pod).get("deletionTimestamp"):
            return
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return
        owner = self._owner(pod)
        parent = self.parents.get(namespace, owner) if owner else None
        if parent is None:
            return
        kind = self.kind
        label = replaced_by(lambda obj: kind.grouped(obj, parent, self.manage_without_queue))
        await update_unless_gone(self.kube, PODS, pod, label)
        workload_name = kind.workload_name(parent, pod)
        if workload_name:
            await self._own_workload(parent, workload_name)

    async def _own_workload(self, parent: Obj, workload_name: str) -> None:
        meta = _meta(parent)
        workload = self.workloads.get(meta.get("namespace", ""), workload_name)
        if workload is None or any(
            r.get("uid") == meta.get("uid") for r in _meta(workload).get("ownerReferences") or []
        ):
            return
        reference = {
            "apiVersion": self.kind.resource.api_version,
            "kind": self.kind.resource.kind,
            "name": meta["name"],
            "uid": meta["uid"],
        }

        def own(obj: Obj) -> bool:
            refs = list(obj["metadata"].get("ownerReferences") or [])
            if any(r.get("uid") == reference["uid"] for r in refs):
                return False
            obj["metadata"]["ownerReferences"] = [*refs, reference]
            return True

        await update_unless_gone(self.kube, WORKLOADS, workload, own)
