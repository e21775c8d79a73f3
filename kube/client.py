"""The one Kubernetes client of kadmit: REST calls on plain dicts, over kubernetes-asyncio.

The generated, typed models of kubernetes-asyncio cost about ten times as much as parsing the
JSON ourselves (``bench/informer_decode.py``: 2000 Jobs decode in 0.28 s as dicts, 3.0 s as
models), and kadmit handles every object of several kinds on every event. So kadmit borrows only
the configuration from kubernetes-asyncio (kubeconfig and in-cluster configuration, TLS,
authentication and its refresh, and the connection pool its ApiClient opens) and reads and writes
the API's JSON itself.

It sends its requests through an aiohttp session of its own over that pool, set up once: the
ApiClient's session trusts the environment, which makes every request look up proxies and
``.netrc`` on a worker thread (a fifth of the client's CPU, fighting the event loop for the GIL),
and its ``call_api`` copies every request body and rebuilds every header on the way.

Every call has a deadline (``timeout``, 30 s unless the caller says otherwise; a watch is
bounded by its server-side timeout and a read deadline instead), and every failure is an
:class:`~kadmit.kube.errors.ApiError`: no caller ever sees aiohttp's or the socket's exceptions.
"""

from __future__ import annotations

import asyncio
import os
import weakref
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal, TypedDict, Unpack
from urllib.parse import urlencode

import aiohttp
import orjson
from aiohttp.helpers import get_env_proxy_for_url
from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.config import ConfigException
from yarl import URL

from kadmit.kube.errors import ApiError, ApiUnreachable, NotFound, error_from_response
from kadmit.kube.objects import Obj
from kadmit.kube.ratelimit import TokenBucket
from kadmit.kube.resources import Resource

PatchType = Literal["merge", "json", "strategic"]

DEFAULT_TIMEOUT = 30.0
_PATCH_CONTENT_TYPES: dict[str, str] = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
}


class KubeConfigError(Exception):
    """No usable way to reach a cluster: a kubeconfig that cannot be read, or no in-cluster account."""


class RequestOptions(TypedDict, total=False):
    """What a call may add to its method and path (see :meth:`Client._open` for the defaults;
    ``deadline`` replaces the client's ``timeout`` for this call)."""

    query: Mapping[str, str | int | bool] | None
    body: Any
    content_type: str
    deadline: aiohttp.ClientTimeout | float | None


@dataclass(frozen=True, slots=True)
class _Transport:
    """What every request of a client needs, decided once (see :meth:`Client._set_up`)."""

    session: aiohttp.ClientSession
    host: str
    server_hostname: str | None
    proxy: str | URL | None
    proxy_auth: aiohttp.BasicAuth | None
    proxy_headers: Mapping[str, str] | None


