"""``python -m kadmit.localcluster``: the embedded API server and simulated cluster as a process.

    python -m kadmit.localcluster --kubeconfig PATH [--host ADDR] [--port N] [--token TOKEN]
        [--history-window N] [--event-ttl SECONDS] [--nodes FILE | --no-nodes]
        [--pool-label KEY]... [--faults FILE] [--until-stdin-closes]

It serves HTTPS with a throw-away CA and asks for a bearer token, as a real API server does;
writes a kubeconfig holding the CA and the admin token; runs the simulated nodes and controllers
(the default pools, or ``--nodes FILE``; none with ``--no-nodes``); prints one line on stdout
once it serves::

    localcluster: API server ready at https://127.0.0.1:40123 (kubeconfig /tmp/kubeconfig)

and serves until SIGINT or SIGTERM, then exits 0. Errors are one line on stderr,
``localcluster: error: ...``: exit code 2 when the command line is wrong, 1 when starting fails
(the port is in use, the ``--nodes`` or ``--faults`` file cannot be read or used, the kubeconfig
path is a directory). Nothing is written before the options are known to be usable.

``--faults FILE`` puts a :class:`~kadmit.localcluster.faults.FaultInjector` in front of the
server, its knobs set from the plan in the file (:func:`~kadmit.localcluster.faults.load_plan`)
for the life of the process; on exit one line on stderr says what was injected,
``localcluster: faults injected: {...}`` (JSON).

It is its own process so that it has a core of its own (``kadmit local`` runs it as a child),
and it knows nothing of what runs on it: ``--pool-label KEY`` is how a user of the simulated
nodes gets a label its selectors name, and ``--until-stdin-closes`` is how a supervisor makes
sure the server never outlives it (it holds the write end of the child's stdin).
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import gc
import json
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

from kadmit.localcluster.builtin import validate_metadata
from kadmit.localcluster.cluster import LocalCluster
from kadmit.localcluster.eventttl import DEFAULT_TTL
from kadmit.localcluster.faults import FaultInjector, FaultPlanError, load_plan
from kadmit.localcluster.interfaces import ClusterAddon

PROG = "localcluster"
READY = "API server ready at"
EXIT_FAILURE = 1
EXIT_USAGE = 2


class StartError(Exception):
    """Why the server cannot start, in one line; ``code`` is the exit code."""

    def __init__(self, message: str, code: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.code = code


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (a supervisor relays it as its own)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog=PROG,
        description="Run the embedded Kubernetes API server (HTTPS, bearer tokens) with simulated nodes "
        "and controllers, and write a kubeconfig for kubectl. Stops on SIGINT or SIGTERM.",
    )
    parser.add_argument(
        "--kubeconfig", required=True, help="where to write the kubeconfig (the CA and the admin token)"
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port to listen on (default: any free port)")
    parser.add_argument(
        "--token", help="the admin's bearer token (written to the kubeconfig); default or '-': a random one"
    )
    parser.add_argument(
        "--history-window",
        type=int,
        default=10_000,
        help="watch events kept per resource for resuming watches (default 10000); older is 410 Gone",
    )
    parser.add_argument(
        "--event-ttl",
        type=float,
        default=DEFAULT_TTL,
        metavar="SECONDS",
        help="how long an Event lives after its last write, as kube-apiserver's --event-ttl (default 3600)",
    )
    nodes = parser.add_mutually_exclusive_group()
    nodes.add_argument(
        "--nodes", metavar="FILE", help="node pools YAML for the simulated nodes (default: 3 cpu, 2 gpu)"
    )
    nodes.add_argument(
        "--no-nodes", action="store_true", help="the API server only: no simulated nodes or controllers"
    )
    parser.add_argument(
        "--pool-label",
        metavar="KEY",
        action="append",
        default=[],
        help="also label each simulated node KEY=<its pool's name> (repeatable)",
    )
    parser.add_argument(
        "--faults",
        metavar="FILE",
        help="a fault plan (YAML): API errors, latency, hung requests, lost replies, 410s, cut watches",
    )
    parser.add_argument(
        "--until-stdin-closes",
        action="store_true",
        help="also stop when standard input reaches its end (for a supervisor holding a pipe to it)",
    )
    return parser


def check_usage(args: argparse.Namespace) -> None:
    """The option values that can be wrong whatever the machine: :class:`StartError` with code 2."""
    if not 0 <= args.port <= 65535:
        raise StartError(f"--port must be between 0 and 65535, got {args.port}", EXIT_USAGE)
    if args.history_window < 1:
        raise StartError(f"--history-window must be at least 1, got {args.history_window}", EXIT_USAGE)
    if not args.event_ttl > 0:
        raise StartError(f"--event-ttl must be positive, got {args.event_ttl:g}", EXIT_USAGE)
    if args.token not in (None, "-") and (not args.token or any(c.isspace() for c in args.token)):
        raise StartError("--token must be a non-empty string without whitespace", EXIT_USAGE)
    if args.pool_label and args.no_nodes:
        raise StartError("--pool-label labels the simulated nodes: not with --no-nodes", EXIT_USAGE)
    for key in args.pool_label:
        probe = {"metadata": {"name": "probe", "labels": {key: "pool"}}}
        if validate_metadata("", "nodes", probe):
            raise StartError(f"--pool-label {key!r} is not a valid label key", EXIT_USAGE)


def addons(args: argparse.Namespace) -> list[ClusterAddon]:
    """The simulated nodes and controllers the options ask for (their file read and checked now)."""
    if args.no_nodes:
        return []
    from kadmit.localcluster.sim import NodeConfigError, default_addons, default_config, load_config

    try:
        config = load_config(args.nodes) if args.nodes else default_config()
    except NodeConfigError as exc:
        raise StartError(f"--nodes {args.nodes}: {exc}") from None
    return default_addons(config.with_pool_labels(*args.pool_label))


def fault_injector(args: argparse.Namespace) -> FaultInjector | None:
    """The injector ``--faults FILE`` asks for, its plan read and checked now."""
    if not args.faults:
        return None
    try:
        plan = load_plan(args.faults)
    except FaultPlanError as exc:
        raise StartError(f"--faults {args.faults}: {exc}") from None
    injector = FaultInjector(seed=plan.seed)
    injector.apply(plan)
    return injector


def build_cluster(args: argparse.Namespace) -> tuple[LocalCluster, FaultInjector | None]:
    """The LocalCluster the options describe, and its fault injector if ``--faults`` asks for one;
    :class:`StartError` when they cannot work."""
    check_usage(args)
    target = Path(args.kubeconfig)
    if target.is_dir():
        raise StartError(f"--kubeconfig {target} is a directory")
    faults = fault_injector(args)
    cluster = LocalCluster(
        host=args.host,
        port=args.port,
        https=True,
        token=True if args.token in (None, "-") else args.token,
        kubeconfig=target,
        history_window=args.history_window,
        event_ttl=args.event_ttl,
        addons=addons(args),
        middlewares=[faults.middleware] if faults is not None else (),
        record_requests=0,  # a process of its own: nothing can read them
    )
    return cluster, faults


YOUNG_COLLECTION_THRESHOLD = 1_000
MIDDLE_COLLECTION_THRESHOLD = 10
NO_AUTOMATIC_FULL_COLLECTION = 2**31 - 1  # the oldest generation's threshold, a C int
FULL_COLLECTION_EVERY_S = 3600.0


def collect_garbage_quickly() -> None:
    """Short pauses for the server's event loop, whose every pause delays every client waiting.

    A full collection walks every object the store holds (225 ms with a baseline scalability run's
    Workloads), so none is automatic: what exists once the server serves is frozen, and
    :func:`collect_everything_periodically` collects everything once in a while. A young
    collection walks what was made since the last one and still lives; CPython starts one on net
    allocations, which barely move while stored objects replace their previous versions, so the
    young generation grows in between: at 10,000 its middle collections took up to 86 ms; at
    1,000 young collections take about 1 ms and middle ones at most 7 ms.
    """
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, MIDDLE_COLLECTION_THRESHOLD, NO_AUTOMATIC_FULL_COLLECTION)
    gc.freeze()


async def collect_everything_periodically(every: float = FULL_COLLECTION_EVERY_S) -> None:
    """The cyclic garbage that reached the oldest generation is freed here, frozen or not."""
    while True:
        await asyncio.sleep(every)
        gc.unfreeze()
        gc.collect()
        gc.freeze()


async def serve(cluster: LocalCluster, *, until_stdin_closes: bool = False,
                faults: FaultInjector | None = None) -> None:
    """Start ``cluster``, print the ready line, serve until SIGINT/SIGTERM (or stdin's end)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await cluster.start()
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            where = f"{cluster.host}:{cluster.port}"
            raise StartError(f"cannot listen on {where}: address already in use") from None
        raise StartError(f"cannot start the API server: {exc.strerror or exc}") from None
    collect_garbage_quickly()
    collecting = asyncio.create_task(collect_everything_periodically())
    try:
        if until_stdin_closes:
            await _stop_at_end_of_stdin(stop)
        print(f"{PROG}: {READY} {cluster.url} (kubeconfig {cluster.kubeconfig})", flush=True)
        await stop.wait()
    finally:
        collecting.cancel()
        await cluster.stop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        if faults is not None:
            counts = json.dumps(faults.counts.as_dict())
            print(f"{PROG}: faults injected: {counts}", file=sys.stderr, flush=True)


class _SetOnEnd(asyncio.Protocol):
    def __init__(self, stop: asyncio.Event) -> None:
        self.stop = stop

    def connection_lost(self, exc: Exception | None) -> None:
        self.stop.set()


async def _stop_at_end_of_stdin(stop: asyncio.Event) -> None:
    """Set ``stop`` when stdin ends: the supervisor that holds its other end is gone."""
    loop = asyncio.get_running_loop()
    await loop.connect_read_pipe(lambda: _SetOnEnd(stop), sys.stdin)


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop where it is installed: every request and watch event crosses TLS, and
    asyncio's own TLS transport is Python code on each read and write (uvloop took 6 to 10 % off the
    server's CPU per admission in kadmit's scalability bench). ``KADMIT_EVENT_LOOP=asyncio``
    (which ``kadmit local`` passes on) keeps the standard library's loop."""
    choice = os.environ.get("KADMIT_EVENT_LOOP", "").strip().lower()
    if choice not in ("", "uvloop", "asyncio"):
        raise StartError(f"KADMIT_EVENT_LOOP must be uvloop or asyncio, not {choice!r}", EXIT_USAGE)
    if choice == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        if choice == "uvloop":
            raise StartError("KADMIT_EVENT_LOOP=uvloop, but uvloop is not installed") from None
        return None
    return uvloop.new_event_loop


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        factory = loop_factory()
        cluster, faults = build_cluster(args)
        logging.basicConfig(level=logging.WARNING, format=f"{PROG}: %(levelname)s %(name)s: %(message)s")
        with asyncio.Runner(loop_factory=factory) as runner:
            runner.run(serve(cluster, until_stdin_closes=args.until_stdin_closes, faults=faults))
    except StartError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr, flush=True)
        return exc.code
    print(f"{PROG}: stopped", file=sys.stderr, flush=True)
    return 0
