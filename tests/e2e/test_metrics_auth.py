"""Secure metrics serving: /metrics on HTTPS answers 401 without a token the API server knows,
403 to a user RBAC does not allow ``get`` on ``/metrics``, and 200 to a scraper bound to
``kadmit-metrics-reader``, as controller-runtime's authentication and authorization filter does."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator

import aiohttp
import pytest

from kadmit.controller import local_setup
from kadmit.kube import Client
from kadmit.kube.resources import CLUSTER_ROLE_BINDINGS
from tests.e2e.conftest import WebhookEnv, webhook_env


@pytest.fixture
async def secure() -> AsyncIterator[WebhookEnv]:
    async for env in webhook_env(metrics_secure=True):
        yield env


async def bind_metrics_reader(kube: Client, namespace: str, name: str) -> None:
    """What docs/deploy.md tells a Prometheus operator to run for its ServiceAccount."""
    await local_setup.ensure_namespace(kube, namespace)
    await local_setup.ensure_service_account(kube, namespace, name)
    await kube.create(CLUSTER_ROLE_BINDINGS, {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": f"{name}-reads-kadmit-metrics"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "kadmit-metrics-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
    })  # fmt: skip


async def scrape(port: int, token: str | None) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # a self-signed certificate, as controller-runtime's
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"https://127.0.0.1:{port}/metrics", headers=headers, ssl=context) as response,
    ):
        return response.status, await response.text()


async def test_metrics_need_a_known_token_and_the_metrics_reader_role(secure: WebhookEnv) -> None:
    assert secure.app is not None and secure.app.metrics_port is not None
    port = secure.app.metrics_port
    kube, cluster = secure.kube, secure.cluster
    status, text = await scrape(port, None)
    assert (status, text) == (401, "Unauthorized\n")
    status, text = await scrape(port, "a-token-nobody-issued")
    assert (status, text) == (401, "Unauthorized\n")
    cluster.add_user("bob-token", "bob", ["developers"])
    status, text = await scrape(port, "bob-token")
    assert (status, text) == (403, "Authorization denied for user bob\n")
    await bind_metrics_reader(kube, "monitoring", "prometheus")
    token = await local_setup.service_account_token(kube, "monitoring", "prometheus", seconds=3600)
    status, text = await scrape(port, token)
    assert status == 200 and "kueue_admission_attempts_total" in text
    # HTTPS with a self-signed certificate: a client that verifies against the system CAs refuses it
    with pytest.raises(aiohttp.ClientConnectorCertificateError):
        async with aiohttp.ClientSession() as session:
            await session.get(f"https://127.0.0.1:{port}/metrics")
    # plain HTTP on the secure port is refused
    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.ClientError):
            await session.get(f"http://127.0.0.1:{port}/metrics")
