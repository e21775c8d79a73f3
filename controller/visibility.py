"""The Visibility API: ``visibility.kueue.x-k8s.io`` v1beta2 and v1beta1, as Kueue's visibility
server serves them (``pkg/visibility``), over HTTPS for the API server to proxy to.

The API server forwards ``/apis/visibility.kueue.x-k8s.io/<version>/...`` here through the
``APIService`` objects of ``manifests/base/visibility.yaml``. Two reads are served, both from the
engine's own queues, in the order its scheduler takes them (a preemptor waiting for its victims
first, then priority, queue-order time):

- ``clusterqueues/<name>/pendingworkloads``
- ``namespaces/<ns>/localqueues/<name>/pendingworkloads``

each a ``PendingWorkloadsSummary`` whose items carry ``priority``, ``localQueueName``,
``positionInClusterQueue`` and ``positionInLocalQueue`` (from 0), with ``limit`` (default
1000, at most 100000) and ``offset`` (default 0), and the discovery documents an aggregated API
server answers (``/apis``, ``/apis/<group>``, ``/apis/<group>/<version>``).

Every replica serves it from its warm engine (a follower's is fed by the same informers).

Who may ask: as Kueue's server (a Kubernetes aggregated API server), kadmit trusts the API
server's front proxy: a request must come with a client certificate that verifies against
``requestheader-client-ca-file`` of ``kube-system/extension-apiserver-authentication`` and names
one of its ``requestheader-allowed-names``; the user is in its ``X-Remote-User`` header. The API
server has already authorized the user (RBAC on ``clusterqueues/pendingworkloads`` and
``localqueues/pendingworkloads`` of this group) before it proxies; any other caller (a pod
reaching port 8082 directly) gets a 401.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from kadmit.engine import Engine, PendingWorkload
from kadmit.kube import ApiError, Client, Informer, Obj
from kadmit.kube.resources import CONFIG_MAPS

logger = logging.getLogger(__name__)

GROUP = "visibility.kueue.x-k8s.io"
VERSIONS = ("v1beta2", "v1beta1")  # preferred first, as Kueue's PrioritizedVersions
DEFAULT_LIMIT = 1000  # Kueue's constants.DefaultPendingWorkloadsLimit
MAX_LIMIT = 100_000  # constants.MaxPendingWorkloadsLimit
SUMMARY = "PendingWorkloadsSummary"


def _json(body: Obj, status: int = 200) -> web.Response:
    return web.Response(
        body=json.dumps(body, separators=(",", ":")).encode(), status=status, content_type="application/json"
    )


def _status(code: int, reason: str, message: str, details: Obj | None = None) -> web.Response:
    body: Obj = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details is not None:
        body["details"] = details
    return _json(body, code)


def _not_found(kind: str, name: str) -> web.Response:
    """Kueue's ``errors.NewNotFound(visibility.Resource(kind), name)``."""
    return _status(
        404, "NotFound", f'{kind}.{GROUP} "{name}" not found', {"name": name, "group": GROUP, "kind": kind}
    )


def _path_not_found() -> web.Response:
    return _status(404, "NotFound", "the server could not find the requested resource", {})


def group_document() -> Obj:
    versions = [{"groupVersion": f"{GROUP}/{v}", "version": v} for v in VERSIONS]
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": GROUP,
        "versions": versions,
        "preferredVersion": versions[0],
    }


def resource_list(version: str) -> Obj:
    """The ``APIResourceList`` Kueue's generic API server derives from its storage map."""

    def entry(name: str, namespaced: bool, verbs: list[str], singular: str) -> Obj:
        return {
            "name": name,
            "singularName": singular,
            "namespaced": namespaced,
            "kind": SUMMARY,
            "verbs": verbs,
        }

    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{GROUP}/{version}",
        "resources": [
            entry("clusterqueues", False, [], "clusterqueue"),
            entry("clusterqueues/pendingworkloads", False, ["get"], ""),
            entry("localqueues", True, [], "localqueue"),
            entry("localqueues/pendingworkloads", True, ["get"], ""),
        ],
    }


AUTHENTICATION = ("kube-system", "extension-apiserver-authentication")
PROBES = frozenset({"/healthz", "/livez", "/readyz"})


