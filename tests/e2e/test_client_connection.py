"""``clientConnection``: kadmit paced to a few requests a second still starts, admits and releases."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from kadmit.kube.ratelimit import TokenBucket
from kadmit.kube.resources import JOBS
from tests.e2e.conftest import WebhookEnv, eventually, fast_config, webhook_env
from tests.e2e.helpers import apply_small_setup, is_complete, job, quota_released


@pytest.fixture
async def paced_kadmit() -> AsyncIterator[WebhookEnv]:
    async for env in webhook_env(config=fast_config(client_qps=50.0, client_burst=10)):
        yield env


async def test_a_paced_kadmit_admits_and_completes_jobs(paced_kadmit: WebhookEnv) -> None:
    env = paced_kadmit
    assert env.app is not None
    limiter = env.app.client.rate_limiter
    assert isinstance(limiter, TokenBucket) and (limiter.qps, limiter.burst) == (50.0, 10)
    await apply_small_setup(env.kube)
    names = [f"paced-{i}" for i in range(4)]
    for name in names:
        await env.kube.create(JOBS, job(name, cpu="500m", parallelism=1, queue="small"))

    async def all_complete() -> bool:
        return all([is_complete(await env.kube.get(JOBS, "default", name)) for name in names])

    await eventually(all_complete, within=60, what="every paced Job complete")
    await eventually(lambda: quota_released(env.kube), what="the quota released")
