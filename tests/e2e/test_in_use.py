"""The in-use finalizer kadmit's webhooks put on ClusterQueues and ResourceFlavors: a deleted one
stays (Terminating) while used, and goes once the last Workload holding quota in it finishes."""

from __future__ import annotations

import asyncio

from kadmit.kube.resources import CLUSTER_QUEUES, JOBS, RESOURCE_FLAVORS
from tests.e2e.conftest import WebhookEnv, eventually
from tests.e2e.helpers import apply_small_setup, condition, job


async def test_a_deleted_cluster_queue_and_flavor_wait_for_their_workloads(kadmit: WebhookEnv) -> None:
    kube = kadmit.kube
    await apply_small_setup(kube)
    cq = await kube.get(CLUSTER_QUEUES, None, "small")
    assert "kueue.x-k8s.io/resource-in-use" in cq["metadata"]["finalizers"]
    await kube.create(JOBS, job("busy", cpu="1", parallelism=1, runtime="2s", queue="small"))

    async def running() -> bool:
        return (await kube.get(JOBS, "default", "busy"))["spec"].get("suspend") is False

    await eventually(running, what="the Job admitted and started")
    await kube.delete(CLUSTER_QUEUES, None, "small")
    await kube.delete(RESOURCE_FLAVORS, None, "cpu")
    await asyncio.sleep(0.5)
    held = await kube.get(CLUSTER_QUEUES, None, "small")
    assert held["metadata"].get("deletionTimestamp")  # Terminating: a Workload holds quota in it
    flavor = await kube.get(RESOURCE_FLAVORS, None, "cpu")
    assert flavor["metadata"].get("deletionTimestamp")  # the ClusterQueue still names it

    async def complete() -> bool:
        return condition(await kube.get(JOBS, "default", "busy"), "Complete") == "True"

    await eventually(complete, within=20, what="the Job done")

    async def gone() -> bool:
        return (
            not (await kube.list(CLUSTER_QUEUES))["items"]
            and not (await kube.list(RESOURCE_FLAVORS))["items"]
        )

    await eventually(gone, what="the ClusterQueue, then the ResourceFlavor, released and deleted")