class FrontProxyAuth:
    """Authenticates the API server's front proxy by its client certificate, as an aggregated
    API server does with ``--requestheader-*`` (read from the ConfigMap the API server publishes)."""

    def __init__(self, context: ssl.SSLContext) -> None:
        self.context = context
        self.allowed_names: frozenset[str] = frozenset()
        self.username_headers: tuple[str, ...] = ("X-Remote-User",)
        self.loaded = False

    def configure(self, configmap: Obj) -> None:
        """Trust the front proxy's CA from now on; ValueError when the ConfigMap has none."""
        data = configmap.get("data") or {}
        ca = data.get("requestheader-client-ca-file")
        if not ca:
            raise ValueError("it has no requestheader-client-ca-file")
        try:
            names = json.loads(data.get("requestheader-allowed-names") or "[]")
            headers = json.loads(data.get("requestheader-username-headers") or '["X-Remote-User"]')
            self.context.load_verify_locations(cadata=ca)
        except (ValueError, ssl.SSLError) as exc:
            raise ValueError(f"it cannot be used: {exc}") from None
        self.context.verify_mode = ssl.CERT_OPTIONAL
        self.allowed_names = frozenset(str(n) for n in names)
        self.username_headers = tuple(str(h) for h in headers) or ("X-Remote-User",)
        self.loaded = True

    async def run(self, client: Client, retry: float = 10.0, refresh: float = 300.0) -> None:
        """Read the ConfigMap until it is there, then again now and then (a new CA is added)."""
        warned = False
        while True:
            try:
                configmap = await client.get_or_none(CONFIG_MAPS, *AUTHENTICATION)
                if configmap is None:
                    raise ValueError("it does not exist")
                self.configure(configmap)
            except (ApiError, ValueError) as exc:
                if not warned:
                    where = "/".join(AUTHENTICATION)
                    logger.warning(
                        "visibility server: cannot use ConfigMap %s (%s): requests are refused", where, exc
                    )
                    warned = True
            await asyncio.sleep(refresh if self.loaded else retry)

    def user(self, request: web.Request) -> str | None:
        """The user the front proxy vouches for; None when the caller is not the front proxy."""
        if not self.loaded or request.transport is None:
            return None
        peer = request.transport.get_extra_info("peercert")
        names = [
            value for rdn in (peer or {}).get("subject", ()) for key, value in rdn if key == "commonName"
        ]
        if not names or (self.allowed_names and names[0] not in self.allowed_names):
            return None
        for header in self.username_headers:
            if request.headers.get(header):
                return request.headers[header]
        return None


class BadOptions(ValueError):
    """``limit`` or ``offset`` is not an integer."""


def limit_and_offset(query: Any) -> tuple[int, int]:
    """Kueue's ``PendingWorkloadOptions`` decoding: an absent or 0 limit is 1000; then
    ``boundedLimitOffset`` clamps the limit to [0, 100000] and the offset to 0 or more."""
    values = []
    for name in ("limit", "offset"):
        text = query.get(name, "")
        try:
            values.append(int(text) if text != "" else 0)
        except ValueError:
            raise BadOptions(f'{name}: invalid value "{text}": must be an integer') from None
    limit, offset = values
    if limit == 0:
        limit = DEFAULT_LIMIT
    return min(max(limit, 0), MAX_LIMIT), max(offset, 0)


