"""Which Jobs kadmit manages (contract §4.1): the queue-name label, manageJobsWithoutQueueName, and
managedJobsNamespaceSelector — without the webhook, so the reconciler's own rules are what is tested."""

from __future__ import annotations

import asyncio
import dataclasses

from kadmit.controller import local_setup
from kadmit.kube.resources import JOBS, WORKLOADS
from tests.e2e.conftest import Env, fast_config
from tests.e2e.helpers import apply_small_setup, condition_of, is_complete, job, wait_job, wait_workload


def unlabelled(name: str, namespace: str = "default") -> dict:  # type: ignore[type-arg]
    made = job(name, cpu="1", parallelism=1, queue="")
    made["metadata"]["labels"] = {}
    made["metadata"]["namespace"] = namespace
    made["spec"]["suspend"] = False
    return made


async def test_jobs_without_a_queue_are_left_alone_by_default(env: Env) -> None:
    await env.start_manager()
    await env.kube.create(JOBS, unlabelled("free"))
    await wait_job(env, "free", is_complete, "run to completion untouched")
    assert (await env.kube.list(WORKLOADS, "default"))["items"] == []


async def test_manage_jobs_without_queue_name_suspends_them(env: Env) -> None:
    await env.start_manager(dataclasses.replace(fast_config(), manage_jobs_without_queue_name=True))
    await apply_small_setup(env)
    await env.kube.create(JOBS, unlabelled("caught"))
    wl = await wait_workload(
        env,
        "caught",
        lambda w: condition_of(w, "QuotaReserved") is not None,
        "a Workload with no queue, pending",
    )
    reserved = condition_of(wl, "QuotaReserved")
    assert (
        reserved is not None
        and reserved["status"] == "False"
        and "LocalQueue  doesn't exist" in reserved["message"]
    )
    assert (await env.kube.get(JOBS, "default", "caught"))["spec"]["suspend"] is True


async def test_namespaces_outside_the_selector_are_ignored_even_with_a_queue(env: Env) -> None:
    await local_setup.ensure_namespace(env.kube, "kube-system")
    await env.start_manager()
    await apply_small_setup(env)
    system = job("system", cpu="1", parallelism=1, queue="small")
    system["metadata"]["namespace"] = "kube-system"
    system["spec"]["suspend"] = False
    await env.kube.create(JOBS, system)
    await asyncio.sleep(1.0)  # give the reconciler every chance to (wrongly) act
    assert (await env.kube.list(WORKLOADS, "kube-system"))["items"] == []
    assert (await env.kube.get(JOBS, "kube-system", "system"))["spec"]["suspend"] is False
