"""Elastic Jobs (``kueue.x-k8s.io/elastic-job: "true"``) through the API on a local cluster: a
running Job scaled down keeps running on the same admitted Workload, which takes the smaller
count in place, and the quota it gives back admits a waiting Job."""

from __future__ import annotations

from kadmit.kube.resources import JOBS
from tests.e2e.conftest import Env
from tests.e2e.helpers import condition, is_running, job, wait_job, wait_workload, workload_of
from tests.e2e.test_kueue_semantics import _cq, _flavor, _lq


async def test_scaling_a_running_elastic_job_down_gives_quota_back(env: Env) -> None:
    await env.start_manager()
    await env.applier.apply_all([_flavor(), _cq("elastic", 4), _lq("elastic", "elastic")])
    big = job("big", cpu="1", parallelism=4, runtime="60s", queue="elastic")
    big["metadata"]["annotations"] = {"kueue.x-k8s.io/elastic-job": "true"}
    await env.kube.create(JOBS, big)
    await wait_job(env, "big", is_running, "admitted: 4 cpu of 4")
    admitted = await workload_of(env, "big")
    assert admitted is not None
    await env.kube.create(JOBS, job("next", cpu="1", parallelism=2, runtime="60s", queue="elastic"))
    await wait_workload(
        env, "next", lambda w: condition(w, "QuotaReserved") == "False", "waits: no quota left"
    )

    await env.kube.patch(JOBS, "default", "big", {"spec": {"parallelism": 2}})
    await wait_job(env, "next", is_running, "admitted with the 2 cpu big gave back", within=20)
    scaled = await workload_of(env, "big")
    assert scaled is not None
    assert scaled["metadata"]["uid"] == admitted["metadata"]["uid"], "the same Workload, not a new one"
    assert scaled["spec"]["podSets"][0]["count"] == 2
    assert condition(scaled, "Admitted") == "True"
    assert (await env.kube.get(JOBS, "default", "big"))["spec"]["suspend"] is False, "big keeps running"
