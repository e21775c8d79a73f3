"""``kadmit local``: the embedded Kubernetes API server with simulated nodes, and kadmit on it.

``kadmit local [--kubeconfig PATH] [--config FILE] [--nodes FILE] [--no-samples]`` starts the
API server, installs the CRDs and kadmit's webhook configurations, runs kadmit with its webhook
over real TLS, adds the sample queues, prints one ready line with the kubeconfig path, and
serves until SIGINT or SIGTERM (see :mod:`kadmit.controller.local_setup` for the order).

``kadmit local --api-only --kubeconfig PATH`` starts just the API server, writes a kubeconfig
for it, prints one ready line with its URL, and serves until SIGINT or SIGTERM. With
``--nodes FILE`` it also runs the simulated nodes and controllers, so ordinary Jobs run.

The API server serves HTTPS with a throw-away CA and always asks for a bearer token, as a real
one does (HTTPS because kubectl sends credentials only over TLS). The kubeconfig it writes
carries the CA and the admin token (``system:admin`` in ``system:masters``: a cluster admin, as
kind's kubeconfig is; ``--token`` chooses it, by default it is random). kadmit itself runs on
a token of its own ServiceAccount (created in its namespace),
``system:serviceaccount:<namespace>:kadmit-controller-manager``, the only user the Job webhook
lets unsuspend a managed Job: a user's ``kubectl patch`` that starts a queued Job is denied, as
on a real cluster where kadmit is deployed from ``manifests/``.

The cluster is built by :func:`build_cluster` from the parsed arguments, so options that add
simulated controllers (nodes, a Job runtime, ...) only need to add their arguments in
:func:`add_arguments` and their add-ons in :func:`addons_from_args`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import os
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kadmit.controller.cli import EXIT_USAGE, CommandError

if TYPE_CHECKING:
    from kadmit.controller.app import KadmitApp
    from kadmit.localcluster.cluster import LocalCluster
    from kadmit.localcluster.interfaces import ClusterAddon


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "local",
        help="run a local Kubernetes API server (no cluster needed)",
        description="Run the embedded Kubernetes API server on this machine and write a kubeconfig for "
        "kubectl and kubernetes-asyncio. Stops on Ctrl-C (SIGINT) or SIGTERM.",
    )
    add_arguments(parser)
    parser.set_defaults(func=run)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--api-only", action="store_true", help="run only the API server, not kadmit")
    parser.add_argument(
        "--kubeconfig",
        help=f"where to write the kubeconfig (default {DEFAULT_KUBECONFIG}; required with --api-only)",
    )
    parser.add_argument("--config", help="a Kueue Configuration file for kadmit (not with --api-only)")
    parser.add_argument(
        "--nodes",
        help="node pools YAML for the simulated nodes (default: 3 cpu and 2 gpu nodes); "
        "with --api-only, runs the simulated nodes and controllers",
    )
    parser.add_argument(
        "--no-samples", action="store_true", help="do not create the sample flavors and queues"
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port to listen on (default: any free port)")
    parser.add_argument(
        "--token",
        help="the admin's bearer token (written to the kubeconfig); default or '-': a random one",
    )
    parser.add_argument(
        "--history-window",
        type=int,
        default=10_000,
        help="watch events kept per resource for resuming watches (default 10000); older is 410 Gone",
    )


DEFAULT_KUBECONFIG = "kadmit-local.kubeconfig"


def addons_from_args(args: argparse.Namespace) -> list[ClusterAddon]:
    """The simulated nodes and controllers (with --api-only, only when --nodes asks for them)."""
    if args.api_only and not args.nodes:
        return []
    from kadmit.controller.local_setup import labelled_pools
    from kadmit.localcluster.sim import NodeConfigError, default_addons, default_config, load_config

    try:
        nodes = load_config(args.nodes) if args.nodes else default_config()
    except (NodeConfigError, OSError) as exc:
        raise CommandError(f"--nodes {args.nodes}: {exc}") from None
    return default_addons(labelled_pools(nodes))


def build_cluster(args: argparse.Namespace, service_resolver: Any = None) -> LocalCluster:
    """The LocalCluster the arguments describe (validated: bad values raise :class:`CommandError`)."""
    from kadmit.localcluster.cluster import LocalCluster

    if not 0 <= args.port <= 65535:
        raise CommandError(f"--port must be between 0 and 65535, got {args.port}", EXIT_USAGE)
    if args.history_window < 1:
        raise CommandError(f"--history-window must be at least 1, got {args.history_window}", EXIT_USAGE)
    if args.kubeconfig is None:
        if args.api_only:
            raise CommandError("--api-only needs --kubeconfig PATH", EXIT_USAGE)
        args.kubeconfig = DEFAULT_KUBECONFIG
    target = Path(args.kubeconfig)
    if target.is_dir():
        raise CommandError(f"--kubeconfig {target} is a directory")
    token: str | bool = True if args.token in (None, "-") else args.token
    if isinstance(token, str) and (not token or any(c.isspace() for c in token)):
        raise CommandError("--token must be a non-empty string without whitespace", EXIT_USAGE)
    return LocalCluster(
        host=args.host,
        port=args.port,
        https=True,
        token=token,
        kubeconfig=target,
        history_window=args.history_window,
        addons=addons_from_args(args),
        service_resolver=service_resolver,
    )


def run(args: argparse.Namespace) -> int:
    if args.api_only:
        if args.config:
            raise CommandError("--config runs kadmit: it cannot be used with --api-only", EXIT_USAGE)
        return asyncio.run(serve(build_cluster(args)))
    from kadmit.controller.config import ConfigError, load

    args.kubeconfig = os.path.abspath(args.kubeconfig or DEFAULT_KUBECONFIG)
    try:
        config = load(args.config)
    except ConfigError as exc:
        raise CommandError(str(exc)) from None
    return asyncio.run(serve_with_kadmit(args, config))


async def serve_with_kadmit(args: argparse.Namespace, config: Any) -> int:
    """The whole local setup (see :mod:`kadmit.controller.local_setup`), until SIGINT/SIGTERM."""
    from kadmit.controller import local_setup
    from kadmit.controller.logs import setup_logging

    config = local_setup.local_configuration(config, manage_jobsets=args.config is None)
    started: list[KadmitApp] = []  # the API server asks for kadmit's webhook port once it runs

    def webhook_port() -> int:
        if not started:
            raise LookupError("kadmit's webhook server is not started yet")
        return started[0].webhook_port

    service = (config.namespace, config.webhook_service_name)
    cluster = build_cluster(args, service_resolver=local_setup.webhook_resolver(service, webhook_port))
    setup_logging("warning")  # only once the arguments are valid: a usage error stays one line
    with stop_on_signals() as stop:
        await _start(cluster)
        try:
            await _run_kadmit(args, config, cluster, stop, started.append)
        except TimeoutError:
            raise CommandError(
                "kadmit did not become ready within 60s (its webhook certificate is not trusted)"
            ) from None
        finally:
            await cluster.stop()
    print("kadmit local: stopped", file=sys.stderr, flush=True)
    return 0


async def _run_kadmit(
    args: argparse.Namespace,
    config: Any,
    cluster: LocalCluster,
    stop: asyncio.Event,
    on_app: Callable[[KadmitApp], None],
) -> None:
    """Install kadmit's objects, run it on its ServiceAccount's token, print the ready line, wait."""
    from kadmit.controller import local_setup
    from kadmit.controller.app import KadmitApp
    from kadmit.kube import Client

    async with await Client.connect(cluster.kubeconfig) as kube:
        await local_setup.install_crds(kube)
        await local_setup.ensure_namespace(kube, config.namespace)
        await local_setup.ensure_service_account(kube, config.namespace)
        token = cluster.service_account_token(config.namespace, local_setup.CONTROLLER_SERVICE_ACCOUNT)
        async with await Client.connect(cluster.kubeconfig_for(token)) as kadmit_client:
            app = KadmitApp(kadmit_client, config, webhook_port=0, metrics_address=("127.0.0.1", 0),
                            health_address=("127.0.0.1", 0),
                            controller_username=local_setup.controller_username(config.namespace))
            on_app(app)
            await app.start()
            try:
                await local_setup.install_webhooks(kube, config.namespace, config.webhook_service_name)
                async with asyncio.timeout(60):
                    await local_setup.wait_until(app.ready)
                if not args.no_samples:
                    await local_setup.install_samples(kube)
                print(
                    f"kadmit local: ready; kubeconfig {args.kubeconfig} "
                    f"(API {cluster.url}, metrics http://127.0.0.1:{app.metrics_port}/metrics)",
                    flush=True,
                )
                await stop.wait()
            finally:
                await app.stop()


@contextlib.contextmanager
def stop_on_signals() -> Iterator[asyncio.Event]:
    """An event that SIGINT or SIGTERM sets, for as long as the block runs."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        yield stop
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


async def _start(cluster: LocalCluster) -> None:
    try:
        await cluster.start()
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise CommandError(
                f"cannot listen on {cluster.host}:{cluster.port}: address already in use"
            ) from None
        raise CommandError(f"cannot start the API server: {exc.strerror or exc}") from None


async def serve(cluster: LocalCluster) -> int:
    """Start ``cluster``, print the ready line, and wait for SIGINT/SIGTERM."""
    with stop_on_signals() as stop:
        await _start(cluster)
        try:
            print(
                f"kadmit local: API server ready at {cluster.url} (kubeconfig {cluster.kubeconfig})",
                flush=True,
            )
            await stop.wait()
        finally:
            await cluster.stop()
    print("kadmit local: stopped", file=sys.stderr, flush=True)
    return 0
