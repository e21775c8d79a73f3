"""The webhooks' view of the cluster (:class:`kadmit.webhook.jobs.ClusterView`), answered from the informers.

An admission request must never wait on the API server it is serving, so every answer comes
from the caches the manager already keeps.
"""

from __future__ import annotations

from collections.abc import Mapping

from kadmit import workload as ws
from kadmit.controller.jobs.construct import JOB_UID_LABEL
from kadmit.kube import Obj
from kadmit.kube.informer import Informer
from kadmit.kube.objects import OWNER_INDEX


class InformerClusterView:
    def __init__(self, local_queues: Informer, admission_checks: Informer, cluster_queues: Informer,
                 workload_priority_classes: Informer, namespaces: Informer, workloads: Informer) -> None:
        self.local_queues = local_queues
        self.admission_checks = admission_checks
        self.cluster_queues = cluster_queues
        self.workload_priority_classes = workload_priority_classes
        self.namespaces = namespaces
        self.workloads = workloads

    async def local_queue_exists(self, namespace: str, name: str) -> bool:
        return self.local_queues.get(namespace, name) is not None

    async def cluster_queue_of(self, namespace: str, local_queue: str) -> str | None:
        lq = self.local_queues.get(namespace, local_queue)
        if lq is None:
            return None
        return str((lq.get("spec") or {}).get("clusterQueue") or "") or None

    async def admission_check_controllers(self, cluster_queue: str) -> list[str]:
        cq = self.cluster_queues.get(None, cluster_queue)
        if cq is None:
            return []
        spec = cq.get("spec") or {}
        strategy = spec.get("admissionChecksStrategy") or {}
        names = [c.get("name", "") for c in strategy.get("admissionChecks") or []]
        names += list(spec.get("admissionChecks") or [])  # v1beta1 objects served as stored
        controllers: list[str] = []
        for name in names:
            check = self.admission_checks.get(None, name)
            if check is not None:
                controllers.append(str((check.get("spec") or {}).get("controllerName", "")))
        return controllers

    async def workload_priority_class_exists(self, name: str) -> bool:
        return self.workload_priority_classes.get(None, name) is not None

    async def namespace_labels(self, namespace: str) -> Mapping[str, str] | None:
        ns = self.namespaces.get(None, namespace)
        if ns is None:
            return None
        return dict(ns.get("metadata", {}).get("labels") or {})

    async def job_workload(self, namespace: str, job_name: str, job_uid: str) -> Obj | None:
        """By owner uid, so it answers for every job kind (a Job, a JobSet): a Workload's
        controller ownerReference is its job, whatever the kind. Of several (an elastic job's
        Workload slices), an admitted one."""
        if job_uid:
            owned = [w for w in self.workloads.by_index(OWNER_INDEX, job_uid)
                     if w["metadata"].get("namespace") == namespace]
            if owned:
                running = [w for w in owned if ws.is_admitted(w) and not ws.is_true(w, ws.FINISHED)]
                return (running or owned)[0]
            for workload in self.workloads.list(namespace):
                if (workload["metadata"].get("labels") or {}).get(JOB_UID_LABEL) == job_uid:
                    return workload
        return None
