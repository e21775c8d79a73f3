"""kadmit as one process: the manager, its webhook server with self-managed certificates, metrics,
health probes and leader election, started and stopped in the right order.

``kadmit run`` and ``kadmit local`` both run a :class:`KadmitApp`; they differ only in how they
reach the API server and what they install into it first.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from aiohttp import web

from kadmit.checks.discovery import available
from kadmit.checks.metrics import CheckMetrics
from kadmit.controller import collector
from kadmit.controller.admission_checks import AdmissionChecksLoop, servable_plugins
from kadmit.controller.clusterview import InformerClusterView
from kadmit.controller.config import Configuration
from kadmit.controller.manager import Manager
from kadmit.controller.metrics import Metrics, metrics_app
from kadmit.controller.visibility import FrontProxyAuth, VisibilityAPI
from kadmit.kube import Client, LeaderElector, default_identity
from kadmit.kube.resources import (
    ADMISSION_CHECKS,
    CLUSTER_QUEUES,
    LOCAL_QUEUES,
    NAMESPACES,
    WORKLOAD_PRIORITY_CLASSES,
)
from kadmit.kube.workers import cancel_all
from kadmit.webhook.app import create_webhook_app
from kadmit.webhook.jobs import CONTROLLER_USERNAME, JobWebhookConfig
from kadmit.webhook.metrics import WebhookMetrics
from kadmit.webhook.pods import PodOptions
from kadmit.webhook.server import WebhookServer
from kadmit.webhook.tls import ServingTLS

logger = logging.getLogger(__name__)


class BindError(ValueError):
    """A bind address that cannot be used (``host:port``, ``:port``, or ``0`` to disable)."""


def parse_bind_address(address: str) -> tuple[str, int] | None:
    """``":8080"`` → ("0.0.0.0", 8080); ``"0"`` or ``""`` → None (disabled), as controller-runtime."""
    if address in ("", "0"):
        return None
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise BindError(f"invalid bind address {address!r}: want host:port or :port")
    return host.strip("[]") or "0.0.0.0", int(port)


class KadmitApp:
    def __init__(
        self,
        client: Client,
        config: Configuration,
        *,
        identity: str | None = None,
        controller_username: str = CONTROLLER_USERNAME,
        rotation: Any = None,
        check_plugins: Sequence[str] | None = None,
        cert_mode: str | None = None,
        cert_dir: str | None = None,
        clock: Callable[[], float] = time.time,
        owns_process: bool = False,
        metrics_secure: bool = False,
    ) -> None:
        """``rotation`` is a :class:`kadmit.certs.rotation.RotationPolicy` (Kueue-like defaults when None).

        ``owns_process``: this app is the process (``kadmit run``, ``kadmit local``), so it may set
        process-wide policies such as garbage collection (see :mod:`kadmit.controller.collector`).
        ``metrics_secure`` serves ``/metrics`` on HTTPS to callers a TokenReview and a
        SubjectAccessReview let in (:mod:`kadmit.controller.metrics_auth`); else plain HTTP."""
        self.metrics_secure = metrics_secure
        self.client = client
        limiter = config.client_rate_limiter()
        if limiter is not None:  # clientConnection: every request of kadmit's, shared, as in Kueue
            client.rate_limiter = limiter
        self._owns_process = owns_process
        self.config = config
        self.identity = identity or default_identity()
        election = config.leader_election
        self.metrics = Metrics(role=self._role)
        self.manager = Manager(client, config, clock=clock, observer=self.metrics)
        self.metrics.bind(self.manager)
        self.elector: LeaderElector | None = None
        if election.leader_elect:
            self.elector = LeaderElector(
                self.manager.kube.unpaced(),
                election.resource_namespace,
                election.resource_name,
                self.identity,
                timing=election,
                on_started_leading=self._lead,
                on_stopped_leading=self._unlead,
                clock=clock,
            )
        self.tls = ServingTLS(config.tls)  # Kueue's tls block holds for all three HTTPS servers
        informers = self.manager.informers
        view = InformerClusterView(
            informers.get(LOCAL_QUEUES),
            informers.get(ADMISSION_CHECKS),
            informers.get(CLUSTER_QUEUES),
            informers.get(WORKLOAD_PRIORITY_CLASSES),
            informers.get(NAMESPACES),
            self.manager.workloads,
        )
        job_config = JobWebhookConfig(
            manage_jobs_without_queue_name=config.manage_jobs_without_queue_name,
            managed_jobs_namespace_selector=config.managed_jobs_namespace_selector,
            controller_username=controller_username,
            integration_kinds=self.manager.managed_kinds,
        )
        webhook_app = create_webhook_app(
            view,
            job_config,
            readiness=self.ready,
            partial_admission=config.partial_admission,
            metrics=WebhookMetrics(self.metrics.registry),
            incremental_dispatch=config.incremental_dispatch,
            pod_options=PodOptions(config.pod_namespace_selector, config.pod_selector),
            concurrent_admission=config.concurrent_admission,
            known_workload=self.manager.engine.workload,
        )
        self.webhook = WebhookServer(
            webhook_app,
            self.tls.context,
            host=config.webhook_host or "0.0.0.0",
            port=config.webhook_port,
        )
        # The Visibility API: HTTPS on its own port, with the webhook's certificate (the
        # APIServices skip its verification, as Kueue's do) in a context of its own, which also
        # verifies the API server's front-proxy client certificate.
        self.visibility: WebhookServer | None = None
        self.visibility_tls = ServingTLS(config.tls)
        self.front_proxy = FrontProxyAuth(self.visibility_tls.context)
        if config.visibility_server:
            self.visibility = WebhookServer(
                VisibilityAPI(
                    self.manager.engine,
                    self.manager.workloads,
                    self.ready,
                    lambda: self.manager.synced,
                    self.front_proxy,
                ).app(),
                self.visibility_tls.context,
                host=config.visibility_host or "0.0.0.0",
                port=config.visibility_port,
            )
        self.certificates: Any = None
        self.certificate_files: Any = None
        mode = cert_mode or ("secret" if config.internal_cert_management else "files")
        if mode == "files":
            from kadmit.certs.files import CertificateFiles

            self.certificate_files = CertificateFiles(
                cert_dir or config.webhook_cert_dir, self._load_certificate
            )
        elif mode == "secret":
            from kadmit.certs.manager import CertificateManager

            self.certificates = CertificateManager(
                client, self._load_certificate, config.webhook_service_name, config.namespace, policy=rotation
            )
        else:
            raise ValueError(f"unknown certificate mode {mode!r}: want secret or files")
        self._metrics_address = parse_bind_address(config.metrics_bind_address)
        self._health_address = parse_bind_address(config.health_probe_bind_address)
        self._check_plugins = check_plugins
        self.check_metrics = CheckMetrics(self.metrics.registry)
        self.checks: AdmissionChecksLoop | None = None
        self._runners: list[web.AppRunner] = []
        self._tasks: list[asyncio.Task[None]] = []
        self.metrics_port: int | None = None
        self.health_port: int | None = None

    def _load_certificate(self, cert_pem: bytes, key_pem: bytes) -> bool:
        """Serve a (new) certificate on the webhook and the visibility server alike."""
        changed = self.tls.load(cert_pem, key_pem)
        if self.visibility is not None:
            self.visibility_tls.load(cert_pem, key_pem)
        return changed

    def _role(self) -> str:
        if self.elector is None:
            return "standalone"
        return "leader" if self.manager.leading else "follower"

    def ready(self) -> bool:
        """Caches synced and a certificate served (and trusted, when kadmit manages it)."""
        if not self.manager.synced or not self.tls.loaded:
            return False
        return self.certificates is None or bool(self.certificates.ready)

    @property
    def webhook_port(self) -> int:
        return self.webhook.port

    @property
    def visibility_port(self) -> int | None:
        return self.visibility.port if self.visibility is not None else None

    async def start(self) -> None:
        await self.webhook.start()
        if self.visibility is not None:
            await self.visibility.start()
            self._tasks.append(asyncio.create_task(self.front_proxy.run(self.client), name="front-proxy-ca"))
        if self.certificates is not None:
            self._tasks.append(asyncio.create_task(self.certificates.run(), name="certificates"))
        if self.certificate_files is not None:
            self._tasks.append(asyncio.create_task(self.certificate_files.run(), name="certificate-files"))
        if self._metrics_address is not None:
            if self.metrics_secure:
                from kadmit.controller.metrics_auth import MetricsAuth, self_signed_context

                guarded = metrics_app(self.metrics, [MetricsAuth(self.client).middleware()])
                context = self_signed_context(self.config.namespace, options=self.config.tls)
                self.metrics_port = await self._serve(guarded, self._metrics_address, context)
            else:
                self.metrics_port = await self._serve(metrics_app(self.metrics), self._metrics_address)
        if self._health_address is not None:
            self.health_port = await self._serve(self._health_app(), self._health_address)
        if self._owns_process:
            collector.configure()
        await self.manager.start_caches()
        if self._owns_process:
            collector.freeze()  # the synced caches and the engine built from them are long-lived
            self._tasks.append(asyncio.create_task(collector.run(), name="garbage-collector"))
        plugins = await servable_plugins(
            self.manager.kube, self._plugin_names(), self._plugin_document(), self.metrics.registry
        )
        self.checks = AdmissionChecksLoop(self.manager, plugins, metrics=self.check_metrics)
        if self.elector is not None:
            self._tasks.append(asyncio.create_task(self.elector.run(), name="leader-election"))
        else:
            await self._lead()

    def _plugin_document(self) -> Mapping[str, Any]:
        """The Configuration the plugins read, with the frameworks kadmit actually manages (``kadmit
        local`` adds some to the file's): MultiKueue dispatches the kinds whose integration runs."""
        document = self.config.document
        integrations = document.get("integrations")
        integrations = dict(integrations) if isinstance(integrations, Mapping) else {}
        integrations["frameworks"] = list(self.config.frameworks)
        return {**document, "integrations": integrations}

    def _plugin_names(self) -> list[str]:
        """``check_plugins`` when given, else the installed plugins the ``admissionChecks`` block lets run."""
        if self._check_plugins is not None:
            return list(self._check_plugins)
        installed = sorted(available())
        names = self.config.admission_checks.select(installed)
        for name in installed:
            if name not in names:
                logger.info("admission-check plugin %s disabled by the configuration's admissionChecks", name)
        return names

    async def _lead(self) -> None:
        await self.manager.start_loops()
        if self.checks is not None:
            await self.checks.start()

    async def _unlead(self) -> None:
        if self.checks is not None:
            await self.checks.stop()
        await self.manager.stop_loops()

    async def stop(self) -> None:
        await cancel_all(self._tasks)
        await self._unlead()
        if self.elector is not None:
            await self.elector.release()
        await self.manager.stop()
        await self.webhook.stop()
        if self.visibility is not None:
            await self.visibility.stop()
        for runner in self._runners:
            await runner.cleanup()
        self._runners.clear()

    async def _serve(self, app: web.Application, address: tuple[str, int], ssl_context: Any = None) -> int:
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, address[0], address[1], ssl_context=ssl_context)
        await site.start()
        self._runners.append(runner)
        bound: Any = runner.addresses[0]
        return int(bound[1])

    def _health_app(self) -> web.Application:
        async def healthz(_: web.Request) -> web.Response:
            return web.Response(text="ok\n")

        async def readyz(_: web.Request) -> web.Response:
            if self.ready():
                return web.Response(text="ok\n")
            return web.Response(status=503, text="not ready\n")

        app = web.Application()
        app.router.add_get(f"/{self.config.liveness_endpoint_name}", healthz)
        app.router.add_get(f"/{self.config.readiness_endpoint_name}", readyz)
        return app


def pod_identity() -> str:
    """POD_NAME when run in a Deployment (the Lease then names the pod), else host and a suffix."""
    return os.environ.get("POD_NAME") or default_identity()
