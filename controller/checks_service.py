"""The service behind ``kadmit checks run``: preflight, the check runner, and (with several
replicas) the Lease that elects the one replica that acts.

Apart from :mod:`kadmit.controller.commands.checks` so that ``kadmit --help`` does not import
the Kubernetes client this needs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import web
from prometheus_client import generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from kadmit.checks.metrics import CheckMetrics
from kadmit.checks.runner import CheckRunner, required_watches
from kadmit.controller.app import BindError, parse_bind_address
from kadmit.controller.cli import EXIT_USAGE, CommandError, connect, stop_on_signals
from kadmit.controller.defaults import DEFAULT_NAMESPACE
from kadmit.kube import (
    ApiError,
    ApiUnreachable,
    Client,
    Informers,
    LeaderElector,
    LeaseTiming,
    NotFound,
    Resource,
    default_identity,
)
from kadmit.kube.ratelimit import TokenBucket
from kadmit.kube.resources import NAMESPACES

if TYPE_CHECKING:
    from kadmit.checks.plugin import AnyPlugin

logger = logging.getLogger(__name__)


async def preflight(client: Client, watches: list[tuple[Resource, str | None]]) -> None:
    """Fail with one line when the cluster does not serve a kind the checks need."""
    for kind, _ in watches:
        try:
            async with asyncio.timeout(15):
                served = await client.served(kind)
        except ApiUnreachable as exc:
            raise CommandError(f"cannot reach the cluster: {exc}") from None
        except (ApiError, TimeoutError) as exc:
            raise CommandError(f"cannot list {kind}: {exc or 'no answer in 15s'}") from None
        if not served:
            raise CommandError(f"the cluster does not serve {kind.plural}.{kind.group or 'core'}/"
                               f"{kind.version}: install its CRD first")


async def _namespace_exists(client: Client, namespace: str) -> None:
    try:
        async with asyncio.timeout(15):
            await client.get(NAMESPACES, None, namespace)
    except NotFound:
        raise CommandError(f"namespace {namespace} for the leader-election Lease does not exist: "
                           "create it or pass --leader-election-namespace") from None
    except (ApiError, TimeoutError) as exc:
        raise CommandError(f"cannot read namespace {namespace}: {exc or 'no answer in 15s'}") from None


@dataclass(frozen=True)
class LeaderElection(LeaseTiming):
    """Where the replicas of ``kadmit checks run`` elect the one that acts (a coordination.k8s.io Lease)."""

    namespace: str = DEFAULT_NAMESPACE
    name: str = "kadmit-checks"
    identity: str = field(default_factory=default_identity)


class ChecksService:
    """The check runner for as long as this process should act: always, or while it leads.

    With several replicas, only the leader evaluates: a check's in-memory state (the
    ResourceQuota ledger of workloads just passed) must have one owner, or two replicas could
    pass two workloads against the same free quota. Each term of leadership gets fresh watches
    and a fresh runner, which rebuild what they need from the API.
    """

    def __init__(self, client: Client, plugins: list[AnyPlugin], *,
                 leader_election: LeaderElection | None = None,
                 metrics_address: tuple[str, int] | None = None, **runner_options: Any) -> None:
        self.client = client
        self.plugins = plugins
        self.leader_election = leader_election
        self.metrics_address = metrics_address
        self.metrics: CheckMetrics = runner_options.pop("metrics", None) or CheckMetrics()
        self.runner_options = runner_options
        self.runner: CheckRunner | None = None
        self.metrics_port: int | None = None
        self._informers: Informers | None = None
        self._metrics_runner: web.AppRunner | None = None

    async def _serve_metrics(self) -> None:
        if self.metrics_address is None:
            return
        registry = self.metrics.registry

        async def handle(_: web.Request) -> web.Response:
            return web.Response(body=generate_latest(registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

        app = web.Application()
        app.router.add_get("/metrics", handle)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        try:
            await web.TCPSite(runner, *self.metrics_address).start()
        except OSError as exc:
            await runner.cleanup()
            host, port = self.metrics_address
            raise CommandError(f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}") from None
        self._metrics_runner = runner
        bound: Any = runner.addresses[0]
        self.metrics_port = int(bound[1])

    @property
    def leading(self) -> bool:
        return self.runner is not None

    async def _start_term(self) -> None:
        self._informers = Informers(self.client)
        runner = CheckRunner(self.client, self.plugins, watches=self._informers.watch, metrics=self.metrics,
                             **self.runner_options)
        await runner.start()
        self.runner = runner

    async def _end_term(self) -> None:
        runner, informers, self.runner, self._informers = self.runner, self._informers, None, None
        if runner is not None:
            await runner.stop()
        if informers is not None:
            await informers.stop()

    async def run(self, stop: asyncio.Event) -> None:
        """Preflight, then serve until ``stop`` is set; a clean stop hands the Lease over at once."""
        await preflight(self.client, required_watches(self.plugins))
        names = ", ".join(sorted(p.controller_name for p in self.plugins))
        election = self.leader_election
        if election is not None:
            await _namespace_exists(self.client, election.namespace)
        await self._serve_metrics()
        try:
            await self._serve(stop, names, election)
        finally:
            if self._metrics_runner is not None:
                await self._metrics_runner.cleanup()
                self._metrics_runner = None

    async def _serve(self, stop: asyncio.Event, names: str, election: LeaderElection | None) -> None:
        if election is None:
            logger.info("running admission checks: %s", names)
            try:
                await self._start_term()
                await stop.wait()
            finally:
                await self._end_term()
            return
        logger.info("running admission checks: %s, while holding Lease %s/%s as %s", names,
                    election.namespace, election.name, election.identity)
        elector = LeaderElector(
            self.client.unpaced(), election.namespace, election.name, election.identity,
            timing=election, on_started_leading=self._start_term,
            on_stopped_leading=self._end_term)
        campaign = asyncio.create_task(elector.run(), name="checks-leader-election")
        try:
            await stop.wait()
        finally:
            campaign.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await campaign
            await self._end_term()
            await elector.release()


async def serve(client: Client, plugins: list[AnyPlugin], stop: asyncio.Event,
                leader_election: LeaderElection | None = None, metrics_address: tuple[str, int] | None = None,
                **options: Any) -> None:
    """Run the plugins until ``stop`` is set: preflight, informers, runner, orderly shutdown."""
    service = ChecksService(client, plugins, leader_election=leader_election,
                            metrics_address=metrics_address, **options)
    await service.run(stop)


async def run_service(args: Any, plugins: list[AnyPlugin], metrics: CheckMetrics,
                      rate_limiter: TokenBucket | None = None) -> None:
    with stop_on_signals() as stop:
        try:
            metrics_address = parse_bind_address(args.metrics_bind_address)
        except BindError as exc:
            raise CommandError(f"--metrics-bind-address: {exc}", EXIT_USAGE) from None
        client = await connect(args.kubeconfig, args.context)
        client.rate_limiter = rate_limiter  # clientConnection, as kadmit run paces its own client
        async with client:
            election = LeaderElection(namespace=args.leader_election_namespace,
                                      name=args.leader_election_id) if args.leader_elect else None
            await serve(client, plugins, stop, election, metrics_address,
                        max_concurrency=args.max_concurrency, call_timeout=args.call_timeout,
                        resync_period=args.resync_period, metrics=metrics)
