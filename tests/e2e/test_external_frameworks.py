"""``integrations.externalFrameworks``: a Job whose controller is a kind another controller
integrates with Kueue is that owner's (its Workload is the owner's), so kadmit neither suspends
it nor queues it on its own, as Kueue treats the children of a known owner."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from kadmit.kube.resources import CONFIG_MAPS, JOBS, WORKLOADS
from tests.e2e.conftest import WebhookEnv, eventually, fast_config, webhook_env
from tests.e2e.helpers import apply_small_setup, job

# Any kind will do for the owner; a ConfigMap needs no CRD and no simulated controller.
EXTERNAL = ("", "v1", "ConfigMap")


@pytest.fixture
async def kadmit_with_external() -> AsyncIterator[WebhookEnv]:
    async for env in webhook_env(config=fast_config(external_frameworks=(EXTERNAL,))):
        yield env


async def test_a_job_owned_by_an_external_framework_is_left_to_its_owner(
    kadmit_with_external: WebhookEnv,
) -> None:
    env = kadmit_with_external
    await apply_small_setup(env.kube)
    owner = await env.kube.create(CONFIG_MAPS, {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "external-parent", "namespace": "default"},
    })
    child = job("child", cpu="500m", parallelism=1, queue="small")
    child["spec"]["suspend"] = False
    child["metadata"]["ownerReferences"] = [{
        "apiVersion": "v1", "kind": "ConfigMap", "name": "external-parent",
        "uid": owner["metadata"]["uid"], "controller": True,
    }]
    created = await env.kube.create(JOBS, child)
    assert created["spec"]["suspend"] is False  # not suspended by the webhook: its owner's business
    alone = job("alone", cpu="500m", parallelism=1, queue="small")
    alone["spec"]["suspend"] = False
    assert (await env.kube.create(JOBS, alone))["spec"]["suspend"] is True  # the same Job, no owner

    async def owned_by(name: str) -> list[dict[str, object]]:
        return [w for w in (await env.kube.list(WORKLOADS, "default"))["items"]
                if any(r.get("name") == name for r in w["metadata"].get("ownerReferences") or [])]

    async def alone_queued() -> bool:
        return bool(await owned_by("alone"))

    await eventually(alone_queued, what="the ownerless Job's Workload")
    await asyncio.sleep(0.5)  # the child's events have been through the reconciler as long
    assert await owned_by("child") == []
