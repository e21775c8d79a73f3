"""kadmit's webhooks called by the API server over real TLS: the start guard, certificate rotation
under load, and namespaces kadmit does not manage when kadmit is down (Kueue #5244)."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
from typing import Any

import pytest

from kadmit.certs.rotation import RotationPolicy
from kadmit.kube import ApiError
from kadmit.kube.resources import JOBS
from kadmit.localcluster.faults import FaultInjector
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


async def test_a_ca_rotation_whose_first_three_injections_fail_rejects_no_admission() -> None:
    """The CA is renewed while Jobs are created without pause, and the first three attempts to
    inject the new bundle into the webhook configurations fail: the webhook keeps serving a
    certificate of the old CA until the new bundle is seen injected, so no Job create is refused."""
    policy = RotationPolicy(
        ca_validity=dt.timedelta(seconds=90),
        ca_renew_before=dt.timedelta(seconds=84),  # the CA is renewed 6 s after it was issued
        serving_validity=dt.timedelta(seconds=60),
        serving_renew_before=dt.timedelta(seconds=30),
        propagation=dt.timedelta(seconds=1),
    )
    faults = FaultInjector(seed=4)
    async for env in webhook_env(policy, middlewares=[faults.middleware]):
        assert env.app is not None and env.app.certificates is not None
        certificates = env.app.certificates
        await apply_small_setup(env.kube)
        assert certificates.state is not None and certificates.state.ca is not None
        first_ca = certificates.state.ca.cert_pem
        faults.fail(1.0, 500, verbs=["update", "patch"],
                    resources=["mutatingwebhookconfigurations", "validatingwebhookconfigurations"],
                    for_requests=3)
        created = rejected = 0
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60.0

        first_served = env.app.tls.fingerprint

        def rotated(env: WebhookEnv = env, first_ca: bytes = first_ca,
                    first_served: str | None = first_served) -> bool:
            """The new CA in every webhook configuration, and a certificate of it served."""
            state = env.cluster.store
            configs = [*state.list("admissionregistration.k8s.io", "mutatingwebhookconfigurations"),
                       *state.list("admissionregistration.k8s.io", "validatingwebhookconfigurations")]
            bundles = [base64.b64decode(hook["clientConfig"].get("caBundle") or "")
                       for config in configs for hook in config.get("webhooks") or []]
            assert env.app is not None
            return bool(bundles) and all(not b.startswith(first_ca) for b in bundles) \
                and env.app.tls.fingerprint != first_served

        while not rotated() and loop.time() < deadline:
            batch = [env.kube.create(JOBS, job(f"r{created + i}", cpu="1", parallelism=1, queue="small"))
                     for i in range(4)]
            for result in await asyncio.gather(*batch, return_exceptions=True):
                if isinstance(result, BaseException):
                    rejected += 1
                else:
                    created += 1
        for _ in range(10):  # and on, a moment, under the new CA
            await env.kube.create(JOBS, job(f"after-{created}", cpu="1", parallelism=1, queue="small"))
            created += 1
        assert rotated(), "the CA was not rotated and injected within a minute"
        assert faults.counts.by_status == {500: 3}  # the first three injection writes failed
        assert rejected == 0 and created >= 20


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
