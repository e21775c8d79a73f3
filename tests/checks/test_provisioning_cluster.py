"""The ProvisioningRequest check with the local cluster's cluster-autoscaler stand-in.

Capacity that can be booked appears as new Nodes and the Job's Pods run there; a pool already
at its maximum fails every request, which retries with growing delays and is then Rejected,
and the Job never starts.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kadmit.checks.provisioning import CONSUME_ANNOTATION, ProvisioningCheck
from kadmit.kube.resources import (
    POD_TEMPLATES,
    PODS,
    PROVISIONING_REQUEST_CONFIGS,
    PROVISIONING_REQUESTS,
    WORKLOADS,
)
from kadmit.localcluster.sim import (
    RUNTIME_ANNOTATION,
    Autoscaler,
    JobController,
    Kubelet,
    NodeConfig,
    NodePool,
    NodeRegistrar,
    Scheduler,
)
from kadmit.workload import is_true
from tests.checks.conftest import JOBS, NAMESPACE, KueueCluster, has_state, kueue_cluster, state_of
from tests.checks.kueue_standin import KueueStandIn, suspended_job, workload_name

Obj = dict[str, Any]
ATOMIC = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
GPU_POOL = NodePool(
    name="gpu",
    initial_names=(),
    max_count=2,
    allocatable={"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "4", "pods": "110"},
)
CPU_POOL = NodePool(
    name="cpu",
    initial_names=("cpu-0",),
    max_count=1,
    allocatable={"cpu": "8", "memory": "32Gi", "pods": "110"},
)


@pytest.fixture
def booking_expiry() -> float:
    return 30.0


@pytest.fixture
async def autoscaled(booking_expiry: float) -> AsyncIterator[tuple[KueueCluster, Autoscaler]]:
    config = NodeConfig(pools=(CPU_POOL, GPU_POOL))
    autoscaler = Autoscaler(config, booking_expiry=booking_expiry)
    addons = [NodeRegistrar(config), Scheduler(), Kubelet(0.3), JobController(seed=2), autoscaler]
    async with kueue_cluster(addons) as kueue:
        yield kueue, autoscaler


async def setup_queue(kueue: KueueCluster, retry: Obj | None = None, hold: bool = False) -> None:
    await kueue.create(
        PROVISIONING_REQUEST_CONFIGS,
        {
            "metadata": {"name": "prov-config"},
            "spec": {
                "provisioningClassName": ATOMIC,
                "managedResources": ["nvidia.com/gpu"],
                "retryStrategy": retry
                or {"backoffLimitCount": 2, "backoffBaseSeconds": 1, "backoffMaxSeconds": 10},
            },
        },
    )
    await kueue.admission_check(
        "prov",
        "kueue.x-k8s.io/provisioning-request",
        {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": "prov-config"},
    )
    checks = [{"name": "prov"}]
    if hold:  # a second check that never passes: the workload is never admitted
        await kueue.admission_check("hold", "example.com/nobody-answers")
        checks.append({"name": "hold"})
    await kueue.cluster_queue("cq", checks)


def gpu_job(name: str, gpus_per_pod: int, pods: int = 2) -> Obj:
    job = suspended_job(name, runtime="0.3s", parallelism=pods)
    job["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "1", "nvidia.com/gpu": str(gpus_per_pod)},
        "limits": {"cpu": "1", "nvidia.com/gpu": str(gpus_per_pod)},
    }
    return job


def job_complete(job: Obj) -> bool:
    return any(
        c.get("type") == "Complete" and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or []
    )


async def test_booked_capacity_appears_and_the_pods_run_on_the_new_nodes(
    autoscaled: tuple[KueueCluster, Autoscaler],
) -> None:
    kueue, autoscaler = autoscaled
    await setup_queue(kueue)
    standin = KueueStandIn(kueue, "cq")
    await standin.start()
    try:
        async with kueue.running([ProvisioningCheck()]):
            await kueue.create(JOBS, gpu_job("train", gpus_per_pod=3))
            name = workload_name("train")
            ready = await kueue.wait_for(WORKLOADS, NAMESPACE, name, has_state("prov", "Ready"), within=20.0)
            request = await kueue.get(PROVISIONING_REQUESTS, NAMESPACE, f"{name}-prov-1")
            template = await kueue.get(POD_TEMPLATES, NAMESPACE, f"ppt-{name}-prov-1-main")
            await kueue.wait_for(JOBS, NAMESPACE, "train", job_complete, within=20.0)
            pods = [
                p
                for p in await kueue.listed(PODS, NAMESPACE)
                if (p["metadata"].get("labels") or {}).get("job-name") == "train"
                or (p["metadata"].get("labels") or {}).get("batch.kubernetes.io/job-name") == "train"
            ]
            await kueue.set_condition(WORKLOADS, NAMESPACE, name, {"type": "Finished", "status": "True"})
            # Finished: its request is cleaned up.
            await kueue.wait_gone(PROVISIONING_REQUESTS, NAMESPACE, f"{name}-prov-1")
    finally:
        await standin.stop()

    entry = state_of(ready, "prov") or {}
    assert entry["message"].startswith("Provisioning Request was successfully provisioned")
    assert entry["podSetUpdates"] == [
        {
            "name": "main",
            "annotations": {
                CONSUME_ANNOTATION: f"{name}-prov-1",
                "autoscaling.x-k8s.io/provisioning-class-name": ATOMIC,
            },
        }
    ]
    # Kueue's shape: class, count, template reference, managed label, owned by the Workload.
    assert request["spec"]["provisioningClassName"] == ATOMIC
    assert request["spec"]["podSets"] == [{"podTemplateRef": {"name": f"ppt-{name}-prov-1-main"}, "count": 2}]
    assert request["metadata"]["labels"] == {"kueue.x-k8s.io/managed": "true"}
    assert request["metadata"]["ownerReferences"][0]["kind"] == "Workload"
    # The template was created first, then handed to the request (Kueue #3957).
    posts = [
        r.path
        for r in kueue.cluster.requests
        if r.method == "POST" and ("/podtemplates" in r.path or "/provisioningrequests" in r.path)
    ]
    assert posts[0].endswith("/podtemplates") and posts[1].endswith("/provisioningrequests")
    assert [ref["kind"] for ref in template["metadata"]["ownerReferences"]] == ["ProvisioningRequest"]
    # The pods consumed the booking and ran on the Nodes the autoscaler added for it.
    assert len(pods) == 2 and autoscaler.nodes_added
    assert {p["spec"]["nodeName"] for p in pods} <= set(autoscaler.nodes_added)
    assert all(p["metadata"]["annotations"][CONSUME_ANNOTATION] == f"{name}-prov-1" for p in pods)


async def test_a_pool_at_its_maximum_fails_retries_with_growing_delays_then_rejects(
    autoscaled: tuple[KueueCluster, Autoscaler],
) -> None:
    kueue, autoscaler = autoscaled
    await setup_queue(kueue)
    standin = KueueStandIn(kueue, "cq")
    await standin.start()
    name = workload_name("huge")
    try:
        async with kueue.running([ProvisioningCheck()]):
            # 3 pods of 4 GPUs: the pool can grow to 2 Nodes of 4 GPUs, never 3.
            await kueue.create(JOBS, gpu_job("huge", gpus_per_pod=4, pods=3))
            rejected = await kueue.wait_for(
                WORKLOADS, NAMESPACE, name, lambda wl: wl["spec"].get("active") is False, within=25.0
            )
            job = await kueue.get(JOBS, NAMESPACE, "huge")
            # Evicted on each retry, then deactivated: no request or template is left behind.
            for attempt in (1, 2, 3):
                await kueue.wait_gone(PROVISIONING_REQUESTS, NAMESPACE, f"{name}-prov-{attempt}")
            assert await kueue.listed(POD_TEMPLATES, NAMESPACE) == []
    finally:
        await standin.stop()
    history = standin.history.of(name)
    assert [e for e in history if e.startswith("evicted")] == ["evicted after 1s", "evicted after 2s"]
    assert "admitted" not in history
    entry = state_of(rejected, "prov") or {}
    assert entry["state"] == "Rejected" and "Cannot provision 3 pods" in entry["message"]
    created = [
        json.loads(r.body)["metadata"]["name"]
        for r in kueue.cluster.requests
        if r.method == "POST" and r.path.endswith("/provisioningrequests") and r.status == 201
    ]
    assert created == [f"{name}-prov-1", f"{name}-prov-2", f"{name}-prov-3"]  # backoffLimitCount + 1 attempts
    assert job["spec"]["suspend"] is True and not autoscaler.nodes_added
    assert await kueue.listed(PODS, NAMESPACE) == []


async def test_capacity_revoked_after_admission_rejects_the_check(
    autoscaled: tuple[KueueCluster, Autoscaler],
) -> None:
    kueue, autoscaler = autoscaled
    await setup_queue(kueue)
    standin = KueueStandIn(kueue, "cq")
    await standin.start()
    name = workload_name("long")
    try:
        async with kueue.running([ProvisioningCheck()]):
            job = gpu_job("long", gpus_per_pod=1, pods=1)
            job["spec"]["template"]["metadata"]["annotations"][RUNTIME_ANNOTATION] = "30s"
            await kueue.create(JOBS, job)
            await kueue.wait_for(
                WORKLOADS, NAMESPACE, name, lambda wl: is_true(wl, "Admitted"), within=20.0
            )
            await autoscaler.revoke(NAMESPACE, f"{name}-prov-1", message="the VMs were reclaimed")
            rejected = await kueue.wait_for(WORKLOADS, NAMESPACE, name, has_state("prov", "Rejected"))
            await kueue.wait_for(WORKLOADS, NAMESPACE, name, lambda wl: wl["spec"].get("active") is False)
    finally:
        await standin.stop()
    assert (state_of(rejected, "prov") or {})["message"] == "the VMs were reclaimed"


@pytest.mark.parametrize("booking_expiry", [0.5])
async def test_a_booking_that_expires_before_admission_is_retried_then_rejected(
    autoscaled: tuple[KueueCluster, Autoscaler],
) -> None:
    kueue, _ = autoscaled
    await setup_queue(kueue, retry={"backoffLimitCount": 1, "backoffBaseSeconds": 0}, hold=True)
    standin = KueueStandIn(kueue, "cq")
    await standin.start()
    name = workload_name("unused")
    try:
        async with kueue.running([ProvisioningCheck()]):
            await kueue.create(JOBS, gpu_job("unused", gpus_per_pod=1, pods=1))
            rejected = await kueue.wait_for(
                WORKLOADS, NAMESPACE, name, has_state("prov", "Rejected"), within=20.0
            )
    finally:
        await standin.stop()
    history = standin.history.of(name)
    assert [e for e in history if e.startswith("evicted")] == ["evicted after 0s"]
    assert (state_of(rejected, "prov") or {})["message"].startswith(
        "Capacity booking for the Provisioning Request has expired"
    )
    retried = [
        r for r in kueue.cluster.requests if r.method == "POST" and r.path.endswith("/provisioningrequests")
    ]
    assert len(retried) == 2  # attempt 1 expired and was retried; attempt 2 expired past the limit
