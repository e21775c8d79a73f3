"""The aggregation layer: ``APIService`` objects (``apiregistration.k8s.io/v1``) that name a
Service make the server proxy ``/apis/<group>/<version>/...`` there, as kube-apiserver's
kube-aggregator does.

- An ``APIService`` named ``<version>.<group>`` whose ``spec.service`` is set claims that group
  version: every request under ``/apis/<group>/<version>`` (its discovery document included) is
  sent to the Service, resolved through its Endpoints as webhook calls are
  (:mod:`kadmit.localcluster.endpoints`), with the same method, query, body and content headers;
  the caller's credentials are not forwarded, its identity is, in the ``X-Remote-User`` /
  ``X-Remote-Group`` / ``X-Remote-Extra-*`` headers of the front proxy.
- TLS: ``insecureSkipTLSVerify: true`` skips verification; otherwise the server's certificate
  must verify against ``caBundle`` (or the system roots) for ``<service>.<namespace>.svc``.
- A backend that cannot be reached (no Service, no Endpoints, refused, TLS failure) is a 503
  ``ServiceUnavailable`` whose message says which APIService and why.
- Discovery: ``/apis`` and ``/apis/<group>`` list the aggregated groups, versions ordered by
  ``versionPriority`` then Kubernetes' version order; the aggregated ``apidiscovery.k8s.io/v2``
  document asks each backend for its ``APIResourceList`` (kube-aggregator's fallback for
  servers without aggregated discovery) and lists what it answered.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import shutil
import ssl
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from multidict import CIMultiDict

from kadmit.localcluster.auth import User
from kadmit.localcluster.interfaces import StoreView
from kadmit.localcluster.objects import Obj
from kadmit.localcluster.resources import version_priority
from kadmit.localcluster.timestamps import now as timestamp_now
from kadmit.localcluster.tls import make_client_cert
from kadmit.localcluster.webhookclient import (
    DEFAULT_SERVICE_PORT,
    ServiceResolver,
    WebhookCallError,
    WebhookClient,
    _describe_connect_error,
)

log = logging.getLogger(__name__)

GROUP = "apiregistration.k8s.io"
FRONT_PROXY_USER = "front-proxy-client"  # the common name of the front proxy's certificate, as kubeadm's
AUTHENTICATION_CONFIGMAP = "extension-apiserver-authentication"
# Who kube-aggregator's own discovery and availability requests are made as.
AGGREGATOR_IDENTITY = {"X-Remote-User": "system:kube-aggregator", "X-Remote-Group": "system:masters"}
PLURAL = "apiservices"
# Request headers passed on to the backend; the rest (Authorization first) stay here.
FORWARDED_HEADERS = ("Accept", "Content-Type", "User-Agent", "Accept-Language")
# Response headers passed back to the client.
RETURNED_HEADERS = ("Content-Type", "Warning", "Audit-Id", "Cache-Control")
CONNECT_TIMEOUT = 5.0
READ_TIMEOUT = 60.0  # kube-apiserver's default request timeout
DISCOVERY_TIMEOUT = 3.0
CHECK_INTERVAL = 2.0  # how often the Available conditions are refreshed
_ROUTING = {("", "services"), ("", "endpoints")}
_CHUNK = 64 * 1024


class BackendUnavailable(Exception):
    """The APIService's backend did not answer; the message is the 503's."""


@dataclass(frozen=True)
class Backend:
    """Where one APIService's requests go."""

    apiservice: str
    url: str  # https://host:port, the resolved address
    server_hostname: str | None  # TLS name when verified
    host_header: str
    ssl_context: ssl.SSLContext


def unavailable_status(message: str) -> Obj:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": "ServiceUnavailable",
        "code": 503,
    }


