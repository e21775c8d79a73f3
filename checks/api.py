"""The few REST writes the checks make, on plain dicts, over a kubernetes-asyncio ``ApiClient``.

The runner reads through watches and writes here: conditional PUTs of ``status`` (the
resourceVersion makes a stale write fail with 409 instead of overwriting another writer),
and the creates and deletes of the provisioning check. Only the transport of
kubernetes-asyncio is used (configuration, TLS, authentication, its aiohttp session), so any
kind, CRDs included, is read and written as the API's JSON.
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp
from kubernetes_asyncio.client import ApiClient

from kadmit.checks.kinds import Kind

Obj = dict[str, Any]


class ApiError(Exception):
    """A non-2xx answer of the API server."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def already_exists(self) -> bool:
        return self.status == 409 and self.reason == "AlreadyExists"


class Api:
    """GET, POST, PUT, PATCH and DELETE of any kind, as dicts."""

    def __init__(self, api_client: ApiClient, *, timeout: float = 30.0) -> None:
        self.api_client = api_client
        self._timeout = timeout

    async def request(self, method: str, path: str, body: Any = None,
                      content_type: str = "application/json") -> Obj:
        response: aiohttp.ClientResponse = await self.api_client.call_api(
            path,
            method,
            header_params={"Accept": "application/json", "Content-Type": content_type},
            body=body,
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=self._timeout,
        )
        async with response:
            text = await response.text()
            status = response.status
        if not 200 <= status <= 299:
            reason, message = "", text.strip()[:500]
            try:
                decoded = json.loads(text)
            except ValueError:
                decoded = None
            if isinstance(decoded, dict) and decoded.get("kind") == "Status":
                reason, message = str(decoded.get("reason", "")), str(decoded.get("message", ""))
            raise ApiError(status, reason, message)
        result = json.loads(text) if text else {}
        return result if isinstance(result, dict) else {}

    async def get(self, kind: Kind, namespace: str | None, name: str) -> Obj:
        return await self.request("GET", kind.path(namespace, name))

    async def list(self, kind: Kind, namespace: str | None = None, label_selector: str | None = None) -> Obj:
        path = kind.path(namespace)
        if label_selector:
            path += f"?labelSelector={label_selector}"
        return await self.request("GET", path)

    async def create(self, kind: Kind, obj: Obj) -> Obj:
        return await self.request("POST", kind.path(obj.get("metadata", {}).get("namespace")), obj)

    async def replace(self, kind: Kind, obj: Obj, subresource: str | None = None) -> Obj:
        """PUT; the object's ``metadata.resourceVersion`` makes the write fail with 409 if it is stale."""
        meta = obj["metadata"]
        return await self.request("PUT", kind.path(meta.get("namespace"), meta["name"], subresource), obj)

    async def merge_patch(self, kind: Kind, namespace: str | None, name: str, patch: Obj) -> Obj:
        return await self.request("PATCH", kind.path(namespace, name), patch,
                                  content_type="application/merge-patch+json")

    async def delete(self, kind: Kind, namespace: str | None, name: str, uid: str | None = None) -> None:
        """Delete, in the background; an object already gone is not an error."""
        body: Obj = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
        if uid:
            body["preconditions"] = {"uid": uid}
        try:
            await self.request("DELETE", kind.path(namespace, name), body)
        except ApiError as exc:
            if not exc.not_found:
                raise