class VisibilityAPI:
    """The handlers, over the engine (order and positions) and the Workload informer (metadata)."""

    def __init__(
        self,
        engine: Engine,
        workloads: Informer,
        ready: Callable[[], bool] = lambda: True,
        synced: Callable[[], bool] = lambda: True,
        auth: FrontProxyAuth | None = None,
    ) -> None:
        """``synced``: the engine holds the cluster's objects (before that, queries are 503).
        ``auth``: who may ask (None: anyone, for tests of the documents alone)."""
        self.engine = engine
        self.workloads = workloads
        self.ready = ready
        self.synced = synced
        self.auth = auth

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._authenticate] if self.auth is not None else [])
        router = app.router
        router.add_get("/apis", self._groups)
        router.add_get("/apis/", self._groups)
        router.add_get("/apis/{group}", self._group)
        router.add_get("/apis/{group}/{version}", self._resources)
        router.add_get("/apis/{group}/{version}/clusterqueues/{name}/pendingworkloads", self._cluster_queue)
        router.add_get(
            "/apis/{group}/{version}/namespaces/{namespace}/localqueues/{name}/pendingworkloads",
            self._local_queue,
        )
        for probe in ("/healthz", "/livez"):
            router.add_get(probe, self._ok)
        router.add_get("/readyz", self._readyz)
        router.add_route("*", "/{tail:.*}", self._unknown)
        return app

    @web.middleware
    async def _authenticate(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if request.path in PROBES or self.auth is None or self.auth.user(request) is not None:
            return await handler(request)
        return _status(401, "Unauthorized", "Unauthorized")

    # -- discovery ----------------------------------------------------------------------------

    async def _groups(self, _: web.Request) -> web.Response:
        return _json({"kind": "APIGroupList", "apiVersion": "v1", "groups": [group_document()]})

    async def _group(self, request: web.Request) -> web.Response:
        if request.match_info["group"] != GROUP:
            return _path_not_found()
        return _json(group_document())

    async def _resources(self, request: web.Request) -> web.Response:
        version = self._version(request)
        if version is None:
            return _path_not_found()
        return _json(resource_list(version))

    @staticmethod
    def _version(request: web.Request) -> str | None:
        version = request.match_info["version"]
        return version if request.match_info["group"] == GROUP and version in VERSIONS else None

    # -- pending workloads --------------------------------------------------------------------

    def _not_synced(self) -> web.Response | None:
        if self.synced():
            return None
        return _status(503, "ServiceUnavailable", "kadmit is starting: its caches are not synced yet")

    async def _cluster_queue(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]

        def pending(offset: int, limit: int) -> list[PendingWorkload] | web.Response:
            found = self.engine.pending_workloads(name, offset=offset, limit=limit)
            return _not_found("clusterqueue", name) if found is None else found

        return self._pending(request, pending)

    async def _local_queue(self, request: web.Request) -> web.Response:
        namespace, name = request.match_info["namespace"], request.match_info["name"]

        def pending(offset: int, limit: int) -> list[PendingWorkload] | web.Response:
            local_queue = self.engine.local_queues.get((namespace, name))
            if local_queue is None:
                return _not_found("localqueue", name)
            found = self.engine.pending_workloads(
                local_queue.cluster_queue, local_queue=(namespace, name), offset=offset, limit=limit
            )
            return found or []

        return self._pending(request, pending)

    def _pending(
        self, request: web.Request, pending: Callable[[int, int], list[PendingWorkload] | web.Response]
    ) -> web.Response:
        """The checks both pendingworkloads paths make, in Kueue's order (path, caches, options),
        then the summary of what ``pending(offset, limit)`` finds (or the error it answers)."""
        version = self._version(request)
        if version is None:
            return _path_not_found()
        if (starting := self._not_synced()) is not None:
            return starting
        try:
            limit, offset = limit_and_offset(request.query)
        except BadOptions as exc:
            return _status(400, "BadRequest", str(exc))
        found = pending(offset, limit)
        return found if isinstance(found, web.Response) else self._summary(version, found)

    def _summary(self, version: str, pending: list[PendingWorkload]) -> web.Response:
        return _json(
            {
                "kind": SUMMARY,
                "apiVersion": f"{GROUP}/{version}",
                "metadata": {"creationTimestamp": None},
                "items": [self._item(p) for p in pending],
            }
        )

    def _item(self, pending: PendingWorkload) -> Obj:
        """Kueue's ``newPendingWorkload``: the metadata comes from the Workload as cached."""
        metadata: Obj = {"name": pending.name, "namespace": pending.namespace, "creationTimestamp": None}
        cached = self.workloads.get(pending.namespace, pending.name)
        if cached is not None:
            meta = cached.get("metadata") or {}
            metadata["creationTimestamp"] = meta.get("creationTimestamp")
            owners = [
                {key: ref[key] for key in ("apiVersion", "kind", "name", "uid") if key in ref}
                for ref in meta.get("ownerReferences") or []
            ]
            if owners:
                metadata["ownerReferences"] = owners
        return {
            "metadata": metadata,
            "priority": pending.priority,
            "localQueueName": pending.local_queue,
            "positionInClusterQueue": pending.position_in_cluster_queue,
            "positionInLocalQueue": pending.position_in_local_queue,
        }

    # -- the rest -----------------------------------------------------------------------------

    async def _ok(self, _: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _readyz(self, _: web.Request) -> web.Response:
        if self.ready():
            return web.Response(text="ok")
        return web.Response(status=503, text="not ready")

    async def _unknown(self, request: web.Request) -> web.Response:
        if request.method != "GET":
            return _status(
                405,
                "MethodNotAllowed",
                f"the server does not allow this method on the requested resource ({request.method})",
                {},
            )
        return _path_not_found()
