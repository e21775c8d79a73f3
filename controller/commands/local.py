"""``kadmit local``: run the embedded Kubernetes API server (and, later, kadmit beside it).

``kadmit local --api-only --kubeconfig PATH`` starts just the API server, writes a kubeconfig
for it, prints one ready line with its URL, and serves until SIGINT or SIGTERM.

The cluster is built by :func:`build_cluster` from the parsed arguments, so options that add
simulated controllers (nodes, a Job runtime, ...) only need to add their arguments in
:func:`add_arguments` and their add-ons in :func:`addons_from_args`.
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from controller.cli import CommandError

if TYPE_CHECKING:
    from localcluster.cluster import LocalCluster
    from localcluster.interfaces import ClusterAddon


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
    parser.add_argument("--kubeconfig", required=True, help="where to write the kubeconfig for the server")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port to listen on (default: any free port)")
    parser.add_argument(
        "--https", action="store_true", help="serve HTTPS with a throw-away CA (inlined in the kubeconfig)"
    )
    parser.add_argument(
        "--token",
        help="require this bearer token (written to the kubeconfig); '-' makes up a random one",
    )
    parser.add_argument(
        "--history-window",
        type=int,
        default=10_000,
        help="watch events kept per resource for resuming watches (default 10000); older is 410 Gone",
    )


def addons_from_args(args: argparse.Namespace) -> list[ClusterAddon]:
    """The add-ons the arguments ask for (none yet: simulated controllers register here)."""
    return []


def build_cluster(args: argparse.Namespace) -> LocalCluster:
    """The LocalCluster the arguments describe (validated: bad values raise :class:`CommandError`)."""
    from localcluster.cluster import LocalCluster

    if not 0 <= args.port <= 65535:
        raise CommandError(f"--port must be between 0 and 65535, got {args.port}")
    if args.history_window < 1:
        raise CommandError(f"--history-window must be at least 1, got {args.history_window}")
    target = Path(args.kubeconfig)
    if target.is_dir():
        raise CommandError(f"--kubeconfig {target} is a directory")
    token: str | bool | None = True if args.token == "-" else args.token
    return LocalCluster(
        host=args.host,
        port=args.port,
        https=args.https,
        token=token,
        kubeconfig=target,
        history_window=args.history_window,
        addons=addons_from_args(args),
    )


def run(args: argparse.Namespace) -> int:
    if not args.api_only:
        raise CommandError("kadmit local currently runs the API server only: pass --api-only")
    cluster = build_cluster(args)
    return asyncio.run(serve(cluster))


async def serve(cluster: LocalCluster) -> int:
    """Start ``cluster``, print the ready line, and wait for SIGINT/SIGTERM."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await cluster.start()
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise CommandError(
                f"cannot listen on {cluster.host}:{cluster.port}: address already in use"
            ) from None
        raise CommandError(f"cannot start the API server: {exc.strerror or exc}") from None
    try:
        print(
            f"kadmit local: API server ready at {cluster.url} (kubeconfig {cluster.kubeconfig})", flush=True
        )
        await stop.wait()
    finally:
        await cluster.stop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    print("kadmit local: stopped", file=sys.stderr, flush=True)
    return 0
