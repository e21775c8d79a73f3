"""The ``kueue.x-k8s.io/resource-in-use`` finalizer of ClusterQueues and ResourceFlavors.

kadmit's defaulting webhooks put it on every ClusterQueue and ResourceFlavor, as Kueue's do, so
that one is not deleted while something uses it. Kueue's ClusterQueue and ResourceFlavor
controllers lift it once the deleted object is unused; this loop is that part of them:

* a ClusterQueue being deleted keeps the finalizer while a Workload holds a quota reservation in
  it (``status.admission.clusterQueue``, not finished), and loses it after the last one goes;
* a ResourceFlavor being deleted keeps it while a ClusterQueue names it in a resource group.

Without it, ``kubectl delete clusterqueue`` (and the uninstall, which deletes the CRDs and so
their objects) would wait forever.
"""

from __future__ import annotations

import logging

from kadmit import workload as ws
from kadmit.controller.jobs.construct import FINALIZER
from kadmit.kube import Client, Obj
from kadmit.kube.informer import Informer
from kadmit.kube.resources import CLUSTER_QUEUES, RESOURCE_FLAVORS
from kadmit.kube.workers import KeyedReconciler
from kadmit.kube.writes import update, without_finalizer

logger = logging.getLogger(__name__)
CQ = "clusterqueues"
RF = "resourceflavors"


def _terminating(obj: Obj | None) -> bool:
    meta = (obj or {}).get("metadata") or {}
    return bool(meta.get("deletionTimestamp")) and FINALIZER in (meta.get("finalizers") or [])


def _flavors_of(cq: Obj) -> set[str]:
    return {
        str(flavor.get("name"))
        for group in (cq.get("spec") or {}).get("resourceGroups") or []
        for flavor in group.get("flavors") or []
    }


def _reserving_in(wl: Obj) -> str:
    """The ClusterQueue a Workload holds quota in, or ""."""
    if not ws.is_true(wl, ws.QUOTA_RESERVED) or ws.is_true(wl, ws.FINISHED):
        return ""
    return ws.cluster_queue_of(wl) or ""


class InUseFinalizers(KeyedReconciler):
    """Keys are ``(kind, name)``: ``("clusterqueues", cq)`` or ``("resourceflavors", rf)``."""

    what = "in-use-finalizer"

    def __init__(
        self, kube: Client, cluster_queues: Informer, flavors: Informer, workloads: Informer
    ) -> None:
        super().__init__(1)
        self.kube = kube
        self.cluster_queues = self.watch(cluster_queues, self._on_cluster_queue)
        self.flavors = self.watch(flavors, self._on_flavor)
        self.workloads = self.watch(workloads, self._on_workload)

    def initial_keys(self) -> list[tuple[str, str]]:
        keys = [(CQ, cq["metadata"]["name"]) for cq in self.cluster_queues.list() if _terminating(cq)]
        return keys + [(RF, rf["metadata"]["name"]) for rf in self.flavors.list() if _terminating(rf)]

    def _on_cluster_queue(self, event: str, obj: Obj, old: Obj | None) -> None:
        if _terminating(obj):
            self.queue.add((CQ, obj["metadata"]["name"]))
        if (
            event == "DELETED"
            or _terminating(obj)
            or (old is not None and _flavors_of(old) != _flavors_of(obj))
        ):
            for rf in self.flavors.list():
                if _terminating(rf):
                    self.queue.add((RF, rf["metadata"]["name"]))

    def _on_flavor(self, event: str, obj: Obj, old: Obj | None) -> None:
        if _terminating(obj):
            self.queue.add((RF, obj["metadata"]["name"]))

    def _on_workload(self, event: str, obj: Obj, old: Obj | None) -> None:
        for wl in (obj, old):
            name = _reserving_in(wl) if wl is not None else ""
            if name and _terminating(self.cluster_queues.get(None, name)):
                self.queue.add((CQ, name))

    async def reconcile(self, namespace: str, name: str) -> None:
        kind = namespace
        if kind == CQ:
            cq = self.cluster_queues.get(None, name)
            if not _terminating(cq) or any(_reserving_in(wl) == name for wl in self.workloads.list()):
                return
            await self._lift(CQ, cq)
        else:
            rf = self.flavors.get(None, name)
            if not _terminating(rf) or any(name in _flavors_of(cq) for cq in self.cluster_queues.list()):
                return
            await self._lift(RF, rf)

    async def _lift(self, kind: str, obj: Obj | None) -> None:
        assert obj is not None
        resource = CLUSTER_QUEUES if kind == CQ else RESOURCE_FLAVORS
        await update(self.kube, resource, obj, without_finalizer(FINALIZER))
        logger.info(
            "%s %s is no longer in use: finalizer %s removed", kind, obj["metadata"]["name"], FINALIZER
        )