class Aggregator:
    """Looks APIServices up in the store and proxies to their Services."""

    def __init__(self, store: StoreView, resolver: ServiceResolver) -> None:
        self.store = store
        self._tls = WebhookClient(resolver)  # it checks caBundles as for webhook calls
        self.front_proxy = make_client_cert(FRONT_PROXY_USER)
        """The front proxy's client certificate, which backends verify against the CA published
        in ``kube-system/extension-apiserver-authentication`` (:meth:`authentication_configmap`)."""
        self._contexts: dict[tuple[str, bool], ssl.SSLContext] = {}
        self._client_files: tuple[Path, Path] | None = None
        self._resolver = resolver
        self._session: aiohttp.ClientSession | None = None
        self._session_loop: asyncio.AbstractEventLoop | None = None
        self._resources: dict[str, list[Obj]] = {}  # last discovery answer per APIService
        self._wake = asyncio.Event()
        add_listener = getattr(store, "add_listener", None)
        if callable(add_listener):
            add_listener(self._on_event)

    def _on_event(self, event: Any) -> None:
        """A new APIService, or a change to Services or Endpoints: check availability now."""
        if (event.key == (GROUP, PLURAL) and event.type == "ADDED") or event.key in _ROUTING:
            self._wake.set()

    async def close(self) -> None:
        if self._session is not None and self._session_loop is asyncio.get_running_loop():
            await self._session.close()
        self._session = None
        if self._client_files is not None:
            shutil.rmtree(self._client_files[0].parent, ignore_errors=True)
            self._client_files = None

    def authentication_configmap(self) -> Obj:
        """``kube-system/extension-apiserver-authentication`` as kube-apiserver publishes it for
        aggregated API servers: the front proxy's CA, its allowed names and its headers."""
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": AUTHENTICATION_CONFIGMAP, "namespace": "kube-system"},
            "data": {
                "requestheader-client-ca-file": self.front_proxy.ca_pem.decode(),
                "requestheader-allowed-names": json.dumps([FRONT_PROXY_USER]),
                "requestheader-username-headers": json.dumps(["X-Remote-User"]),
                "requestheader-uid-headers": json.dumps(["X-Remote-Uid"]),
                "requestheader-group-headers": json.dumps(["X-Remote-Group"]),
                "requestheader-extra-headers-prefix": json.dumps(["X-Remote-Extra-"]),
            },
        }

    # -- lookups ------------------------------------------------------------------------------

    def _apiservices(self) -> list[Obj]:
        return [a for a in self.store.list(GROUP, PLURAL, None) if (a.get("spec") or {}).get("service")]

    def claims(self, group: str, version: str) -> Obj | None:
        """The APIService that sends ``group``/``version`` to a Service, if one does."""
        found = self.store.get(GROUP, PLURAL, None, f"{version}.{group}")
        if found is None or not (found.get("spec") or {}).get("service"):
            return None
        return found

    def groups(self) -> list[tuple[str, list[str]]]:
        """(group, versions in preference order) of every aggregated group, by group priority."""
        by_group: dict[str, list[Obj]] = {}
        for apiservice in self._apiservices():
            by_group.setdefault(str(apiservice["spec"].get("group", "")), []).append(apiservice)
        ordered = sorted(
            by_group.items(),
            key=lambda item: (
                -max(int(a["spec"].get("groupPriorityMinimum") or 0) for a in item[1]),
                item[0],
            ),
        )
        return [
            (group, [str(a["spec"]["version"]) for a in _by_version_priority(members)])
            for group, members in ordered
        ]

    def group_document(self, group: str) -> Obj | None:
        for name, versions in self.groups():
            if name == group:
                return group_document(group, versions)
        return None

    # -- proxying -----------------------------------------------------------------------------

    def backend(self, apiservice: Obj) -> Backend:
        """Resolve the Service and its Endpoints; BackendUnavailable when there is no address."""
        spec = apiservice["spec"]
        name = apiservice["metadata"]["name"]
        service = spec["service"]
        namespace, service_name = str(service.get("namespace", "")), str(service.get("name", ""))
        port = int(service.get("port") or DEFAULT_SERVICE_PORT)
        try:
            host, local_port = self._resolver(namespace, service_name, port)
        except LookupError as exc:
            reason = str(exc.args[0]) if exc.args else str(exc)
            raise BackendUnavailable(f"service unavailable: APIService {name}: {reason}") from None
        dns_name = f"{service_name}.{namespace}.svc"
        insecure = bool(spec.get("insecureSkipTLSVerify"))
        try:
            context = self._context(str(spec.get("caBundle") or ""), insecure)
        except WebhookCallError as exc:
            raise BackendUnavailable(f"service unavailable: APIService {name}: {exc.reason}") from None
        server_hostname = None if insecure else dns_name
        connect_host = f"[{host}]" if ":" in host else host
        return Backend(
            name, f"https://{connect_host}:{local_port}", server_hostname, f"{dns_name}:{port}", context
        )

    def _context(self, ca_bundle: str, insecure: bool) -> ssl.SSLContext:
        """Verify the backend against ``ca_bundle`` (checked as a webhook's; the system roots
        when empty), or not at all; present the front proxy's client certificate. Cached."""
        key = (ca_bundle, insecure)
        context = self._contexts.get(key)
        if context is not None:
            return context
        if insecure:
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        else:
            self._tls.ssl_context(ca_bundle or None)  # raises, worded as kube-apiserver does
            pem = base64.b64decode(ca_bundle).decode("ascii") if ca_bundle else None
            context = ssl.create_default_context(cadata=pem)
        context.load_cert_chain(*self._client_cert_files())
        self._contexts[key] = context
        return context

    def _client_cert_files(self) -> tuple[Path, Path]:
        """The front proxy's certificate and key as files (``load_cert_chain`` reads only files)."""
        if self._client_files is None:
            directory = Path(tempfile.mkdtemp(prefix="kadmit-front-proxy-"))
            cert, key = directory / "front-proxy-client.crt", directory / "front-proxy-client.key"
            cert.write_bytes(self.front_proxy.cert_pem)
            key.touch(0o600)
            key.write_bytes(self.front_proxy.key_pem)
            self._client_files = (cert, key)
        return self._client_files

    async def proxy(
        self, request: web.Request, apiservice: Obj, user: User, body: bytes
    ) -> web.StreamResponse:
        """Send the request to the APIService's Service and stream its answer back."""
        try:
            backend = self.backend(apiservice)
        except BackendUnavailable as exc:
            return _unavailable(str(exc))
        headers = {key: request.headers[key] for key in FORWARDED_HEADERS if key in request.headers}
        headers["Host"] = backend.host_header
        identity: list[tuple[str, str]] = [("X-Remote-User", user.username)]
        identity += [("X-Remote-Group", group) for group in user.groups]
        if user.uid:
            identity.append(("X-Remote-Uid", user.uid))
        watching = request.query.get("watch", "").lower() in ("true", "1")
        timeout = aiohttp.ClientTimeout(
            sock_connect=CONNECT_TIMEOUT, sock_read=None if watching else READ_TIMEOUT
        )
        url = backend.url + request.rel_url.raw_path_qs
        session = self._ensure_session()
        response: web.StreamResponse | None = None
        try:
            async with session.request(
                request.method,
                url,
                data=body or None,
                headers=CIMultiDict([*headers.items(), *identity]),
                ssl=backend.ssl_context,
                server_hostname=backend.server_hostname,
                timeout=timeout,
                allow_redirects=False,
            ) as answer:
                response = web.StreamResponse(status=answer.status)
                for key in RETURNED_HEADERS:
                    for value in answer.headers.getall(key, []):
                        response.headers.add(key, value)
                await response.prepare(request)
                async for chunk in answer.content.iter_chunked(_CHUNK):
                    await response.write(chunk)
                await response.write_eof()
                return response
        except (aiohttp.ClientError, TimeoutError, ssl.SSLError, OSError) as exc:
            detail = _describe(exc, backend)
            log.info("proxy to %s failed: %s", backend.apiservice, detail)
            if response is not None and response.prepared:
                return response  # cut short mid-answer: the client sees the connection end
            return _unavailable(f"service unavailable: APIService {backend.apiservice}: {detail}")

    def _ensure_session(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._session_loop is not loop:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=64), trust_env=False, auto_decompress=False
            )
            self._session_loop = loop
        return self._session

    # -- availability (kube-aggregator's AvailableConditionController) -------------------------

    async def run(self, interval: float = CHECK_INTERVAL) -> None:
        """Keep every APIService's ``Available`` condition current, until cancelled."""
        while True:
            self._wake.clear()
            try:
                await self.check()
            except Exception:  # a store or probe surprise must not end the loop
                log.exception("checking APIServices failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), interval)

    async def check(self) -> None:
        """Probe each APIService once and write its ``Available`` condition when it changed."""
        for apiservice in self.store.list(GROUP, PLURAL, None):
            value, reason, message = await self._availability(apiservice)
            status = dict(apiservice.get("status") or {})
            conditions = [c for c in status.get("conditions") or [] if isinstance(c, dict)]
            current = next((c for c in conditions if c.get("type") == "Available"), None)
            if current is not None and (
                current.get("status"),
                current.get("reason"),
                current.get("message"),
            ) == (
                value,
                reason,
                message,
            ):
                continue
            changed = current is None or current.get("status") != value
            condition = {
                "type": "Available",
                "status": value,
                "lastTransitionTime": current.get("lastTransitionTime")
                if current is not None and not changed
                else timestamp_now(),
                "reason": reason,
                "message": message,
            }
            status["conditions"] = [c for c in conditions if c.get("type") != "Available"] + [condition]
            name = apiservice["metadata"]["name"]
            if self.store.get(GROUP, PLURAL, None, name) is not None:  # not deleted meanwhile
                self.store.write_status(GROUP, PLURAL, None, name, status)

    async def _availability(self, apiservice: Obj) -> tuple[str, str, str]:
        spec = apiservice.get("spec") or {}
        service = spec.get("service")
        if not service:
            return "True", "Local", "Local APIServices are always available"
        name, namespace = service.get("name", ""), service.get("namespace", "")
        try:
            backend = self.backend(apiservice)
        except BackendUnavailable as exc:
            text = str(exc)
            if "endpoints" in text:
                return (
                    "False",
                    "MissingEndpoints",
                    f'endpoints for service/{name} in "{namespace}" have no addresses with port name "https"',
                )
            if "not found" in text and "service" in text:
                return "False", "ServiceNotFound", f'service/{name} in "{namespace}" is not present'
            return "False", "FailedDiscoveryCheck", text
        url = f"{backend.url}/apis/{spec.get('group')}/{spec.get('version')}"
        try:
            async with self._ensure_session().get(
                url,
                headers={"Accept": "application/json", "Host": backend.host_header, **AGGREGATOR_IDENTITY},
                ssl=backend.ssl_context,
                server_hostname=backend.server_hostname,
                timeout=aiohttp.ClientTimeout(total=DISCOVERY_TIMEOUT),
            ) as answer:
                await answer.read()
                if not 200 <= answer.status < 300:
                    return (
                        "False",
                        "FailedDiscoveryCheck",
                        f"failing or missing response from {url}: bad status from {url}: {answer.status}",
                    )
        except (aiohttp.ClientError, TimeoutError, ssl.SSLError, OSError) as exc:
            return (
                "False",
                "FailedDiscoveryCheck",
                f"failing or missing response from {url}: {_describe(exc, backend)}",
            )
        return "True", "Passed", "all checks passed"

    # -- aggregated discovery -----------------------------------------------------------------

    async def discovery_items(self) -> list[Obj]:
        """``APIGroupDiscovery`` items for the aggregated groups (apidiscovery.k8s.io/v2)."""
        groups = self.groups()
        wanted = [(group, version) for group, versions in groups for version in versions]
        answers = await asyncio.gather(*(self._fetch_resources(g, v) for g, v in wanted))
        found = dict(zip(wanted, answers, strict=True))
        items = []
        for group, versions in groups:
            entries = []
            for version in versions:
                resources, fresh = found[(group, version)]
                if resources is None:
                    continue
                entries.append(
                    {
                        "version": version,
                        "resources": aggregated_resources(resources),
                        "freshness": "Current" if fresh else "Stale",
                    }
                )
            if entries:
                items.append({"metadata": {"name": group, "creationTimestamp": None}, "versions": entries})
        return items

    async def _fetch_resources(self, group: str, version: str) -> tuple[list[Obj] | None, bool]:
        """The backend's resources for one group version, or the last ones it gave (stale)."""
        apiservice = self.claims(group, version)
        if apiservice is None:
            return None, False
        name = apiservice["metadata"]["name"]
        try:
            backend = self.backend(apiservice)
            async with self._ensure_session().get(
                f"{backend.url}/apis/{group}/{version}",
                headers={"Accept": "application/json", "Host": backend.host_header, **AGGREGATOR_IDENTITY},
                ssl=backend.ssl_context,
                server_hostname=backend.server_hostname,
                timeout=aiohttp.ClientTimeout(total=DISCOVERY_TIMEOUT),
            ) as answer:
                if answer.status != 200:
                    raise BackendUnavailable(f"HTTP {answer.status}")
                document = json.loads(await answer.read())
            resources = [r for r in document.get("resources") or [] if isinstance(r, dict)]
        except (
            BackendUnavailable,
            aiohttp.ClientError,
            TimeoutError,
            ssl.SSLError,
            OSError,
            ValueError,
        ) as exc:
            log.info("discovery of %s failed: %s", name, exc)
            cached = self._resources.get(name)
            return cached, False
        self._resources[name] = resources
        return resources, True


def group_document(group: str, versions: list[str]) -> Obj:
    # kadmit.controller.visibility writes the same APIGroup document for the group it serves; the
    # local cluster imports nothing of kadmit's (it is the oracle kadmit is tested against), so
    # this side keeps its own copy, as kube-apiserver and an aggregated server each write theirs.
    entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": group,
        "versions": entries,
        "preferredVersion": entries[0],
    }


