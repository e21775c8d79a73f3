"""``kueue.x-k8s.io/max-exec-time-seconds``: a Job running past it is stopped and its Workload
deactivated (contract §2.3)."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from kadmit.kube.resources import EVENTS, JOBS, WORKLOADS
from tests.e2e.conftest import Env, eventually, fast_config
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


async def test_with_after_deactivated_by_kueue_the_deactivated_job_is_deleted(env: Env) -> None:
    """``objectRetentionPolicies.workloads.afterDeactivatedByKueue``: the Job kadmit deactivated is
    deleted (its Workload with it, by the garbage collector), with Kueue's event; a Job its user
    deactivated is kept."""
    await env.start_manager(dataclasses.replace(fast_config(), delete_deactivated_workloads_after=0.5))
    await apply_small_setup(env)
    long = job("long", cpu="1", parallelism=1, runtime="30s", queue="small")
    long["metadata"]["labels"]["kueue.x-k8s.io/max-exec-time-seconds"] = "1"
    await env.kube.create(JOBS, long)
    await env.kube.create(JOBS, job("kept", cpu="1", parallelism=1, runtime="30s", queue="small"))
    kept = await wait_workload(env, "kept", lambda wl: condition_of(wl, "Admitted") is not None, "admitted")
    await env.kube.patch(WORKLOADS, "default", kept["metadata"]["name"], {"spec": {"active": False}})

    async def gone() -> bool:
        return await env.kube.get_or_none(JOBS, "default", "long") is None

    async def deleted_events() -> list[tuple[str, str]]:
        return [
            (e["involvedObject"]["name"], e["message"])
            for e in (await env.kube.list(EVENTS, "default"))["items"]
            if e["reason"] == "Deleted" and e["involvedObject"]["kind"] == "Job"
        ]

    await eventually(gone, within=30, what="the deactivated Job deleted")
    # Events are written in the background, after the delete: wait for it rather than race it.
    await eventually(deleted_events, within=10, what="the Deleted event")
    await wait_job(env, "kept", is_stopped, "stopped by its user's deactivation")
    await asyncio.sleep(1.0)  # past the retention: a user's deactivation is not kadmit's
    assert await env.kube.get_or_none(JOBS, "default", "kept") is not None
    assert await deleted_events() == [("long", "Deleted job: deactivation retention period expired")]
