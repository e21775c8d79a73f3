"""``kueue.x-k8s.io/max-exec-time-seconds``: a Job running past it is stopped and its Workload
deactivated (contract §2.3)."""

from __future__ import annotations

from typing import Any

from kadmit.kube.resources import EVENTS, JOBS
from tests.e2e.conftest import Env
from tests.e2e.helpers import (
    apply_small_setup,
    condition_of,
    is_stopped,
    job,
    wait_job,
    wait_workload,
)


async def test_a_job_past_its_maximum_execution_time_is_deactivated(env: Env) -> None:
    await env.start_manager()
    await apply_small_setup(env)
    long = job("long", cpu="1", parallelism=1, runtime="30s", queue="small")
    long["metadata"]["labels"]["kueue.x-k8s.io/max-exec-time-seconds"] = "1"
    await env.kube.create(JOBS, long)
    # It runs for only a second, which a busy machine's polls may miss: its Started event stays.

    def deactivated(wl: dict[str, Any]) -> bool:
        evicted = condition_of(wl, "Evicted")
        return wl["spec"].get("active") is False and evicted is not None and evicted["status"] == "True"

    wl = await wait_workload(env, "long", deactivated, "deactivated after 1 s of execution")
    assert wl["spec"]["maximumExecutionTimeSeconds"] == 1
    evicted = condition_of(wl, "Evicted")
    assert evicted is not None and evicted["reason"] == "DeactivatedDueToMaximumExecutionTimeExceeded"
    assert evicted["message"] == "The workload is deactivated due to exceeding the maximum execution time"
    assert condition_of(wl, "DeactivationTarget") is None
    await wait_job(env, "long", is_stopped, "stopped")
    started = [
        e
        for e in (await env.kube.list(EVENTS, "default"))["items"]
        if e["reason"] == "Started" and e["involvedObject"]["kind"] == "Job"
    ]
    assert [(e["involvedObject"]["name"], e["message"]) for e in started] == [
        ("long", "Admitted by clusterQueue small")
    ]
