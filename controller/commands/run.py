"""``kadmit run``: kadmit against any cluster (the Deployment's command, or a laptop's kubeconfig).

    kadmit run [--kubeconfig PATH] [--config FILE] [--cert-mode secret|files] [--cert-dir DIR]
               [--no-metrics-secure]

Without ``--kubeconfig`` it uses the in-cluster service account when it runs in a pod, else
``$KUBECONFIG`` or ``~/.kube/config``, as kubectl does.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from kadmit.controller import cli


def register(subparsers: Any) -> None:
    parser = cli.add_command(
        subparsers, "run", run, help="run kadmit against a cluster",
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
        "--cert-mode",
        choices=["secret", "files"],
        help="the webhook certificate: issued by kadmit into its Secret (secret), or read from --cert-dir, "
        "e.g. mounted by cert-manager (files); default: from internalCertManagement.enable",
    )
    parser.add_argument(
        "--cert-dir", help="where tls.crt and tls.key are, with --cert-mode files (default: webhook.certDir)"
    )
    parser.add_argument(
        "--metrics-secure",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="serve /metrics on HTTPS to callers whose token a TokenReview accepts and whom a "
        "SubjectAccessReview allows get on /metrics (default); --no-metrics-secure serves plain HTTP",
    )
    cli.add_log_level_argument(parser, logs="logs are JSON lines on stderr")


def run(args: argparse.Namespace) -> int:
    from kadmit.controller.config import ConfigError, load
    from kadmit.controller.logs import setup_logging

    try:
        config = load(args.config)
    except ConfigError as exc:
        raise cli.CommandError(str(exc)) from None
    if args.kubeconfig and not os.path.isfile(args.kubeconfig):
        raise cli.CommandError(f"--kubeconfig {args.kubeconfig}: no such file")
    if args.cert_dir and args.cert_mode == "secret":
        raise cli.CommandError("--cert-dir is read only with --cert-mode files", cli.EXIT_USAGE)
    setup_logging(args.log_level)
    return cli.run_async(_run(config, args.kubeconfig, args.cert_mode, args.cert_dir, args.metrics_secure))


async def _run(config: Any, kubeconfig: str | None, cert_mode: str | None, cert_dir: str | None,
               metrics_secure: bool = True) -> int:
    from kadmit.controller.app import BindError, KadmitApp, pod_identity
    from kadmit.controller.manager import StartFailed
    from kadmit.kube import ApiError, ApiUnreachable

    with cli.stop_on_signals() as stop:
        async with await cli.connect(kubeconfig) as client:
            try:
                app = KadmitApp(
                    client, config, identity=pod_identity(), cert_mode=cert_mode, cert_dir=cert_dir,
                    owns_process=True,
                    metrics_secure=metrics_secure,
                )
            except BindError as exc:
                raise cli.CommandError(str(exc)) from None
            try:
                await app.start()
            except ApiUnreachable as exc:
                await app.stop()
                raise cli.CommandError(f"cannot reach the cluster: {exc}") from None
            except ApiError as exc:
                await app.stop()
                raise cli.CommandError(f"the cluster refused a request: {exc}") from None
            except OSError as exc:
                await app.stop()
                raise cli.CommandError(f"cannot listen: {exc.strerror or exc}") from None
            except StartFailed as exc:
                await app.stop()
                raise cli.CommandError(str(exc)) from None
            try:
                await stop.wait()
            finally:
                await app.stop()
    return 0
