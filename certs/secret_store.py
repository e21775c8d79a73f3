"""The Secret ``kadmit-webhook-server-cert``: the one source of truth for the webhook's certificates.

Every replica reads the Secret, computes :func:`kadmit.certs.rotation.plan`, and writes only when the plan
changes something, conditioned on the resourceVersion it read. When two replicas race, one write
wins and the other gets a conflict, re-reads, finds the winner's certificates good, and serves
those: the replicas converge on a single certificate without a leader.

Keys: ``tls.crt`` and ``tls.key`` (the serving pair, type ``kubernetes.io/tls`` so that tools and
mounts understand it), ``ca.crt`` (the caBundle: the signing CA first, then previous CAs still
trusted) and ``ca.key`` (the signing CA's key, so any replica can renew).
"""

from __future__ import annotations

import base64
import datetime as dt
import logging
from collections.abc import Callable
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from kadmit.certs.authority import KeyPair
from kadmit.certs.rotation import CertificateState, RotationPolicy, from_bundle, plan

log = logging.getLogger("kadmit.certs.secret")

SECRET_NAME = "kadmit-webhook-server-cert"
LABELS = {"app.kubernetes.io/name": "kadmit", "app.kubernetes.io/component": "webhook-certificates"}
MAX_ATTEMPTS = 8

Clock = Callable[[], dt.datetime]


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class SecretStoreError(RuntimeError):
    """The Secret could not be brought to a good state (e.g. conflicts that never settle)."""


def _decode(data: dict[str, str] | None, key: str) -> bytes:
    value = (data or {}).get(key)
    if not value:
        return b""
    try:
        return base64.b64decode(value)
    except ValueError:
        return b""


def _encode(value: bytes) -> str:
    return base64.b64encode(value).decode()


def state_of(secret: Any) -> CertificateState:
    """Read a Secret (a kubernetes-asyncio V1Secret) into a certificate state; unusable parts are absent."""
    data = getattr(secret, "data", None) or {}
    cert, key = _decode(data, "tls.crt"), _decode(data, "tls.key")
    serving = KeyPair(cert, key) if cert and key else None
    return from_bundle(_decode(data, "ca.crt"), _decode(data, "ca.key") or None, serving)


class SecretStore:
    """Reads and conditionally writes the certificate Secret through kubernetes-asyncio."""

    def __init__(self, api_client: client.ApiClient, namespace: str, name: str = SECRET_NAME) -> None:
        self.core = client.CoreV1Api(api_client)
        self.namespace = namespace
        self.name = name

    async def read(self) -> Any | None:
        try:
            return await self.core.read_namespaced_secret(self.name, self.namespace)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    async def write(self, state: CertificateState, current: Any | None) -> Any:
        """Create the Secret, or replace ``current`` at its resourceVersion; ApiException 409 on a race."""
        assert state.ca is not None and state.serving is not None
        data = {
            "tls.crt": _encode(state.serving.cert_pem),
            "tls.key": _encode(state.serving.key_pem),
            "ca.crt": _encode(state.bundle),
            "ca.key": _encode(state.ca.key_pem),
        }
        if current is None:
            body = client.V1Secret(
                metadata=client.V1ObjectMeta(name=self.name, namespace=self.namespace, labels=dict(LABELS)),
                type="kubernetes.io/tls",
                data=data,
            )
            return await self.core.create_namespaced_secret(self.namespace, body)
        # Adopt: keep whatever else the Secret carries, replace our keys, at the version we read.
        current.data = {**(current.data or {}), **data}
        current.metadata.labels = {**(current.metadata.labels or {}), **LABELS}
        if current.type not in (None, "kubernetes.io/tls"):
            log.warning(
                "Secret %s/%s has type %s; rewriting our keys in it", self.namespace, self.name, current.type
            )
        return await self.core.replace_namespaced_secret(self.name, self.namespace, current)


async def converge(
    store: SecretStore,
    service: str,
    namespace: str,
    policy: RotationPolicy,
    clock: Clock = utcnow,
) -> CertificateState:
    """Bring the Secret to the planned state and return what it holds, retrying lost races."""
    for _ in range(MAX_ATTEMPTS):
        current = await store.read()
        state = state_of(current) if current is not None else CertificateState()
        wanted = plan(state, service, namespace, policy, clock())
        if wanted is state:
            return state
        try:
            await store.write(wanted, current)
        except ApiException as exc:
            if exc.status == 409:  # another replica wrote first (AlreadyExists or a stale resourceVersion)
                log.info("Secret %s/%s changed under us; re-reading", store.namespace, store.name)
                continue
            raise
        log.info("Secret %s/%s updated: %s", store.namespace, store.name, "; ".join(wanted.notes))
        return wanted
    raise SecretStoreError(
        f"Secret {store.namespace}/{store.name} kept changing under us ({MAX_ATTEMPTS} conflicts in a row)"
    )
