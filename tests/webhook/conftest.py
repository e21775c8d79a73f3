"""Fixtures for the webhook tests: real certificates, a real HTTPS server, AdmissionReviews."""

from __future__ import annotations

import ssl
import uuid
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

import aiohttp
import pytest

from kadmit.certs.authority import KeyPair, issue_ca, issue_serving
from kadmit.webhook.review import Webhook
from kadmit.webhook.server import WebhookServer, create_app
from kadmit.webhook.tls import ServingTLS

SERVICE = "kadmit-webhook-service"
NAMESPACE = "kadmit-system"
SERVER_NAME = f"{SERVICE}.{NAMESPACE}.svc"


@pytest.fixture(scope="session")
def ca() -> KeyPair:
    return issue_ca()


@pytest.fixture(scope="session")
def serving(ca: KeyPair) -> KeyPair:
    return issue_serving(ca, SERVICE, NAMESPACE)


def client_context(*cas: KeyPair) -> ssl.SSLContext:
    """What the API server does: trust the caBundle, check the Service name."""
    context = ssl.create_default_context(cadata="".join(c.cert_pem.decode() for c in cas))
    return context


def review(
    obj: dict[str, Any] | None,
    *,
    old: dict[str, Any] | None = None,
    operation: str = "CREATE",
    group: str = "batch",
    version: str = "v1",
    kind: str = "Job",
    username: str = "alice",
    namespace: str = "default",
) -> dict[str, Any]:
    request: dict[str, Any] = {
        "uid": str(uuid.uuid4()),
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": kind.lower() + "s"},
        "operation": operation,
        "namespace": namespace,
        "name": ((obj or old or {}).get("metadata") or {}).get("name", ""),
        "userInfo": {"username": username, "groups": ["system:authenticated"]},
        "object": obj,
        "oldObject": old,
        "dryRun": False,
    }
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


class RunningServer:
    def __init__(self, server: WebhookServer, session: aiohttp.ClientSession, tls: ServingTLS) -> None:
        self.server = server
        self.session = session
        self.tls = tls

    @property
    def base(self) -> str:
        return f"https://127.0.0.1:{self.server.port}"

    async def post(self, path: str, body: Any = None, *, data: bytes | None = None, **headers: str) -> Any:
        kwargs: dict[str, Any] = {"server_hostname": SERVER_NAME}
        if data is not None:
            kwargs["data"] = data
            kwargs["headers"] = {"Content-Type": "application/json", **headers}
        else:
            kwargs["json"] = body
        return await self.session.post(self.base + path, **kwargs)


ServerFactory = Callable[..., Any]


@pytest.fixture
async def serve(ca: KeyPair, serving: KeyPair) -> AsyncIterator[Callable[..., Any]]:
    """Start an HTTPS webhook server for the given webhooks; returns a :class:`RunningServer`."""
    started: list[tuple[WebhookServer, aiohttp.ClientSession]] = []

    async def start(webhooks: Iterable[Webhook], **kwargs: Any) -> RunningServer:
        tls = ServingTLS()
        tls.load(serving.cert_pem, serving.key_pem)
        server = WebhookServer(create_app(webhooks, **kwargs), tls.context, host="127.0.0.1", port=0)
        await server.start()
        connector = aiohttp.TCPConnector(ssl=client_context(ca))
        session = aiohttp.ClientSession(connector=connector)
        started.append((server, session))
        return RunningServer(server, session, tls)

    yield start
    for server, session in started:
        await session.close()
        await server.stop()
