"""The Secret is the source of truth, and racing replicas converge on one certificate."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
from typing import Any

from kubernetes_asyncio import client

from kadmit.certs.authority import issue_ca, issue_serving, signed_by
from kadmit.certs.rotation import RotationPolicy
from kadmit.certs.secret_store import SECRET_NAME, SecretStore, converge, state_of
from kadmit.kube import Client
from tests.certs.conftest import NAMESPACE, SERVICE

POLICY = RotationPolicy()


async def test_creates_the_secret_then_leaves_it_alone(api_client: Any) -> None:
    store = SecretStore(Client(api_client), NAMESPACE)
    state = await converge(store, SERVICE, NAMESPACE, POLICY)
    secret = await client.CoreV1Api(api_client).read_namespaced_secret(SECRET_NAME, NAMESPACE)
    assert secret.type == "kubernetes.io/tls"
    assert sorted(secret.data) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]
    assert secret.metadata.labels["app.kubernetes.io/name"] == "kadmit"
    assert state_of(secret.to_dict()) == state
    again = await converge(store, SERVICE, NAMESPACE, POLICY)
    assert again == state
    unchanged = await client.CoreV1Api(api_client).read_namespaced_secret(SECRET_NAME, NAMESPACE)
    assert unchanged.metadata.resource_version == secret.metadata.resource_version


async def test_racing_replicas_converge_on_one_certificate(api_client: Any) -> None:
    stores = [SecretStore(Client(api_client), NAMESPACE) for _ in range(5)]
    results = await asyncio.gather(*(converge(s, SERVICE, NAMESPACE, POLICY) for s in stores))
    secret = await client.CoreV1Api(api_client).read_namespaced_secret(SECRET_NAME, NAMESPACE)
    stored = state_of(secret.to_dict())
    assert all(r == stored for r in results)
    assert stored.serving is not None and stored.ca is not None
    assert signed_by(stored.serving, stored.ca)


async def test_racing_replicas_converge_on_one_rotation(api_client: Any) -> None:
    store = SecretStore(Client(api_client), NAMESPACE)
    first = await converge(store, SERVICE, NAMESPACE, POLICY)
    assert first.ca is not None
    later = first.ca.not_after - POLICY.ca_renew_before + dt.timedelta(seconds=1)
    results = await asyncio.gather(
        *(
            converge(SecretStore(Client(api_client), NAMESPACE), SERVICE, NAMESPACE, POLICY, lambda: later)
            for _ in range(4)
        )
    )
    secret = await client.CoreV1Api(api_client).read_namespaced_secret(SECRET_NAME, NAMESPACE)
    stored = state_of(secret.to_dict())
    assert all(r == stored for r in results)
    assert stored.ca != first.ca
    assert stored.previous_cas == (first.ca.cert_pem,)


async def test_adopts_an_existing_secret_and_keeps_its_other_keys(api_client: Any) -> None:
    ca = issue_ca()
    serving = issue_serving(ca, SERVICE, NAMESPACE)
    core = client.CoreV1Api(api_client)

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    await core.create_namespaced_secret(
        NAMESPACE,
        client.V1Secret(
            metadata=client.V1ObjectMeta(name=SECRET_NAME, labels={"team": "platform"}),
            type="kubernetes.io/tls",
            data={
                "tls.crt": b64(serving.cert_pem),
                "tls.key": b64(serving.key_pem),
                "ca.crt": b64(ca.cert_pem),
                "extra": b64(b"keep me"),
            },
        ),
    )
    state = await converge(SecretStore(Client(api_client), NAMESPACE), SERVICE, NAMESPACE, POLICY)
    secret = await core.read_namespaced_secret(SECRET_NAME, NAMESPACE)
    assert base64.b64decode(secret.data["extra"]) == b"keep me"
    assert secret.metadata.labels["team"] == "platform"
    # Without the CA key kadmit cannot renew under that CA: it starts its own, trusting the old
    # one alongside, and keeps serving the adopted pair until the new CA has propagated.
    assert state.serving == serving
    assert state.previous_cas == (ca.cert_pem,)
    assert "ca.key" in secret.data
