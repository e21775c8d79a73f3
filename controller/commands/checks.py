"""``kadmit checks``: run admission-check plugins against any cluster that serves the Kueue API.

``kadmit checks run --enable NAME`` is a complete external admission-check controller, as Kueue's
contract defines one: beside an upstream Kueue installation (kadmit itself runs the installed
plugins), it keeps the AdmissionChecks of the enabled plugins ``Active`` and writes their
verdicts into ``Workload.status.admissionChecks``. ``kadmit checks list`` shows the installed
plugins.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import socket
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kadmit.controller.cli import (
    EXIT_FAILURE,
    EXIT_USAGE,
    CommandError,
    add_command,
    add_log_level_argument,
    connect,
    run_async,
    stop_on_signals,
)
from kadmit.controller.defaults import DEFAULT_NAMESPACE

# ``kadmit --help`` imports this module: what the checks run on is imported where it runs.
if TYPE_CHECKING:
    from aiohttp import web

    from kadmit.checks.metrics import CheckMetrics
    from kadmit.checks.plugin import AnyPlugin
    from kadmit.checks.runner import CheckRunner
    from kadmit.kube import Client, Informers, Resource
    from kadmit.kube.ratelimit import TokenBucket

logger = logging.getLogger(__name__)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "checks", help="admission-check plugins: list them, or run them as a check controller",
        description=__doc__,
    )
    sub = parser.add_subparsers(dest="checks_command", metavar="ACTION")
    sub.required = True
    add_command(sub, "list", run_list, help="show the installed admission-check plugins")
    run = add_command(sub, "run", run_checks, help="run enabled plugins against a cluster until interrupted")
    run.add_argument("--enable", "-e", action="append", default=[], metavar="NAME",
                     help="a plugin to run: an entry-point name of group kadmit.checks, or module:Class "
                          "(repeat for several)")
    run.add_argument("--kubeconfig", metavar="PATH",
                     help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)")
    run.add_argument("--context", metavar="NAME", help="kubeconfig context to use")
    run.add_argument("--config", metavar="FILE",
                     help="a Kueue Configuration file whose settings the plugins read "
                          "(e.g. namespace and multiKueue for the multikueue check)")
    run.add_argument("--max-concurrency", type=int, metavar="N",
                     help="workloads evaluated at once (default 32)")
    run.add_argument("--call-timeout", type=float, default=10.0, metavar="SECONDS",
                     help="time a plugin may take for one verdict before it counts as Pending (default 10)")
    run.add_argument("--resync-period", type=float, default=300.0, metavar="SECONDS",
                     help="re-evaluate everything this often, whatever the events (default 300)")
    run.add_argument("--leader-elect", action="store_true",
                     help="act only while holding a Lease, so that several replicas can run (one acts)")
    run.add_argument("--leader-election-namespace", default=DEFAULT_NAMESPACE, metavar="NAMESPACE",
                     help=f"namespace of the Lease (default {DEFAULT_NAMESPACE})")
    run.add_argument("--leader-election-id", default="kadmit-checks", metavar="NAME",
                     help="name of the Lease (default kadmit-checks)")
    run.add_argument("--metrics-bind-address", default="0", metavar="ADDRESS",
                     help="serve Prometheus metrics at http://ADDRESS/metrics, e.g. :8080 (default 0: off)")
    add_log_level_argument(run, logs="logs are lines of text on stderr")


def run_list(args: Any) -> int:
    from kadmit.checks.discovery import PluginError, available, load

    installed = available()
    if not installed:
        print("no admission-check plugins installed (entry-point group kadmit.checks)")
        return 0
    for name in sorted(installed):
        try:
            plugin = load(name)
            print(f"{name}\t{plugin.controller_name}\t{installed[name].value}")
        except PluginError as exc:
            print(f"{name}\t(broken: {exc})\t{installed[name].value}")
    return 0


def run_checks(args: Any) -> int:
    from kadmit.checks.discovery import PluginError, available, load_all
    from kadmit.checks.metrics import CheckMetrics
    from kadmit.checks.runner import DEFAULT_MAX_CONCURRENCY
    from kadmit.controller.config import ConfigError
    from kadmit.controller.config import load as load_configuration

    if not args.enable:
        known = ", ".join(sorted(available())) or "none installed"
        raise CommandError(f"no check enabled: pass --enable NAME (available: {known})", EXIT_USAGE)
    if args.max_concurrency is None:
        args.max_concurrency = DEFAULT_MAX_CONCURRENCY
    if args.max_concurrency < 1:
        raise CommandError("--max-concurrency must be at least 1", EXIT_USAGE)
    if args.call_timeout <= 0 or args.resync_period <= 0:
        raise CommandError("--call-timeout and --resync-period must be positive", EXIT_USAGE)
    try:
        configuration = load_configuration(args.config)
    except ConfigError as exc:
        raise CommandError(str(exc)) from None
    document = configuration.document
    metrics = CheckMetrics()
    try:
        plugins = load_all(args.enable, document, metrics.registry)
    except PluginError as exc:
        # A name that is no plugin (unknown, not a plugin, or two claiming one controller) is the
        # command line's mistake; a plugin that raised while imported, built or configured is not.
        raise CommandError(str(exc), EXIT_FAILURE if exc.__context__ else EXIT_USAGE) from None
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    run_async(_main(args, plugins, metrics, configuration.client_rate_limiter()))
    return 0


async def preflight(client: Client, watches: list[tuple[Resource, str | None]]) -> None:
    """Fail with one line when the cluster does not serve a kind the checks need."""
    from kadmit.kube import ApiError, ApiUnreachable

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
    from kadmit.kube import ApiError, NotFound
    from kadmit.kube.resources import NAMESPACES

    try:
        async with asyncio.timeout(15):
            await client.get(NAMESPACES, None, namespace)
    except NotFound:
        raise CommandError(f"namespace {namespace} for the leader-election Lease does not exist: "
                           "create it or pass --leader-election-namespace") from None
    except (ApiError, TimeoutError) as exc:
        raise CommandError(f"cannot read namespace {namespace}: {exc or 'no answer in 15s'}") from None


@dataclass(frozen=True)
class LeaderElection:
    """Where the replicas of ``kadmit checks run`` elect the one that acts (a coordination.k8s.io Lease)."""

    namespace: str = DEFAULT_NAMESPACE
    name: str = "kadmit-checks"
    identity: str = field(default_factory=lambda: f"{socket.gethostname()}_{secrets.token_hex(4)}")
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


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
        from kadmit.checks.metrics import CheckMetrics

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
        from aiohttp import web
        from prometheus_client import generate_latest
        from prometheus_client.exposition import CONTENT_TYPE_LATEST

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
        from kadmit.checks.runner import CheckRunner
        from kadmit.kube import Informers

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
        from kadmit.checks.runner import required_watches

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
        from kadmit.kube import LeaderElector

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
            lease_duration=election.lease_duration, renew_deadline=election.renew_deadline,
            retry_period=election.retry_period, on_started_leading=self._start_term,
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


async def _main(args: Any, plugins: list[AnyPlugin], metrics: CheckMetrics,
                rate_limiter: TokenBucket | None = None) -> None:
    from kadmit.controller.app import BindError, parse_bind_address

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
