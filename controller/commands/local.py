"""``kadmit local``: the embedded Kubernetes API server with simulated nodes, and kadmit on it.

``kadmit local [--kubeconfig PATH] [--config FILE] [--nodes FILE] [--no-samples]`` starts the
API server, installs the CRDs and kadmit's webhook configurations, runs kadmit with its webhook
over real TLS, adds the sample queues, prints one ready line with the kubeconfig path, and
serves until SIGINT or SIGTERM (see :mod:`kadmit.controller.local_setup` for the order).

``kadmit local --api-only --kubeconfig PATH`` starts just the API server, writes a kubeconfig
for it, prints one ready line with its URL, and serves until SIGINT or SIGTERM. With
``--nodes FILE`` it also runs the simulated nodes and controllers, so ordinary Jobs run.
``--faults FILE`` (either way) makes the API server misbehave as a fault plan says
(:func:`kadmit.localcluster.faults.load_plan`; the child reads and checks it).

Two processes, as on a cluster: the API server and the simulated nodes and controllers run in a
child, ``python -m kadmit.localcluster`` (:mod:`kadmit.controller.cluster_process` supervises
it; it checks the options it is passed and reads ``--nodes``, and its one-line errors become
this command's), and kadmit runs in this process and reaches the server over HTTPS only, through
:mod:`kadmit.kube`, exactly as it reaches a real one; the server calls kadmit's webhooks through
their Service and its Endpoints. If the server dies, ``kadmit local`` says so in one line and
exits 1; on SIGINT or SIGTERM it stops kadmit, then the server.

``kadmit local --workers N`` starts a MultiKueue setup: a manager cluster (API server only, no
nodes: its Jobs run elsewhere) and N worker clusters, each with its own simulated nodes, each
with its own kadmit. The manager holds one kubeconfig Secret and one MultiKueueCluster per worker,
the MultiKueueConfig ``multikueue`` listing them, and the queues of
``manifests/samples/multikueue-local.yaml`` (LocalQueue ``default`` → ClusterQueue with the
AdmissionCheck ``multikueue``); every worker has the queues of ``local-setup.yaml``. The manager's
kubeconfig is ``--kubeconfig`` (default ``kadmit-local.kubeconfig``), worker ``i``'s the same
name with ``-worker<i>`` before its extension; one line per cluster says how to reach it.

The API server serves HTTPS with a throw-away CA and always asks for a bearer token, as a real
one does (HTTPS because kubectl sends credentials only over TLS). The kubeconfig it writes
carries the CA and the admin token (``system:admin`` in ``system:masters``: a cluster admin, as
kind's kubeconfig is; ``--token`` chooses it, by default it is random). kadmit itself runs on
a token of its own ServiceAccount (created in its namespace, the token got from the TokenRequest
API), ``system:serviceaccount:<namespace>:kadmit-controller-manager``, the only user the Job
webhook lets unsuspend a managed Job: a user's ``kubectl patch`` that starts a queued Job is
denied, as on a real cluster where kadmit is deployed from ``manifests/``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from kadmit.controller.cli import EXIT_USAGE, CommandError, add_command, run_async, stop_on_signals

if TYPE_CHECKING:
    from kadmit.controller.app import KadmitApp
    from kadmit.controller.cluster_process import ClusterProcess
    from kadmit.kube import Client


def register(subparsers: Any) -> None:
    parser = add_command(
        subparsers, "local", run, help="run a local Kubernetes API server (no cluster needed)",
        description="Run the embedded Kubernetes API server on this machine and write a kubeconfig for "
        "kubectl and kubernetes-asyncio. Stops on Ctrl-C (SIGINT) or SIGTERM.",
    )
    add_arguments(parser)


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
    parser.add_argument(
        "--workers",
        type=int,
        default=0,
        metavar="N",
        help=f"MultiKueue: also start N worker clusters (1 to {MAX_WORKERS}), each with its own nodes and "
        "kadmit, and make this cluster their manager; one kubeconfig per cluster",
    )
    parser.add_argument(
        "--faults",
        metavar="FILE",
        help="make the API server misbehave as the fault plan (YAML) says: errors by verb and resource, "
        "latency, hung requests, writes whose reply is lost, 410s, cut watches (see docs/localcluster.md)",
    )


DEFAULT_KUBECONFIG = "kadmit-local.kubeconfig"
MAX_WORKERS = 8


def worker_kubeconfig(manager: str, index: int) -> str:
    """Worker ``index``'s kubeconfig, next to the manager's: ``a.kubeconfig`` → ``a-worker1.kubeconfig``."""
    root, extension = os.path.splitext(manager)
    return f"{root}-worker{index}{extension}"


def cluster_arguments(args: argparse.Namespace) -> list[str]:
    """The ``python -m kadmit.localcluster`` options for this command's: the child checks their
    values and reads the ``--nodes`` file; its nodes carry ``kadmit.dev/pool=<pool>``, which the
    sample ResourceFlavors select."""
    from kadmit.controller.local_setup import POOL_LABEL

    arguments = [f"--kubeconfig={args.kubeconfig}", f"--host={args.host}", f"--port={args.port}",
                 f"--history-window={args.history_window}"]
    if args.token is not None:
        arguments.append(f"--token={args.token}")
    if args.faults:
        arguments.append(f"--faults={os.path.abspath(args.faults)}")
    if args.api_only and not args.nodes:
        return [*arguments, "--no-nodes"]
    if args.nodes:
        arguments.append(f"--nodes={args.nodes}")
    return [*arguments, f"--pool-label={POOL_LABEL}"]


def run(args: argparse.Namespace) -> int:
    if args.workers:
        check_workers_usage(args)
    if args.api_only:
        if args.config:
            raise CommandError("--config runs kadmit: it cannot be used with --api-only", EXIT_USAGE)
        if args.kubeconfig is None:
            raise CommandError("--api-only needs --kubeconfig PATH", EXIT_USAGE)
        return run_async(serve_api_only(args))
    from kadmit.controller.config import ConfigError, load

    args.kubeconfig = os.path.abspath(args.kubeconfig or DEFAULT_KUBECONFIG)
    try:
        config = load(args.config)
    except ConfigError as exc:
        raise CommandError(str(exc)) from None
    if args.workers:
        return run_async(serve_multikueue(args, config))
    return run_async(serve_with_kadmit(args, config))


def check_workers_usage(args: argparse.Namespace) -> None:
    """The options ``--workers`` cannot go with, as one-line usage errors."""
    if not 1 <= args.workers <= MAX_WORKERS:
        raise CommandError(f"--workers must be between 1 and {MAX_WORKERS}, got {args.workers}", EXIT_USAGE)
    if args.api_only:
        raise CommandError("--workers runs kadmit on every cluster: it cannot be used with --api-only",
                           EXIT_USAGE)
    if args.port:
        raise CommandError("--port names one port: with --workers each cluster chooses a free one",
                           EXIT_USAGE)
    if args.faults:
        raise CommandError("--faults is for one cluster: it cannot be used with --workers", EXIT_USAGE)


async def serve_multikueue(args: argparse.Namespace, config: Any) -> int:
    """A manager and ``--workers`` workers, each API server a child process, kadmit on each; until
    SIGINT/SIGTERM (exit 1 with its reason if any server dies first)."""
    from kadmit.controller import local_setup
    from kadmit.controller.cluster_process import ClusterExited, ClusterProcess
    from kadmit.controller.logs import setup_logging

    config = local_setup.local_configuration(config, manage_jobsets=args.config is None)
    paths = {"manager": args.kubeconfig,
             **{f"worker{i}": worker_kubeconfig(args.kubeconfig, i) for i in range(1, args.workers + 1)}}
    common = [f"--host={args.host}", "--port=0", f"--history-window={args.history_window}"]
    if args.token is not None:
        common.append(f"--token={args.token}")
    nodes = [f"--nodes={args.nodes}"] if args.nodes else []
    clusters = {
        name: ClusterProcess([f"--kubeconfig={path}", *common,
                              *(["--no-nodes"] if name == "manager"
                                else [*nodes, f"--pool-label={local_setup.POOL_LABEL}"])])
        for name, path in paths.items()
    }
    with stop_on_signals() as stop:
        async with contextlib.AsyncExitStack() as stack:
            for cluster in clusters.values():
                stack.push_async_callback(cluster.stop)
            try:
                await asyncio.gather(*(cluster.start() for cluster in clusters.values()))
            except ClusterExited as exc:
                raise CommandError(str(exc), exc.code) from None
            setup_logging("warning")
            for handler in logging.getLogger().handlers:
                handler.addFilter(lambda _: all(c.alive() for c in clusters.values()))
            session = asyncio.create_task(_run_multikueue(args, config, paths, clusters, stop), name="kadmit")
            first = await first_of(session, *(c.wait() for c in clusters.values()))
            if first > 0:
                await _abandon(session)
                raise CommandError(list(clusters.values())[first - 1].death())
            try:
                session.result()
            except TimeoutError:
                raise CommandError(
                    "kadmit did not become ready within 60s on every cluster (a webhook certificate "
                    "is not trusted, or a worker cannot be reached)"
                ) from None
    print("kadmit local: stopped", file=sys.stderr, flush=True)
    return 0


async def _run_multikueue(
    args: argparse.Namespace, config: Any, paths: dict[str, str], clusters: dict[str, ClusterProcess],
    stop: asyncio.Event,
) -> None:
    """kadmit on every cluster at once, the workers' queues, the manager's MultiKueue setup; the
    ready lines once the manager reaches every worker; then wait."""
    from pathlib import Path

    from kadmit.checks.multikueue import MultiKueueCheck
    from kadmit.controller import local_setup

    async with contextlib.AsyncExitStack() as stack:
        entered: dict[str, tuple[Client, KadmitApp]] = {}

        async def enter(name: str) -> None:
            entered[name] = await stack.enter_async_context(
                kadmit_on(paths[name], config, owns_process=name == "manager"))

        async with asyncio.TaskGroup() as group:  # one fails: the others stop starting
            for name in paths:
                group.create_task(enter(name))
        workers = {name: await asyncio.to_thread(Path(path).read_text)
                   for name, path in paths.items() if name != "manager"}
        for name in workers:
            if not args.no_samples:
                await local_setup.install_samples(entered[name][0])
        kube, app = entered["manager"]
        await local_setup.install_multikueue(kube, config.namespace, workers, samples=not args.no_samples)
        plugins = app.checks.plugins if app.checks else []
        plugin = next((p for p in plugins if isinstance(p, MultiKueueCheck)), None)
        if plugin is not None:
            def connected() -> bool:
                return all(plugin.workers.get(name) is not None and plugin.workers[name].connected
                           for name in workers)

            async with asyncio.timeout(60):
                await local_setup.wait_until(connected)
        for name, path in paths.items():
            role = "manager" if name == "manager" else "worker "
            print(f"kadmit local: {role} {name}: kubectl --kubeconfig {path} (API {clusters[name].url}, "
                  f"metrics http://127.0.0.1:{entered[name][1].metrics_port}/metrics)", flush=True)
        print(f"kadmit local: ready; MultiKueue manager with {len(workers)} worker(s): "
              "submit to LocalQueue default/default on the manager", flush=True)
        print(engine_line(), flush=True)
        await stop.wait()


@contextlib.asynccontextmanager
async def api_server(args: argparse.Namespace) -> AsyncIterator[ClusterProcess]:
    """The API server child, started and ready (its failure to start is this command's error)."""
    from kadmit.controller.cluster_process import ClusterExited, ClusterProcess

    try:
        async with ClusterProcess(cluster_arguments(args)) as cluster:
            yield cluster
    except ClusterExited as exc:
        raise CommandError(str(exc), exc.code) from None


async def serve_api_only(args: argparse.Namespace) -> int:
    """The API server alone, until SIGINT/SIGTERM; exit 1 if it dies first."""
    with stop_on_signals() as stop:
        async with api_server(args) as cluster:
            ready = f"kadmit local: API server ready at {cluster.url} (kubeconfig {args.kubeconfig})"
            print(ready, flush=True)
            if await first_of(stop.wait(), cluster.wait()) == 1:
                raise CommandError(cluster.death())
    print("kadmit local: stopped", file=sys.stderr, flush=True)
    return 0


async def serve_with_kadmit(args: argparse.Namespace, config: Any) -> int:
    """The whole local setup (see :mod:`kadmit.controller.local_setup`), until SIGINT/SIGTERM."""
    from kadmit.controller import local_setup
    from kadmit.controller.logs import setup_logging

    config = local_setup.local_configuration(config, manage_jobsets=args.config is None)
    with stop_on_signals() as stop:
        async with api_server(args) as cluster:
            setup_logging("warning")  # only once the server runs: its usage errors stay one line
            for handler in logging.getLogger().handlers:
                # Once the server is dead, kadmit's failing calls to it say nothing the one-line
                # report does not: they are dropped rather than scrolling it away (those logged
                # in the instant between its sockets closing and its death showing still pass).
                handler.addFilter(lambda _: cluster.alive())
            session = asyncio.create_task(_run_kadmit(args, config, cluster, stop), name="kadmit")
            if await first_of(session, cluster.wait()) == 1 or await _died_meanwhile(session, cluster):
                await _abandon(session)
                raise CommandError(cluster.death())
            try:
                session.result()
            except TimeoutError:
                raise CommandError(
                    "kadmit did not become ready within 60s (its webhook certificate is not trusted)"
                ) from None
    print("kadmit local: stopped", file=sys.stderr, flush=True)
    return 0


async def _run_kadmit(
    args: argparse.Namespace, config: Any, cluster: ClusterProcess, stop: asyncio.Event
) -> None:
    """Install kadmit's objects, run it on its ServiceAccount's token, print the ready line, wait."""
    from kadmit.controller import local_setup

    async with kadmit_on(args.kubeconfig, config) as (kube, app):
        if not args.no_samples:
            await local_setup.install_samples(kube)
        print(
            f"kadmit local: ready; kubeconfig {args.kubeconfig} "
            f"(API {cluster.url}, metrics http://127.0.0.1:{app.metrics_port}/metrics)",
            flush=True,
        )
        print(f"kadmit local: manages {', '.join(app.manager.managed_kind_names())}", flush=True)
        print(engine_line(), flush=True)
        await stop.wait()


ENGINE_LINE = "kadmit local: engine "
"""How the line after the ready line begins (the benches read the build from it)."""


def engine_line() -> str:
    """Which build of the engine runs: an editable install's is interpreted, slower than the
    compiled one the wheel and the image ship, so a benchmark's figure depends on it."""
    from kadmit.engine import COMPILED

    if COMPILED:
        return ENGINE_LINE + "compiled by mypyc"
    return ENGINE_LINE + "interpreted (an editable install; the wheel and the image compile it)"


@contextlib.asynccontextmanager
async def kadmit_on(
    kubeconfig: str, config: Any, *, owns_process: bool = True
) -> AsyncIterator[tuple[Client, KadmitApp]]:
    """kadmit on the cluster of ``kubeconfig``, ready: its CRDs, namespace, ServiceAccount and RBAC
    installed, kadmit running on that ServiceAccount's token, its webhooks and visibility routed
    and trusted. Yields the admin client and the app; stops kadmit on the way out."""
    from kadmit.controller import collector, local_setup
    from kadmit.controller.app import KadmitApp
    from kadmit.kube import Client

    if owns_process:
        collector.configure()  # before the manifests are parsed: no full collections meanwhile
    async with await Client.connect(kubeconfig) as kube:
        await local_setup.install_crds(kube)
        await local_setup.ensure_namespace(kube, config.namespace)
        await local_setup.ensure_service_account(kube, config.namespace)
        await local_setup.install_rbac(kube, config.namespace)
        token = await local_setup.service_account_token(kube, config.namespace)
        as_kadmit = local_setup.kubeconfig_with_token(kubeconfig, token)
        async with await Client.from_kubeconfig_dict(as_kadmit) as kadmit_client:
            # local_configuration: only the local API server may reach kadmit's servers.
            app = KadmitApp(kadmit_client, config,
                            controller_username=local_setup.controller_username(config.namespace),
                            owns_process=owns_process)
            await app.start()
            try:
                await local_setup.route_webhook_service(
                    kube, config.namespace, config.webhook_service_name, app.webhook_port
                )
                await local_setup.install_webhooks(kube, config.namespace, config.webhook_service_name,
                                                   config.frameworks)
                if app.visibility_port is not None:
                    await local_setup.install_visibility(kube, config.namespace, app.visibility_port)
                async with asyncio.timeout(60):
                    await local_setup.wait_until(app.ready)
                yield kube, app
            finally:
                await app.stop()


async def first_of(*waits: Any) -> int:
    """Wait for the first of ``waits`` (coroutines or tasks) to finish; its index. The others are
    cancelled, except tasks that were passed in as tasks (their owner decides)."""
    tasks = [w if isinstance(w, asyncio.Task) else asyncio.ensure_future(w) for w in waits]
    owned = [t for t, w in zip(tasks, waits, strict=True) if t is not w]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in owned:
            task.cancel()
        await asyncio.gather(*owned, return_exceptions=True)
    return next(i for i, task in enumerate(tasks) if task in done)


async def _died_meanwhile(session: asyncio.Task[None], cluster: ClusterProcess) -> bool:
    """Whether kadmit failed because the server died: the failure (nothing answers) can be seen a
    moment before the child's exit is."""
    if session.cancelled() or session.exception() is None:
        return False
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(2):
            await cluster.wait()
    return not cluster.running


async def _abandon(session: asyncio.Task[None]) -> None:
    """Stop kadmit (the server is gone: its calls fail at once), ignoring how it ends."""
    session.cancel()
    with contextlib.suppress(BaseException):
        await session
