"""Borrowing within a cohort, a missing WorkloadPriorityClass, and Kueue v1beta1 manifests served
through kadmit's /convert webhook."""

from __future__ import annotations

from typing import Any

import yaml

from kadmit.controller.apply import Applier
from kadmit.kube import Resource
from kadmit.kube.resources import CLUSTER_QUEUES, EVENTS, JOBS, WORKLOADS
from tests.e2e.conftest import Env, WebhookEnv, eventually
from tests.e2e.helpers import apply_small_setup, is_admitted, is_running, job, wait_job, wait_workload

Obj = dict[str, Any]

COHORT = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: cpu}
spec: {nodeLabels: {kadmit.dev/pool: cpu}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-a}
spec:
  cohortName: research
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: cpu
      resources: [{name: cpu, nominalQuota: 2}, {name: memory, nominalQuota: 4Gi}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-b}
spec:
  cohortName: research
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: cpu
      resources: [{name: cpu, nominalQuota: 2}, {name: memory, nominalQuota: 4Gi}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: team-a, namespace: default}
spec: {clusterQueue: team-a}
"""


async def test_a_queue_borrows_unused_quota_from_its_cohort(env: Env) -> None:
    await env.start_manager()
    await env.applier.apply_all([d for d in yaml.safe_load_all(COHORT) if d])
    await env.kube.create(JOBS, job("borrower", cpu="1", parallelism=3, runtime="30s", queue="team-a"))
    await wait_job(env, "borrower", is_running, "running on 3 CPUs with 2 of its own")

    async def borrowed() -> Obj | None:
        cq = await env.kube.get(CLUSTER_QUEUES, None, "team-a")
        for flavor in (cq.get("status") or {}).get("flavorsReservation") or []:
            for resource in flavor["resources"]:
                if resource["name"] == "cpu" and resource.get("borrowed") == "1":
                    return cq
        return None

    cq = await eventually(borrowed, what="team-a's status showing 1 CPU borrowed")
    assert cq["status"]["reservingWorkloads"] == 1


async def test_a_missing_workload_priority_class_holds_the_job_with_an_event(env: Env) -> None:
    await env.start_manager()
    await apply_small_setup(env)
    await env.kube.create(
        JOBS, job("classless", cpu="1", parallelism=1, queue="small", priority_class="nope")
    )

    async def warned() -> bool:
        events = (await env.kube.list(EVENTS, "default"))["items"]
        return any(e["reason"] == "WorkloadPriorityClassNotFound" and "nope" in e["message"] for e in events)

    await eventually(warned, what="a WorkloadPriorityClassNotFound event")
    assert (await env.kube.list(WORKLOADS, "default"))["items"] == []
    await env.applier.apply_all(
        [
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "WorkloadPriorityClass",
                "metadata": {"name": "nope"},
                "value": 5,
            }
        ]
    )
    wl = await wait_workload(env, "classless", is_admitted, "admitted once the class exists")
    assert wl["spec"]["priority"] == 5


V1BETA1 = """
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: legacy}
spec:
  cohort: old-style
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: cpu
      resources: [{name: cpu, nominalQuota: 4}]
"""


async def test_kueue_v1beta1_objects_are_converted_by_kadmits_webhook(kadmit: WebhookEnv) -> None:
    await Applier(kadmit.kube).apply_all(
        [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "cpu"}}]
    )
    await Applier(kadmit.kube).apply_all([d for d in yaml.safe_load_all(V1BETA1) if d])
    stored = await kadmit.kube.get(CLUSTER_QUEUES, None, "legacy")  # read as v1beta2
    assert stored["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    assert stored["spec"]["cohortName"] == "old-style"
    v1beta1 = await kadmit.kube.get(Resource("kueue.x-k8s.io", "v1beta1", "clusterqueues"), None, "legacy")
    assert v1beta1["spec"]["cohort"] == "old-style"
