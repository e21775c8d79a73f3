"""An in-memory :class:`kadmit.webhook.jobs.ClusterView`, as the controller's caches would answer."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass
class MemoryView:
    local_queues: dict[tuple[str, str], str] = field(default_factory=dict)  # (ns, lq) -> cq
    cluster_queue_checks: dict[str, list[str]] = field(default_factory=dict)  # cq -> controller names
    priority_classes: set[str] = field(default_factory=set)
    namespaces: dict[str, dict[str, str]] = field(default_factory=dict)
    workloads: dict[str, dict[str, Any]] = field(default_factory=dict)  # job uid -> workload

    async def local_queue_exists(self, namespace: str, name: str) -> bool:
        return (namespace, name) in self.local_queues

    async def cluster_queue_of(self, namespace: str, local_queue: str) -> str | None:
        return self.local_queues.get((namespace, local_queue))

    async def admission_check_controllers(self, cluster_queue: str) -> list[str]:
        return list(self.cluster_queue_checks.get(cluster_queue, []))

    async def workload_priority_class_exists(self, name: str) -> bool:
        return name in self.priority_classes

    async def namespace_labels(self, namespace: str) -> Mapping[str, str] | None:
        return self.namespaces.get(namespace)

    async def job_workload(self, namespace: str, job_name: str, job_uid: str) -> dict[str, Any] | None:
        return self.workloads.get(job_uid)


def admitted_workload(admitted: bool = True, evicted: bool = False) -> dict[str, Any]:
    """A Workload as kadmit writes it: admitted (with its admission) or not, and perhaps being evicted."""
    conditions = [{"type": "Admitted", "status": "True" if admitted else "False"}]
    if evicted:
        conditions.append({"type": "Evicted", "status": "True", "reason": "Preempted"})
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "status": {"admission": {"clusterQueue": "cq", "podSetAssignments": []}, "conditions": conditions},
    }