class Client:
    """Dict-level CRUD, patch and watch on any resource, through one kubernetes-asyncio ApiClient.

    ``timeout`` is the default deadline of one call in seconds. A client made by :meth:`connect`
    owns its ApiClient and closes it with :meth:`close` (or ``async with``). Requests go over the
    ApiClient's connection pool (kept alive; at most ``connection_pool_maxsize`` connections,
    100 unless the configuration says otherwise), with its TLS context.

    A proxy is decided once, at the first request: the kubeconfig's ``proxy-url``, else
    ``HTTPS_PROXY`` / ``HTTP_PROXY`` / ``NO_PROXY`` as they are then (Go's net/http, and so
    client-go, also reads them once). ``.netrc`` is never read: the API server authenticates
    kadmit by its token or client certificate.

    ``rate_limiter``, when set, paces every request, the start of a watch included, as Kueue's
    ``clientConnection`` qps and burst pace its manager's; None (the default) sends at once.
    """

    def __init__(self, api_client: ApiClient, *, timeout: float = DEFAULT_TIMEOUT,
                 rate_limiter: TokenBucket | None = None) -> None:
        self.api_client = api_client
        self.timeout = timeout
        self.rate_limiter = rate_limiter
        self._owns_api_client = False
        self._transport: _Transport | None = None

    def unpaced(self) -> Client:
        """This client without its rate limiter (the same ApiClient, pool and credentials): for the
        Lease, whose renewal must not queue behind the work it guards, where a backlog of writes
        could delay it past ``renewDeadline``; its few requests a second are not what the limit
        protects."""
        if self.rate_limiter is None:
            return self
        return Client(self.api_client, timeout=self.timeout)

    def _set_up(self) -> _Transport:
        configuration = self.api_client.configuration
        pool = self.api_client.rest_client.pool_manager.connector
        if pool is None:
            raise RuntimeError("the ApiClient is closed")
        session = aiohttp.ClientSession(
            connector=pool,
            connector_owner=False,  # the ApiClient's pool: closed with the ApiClient
            cookie_jar=aiohttp.DummyCookieJar(),  # the API server sets no cookies
            trust_env=False,  # no proxy or .netrc look-ups per request
            read_bufsize=2**21,  # as kubernetes-asyncio: one watch event may be as large as etcd allows
        )
        # aiohttp sends a PUT or DELETE again, unasked, when its connection is cut before the answer.
        # Against Kubernetes that hides what happened: the first one may have been committed, and the
        # replay, with the same resourceVersion, comes back 409 (a DELETE's, 404), so a write that
        # landed looks like a conflict. As Go's net/http (and so client-go) never replays a PUT whose
        # request was sent, the caller gets ApiUnreachable and judges (WritePipeline checks whether
        # the write landed). aiohttp's own test client turns the replay off the same way.
        session._retry_connection = False
        # A client dropped while its ApiClient lives on leaves the pool to the ApiClient, silently.
        weakref.finalize(self, session.detach)
        proxy, proxy_auth = _proxy_for(configuration)
        self._transport = _Transport(
            session=session,
            host=str(configuration.host or "").rstrip("/"),
            server_hostname=configuration.tls_server_name or None,
            proxy=proxy,
            proxy_auth=proxy_auth,
            proxy_headers=configuration.proxy_headers,
        )
        return self._transport

    @classmethod
    async def connect(cls, kubeconfig: str | os.PathLike[str] | None = None, context: str | None = None,
                      *, request_timeout: float = DEFAULT_TIMEOUT) -> Client:
        """A client for the cluster, found as controller-runtime finds it: ``kubeconfig``, else
        ``$KUBECONFIG``, else the pod's ServiceAccount when running in a cluster, else ``~/.kube/config``."""
        configuration = k8s_client.Configuration()
        try:
            if kubeconfig is None and context is None and not os.environ.get("KUBECONFIG") \
                    and os.environ.get("KUBERNETES_SERVICE_HOST"):
                k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
            else:
                await k8s_config.load_kube_config(
                    config_file=None if kubeconfig is None else os.fspath(kubeconfig), context=context,
                    client_configuration=configuration)
        except (ConfigException, OSError, ValueError, TypeError) as exc:
            first_line = (str(exc).splitlines() or [type(exc).__name__])[0]
            raise KubeConfigError(f"cannot configure access to the cluster: {first_line}") from None
        client = cls(ApiClient(configuration), timeout=request_timeout)
        client._owns_api_client = True
        return client

    @classmethod
    async def from_kubeconfig_dict(cls, kubeconfig: Obj, context: str | None = None, *,
                                   request_timeout: float = DEFAULT_TIMEOUT) -> Client:
        """A client for a kubeconfig held in memory (a MultiKueue worker's Secret)."""
        configuration = k8s_client.Configuration()
        try:
            loader = k8s_config.kube_config.KubeConfigLoader(config_dict=kubeconfig, active_context=context)
            await loader.load_and_set(configuration)
        except (ConfigException, OSError, ValueError, TypeError, KeyError) as exc:
            first_line = (str(exc).splitlines() or [type(exc).__name__])[0]
            raise KubeConfigError(f"cannot use the kubeconfig: {first_line}") from None
        client = cls(ApiClient(configuration), timeout=request_timeout)
        client._owns_api_client = True
        return client

    async def close(self) -> None:
        if self._owns_api_client:
            if self._transport is not None:
                await self._transport.session.close()  # leaves the pool to the ApiClient
            await self.api_client.close()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    # -- the transport

    async def request(self, method: str, path: str, **options: Unpack[RequestOptions]) -> Obj:
        """One call whose answer is a JSON object; a non-2xx answer raises :class:`ApiError`."""
        try:
            response = await self._open(method, path, **options)
            async with response:
                content = await response.read()
                if not 200 <= response.status <= 299:
                    raise error_from_response(
                        response.status, content.decode("utf-8", "replace"), response.headers
                    )
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise _unreachable(method, path, exc) from exc
        result = orjson.loads(content) if content else {}
        if not isinstance(result, dict):
            raise ApiError(response.status, "BadResponse", f"expected a JSON object from {method} {path}")
        return result

    async def _open(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str | int | bool] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        deadline: aiohttp.ClientTimeout | float | None = None,
    ) -> aiohttp.ClientResponse:
        """Send one request. ``path`` is already URL-encoded (as :meth:`Resource.path` makes it)."""
        if self.rate_limiter is not None:
            await self.rate_limiter.wait()
        transport = self._transport or self._set_up()
        url = transport.host + path
        if query:
            url += "?" + urlencode([(key, _query_value(value)) for key, value in query.items()])
        headers = {**self.api_client.default_headers, "Accept": "application/json"}
        if self.api_client.cookie:
            headers["Cookie"] = self.api_client.cookie
        # The same hook ApiClient.call_api runs: in-cluster and exec/OIDC tokens are refreshed here.
        auth = (await self.api_client.configuration.auth_settings()).get("BearerToken")
        if auth:
            headers[auth["key"]] = auth["value"]
        data = None
        if body is not None:
            headers["Content-Type"] = content_type
            data = orjson.dumps(body)
        if deadline is None:
            deadline = self.timeout
        timeout = deadline if isinstance(deadline, aiohttp.ClientTimeout) else aiohttp.ClientTimeout(deadline)
        for attempt in (1, 2):
            try:
                return await transport.session.request(
                    method,
                    URL(url, encoded=True),
                    headers=headers,
                    data=data,
                    timeout=timeout,
                    proxy=transport.proxy,
                    proxy_auth=transport.proxy_auth,
                    proxy_headers=transport.proxy_headers,
                    server_hostname=transport.server_hostname,
                )
            except aiohttp.ServerDisconnectedError:
                # A read cut before its answer (a kept-alive connection the server had closed) is
                # sent once more; a write never is (see _set_up).
                if method != "GET" or attempt == 2:
                    raise
        raise AssertionError("unreachable")

    # -- reads

    async def get(self, resource: Resource, namespace: str | None, name: str) -> Obj:
        return await self.request("GET", resource.path(namespace, name))

    async def get_or_none(self, resource: Resource, namespace: str | None, name: str) -> Obj | None:
        try:
            return await self.get(resource, namespace, name)
        except NotFound:
            return None

    async def list(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> Obj:
        """One page of the collection (the whole collection without ``limit``)."""
        query: dict[str, str | int | bool] = {}
        if label_selector:
            query["labelSelector"] = label_selector
        if field_selector:
            query["fieldSelector"] = field_selector
        if limit:
            query["limit"] = limit
        if continue_token:
            query["continue"] = continue_token
        return await self.request("GET", resource.path(namespace), query=query)

    async def list_all(self, resource: Resource, namespace: str | None = None, *,
                       label_selector: str | None = None, field_selector: str | None = None,
                       page_size: int = 500) -> Obj:
        """The whole collection, read page by page: a list object whose items carry kind and apiVersion."""
        items: list[Obj] = []
        continue_token: str | None = None
        while True:
            page = await self.list(resource, namespace, label_selector=label_selector,
                                   field_selector=field_selector, limit=page_size,
                                   continue_token=continue_token)
            items.extend(page.get("items") or [])
            metadata = page.get("metadata") or {}
            continue_token = metadata.get("continue") or None
            if not continue_token:
                break
        kind = str(page.get("kind") or "").removesuffix("List") or resource.kind
        api_version = str(page.get("apiVersion") or resource.api_version)
        for item in items:
            # List items carry no kind/apiVersion; put them back so they look like watched ones.
            item.setdefault("kind", kind)
            item.setdefault("apiVersion", api_version)
        return {"kind": f"{kind}List", "apiVersion": api_version,
                "metadata": {"resourceVersion": str(metadata.get("resourceVersion", ""))}, "items": items}

    async def served(self, resource: Resource) -> bool:
        """Whether the cluster serves the resource (a CRD may not be installed), from discovery
        as kubectl finds out: it needs no permission on the resource itself (RBAC may allow a
        list in one namespace only), just the discovery every authenticated user has."""
        base = f"/apis/{resource.group}/{resource.version}" if resource.group else f"/api/{resource.version}"
        try:
            listing = await self.request("GET", base)
        except NotFound:
            return False
        return any(r.get("name") == resource.plural for r in listing.get("resources") or [])

    async def watch(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        resource_version: str,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int = 300,
    ) -> AsyncIterator[Obj]:
        """Yield the watch events (``{"type", "object"}``) of one watch request until the server ends it.

        A 410 answer is raised as :class:`ApiError` like any other; an ``ERROR`` event is yielded
        as it came, for the caller to judge.
        """
        query: dict[str, str | int | bool] = {
            "watch": True,
            "resourceVersion": resource_version,
            "allowWatchBookmarks": True,
            "timeoutSeconds": timeout_seconds,
        }
        if label_selector:
            query["labelSelector"] = label_selector
        if field_selector:
            query["fieldSelector"] = field_selector
        # No total deadline: the server ends the watch after timeoutSeconds; a silent socket
        # for well beyond that means the connection is dead.
        silence = aiohttp.ClientTimeout(total=None, sock_connect=self.timeout, sock_read=timeout_seconds + 30)
        path = resource.path(namespace)
        try:
            response = await self._open("GET", path, query=query, deadline=silence)
            async with response:
                if response.status != 200:
                    raise error_from_response(response.status, await response.text(), response.headers)
                buffer = bytearray()
                async for chunk in response.content.iter_any():
                    buffer += chunk
                    start = 0
                    while (end := buffer.find(b"\n", start)) >= 0:
                        line = buffer[start:end]
                        start = end + 1
                        if line.strip():
                            yield orjson.loads(line)
                    del buffer[:start]
                if buffer.strip():
                    yield orjson.loads(buffer)
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise _unreachable("WATCH", path, exc) from exc

    # -- writes

    async def create(self, resource: Resource, obj: Obj) -> Obj:
        namespace = obj.get("metadata", {}).get("namespace")
        return await self.request("POST", resource.path(namespace), body=obj)

    async def replace(self, resource: Resource, obj: Obj, *, subresource: str | None = None) -> Obj:
        """PUT the object; its ``metadata.resourceVersion`` makes the write conditional (409 if stale)."""
        meta = obj["metadata"]
        return await self.request("PUT", resource.path(meta.get("namespace"), meta["name"], subresource),
                                  body=obj)

    async def replace_status(self, resource: Resource, obj: Obj) -> Obj:
        return await self.replace(resource, obj, subresource="status")

    async def patch(
        self,
        resource: Resource,
        namespace: str | None,
        name: str,
        patch: Any,
        *,
        patch_type: PatchType = "merge",
        subresource: str | None = None,
    ) -> Obj:
        return await self.request("PATCH", resource.path(namespace, name, subresource), body=patch,
                                  content_type=_PATCH_CONTENT_TYPES[patch_type])

    async def delete(
        self,
        resource: Resource,
        namespace: str | None,
        name: str,
        *,
        propagation_policy: str | None = None,
        uid: str | None = None,
        missing_ok: bool = False,
    ) -> Obj | None:
        """Delete; ``uid`` makes it conditional. With ``missing_ok``, an object already gone is None."""
        body: Obj = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if propagation_policy:
            body["propagationPolicy"] = propagation_policy
        if uid:
            body["preconditions"] = {"uid": uid}
        try:
            return await self.request("DELETE", resource.path(namespace, name), body=body)
        except NotFound:
            if missing_ok:
                return None
            raise


def _query_value(value: str | int | bool) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _proxy_for(configuration: k8s_client.Configuration) -> tuple[str | URL | None, aiohttp.BasicAuth | None]:
    """The proxy for the API server, decided once: the kubeconfig's ``proxy-url``, else the
    environment's, exactly as aiohttp's ``trust_env`` would have found it on every request."""
    if configuration.proxy:
        return str(configuration.proxy), None
    try:
        return get_env_proxy_for_url(URL(str(configuration.host or "")))
    except LookupError:
        return None, None


def _unreachable(method: str, path: str, exc: BaseException) -> ApiUnreachable:
    if isinstance(exc, TimeoutError | asyncio.TimeoutError):
        return ApiUnreachable(f"{method} {path}: no answer before the deadline")
    text = str(exc) or type(exc).__name__
    return ApiUnreachable(f"{method} {path}: {text}")
