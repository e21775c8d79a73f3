"""The caBundle reaches kadmit's webhooks and conversion CRDs, and comes back when erased."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import itertools
import logging
from typing import Any, cast

import pytest
from kubernetes_asyncio import client

from kadmit.certs.authority import issue_ca, issue_serving
from kadmit.certs.injector import MUTATING_NAME, VALIDATING_NAME, CABundleInjector
from kadmit.certs.manager import CertificateManager
from kadmit.certs.rotation import RotationPolicy
from kadmit.certs.secret_store import SECRET_NAME, state_of
from kadmit.kube import Client
from tests.certs.conftest import NAMESPACE, SERVICE, conversion_crd, install_webhook_configurations


async def bundles(api: Any) -> dict[str, set[str | None]]:
    admission = client.AdmissionregistrationV1Api(api)
    mutating = await admission.read_mutating_webhook_configuration(MUTATING_NAME)
    validating = await admission.read_validating_webhook_configuration(VALIDATING_NAME)
    return {
        "mutating": {h.client_config.ca_bundle for h in mutating.webhooks},
        "validating": {h.client_config.ca_bundle for h in validating.webhooks},
    }


async def test_injects_into_our_webhooks_and_conversion_crds_only(api_client: Any) -> None:
    await install_webhook_configurations(api_client)
    admission = client.AdmissionregistrationV1Api(api_client)
    foreign: Any = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "someone-else"},
        "webhooks": [
            {
                "name": "x.example.com",
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "clientConfig": {"service": {"name": SERVICE, "namespace": NAMESPACE, "path": "/x"}},
            }
        ],
    }
    await admission.create_validating_webhook_configuration(foreign)
    extensions = client.ApiextensionsV1Api(api_client)
    await extensions.create_custom_resource_definition(cast(Any, conversion_crd()))
    unlabelled = conversion_crd("localqueues.kueue.x-k8s.io")
    del unlabelled["metadata"]["labels"]  # as if installed before kadmit labelled its CRDs
    await extensions.create_custom_resource_definition(cast(Any, unlabelled))

    bundle = issue_ca().cert_pem
    injector = CABundleInjector(Client(api_client), SERVICE, NAMESPACE)
    assert await injector.is_injected(bundle) is False
    patched = await injector.inject(bundle)
    assert {(t.kind, t.name) for t in patched} == {
        ("mutating", MUTATING_NAME),
        ("validating", VALIDATING_NAME),
        ("crd", "clusterqueues.kueue.x-k8s.io"),
        ("crd", "localqueues.kueue.x-k8s.io"),
    }
    encoded = base64.b64encode(bundle).decode()
    assert await bundles(api_client) == {"mutating": {encoded}, "validating": {encoded}}
    crd = await extensions.read_custom_resource_definition("clusterqueues.kueue.x-k8s.io")
    assert crd.spec.conversion.webhook.client_config.ca_bundle == encoded
    other = await admission.read_validating_webhook_configuration("someone-else")
    assert other.webhooks[0].client_config.ca_bundle is None
    assert await injector.is_injected(bundle) is True
    assert await injector.inject(bundle) == []  # nothing left to do


async def test_manager_serves_injects_and_repairs(api_client: Any) -> None:
    await install_webhook_configurations(api_client)
    extensions = client.ApiextensionsV1Api(api_client)
    await extensions.create_custom_resource_definition(cast(Any, conversion_crd()))
    served: list[bytes] = []
    manager = CertificateManager(
        Client(api_client), lambda cert, key: served.append(cert), SERVICE, NAMESPACE, retry_delay=0.2
    )
    assert manager.ready is False
    task = asyncio.create_task(manager.run())
    try:
        await _eventually(lambda: manager.ready)
        assert manager.state is not None and manager.state.serving is not None
        assert served[-1] == manager.state.serving.cert_pem
        encoded = base64.b64encode(manager.state.bundle).decode()
        assert await bundles(api_client) == {"mutating": {encoded}, "validating": {encoded}}

        # Someone erases the caBundle: the watch notices and it is put back.
        admission = client.AdmissionregistrationV1Api(api_client)
        await admission.patch_mutating_webhook_configuration(
            MUTATING_NAME, [{"op": "remove", "path": "/webhooks/0/clientConfig/caBundle"}]
        )

        async def repaired() -> bool:
            return (await bundles(api_client))["mutating"] == {encoded}

        await _eventually_async(repaired)

        # The same for a conversion CRD.
        await extensions.patch_custom_resource_definition(
            "clusterqueues.kueue.x-k8s.io",
            [{"op": "remove", "path": "/spec/conversion/webhook/clientConfig/caBundle"}],
        )

        async def crd_repaired() -> bool:
            crd = await extensions.read_custom_resource_definition("clusterqueues.kueue.x-k8s.io")
            return bool(crd.spec.conversion.webhook.client_config.ca_bundle == encoded)

        await _eventually_async(crd_repaired)

        # Another replica rotates the Secret: this one serves the new pair.
        core = client.CoreV1Api(api_client)
        secret = await core.read_namespaced_secret(SECRET_NAME, NAMESPACE)
        state = state_of(secret.to_dict())
        assert state.ca is not None
        newer = issue_serving(state.ca, SERVICE, NAMESPACE)
        secret.data["tls.crt"] = base64.b64encode(newer.cert_pem).decode()
        secret.data["tls.key"] = base64.b64encode(newer.key_pem).decode()
        await core.replace_namespaced_secret(SECRET_NAME, NAMESPACE, secret)
        await _eventually(lambda: served[-1] == newer.cert_pem)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_not_ready_without_webhook_configurations(api_client: Any) -> None:
    manager = CertificateManager(Client(api_client), lambda c, k: None, SERVICE, NAMESPACE)
    await manager.reconcile()
    assert manager.loaded is True
    assert manager.injected is False and manager.ready is False


async def test_missing_configurations_are_info_at_first_then_one_warning(
    api_client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """kadmit starts before its webhook configurations are applied: that is not worth a warning,
    unless it lasts (then it is said once, and again only after they came and went)."""
    now = [dt.datetime(2026, 11, 23, 12, 0, tzinfo=dt.UTC)]
    manager = CertificateManager(Client(api_client), lambda c, k: None, SERVICE, NAMESPACE,
                                 clock=lambda: now[0])
    with caplog.at_level(logging.INFO, logger="kadmit.certs"):

        def said() -> list[tuple[str, str]]:  # the manager's own lines (not the Secret store's)
            return [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "kadmit.certs"]

        await manager.reconcile()
        now[0] += dt.timedelta(seconds=30)
        await manager.reconcile()
        assert [level for level, _ in said()] == ["INFO"]
        for _ in range(2):
            now[0] += dt.timedelta(seconds=40)
            await manager.reconcile()
        expected = "no kadmit webhook configuration carries the caBundle after 70s: are they installed?"
        assert [message for level, message in said() if level == "WARNING"] == [expected]
        await install_webhook_configurations(api_client)
        await manager.reconcile()
        assert manager.injected and len(said()) == 2


async def test_reconcile_reports_the_next_renewal(api_client: Any) -> None:
    await install_webhook_configurations(api_client)
    policy = RotationPolicy(serving_validity=dt.timedelta(days=2), serving_renew_before=dt.timedelta(days=1))
    manager = CertificateManager(Client(api_client), lambda c, k: None, SERVICE, NAMESPACE, policy=policy)
    due = await manager.reconcile()
    assert manager.ready
    assert dt.timedelta(hours=23) < due - dt.datetime.now(dt.UTC) <= dt.timedelta(days=1)


async def _eventually(condition: Any, within: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


async def _eventually_async(condition: Any, within: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not await condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


async def test_manager_backs_off_while_the_api_refuses_and_recovers(api_client: Any) -> None:
    from kadmit.certs.secret_store import SecretStore

    await install_webhook_configurations(api_client)
    store = SecretStore(Client(api_client), "not-yet")  # its namespace does not exist: every create is a 404
    attempts: list[float] = []
    read = store.read

    async def counting_read() -> Any:
        attempts.append(asyncio.get_running_loop().time())
        return await read()

    store.read = counting_read  # type: ignore[method-assign]
    manager = CertificateManager(
        Client(api_client), lambda c, k: None, SERVICE, NAMESPACE, store=store, retry_delay=0.05
    )
    task = asyncio.create_task(manager.run())
    try:
        await _eventually(lambda: len(attempts) >= 4, within=20.0)
        gaps = [b - a for a, b in itertools.pairwise(attempts)]
        # Each wait at least doubles (a loaded machine only makes them longer): 0.05, 0.1, 0.2 s.
        for i, gap in enumerate(gaps[:3]):
            assert gap >= 0.05 * 2**i * 0.9, gaps
        assert manager.ready is False
        await client.CoreV1Api(api_client).create_namespace(
            client.V1Namespace(metadata=client.V1ObjectMeta(name="not-yet"))
        )
        await _eventually(lambda: manager.ready, within=20.0)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_webhook_configurations_created_later_are_injected_without_polling(api_client: Any) -> None:
    manager = CertificateManager(Client(api_client), lambda c, k: None, SERVICE, NAMESPACE, retry_delay=0.05)
    passes = 0
    reconcile = manager.reconcile

    async def counting() -> Any:
        nonlocal passes
        passes += 1
        return await reconcile()

    manager.reconcile = counting  # type: ignore[method-assign]
    task = asyncio.create_task(manager.run())
    try:
        await _eventually(lambda: manager.loaded)
        await asyncio.sleep(0.5)
        assert manager.ready is False
        idle = passes
        assert idle <= 3  # woken by the watches' initial events at most, not every retry_delay
        await install_webhook_configurations(api_client)
        await _eventually(lambda: manager.ready)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
