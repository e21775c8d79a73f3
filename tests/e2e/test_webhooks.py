"""kadmit's webhooks called by the API server over real TLS: the start guard, certificate rotation
under load, and namespaces kadmit does not manage when kadmit is down (Kueue #5244)."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import pytest

from kadmit.certs.rotation import RotationPolicy
from kadmit.kube import ApiError
from kadmit.kube.resources import JOBS
from tests.e2e.conftest import WebhookEnv, webhook_env
from tests.e2e.helpers import apply_small_setup, job

Obj = dict[str, Any]


async def test_webhook_suspends_and_a_user_cannot_unsuspend_an_unadmitted_job(kadmit: WebhookEnv) -> None:
    await apply_small_setup(kadmit.kube)
    too_big = job("too-big", cpu="3", parallelism=2, queue="small")
    too_big["spec"]["suspend"] = False  # the mutating webhook suspends it anyway
    created = await kadmit.kube.create(JOBS, too_big)
    assert created["spec"]["suspend"] is True
    with pytest.raises(ApiError) as denied:
        await kadmit.kube.patch(JOBS, "default", "too-big", {"spec": {"suspend": False}})
    assert denied.value.status in (400, 403)
    assert "cannot be unsuspended" in denied.value.message
    current = await kadmit.kube.get(JOBS, "default", "too-big")
    assert current["spec"]["suspend"] is True


async def test_certificate_rotation_under_load_loses_no_request() -> None:
    policy = RotationPolicy(
        ca_validity=dt.timedelta(hours=1),
        ca_renew_before=dt.timedelta(minutes=1),
        serving_validity=dt.timedelta(seconds=3),
        serving_renew_before=dt.timedelta(seconds=2),
    )
    async for env in webhook_env(policy):
        assert env.app is not None and env.app.certificates is not None
        await apply_small_setup(env.kube)
        served = {env.app.tls.fingerprint}
        created = 0
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 20.0
        # Create Jobs (each through both Job webhooks) until the certificate has been replaced twice.
        while len(served) < 3 and loop.time() < deadline:
            batch = [
                env.kube.create(JOBS, job(f"j{created + i}", cpu="1", parallelism=1, queue="small"))
                for i in range(5)
            ]  # a failed webhook call would raise here (failurePolicy Fail)
            results = await asyncio.gather(*batch)
            assert all(r["spec"]["suspend"] is True for r in results)
            created += len(results)
            served.add(env.app.tls.fingerprint)
        assert len(served) >= 3, f"the serving certificate was rotated {len(served) - 1} times"
        assert created >= 10


async def test_unmanaged_namespace_jobs_are_created_while_kadmit_is_down() -> None:
    async for env in webhook_env(run_kadmit=False):
        system_job = job("system-task", queue="")
        system_job["metadata"]["namespace"] = "kube-system"
        del system_job["metadata"]["labels"]
        system_job["spec"]["suspend"] = False
        created = await env.kube.create(JOBS, system_job)
        assert created["spec"]["suspend"] is False
        with pytest.raises(ApiError) as refused:  # a managed namespace fails closed
            await env.kube.create(JOBS, job("user-task"))
        assert refused.value.status >= 400