def aggregated_resources(resources: Iterable[Obj]) -> list[Obj]:
    """An ``APIResourceList``'s resources in the aggregated form: subresources under their parent."""
    tops: dict[str, Obj] = {}
    subs: list[tuple[str, str, Obj]] = []
    for resource in resources:
        name = str(resource.get("name", ""))
        kind = {"group": "", "version": "", "kind": resource.get("kind", "")}
        if "/" in name:
            parent, _, sub = name.partition("/")
            subs.append(
                (
                    parent,
                    sub,
                    {"subresource": sub, "responseKind": kind, "verbs": list(resource.get("verbs") or [])},
                )
            )
            continue
        entry: Obj = {
            "resource": name,
            "responseKind": kind,
            "scope": "Namespaced" if resource.get("namespaced") else "Cluster",
            "singularResource": resource.get("singularName", ""),
            "verbs": list(resource.get("verbs") or []),
        }
        for key in ("shortNames", "categories"):
            if resource.get(key):
                entry[key] = list(resource[key])
        tops[name] = entry
    for parent, _, sub_entry in subs:
        if parent in tops:
            tops[parent].setdefault("subresources", []).append(sub_entry)
    return [tops[name] for name in sorted(tops)]


def _by_version_priority(apiservices: list[Obj]) -> list[Obj]:
    return sorted(
        apiservices,
        key=lambda a: (
            int(a["spec"].get("versionPriority") or 0),
            version_priority(str(a["spec"]["version"])),
        ),
        reverse=True,
    )


def _unavailable(message: str) -> web.Response:
    return web.Response(
        body=json.dumps(unavailable_status(message)).encode(), status=503, content_type="application/json"
    )


def _describe(exc: BaseException, backend: Backend) -> str:
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return f"tls: failed to verify certificate: {exc.certificate_error}"
    if isinstance(exc, aiohttp.ClientConnectorError):
        return _describe_connect_error(exc)  # as a webhook call's: "dial tcp ...: connection refused"
    if isinstance(exc, TimeoutError):
        return "the backend did not answer in time"
    return str(exc) or type(exc).__name__
