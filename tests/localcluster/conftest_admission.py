"""Fixtures for the admission tests: a CA and serving certificate, real HTTPS webhook servers
on 127.0.0.1, and an in-memory StoreView.

Import them into a test module with ``from tests.localcluster.conftest_admission import *``.
"""

from __future__ import annotations

import base64
import copy
import json
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from kadmit.localcluster.objects import Obj
from kadmit.localcluster.tls import make_serving_cert

Handler = Callable[[Obj], Awaitable[Obj | web.StreamResponse]]

SERVICE_DNS = "kadmit-webhook-service.kadmit-system.svc"

__all__ = [
    "SERVICE_DNS",
    "FakeStore",
    "Handler",
    "TLSMaterial",
    "WebhookServer",
    "allow",
    "deny",
    "patch_response",
    "store",
    "tls",
    "webhook_server",
]


@dataclass(frozen=True)
class TLSMaterial:
    ca_bundle: str  # base64 PEM of the CA that signed the serving certificate
    other_ca_bundle: str  # base64 PEM of an unrelated CA
    cert_file: Path
    key_file: Path

    def server_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.cert_file, self.key_file)
        return context


def _bundle(pem: bytes) -> str:
    return base64.b64encode(pem).decode()


@pytest.fixture(scope="session")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TLSMaterial:
    """The webhook servers' certificate, made as the API server's own HTTPS mode makes its."""
    serving = make_serving_cert(["localhost", SERVICE_DNS, "127.0.0.1"], days=1)
    unrelated = make_serving_cert(["localhost"], days=1)
    folder = tmp_path_factory.mktemp("tls")
    cert_file, key_file = folder / "tls.crt", folder / "tls.key"
    cert_file.write_bytes(serving.cert_pem)
    key_file.write_bytes(serving.key_pem)
    return TLSMaterial(_bundle(serving.ca_pem), _bundle(unrelated.ca_pem), cert_file, key_file)


@dataclass
class WebhookServer:
    """An HTTPS server whose paths answer AdmissionReviews (or ConversionReviews) with handlers.

    A handler gets the posted review and returns the ``response`` part (uid filled in when
    missing) or a complete aiohttp response to send as is.
    """

    tls: TLSMaterial
    routes: dict[str, Handler] = field(default_factory=dict)
    calls: list[tuple[str, Obj]] = field(default_factory=list)
    queries: list[str] = field(default_factory=list)
    port: int = 0
    _runner: web.AppRunner | None = None

    def route(self, path: str, handler: Handler) -> str:
        self.routes[path] = handler
        return self.url(path)

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    def called(self, path: str) -> list[Obj]:
        return [body for called_path, body in self.calls if called_path == path]

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/{path:.*}", self._dispatch)
        self._runner = web.AppRunner(app, shutdown_timeout=0.2)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=self.tls.server_context())
        await site.start()
        self.port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        handler = self.routes.get(request.path)
        if handler is None:
            return web.Response(status=404, text="404: Not Found")
        body = await request.json()
        self.calls.append((request.path, copy.deepcopy(body)))
        self.queries.append(request.query_string)
        answer = await handler(body)
        if isinstance(answer, web.StreamResponse):
            return answer
        answer.setdefault("uid", body["request"]["uid"])
        return web.json_response({"apiVersion": body["apiVersion"], "kind": body["kind"], "response": answer})


@pytest.fixture
async def webhook_server(tls: TLSMaterial) -> AsyncIterator[WebhookServer]:
    server = WebhookServer(tls)
    await server.start()
    yield server
    await server.stop()


def allow(**extra: Any) -> Handler:
    async def handler(review: Obj) -> Obj:
        return {"allowed": True, **extra}

    return handler


def deny(message: str, code: int = 403, **status: Any) -> Handler:
    async def handler(review: Obj) -> Obj:
        return {"allowed": False, "status": {"message": message, "code": code, **status}}

    return handler


def patch_response(operations: list[Obj] | Callable[[Obj], list[Obj]], **extra: Any) -> Handler:
    async def handler(review: Obj) -> Obj:
        ops = operations(review) if callable(operations) else operations
        encoded = base64.b64encode(json.dumps(ops).encode()).decode()
        return {"allowed": True, "patchType": "JSONPatch", "patch": encoded, **extra}

    return handler


class FakeStore:
    """A StoreView over plain dicts, keyed as the real store is."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str | None, str], Obj] = {}
        self.status_writes: list[tuple[str, str, str | None, str, Obj]] = []

    def put(self, group: str, resource: str, obj: Obj) -> Obj:
        metadata = obj.setdefault("metadata", {})
        metadata.setdefault("resourceVersion", "1")
        self.objects[(group, resource, metadata.get("namespace"), metadata["name"])] = obj
        return obj

    def get(self, group: str, resource: str, namespace: str | None, name: str) -> Obj | None:
        return self.objects.get((group, resource, namespace, name))

    def list(self, group: str, resource: str, namespace: str | None = None) -> list[Obj]:
        return [
            obj
            for (g, r, ns, _), obj in sorted(self.objects.items(), key=lambda item: str(item[0]))
            if g == group and r == resource and (namespace is None or ns == namespace)
        ]

    def write_status(self, group: str, resource: str, namespace: str | None, name: str, status: Obj) -> Obj:
        obj = self.objects[(group, resource, namespace, name)]
        obj["status"] = copy.deepcopy(status)
        metadata = obj["metadata"]
        metadata["resourceVersion"] = str(int(metadata["resourceVersion"]) + 1)
        self.status_writes.append((group, resource, namespace, name, copy.deepcopy(status)))
        return obj


@pytest.fixture
def store() -> Iterator[FakeStore]:
    yield FakeStore()
