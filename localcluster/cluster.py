"""``LocalCluster``: the API server emulator as an async context manager.

    async with LocalCluster(token=True) as cluster:
        cluster.url, cluster.kubeconfig, cluster.store, cluster.requests
        sa_token = cluster.service_account_token("kadmit-system", "kadmit-controller-manager")
        cluster.kubeconfig_for(sa_token)   # a kubeconfig that authenticates as that service account

Several can run at once, each on its own port with its own store.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import secrets
import shutil
import tempfile
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from aiohttp import web

from kadmit.localcluster.admission import WebhookAdmission
from kadmit.localcluster.aggregation import Aggregator
from kadmit.localcluster.api import Api, Converter
from kadmit.localcluster.auth import AUTHENTICATED, TokenAuthenticator, User
from kadmit.localcluster.conversion import convert_objects
from kadmit.localcluster.endpoints import EndpointsResolver, UnresolvableService
from kadmit.localcluster.eventttl import DEFAULT_TTL, EventExpiry
from kadmit.localcluster.gc import GarbageCollector
from kadmit.localcluster.interfaces import AdmissionPlugin, ClusterAddon, Endpoint
from kadmit.localcluster.kubeconfig import kubeconfig_dict, write_kubeconfig
from kadmit.localcluster.lifecycle import Lifecycle
from kadmit.localcluster.limitranges import LimitRanger
from kadmit.localcluster.objects import Obj
from kadmit.localcluster.ownerrefs import OwnerReferencesPermissionEnforcement
from kadmit.localcluster.quota import ResourceQuotaAdmission
from kadmit.localcluster.rbac import AggregationController, AuditLog, Authorizer, install_bootstrap_policy
from kadmit.localcluster.resources import Registry
from kadmit.localcluster.server import RECORDED_REQUESTS, ApiServer, Middleware, RecordedRequest
from kadmit.localcluster.store import Store
from kadmit.localcluster.tls import make_serving_cert, server_context
from kadmit.localcluster.webhookclient import WebhookClient

log = logging.getLogger(__name__)
ServiceResolver = Callable[[str, str, int], tuple[str, int]]
SHUTDOWN_TIMEOUT = 2.0  # seconds in-flight requests get to finish when the cluster stops


def make_service_resolver(
    resolver: ServiceResolver | Mapping[tuple[str, str, int] | tuple[str, str], tuple[str, int]] | None,
) -> ServiceResolver:
    """Normalize a callable, a dict ``{(namespace, name[, port]): (host, port)}`` or None (no service
    has an address); :class:`LocalCluster` routes through Services and Endpoints when given none."""
    if callable(resolver):
        return resolver
    table = dict(resolver or {})

    def resolve(namespace: str, name: str, port: int) -> tuple[str, int]:
        found = table.get((namespace, name, port)) or table.get((namespace, name))
        if found is None:
            raise UnresolvableService(
                f'service "{name}" in namespace "{namespace}" port {port} has no address'
            )
        return found

    return resolve


def default_admission_plugins(store: Store, resolver: ServiceResolver) -> list[AdmissionPlugin]:
    """LimitRanger, webhook admission, then ResourceQuota, as the real server orders its plugins:
    a quota charges a pod as LimitRanges and mutating webhooks left it."""
    return [LimitRanger(store), WebhookAdmission(store, resolver), ResourceQuotaAdmission(store)]


def webhook_converter(client: WebhookClient, resolver: ServiceResolver) -> Converter:
    """CRD conversion through :func:`kadmit.localcluster.conversion.convert_objects`, one HTTPS session."""

    async def converter(crd: Obj, objects: list[Obj], api_version: str) -> list[Obj]:
        return await convert_objects(crd, objects, api_version, resolver, client=client)

    return converter


class LocalCluster(Lifecycle):
    """An in-process Kubernetes API server reachable over HTTP(S) with kubernetes-asyncio or kubectl."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        https: bool = False,
        token: str | bool | None = None,
        kubeconfig: str | Path | None = None,
        history_window: int = 10_000,
        bookmark_interval: float = 5.0,
        admission_plugins: Sequence[AdmissionPlugin] | None = None,
        addons: Sequence[ClusterAddon] = (),
        middlewares: Sequence[Middleware] = (),
        service_resolver: ServiceResolver | Mapping[Any, tuple[str, int]] | None = None,
        name: str = "kadmit-local",
        crd_validation_rules: bool = False,
        authorization: str = "RBAC",
        event_ttl: float = DEFAULT_TTL,
        record_requests: int = RECORDED_REQUESTS,
    ) -> None:
        """``token=True`` makes up a random bearer token; a string sets it; None serves without auth.

        The token authenticates as the cluster admin (``system:admin`` in ``system:masters``);
        :meth:`add_user` and :meth:`service_account_token` add other identities. Without a token,
        requests that carry none of those are the admin.

        ``service_resolver`` says where a webhook's ``clientConfig.service`` is served (a callable
        or a dict, see :func:`make_service_resolver`); without one the stored Service and its
        Endpoints say it, as on a cluster (:class:`~kadmit.localcluster.endpoints.EndpointsResolver`).

        ``crd_validation_rules=True`` evaluates CRDs' ``x-kubernetes-validations`` (CEL); it costs
        milliseconds per rule, so it is off unless a test wants it.

        ``authorization="RBAC"`` (the default) enforces RBAC for every identity but the admin (in
        ``system:masters``), with kube-apiserver's bootstrap roles installed and the ClusterRole
        aggregation controller running, and the OwnerReferencesPermissionEnforcement admission plugin
        among the default ones (after LimitRanger, as kube-apiserver orders them); ``"AlwaysAllow"``
        serves every authenticated request.

        ``event_ttl``: seconds an Event lives after its last write (kube-apiserver's ``--event-ttl``).

        ``record_requests``: how many of the latest requests :attr:`requests` keeps (0: none, for
        a server no test reads them from).
        """
        if authorization not in ("RBAC", "AlwaysAllow"):
            raise ValueError(f'authorization must be "RBAC" or "AlwaysAllow", not {authorization!r}')
        self.host = host
        self.port = port
        self.https = https
        self.token: str | None = secrets.token_urlsafe(24) if token is True else (token or None)
        self.auth = TokenAuthenticator(self.token)
        self.name = name
        self.store = Store(history_window=history_window)
        self.service_resolver: ServiceResolver = (
            EndpointsResolver(self.store)
            if service_resolver is None
            else make_service_resolver(service_resolver)
        )
        self.registry = Registry()
        self.authorizer = Authorizer(self.store) if authorization == "RBAC" else None
        audit = AuditLog()
        plugins = (
            default_admission_plugins(self.store, self.service_resolver)
            if admission_plugins is None
            else list(admission_plugins)
        )
        if self.authorizer is not None and admission_plugins is None:
            # After LimitRanger, before the webhooks: where kube-apiserver runs it.
            plugins.insert(1, OwnerReferencesPermissionEnforcement(self.authorizer, self.registry, audit))
        self.admission_plugins = plugins
        self._conversion_client = WebhookClient(self.service_resolver)
        self.api = Api(
            self.store,
            self.registry,
            plugins,
            webhook_converter(self._conversion_client, self.service_resolver),
            validation_rules=crd_validation_rules,
        )
        self.gc = GarbageCollector(self.api)
        self.event_expiry = EventExpiry(self.store, event_ttl)
        self.aggregator = Aggregator(self.store, self.service_resolver)
        self.store.create("", "configmaps", self.aggregator.authentication_configmap())
        install_bootstrap_policy(self.store)
        self.aggregation = AggregationController(self.store)  # ClusterRoles with an aggregationRule
        self.server = ApiServer(
            self.api,
            authenticator=self.auth,
            middlewares=middlewares,
            bookmark_interval=bookmark_interval,
            aggregator=self.aggregator,
            authorizer=self.authorizer,
            audit=audit,
            record_requests=record_requests,
        )
        self.addons = list(addons)
        self._apiservice_availability: asyncio.Task[None] | None = None
        self._kubeconfig_path = Path(kubeconfig) if kubeconfig else None
        self._workdir: Path | None = None
        self._runner: web.AppRunner | None = None
        self._started_addons: list[ClusterAddon] = []
        self.url = ""
        self.ca_file: str | None = None
        self.ca_pem: bytes | None = None

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        """Listen, write the kubeconfig, start the add-ons; on any failure, undo what was done."""
        try:
            await self._start()
        except BaseException:
            await self.stop()
            raise

    async def _start(self) -> None:
        self._workdir = Path(tempfile.mkdtemp(prefix="kadmit-localcluster-"))
        ssl_context = None
        if self.https:
            cert = make_serving_cert([self.host, "localhost", "127.0.0.1"])
            ssl_context = server_context(cert, self._workdir)
            ca_path = self._workdir / "ca.crt"
            ca_path.write_bytes(cert.ca_pem)
            self.ca_pem = cert.ca_pem
            self.ca_file = str(ca_path)
        self.gc.start()
        self.event_expiry.start()
        self._apiservice_availability = asyncio.create_task(
            self.aggregator.run(), name="apiservice-availability"
        )
        self.aggregation.start()
        self._runner = web.AppRunner(
            self.server.app, handler_cancellation=True, access_log=None, shutdown_timeout=SHUTDOWN_TIMEOUT
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, ssl_context=ssl_context, backlog=1024)
        await site.start()
        server = site._server
        assert server is not None
        sockets = getattr(server, "sockets", None) or []
        self.port = sockets[0].getsockname()[1]
        scheme = "https" if self.https else "http"
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.url = f"{scheme}://{host}:{self.port}"
        path = self._kubeconfig_path or self._workdir / "kubeconfig"
        write_kubeconfig(
            path, kubeconfig_dict(self.url, token=self.token, ca_data=self.ca_pem, name=self.name)
        )
        self.kubeconfig = str(path)
        for addon in self.addons:
            await addon.start(self.endpoint)
            self._started_addons.append(addon)

    async def stop(self) -> None:
        for addon in reversed(self._started_addons):
            try:
                await addon.stop()
            except Exception:
                log.exception("add-on %r failed to stop", addon)
        self._started_addons.clear()
        if self._apiservice_availability is not None:
            self._apiservice_availability.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._apiservice_availability
            self._apiservice_availability = None
        await self.gc.stop()
        await self.event_expiry.stop()
        await self.aggregation.stop()
        self.store.close_watchers()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        for plugin in self.admission_plugins:
            close = getattr(plugin, "close", None)
            if callable(close):
                await close()
        await self._conversion_client.close()
        await self.aggregator.close()
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None

    # -- handles ----------------------------------------------------------------------------

    kubeconfig: str = ""

    @property
    def endpoint(self) -> Endpoint:
        return Endpoint(url=self.url, token=self.token, ca_file=self.ca_file)

    @property
    def requests(self) -> deque[RecordedRequest]:
        """Every request served so far (most recent last), bounded."""
        return self.server.requests

    @property
    def audit(self) -> AuditLog:
        """Every authorized request by user, verb and resource, with the decision."""
        return self.server.audit

    async def settled(self) -> None:
        """Wait for pending garbage collection, namespace cleanup and ClusterRole aggregation."""
        await self.gc.settled()
        await self.aggregation.settled()

    async def api_client(self, token: str | None = None) -> Any:
        """A kubernetes-asyncio ``ApiClient`` from this cluster's kubeconfig, or as ``token``'s user."""
        from kubernetes_asyncio import client, config

        configuration = client.Configuration()
        path = self.kubeconfig if token is None else self.kubeconfig_for(token)
        await config.load_kube_config(config_file=path, client_configuration=configuration)
        return client.ApiClient(configuration)

    # -- identities -------------------------------------------------------------------------

    def add_user(self, token: str, username: str, groups: Sequence[str] = (), uid: str = "") -> User:
        """Let ``token`` authenticate as ``username``; ``system:authenticated`` is added, as upstream does."""
        names = tuple(groups)
        user = User(username, uid, names if AUTHENTICATED in names else (*names, AUTHENTICATED))
        self.auth.add(token, user)
        return user

    def service_account_token(self, namespace: str, name: str) -> str:
        """A new token for ``system:serviceaccount:<namespace>:<name>``, as the TokenRequest API
        (``POST .../serviceaccounts/<name>/token``) mints one, minus its check that the
        ServiceAccount exists; the uid is the stored ServiceAccount's when it does."""
        return self.server.service_account_token(namespace, name)

    def kubeconfig_for(self, token: str, path: str | Path | None = None) -> str:
        """Write a kubeconfig that authenticates with ``token`` (default: beside the cluster's own)."""
        if not self.url or self._workdir is None:
            raise RuntimeError("the cluster is not started: it has no address to put in a kubeconfig")
        if path is None:
            path = self._workdir / f"kubeconfig-{hashlib.sha256(token.encode()).hexdigest()[:16]}"
        write_kubeconfig(path, kubeconfig_dict(self.url, token=token, ca_data=self.ca_pem, name=self.name))
        return str(path)
