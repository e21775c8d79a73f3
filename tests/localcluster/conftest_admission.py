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

from kadmit.localcluster.interfaces import AdmissionRequest
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
    "conversion_webhook",
    "convert_gadgets",
    "deny",
    "patch_response",
    "review_request",
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
        self.queries.append(request.query_string)  # before the body: a 1 s timeout may end the call mid-read
        body = await request.json()
        self.calls.append((request.path, copy.deepcopy(body)))
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


def conversion_webhook(
    convert_spec: Callable[[Obj, str], None], change: Callable[[Obj], Obj] | None = None, **response: Any
) -> Handler:
    """A ``/convert`` handler: each object copied into the desired apiVersion, its spec converted in
    place by ``convert_spec(spec, desired_api_version)``, then passed through ``change``;
    ``response`` sets fields of the ConversionReview's response."""

    async def handler(review: Obj) -> Obj:
        request = review["request"]
        desired = request["desiredAPIVersion"]
        converted = []
        for obj in request["objects"]:
            out = copy.deepcopy(obj)
            out["apiVersion"] = desired
            convert_spec(out.setdefault("spec", {}), desired)
            converted.append(change(out) if change else out)
        return {"convertedObjects": converted, "result": {"status": "Success"}, **response}

    return handler


def _gadget_sizes(spec: Obj, desired: str) -> None:
    """v1 ``spec.size`` is v2 ``spec.dimensions.size``."""
    if desired.endswith("/v2") and "size" in spec:
        spec["dimensions"] = {"size": spec.pop("size")}
    elif desired.endswith("/v1") and "dimensions" in spec:
        spec["size"] = spec.pop("dimensions")["size"]


convert_gadgets = conversion_webhook(_gadget_sizes)


def review_request(
    resource: str, obj: Obj | None = None, old: Obj | None = None, **fields: Any
) -> AdmissionRequest:
    """A CREATE (or, with ``old``, an UPDATE; with ``old`` only, a DELETE) of ``resource``: group,
    version and kind from the object's apiVersion and kind, name and namespace from its
    metadata; ``fields`` set or override any field of the request."""
    source = obj if obj is not None else old or {}
    group, _, version = str(source.get("apiVersion", "v1")).rpartition("/")
    metadata = source.get("metadata") or {}
    operation = "CREATE" if old is None else "UPDATE" if obj is not None else "DELETE"
    values: dict[str, Any] = {
        "operation": operation,
        "group": group,
        "version": version,
        "kind": source.get("kind", ""),
        "resource": resource,
        "subresource": "",
        "namespace": metadata.get("namespace"),
        "name": metadata.get("name", ""),
        "object": obj,
        "old_object": old,
    }
    return AdmissionRequest(**{**values, **fields})


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
