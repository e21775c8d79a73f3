"""A burst of Jobs against a namespace ResourceQuota, on the local cluster whose quota admission is real.

Every Job's Workload is reserved at once. The check must pass no more than the quota holds
(no Pod it passed is ever refused by the API server) and no fewer (the quota is filled while
work waits). A check without the ledger, given the same burst, over-admits: that run shows the
test can fail.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from fractions import Fraction
from typing import Any

import pytest

from kadmit.checks.plugin import ClusterView
from kadmit.checks.resourcequota import ResourceQuotaCheck
from kadmit.kube.resources import PODS, RESOURCE_QUOTAS
from kadmit.localcluster.sim import JobController, Kubelet, NodeConfig, NodePool, NodeRegistrar, Scheduler
from tests.checks.conftest import JOBS, NAMESPACE, KueueCluster, kueue_cluster
from tests.checks.kueue_standin import KueueStandIn, suspended_job, workload_name

Obj = dict[str, Any]
JOB_COUNT = 9
QUOTA_CPU = 3
RUNTIME = 0.4


class ForgetfulQuotaCheck(ResourceQuotaCheck):
    """The over-admitting design: only what the quota already counts, no ledger of passed workloads."""

    controller_name = "test.kadmit.dev/forgetful-resourcequota"

    def ledger(self, namespace: str, cluster: ClusterView, exclude_uid: str) -> list[Obj]:
        return []


@pytest.fixture
async def burst_cluster() -> AsyncIterator[tuple[KueueCluster, JobController]]:
    nodes = NodeConfig(
        pools=(
            NodePool(
                name="big",
                initial_names=("big-0",),
                max_count=1,
                allocatable={"cpu": "64", "memory": "256Gi", "pods": "110"},
            ),
        )
    )
    jobs = JobController(seed=1)
    async with kueue_cluster([NodeRegistrar(nodes), Scheduler(), Kubelet(RUNTIME), jobs]) as kueue:
        yield kueue, jobs


async def run_burst(kueue: KueueCluster, check: ResourceQuotaCheck) -> tuple[KueueStandIn, int]:
    """Submit the burst, run it to completion; returns the stand-in and the peak of running pods."""
    await kueue.admission_check("rq", check.controller_name)
    await kueue.cluster_queue("cq", [{"name": "rq"}])
    await kueue.create(
        RESOURCE_QUOTAS,
        {
            "metadata": {"name": "team-quota", "namespace": NAMESPACE},
            "spec": {"hard": {"requests.cpu": str(QUOTA_CPU), "limits.cpu": str(QUOTA_CPU), "pods": "10"}},
        },
    )
    pods = await kueue.pool.watch(PODS)
    await pods.wait_synced()
    peak = 0

    def track(*_: object) -> None:
        nonlocal peak
        running = sum(
            1
            for p in pods.list(NAMESPACE)
            if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        )
        peak = max(peak, running)

    pods.add_handler(track)
    standin = KueueStandIn(kueue, "cq")
    await standin.start()
    try:
        async with kueue.running([check], max_concurrency=4):
            await asyncio.gather(
                *(
                    kueue.create(JOBS, suspended_job(f"burst-{i}", runtime=f"{RUNTIME}s"))
                    for i in range(JOB_COUNT)
                )
            )
            for i in range(JOB_COUNT):
                await kueue.wait_for(JOBS, NAMESPACE, f"burst-{i}", job_done, within=30.0)
    finally:
        await standin.stop()
    return standin, peak


def job_done(job: Obj) -> bool:
    return any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or []
    )


async def test_a_burst_never_has_a_passed_pod_refused_and_fills_the_quota(
    burst_cluster: tuple[KueueCluster, JobController],
) -> None:
    kueue, jobs = burst_cluster
    started = asyncio.get_running_loop().time()
    standin, peak = await run_burst(
        kueue, ResourceQuotaCheck(backoff_base_seconds=0.2, backoff_max_seconds=1.0)
    )
    elapsed = asyncio.get_running_loop().time() - started
    refused = [
        r for r in kueue.cluster.requests if r.method == "POST" and "/pods" in r.path and r.status == 403
    ]
    assert jobs.rejected == 0 and refused == []
    assert peak == QUOTA_CPU  # the quota was filled: nothing waited that could have run
    retried = [
        i
        for i in range(JOB_COUNT)
        if any(e.startswith("evicted") for e in standin.history.of(workload_name(f"burst-{i}")))
    ]
    assert len(retried) >= JOB_COUNT - QUOTA_CPU  # the rest were sent back, not let through
    # 9 one-cpu pods through 3 cpus: 3 waves; allow generous room for a shared CI machine.
    assert elapsed < 3 * RUNTIME + 12.0
    quota = await kueue.get(RESOURCE_QUOTAS, NAMESPACE, "team-quota")
    assert Fraction(quota["status"]["used"]["requests.cpu"]) == 0


async def test_without_the_ledger_the_same_burst_over_admits(
    burst_cluster: tuple[KueueCluster, JobController],
) -> None:
    kueue, jobs = burst_cluster
    await run_burst(kueue, ForgetfulQuotaCheck(backoff_base_seconds=0.2, backoff_max_seconds=1.0))
    assert jobs.rejected > 0


async def test_a_scoped_quota_holds_back_only_the_pods_it_charges(
    burst_cluster: tuple[KueueCluster, JobController],
) -> None:
    """Terminating scope (pods with activeDeadlineSeconds): the server and the check must agree."""
    kueue, jobs = burst_cluster
    check = ResourceQuotaCheck(backoff_base_seconds=0.2, backoff_max_seconds=1.0)
    await kueue.admission_check("rq", check.controller_name)
    await kueue.cluster_queue("cq", [{"name": "rq"}])
    await kueue.create(
        RESOURCE_QUOTAS,
        {
            "metadata": {"name": "deadline-pods", "namespace": NAMESPACE},
            "spec": {"hard": {"pods": "1"}, "scopes": ["Terminating"]},
        },
    )
    standin = KueueStandIn(kueue, "cq")
    await standin.start()
    deadline = {"activeDeadlineSeconds": 600}
    names = [f"bounded-{i}" for i in range(3)] + [f"open-{i}" for i in range(3)]
    try:
        async with kueue.running([check], max_concurrency=4):
            await asyncio.gather(
                *(
                    kueue.create(
                        JOBS,
                        suspended_job(
                            name,
                            runtime=f"{RUNTIME}s",
                            extra_spec=deadline if name.startswith("bounded") else None,
                        ),
                    )
                    for name in names
                )
            )
            for name in names:
                await kueue.wait_for(JOBS, NAMESPACE, name, job_done, within=30.0)
    finally:
        await standin.stop()
    assert jobs.rejected == 0
    for name in names:
        evictions = [e for e in standin.history.of(workload_name(name)) if e.startswith("evicted")]
        if name.startswith("open"):
            assert evictions == [], name  # the quota does not charge them: never held back
    assert (
        sum(
            1
            for n in names
            if n.startswith("bounded")
            and any(e.startswith("evicted") for e in standin.history.of(workload_name(n)))
        )
        >= 2
    )
