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

from kadmit.certs.authority import KeyPair
from kadmit.certs.rotation import CertificateState, RotationPolicy, from_bundle, plan
from kadmit.kube import Client, Conflict, Obj
from kadmit.kube.resources import SECRETS

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


def state_of(secret: Obj) -> CertificateState:
    """Read a Secret into a certificate state; unusable parts are absent."""
    data = secret.get("data") or {}
    cert, key = _decode(data, "tls.crt"), _decode(data, "tls.key")
    serving = KeyPair(cert, key) if cert and key else None
    return from_bundle(_decode(data, "ca.crt"), _decode(data, "ca.key") or None, serving)


class SecretStore:
    """Reads and conditionally writes the certificate Secret."""

    def __init__(self, client: Client, namespace: str, name: str = SECRET_NAME) -> None:
        self.client = client
        self.namespace = namespace
        self.name = name

    async def read(self) -> Obj | None:
        return await self.client.get_or_none(SECRETS, self.namespace, self.name)

    async def write(self, state: CertificateState, current: Obj | None) -> Obj:
        """Create the Secret, or replace ``current`` at its resourceVersion; :class:`Conflict` on a race."""
        assert state.ca is not None and state.serving is not None
        data = {
            "tls.crt": _encode(state.serving.cert_pem),
            "tls.key": _encode(state.serving.key_pem),
            "ca.crt": _encode(state.bundle),
            "ca.key": _encode(state.ca.key_pem),
        }
        if current is None:
            body: Obj = {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": self.name, "namespace": self.namespace, "labels": dict(LABELS)},
                "type": "kubernetes.io/tls",
                "data": data,
            }
            return await self.client.create(SECRETS, body)
        # Adopt: keep whatever else the Secret carries, replace our keys, at the version we read.
        updated = dict(current)
        updated["data"] = {**(current.get("data") or {}), **data}
        meta = updated["metadata"] = dict(current["metadata"])
        meta["labels"] = {**(meta.get("labels") or {}), **LABELS}
        if current.get("type") not in (None, "kubernetes.io/tls"):
            log.warning(
                "Secret %s/%s has type %s; rewriting our keys in it",
                self.namespace, self.name, current["type"],
            )
        return await self.client.replace(SECRETS, updated)


async def converge(
    store: SecretStore,
    service: str,
    namespace: str,
    policy: RotationPolicy,
    clock: Clock = utcnow,
    trusted_since: Callable[[bytes], dt.datetime | None] = lambda bundle: None,
) -> CertificateState:
    """Bring the Secret to the planned state and return what it holds, retrying lost races.

    ``trusted_since(bundle)`` tells since when a bundle has been seen injected (see :func:`plan`).
    """
    for _ in range(MAX_ATTEMPTS):
        current = await store.read()
        state = state_of(current) if current is not None else CertificateState()
        wanted = plan(state, service, namespace, policy, clock(), trusted_since(state.bundle))
        if wanted is state:
            return state
        try:
            await store.write(wanted, current)
        except Conflict:  # another replica wrote first (AlreadyExists or a stale resourceVersion)
            log.info("Secret %s/%s changed under us; re-reading", store.namespace, store.name)
            continue
        log.info("Secret %s/%s updated: %s", store.namespace, store.name, "; ".join(wanted.notes))
        return wanted
    raise SecretStoreError(
        f"Secret {store.namespace}/{store.name} kept changing under us ({MAX_ATTEMPTS} conflicts in a row)"
    )
