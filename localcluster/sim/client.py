"""A small JSON client for the Kubernetes REST API, on aiohttp.

The simulated controllers handle plain dicts (Jobs, Pods, Nodes and a CRD that
kubernetes-asyncio has no model for), so a thin client that speaks the wire format is
simpler than converting to and from generated models. It follows the API's conventions:
paths per group/version/resource, ``metav1.Status`` errors, chunked watch streams.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterator, Awaitable, Mapping
from dataclasses import dataclass

import aiohttp

from ..errors import ApiError, status
from ..interfaces import Endpoint
from ..objects import Obj, dumps, loads

WATCH_TIMEOUT_SECONDS = 240


@dataclass(frozen=True)
class Resource:
    """A REST resource: where its objects live in the URL space."""

    group: str
    version: str
    plural: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str = "") -> str:
        """``/api[s]/<group/version>[/namespaces/<namespace>]/<plural>[/<name>[/<subresource>]]``."""
        segments = ["", "apis", self.group, self.version] if self.group else ["", "api", self.version]
        if self.namespaced and namespace is not None:
            segments += ["namespaces", namespace]
        segments.append(self.plural)
        if name is not None:
            segments += [name, subresource] if subresource else [name]
        return "/".join(segments)


PODS = Resource("", "v1", "pods")
NODES = Resource("", "v1", "nodes", namespaced=False)
PODTEMPLATES = Resource("", "v1", "podtemplates")
NAMESPACES = Resource("", "v1", "namespaces", namespaced=False)
SECRETS = Resource("", "v1", "secrets")
JOBS = Resource("batch", "v1", "jobs")
CRDS = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions", namespaced=False)
PROVISIONING_REQUESTS = Resource("autoscaling.x-k8s.io", "v1", "provisioningrequests")


def _error_from(code: int, text: str) -> ApiError:
    """The server's own error for a non-2xx answer: its ``Status``, or one made of the text."""
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    if not isinstance(body, dict):
        return ApiError(status(code, "", text.strip()[:200]))
    reason, message = str(body.get("reason", "")), str(body.get("message", ""))
    return ApiError(status(int(body.get("code", code)), reason, message))


def delete_options(
    *, uid: str | None = None, propagation: str | None = None, grace_seconds: int | None = None
) -> Obj:
    """A ``DeleteOptions`` body: a uid precondition (delete only that incarnation), a
    ``propagationPolicy`` for dependents (a Job's default orphans its Pods), a grace period."""
    options: Obj = {"apiVersion": "v1", "kind": "DeleteOptions"}
    if grace_seconds is not None:
        options["gracePeriodSeconds"] = grace_seconds
    if uid is not None:
        options["preconditions"] = {"uid": uid}
    if propagation is not None:
        options["propagationPolicy"] = propagation
    return options


def key_of(obj: Obj) -> tuple[str, str]:
    """``(namespace, name)`` of an object; namespace is ``""`` for cluster-scoped ones."""
    metadata = obj.get("metadata") or {}
    return metadata.get("namespace") or "", metadata.get("name") or ""


async def ignore_stale(call: Awaitable[object]) -> bool:
    """Await a simulated controller's write; False when its object is gone (404) or changed since it
    was read (409): the write is dropped, and the object's next event brings the controller back."""
    try:
        await call
    except ApiError as exc:
        if exc.code in (404, 409):
            return False
        raise
    return True


class RestClient:
    """JSON over HTTP(S) to one API server, authenticated as the endpoint says."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self._session: aiohttp.ClientSession | None = None

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            ssl_context: ssl.SSLContext | bool = True
            if self.endpoint.ca_file:
                ssl_context = ssl.create_default_context(cafile=self.endpoint.ca_file)
            headers = {"Accept": "application/json", "User-Agent": "localcluster-sim"}
            if self.endpoint.token:
                headers["Authorization"] = f"Bearer {self.endpoint.token}"
            self._session = aiohttp.ClientSession(
                base_url=self.endpoint.url,
                headers=headers,
                connector=aiohttp.TCPConnector(ssl=ssl_context, limit=32),
                timeout=aiohttp.ClientTimeout(total=30, sock_connect=5),
                # One watch event is one line: a large CRD (LeaderWorkerSet's upstream schema is
                # about 650 kB of JSON) must fit, as it does in client-go.
                read_bufsize=2**21,
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        body: Obj | None = None,
        content_type: str = "application/json",
    ) -> Obj:
        session = self._open()
        data = None if body is None else dumps(body)
        headers = {"Content-Type": content_type} if body is not None else None
        async with session.request(method, path, params=params, data=data, headers=headers) as response:
            text = await response.text()
            if response.status >= 300:
                raise _error_from(response.status, text)
            result = loads(text) if text else {}
            return result if isinstance(result, dict) else {}

    async def get(self, resource: Resource, namespace: str | None, name: str) -> Obj:
        return await self.request("GET", resource.path(namespace, name))

    async def list(
        self, resource: Resource, namespace: str | None = None, query: Mapping[str, str] | None = None
    ) -> Obj:
        """The collection, or what ``query`` (:func:`selecting`) lets the server send of it."""
        return await self.request("GET", resource.path(namespace), params=dict(query or {}) or None)

    async def create(self, resource: Resource, namespace: str | None, obj: Obj) -> Obj:
        return await self.request("POST", resource.path(namespace), body=obj)

    async def replace(self, resource: Resource, obj: Obj, subresource: str = "") -> Obj:
        namespace, name = key_of(obj)
        return await self.request("PUT", resource.path(namespace or None, name, subresource), body=obj)

    async def merge_patch(
        self, resource: Resource, namespace: str | None, name: str, patch: Obj, subresource: str = ""
    ) -> Obj:
        return await self.request(
            "PATCH",
            resource.path(namespace, name, subresource),
            body=patch,
            content_type="application/merge-patch+json",
        )

    async def delete(
        self, resource: Resource, namespace: str | None, name: str, options: Obj | None = None
    ) -> Obj:
        """Delete, with :func:`delete_options` when the server's defaults will not do."""
        return await self.request("DELETE", resource.path(namespace, name), body=options)

    async def watch(
        self,
        resource: Resource,
        resource_version: str,
        namespace: str | None = None,
        query: Mapping[str, str] | None = None,
    ) -> AsyncIterator[Obj]:
        """Yield watch events from ``resource_version`` on until the server ends the stream
        (only of what ``query``, from :func:`selecting`, lets it send).

        An ``ERROR`` event (the server's way to say 410 Gone mid-stream) is raised as
        :class:`ApiError`, as a client library would.
        """
        session = self._open()
        params = {
            "watch": "true",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(WATCH_TIMEOUT_SECONDS),
        }
        params.update(query or {})
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=5, sock_read=WATCH_TIMEOUT_SECONDS + 30)
        async with session.get(resource.path(namespace), params=params, timeout=timeout) as response:
            if response.status >= 300:
                raise _error_from(response.status, await response.text())
            async for line in response.content:
                if not line.strip():
                    continue
                event = loads(line)  # orjson: every watcher of the CRDs decodes each large CRD
                if event.get("type") == "ERROR":
                    raise ApiError(event.get("object") or {})
                yield event


def selecting(labels: str | None = None, name: str | None = None) -> dict[str, str]:
    """The query that makes the server filter a list or watch: to the objects a label selector
    matches, and/or to the one object called ``name``."""
    query = {}
    if labels:
        query["labelSelector"] = labels
    if name is not None:
        query["fieldSelector"] = f"metadata.name={name}"
    return query
