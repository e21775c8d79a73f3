"""Objects and queries the end-to-end tests share."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kadmit.controller.apply import Applier
from kadmit.kube import Client
from kadmit.kube.resources import EVENTS, WORKLOADS
from tests.e2e.conftest import Env

Obj = dict[str, Any]


def job(name: str, *, cpu: str = "1", parallelism: int = 2, runtime: str = "200ms", queue: str = "default",
        priority_class: str | None = None, gpu: int = 0) -> Obj:
    labels = {"kueue.x-k8s.io/queue-name": queue}
    if priority_class:
        labels["kueue.x-k8s.io/priority-class"] = priority_class
    requests: dict[str, Any] = {"cpu": cpu, "memory": "100Mi"}
    if gpu:
        requests["nvidia.com/gpu"] = str(gpu)
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {"parallelism": parallelism, "completions": parallelism, "suspend": True,
                 "template": {"metadata": {"annotations": {"localcluster.kadmit.dev/runtime": runtime}},
                              "spec": {"restartPolicy": "Never",
                                       "containers": [{"name": "main", "image": "busybox",
                                                       "resources": {"requests": requests}}]}}},
    }


def condition(obj: Obj, kind: str) -> str | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return str(c.get("status"))
    return None


async def workload_of(env: Env, name: str) -> Obj | None:
    listing = await env.kube.list(WORKLOADS, "default")
    for wl in listing["items"]:
        if any(ref.get("name") == name for ref in wl["metadata"].get("ownerReferences") or []):
            return wl  # type: ignore[no-any-return]
    return None


SMALL_SETUP = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: cpu}
spec:
  nodeLabels: {kadmit.dev/pool: cpu}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: small}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: cpu
      resources:
      - {name: cpu, nominalQuota: 4}
      - {name: memory, nominalQuota: 10Gi}
  preemption:
    withinClusterQueue: LowerPriority
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: small, namespace: default}
spec: {clusterQueue: small}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: low}
value: 10
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: high}
value: 1000
"""


async def apply_small_setup(target: Env | Client) -> None:
    import yaml

    kube = target.kube if isinstance(target, Env) else target
    await Applier(kube).apply_all([d for d in yaml.safe_load_all(SMALL_SETUP) if d])


def condition_of(obj: Obj, kind: str) -> Obj | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return c  # type: ignore[no-any-return]
    return None


async def wait_workload(env: Env, job_name: str, predicate: Any, what: str, within: float = 30.0) -> Obj:
    from tests.e2e.conftest import eventually

    async def check() -> Obj | None:
        wl = await workload_of(env, job_name)
        return wl if wl is not None and predicate(wl) else None

    result: Obj = await eventually(check, within=within, what=f"{job_name}: {what}")
    return result


async def wait_job(env: Env, name: str, predicate: Any, what: str, within: float = 30.0) -> Obj:
    from kadmit.kube.resources import JOBS
    from tests.e2e.conftest import eventually

    async def check() -> Obj | None:
        current = await env.kube.get(JOBS, "default", name)
        return current if predicate(current) else None

    result: Obj = await eventually(check, within=within, what=f"job {name}: {what}")
    return result


def is_admitted(wl: Obj) -> bool:
    return condition(wl, "Admitted") == "True"


def is_complete(job_obj: Obj) -> bool:
    return condition(job_obj, "Complete") == "True"


def is_running(job_obj: Obj) -> bool:
    return job_obj["spec"].get("suspend") is False


def is_stopped(job_obj: Obj) -> bool:
    """Suspended, and done stopping (kadmit has put the template back)."""
    annotations = job_obj["metadata"].get("annotations") or {}
    return job_obj["spec"].get("suspend") is True and "kueue.x-k8s.io/stopping" not in annotations


async def quota_released(kube: Client, cluster_queue: str = "small") -> bool:
    """Whether ``cluster_queue`` has no admitted or reserving Workloads left."""
    from kadmit.kube.resources import CLUSTER_QUEUES

    status = (await kube.get(CLUSTER_QUEUES, None, cluster_queue)).get("status") or {}
    return status.get("admittedWorkloads") == 0 and status.get("reservingWorkloads") == 0


async def workload_event(
    kube: Client, reason: str, about: Callable[[Obj], bool], namespace: str = "default"
) -> Obj | None:
    """The first Event of ``reason`` about a Workload ``about`` accepts (given the Event's
    ``involvedObject``). A plain Pod's Workload is gone soon after the Pod, with its conditions;
    what kadmit told about it stays."""
    for event in (await kube.list(EVENTS, namespace))["items"]:
        involved = event["involvedObject"]
        if involved["kind"] == "Workload" and event["reason"] == reason and about(involved):
            return dict(event)
    return None
