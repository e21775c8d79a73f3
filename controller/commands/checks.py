"""``kadmit checks``: run admission-check plugins against any cluster that serves the Kueue API.

``kadmit checks run --enable NAME`` is a complete external admission-check controller, as Kueue's
contract defines one: beside an upstream Kueue installation or beside kadmit, it keeps the
AdmissionChecks of the enabled plugins ``Active`` and writes their verdicts into
``Workload.status.admissionChecks``. ``kadmit checks list`` shows the installed plugins.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client, config
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.config import ConfigException

from checks.api import Api, ApiError
from checks.discovery import PluginError, available, load, load_all
from checks.kinds import Kind
from checks.plugin import AnyPlugin
from checks.runner import CheckRunner
from controller.cli import CommandError
from controller.informer import Informer

logger = logging.getLogger(__name__)


class InformerPool:
    """One started :class:`Informer` per kind, shared by everyone who asks, stopped together.

    It is the ``watches`` factory :class:`checks.runner.CheckRunner` expects.
    """

    def __init__(self, api_client: ApiClient) -> None:
        self.api_client = api_client
        self.informers: dict[Kind, Informer] = {}

    async def __call__(self, kind: Kind) -> Informer:
        informer = self.informers.get(kind)
        if informer is None:
            informer = Informer(self.api_client, kind.group, kind.version, kind.plural)
            await informer.start()
            self.informers[kind] = informer
        return informer

    async def stop(self) -> None:
        await asyncio.gather(*(informer.stop() for informer in self.informers.values()))


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "checks", help="admission-check plugins: list them, or run them as a check controller",
        description=__doc__,
    )
    sub = parser.add_subparsers(dest="checks_command", metavar="ACTION")
    sub.required = True
    listing = sub.add_parser("list", help="show the installed admission-check plugins")
    listing.set_defaults(func=run_list)
    run = sub.add_parser("run", help="run enabled plugins against a cluster until interrupted")
    run.add_argument("--enable", "-e", action="append", default=[], metavar="NAME",
                     help="a plugin to run: an entry-point name of group kadmit.checks, or module:Class "
                          "(repeat for several)")
    run.add_argument("--kubeconfig", metavar="PATH",
                     help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)")
    run.add_argument("--context", metavar="NAME", help="kubeconfig context to use")
    run.add_argument("--max-concurrency", type=int, default=8, metavar="N",
                     help="workloads evaluated at once (default 8)")
    run.add_argument("--call-timeout", type=float, default=10.0, metavar="SECONDS",
                     help="time a plugin may take for one verdict before it counts as Pending (default 10)")
    run.add_argument("--resync-period", type=float, default=300.0, metavar="SECONDS",
                     help="re-evaluate everything this often, whatever the events (default 300)")
    run.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    run.set_defaults(func=run_checks)


def run_list(args: Any) -> int:
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
    if not args.enable:
        known = ", ".join(sorted(available())) or "none installed"
        raise CommandError(f"no check enabled: pass --enable NAME (available: {known})")
    if args.max_concurrency < 1:
        raise CommandError("--max-concurrency must be at least 1")
    if args.call_timeout <= 0 or args.resync_period <= 0:
        raise CommandError("--call-timeout and --resync-period must be positive")
    try:
        plugins = load_all(args.enable)
    except PluginError as exc:
        raise CommandError(str(exc)) from None
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    asyncio.run(_main(args, plugins))
    return 0


async def connect(kubeconfig: str | None, context: str | None) -> ApiClient:
    """An ApiClient from a kubeconfig, or from the pod's service account when there is none."""
    configuration = client.Configuration()
    try:
        if kubeconfig is not None or context is not None or _default_kubeconfig_exists():
            await config.load_kube_config(config_file=kubeconfig, context=context,
                                          client_configuration=configuration)
        else:
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    except (ConfigException, OSError, ValueError) as exc:
        raise CommandError(f"cannot configure access to the cluster: {str(exc).splitlines()[0]}") from None
    return ApiClient(configuration)


def _default_kubeconfig_exists() -> bool:
    path = os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or "~/.kube/config"
    return Path(path).expanduser().exists()


async def preflight(api_client: ApiClient, kinds: list[Kind]) -> None:
    """Fail with one line when the cluster does not serve a kind the checks need."""
    api = Api(api_client, timeout=15.0)
    for kind in kinds:
        try:
            await api.request("GET", kind.path() + "?limit=1")
        except ApiError as exc:
            if exc.status == 404:
                raise CommandError(f"the cluster does not serve {kind.plural}.{kind.group or 'core'}/"
                                   f"{kind.version}: install its CRD first") from None
            raise CommandError(f"cannot list {kind}: {exc}") from None
        except (TimeoutError, OSError) as exc:
            raise CommandError(f"cannot reach the cluster: {exc}") from None


async def serve(api_client: ApiClient, plugins: list[AnyPlugin], stop: asyncio.Event, **options: Any) -> None:
    """Run the plugins until ``stop`` is set: preflight, informers, runner, orderly shutdown."""
    pool = InformerPool(api_client)
    runner = CheckRunner(api_client, plugins, watches=pool, **options)
    await preflight(api_client, runner.required_kinds())
    logger.info("running admission checks: %s", ", ".join(runner.controller_names))
    try:
        await runner.start()
        await stop.wait()
    finally:
        await runner.stop()
        await pool.stop()


async def _main(args: Any, plugins: list[AnyPlugin]) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    api_client = await connect(args.kubeconfig, args.context)
    async with api_client:
        await serve(api_client, plugins, stop, max_concurrency=args.max_concurrency,
                    call_timeout=args.call_timeout, resync_period=args.resync_period)
