"""``kadmit run``: kadmit against any cluster (the Deployment's command, or a laptop's kubeconfig).

    kadmit run [--kubeconfig PATH] [--config FILE]

Without ``--kubeconfig`` it uses the in-cluster service account when it runs in a pod, else
``$KUBECONFIG`` or ``~/.kube/config``, as kubectl does.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
from typing import Any

from controller.cli import CommandError


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "run",
        help="run kadmit against a cluster",
        description="Run kadmit's control loops, webhooks, metrics and health probes against a Kubernetes "
        "cluster until SIGINT or SIGTERM.",
    )
    parser.add_argument(
        "--kubeconfig", help="kubeconfig to use (default: in-cluster, $KUBECONFIG or ~/.kube/config)"
    )
    parser.add_argument(
        "--config", help="a Kueue Configuration file (config.kueue.x-k8s.io/v1beta2 or v1beta1)"
    )
    parser.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="log level (default info); logs are JSON lines on stderr",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from controller.config import ConfigError, load
    from controller.logs import setup_logging

    try:
        config = load(args.config)
    except ConfigError as exc:
        raise CommandError(str(exc)) from None
    if args.kubeconfig and not os.path.isfile(args.kubeconfig):
        raise CommandError(f"--kubeconfig {args.kubeconfig}: no such file")
    setup_logging(args.log_level)
    return asyncio.run(_run(config, args.kubeconfig))


async def api_client_for(kubeconfig: str | None) -> Any:
    """A kubernetes-asyncio ApiClient: from the kubeconfig, or in-cluster."""
    from kubernetes_asyncio import client, config

    configuration = client.Configuration()
    try:
        if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        else:
            await config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    except config.ConfigException as exc:
        raise CommandError(f"cannot load the cluster configuration: {exc}") from None
    return client.ApiClient(configuration)


async def _run(config: Any, kubeconfig: str | None) -> int:
    from controller.app import BindError, KadmitApp, pod_identity

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with await api_client_for(kubeconfig) as api_client:
        try:
            app = KadmitApp(api_client, config, identity=pod_identity())
        except BindError as exc:
            raise CommandError(str(exc)) from None
        try:
            await app.start()
        except OSError as exc:
            await app.stop()
            raise CommandError(f"cannot listen: {exc.strerror or exc}") from None
        try:
            await stop.wait()
        finally:
            await app.stop()
    return 0
