"""After a restart, the ResourceQuota check's ledger comes back from the admitted Workloads."""

from __future__ import annotations

from kadmit.checks.resourcequota import ResourceQuotaCheck
from kadmit.kube.resources import RESOURCE_QUOTAS, WORKLOADS
from tests.checks.conftest import JOBS, NAMESPACE, KueueCluster, has_state, state_of
from tests.checks.kueue_standin import suspended_job


async def test_a_restarted_check_still_counts_workloads_passed_before_it_whose_pods_do_not_exist(
    kueue: KueueCluster,
) -> None:
    await kueue.admission_check("rq", "kadmit.dev/resourcequota")
    await kueue.cluster_queue("cq", [{"name": "rq"}])
    await kueue.create(
        RESOURCE_QUOTAS,
        {
            "metadata": {"name": "team-quota", "namespace": NAMESPACE},
            "spec": {"hard": {"requests.cpu": "3", "limits.cpu": "3"}},
        },
    )
    job = await kueue.create(JOBS, suspended_job("owner", parallelism=2))  # no Job controller: no pods
    passed = await kueue.workload("passed", pods=2, owner=job)
    async with kueue.running([ResourceQuotaCheck()]):
        await kueue.reserve(passed, "cq")
        await kueue.wait_for(WORKLOADS, NAMESPACE, "passed", has_state("rq", "Ready"))
    # A new process: nothing in memory, no pod of "passed" exists yet.
    late = await kueue.workload("late", pods=2)
    small = await kueue.workload("small", pods=1)
    async with kueue.running([ResourceQuotaCheck()]):
        await kueue.reserve(late, "cq")
        retried = await kueue.wait_for(WORKLOADS, NAMESPACE, "late", has_state("rq", "Retry"))
        await kueue.reserve(small, "cq")
        await kueue.wait_for(WORKLOADS, NAMESPACE, "small", has_state("rq", "Ready"))
    entry = state_of(retried, "rq") or {}
    assert entry["message"] == (
        'ResourceQuota "team-quota": limits.cpu short by 1 (needs 2, hard 3, used 0, reserved 2), '
        "requests.cpu short by 1 (needs 2, hard 3, used 0, reserved 2)"
    )
    assert entry["requeueAfterSeconds"] == 1
